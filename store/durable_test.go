package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// steps records the store's durability steps (Options.durable) in order,
// and fails the ones fail picks. A file sync also records the file's size
// then, so that a test can tell what it covered.
type steps struct {
	mu   sync.Mutex
	log  []string // "op path"
	size map[int]int64
	fail func(op, path string) bool
}

func (s *steps) durable() durable {
	return durable{step: func(op, path string) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.size == nil {
			s.size = map[int]int64{}
		}
		if op == opSync {
			if st, err := os.Stat(path); err == nil {
				s.size[len(s.log)] = st.Size()
			}
		}
		s.log = append(s.log, op+" "+path)
		if s.fail != nil && s.fail(op, path) {
			return fmt.Errorf("injected: %s %s failed", op, path)
		}
		return nil
	}}
}

func (s *steps) snapshot() ([]string, map[int]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sz := map[int]int64{}
	for k, v := range s.size {
		sz[k] = v
	}
	return append([]string(nil), s.log...), sz
}

func (s *steps) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log, s.size = nil, nil
}

// inOrder checks that want occurs in log as a subsequence: each step after
// the one before it (other steps may come between). A want ending in "*"
// matches any step it begins. It returns the index of each match.
func inOrder(t *testing.T, log []string, want ...string) []int {
	t.Helper()
	var at []int
	i := 0
	for _, w := range want {
		for ; i < len(log); i++ {
			if p, ok := strings.CutSuffix(w, "*"); (ok && strings.HasPrefix(log[i], p)) || log[i] == w {
				break
			}
		}
		if i == len(log) {
			t.Fatalf("step %q missing or out of order; want in order:\n  %s\ngot:\n  %s", w, strings.Join(want, "\n  "), strings.Join(log, "\n  "))
		}
		at = append(at, i)
		i++
	}
	return at
}

// TestCommitIsSyncedBeforeItIsAcknowledged: each Append returns only after
// the journal was fdatasynced with the batch's line in it; AppendBuffered
// syncs nothing, and the next Append (or Sync) syncs what it left. A failed sync
// fails the Append, nothing is acknowledged or readable, and it stays so
// after a reopen.
func TestCommitIsSyncedBeforeItIsAcknowledged(t *testing.T) {
	dir := t.TempDir()
	var s steps
	db := openTest(t, dir, &Options{durable: s.durable()})
	journal := db.AuditPath()
	for i := range 3 {
		s.reset()
		evs, err := db.Append(t.Context(), Event{Session: "a", Type: "user_message", Actor: "user:alice", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))})
		if err != nil {
			t.Fatal(err)
		}
		log, size := s.snapshot()
		at := inOrder(t, log, opSync+" "+journal)
		b, err := os.ReadFile(journal)
		if err != nil {
			t.Fatal(err)
		}
		end := strings.Index(string(b), fmt.Sprintf(`{"seq":%d,`, evs[0].Seq))
		if end < 0 {
			t.Fatalf("the journal has no line for seq %d", evs[0].Seq)
		}
		if synced := size[at[0]]; synced < int64(len(b)) {
			t.Errorf("Append of seq %d: the journal was synced at %d bytes, its line ends at %d", evs[0].Seq, synced, len(b))
		}
	}
	// Buffered: no sync; the next Append syncs both.
	s.reset()
	if _, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "note", Actor: "bot"}); err != nil {
		t.Fatal(err)
	}
	if log, _ := s.snapshot(); len(log) != 0 {
		t.Errorf("AppendBuffered synced: %v", log)
	}
	if _, err := db.Append(t.Context(), Event{Session: "a", Type: "note", Actor: "bot"}); err != nil {
		t.Fatal(err)
	}
	log, _ := s.snapshot()
	inOrder(t, log, opSync+" "+journal)
	if db.DurableSeq() != 5 {
		t.Errorf("DurableSeq = %d, want 5", db.DurableSeq())
	}
	// Buffered, then Sync: Sync syncs before it returns.
	if _, err := db.AppendBuffered(t.Context(), Event{Session: "a", Type: "note", Actor: "bot"}); err != nil {
		t.Fatal(err)
	}
	s.reset()
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	log, _ = s.snapshot()
	inOrder(t, log, opSync+" "+journal)
	if db.DurableSeq() != 6 {
		t.Errorf("DurableSeq after Sync = %d, want 6", db.DurableSeq())
	}

	// A failed sync: the Append fails and nothing is acknowledged.
	s.mu.Lock()
	s.fail = func(op, path string) bool { return op == opSync && path == journal }
	s.mu.Unlock()
	if _, err := db.Append(t.Context(), Event{Session: "a", Type: "user_message", Actor: "user:alice", Payload: []byte(`{"text":"lost"}`)}); err == nil {
		t.Fatal("Append succeeded although its sync failed")
	}
	if db.LastSeq() != 6 {
		t.Errorf("LastSeq after a failed sync = %d, want 6", db.LastSeq())
	}
	for ev, err := range db.Events("a", 0) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ev.Payload), "lost") {
			t.Errorf("the event whose sync failed is readable: %+v", ev)
		}
	}
	s.mu.Lock()
	s.fail = nil
	s.mu.Unlock()
	if _, err := db.Append(t.Context(), Event{Session: "a", Type: "note", Actor: "bot"}); err == nil {
		t.Error("Append after a failed sync succeeded: a later sync proves nothing")
	}
	db.Close()
	db2 := openTest(t, dir, nil)
	if db2.LastSeq() != 6 {
		t.Errorf("after reopen LastSeq = %d, want 6 (the failed Append was not committed)", db2.LastSeq())
	}
	if rep, err := db2.Verify(t.Context(), nil); err != nil || !rep.OK {
		t.Errorf("Verify after reopen: %+v, %v", rep, err)
	}
}

// TestArchiveSyncsBeforeRenames: Archive's steps on disk are in the order
// that keeps every event on disk in one place or the other: the archive
// file is synced, renamed into place and its directory synced before the
// archive event is committed; the new journal and bbolt file are synced
// before the marker; the marker is synced, renamed and its directory
// synced before the renames over the live files; the directory is synced
// after them, and only then the marker goes.
func TestArchiveSyncsBeforeRenames(t *testing.T) {
	dir := t.TempDir()
	path, _ := archiveStore(t, dir)
	journal := filepath.Join(dir, "audit.jsonl")
	var s steps
	res, err := Archive(t.Context(), path, &Options{durable: s.durable()}, ArchiveOptions{UpTo: 20})
	if err != nil {
		t.Fatal(err)
	}
	log, _ := s.snapshot()
	adir := filepath.Dir(res.Path)
	marker := archiveMarker(path)
	inOrder(t, log,
		opSync+" "+res.Path+".tmp",
		opRename+" "+res.Path+".tmp -> "+res.Path,
		opSyncDir+" "+adir,
		opSync+" "+journal, // the archive event's commit
		opSync+" "+archiveNewJournal(journal),
		opSync+" "+archiveNewDB(path),
		opSync+" "+marker+".tmp",
		opRename+" "+marker+".tmp -> "+marker,
		opSyncDir+" "+dir,
		opRename+" "+archiveNewJournal(journal)+" -> "+journal,
		opRename+" "+archiveNewDB(path)+" -> "+path,
		opSyncDir+" "+dir,
		opRemove+" "+marker,
		opSyncDir+" "+dir,
	)
}

// TestArchiveStopsAtAFailedSync: a failed sync of the archive file, the new
// files or the marker stops Archive before anything replaces the live
// store: it still holds every event from seq 1.
func TestArchiveStopsAtAFailedSync(t *testing.T) {
	for _, which := range []string{"archive-file", "new-journal", "new-db", "marker"} {
		t.Run(which, func(t *testing.T) {
			dir := t.TempDir()
			path, _ := archiveStore(t, dir)
			journal := filepath.Join(dir, "audit.jsonl")
			target := map[string]string{
				"archive-file": filepath.Join(dir, "archive", archiveName(1, 20)) + ".tmp",
				"new-journal":  archiveNewJournal(journal),
				"new-db":       archiveNewDB(path),
				"marker":       archiveMarker(path) + ".tmp",
			}[which]
			s := steps{fail: func(op, p string) bool { return op == opSync && p == target }}
			_, err := Archive(t.Context(), path, &Options{durable: s.durable()}, ArchiveOptions{UpTo: 20})
			if err == nil || !strings.Contains(err.Error(), "injected") {
				t.Fatalf("Archive with the sync of %s failing: %v", target, err)
			}
			log, _ := s.snapshot()
			for _, l := range log {
				if strings.HasPrefix(l, opRename+" "+archiveNewJournal(journal)) || strings.HasPrefix(l, opRename+" "+archiveNewDB(path)) || l == opRemove+" "+archiveMarker(path) {
					t.Errorf("after the failed sync of %s: %s", target, l)
				}
			}
			if _, err := os.Stat(archiveMarker(path)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the marker exists after a failed sync of %s: %v", target, err)
			}
			rep := verifyAll(t, path)
			if rep.ArchivedSeq != 0 || rep.LastSeq < 50 || rep.Events != rep.LastSeq {
				t.Fatalf("after a failed sync of %s: %+v, want the whole chain live", target, rep)
			}
		})
	}
}

// TestRebuiltJournalIsSyncedBeforeRename: RebuildAudit syncs the rebuilt
// journal before it replaces the old one (kept by a rename, never
// removed), and syncs the directory after; a failed sync leaves the old
// journal in place.
func TestRebuiltJournalIsSyncedBeforeRename(t *testing.T) {
	dir := t.TempDir()
	var s steps
	db := openTest(t, dir, &Options{durable: s.durable()})
	fill(t, db, 12)
	syncAudit(db)
	journal := db.AuditPath()
	b, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	edited := []byte(strings.Replace(string(b), "message 3", "message X", 1))
	if err := os.WriteFile(journal, edited, 0o600); err != nil {
		t.Fatal(err)
	}
	// A failed sync of the rebuilt file: the old journal stays.
	s.mu.Lock()
	s.fail = func(op, p string) bool { return op == opSync && p == journal+".rebuild" }
	s.mu.Unlock()
	if err := db.RebuildAudit(t.Context()); err == nil {
		t.Fatal("RebuildAudit succeeded although its sync failed")
	}
	if got, _ := os.ReadFile(journal); string(got) != string(edited) {
		t.Error("a rebuild whose sync failed replaced the journal")
	}
	s.mu.Lock()
	s.fail = nil
	s.mu.Unlock()
	s.reset()
	if err := db.RebuildAudit(t.Context()); err != nil {
		t.Fatal(err)
	}
	log, _ := s.snapshot()
	inOrder(t, log,
		opSync+" "+journal+".rebuild",
		opRename+" "+journal+" -> "+journal+".replaced-*",
		opRename+" "+journal+".rebuild -> "+journal,
		opSyncDir+" "+dir,
	)
	for _, l := range log {
		if strings.HasPrefix(l, opRemove) {
			t.Errorf("the rebuild removed a file: %s", l)
		}
	}
	if kept, _ := filepath.Glob(journal + ".replaced-*"); len(kept) != 1 {
		t.Errorf("old journal kept as %v, want one file", kept)
	}
}

// TestRebuiltStoreIsSyncedBeforeRename: after a machine restart Open
// rebuilds the bbolt file from the journal: the new file is synced before
// it replaces the old one (kept, never removed), and the directory is
// synced after.
func TestRebuiltStoreIsSyncedBeforeRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	db := openTest(t, dir, nil)
	fill(t, db, 12)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath(path), []byte(stateOpen+"another-boot\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var s steps
	db2 := openTest(t, dir, &Options{durable: s.durable()})
	if db2.LastSeq() != 12 {
		t.Fatalf("after the rebuild LastSeq = %d, want 12", db2.LastSeq())
	}
	log, _ := s.snapshot()
	inOrder(t, log,
		opSync+" "+path+".rebuild",
		opRename+" "+path+" -> "+path+".unsynced-*",
		opRename+" "+path+".rebuild -> "+path,
		opSyncDir+" "+dir,
	)
	for _, l := range log {
		if strings.HasPrefix(l, opRemove) {
			t.Errorf("the rebuild removed a file: %s", l)
		}
	}
}
