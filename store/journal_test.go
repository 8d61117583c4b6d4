package store

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyFile copies src to dst (for keeping a store file as it was).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// swapJournal makes f the DB's journal file and returns the one it had.
func swapJournal(db *DB, f *os.File) *os.File {
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	old := db.auditFile
	db.auditFile = f
	return old
}

// unsyncable returns a file to write to whose fdatasync fails: a pipe.
func unsyncable(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return w
}

// setState writes the state file as a process that had the store open
// under boot would have left it.
func setState(t testing.TB, dir, boot string) {
	t.Helper()
	if err := os.WriteFile(statePath(filepath.Join(dir, "events.db")), []byte(stateOpen+boot+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readState(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(statePath(filepath.Join(dir, "events.db")))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkChain opens the store and checks that it holds want (same seqs and
// hashes), verifies, and that the journal matches it.
func checkChain(t *testing.T, db *DB, want []Event) {
	t.Helper()
	var got []Event
	for ev, err := range db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if len(got) != len(want) {
		t.Fatalf("store has %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Seq != want[i].Seq || got[i].Hash != want[i].Hash {
			t.Fatalf("event %d = seq %d %.12s, want seq %d %.12s", i, got[i].Seq, got[i].Hash, want[i].Seq, want[i].Hash)
		}
	}
	if rep, err := db.Verify(t.Context(), nil); err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	if rep, err := db.VerifyJournal(t.Context(), Report{}); err != nil || !rep.OK || rep.Events != uint64(len(want)) {
		t.Fatalf("VerifyJournal = %+v, %v", rep, err)
	}
}

func TestStateFileSaysOpenOrClosed(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	if s := readState(t, dir); s != stateOpen+bootID()+"\n" {
		t.Errorf("state while open = %q", s)
	}
	if _, err := Open(filepath.Join(dir, "events.db"), &Options{Timeout: 50e6}); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open = %v, want ErrLocked", err)
	}
	fill(t, db, 3)
	db.Close()
	if s := readState(t, dir); s != stateClosed {
		t.Errorf("state after Close = %q", s)
	}
}

// TestJournalReplay: a process that died after the journal took a batch and
// before bbolt indexed it leaves bbolt a batch behind; Open replays the
// journal's lines into it. A complete line that does not continue the chain
// is tampering; a cut last line is what a death mid-write leaves.
func TestJournalReplay(t *testing.T) {
	for _, tt := range []struct {
		name    string
		damage  func(journal []byte) []byte
		want    int // events after Open
		wantErr error
	}{
		{"intact", func(j []byte) []byte { return j }, 10, nil},
		{"cut line after", func(j []byte) []byte { return append(j, `{"seq":11,"time":"20`...) }, 10, nil},
		{"edited replayed line", func(j []byte) []byte {
			lines := bytes.SplitAfter(j, []byte("\n"))
			lines[8] = bytes.Replace(lines[8], []byte("message"), []byte("massage"), 1)
			return bytes.Join(lines, nil)
		}, 0, ErrAuditMismatch},
		{"replayed line removed", func(j []byte) []byte {
			lines := bytes.SplitAfter(j, []byte("\n"))
			return bytes.Join(append(lines[:8:8], lines[9:]...), nil)
		}, 0, ErrAuditMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "events.db")
			db := openTest(t, dir, nil)
			want := fill(t, db, 7)
			db.Close()
			copyFile(t, path, filepath.Join(dir, "seven"))
			db = openTest(t, dir, nil)
			want = append(want, fill(t, db, 3)...)
			db.Close()
			// bbolt as it was after seven events, the journal with ten,
			// and a process that had it open in this boot.
			copyFile(t, filepath.Join(dir, "seven"), path)
			setState(t, dir, bootID())
			journal := filepath.Join(dir, "audit.jsonl")
			j, _ := os.ReadFile(journal)
			if err := os.WriteFile(journal, tt.damage(j), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.wantErr == nil {
				// Read-only, nothing is replayed: the journal's extra
				// events are reported, not called broken.
				ro, err := Open(path, &Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				rep, err := ro.VerifyJournal(t.Context(), Report{})
				ro.Close()
				if err != nil || !rep.OK || rep.Events != 10 || !strings.Contains(strings.Join(rep.Warnings, "\n"), "past the store's last (seq 8-10)") {
					t.Fatalf("read-only VerifyJournal = %+v, %v", rep, err)
				}
			}
			db2, err := Open(path, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer db2.Close()
			checkChain(t, db2, want[:tt.want])
			more, err := db2.Append(t.Context(), Event{Session: "a", Type: "t"})
			if err != nil || more[0].Seq != 11 || more[0].Prev != want[9].Hash {
				t.Fatalf("Append after replay = %+v, %v", more, err)
			}
		})
	}
}

// TestRebuildAfterMachineRestart: bbolt is written without syncs, so after
// the machine went down with the store open its file cannot be trusted; Open
// rebuilds it from the journal, cutting the damaged tail a power loss
// leaves, keeping the old file, and refusing a journal that was tampered
// with.
func TestRebuildAfterMachineRestart(t *testing.T) {
	for _, tt := range []struct {
		name    string
		damage  func(t *testing.T, dir string, journal []byte) []byte
		wantErr error
	}{
		{"torn tail", func(t *testing.T, dir string, j []byte) []byte {
			return append(append(j, `{"seq":11,"time":"2026-12-01T`...), make([]byte, 300)...)
		}, nil},
		{"bbolt file garbage", func(t *testing.T, dir string, j []byte) []byte {
			if err := os.WriteFile(filepath.Join(dir, "events.db"), bytes.Repeat([]byte{0xa5}, 1<<16), 0o600); err != nil {
				t.Fatal(err)
			}
			return j
		}, nil},
		{"bbolt file gone", func(t *testing.T, dir string, j []byte) []byte {
			os.Remove(filepath.Join(dir, "events.db"))
			return j
		}, nil},
		{"bad line with good ones after it", func(t *testing.T, dir string, j []byte) []byte {
			return bytes.Replace(j, []byte("message 4"), []byte("message X"), 1)
		}, ErrAuditMismatch},
		{"a line repeated, the old store unreadable", func(t *testing.T, dir string, j []byte) []byte {
			if err := os.WriteFile(filepath.Join(dir, "events.db"), bytes.Repeat([]byte{0xa5}, 1<<16), 0o600); err != nil {
				t.Fatal(err)
			}
			lines := bytes.SplitAfter(j, []byte("\n"))
			return bytes.Join(append(lines[:9:9], lines[8:]...), nil)
		}, ErrAuditMismatch},
		{"last event rewritten with a recomputed hash", func(t *testing.T, dir string, j []byte) []byte {
			lines := bytes.SplitAfter(j, []byte("\n"))
			return append(bytes.Join(lines[:9], nil), append(forge(10, hashOf(bytes.TrimSuffix(lines[8], []byte("\n"))), "a"), '\n')...)
		}, ErrAuditMismatch},
		{"journal behind the old store", func(t *testing.T, dir string, j []byte) []byte {
			lines := bytes.SplitAfter(j, []byte("\n"))
			return bytes.Join(lines[:7], nil)
		}, ErrAuditMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "events.db")
			db := openTest(t, dir, nil)
			want := fill(t, db, 10)
			db.Close()
			setState(t, dir, "an-earlier-boot")
			journal := filepath.Join(dir, "audit.jsonl")
			j, _ := os.ReadFile(journal)
			if err := os.WriteFile(journal, tt.damage(t, dir, j), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(path, &Options{ReadOnly: true}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "rebuild") {
				t.Errorf("read-only Open = %v, want a hint to open it writable", err)
			}
			before, _ := os.ReadFile(path)
			db2, err := Open(path, nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
					t.Error("a refused rebuild changed the store file")
				}
				if tmp, _ := filepath.Glob(path + ".*"); len(tmp) != 1 { // the state file only
					t.Errorf("a refused rebuild left %v", tmp)
				}
				return
			}
			defer db2.Close()
			checkChain(t, db2, want)
			if got, _ := os.ReadFile(journal); !bytes.Equal(got, j) {
				t.Errorf("journal after rebuild is %d bytes, want the %d it had before the damage", len(got), len(j))
			}
			if kept, _ := filepath.Glob(path + ".unsynced-*"); (len(before) > 0) != (len(kept) == 1) {
				t.Errorf("old store kept as %v", kept)
			}
			if _, err := db2.Append(t.Context(), Event{Session: "a", Type: "t"}); err != nil {
				t.Fatal(err)
			}
			db2.Close()
			if s := readState(t, dir); s != stateClosed {
				t.Errorf("state after Close = %q", s)
			}
		})
	}
}

// TestJournalWriteFailure: a batch the journal cannot take (a full disk) is
// not committed, and what it wrote is cut before the next batch.
func TestJournalWriteFailure(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	want := fill(t, db, 3)
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no /dev/full (CI runs on Linux, which has it):", err)
		}
		t.Skip("no /dev/full:", err)
	}
	db.auditMu.Lock()
	real := db.auditFile
	db.auditFile = full
	db.auditMu.Unlock()
	if _, err := db.Append(t.Context(), Event{Session: "a", Type: "lost"}); err == nil || !strings.Contains(err.Error(), "audit journal") {
		t.Fatalf("Append on a full disk = %v, want the journal's error", err)
	}
	if db.LastSeq() != 3 {
		t.Fatalf("LastSeq = %d after a failed commit, want 3", db.LastSeq())
	}
	db.auditMu.Lock()
	db.auditFile = real
	db.auditMu.Unlock()
	full.Close()
	// Bytes of the failed batch that reached the file are cut.
	if _, err := real.WriteAt([]byte(`{"seq":4,"partial`), db.auditOff); err != nil {
		t.Fatal(err)
	}
	more, err := db.Append(t.Context(), Event{Session: "a", Type: "t"})
	if err != nil || more[0].Seq != 4 {
		t.Fatalf("Append after the disk has room = %+v, %v", more, err)
	}
	checkChain(t, db, append(want, more...))
	f, _ := os.Open(db.AuditPath())
	defer f.Close()
	b, _ := io.ReadAll(f)
	if bytes.Contains(b, []byte("partial")) || bytes.Contains(b, []byte("lost")) {
		t.Error("the journal kept bytes of the failed batch")
	}
}

// FuzzJournalRecovery appends arbitrary bytes to a journal whose store holds
// five events (or, for the rebuild, whose bbolt file is gone) and opens it as
// after a crash of the process (replay) or of the machine (rebuild). Open
// never panics; it either fails with ErrAuditMismatch or gives a store that
// keeps the five events, verifies, and matches its journal.
func FuzzJournalRecovery(f *testing.F) {
	tmpl := f.TempDir()
	db, err := Open(filepath.Join(tmpl, "events.db"), nil)
	if err != nil {
		f.Fatal(err)
	}
	want := fill(f, db, 6)
	db.Close()
	j, _ := os.ReadFile(filepath.Join(tmpl, "audit.jsonl"))
	lines := bytes.SplitAfter(j, []byte("\n"))
	// The store keeps five; the sixth line is the journal's to replay.
	head := bytes.Join(lines[:5], nil)
	sixth := lines[5]
	// A store of exactly five events, with the same hashes: rebuilt from
	// the first five lines.
	fiveDir := f.TempDir()
	if err := os.WriteFile(filepath.Join(fiveDir, "audit.jsonl"), head, 0o600); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(statePath(filepath.Join(fiveDir, "events.db")), []byte(stateOpen+"fuzz-template\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	if db, err := Open(filepath.Join(fiveDir, "events.db"), nil); err != nil {
		f.Fatal(err)
	} else {
		db.Close()
	}
	five, _ := os.ReadFile(filepath.Join(fiveDir, "events.db"))
	f.Add(false, sixth)
	f.Add(true, sixth)
	f.Add(false, append(bytes.Clone(sixth), `{"seq":7`...))
	f.Add(true, append(bytes.Clone(sixth[:40]), make([]byte, 100)...))
	f.Add(true, []byte("garbage\n"+string(sixth)))
	f.Fuzz(func(t *testing.T, restart bool, tail []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "events.db")
		if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), append(bytes.Clone(head), tail...), 0o600); err != nil {
			t.Fatal(err)
		}
		boot := bootID()
		if restart {
			boot = "an-earlier-boot"
		} else if err := os.WriteFile(path, five, 0o600); err != nil {
			t.Fatal(err)
		}
		setState(t, dir, boot)
		db, err := Open(path, nil)
		if err != nil {
			if !errors.Is(err, ErrAuditMismatch) {
				t.Fatalf("Open = %v, want success or ErrAuditMismatch", err)
			}
			return
		}
		defer db.Close()
		n := 0
		for ev, err := range db.All(1) {
			if err != nil {
				t.Fatal(err)
			}
			if n < 5 && ev.Hash != want[n].Hash {
				t.Fatalf("event %d changed", n+1)
			}
			n++
		}
		if n < 5 {
			t.Fatalf("store has %d events, want at least the 5 committed", n)
		}
		if rep, err := db.Verify(t.Context(), nil); err != nil || !rep.OK {
			t.Fatalf("Verify = %+v, %v", rep, err)
		}
		if rep, err := db.VerifyJournal(t.Context(), Report{}); err != nil || !rep.OK || rep.Events != uint64(n) {
			t.Fatalf("VerifyJournal = %+v, %v", rep, err)
		}
	})
}

// TestAppendBuffered: buffered events are in the chain at once (readable,
// in the journal) but synced only by the next Append or Close; a machine
// restart before that loses them, and only them, without a mismatch.
func TestAppendBuffered(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	db := openTest(t, dir, nil)
	want := fill(t, db, 3)
	buf, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"}, Event{Session: "a", Type: "tool_result"})
	if err != nil || buf[0].Seq != 4 || buf[1].Seq != 5 {
		t.Fatalf("AppendBuffered = %+v, %v", buf, err)
	}
	db.auditMu.Lock()
	synced, written, syncedOff := db.syncedSeq, db.auditSeq, db.syncedOff
	db.auditMu.Unlock()
	if synced != 3 || written != 5 || db.Syncs() != 3 || db.Commits() != 4 {
		t.Fatalf("after AppendBuffered: synced %d, written %d, %d syncs, %d commits; want 3, 5, 3, 4", synced, written, db.Syncs(), db.Commits())
	}
	var read []Event
	for ev, err := range db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		read = append(read, ev)
	}
	if len(read) != 5 || read[4].Hash != buf[1].Hash {
		t.Fatalf("readers see %d events, want the 5 with the buffered ones", len(read))
	}
	// A machine restart now: the old store may have the buffered batch,
	// the journal lost what was not synced.
	copyFile(t, path, filepath.Join(dir, "old.db"))
	journal, _ := os.ReadFile(db.AuditPath())
	more, err := db.Append(t.Context(), Event{Session: "a", Type: "gate_decision"})
	if err != nil || more[0].Seq != 6 {
		t.Fatalf("Append = %+v, %v", more, err)
	}
	db.auditMu.Lock()
	synced = db.syncedSeq
	db.auditMu.Unlock()
	if synced != 6 {
		t.Errorf("after Append: synced %d, want 6 (the buffered events with it)", synced)
	}
	db.Close()

	copyFile(t, filepath.Join(dir, "old.db"), path)
	if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), journal[:syncedOff], 0o600); err != nil {
		t.Fatal(err)
	}
	setState(t, dir, "an-earlier-boot")
	db2, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open after losing the buffered tail = %v", err)
	}
	checkChain(t, db2, want)
	db2.Close()

	// Close syncs what is buffered: a clean reopen has it.
	db3 := openTest(t, dir, nil)
	b3, err := db3.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"})
	if err != nil {
		t.Fatal(err)
	}
	db3.Close()
	if s := readState(t, dir); s != stateClosed {
		t.Errorf("state after Close = %q", s)
	}
	db4 := openTest(t, dir, nil)
	checkChain(t, db4, append(want, b3...))
}

// TestRestoreFromJournalAlone: the journal holds everything; copied alone
// into an empty state dir (a restore from backup, even one that caught a
// line being written), it becomes a whole store again.
func TestRestoreFromJournalAlone(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	want := fill(t, db, 25)
	db.Close()
	j, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	restored := t.TempDir()
	if err := os.WriteFile(filepath.Join(restored, "audit.jsonl"), append(j, `{"seq":26,"ti`...), 0o600); err != nil {
		t.Fatal(err)
	}
	db2 := openTest(t, restored, nil)
	checkChain(t, db2, want)
	db2.Close()
	if got, _ := os.ReadFile(filepath.Join(restored, "audit.jsonl")); !bytes.Equal(got, j) {
		t.Errorf("restored journal is %d bytes, want %d", len(got), len(j))
	}
}

// TestDurableSeqAndSync: DurableSeq stays at the last synced event while
// AppendBuffered adds events after it (a machine restart may lose and
// reuse those seqs, so the head to anchor is the durable one); Sync makes
// them durable without a new event.
func TestDurableSeqAndSync(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	fill(t, db, 3)
	if got := db.DurableSeq(); got != 3 {
		t.Fatalf("DurableSeq after Append = %d, want 3", got)
	}
	if _, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"}); err != nil {
		t.Fatal(err)
	}
	if got, last := db.DurableSeq(), db.LastSeq(); got != 3 || last != 4 {
		t.Fatalf("after AppendBuffered: DurableSeq %d, LastSeq %d; want 3, 4", got, last)
	}
	syncs := db.Syncs()
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := db.DurableSeq(); got != 4 || db.Syncs() != syncs+1 {
		t.Fatalf("after Sync: DurableSeq %d, %d syncs; want 4, %d", got, db.Syncs(), syncs+1)
	}
	db.auditMu.Lock()
	synced, off := db.syncedSeq, db.syncedOff
	db.auditMu.Unlock()
	if synced != 4 || off != db.auditOff {
		t.Errorf("after Sync: synced seq %d at %d, want 4 at %d", synced, off, db.auditOff)
	}
	if err := db.Sync(); err != nil || db.Syncs() != syncs+1 {
		t.Errorf("Sync with nothing buffered = %v, %d syncs; want nil and no sync", err, db.Syncs()-syncs)
	}
	// A failed batch whose bytes could not be cut yet does not stop Sync
	// from syncing the good lines before them.
	if _, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"}); err != nil {
		t.Fatal(err)
	}
	db.auditMu.Lock()
	db.auditBroken = true
	db.auditMu.Unlock()
	if err := db.Sync(); err != nil || db.DurableSeq() != 5 {
		t.Errorf("Sync with a failed batch's bytes pending = %v, DurableSeq %d; want nil, 5", err, db.DurableSeq())
	}
	if _, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := db.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close = %v, want ErrClosed", err)
	}
	ro, err := Open(filepath.Join(dir, "events.db"), &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := ro.DurableSeq(); got != 6 {
		t.Errorf("read-only DurableSeq = %d, want 6 (Close synced the buffered event)", got)
	}
	if err := ro.Sync(); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only Sync = %v, want ErrReadOnly", err)
	}
}

// TestJournalMissingAfterMachineRestart: bbolt is written without syncs, so
// after a machine restart the journal is the only sure copy of what was
// committed. Without it Open refuses (the old bbolt file may have lost
// acknowledged events) unless told to accept the store as it is
// (RebuildAudit, as thinbot audit rebuild does); a store that never had
// an event opens as before.
func TestJournalMissingAfterMachineRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	db := openTest(t, dir, nil)
	want := fill(t, db, 5)
	db.Close()
	setState(t, dir, "an-earlier-boot")
	if err := os.Remove(filepath.Join(dir, "audit.jsonl")); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(path, nil); !errors.Is(err, ErrAuditMismatch) {
		if err == nil {
			db.Close()
		}
		t.Fatalf("Open without the journal after a machine restart = %v, want ErrAuditMismatch", err)
	}
	if s := readState(t, dir); s != stateOpen+"an-earlier-boot\n" {
		t.Errorf("a refused Open left the state %q", s)
	}
	db2, err := Open(path, &Options{RebuildAudit: true})
	if err != nil {
		t.Fatalf("Open with RebuildAudit = %v", err)
	}
	checkChain(t, db2, want)
	db2.Close()

	// A machine restart right after a new store's first Open, before it
	// made its journal: nothing was committed, nothing to refuse.
	dir2 := t.TempDir()
	setState(t, dir2, "an-earlier-boot")
	db3 := openTest(t, dir2, nil)
	checkChain(t, db3, nil)
}

// TestCloseWithoutJournalSync: Close says "closed" only when the journal is
// synced; if its last sync fails the store is left "open", so that the
// next Open checks it against the journal (or rebuilds it after a machine
// restart) instead of trusting a journal that may lack its tail.
func TestCloseWithoutJournalSync(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	want := fill(t, db, 3)
	buf, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"})
	if err != nil {
		t.Fatal(err)
	}
	real := swapJournal(db, unsyncable(t))
	defer real.Close()
	if err := db.Close(); err == nil {
		t.Error("Close with a failing journal sync = nil")
	}
	if s := readState(t, dir); s != stateOpen+bootID()+"\n" {
		t.Errorf("state after a failed journal sync = %q, want it left open", s)
	}
	db2 := openTest(t, dir, nil)
	checkChain(t, db2, append(want, buf...))
}

// TestVerifyReportsADurableHead: Verify and VerifyJournal on a running store
// report a head (LastHash) to anchor, so they sync what AppendBuffered
// left unsynced: the head they report is never one a machine restart
// could take back.
func TestVerifyReportsADurableHead(t *testing.T) {
	for _, verify := range []struct {
		name string
		fn   func(*DB) (Report, error)
	}{
		{"Verify", func(db *DB) (Report, error) { return db.Verify(t.Context(), nil) }},
		{"VerifyJournal", func(db *DB) (Report, error) { return db.VerifyJournal(t.Context(), Report{}) }},
	} {
		t.Run(verify.name, func(t *testing.T) {
			db := openTest(t, t.TempDir(), nil)
			fill(t, db, 3)
			buf, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := verify.fn(db)
			if err != nil || !rep.OK || rep.LastHash != buf[0].Hash {
				t.Fatalf("%s = %+v, %v", verify.name, rep, err)
			}
			if got := db.DurableSeq(); got != buf[0].Seq {
				t.Errorf("%s reported head seq %d with the chain durable up to seq %d", verify.name, rep.LastSeq, got)
			}
		})
	}
}

// TestFailedSyncIsFinal: after the journal's sync fails once, nothing more
// commits (a later sync could succeed although the kernel dropped the
// pages), Close leaves the store "open", and the next Open recovers what
// the page cache still had.
func TestFailedSyncIsFinal(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	want := fill(t, db, 3)
	buf, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "tool_result"})
	if err != nil {
		t.Fatal(err)
	}
	real := swapJournal(db, unsyncable(t))
	if err := db.Sync(); err == nil {
		t.Fatal("Sync on a failing journal = nil")
	}
	swapJournal(db, real)
	if err := db.Sync(); err == nil || !strings.Contains(err.Error(), "until thinbot restarts") {
		t.Errorf("Sync after a failed sync = %v, want the first failure", err)
	}
	if _, err := db.Append(t.Context(), Event{Session: "a", Type: "gate_decision"}); err == nil {
		t.Error("Append after a failed sync committed")
	}
	db.Close()
	if s := readState(t, dir); s != stateOpen+bootID()+"\n" {
		t.Errorf("state after a failed sync = %q, want it left open", s)
	}
	db2 := openTest(t, dir, nil)
	checkChain(t, db2, append(want, buf...))
}

// TestJournalRotationIsRefused: a logrotate-style rotation of the journal
// (rename, then a new empty file at the path) while the store is open
// makes every commit fail with ErrJournalMoved, naming the fix, instead of
// writing the chain on into the renamed file beside an empty one a
// verifier would pass; nothing is lost, and with the file back the store
// commits again. A journal cut under the store (copytruncate) fails for
// good.
func TestJournalRotationIsRefused(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	want := fill(t, db, 3)
	path := db.AuditPath()
	if err := db.Check(); err != nil {
		t.Fatalf("Check on a fresh store = %v", err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := db.Append(t.Context(), Event{Session: "a", Type: "after-rotation"})
	if !errors.Is(err, ErrJournalMoved) || !strings.Contains(err.Error(), "audit archive") {
		t.Fatalf("Append after a rotation = %v, want ErrJournalMoved naming the fix", err)
	}
	if err := db.Check(); !errors.Is(err, ErrJournalMoved) {
		t.Fatalf("Check after a rotation = %v, want ErrJournalMoved", err)
	}
	if db.LastSeq() != 3 {
		t.Fatalf("LastSeq = %d after a refused commit, want 3", db.LastSeq())
	}
	for _, p := range []string{path, path + ".1"} {
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte("after-rotation")) {
			t.Errorf("%s holds the refused event", p)
		}
	}
	// Deleted: the same.
	os.Remove(path)
	if _, err := db.Append(t.Context(), Event{Session: "a", Type: "t"}); !errors.Is(err, ErrJournalMoved) {
		t.Fatalf("Append with the journal deleted = %v, want ErrJournalMoved", err)
	}
	// Put back: commits go on, and journal and store agree.
	if err := os.Rename(path+".1", path); err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); err != nil {
		t.Fatalf("Check with the journal back = %v", err)
	}
	more, err := db.Append(t.Context(), Event{Session: "a", Type: "t"})
	if err != nil || more[0].Seq != 4 {
		t.Fatalf("Append with the journal back = %+v, %v", more, err)
	}
	checkChain(t, db, append(want, more...))
	if rep, err := db.VerifyJournal(t.Context(), Report{}); err != nil || !rep.OK || rep.Events != 4 {
		t.Fatalf("VerifyJournal = %+v, %v; want 4 good events", rep, err)
	}
	// Cut under the store (copytruncate): refused for good.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := db.Append(t.Context(), Event{Session: "a", Type: "t"}); !errors.Is(err, ErrJournalMoved) || !strings.Contains(err.Error(), "cut") {
			t.Fatalf("Append after copytruncate = %v, want ErrJournalMoved (cut)", err)
		}
	}
	if err := db.Check(); !errors.Is(err, ErrJournalMoved) {
		t.Fatalf("Check after copytruncate = %v", err)
	}
}
