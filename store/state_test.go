package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// testIndexer keeps k/SEQ for every event and n/SESSION for the last event
// of each session.
func testIndexer(name string) Indexer {
	return Indexer{Name: name, Ops: func(ev *Event) []IndexOp {
		return []IndexOp{
			{Key: binary.BigEndian.AppendUint64([]byte("k/"), ev.Seq), Value: []byte(ev.Session)},
			{Key: []byte("n/" + ev.Session), Value: []byte(fmt.Sprint(ev.Seq))},
		}
	}}
}

// TestStateIndex: the index is kept in the commit's transaction, caught up
// with events appended without it, rebuilt under a new name, and scanned
// in both directions across chunks.
func TestStateIndex(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, db, 10) // before the index: caught up by UseIndex
	if err := db.UseIndex(context.Background(), testIndexer("t1")); err != nil {
		t.Fatal(err)
	}
	n := scanChunk + 100
	evs := make([]Event, 0, n)
	for i := range n - 10 {
		evs = append(evs, Event{Session: fmt.Sprintf("s%d", i%7), Type: "note"})
	}
	if _, err := db.Append(context.Background(), evs...); err != nil {
		t.Fatal(err)
	}
	if !db.IndexCurrent("t1") || db.IndexCurrent("t2") {
		t.Fatal("IndexCurrent")
	}
	var seqs []uint64
	for r, err := range db.IndexScan([]byte("k/")) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, binary.BigEndian.Uint64(r.Key[2:]))
	}
	if len(seqs) != n || seqs[0] != 1 || seqs[n-1] != uint64(n) {
		t.Fatalf("IndexScan: %d keys, %v…", len(seqs), seqs[:3])
	}
	seqs = seqs[:0]
	for r, err := range db.IndexScanBack([]byte("k/"), binary.BigEndian.AppendUint64([]byte("k/"), uint64(n-5))) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, binary.BigEndian.Uint64(r.Key[2:]))
	}
	if len(seqs) != n-6 || seqs[0] != uint64(n-6) || seqs[len(seqs)-1] != 1 {
		t.Fatalf("IndexScanBack: %d keys, first %d last %d", len(seqs), seqs[0], seqs[len(seqs)-1])
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]-1 {
			t.Fatalf("IndexScanBack out of order at %d: %d after %d", i, seqs[i], seqs[i-1])
		}
	}
	// A scan is a value: ranged again, it starts over.
	back := db.IndexScanBack([]byte("k/"), nil)
	for i := range 2 {
		count := 0
		for _, err := range back {
			if err != nil {
				t.Fatal(err)
			}
			count++
		}
		if count != n {
			t.Fatalf("IndexScanBack, range %d of the same value: %d keys, want %d", i+1, count, n)
		}
	}
	if got, err := db.IndexGet([]byte("n/s0")); len(got) == 0 || err != nil {
		t.Errorf("IndexGet n/s0: %q, %v", got, err)
	}
	db.Close()

	// Appended without the index, then a new name: rebuilt from seq 1.
	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fill(t, db, 3)
	if db.IndexCurrent("t1") {
		t.Error("index current after an append without it")
	}
	if err := db.UseIndex(context.Background(), testIndexer("t2")); err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, err := range db.IndexScan([]byte("k/")) {
		if err != nil {
			t.Fatal(err)
		}
		count++
	}
	if count != n+3 || !db.IndexCurrent("t2") {
		t.Errorf("rebuilt index has %d keys, want %d", count, n+3)
	}
	rep, err := db.Verify(context.Background(), nil)
	if err != nil || !rep.OK {
		t.Errorf("Verify with an index: %+v, %v", rep, err)
	}
}

// TestRecentSessions: sessions newest first, paged by seq; a store without
// the recent index (an older thinbot's) is read by the fallback read-only
// and gets the index at its first writable open; Verify catches a session
// hidden from it.
func TestRecentSessions(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range readChunk + 50 {
		if _, err := db.Append(context.Background(), Event{Session: fmt.Sprintf("s%04d", i), Type: "note"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Append(context.Background(), Event{Session: "s0003", Type: "note"}); err != nil { // s0003 is now the newest
		t.Fatal(err)
	}
	db.Close()
	ids := func(db *DB, before uint64) []string {
		var out []string
		for si, err := range db.RecentSessions(before) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, si.ID)
		}
		return out
	}
	check := func(db *DB) {
		t.Helper()
		all := ids(db, 0)
		if len(all) != readChunk+50 || all[0] != "s0003" || all[1] != fmt.Sprintf("s%04d", readChunk+49) || all[len(all)-1] != "s0000" {
			t.Fatalf("RecentSessions: %d, %v … %v", len(all), all[:2], all[len(all)-1])
		}
		if page := ids(db, 10); len(page) != 8 || page[0] != "s0008" || slicesContains(page, "s0003") {
			t.Errorf("RecentSessions(before 10) = %v", page)
		}
	}
	withBolt(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketRecent) })
	ro, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	check(ro) // the fallback
	ro.Close()
	db, err = Open(path, nil) // builds it
	if err != nil {
		t.Fatal(err)
	}
	check(db)
	if rep, err := db.Verify(context.Background(), nil); err != nil || !rep.OK {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	db.Close()
	// An older thinbot appended without keeping the index: it is not used
	// (no false alarm from Verify), and rebuilt at the next writable open.
	withBolt(t, path, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketRecent).Delete(seqKey(7)); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyRecentSeq, seqKey(5))
	})
	ro, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	check(ro)
	if rep, err := ro.Verify(context.Background(), nil); err != nil || !rep.OK {
		t.Errorf("Verify with a stale recent index = %+v, %v", rep, err)
	}
	ro.Close()
	db, err = Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	check(db)
	if _, err := db.Append(context.Background(), Event{Session: "s0001", Type: "note"}); err != nil {
		t.Fatal(err)
	}
	if all := ids(db, 0); all[0] != "s0001" || all[1] != "s0003" || len(all) != readChunk+50 {
		t.Errorf("after an append: %v…", all[:2])
	}
	db.Close()
	withBolt(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketRecent).Delete(seqKey(7)) }) // hide s0006
	ro, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if rep, err := ro.Verify(context.Background(), nil); err != nil || rep.OK || !strings.Contains(rep.Problem, "hidden") {
		t.Errorf("Verify with a session hidden from the recent index = %+v, %v", rep, err)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestStateIndexEqualPutWritesNothing: an op that puts the value the index
// already holds (agentcore's branch of a session, at each of its events)
// does not rewrite the index's pages: a commit writes as many pages as one
// whose events have no ops.
func TestStateIndexEqualPutWritesNothing(t *testing.T) {
	writes := func(ops func(*Event) []IndexOp) int64 {
		db := openTest(t, t.TempDir(), nil)
		if err := db.UseIndex(t.Context(), Indexer{Name: "eq", Ops: ops}); err != nil {
			t.Fatal(err)
		}
		// Pages of index records, so that a put has a leaf and a branch
		// to rewrite.
		evs := make([]Event, 300)
		for i := range evs {
			evs[i] = Event{Session: fmt.Sprintf("s%03d", i), Type: "note"}
		}
		if _, err := db.Append(t.Context(), evs...); err != nil {
			t.Fatal(err)
		}
		before := db.bolt.Stats().TxStats
		if _, err := db.Append(t.Context(), Event{Session: "s007", Type: "note"}); err != nil {
			t.Fatal(err)
		}
		after := db.bolt.Stats().TxStats
		return after.GetWrite() - before.GetWrite()
	}
	branch := func(ev *Event) []IndexOp {
		return []IndexOp{{Key: []byte("b/" + ev.Session), Value: []byte("1")}, {Key: []byte("x/" + ev.Session), Value: []byte("padding to fill a few pages")}}
	}
	none := func(ev *Event) []IndexOp {
		if ev.Seq > 300 {
			return nil
		}
		return branch(ev)
	}
	if got, want := writes(branch), writes(none); got != want {
		t.Errorf("a commit whose ops put equal values wrote %d pages, one without ops %d", got, want)
	}
}

// TestIndexScanReportsAFailedRead: a read of the state index that fails
// (here the store closed between two chunks of a scan, and then before
// one) ends the scan with the error, never as if the records had ended:
// a caller counting tokens or collecting open runs would otherwise take
// the first chunk, or nothing, for all there is. IndexGet reports it too.
func TestIndexScanReportsAFailedRead(t *testing.T) {
	n := scanChunk + 100
	open := func(t *testing.T) *DB {
		db, err := Open(filepath.Join(t.TempDir(), "events.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := db.UseIndex(t.Context(), testIndexer("t1")); err != nil {
			t.Fatal(err)
		}
		evs := make([]Event, n)
		for i := range evs {
			evs[i] = Event{Session: "s0", Type: "note"}
		}
		if _, err := db.Append(t.Context(), evs...); err != nil {
			t.Fatal(err)
		}
		return db
	}
	scans := map[string]func(db *DB) iter.Seq2[IndexRecord, error]{
		"forward":  func(db *DB) iter.Seq2[IndexRecord, error] { return db.IndexScan([]byte("k/")) },
		"backward": func(db *DB) iter.Seq2[IndexRecord, error] { return db.IndexScanBack([]byte("k/"), nil) },
	}
	for name, scan := range scans {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			records, closed := 0, false
			var got error
			for r, err := range scan(db) {
				if err != nil {
					if r.Key != nil || r.Value != nil {
						t.Errorf("error with a record %q", r.Key)
					}
					got = err
					continue // the error must be the last element
				}
				if got != nil {
					t.Fatal("a record after the error")
				}
				records++
				if !closed {
					// The scan holds no transaction while yielding: the
					// store closes under it, between two chunks.
					if err := db.Close(); err != nil {
						t.Fatal(err)
					}
					closed = true
				}
			}
			if !errors.Is(got, ErrClosed) || records != scanChunk {
				t.Fatalf("scan over a store closed after the first chunk: %d records, error %v; want %d records and ErrClosed", records, got, scanChunk)
			}
			// Closed before it starts: the error is all it yields.
			records, got = 0, nil
			for _, err := range scan(db) {
				if err != nil {
					got = err
				} else {
					records++
				}
			}
			if !errors.Is(got, ErrClosed) || records != 0 {
				t.Fatalf("scan of a closed store: %d records, error %v", records, got)
			}
		})
	}
	db := open(t)
	db.Close()
	if v, err := db.IndexGet([]byte("n/s0")); !errors.Is(err, ErrClosed) || v != nil {
		t.Fatalf("IndexGet on a closed store: %q, %v", v, err)
	}
	if db.IndexCurrent("t1") {
		t.Fatal("IndexCurrent on a closed store: a reader would trust an index it cannot read")
	}
}
