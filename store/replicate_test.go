package store

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// allLinesOf reads every stored line of db.
func allLinesOf(t *testing.T, db *DB) [][]byte {
	t.Helper()
	var out [][]byte
	for chunk, err := range db.Lines(0) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, chunk...)
	}
	return out
}

// TestReplicateAppliesEverywhere: with Options.Replicate, an Append commits
// through the hook (here a stand-in log that applies every batch to two
// stores), and both stores end with the same verified chain.
func TestReplicateAppliesEverywhere(t *testing.T) {
	follower := openTest(t, t.TempDir(), nil)
	var leader *DB
	var mu sync.Mutex
	calls := 0
	replicate := func(lines [][]byte) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if err := follower.ApplyLines(lines); err != nil {
			return err
		}
		return leader.ApplyLines(lines)
	}
	leader = openTest(t, t.TempDir(), &Options{Replicate: replicate})
	fill(t, leader, 30)
	if calls == 0 {
		t.Fatal("Append did not go through Options.Replicate")
	}
	ls, fs := leader.LastSeq(), follower.LastSeq()
	if ls != 30 || fs != 30 {
		t.Fatalf("heads: leader %d, follower %d, want 30", ls, fs)
	}
	for _, db := range []*DB{leader, follower} {
		rep, err := db.Verify(context.Background(), nil)
		if err != nil || !rep.OK {
			t.Fatalf("Verify: %v %+v", err, rep)
		}
	}
	_, lh := leader.Head()
	_, fh := follower.Head()
	if lh != fh {
		t.Fatalf("heads differ: %s vs %s", lh, fh)
	}
	// A replay of everything is a no-op.
	if err := follower.ApplyLines(allLinesOf(t, leader)); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if follower.LastSeq() != 30 {
		t.Fatalf("replay moved the head to %d", follower.LastSeq())
	}
}

// TestReplicateRefusesNotCommitted: an Append whose batch the log does not
// commit fails and leaves the store as it was.
func TestReplicateRefusesNotCommitted(t *testing.T) {
	notLeader := errors.New("node is not the leader")
	db := openTest(t, t.TempDir(), &Options{Replicate: func([][]byte) error { return notLeader }})
	_, err := db.Append(context.Background(), Event{Session: "s", Type: "user_message", Actor: "user:a"})
	if !errors.Is(err, notLeader) {
		t.Fatalf("Append = %v, want %v", err, notLeader)
	}
	if db.LastSeq() != 0 {
		t.Fatalf("LastSeq = %d after a refused batch", db.LastSeq())
	}
}

// TestApplyLinesDiverged: a store whose chain holds other events than the
// replicated lines refuses them and names the first seq that differs; lines
// that skip a seq are refused too.
func TestApplyLinesDiverged(t *testing.T) {
	a := openTest(t, t.TempDir(), nil)
	b := openTest(t, t.TempDir(), nil)
	fill(t, a, 10)
	lines := allLinesOf(t, a)
	if err := b.ApplyLines(lines[:4]); err != nil {
		t.Fatal(err)
	}
	// b goes its own way at seq 5.
	if _, err := b.Append(context.Background(), Event{Session: "x", Type: "user_message", Actor: "user:mallory"}); err != nil {
		t.Fatal(err)
	}
	fill(t, b, 3)
	var de *DivergedError
	if err := b.ApplyLines(lines); !errors.As(err, &de) || de.Seq != 5 {
		t.Fatalf("ApplyLines = %v, want a DivergedError at seq 5", err)
	}
	c := openTest(t, t.TempDir(), nil)
	if err := c.ApplyLines(lines[1:]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ApplyLines from seq 2 on an empty store = %v, want ErrInvalid", err)
	}
	if c.LastSeq() != 0 {
		t.Fatalf("refused lines moved the head to %d", c.LastSeq())
	}
}

// TestReplicateStaleFormsAgain: a batch the log calls stale is sequenced
// again on the head and committed.
func TestReplicateStaleFormsAgain(t *testing.T) {
	var db *DB
	stale := 1
	db = openTest(t, t.TempDir(), &Options{Replicate: func(lines [][]byte) error {
		if stale > 0 {
			stale--
			return ErrStale
		}
		return db.ApplyLines(lines)
	}})
	if _, err := db.Append(context.Background(), Event{Session: "s", Type: "user_message", Actor: "user:a"}); err != nil {
		t.Fatalf("Append after one stale answer: %v", err)
	}
}
