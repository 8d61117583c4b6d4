package agentcore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

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
		evs = append(evs, ev(s, EvUserMessage, UserMessagePayload{Text: "hello " + s}), ev(s, EvRunStarted, nil),
			ev(s, EvApprovalAsked, ApprovalAskedPayload{RequestID: "r" + s, Command: "systemctl restart x"}),
			ev(s, EvApprovalDecided, ApprovalDecidedPayload{RequestID: "r" + s, Approved: true, By: "bob"}),
			ev(s, EvRunFinished, RunPayload{Status: "done"}))
	}
	// open: a run that never finished (seqs 21-22); pend: an approval
	// without a decision (23-25); then more finished sessions (26-35).
	evs = append(evs, ev("open", EvUserMessage, UserMessagePayload{Text: "still running"}), ev("open", EvRunStarted, nil),
		ev("pend", EvUserMessage, UserMessagePayload{Text: "waiting"}), ev("pend", EvRunStarted, nil),
		ev("pend", EvApprovalAsked, ApprovalAskedPayload{RequestID: "rp", Command: "reboot"}))
	for i := 4; i < 6; i++ {
		s := fmt.Sprintf("d%d", i)
		evs = append(evs, ev(s, EvUserMessage, UserMessagePayload{Text: "hello " + s}), ev(s, EvRunStarted, nil),
			ev(s, EvRunFinished, RunPayload{Status: "done"}), ev(s, EvUserMessage, UserMessagePayload{Text: "again"}),
			ev(s, EvRunStarted, nil))
		evs = append(evs[:len(evs)-1], ev(s, EvRunFinished, RunPayload{Status: "done"}))
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
	for a, err := range entries {
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, a.RequestID)
	}
	if !slices.Equal(reqs, []string{"rp"}) {
		t.Fatalf("approvals after the archive: %v", reqs)
	}
	if topic, _ := IndexedTopic(db, "d0", true); topic != "" {
		t.Fatalf("an archived session's topic is still indexed: %q", topic)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.ArchivedSeq != 20 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// TestCheckpointsAcrossAnArchive: a verified checkpoint that vouches for
// events since archived is no break of the chain. One that vouches for the
// archive's last event is compared with the head the archive event
// recorded (a rewritten one is found); one further back is left to the
// archive file's own verification.
func TestCheckpointsAcrossAnArchive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := useIndex(db); err != nil {
		t.Fatal(err)
	}
	session := func(s string) []store.Event {
		return []store.Event{{Session: s, Type: EvUserMessage, Actor: "user:alice", Payload: mustJSON(UserMessagePayload{Text: "hello"})},
			{Session: s, Type: EvRunStarted, Actor: "system"}, {Session: s, Type: EvRunFinished, Actor: "system", Payload: mustJSON(RunPayload{Status: "done"})}}
	}
	checkpoint := func() ChainCheckpoint {
		t.Helper()
		rep, err := db.Verify(t.Context(), nil)
		if err != nil || !rep.OK {
			t.Fatalf("verify: %+v, %v", rep, err)
		}
		cp, err := RecordChainVerified(db, rep, time.Millisecond, "")
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	for i := range 3 { // seqs 1..9
		if _, err := db.Append(t.Context(), session(fmt.Sprintf("a%d", i))...); err != nil {
			t.Fatal(err)
		}
	}
	early := checkpoint()                                               // at 10, for 9
	if _, err := db.Append(t.Context(), session("b0")...); err != nil { // 11..13
		t.Fatal(err)
	}
	edge := checkpoint()                                                // at 14, for 13
	if _, err := db.Append(t.Context(), session("c0")...); err != nil { // 15..17
		t.Fatal(err)
	}
	db.Close()
	// The cut falls before the checkpoints' session (system:verify) would
	// be split: after seq 9, the event the first checkpoint vouches for.
	res, err := store.Archive(t.Context(), path, nil, store.ArchiveOptions{UpTo: 13, Keep: OpenSessions})
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.Last != early.Seq || edge.Seq <= early.Seq {
		t.Fatalf("archived up to %d; checkpoints for %d and %d", res.Record.Last, early.Seq, edge.Seq)
	}
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The export (the journal, which now starts after the archived
	// events) is held to the same rule: verifyJSONL agrees with
	// checkChainCheckpoints at every step.
	exportSays := func(problem string, bad uint64) {
		t.Helper()
		f, err := os.Open(db.AuditPath())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rep, err := verifyJSONL(t.Context(), f)
		if err != nil || rep.ArchivedSeq != res.Record.Last || rep.OK != (problem == "") || rep.BadSeq != bad || rep.Problem != problem {
			t.Fatalf("verifyJSONL of the export = %+v, %v; want the store's %q at %d", rep, err, problem, bad)
		}
	}
	if problem, bad, err := checkChainCheckpoints(db); err != nil || problem != "" {
		t.Fatalf("after the archive: %q at %d, %v; want a checkpoint for the archive's head accepted", problem, bad, err)
	}
	exportSays("", 0)
	// One for an event further back is the archive file's to prove.
	if _, err := db.Append(t.Context(), store.Event{Session: CheckpointSession, Type: EvChainVerified, Actor: "system",
		Payload: mustJSON(ChainVerifiedPayload{Seq: 5, Hash: strings.Repeat("1", 64)})}); err != nil {
		t.Fatal(err)
	}
	if problem, bad, err := checkChainCheckpoints(db); err != nil || problem != "" {
		t.Fatalf("a checkpoint inside the archive: %q at %d, %v", problem, bad, err)
	}
	exportSays("", 0)
	// A forged checkpoint for the archive's last event, with another hash.
	forged := strings.Repeat("0", 64)
	if _, err := db.Append(t.Context(), store.Event{Session: CheckpointSession, Type: EvChainVerified, Actor: "system",
		Payload: mustJSON(ChainVerifiedPayload{Seq: early.Seq, Hash: forged})}); err != nil {
		t.Fatal(err)
	}
	problem, bad, err := checkChainCheckpoints(db)
	if err != nil || bad != early.Seq || !strings.Contains(problem, "archive") {
		t.Fatalf("a checkpoint disagreeing with the archive's head: %q at %d, %v", problem, bad, err)
	}
	exportSays(problem, bad)
	db.Close()
}
