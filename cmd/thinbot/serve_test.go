package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/mattermost"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemattermost"
)

func TestResolveChannelNames(t *testing.T) {
	mm := fakemattermost.New(t)
	ops := mm.AddChannel("ops", mm.Bot.ID)
	mm.AddChannel("hidden") // the bot is not a member
	a, err := mattermost.New(mattermost.Config{URL: mm.URL, Token: mm.Bot.Token,
		CallbackURL: "http://127.0.0.1:1/cb", ActionSecret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	channels := map[string]bot.Channel{}
	if err := resolveChannels(t.Context(), a, []namedChannel{{name: "#ops", ch: bot.Channel{Workspace: "/srv/ops"}}}, channels); err != nil {
		t.Fatal(err)
	}
	if channels[ops].Workspace != "/srv/ops" {
		t.Errorf("channels = %+v, want %s configured", channels, ops)
	}
	err = resolveChannels(t.Context(), a, []namedChannel{{name: "hidden"}}, map[string]bot.Channel{})
	if err == nil || !strings.Contains(err.Error(), `channel "hidden"`) {
		t.Errorf("an unresolvable name = %v", err)
	}
	err = resolveChannels(t.Context(), a, []namedChannel{{name: "ops"}}, map[string]bot.Channel{ops: {}})
	if err == nil || !strings.Contains(err.Error(), "also configured by its id") {
		t.Errorf("a channel configured twice = %v", err)
	}
}

// A channel given by id is checked for the bot's membership like a name
// is: a forgotten "add the bot to the channel" stops the start with a clear
// error instead of serving ready and deaf.
func TestCheckChannelIDs(t *testing.T) {
	mm := fakemattermost.New(t)
	ops := mm.AddChannel("ops", mm.Bot.ID)
	hidden := mm.AddChannel("hidden") // the bot is not a member
	a, err := mattermost.New(mattermost.Config{URL: mm.URL, Token: mm.Bot.Token,
		CallbackURL: "http://127.0.0.1:1/cb", ActionSecret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	if err := resolveChannels(t.Context(), a, nil, map[string]bot.Channel{ops: {}, "*": {}}); err != nil {
		t.Errorf("a channel the bot is in: %v", err)
	}
	for _, id := range []string{hidden, "nosuchchannelnosuchchannel"} {
		err = resolveChannels(t.Context(), a, nil, map[string]bot.Channel{ops: {}, id: {}})
		if err == nil || !strings.Contains(err.Error(), "the bot is not a member of channel "+id) || !strings.Contains(err.Error(), "/invite @thinbot") {
			t.Errorf("channel %s: %v", id, err)
		}
	}
}

// TestChainHeadIsDurable: the head serve logs for anchoring is the last
// durable event, not one AppendBuffered has not synced yet (a machine
// restart may lose that seq and the chain reuse it for another event, and
// the anchor would then look like tampering).
func TestChainHeadIsDurable(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	durable, err := db.Append(t.Context(), store.Event{Session: "s", Type: "user_message"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.AppendBuffered(t.Context(), store.Event{Session: "s", Type: "tool_result"}); err != nil {
		t.Fatal(err)
	}
	if seq, hash := chainHead(db); seq != durable[0].Seq || hash != durable[0].Hash {
		t.Errorf("chainHead = %d %.12s, want the durable head %d %.12s", seq, hash, durable[0].Seq, durable[0].Hash)
	}
}

// A daemon whose open fails (here: the bot is not in its channel) releases
// what it had acquired when closed: the store can be opened again at once.
func TestDaemonCloseAfterAFailedOpen(t *testing.T) {
	mm := fakemattermost.New(t)
	hidden := mm.AddChannel("hidden") // the bot is not a member
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(mm.Bot.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &daemonConfig{Platform: "mattermost", StateDir: filepath.Join(dir, "state"), Sandbox: "off", Listen: "127.0.0.1:0",
		Channels: []channelConfig{{ID: hidden, Workspace: dir, AnyMember: true}}}
	c.Model.BaseURL, c.Model.Model = "http://127.0.0.1:9/v1", "m"
	c.Mattermost.URL, c.Mattermost.TokenFile, c.Mattermost.CallbackURL = mm.URL, token, "http://127.0.0.1:1/cb"
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	d := &daemon{c: c, logger: slog.New(slog.DiscardHandler)}
	err := d.open(t.Context(), e, filepath.Join(dir, "c.yaml"))
	if err == nil || !strings.Contains(err.Error(), "the bot is not a member of channel "+hidden) {
		t.Fatalf("open = %v, want the membership error", err)
	}
	if d.db == nil {
		t.Fatal("open failed before it opened the store: the test checks nothing")
	}
	if err := d.close(); err != nil {
		t.Errorf("close: %v", err)
	}
	db, err := store.Open(filepath.Join(c.StateDir, "events.db"), &store.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("the store after close: %v", err)
	}
	db.Close()
}

// The daemon asks python3 for its version once for all its workspaces
// (each loads its skills): here two, each with a skill that needs python3,
// against a python3 on PATH that counts its runs.
func TestDaemonProbesPythonOnce(t *testing.T) {
	bin := t.TempDir()
	runs := filepath.Join(bin, "runs")
	fake := "#!/bin/sh\necho run >> " + runs + "\necho 3 11\n"
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	mm := fakemattermost.New(t)
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte(mm.Bot.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &daemonConfig{Platform: "mattermost", StateDir: filepath.Join(dir, "state"), Sandbox: "off", Listen: "127.0.0.1:0"}
	for _, name := range []string{"one", "two"} {
		ws := filepath.Join(dir, name)
		sk := filepath.Join(ws, "skills", "py-"+name)
		if err := os.MkdirAll(sk, 0o755); err != nil {
			t.Fatal(err)
		}
		md := "---\nname: py-" + name + "\ndescription: Needs python.\nrequires:\n  python: \">=3.8\"\n---\nBody.\n"
		if err := os.WriteFile(filepath.Join(sk, "SKILL.md"), []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Channels = append(c.Channels, channelConfig{ID: mm.AddChannel(name, mm.Bot.ID), Workspace: ws, AnyMember: true})
	}
	c.Model.BaseURL, c.Model.Model = "http://127.0.0.1:9/v1", "m"
	c.Mattermost.URL, c.Mattermost.TokenFile, c.Mattermost.CallbackURL = mm.URL, token, "http://127.0.0.1:1/cb"
	e := &env{stdout: io.Discard, stderr: io.Discard, getenv: func(string) string { return "" }}
	d := &daemon{c: c, logger: slog.New(slog.DiscardHandler)}
	err := d.open(t.Context(), e, filepath.Join(dir, "c.yaml"))
	if cerr := d.close(); cerr != nil {
		t.Errorf("close: %v", cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(d.agents) != 2 {
		t.Fatalf("%d agents, want one per workspace", len(d.agents))
	}
	for ws, ag := range d.agents {
		if s := ag.Skills(); len(s) != 1 || s[0].State != "loaded" {
			t.Errorf("%s: skills %+v; want its python skill loaded", ws, s)
		}
	}
	b, _ := os.ReadFile(runs)
	if n := strings.Count(string(b), "run\n"); n != 1 {
		t.Errorf("python3 ran %d times for two workspaces; want 1", n)
	}
}
