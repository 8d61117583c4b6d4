package agentcore

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// TestArchiveKeepsOpenSessions: an archive never takes the events of a
// session with an unfinished run or a pending approval (OpenSessions), and
// a restart after it recovers them and rebuilds the state index from the
// live chain: the sessions it starts with and the approvals are those of
// the live events.
func TestArchiveKeepsOpenSessions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := useIndex(db); err != nil {
		t.Fatal(err)
	}
	ev := func(session, typ string, payload any) store.Event {
		return store.Event{Session: session, Type: typ, Actor: "user:alice", Payload: mustJSON(payload)}
	}
	var evs []store.Event
	for i := range 4 { // finished sessions d0..d3, 5 events each: seqs 1..20
		s := fmt.Sprintf("d%d", i)
		evs = append(evs, ev(s, EvUserMessage, userMessagePayload{Text: "hello " + s}), ev(s, EvRunStarted, nil),
			ev(s, EvApprovalAsked, approvalAskedPayload{RequestID: "r" + s, Command: "systemctl restart x"}),
			ev(s, EvApprovalDecided, approvalDecidedPayload{RequestID: "r" + s, Approved: true, By: "bob"}),
			ev(s, EvRunFinished, runPayload{Status: "done"}))
	}
	// open: a run that never finished (seqs 21-22); pend: an approval
	// without a decision (23-25); then more finished sessions (26-35).
	evs = append(evs, ev("open", EvUserMessage, userMessagePayload{Text: "still running"}), ev("open", EvRunStarted, nil),
		ev("pend", EvUserMessage, userMessagePayload{Text: "waiting"}), ev("pend", EvRunStarted, nil),
		ev("pend", EvApprovalAsked, approvalAskedPayload{RequestID: "rp", Command: "reboot"}))
	for i := 4; i < 6; i++ {
		s := fmt.Sprintf("d%d", i)
		evs = append(evs, ev(s, EvUserMessage, userMessagePayload{Text: "hello " + s}), ev(s, EvRunStarted, nil),
			ev(s, EvRunFinished, runPayload{Status: "done"}), ev(s, EvUserMessage, userMessagePayload{Text: "again"}),
			ev(s, EvRunStarted, nil))
		evs = append(evs[:len(evs)-1], ev(s, EvRunFinished, runPayload{Status: "done"}))
	}
	if _, err := db.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	open, err := OpenSessions(db)
	if err != nil || !slices.Equal(open, []string{"open", "pend"}) {
		t.Fatalf("OpenSessions = %v, %v", open, err)
	}
	db.Close()

	res, err := store.Archive(t.Context(), path, nil, store.ArchiveOptions{Keep: OpenSessions})
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.Last != 20 {
		t.Fatalf("the archive took seqs %d..%d, want 1..20 (before the open sessions)", res.Record.First, res.Record.Last)
	}
	// Only a session boundary before them remains: nothing more to take.
	if _, err := store.Archive(t.Context(), path, nil, store.ArchiveOptions{Keep: OpenSessions}); !errors.Is(err, store.ErrNothingToArchive) {
		t.Fatalf("second archive: %v", err)
	}

	// The daemon starts again.
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := Recover(db)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.Runs, []string{"open", "pend"}) || len(u.Approvals) != 1 || u.Approvals[0].RequestID != "rp" {
		t.Fatalf("Recover after the archive: %+v", u)
	}
	sessions, _, err := Sessions(db)
	if err != nil || !slices.Equal(sessions, []string{"open", "pend", "d4", "d5"}) {
		t.Fatalf("Sessions after the archive: %v, %v", sessions, err)
	}
	entries, ok := IndexedApprovals(db, 0)
	if !ok {
		t.Fatal("the state index is not current after Recover")
	}
	var reqs []string
	for a := range entries {
		reqs = append(reqs, a.RequestID)
	}
	if !slices.Equal(reqs, []string{"rp"}) {
		t.Fatalf("approvals after the archive: %v", reqs)
	}
	if topic, _ := IndexedTopic(db, "d0", true); topic != "" {
		t.Fatalf("an archived session's topic is still indexed: %q", topic)
	}
	rep, err := db.Verify(t.Context())
	if err != nil || !rep.OK || rep.ArchivedSeq != 20 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}
