package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestVerifyFromAnchor: Verify from an anchor checks the events after a trusted
// anchor and catches a tampered event after it, an anchor the chain does
// not continue (a rewritten history), and a deleted tail.
func TestVerifyFromAnchor(t *testing.T) {
	fx := newTamperFixture(t)
	anchor := hashOf(fx.lines[9]) // seq 10
	open := func(t *testing.T, dir string) *DB {
		db, err := Open(filepath.Join(dir, "events.db"), &Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open(t, fx.copyTo(t))
	var seen uint64
	rep, err := db.Verify(context.Background(), &VerifyOptions{From: 10, FromHash: anchor, Progress: func(seq uint64) { seen = seq }})
	if err != nil || !rep.OK || rep.Events != 20 || rep.LastSeq != 30 || rep.LastHash != hashOf(fx.lines[29]) || seen != 30 {
		t.Fatalf("Verify(From: 10) = %+v, %v (progress %d)", rep, err, seen)
	}
	if rep, _ := db.Verify(context.Background(), &VerifyOptions{From: 30, FromHash: hashOf(fx.lines[29])}); !rep.OK || rep.Events != 0 {
		t.Errorf("Verify(From: head) = %+v", rep)
	}
	if rep, _ := db.Verify(context.Background(), &VerifyOptions{From: 10, FromHash: hashOf(fx.lines[8])}); rep.OK || rep.BadSeq != 11 {
		t.Errorf("Verify from an anchor with a wrong anchor hash = %+v, want broken at 11", rep)
	}
	if rep, _ := db.Verify(context.Background(), &VerifyOptions{From: 30, FromHash: hashOf(fx.lines[28])}); rep.OK {
		t.Errorf("Verify(From: head) with a wrong hash = %+v, want broken", rep)
	}
	if _, err := db.Verify(context.Background(), &VerifyOptions{From: 10, FromHash: "xyz"}); err == nil {
		t.Error("Verify from an anchor with a malformed hash: no error")
	}

	tests := []struct {
		name    string
		tamper  func(tx *bolt.Tx) error
		wantSeq uint64
	}{
		{"changed payload after the anchor", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketEvents).Put(seqKey(20), bytes.Replace(fx.lines[19], []byte("message 19"), []byte("message X"), 1))
		}, 20},
		{"rewritten event with recomputed hash", func(tx *bolt.Tx) error {
			ev, _ := decodeLine(fx.lines[19])
			return tx.Bucket(bucketEvents).Put(seqKey(20), forge(20, hashOf(fx.lines[18]), ev.Session))
		}, 21},
		{"deleted last event", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketEvents).Delete(seqKey(30))
		}, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fx.copyTo(t)
			withBolt(t, filepath.Join(dir, "events.db"), tt.tamper)
			rep, err := open(t, dir).Verify(context.Background(), &VerifyOptions{From: 10, FromHash: anchor})
			if err != nil || rep.OK || rep.BadSeq != tt.wantSeq {
				t.Errorf("Verify from an anchor = %+v, %v; want broken at %d", rep, err, tt.wantSeq)
			}
		})
	}
}

// TestVerifyAuditWithTrustsOnlyIdenticalLines: after a good Verify, the
// export's lines identical to the store are checked by comparison; a line
// that differs is still found, and a bad store report trusts nothing.
func TestVerifyAuditWithTrustsOnlyIdenticalLines(t *testing.T) {
	fx := newTamperFixture(t)
	dir := fx.copyTo(t)
	jsonl := filepath.Join(dir, "audit.jsonl")
	db, err := Open(filepath.Join(dir, "events.db"), &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(context.Background(), nil)
	if err != nil || !rep.OK {
		t.Fatal(rep, err)
	}
	if arep, err := db.VerifyJournal(context.Background(), rep); err != nil || !arep.OK || arep.Events != 30 || arep.LastHash != rep.LastHash {
		t.Fatalf("VerifyJournal = %+v, %v", arep, err)
	}
	b, _ := os.ReadFile(jsonl)
	if err := os.WriteFile(jsonl, bytes.Replace(b, []byte("message 7"), []byte("message X"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Report{rep, {}} {
		arep, err := db.VerifyJournal(context.Background(), r)
		if err != nil || arep.OK || arep.BadSeq != 8 || !strings.Contains(arep.Problem, "hash") {
			t.Errorf("tampered export, store report OK=%v: %+v, %v; want broken at 8", r.OK, arep, err)
		}
	}
}
