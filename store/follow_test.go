package store

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// journalOf is a store of n events, synced to its journal, and a Follower
// of that journal from since.
func journalOf(t *testing.T, n int, since uint64) (*DB, *Follower) {
	t.Helper()
	db := openTest(t, t.TempDir(), nil)
	fill(t, db, n)
	syncAudit(db)
	f := Follow(db.AuditPath(), since)
	t.Cleanup(func() { f.Close() })
	return db, f
}

// seqs drains one Events call of t.
func seqs(t *testing.T, f *Follower) []uint64 {
	t.Helper()
	var out []uint64
	for ev, line := range f.Events() {
		if !strings.Contains(string(line), ev.Hash) {
			t.Errorf("seq %d: line %s lacks the event's hash", ev.Seq, line)
		}
		out = append(out, ev.Seq)
	}
	if err := f.Err(); err != nil {
		t.Fatalf("Events: %v", err)
	}
	return out
}

// A Follower from seq since passes what the journal holds from there and
// then only what is appended; from 0 it starts at the journal's end.
func TestFollowerFromSinceAndFromTheEnd(t *testing.T) {
	db, from3 := journalOf(t, 5, 3)
	fromEnd := Follow(db.AuditPath(), 0)
	defer fromEnd.Close()
	if got := seqs(t, from3); !slices.Equal(got, []uint64{3, 4, 5}) {
		t.Errorf("since 3: %v, want [3 4 5]", got)
	}
	if got := seqs(t, fromEnd); len(got) != 0 {
		t.Errorf("since 0: %v, want nothing of what was there", got)
	}
	fill(t, db, 2)
	syncAudit(db)
	for name, f := range map[string]*Follower{"since 3": from3, "since 0": fromEnd} {
		if got := seqs(t, f); !slices.Equal(got, []uint64{6, 7}) {
			t.Errorf("%s after two appends: %v, want [6 7]", name, got)
		}
		if got := seqs(t, f); len(got) != 0 {
			t.Errorf("%s with nothing new: %v", name, got)
		}
	}
}

// A rebuilt journal (a new file renamed into place) or a truncated one is
// read again from its start, and no event is passed twice.
func TestFollowerAcrossRebuildAndTruncation(t *testing.T) {
	db, f := journalOf(t, 4, 1)
	if got := seqs(t, f); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Fatalf("first read: %v", got)
	}
	if err := db.RebuildAudit(t.Context()); err != nil {
		t.Fatal(err)
	}
	fill(t, db, 1)
	syncAudit(db)
	if got := seqs(t, f); !slices.Equal(got, []uint64{5}) {
		t.Errorf("after a rebuild and an append: %v, want [5]", got)
	}
	data, err := os.ReadFile(db.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	// Truncated to its first two lines, then grown past where it was.
	lines := strings.SplitAfter(string(data), "\n")
	short := strings.Join(lines[:2], "")
	if err := os.WriteFile(db.AuditPath(), []byte(short), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, f); len(got) != 0 {
		t.Errorf("after a truncation: %v, want nothing (all passed before)", got)
	}
	if err := os.WriteFile(db.AuditPath(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, f); len(got) != 0 {
		t.Errorf("the same lines again: %v, want nothing", got)
	}
}

// A journal that does not exist yet is waited for, and its first events
// are passed (they are all new); a line is passed only once it is whole.
func TestFollowerWaitsForTheFileAndWholeLines(t *testing.T) {
	src, _ := journalOf(t, 3, 0)
	data, err := os.ReadFile(src.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f := Follow(path, 0)
	defer f.Close()
	if got := seqs(t, f); len(got) != 0 {
		t.Fatalf("no file: %v", got)
	}
	cut := strings.Index(string(data), "\n") + 10 // one line and a bit
	if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	if got := seqs(t, f); !slices.Equal(got, []uint64{1}) {
		t.Errorf("a line and a half: %v, want [1]", got)
	}
	w, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data[cut:])
	w.Close()
	if got := seqs(t, f); !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("the rest: %v, want [2 3]", got)
	}
}

// Breaking out of Events keeps the events not yet passed for the next call.
func TestFollowerStopAndResume(t *testing.T) {
	_, f := journalOf(t, 3, 1)
	for ev := range f.Events() {
		if ev.Seq != 1 {
			t.Fatalf("first event %d", ev.Seq)
		}
		break
	}
	if got := seqs(t, f); !slices.Equal(got, []uint64{2, 3}) {
		t.Errorf("after a break: %v, want [2 3]", got)
	}
}
