package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// logOf is a stand-in replicated log over stores: each batch is applied to
// every store (ApplyLines), then each archive event of it (ApplyArchive),
// as store/replica's state machine does. Its stores may be swapped.
type logOf struct {
	t   testing.TB
	dbs []*DB
}

func (l *logOf) replicate(lines [][]byte) error {
	for _, db := range l.dbs {
		if err := db.ApplyLines(lines); err != nil {
			return err
		}
		for _, line := range lines {
			ev, err := decodeLine(line)
			if err != nil {
				return err
			}
			if err := db.ApplyArchive(context.Background(), ev); err != nil {
				return err
			}
		}
	}
	return nil
}

func archiveFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, _ := os.ReadDir(filepath.Join(dir, "archive"))
	for _, e := range entries {
		out[e.Name()] = mustReadFile(t, filepath.Join(dir, "archive", e.Name()))
	}
	return out
}

// TestArchiveReplicated: the leader of a (stand-in) replicated log records
// two archives; every store writes the same archive files as it applies
// their events and keeps its events until its next Open, which cuts them:
// then both stores start after the second archive, verify to one head, and
// a replay of the lines from seq 1 is a no-op (the lines before the cut
// passed over, the one at the cut checked).
func TestArchiveReplicated(t *testing.T) {
	ld, fd := t.TempDir(), t.TempDir()
	log := &logOf{t: t}
	open := func() (*DB, *DB) {
		f := openTest(t, fd, nil)
		l := openTest(t, ld, &Options{Replicate: log.replicate})
		log.dbs = []*DB{f, l}
		return l, f
	}
	leader, follower := open()
	fillSessions(t, leader, 1, 5, 10) // 1..50
	if _, err := follower.ArchiveReplicated(t.Context(), ArchiveOptions{UpTo: 25}); err == nil {
		t.Error("a store without Options.Replicate recorded a replicated archive")
	}
	res, err := leader.ArchiveReplicated(t.Context(), ArchiveOptions{UpTo: 25})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Record; r.First != 1 || r.Last != 20 || res.Event.Seq != 51 {
		t.Fatalf("first archive: %+v, event %d", r, res.Event.Seq)
	}
	fillSessions(t, leader, 6, 2, 10) // 52..71
	res2, err := leader.ArchiveReplicated(t.Context(), ArchiveOptions{UpTo: 60})
	if err != nil {
		t.Fatal(err)
	}
	if r := res2.Record; r.First != 21 || r.Last != 51 || r.Prev != res.Record.Head || res2.Event.Seq != 72 {
		t.Fatalf("second archive (after the pending first): %+v, event %d", r, res2.Event.Seq)
	}
	before := allLinesOf(t, leader)
	for _, db := range []*DB{leader, follower} {
		if base, _, _ := db.base(); base != 0 || db.LastSeq() != 72 {
			t.Fatalf("%s before its next open: base %d, head %d", db.path, base, db.LastSeq())
		}
		if recs, err := readPending(db.path); err != nil || len(recs) != 2 {
			t.Fatalf("pending archives: %v, %v", recs, err)
		}
	}
	lf, ff := archiveFiles(t, ld), archiveFiles(t, fd)
	if len(lf) != 2 || len(ff) != 2 {
		t.Fatalf("archive files: leader %d, follower %d", len(lf), len(ff))
	}
	for name, b := range lf {
		if !bytes.Equal(b, ff[name]) {
			t.Errorf("%s differs between the stores", name)
		}
		rep, err := VerifyFile(t.Context(), bytes.NewReader(b), &FileOptions{Archive: true})
		if err != nil || !rep.OK {
			t.Errorf("%s: %+v, %v", name, rep, err)
		}
	}
	leader.Close()
	follower.Close()

	leader, follower = open()
	var heads []string
	for _, db := range []*DB{leader, follower} {
		if _, err := os.Stat(archivePending(db.path)); err == nil {
			t.Errorf("%s: the pending file is left after the cut", db.path)
		}
		rep, err := db.Verify(t.Context(), nil)
		if err != nil || !rep.OK || rep.ArchivedSeq != 51 || rep.ArchiveFile != res2.Record.File || rep.LastSeq != 72 {
			t.Fatalf("%s after the cut: %+v, %v", db.path, rep, err)
		}
		heads = append(heads, rep.LastHash)
		if a, ok, err := db.Archived("s3"); err != nil || !ok || len(a.Files) != 1 || a.Files[0] != res2.Record.File {
			t.Errorf("Archived(s3) = %+v, %v, %v", a, ok, err)
		}
		if a, ok, err := db.Archived("s1"); err != nil || !ok || a.Files[0] != res.Record.File {
			t.Errorf("Archived(s1) = %+v, %v, %v", a, ok, err)
		}
	}
	if heads[0] != heads[1] {
		t.Fatalf("heads differ: %s, %s", heads[0], heads[1])
	}
	if err := follower.ApplyLines(before); err != nil {
		t.Fatalf("a replay from seq 1 after the cut: %v", err)
	}
	var de *DivergedError
	if err := follower.ApplyLines([][]byte{forge(51, hashOf(before[49]), "x")}); !errors.As(err, &de) || de.Seq != 51 {
		t.Errorf("another line at the cut's seq = %v, want a DivergedError at 51", err)
	}
	fillSessions(t, leader, 8, 1, 10)
	if follower.LastSeq() != 82 {
		t.Fatalf("the follower did not go on after the cut: head %d", follower.LastSeq())
	}
}

// TestApplyArchiveRefusesAnotherFile: a store that applies an archive event
// whose record is not the file its own events make (another head, digest,
// file digest or session count) puts no file in place, marks nothing
// pending, and says so (ErrArchiveDiffers); the record as made is taken.
func TestApplyArchiveRefusesAnotherFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(r *ArchiveRecord)
	}{
		{"as made", func(*ArchiveRecord) {}},
		{"head", func(r *ArchiveRecord) { r.Head = strings.Repeat("a", 64) }},
		{"sha256", func(r *ArchiveRecord) { r.SHA256 = strings.Repeat("b", 64) }},
		{"file sha256", func(r *ArchiveRecord) { r.FileSHA256 = strings.Repeat("c", 64) }},
		{"sessions", func(r *ArchiveRecord) { r.Sessions++ }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := openTest(t, t.TempDir(), nil), openTest(t, t.TempDir(), nil)
			fillSessions(t, src, 1, 3, 10)
			tmp := filepath.Join(t.TempDir(), archiveName(1, 20))
			rec, _, err := src.writeArchive(t.Context(), tmp, 0, ZeroHash, 20, nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(&rec)
			evs, err := src.Append(t.Context(), Event{Session: ArchiveSession, Type: TypeArchive, Actor: "operator", Payload: mustMarshal(rec)})
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.ApplyLines(allLinesOf(t, src)); err != nil {
				t.Fatal(err)
			}
			err = dst.ApplyArchive(t.Context(), evs[0])
			_, perr := os.Stat(archivePending(dst.path))
			_, ferr := os.Stat(filepath.Join(archiveDir(dst.path), rec.File))
			if tc.name == "as made" {
				if err != nil || perr != nil || ferr != nil {
					t.Fatalf("the archive as made: %v (pending %v, file %v)", err, perr, ferr)
				}
				return
			}
			if !errors.Is(err, ErrArchiveDiffers) {
				t.Fatalf("ApplyArchive of a record with another %s = %v, want ErrArchiveDiffers", tc.name, err)
			}
			if perr == nil || ferr == nil {
				t.Errorf("after the refusal: pending file %v, archive file %v (want neither)", perr, ferr)
			}
		})
	}
}

// TestApplyLinesAfterAnArchive: an empty store takes a chain that starts
// after an archive (a snapshot of a cut store) only with the archive event
// that records the events before it; it then verifies to the same head.
func TestApplyLinesAfterAnArchive(t *testing.T) {
	dir := t.TempDir()
	log := &logOf{t: t}
	leader := openTest(t, dir, &Options{Replicate: log.replicate})
	log.dbs = []*DB{leader}
	fillSessions(t, leader, 1, 5, 10)
	res, err := leader.ArchiveReplicated(t.Context(), ArchiveOptions{UpTo: 30})
	if err != nil {
		t.Fatal(err)
	}
	fillSessions(t, leader, 6, 1, 10)
	leader.Close()
	leader = openTest(t, dir, nil)
	lines := allLinesOf(t, leader)
	vouch := lines[res.Event.Seq-res.Record.Last-1]

	fresh := openTest(t, t.TempDir(), nil)
	if err := fresh.ApplyLines(lines); !errors.Is(err, ErrInvalid) {
		t.Fatalf("lines from seq %d without the archive event = %v, want ErrInvalid", res.Record.Last+1, err)
	}
	if err := fresh.ApplyLinesAfter(lines[0], lines); !errors.Is(err, ErrInvalid) {
		t.Fatalf("with another event as the archive's = %v, want ErrInvalid", err)
	}
	// An archive event that records the right range but is not the
	// chain's line at its seq is refused once the lines reach that seq.
	forged, _ := encodeLine(&Event{Seq: res.Event.Seq, Time: res.Event.Time, Session: ArchiveSession, Type: TypeArchive,
		Actor: "user:mallory", Payload: res.Event.Payload, Prev: res.Event.Prev})
	var de *DivergedError
	if err := openTest(t, t.TempDir(), nil).ApplyLinesAfter(forged, lines); !errors.As(err, &de) || de.Seq != res.Event.Seq {
		t.Fatalf("with a forged archive event = %v, want a DivergedError at seq %d", err, res.Event.Seq)
	}
	if err := fresh.ApplyLinesAfter(vouch, lines[:3]); err != nil {
		t.Fatal(err)
	}
	if err := fresh.ApplyLines(lines[3:]); err != nil {
		t.Fatal(err)
	}
	rep, err := fresh.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.ArchivedSeq != res.Record.Last {
		t.Fatalf("Verify: %+v, %v", rep, err)
	}
	if s, h := leader.Head(); s != rep.LastSeq || h != rep.LastHash {
		t.Fatalf("heads: leader %d %s, new store %d %s", s, h, rep.LastSeq, rep.LastHash)
	}
	if err := fresh.ApplyLinesAfter(vouch, lines); !errors.Is(err, ErrInvalid) {
		t.Errorf("ApplyLinesAfter into a store that holds events = %v", err)
	}
	// Its journal starts after the archive too: it opens and verifies.
	fresh.Close()
	fresh = openTest(t, filepath.Dir(fresh.path), nil)
	if arep, err := fresh.VerifyJournal(t.Context(), Report{}); err != nil || !arep.OK || arep.LastSeq != rep.LastSeq {
		t.Fatalf("VerifyJournal: %+v, %v", arep, err)
	}
}
