package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

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
}
