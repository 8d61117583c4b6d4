package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

func TestAuditTimeline(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(agentcore.AlertPayload{GroupKey: "g", Status: "firing", Kind: "opened",
		Alerts: []agentcore.AlertRecord{{Status: "firing", Labels: map[string]string{"alertname": "DiskFull"}}}})
	u, _ := json.Marshal(map[string]string{"text": "what now?"})
	if _, err := db.Append(context.Background(),
		store.Event{Session: "mattermost/C1/R1", Type: agentcore.EvAlert, Actor: "alert:ops", Payload: p},
		store.Event{Session: "other", Type: agentcore.EvUserMessage, Actor: "user:U9", Payload: u},
		store.Event{Session: "mattermost/C1/R1", Type: agentcore.EvUserMessage, Actor: "user:U1 (alice)", Payload: u}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, args := range [][]string{
		{"audit", "timeline", "mattermost/C1/R1", "--db", path},
		{"audit", "timeline", "--db", path, "mattermost/C1/R1"},
		{"audit", "timeline", "mattermost/C1/R1", "--jsonl", filepath.Join(dir, "audit.jsonl")},
	} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if err := run(t.Context(), e, args); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		s := out.String()
		for _, want := range []string{"**Chain verified:** 3 events, head #3", "#1 `", "**alert opened this thread** (firing): `DiskFull`",
			"#3 `", "**message** from `user:U1 (alice)`: `what now?`", "2 of the session's 2 events listed"} {
			if !strings.Contains(s, want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, s)
			}
		}
		if strings.Contains(s, "U9") {
			t.Errorf("another session's event in the timeline:\n%s", s)
		}
	}
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	if err := run(t.Context(), e, []string{"audit", "timeline", "--db", path}); err == nil {
		t.Error("a timeline without a session")
	}
	// An unknown session is an error, from the store and from an export,
	// and prints no timeline.
	for _, args := range [][]string{{"--db", path}, {"--jsonl", filepath.Join(dir, "audit.jsonl")}} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		err := run(t.Context(), e, append([]string{"audit", "timeline", "mattermost/C1/NOPE"}, args...))
		if err == nil || !strings.Contains(err.Error(), `no session "mattermost/C1/NOPE"`) || out.Len() != 0 {
			t.Errorf("an unknown session %v: %v\n%s", args, err, out.String())
		}
	}
	// --part prints one part: the postmortem without hashes, or the
	// appendix alone.
	for part, tc := range map[string]struct{ has, hasNot string }{
		"postmortem": {"`alice` wrote: `what now?`", "Chain verified"},
		"appendix":   {"**Chain verified:**", "wrote:"},
	} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if err := run(t.Context(), e, []string{"audit", "timeline", "mattermost/C1/R1", "--db", path, "--part", part}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.has) || strings.Contains(out.String(), tc.hasNot) {
			t.Errorf("--part %s: want %q and not %q:\n%s", part, tc.has, tc.hasNot, out.String())
		}
	}
	if err := run(t.Context(), e, []string{"audit", "timeline", "mattermost/C1/R1", "--db", path, "--part", "hashes"}); !errors.Is(err, errUsage) {
		t.Errorf("--part hashes: %v", err)
	}
}

// TestAuditTimelineZone: `audit timeline --config` shows times in the
// session's channel's timezone, else the config's, else UTC as before;
// --timezone sets one, and a name that is no zone is a usage error.
func TestAuditTimelineZone(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 1, 2, 12, 0, 0, time.UTC)
	db, err := store.Open(filepath.Join(dir, "events.db"), &store.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := json.Marshal(map[string]string{"text": "what now?"})
	for _, s := range []string{"mattermost/C1/R1", "mattermost/C2/R1", "web/console/T1"} {
		if _, err := db.Append(context.Background(), store.Event{Session: s, Type: agentcore.EvUserMessage, Actor: "user:U1 (alice)", Payload: u}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	config := func(top string) string {
		p := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(p, []byte("platform: mattermost\nstate_dir: "+dir+"\n"+top+
			"channels:\n  - {id: C1, workspace: "+dir+"}\n  - {id: C2, workspace: "+dir+", timezone: Asia/Kolkata}\n"), 0o600)
		return p
	}
	plain, berlin := config(""), config("timezone: Europe/Berlin\n")
	for _, tc := range []struct {
		args       []string
		say, lines string
	}{
		{[]string{"mattermost/C1/R1", "--config", plain}, "Times are UTC.", "**2026-12-01**\n\n- 02:12:00 #1 `"},
		{[]string{"mattermost/C2/R1", "--config", plain}, "Times are `Asia/Kolkata` time", "**2026-12-01** (IST, UTC+05:30)\n\n- 07:42:00 #2 `"},
		{[]string{"mattermost/C1/R1", "--config", berlin}, "Times are `Europe/Berlin` time", "**2026-12-01** (CET, UTC+01:00)\n\n- 03:12:00 #1 `"},
		{[]string{"mattermost/C2/R1", "--config", berlin}, "Times are `Asia/Kolkata` time", "**2026-12-01** (IST, UTC+05:30)\n\n- 07:42:00 #2 `"},
		{[]string{"web/console/T1", "--config", berlin}, "Times are `Europe/Berlin` time", "**2026-12-01** (CET, UTC+01:00)\n\n- 03:12:00 #3 `"},
		{[]string{"mattermost/C2/R1", "--config", berlin, "--timezone", "America/New_York"}, "Times are `America/New_York` time",
			"**2026-11-30** (EST, UTC-05:00)\n\n- 21:12:00 #2 `"},
		{[]string{"mattermost/C1/R1", "--db", filepath.Join(dir, "events.db")}, "Times are UTC.", "**2026-12-01**\n\n- 02:12:00 #1 `"},
	} {
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if err := run(t.Context(), e, append([]string{"audit", "timeline"}, tc.args...)); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out.String())
		}
		if s := out.String(); !strings.Contains(s, tc.say) || !strings.Contains(s, tc.lines) {
			t.Errorf("%v: output lacks %q or %q:\n%s", tc.args, tc.say, tc.lines, s)
		}
	}
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err = run(t.Context(), e, []string{"audit", "timeline", "mattermost/C1/R1", "--config", plain, "--timezone", "Mars/Olympus"})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `--timezone "Mars/Olympus": not a time zone name`) {
		t.Errorf("--timezone Mars/Olympus: %v", err)
	}
}
