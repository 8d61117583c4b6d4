package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fillSessions appends n sessions of per events each, one session after
// the other (s1 has seqs 1..per, s2 the next per, ...), and returns them.
func fillSessions(t testing.TB, db *DB, first, n, per int) []Event {
	t.Helper()
	var out []Event
	for s := first; s < first+n; s++ {
		for i := range per {
			got, err := db.Append(context.Background(), Event{Session: fmt.Sprintf("s%d", s), Type: "user_message", Actor: "user:alice",
				Payload: json.RawMessage(fmt.Sprintf(`{"text":"session %d message %d %s"}`, s, i, strings.Repeat("x", 200)))})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got...)
		}
	}
	return out
}

// archiveStore makes a closed store of 5 sessions of 10 events (seqs
// 1..50) in dir and returns its path and events.
func archiveStore(t *testing.T, dir string) (string, []Event) {
	t.Helper()
	path := filepath.Join(dir, "events.db")
	db, err := Open(path, &Options{Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	evs := fillSessions(t, db, 1, 5, 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, evs
}

func verifyAll(t *testing.T, path string) Report {
	t.Helper()
	db, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open after archive: %v", err)
	}
	defer db.Close()
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	for _, trusted := range []Report{{}, rep} {
		arep, err := db.VerifyJournal(t.Context(), trusted)
		if err != nil || !arep.OK || arep.ArchivedSeq != rep.ArchivedSeq || arep.ArchiveFile != rep.ArchiveFile {
			t.Fatalf("VerifyJournal(%v): %+v, %v", trusted.OK, arep, err)
		}
	}
	return rep
}

// TestArchive: archiving cuts at a session boundary, writes a sealed file
// that verifies alone, records it in the live chain, shrinks the store and
// the journal, and the live store verifies from the archive's head; a
// second archive continues the first, and restoring both gives the chain
// from seq 1.
func TestArchive(t *testing.T) {
	dir := t.TempDir()
	path, evs := archiveStore(t, dir)
	res, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 25, Actor: "test"})
	if err != nil {
		t.Fatalf("Archive: %v", err)
	}
	// s3 has seqs 21..30: the cut goes back to 20.
	if r := res.Record; r.First != 1 || r.Last != 20 || r.Count != 20 || r.Head != evs[19].Hash || r.Prev != ZeroHash || r.Sessions != 2 {
		t.Fatalf("record %+v", r)
	}
	if res.Event.Seq != 51 || res.Event.Type != TypeArchive {
		t.Fatalf("archive event %+v", res.Event)
	}
	if res.JournalAfter >= res.JournalBefore || res.DBAfter >= res.DBBefore {
		t.Errorf("sizes: journal %d -> %d, db %d -> %d", res.JournalBefore, res.JournalAfter, res.DBBefore, res.DBAfter)
	}
	for _, p := range []string{archiveMarker(path), archiveNewDB(path), archiveNewJournal(filepath.Join(dir, "audit.jsonl"))} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left behind", p)
		}
	}
	arep, err := verifyArchivePath(t.Context(), res.Path)
	if err != nil || !arep.OK || arep.Seal.Head != evs[19].Hash || arep.FileSHA256 != res.Record.FileSHA256 || arep.Events != 20 {
		t.Fatalf("VerifyFile: %+v, %v", arep, err)
	}
	rep := verifyAll(t, path)
	if rep.ArchivedSeq != 20 || rep.ArchivedHash != evs[19].Hash || rep.ArchiveFile != filepath.Base(res.Path) || rep.Events != 31 || rep.LastSeq != 51 {
		t.Fatalf("Verify after archive: %+v", rep)
	}
	jrep, err := VerifyFile(t.Context(), mustOpenFile(t, filepath.Join(dir, "audit.jsonl")), nil)
	if err != nil || !jrep.OK || jrep.ArchivedSeq != 20 {
		t.Fatalf("VerifyFile of the cut journal: %+v, %v", jrep, err)
	}

	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ss, _ := db.Sessions(); len(ss) != 4 { // s3, s4, s5, the archive's
		t.Errorf("Sessions after archive: %d", len(ss))
	}
	if a, ok, err := db.Archived("s2"); err != nil || !ok || len(a.Files) != 1 || a.Files[0] != rep.ArchiveFile || a.Events != 10 || a.LastSeq != 20 {
		t.Errorf("Archived(s2) = %+v, %v, %v", a, ok, err)
	}
	if _, ok, _ := db.Archived("s3"); ok {
		t.Error("s3 reported archived")
	}
	for _, tc := range []struct {
		t    time.Time
		want uint64
	}{{evs[0].Time, 20}, {evs[24].Time, 25}, {evs[49].Time.Add(time.Hour), 50}} {
		if got, err := db.SeqAt(tc.t); err != nil || got != tc.want {
			t.Errorf("SeqAt(%v) = %d, %v; want %d (events 1..20 archived)", tc.t, got, err, tc.want)
		}
	}
	// The chain goes on after the archive.
	more := fillSessions(t, db, 6, 2, 5)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res2, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 45, Before: more[0].Time})
	if err != nil {
		t.Fatalf("second Archive: %v", err)
	}
	if r := res2.Record; r.First != 21 || r.Last != 40 || r.Prev != evs[19].Hash || r.Head != evs[39].Hash {
		t.Fatalf("second record %+v", r)
	}
	rep = verifyAll(t, path)
	if rep.ArchivedSeq != 40 || rep.LastSeq != more[len(more)-1].Seq+1 {
		t.Fatalf("Verify after the second archive: %+v", rep)
	}
	if _, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 40}); !errors.Is(err, ErrNothingToArchive) {
		t.Fatalf("archiving again: %v, want ErrNothingToArchive", err)
	}

	// Restore both: the chain from seq 1 to 40, verified in full.
	rdir := t.TempDir()
	first, last, err := Restore(t.Context(), filepath.Join(rdir, "events.db"), []string{res.Path, res2.Path})
	if err != nil || first.First != 1 || last.Last != 40 {
		t.Fatalf("Restore: %+v %+v %v", first, last, err)
	}
	rrep := verifyAll(t, filepath.Join(rdir, "events.db"))
	if rrep.LastSeq != 40 || rrep.LastHash != evs[39].Hash || rrep.ArchivedSeq != 0 {
		t.Fatalf("restored store: %+v", rrep)
	}
	// Restore the second alone: it verifies from its seal's prev.
	rdir2 := t.TempDir()
	if _, _, err := Restore(t.Context(), filepath.Join(rdir2, "events.db"), []string{res2.Path}); err != nil {
		t.Fatal(err)
	}
	rdb, err := Open(filepath.Join(rdir2, "events.db"), &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if frep, err := rdb.Verify(t.Context(), &VerifyOptions{From: 20, FromHash: evs[19].Hash}); err != nil || !frep.OK || frep.LastSeq != 40 {
		t.Fatalf("Verify from an anchor on a restored later archive: %+v, %v", frep, err)
	}
	if frep, err := rdb.Verify(t.Context(), &VerifyOptions{From: 10, FromHash: evs[9].Hash}); err != nil || frep.OK || !strings.Contains(frep.Problem, "starts at seq 21, after the anchor (seq 10)") {
		t.Fatalf("Verify from an anchor before the live chain: %+v, %v", frep, err)
	}
	if _, _, err := Restore(t.Context(), filepath.Join(t.TempDir(), "events.db"), []string{res2.Path, res.Path}); err == nil {
		t.Fatal("Restore accepted archives out of order")
	}
}

func mustOpenFile(t *testing.T, p string) io.Reader {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// rewriteArchive decompresses an archive file, applies edit to its lines
// and compresses it again.
func rewriteArchive(t *testing.T, p string, edit func(lines [][]byte) [][]byte) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines = edit(lines[:len(lines)-1])
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(bytes.Join(lines, nil))
	zw.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestArchiveTamper: a changed, removed or added event, a changed seal or
// header, a cut file and trailing bytes each fail VerifyFile, naming
// where.
func TestArchiveTamper(t *testing.T) {
	path, _ := archiveStore(t, t.TempDir())
	res, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 30})
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edit    func(lines [][]byte) [][]byte
		raw     func(b []byte) []byte
		badSeq  uint64
		problem string
	}{
		{name: "event edited", edit: func(l [][]byte) [][]byte {
			l[7] = bytes.Replace(l[7], []byte("message"), []byte("messagE"), 1)
			return l
		}, badSeq: 7, problem: "hash"},
		{name: "event removed", edit: func(l [][]byte) [][]byte { return append(l[:12:12], l[13:]...) }, badSeq: 12, problem: "seq"},
		{name: "seal digest", edit: func(l [][]byte) [][]byte {
			n := len(l) - 1
			var s ArchiveRecord
			json.Unmarshal(l[n], &s)
			s.SHA256 = strings.Repeat("a", 64)
			l[n] = append(mustMarshal(s), '\n')
			return l
		}, badSeq: 30, problem: "digest"},
		{name: "seal head", edit: func(l [][]byte) [][]byte {
			n := len(l) - 1
			var s ArchiveRecord
			json.Unmarshal(l[n], &s)
			s.Head = strings.Repeat("b", 64)
			l[n] = append(mustMarshal(s), '\n')
			return l
		}, badSeq: 30, problem: "head"},
		{name: "seal missing", edit: func(l [][]byte) [][]byte { return l[:len(l)-1] }, badSeq: 31, problem: "seal"},
		{name: "header range", edit: func(l [][]byte) [][]byte {
			l[0] = []byte(strings.Replace(string(l[0]), `"last":30,"count":30`, `"last":29,"count":29`, 1))
			return l
		}, badSeq: 30, problem: "seal"},
		{name: "cut", raw: func(b []byte) []byte { return b[:len(b)-10] }, badSeq: 31, problem: "cut"},
		{name: "trailing bytes", raw: func(b []byte) []byte { return append(b, "junk"...) }, badSeq: 31, problem: "after"},
		{name: "not gzip", raw: func(b []byte) []byte { return []byte("{}\n") }, badSeq: 1, problem: "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(res.Path, orig, 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.edit != nil {
				rewriteArchive(t, res.Path, tc.edit)
			} else {
				os.WriteFile(res.Path, tc.raw(bytes.Clone(orig)), 0o600)
			}
			rep, err := verifyArchivePath(t.Context(), res.Path)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.BadSeq != tc.badSeq || !strings.Contains(rep.Problem, tc.problem) {
				t.Fatalf("VerifyFile = OK %v, bad seq %d: %s; want seq %d, %q", rep.OK, rep.BadSeq, rep.Problem, tc.badSeq, tc.problem)
			}
		})
	}
}

// TestArchiveAnchorTamper: the live chain's start is vouched for by its
// archive event: removing the first live events (from the journal or the
// store), or the archive event's record of the head, fails verification.
func TestArchiveAnchorTamper(t *testing.T) {
	dir := t.TempDir()
	path, _ := archiveStore(t, dir)
	if _, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20}); err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(journal, []byte("\n"))
	// The journal without its first three lines (seqs 21..23).
	rep, err := VerifyFile(t.Context(), bytes.NewReader(bytes.Join(lines[3:], nil)), nil)
	if err != nil || rep.OK || rep.BadSeq != 23 || !strings.Contains(rep.Problem, "no archive event") {
		t.Fatalf("VerifyFile of a journal missing its first lines: %+v, %v", rep, err)
	}
	// The journal without the archive event (the last line).
	rep, err = VerifyFile(t.Context(), bytes.NewReader(bytes.Join(lines[:len(lines)-2], nil)), nil)
	if err != nil || rep.OK || !strings.Contains(rep.Problem, "no archive event") {
		t.Fatalf("VerifyFile without the archive event: %+v, %v", rep, err)
	}
	// The store without seqs 21 and 22.
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		for _, seq := range []uint64{21, 22} {
			if err := tx.Bucket(bucketEvents).Delete(seqKey(seq)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketIndex).Delete(indexKey("s3", seq)); err != nil {
				return err
			}
		}
		return nil
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep.Report, err = db.Verify(t.Context(), nil)
	if err != nil || rep.OK || rep.BadSeq != 22 || !strings.Contains(rep.Problem, "no archive event") {
		t.Fatalf("Verify of a store missing its first live events: %+v, %v", rep, err)
	}
}

// TestArchiveCrash: a crash after any step of Archive leaves a store that
// opens and verifies, holding either the old chain (with or without the
// archive event) or the new one; after a crash of the process or of the
// machine (the store is then rebuilt from its journal).
func TestArchiveCrash(t *testing.T) {
	steps := []string{"archive-written", "recorded", "built", "marked", "journal-swapped"}
	for _, step := range steps {
		for _, machine := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/machine=%v", step, machine), func(t *testing.T) {
				dir := t.TempDir()
				path, evs := archiveStore(t, dir)
				_, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20, crash: func(s string) error {
					if s == step {
						return errors.New("boom")
					}
					return nil
				}})
				if !errors.Is(err, errCrash) {
					t.Fatalf("Archive: %v, want the simulated crash", err)
				}
				if !machine {
					// Read-only, before any writable open: old or new, verifiable.
					db, err := Open(path, &Options{ReadOnly: true})
					if err != nil {
						t.Fatal(err)
					}
					rep, err := db.Verify(t.Context(), nil)
					arep, aerr := db.VerifyJournal(t.Context(), rep)
					db.Close()
					if err != nil || aerr != nil || !rep.OK || !arep.OK {
						t.Fatalf("read-only after a crash at %s: %+v %v; export %+v %v", step, rep, err, arep, aerr)
					}
				}
				if machine {
					// The machine went down: Open rebuilds bbolt from the journal.
					if err := os.WriteFile(statePath(path), []byte(stateOpen+"another-boot\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
				rep := verifyAll(t, path)
				wantNew := step == "marked" || step == "journal-swapped"
				switch {
				case wantNew && (rep.ArchivedSeq != 20 || rep.LastSeq != 51):
					t.Fatalf("after a crash at %s: %+v, want the archived store", step, rep)
				case !wantNew && (rep.ArchivedSeq != 0 || rep.LastSeq < 50 || rep.Events != rep.LastSeq):
					t.Fatalf("after a crash at %s: %+v, want the whole chain", step, rep)
				}
				if step == "archive-written" && rep.LastSeq != 50 {
					t.Fatalf("the archive event was recorded before the crash at %s: %+v", step, rep)
				}
				for _, p := range []string{archiveMarker(path), archiveNewDB(path), archiveNewJournal(filepath.Join(dir, "audit.jsonl"))} {
					if _, err := os.Stat(p); err == nil {
						t.Errorf("%s left behind after Open", p)
					}
				}
				// Archiving again finishes the job (or has nothing left to do).
				_, err = Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20})
				if wantNew != errors.Is(err, ErrNothingToArchive) || (!wantNew && err != nil) {
					t.Fatalf("Archive again: %v", err)
				}
				rep = verifyAll(t, path)
				if rep.ArchivedSeq != 20 || rep.ArchivedHash != evs[19].Hash || rep.LastSeq != 51 {
					t.Fatalf("after archiving again: %+v; want one archive event (51)", rep)
				}
			})
		}
	}
}

// TestArchiveCut: the cut never splits a session, never takes a session
// that must stay live, and refuses when nothing is left to archive.
func TestArchiveCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ao     ArchiveOptions
		want   uint64 // 0: ErrNothingToArchive
		before bool
	}{
		{name: "boundary", ao: ArchiveOptions{UpTo: 20}, want: 20},
		{name: "inside a session", ao: ArchiveOptions{UpTo: 29}, want: 20},
		{name: "keep s3", ao: ArchiveOptions{Keep: keep("s3")}, want: 20},
		{name: "keep s2 and s4", ao: ArchiveOptions{UpTo: 45, Keep: keep("s4", "s2")}, want: 10},
		{name: "keep s1", ao: ArchiveOptions{Keep: keep("s1")}},
		{name: "inside the first", ao: ArchiveOptions{UpTo: 5}},
		{name: "before a date", before: true, want: 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, evs := archiveStore(t, t.TempDir())
			if tc.before {
				tc.ao.Before = evs[34].Time // inside s4
			}
			res, err := Archive(t.Context(), path, nil, tc.ao)
			if tc.want == 0 {
				if !errors.Is(err, ErrNothingToArchive) {
					t.Fatalf("Archive: %v, want ErrNothingToArchive", err)
				}
				if rep := verifyAll(t, path); rep.LastSeq != 50 {
					t.Fatalf("a refused archive changed the chain: %+v", rep)
				}
				return
			}
			if err != nil || res.Record.Last != tc.want {
				t.Fatalf("Archive: %+v, %v; want the cut at %d", res.Record, err, tc.want)
			}
		})
	}
	// Interleaved sessions have no boundary.
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, db, 30)
	db.Close()
	if _, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20}); !errors.Is(err, ErrNothingToArchive) {
		t.Fatalf("Archive of interleaved sessions: %v", err)
	}
}

func keep(ids ...string) func(*DB) ([]string, error) {
	return func(*DB) ([]string, error) { return ids, nil }
}

// TestArchiveIndexes: after an archive, a restart finds the recent list,
// the summaries and a state index of the live chain only (the index is
// rebuilt once from the live events), and appends go on.
func TestArchiveIndexes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.UseIndex(t.Context(), testIndexer("t1")); err != nil {
		t.Fatal(err)
	}
	fillSessions(t, db, 1, 5, 10)
	db.Close()
	if _, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 30}); err != nil {
		t.Fatal(err)
	}
	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.IndexCurrent("t1") {
		t.Fatal("the state index survived the archive: it would describe archived events")
	}
	if err := db.UseIndex(t.Context(), testIndexer("t1")); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for r, err := range db.IndexScan([]byte("k/")) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, binary.BigEndian.Uint64(r.Key[2:]))
	}
	if len(seqs) != 21 || seqs[0] != 31 || seqs[20] != 51 {
		t.Fatalf("state index after the archive: %v", seqs)
	}
	s1, err1 := db.IndexGet([]byte("n/s1"))
	s4, err4 := db.IndexGet([]byte("n/s4"))
	if s1 != nil || string(s4) != "40" || err1 != nil || err4 != nil {
		t.Fatal("state index holds archived sessions")
	}
	var recent []string
	for si, err := range db.RecentSessions(0) {
		if err != nil {
			t.Fatal(err)
		}
		recent = append(recent, si.ID)
	}
	if strings.Join(recent, ",") != ArchiveSession+",s5,s4" {
		t.Fatalf("recent sessions after the archive: %v", recent)
	}
	if _, err := db.Append(t.Context(), Event{Session: "s1", Type: "user_message", Actor: "user:bob"}); err != nil {
		t.Fatal(err)
	}
	if si, ok, _ := db.Session("s1"); !ok || si.Events != 1 || si.FirstSeq != 52 {
		t.Fatalf("a continued archived session: %+v", si)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.ArchivedSeq != 30 {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
}

// TestArchiveSplit: with sessions always in flight there is no boundary
// near the limit, so the cut is the limit: the sessions across it keep
// their later events live, and Archived says where the earlier ones are.
func TestArchiveSplit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	for i := range 3000 {
		evs = append(evs, Event{Session: fmt.Sprintf("s%d", i%4), Type: "note", Actor: "bot"})
	}
	if _, err := db.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	db.Close()
	res, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 2000})
	if err != nil || res.Record.Last != 2000 || res.Record.Sessions != 4 {
		t.Fatalf("Archive: %+v, %v", res.Record, err)
	}
	rep := verifyAll(t, path)
	if rep.ArchivedSeq != 2000 || rep.Events != 1001 {
		t.Fatalf("Verify: %+v", rep)
	}
	db, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, ok, err := db.Archived("s1")
	si, live, _ := db.Session("s1")
	if err != nil || !ok || a.Events != 500 || a.FirstSeq != 2 || a.LastSeq != 1998 || !live || si.FirstSeq != 2002 || si.Events != 250 {
		t.Fatalf("split session: archived %+v %v, live %+v %v", a, ok, si, live)
	}
}

// TestPythonVerifierArchive: the outside verifier checks the live journal
// from the archive's head, and an archive's lines, as deploy/audit.md says.
func TestPythonVerifierArchive(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not installed; .ci/run installs it")
		}
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	path, evs := archiveStore(t, dir)
	res, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20})
	if err != nil {
		t.Fatal(err)
	}
	anchor := fmt.Sprintf("20:%s", evs[19].Hash)
	out, err := exec.Command(py, "testdata/verify_jsonl.py", filepath.Join(dir, "audit.jsonl"), anchor).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok 31 events, last seq 51") {
		t.Fatalf("verify_jsonl.py on the live journal from the archive's head: %v: %s", err, out)
	}
	out, err = exec.Command("sh", "-c", `zcat "$1" | sed '1d;$d' > "$2" && python3 testdata/verify_jsonl.py "$2"`, "sh", res.Path, filepath.Join(dir, "a.jsonl")).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok 20 events, last seq 20, last hash "+evs[19].Hash) {
		t.Fatalf("verify_jsonl.py on the archive's lines: %v: %s", err, out)
	}
}

// TestArchiveRefusesAnEditedEvent: an event edited in place (its hash not
// recomputed) among those to archive makes Archive refuse, naming the seq:
// archiving it would take the evidence of the edit out of the live store,
// whose audit verify would then pass.
func TestArchiveRefusesAnEditedEvent(t *testing.T) {
	dir := t.TempDir()
	path, _ := archiveStore(t, dir)
	withBolt(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		line := bytes.Replace(b.Get(seqKey(7)), []byte("message"), []byte("messagE"), 1)
		return b.Put(seqKey(7), line)
	})
	_, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20})
	if err == nil || !strings.Contains(err.Error(), "event 7") {
		t.Fatalf("Archive of a chain with an edited event: %v, want a refusal naming event 7", err)
	}
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rep, err := db.Verify(t.Context(), nil); err != nil || rep.OK || rep.BadSeq != 7 {
		t.Fatalf("Verify after the refused archive: %+v, %v; want the edit still reported at seq 7", rep, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "archive", archiveName(1, 20))); err == nil {
		t.Error("an archive file of the edited events was left behind")
	}
}

// TestVerifyFromRemovedPrefix: an anchor before the live chain's start is
// called archived only where an archive event records that start; a prefix
// removed without one is reported as removed, as a full Verify reports it.
func TestVerifyFromRemovedPrefix(t *testing.T) {
	dir := t.TempDir()
	path, evs := archiveStore(t, dir)
	withBolt(t, path, func(tx *bolt.Tx) error {
		for _, ev := range evs[:20] {
			if err := tx.Bucket(bucketEvents).Delete(seqKey(ev.Seq)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketIndex).Delete(indexKey(ev.Session, ev.Seq)); err != nil {
				return err
			}
		}
		return nil
	})
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(t.Context(), &VerifyOptions{From: 10, FromHash: evs[9].Hash})
	if err != nil || rep.OK || rep.BadSeq != 11 || strings.Contains(rep.Problem, "were archived") || !strings.Contains(rep.Problem, "no archive event") {
		t.Fatalf("Verify from an anchor in a removed prefix: %+v, %v; want it reported removed, not archived", rep, err)
	}
	// With the archive event (a real archive), it says where they are.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path2, evs2 := archiveStore(t, t.TempDir())
	res, err := Archive(t.Context(), path2, nil, ArchiveOptions{UpTo: 20})
	if err != nil {
		t.Fatal(err)
	}
	db2, err := Open(path2, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	rep, err = db2.Verify(t.Context(), &VerifyOptions{From: 10, FromHash: evs2[9].Hash})
	if err != nil || rep.OK || !strings.Contains(rep.Problem, "events up to seq 20 were archived in "+filepath.Base(res.Path)) {
		t.Fatalf("Verify from an anchor in a removed prefix: %+v, %v; want it reported removed, not archived", rep, err)
	}
}

// TestArchiveCutSplitsLogs: a log session (the archive's own, or one
// ArchiveOptions.Log names, like the daemon's daily checkpoints) spans the
// whole chain; the cut still finds the conversations' boundary.
func TestArchiveCutSplitsLogs(t *testing.T) {
	for _, logSession := range []string{ArchiveSession, "system:verify"} {
		t.Run(logSession, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.db")
			db, err := Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			note := Event{Session: logSession, Type: "note", Actor: "system"}
			if _, err := db.Append(t.Context(), note); err != nil {
				t.Fatal(err)
			}
			fillSessions(t, db, 1, 4, 10) // s1 2..11, s2 12..21, s3 22..31, s4 32..41
			if _, err := db.Append(t.Context(), note); err != nil {
				t.Fatal(err)
			}
			db.Close()
			res, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 25, Log: func(s string) bool { return s == "system:verify" }})
			if err != nil || res.Record.Last != 21 {
				t.Fatalf("Archive: %+v, %v; want the cut at the end of s2 (21)", res.Record, err)
			}
			verifyAll(t, path)
		})
	}
}

// TestArchiveKeepsAnotherArchive: an archive file of the same name but
// other contents (another store's, archived into the same --dir) is never
// replaced: Archive refuses and leaves the store as it was.
func TestArchiveKeepsAnotherArchive(t *testing.T) {
	adir := t.TempDir()
	path1, _ := archiveStore(t, t.TempDir())
	res1, err := Archive(t.Context(), path1, nil, ArchiveOptions{UpTo: 20, Dir: adir})
	if err != nil {
		t.Fatal(err)
	}
	// Another store with the same seqs but other events.
	path2 := filepath.Join(t.TempDir(), "events.db")
	db, err := Open(path2, nil)
	if err != nil {
		t.Fatal(err)
	}
	fillSessions(t, db, 11, 5, 10)
	db.Close()
	_, err = Archive(t.Context(), path2, nil, ArchiveOptions{UpTo: 20, Dir: adir})
	if err == nil || !strings.Contains(err.Error(), "another archive") {
		t.Fatalf("Archive into a file of another store's archive: %v, want a refusal", err)
	}
	rep, err := verifyArchivePath(t.Context(), res1.Path)
	if err != nil || !rep.OK || rep.FileSHA256 != res1.Record.FileSHA256 {
		t.Fatalf("the first store's archive after the second's attempt: %+v, %v", rep, err)
	}
	if rep := verifyAll(t, path2); rep.ArchivedSeq != 0 || rep.LastSeq != 50 {
		t.Fatalf("the refused store changed: %+v", rep)
	}
}

// TestArchiveNoStore: archiving a path with no store (a mistyped --db)
// says so and creates nothing there.
func TestArchiveNoStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo")
	_, err := Archive(t.Context(), filepath.Join(dir, "events.db"), nil, ArchiveOptions{UpTo: 10})
	if err == nil || !strings.Contains(err.Error(), "no store") {
		t.Fatalf("Archive of a missing store: %v", err)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("Archive of a missing store created %s", dir)
	}
}

// TestReplayJournalAfterAnArchive: a journal that starts after seq 1 (a
// restored later archive, or a live journal after an archive restored
// alone into an empty state dir) is replayed into the store once, and the
// journal keeps each line once.
func TestReplayJournalAfterAnArchive(t *testing.T) {
	dir := t.TempDir()
	path, evs := archiveStore(t, dir)
	if _, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20}); err != nil {
		t.Fatal(err)
	}
	live, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fillSessions(t, db, 6, 2, 5)
	db.Close()
	res2, err := Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 40})
	if err != nil {
		t.Fatal(err)
	}
	// A later archive restored alone.
	rdir := t.TempDir()
	if _, _, err := Restore(t.Context(), filepath.Join(rdir, "events.db"), []string{res2.Path}); err != nil {
		t.Fatal(err)
	}
	j, err := os.ReadFile(filepath.Join(rdir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(j, []byte("\n")); n != 20 {
		t.Fatalf("the restored journal of events 21..40 has %d lines", n)
	}
	rep, err := VerifyFile(t.Context(), bytes.NewReader(j), nil)
	if err != nil || rep.LastSeq != 40 || rep.LastHash != evs[39].Hash {
		t.Fatalf("the restored journal: %+v, %v", rep, err)
	}
	// The live journal of the first archive, alone in an empty state dir
	// (audit rebuild builds the store from it).
	jdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(jdir, "audit.jsonl"), live, 0o600); err != nil {
		t.Fatal(err)
	}
	rep.Report = verifyAll(t, filepath.Join(jdir, "events.db"))
	if rep.ArchivedSeq != 20 || rep.LastSeq != 51 || rep.Events != 31 {
		t.Fatalf("a store built from the journal after an archive: %+v", rep)
	}
}

// TestArchiveRefusesAnEditedJournal: a journal line edited among those the
// cut drops makes Archive refuse: the cut would remove the evidence of the
// edit (the store's events are archived, but the export no longer shows it
// was tampered with).
func TestArchiveRefusesAnEditedJournal(t *testing.T) {
	dir := t.TempDir()
	path, evs := archiveStore(t, dir)
	jp := filepath.Join(dir, "audit.jsonl")
	b, err := os.ReadFile(jp)
	if err != nil {
		t.Fatal(err)
	}
	// Seq 7 replaced by a line hashed anew (the next line's prev no longer
	// matches it).
	lines := bytes.SplitAfter(b, []byte("\n"))
	ev7 := evs[6]
	ev7.Payload = bytes.Replace(ev7.Payload, []byte("message"), []byte("messagE"), 1)
	forged, _ := encodeLine(&ev7)
	if len(forged) != len(lines[6])-1 {
		t.Fatalf("forge: %d bytes for %d", len(forged), len(lines[6])-1)
	}
	lines[6] = append(forged, '\n')
	if err := os.WriteFile(jp, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Archive(t.Context(), path, nil, ArchiveOptions{UpTo: 20})
	if err == nil || !strings.Contains(err.Error(), "seq 7") {
		t.Fatalf("Archive with an edited journal line: %v, want a refusal naming seq 7", err)
	}
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rep, err := db.VerifyJournal(t.Context(), Report{}); err != nil || rep.OK || rep.BadSeq != 7 {
		t.Fatalf("VerifyJournal after the refused archive: %+v, %v", rep, err)
	}
}

// TestArchiveRecordOutsideItsSession: only an archive event of the archive
// session vouches for the chain's start (what ArchivedBefore, the viewer
// and the checkpoints' check read): a record of the same type elsewhere
// does not.
func TestArchiveRecordOutsideItsSession(t *testing.T) {
	dir := t.TempDir()
	path, evs := archiveStore(t, dir)
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := ArchiveRecord{File: archiveName(1, 20), First: 1, Last: 20, Count: 20, Prev: ZeroHash, Head: evs[19].Hash, SHA256: ZeroHash}
	if _, err := db.Append(t.Context(), Event{Session: "s9", Type: TypeArchive, Actor: "user:mallory", Payload: mustMarshal(rec)}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	withBolt(t, path, func(tx *bolt.Tx) error {
		for _, ev := range evs[:20] {
			if err := tx.Bucket(bucketEvents).Delete(seqKey(ev.Seq)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketIndex).Delete(indexKey(ev.Session, ev.Seq)); err != nil {
				return err
			}
			if err := tx.Bucket(bucketIndex).Delete(summaryKey(ev.Session)); err != nil {
				return err
			}
		}
		return tx.DeleteBucket(bucketRecent)
	})
	rdb, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	rep, err := rdb.Verify(t.Context(), nil)
	if err != nil || rep.OK || !strings.Contains(rep.Problem, "no archive event") {
		t.Fatalf("Verify of a prefix vouched for outside the archive session: %+v, %v", rep, err)
	}
}

// TestPendingCutIgnoredWhileHeld: a cut's marker with new files beside the
// store, found while a process holds the store (a daemon, which finished
// any cut when it opened it), was not left by an archive: a read-only open
// does not read those files instead of the live store (a planted copy
// would verify in place of a tampered live store).
func TestPendingCutIgnoredWhileHeld(t *testing.T) {
	dir := t.TempDir()
	path, _ := archiveStore(t, dir)
	other, _ := archiveStore(t, t.TempDir())
	db, err := Open(path, nil) // the daemon
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A copy of another store, planted as a pending cut.
	if err := os.WriteFile(archiveMarker(path), []byte(archiveFormat+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(archiveNewDB(path), mustReadFile(t, other), 0o600); err != nil {
		t.Fatal(err)
	}
	rdb, err := Open(path, &Options{ReadOnly: true})
	if err == nil {
		rdb.Close()
		t.Fatal("a read-only open of a held store read the files of a planted cut")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("read-only open of a held store: %v, want ErrLocked", err)
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
