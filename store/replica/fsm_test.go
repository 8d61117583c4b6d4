package replica

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/thinbot/thinbot/store"
)

// linesOf appends one event to a scratch store and returns its stored line.
func lineAfter(t *testing.T, db *store.DB, session string) [][]byte {
	t.Helper()
	evs, err := db.Append(context.Background(), store.Event{Session: session, Type: "user_message", Actor: "user:a"})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for chunk, err := range db.Lines(evs[0].Seq) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, chunk...)
	}
	return out
}

// TestStaleEntryIsRefused: of two entries formed on the same head (an old
// leader's and a new one's), the state machine applies the first and
// refuses the second with store.ErrStale, so no two events share a seq.
func TestStaleEntryIsRefused(t *testing.T) {
	open := func() *store.DB {
		db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	// Two leaders' batches, both formed on the empty chain.
	a, b := lineAfter(t, open(), "from-a"), lineAfter(t, open(), "from-b")
	db := open()
	var failed error
	f := &fsm{db: db, fail: func(err error) { failed = err }, head: link{Hash: store.ZeroHash}}
	if r := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: encodeEntry(nil, a)}); r != nil {
		t.Fatalf("first entry: %v", r)
	}
	r := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: encodeEntry(nil, b)})
	if err, _ := r.(error); !errors.Is(err, store.ErrStale) {
		t.Fatalf("second entry on the same head: %v, want ErrStale", r)
	}
	if failed != nil {
		t.Fatalf("a stale entry failed the node: %v", failed)
	}
	ev, _, err := db.Event(1)
	if err != nil || ev.Session != "from-a" || db.LastSeq() != 1 {
		t.Fatalf("store holds %+v (head %d), want from-a alone", ev, db.LastSeq())
	}
}

// FuzzDecodeEntry: any entry either decodes into lines (and a vouch) that
// encode back to it, or is refused; links and continues never panic.
func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte(entryMagic + `{"seq":1,"prev":"0","hash":"1"}` + "\n"))
	f.Add([]byte(entryMagic + "\n\n"))
	f.Add([]byte(entryAfterMagic + `{"seq":9,"session":"` + store.ArchiveSession + `","type":"archive","payload":{}}` + "\n" + `{"seq":5,"prev":"0","hash":"1"}` + "\n"))
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		vouch, lines, err := decodeEntry(b)
		if err != nil {
			return
		}
		if string(encodeEntry(vouch, lines)) != string(b) {
			t.Fatalf("decode/encode of %q changed it", b)
		}
		if ls, err := links(lines); err == nil {
			continues(link{Hash: store.ZeroHash}, vouch, ls)
		}
	})
}

// FuzzParseHello: a hello parses into two fields without spaces, or is
// refused.
func FuzzParseHello(f *testing.F) {
	f.Add("thinbot-raft/1 c1 n1\n")
	f.Add("thinbot-raft/1 c1\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, n, err := parseHello(s)
		if err == nil && (c == "" || n == "") {
			t.Fatalf("parseHello(%q) = %q, %q", s, c, n)
		}
	})
}

// archivedLone writes a lone store in dir (sessions "old" 1..10, "new"
// 11..15), archives it up to seq 10 as `thinbot audit archive` does (its
// archive event is seq 16) and appends 17..20: the store's chain starts
// after seq 1. It returns the store, open, its lines (11..20) and the
// archive's record.
func archivedLone(t *testing.T, dir string) (*store.DB, [][]byte, store.ArchiveRecord) {
	t.Helper()
	path := filepath.Join(dir, "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, db, 10, "old")
	appendN(t, db, 5, "new")
	db.Close()
	res, err := store.Archive(t.Context(), path, nil, store.ArchiveOptions{UpTo: 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.First != 1 || res.Record.Last != 10 || res.Event.Seq != 16 {
		t.Fatalf("archive: %+v, its event at %d", res.Record, res.Event.Seq)
	}
	if db, err = store.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	appendN(t, db, 4, "after")
	var lines [][]byte
	for chunk, err := range db.Lines(0) {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, chunk...)
	}
	if len(lines) != 10 {
		t.Fatalf("the archived store holds %d lines, want 10 (11..20)", len(lines))
	}
	return db, lines, res.Record
}

// TestFirstEntryAfterAnArchive: before anything is applied, the state
// machine takes an entry that starts after seq 1 only when it names the
// archive event that records the events before it (a lone store cut by an
// archive seeding a cluster); an entry without it, with another event as
// its vouch, or on a head that has moved is refused with store.ErrStale on
// every node alike, and a log whose line at the vouch's seq is another
// event fails the node. An empty store and the seeding store itself both
// take the good entries, to the same verified head.
func TestFirstEntryAfterAnArchive(t *testing.T) {
	seed, lines, rec := archivedLone(t, t.TempDir())
	vouch := lines[16-11]
	type machine struct {
		f      *fsm
		failed error
	}
	newFSM := func(db *store.DB) *machine {
		m := &machine{}
		m.f = &fsm{db: db, fail: func(err error) { m.failed = err }, head: link{Hash: store.ZeroHash}}
		return m
	}
	empty := func() *store.DB {
		db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	apply := func(m *machine, i uint64, vouch []byte, lines [][]byte) error {
		err, _ := m.f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: encodeEntry(vouch, lines)}).(error)
		return err
	}
	// stale applies an entry that must be refused: the cursor stays.
	stale := func(name string, m *machine, i uint64, vouch []byte, lines [][]byte) {
		t.Helper()
		head := m.f.head
		if err := apply(m, i, vouch, lines); !errors.Is(err, store.ErrStale) || m.failed != nil || m.f.head != head {
			t.Errorf("%s: %v (node failed: %v, cursor %+v, was %+v), want ErrStale", name, err, m.failed, m.f.head, head)
		}
	}

	m := newFSM(empty())
	stale("no archive event", m, 1, nil, lines)
	stale("another event as the archive's", m, 1, lines[0], lines)
	stale("an archive event that records other events", m, 1, vouch, lines[1:])
	if m.f.db.LastSeq() != 0 {
		t.Fatalf("the store took refused entries: head %d", m.f.db.LastSeq())
	}
	// A vouch is for the log's first entry only.
	m = newFSM(empty())
	if err := apply(m, 1, nil, lineAfter(t, empty(), "first")); err != nil {
		t.Fatal(err)
	}
	stale("on a head that moved", m, 2, vouch, lines)

	// The seeding store holds the lines: the log's line at the archive
	// event's seq must still be the event named.
	forged := bytes.Replace(bytes.Clone(vouch), []byte(`"hash":"`), []byte(`"hash":"f`), 1)
	m = newFSM(seed)
	if err := apply(m, 1, forged, lines[:3]); err != nil {
		t.Fatalf("a first entry whose archive event is not yet in the log: %v", err)
	}
	var de *store.DivergedError
	if err := apply(m, 2, nil, lines[3:]); !errors.As(err, &de) || de.Seq != 16 || m.failed == nil {
		t.Errorf("the log's seq 16 is not the archive event named: %v (node failed: %v)", err, m.failed)
	}

	// The good entries: on an empty store (the archive event in a later
	// entry) and on the seeding store.
	fresh := newFSM(empty())
	leader := newFSM(seed)
	for _, m := range []*machine{fresh, leader} {
		if err := apply(m, 1, vouch, lines[:3]); err != nil {
			t.Fatalf("first entry: %v", err)
		}
		if err := apply(m, 2, nil, lines[3:]); err != nil || m.failed != nil {
			t.Fatalf("second entry: %v (node failed: %v)", err, m.failed)
		}
		if m.f.head.Seq != 20 || m.f.vouch != nil {
			t.Errorf("cursor %+v, vouch %+v after the log reached seq 20", m.f.head, m.f.vouch)
		}
		stale("a vouch again", m, 3, vouch, lines)
	}
	rep, err := fresh.f.db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.ArchivedSeq != rec.Last || rep.LastSeq != 20 {
		t.Fatalf("the new store: %+v, %v", rep, err)
	}
	if s, h := seed.Head(); s != rep.LastSeq || h != rep.LastHash {
		t.Fatalf("heads: seed %d %s, new store %d %s", s, h, rep.LastSeq, rep.LastHash)
	}
}
