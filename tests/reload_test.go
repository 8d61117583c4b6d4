package tests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// The config reload of a running daemon (issue 31): SIGHUP and POST
// /-/reload re-read the config file; what can change takes effect, a key
// that needs a restart or a file that does not load keeps the running
// config, and every applied reload is in the chain.

// reloadToken is the bearer token of the rig's reload_token_file, whose
// name is "deployer".
const reloadToken = "0123456789abcdef-reload"

// TestReload drives one daemon through SIGHUP reloads: a channel newly
// enabled answers afterwards; a reload that also changes listen is refused
// with the key's name and leaves the channel list as it was; a broken file
// is kept out; an authenticated POST /-/reload applies, an
// unauthenticated one changes nothing; the chain holds exactly the applied
// reloads, with who, what changed and the file's hash.
func TestReload(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t)
	m := modelFunc(t, (&answerer{}).reply)
	dir := t.TempDir()
	tok := writeSecret(t, dir, "reload.tokens", "deployer "+reloadToken)
	r := newRig(t, chat, m.URL, rigOpts{Extra: "reload_token_file: " + tok + "\n"})
	lobby := chat.Lobby()
	first := chat.Mention("alice", lobby, "", "hello?")
	r.waitPost(lobby, first, "I am not enabled in this channel")
	start, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := r.get("/metrics"); code != http.StatusOK || !strings.Contains(body, "thinbot_config_last_reload_successful 1") {
		t.Fatalf("before any reload, /metrics: %d\n%s", code, grepLines(body, "thinbot_config_"))
	}

	// 1. SIGHUP with the lobby added: it answers afterwards.
	withLobby := strings.Replace(string(start), "channels:\n", "channels:\n  - id: "+lobby+"\n    workspace: "+r.ws+"\n    any_member_approves: true\n", 1)
	r.writeConfig(withLobby)
	r.hangup()
	r.waitRecorded("system:config", `"config_reloaded"`, `"by":"SIGHUP"`)
	r.waitReloaded(1)
	second := chat.Mention("alice", lobby, "", "now?")
	r.waitPost(lobby, second, "ANSWER(now?)")

	// 2. A reload that changes listen (and drops the lobby) is refused as
	// a whole: the log names the key, the lobby still answers, the
	// daemon still listens where it did.
	moved := strings.Replace(string(start), "listen: "+r.addr, "listen: "+freeAddr(t), 1)
	r.writeConfig(moved)
	r.hangup()
	r.waitFor("the refusal naming listen", func() bool {
		return strings.Contains(r.log.String(), "config reload failed") && strings.Contains(r.log.String(), "cannot change without a restart: listen")
	})
	third := chat.Mention("alice", lobby, "", "still?")
	r.waitPost(lobby, third, "ANSWER(still?)")
	if code, body := r.get("/metrics"); code != http.StatusOK || !strings.Contains(body, "thinbot_config_last_reload_successful 0") {
		t.Errorf("after a refused reload, /metrics: %d\n%s", code, grepLines(body, "thinbot_config_"))
	}

	// A workspace below /tmp that the sandbox was not started with needs
	// a restart: the sandbox binds such folders into each command's
	// private /tmp at start.
	fresh := filepath.Join(r.dir, "fresh")
	if err := os.Mkdir(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	r.writeConfig(strings.Replace(string(start), "channels:\n", "channels:\n  - id: "+lobby+"\n    workspace: "+fresh+"\n    any_member_approves: true\n", 1))
	r.hangup()
	r.waitFor("the refusal naming the new workspace", func() bool {
		return strings.Contains(r.log.String(), "cannot change without a restart: channels[0].workspace ("+fresh)
	})

	// 3. A file that does not parse is kept out the same way.
	r.writeConfig(string(start) + "channels: [\n")
	failures := strings.Count(r.log.String(), "config reload failed")
	r.hangup()
	r.waitFor("the broken file's refusal", func() bool { return strings.Count(r.log.String(), "config reload failed") > failures })
	fourth := chat.Mention("alice", lobby, "", "and now?")
	r.waitPost(lobby, fourth, "ANSWER(and now?)")

	// 4. POST /-/reload: with the token but the broken file, 500 (and in
	// the chain as the token's name); refused without the token or with
	// a wrong one, applied with it (the start config again: the lobby is
	// gone).
	if code, body := r.postReload("Bearer " + reloadToken); code != http.StatusInternalServerError {
		t.Errorf("POST /-/reload of a broken file: %d %s, want 500", code, body)
	}
	r.writeConfig(string(start))
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Basic " + reloadToken} {
		if code, body := r.postReload(auth); code != http.StatusUnauthorized {
			t.Errorf("POST /-/reload with Authorization %q: %d %s, want 401", auth, code, body)
		}
	}
	code, body := r.postReload("Bearer " + reloadToken)
	if code != http.StatusOK || !strings.Contains(body, "changed: channels") {
		t.Fatalf("POST /-/reload with the token: %d %s", code, body)
	}
	if code, body := r.get("/metrics"); code != http.StatusOK || !strings.Contains(body, "thinbot_config_last_reload_successful 1") {
		t.Errorf("after a good reload, /metrics: %d\n%s", code, grepLines(body, "thinbot_config_"))
	}
	fifth := chat.Mention("alice", lobby, "", "gone?")
	// Answering in ops proves the lobby's mention was handled (delivery
	// is in order) and got no answer: the lobby is off again (and was
	// told so within the hour).
	ping := chat.Mention("alice", chat.Ops(), "", "ping")
	r.waitPost(chat.Ops(), ping, "ANSWER(ping)")
	r.stop()
	if posts := chat.BotPosts(lobby, fifth); len(posts) != 0 {
		t.Errorf("the lobby answered after the reload that removed it: %v", posts)
	}

	// The chain: the two applied reloads; the four refused or failed
	// ones apart, with who asked and why; nothing of the unauthorised
	// requests.
	var got, refused []map[string]any
	var actors, refusedBy []string
	for _, ev := range chainEvents(t, r.stateDir) {
		if ev.Type != "config_reloaded" && ev.Type != "config_reload_refused" {
			continue
		}
		if ev.Session != "system:config" {
			t.Errorf("%s in session %q", ev.Type, ev.Session)
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "config_reload_refused" {
			refused = append(refused, p)
			refusedBy = append(refusedBy, ev.Actor)
			continue
		}
		got = append(got, p)
		actors = append(actors, ev.Actor)
	}
	wantRefused := []struct{ by, actor, err string }{
		{"SIGHUP", "system", "cannot change without a restart: listen"},
		{"SIGHUP", "system", "cannot change without a restart: channels[0].workspace (" + fresh},
		{"SIGHUP", "system", "config"},
		{"deployer", "user:deployer", "config"},
	}
	if len(refused) != len(wantRefused) {
		t.Errorf("config_reload_refused events: %d (%v), want %d", len(refused), refused, len(wantRefused))
	} else {
		for i, w := range wantRefused {
			p := refused[i]
			if e, _ := p["error"].(string); p["by"] != w.by || refusedBy[i] != w.actor || !strings.Contains(e, w.err) || p["file"] != r.cfgPath || p["sha256"] == "" {
				t.Errorf("refused reload %d: %v (actor %s), want by %s actor %s, error with %q", i, p, refusedBy[i], w.by, w.actor, w.err)
			}
		}
		if ch, _ := refused[0]["changed"].([]any); len(ch) != 2 || ch[0] != "channels" || ch[1] != "listen" {
			t.Errorf("the refused reload that moved listen names changed %v, want [channels listen]", refused[0]["changed"])
		}
	}
	if len(got) != 2 {
		t.Fatalf("config_reloaded events: %d (%v), want 2: the refused and the broken reload are not applied", len(got), got)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	want := []struct{ by, actor, sha, prev string }{
		{"SIGHUP", "system", sum(withLobby), sum(string(start))},
		{"deployer", "user:deployer", sum(string(start)), sum(withLobby)},
	}
	for i, w := range want {
		p := got[i]
		if p["by"] != w.by || actors[i] != w.actor || p["sha256"] != w.sha || p["previous_sha256"] != w.prev || p["file"] != r.cfgPath {
			t.Errorf("reload %d: %v (actor %s), want by %s actor %s sha256 %s previous %s", i, p, actors[i], w.by, w.actor, w.sha, w.prev)
		}
		if ch, _ := p["changed"].([]any); len(ch) != 1 || ch[0] != "channels" {
			t.Errorf("reload %d changed %v, want [channels]", i, p["changed"])
		}
	}
}

// writeConfig replaces the rig's config file (mode 0600).
func (r *rig) writeConfig(cfg string) {
	r.t.Helper()
	tmp := r.cfgPath + ".new"
	if err := os.WriteFile(tmp, []byte(cfg), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.cfgPath); err != nil {
		r.t.Fatal(err)
	}
}

// waitReloaded waits for the nth "config reloaded" log line: it follows
// the new config taking effect, which follows its chain record.
func (r *rig) waitReloaded(n int) {
	r.t.Helper()
	r.waitFor("the reload to take effect", func() bool { return strings.Count(r.log.String(), `"msg":"config reloaded"`) >= n })
}

// hangup sends thinbot SIGHUP; it must keep running.
func (r *rig) hangup() {
	r.t.Helper()
	if err := r.proc.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		r.t.Fatalf("SIGHUP: %v", err)
	}
}

// postReload sends POST /-/reload with the Authorization header auth
// ("" for none).
func (r *rig) postReload(auth string) (int, string) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), http.MethodPost, "http://"+r.addr+"/-/reload", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatalf("POST /-/reload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestReloadKeepsRunsUnderWay: a run under way when the config is reloaded
// keeps the configuration it started with, here the approvers of its open
// request; the next run gets the new one.
func TestReloadKeepsRunsUnderWay(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t)
	m := fakemodel.Start(t, run("touch one.txt"), fakemodel.Reply{Content: "done one"},
		run("touch two.txt"), fakemodel.Reply{Content: "done two"})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()
	first := chat.Mention("alice", ops, "", "first")
	req := r.waitButtons(ops, first)
	r.waitRecorded(r.session(ops, first), `"approval_posted"`)

	// bob is no approver any more, carol is.
	cfg, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	old := "approvers: [" + chat.UserID("alice") + ", " + chat.UserID("bob") + "]"
	if !strings.Contains(string(cfg), old) {
		t.Fatalf("the rig's config has no %q", old)
	}
	r.writeConfig(strings.Replace(string(cfg), old, "approvers: ["+chat.UserID("alice")+", "+chat.UserID("carol")+"]", 1))
	r.hangup()
	r.waitRecorded("system:config", `"config_reloaded"`, `"changed":["channels"]`)
	r.waitReloaded(1)

	chat.Click(t, ops, first, req.ID, "approve", "carol")
	if e := r.waitEphemeral("carol", 0); !strings.Contains(e, "not an approver") {
		t.Errorf("carol, an approver since the reload, decided the request of a run from before it: told %q", e)
	}
	chat.Click(t, ops, first, req.ID, "approve", "bob")
	r.waitPost(ops, first, "done one")

	// The next run of the same thread takes the new approvers.
	chat.Mention("alice", ops, first, "second")
	req = r.waitButtons(ops, first)
	r.waitRecorded(r.session(ops, first), `"approval_posted"`, req.ID)
	chat.Click(t, ops, first, req.ID, "approve", "bob")
	if e := r.waitEphemeral("bob", 0); !strings.Contains(e, "not an approver") {
		t.Errorf("bob, no approver since the reload, was told %q", e)
	}
	chat.Click(t, ops, first, req.ID, "approve", "carol")
	r.waitPost(ops, first, "done two")
	r.stop()
}

// TestUnitReloads: `systemctl reload thinbot` sends the daemon SIGHUP,
// which TestReload shows to reload the config.
func TestUnitReloads(t *testing.T) {
	unit := unitService(t, filepath.Join("..", "deploy", "thinbot.service"))
	if got := unit["ExecReload"]; len(got) != 1 || got[0] != "/bin/kill -HUP $MAINPID" {
		t.Errorf("deploy/thinbot.service ExecReload = %q, want /bin/kill -HUP $MAINPID", got)
	}
}

// TestReloadSkillsAndSchedules: a reload reads the skill folders again (a
// skill added to a configured dir gives its command) and starts the
// schedules the file now lists; the chain names both as changed although
// only the schedules key did.
func TestReloadSkillsAndSchedules(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t)
	skillsDir := t.TempDir()
	writeSkillFile(t, filepath.Join(skillsDir, "notes"), "---\nname: notes\ndescription: Team notes.\n---\nBody.\n")
	r := newRig(t, chat, "http://"+freeAddr(t)+"/v1", rigOpts{Extra: "skills_dirs: [" + skillsDir + "]\n"})
	ops := chat.Ops()
	root := chat.Mention("alice", ops, "", "/run hello")
	r.waitPost(ops, root, "There is no skill command")

	writeSkillFile(t, filepath.Join(skillsDir, "probe"), "---\nname: probe\ndescription: Probes.\nmetadata:\n  thinbot:\n    commands:\n"+
		"      - {name: hello, description: Say hello, command: 'echo hello-after-reload'}\n---\nProbes.\n")
	cfg, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	r.writeConfig(string(cfg) + "schedules:\n  - name: tick\n    cron: '@every 1s'\n    channel: " + ops + "\n    command: '!hello'\n")
	r.hangup()
	r.waitRecorded("system:config", `"config_reloaded"`, `"changed":["schedules","skills"]`)
	r.waitReloaded(1)
	chat.Mention("alice", ops, root, "/run hello")
	r.waitPost(ops, root, "hello-after-reload")
	r.waitRecorded("schedule:tick", `"run_finished"`)
	r.stop()
}

// TestReloadAlertRoutes: the alerts section reloads as the channels do. A
// route added by SIGHUP takes alerts afterwards, a removed one no longer
// does, and the token file is read again (a rotated token is the only one
// taken); a reload that moves the receiver's path or names another token
// file is refused (the listener and the sandbox took them at start) and
// recorded so, and the receiver serves on as it was.
func TestReloadAlertRoutes(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t)
	dir := t.TempDir()
	tokenFile := writeSecret(t, dir, "alerts.token", alertToken)
	ops := chat.Ops()
	route := func(name, alertname string) string {
		return "    - name: " + name + "\n      matchers: ['alertname=\"" + alertname + "\"']\n      channel: " + ops + "\n      investigate: false\n"
	}
	section := "alerts:\n  token_file: " + tokenFile + "\n  routes:\n"
	r := newRig(t, chat, "http://"+freeAddr(t)+"/v1", rigOpts{Extra: section + route("disk", "DiskFull")})
	start, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	send := func(token, alertname string) (int, string) {
		t.Helper()
		n++ // each delivery its own content: none is a duplicate of another
		body := fmt.Sprintf(`{"version":"4","groupKey":"group-%s","status":"firing","receiver":"thinbot","commonLabels":{"alertname":%q},"alerts":[{"status":"firing","labels":{"alertname":%q},"fingerprint":"f%d","startsAt":"2026-01-01T00:00:00Z"}]}`,
			alertname, alertname, alertname, n)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+r.addr+"/alerts", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := r.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, msg := send(alertToken, "CPUHigh"); code != http.StatusOK || !strings.Contains(msg, "no route matches") {
		t.Fatalf("CPUHigh before the reload: %d %s", code, msg)
	}

	// The cpu route in place of the disk route, and a rotated token.
	const rotated = "fedcba9876543210-rotated-alert-token"
	writeSecret(t, dir, "alerts.token", rotated)
	r.writeConfig(strings.Replace(string(start), route("disk", "DiskFull"), route("cpu", "CPUHigh"), 1))
	r.hangup()
	r.waitRecorded("system:config", `"config_reloaded"`, `"changed":["alerts"]`)
	r.waitReloaded(1)
	if code, msg := send(alertToken, "CPUHigh"); code != http.StatusUnauthorized {
		t.Errorf("the token from before the rotation: %d %s, want 401", code, msg)
	}
	if code, msg := send(rotated, "CPUHigh"); code != http.StatusOK || !strings.Contains(msg, "opened a thread") {
		t.Errorf("CPUHigh after the reload added its route: %d %s", code, msg)
	}
	if code, msg := send(rotated, "DiskFull"); code != http.StatusOK || !strings.Contains(msg, "no route matches") {
		t.Errorf("DiskFull after the reload removed its route: %d %s", code, msg)
	}
	cards := botRoots(chat, ops)
	if len(cards) != 1 || !strings.Contains(cards[0].Text, "CPUHigh") {
		t.Errorf("cards in the channel: %v, want the one of CPUHigh", cards)
	}

	// The receiver's path and its token file need a restart.
	cur, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	other := writeSecret(t, dir, "other.token", rotated)
	moved := strings.Replace(string(cur), "alerts:\n  token_file: "+tokenFile+"\n", "alerts:\n  path: /moved\n  token_file: "+other+"\n", 1)
	r.writeConfig(moved)
	r.hangup()
	r.waitRecorded("system:config", `"config_reload_refused"`, "cannot change without a restart: alerts.path, alerts.token_file")
	if code, msg := send(rotated, "CPUHigh"); code != http.StatusOK || strings.Contains(msg, "no route") {
		t.Errorf("after the refused reload, /alerts: %d %s", code, msg)
	}
	r.stop()
}
