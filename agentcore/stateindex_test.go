package agentcore

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// TestRecoverReadsTheStateIndex: Recover and Sessions answer from the
// state index, which a store without one builds once at the first Recover
// (a store of an older thinbot), and which catches up with events a
// process that kept no index appended (thinbot ask) — issue #23.
func TestRecoverReadsTheStateIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	appendAll := func(evs ...store.Event) {
		t.Helper()
		db, err := store.Open(path, nil) // no index kept: an older thinbot, or ask
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, e := range evs {
			if _, err := db.Append(t.Context(), e); err != nil {
				t.Fatal(err)
			}
		}
	}
	ev := func(session, typ string, branch int, p any) store.Event {
		return store.Event{Session: session, Type: typ, Actor: "test", Branch: branch, Payload: mustJSON(p)}
	}
	appendAll(
		ev("s1", EvUserMessage, 0, UserMessagePayload{Text: "hi", MessageID: "m1"}),
		ev("s1", EvRunStarted, 0, RunPayload{}),
		ev("s1", EvApprovalAsked, 0, ApprovalAskedPayload{CallID: "c1", RequestID: "r1", Command: "reboot", SHA256: "abc"}),
		ev("s1", EvNote, 0, NotePayload{Kind: NoteApprovalPosted, RequestID: "r1", PostID: "p1"}),
		ev("s2", EvUserMessage, 0, UserMessagePayload{Text: "yo", MessageID: "m2"}),
		ev("s2", EvRunStarted, 0, RunPayload{}),
		ev("s2", EvApprovalAsked, 0, ApprovalAskedPayload{CallID: "c2", RequestID: "r2", Command: "ls"}),
		ev("s2", EvApprovalDecided, 0, ApprovalDecidedPayload{CallID: "c2", RequestID: "r2", Approved: true}),
		ev("s2", EvRunFinished, 0, RunPayload{Status: StatusAnswered}),
		ev("s3", EvNote, 0, NotePayload{Kind: NoteMessageQueued, PostID: "q1", User: "U1", Name: "al", Detail: "wait"}),
		ev("s3", EvNote, 0, NotePayload{Kind: NoteMessageQueued, PostID: "q2", Detail: "handled"}),
		ev("s3", EvUserMessage, 0, UserMessagePayload{Text: "handled", MessageID: "q2"}),
		ev("s1", EvClear, 2, map[string]any{}),
	)
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := Recover(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Approvals) != 1 || u.Approvals[0].RequestID != "r1" || u.Approvals[0].PostID != "p1" || u.Approvals[0].Command != "reboot" ||
		!slices.Equal(u.Runs, []string{"s1"}) || len(u.Queued) != 1 || u.Queued[0].MessageID != "q1" || u.Queued[0].UserName != "al" {
		t.Fatalf("Recover = %+v", u)
	}
	sessions, seen, err := Sessions(db)
	if err != nil || !slices.Equal(sessions, []string{"s1", "s2", "s3"}) || !slices.Equal(seen, []string{"m1", "m2", "q2"}) {
		t.Fatalf("Sessions = %q, %q, %v", sessions, seen, err)
	}
	var last []store.Event
	for e, err := range db.Events("s1", 1) {
		if err != nil {
			t.Fatal(err)
		}
		last = append(last, e)
	}
	if n := len(last); n < 2 || last[n-1].Type != EvRunFinished || last[n-1].Branch != 2 || last[n-2].Type != EvApprovalDecided || last[n-2].Branch != 2 {
		t.Errorf("Recover recorded %+v, want a refusal and a run_finished on branch 2", last[max(0, n-2):])
	}
	if u, _ := Recover(db); len(u.Approvals)+len(u.Runs) != 0 || len(u.Queued) != 1 {
		t.Errorf("second Recover = %+v, want only the queued message", u)
	}
	db.Close()

	// A process without the index appends; the next Recover catches up.
	appendAll(ev("s4", EvUserMessage, 0, UserMessagePayload{Text: "ask", MessageID: "m4"}), ev("s4", EvRunStarted, 0, RunPayload{}))
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if u, err := Recover(db); err != nil || !slices.Equal(u.Runs, []string{"s4"}) {
		t.Errorf("Recover after an unindexed append = %+v, %v; want the run of s4", u, err)
	}
	if sessions, seen, _ := Sessions(db); !slices.Equal(sessions, []string{"s1", "s2", "s3", "s4"}) || seen[len(seen)-1] != "m4" {
		t.Errorf("Sessions = %q %q", sessions, seen)
	}
}
