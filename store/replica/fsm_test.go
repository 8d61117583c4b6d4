package replica

import (
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
	if r := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: encodeEntry(a)}); r != nil {
		t.Fatalf("first entry: %v", r)
	}
	r := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: encodeEntry(b)})
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

// FuzzDecodeEntry: any entry either decodes into lines that encode back to
// it, or is refused; links never panics.
func FuzzDecodeEntry(f *testing.F) {
	f.Add([]byte(entryMagic + `{"seq":1,"prev":"0","hash":"1"}` + "\n"))
	f.Add([]byte(entryMagic + "\n\n"))
	f.Add([]byte("x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := decodeEntry(b)
		if err != nil {
			return
		}
		if string(encodeEntry(lines)) != string(b) {
			t.Fatalf("decode/encode of %q changed it", b)
		}
		links(lines)
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
