package store

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// withBolt opens path with bbolt directly and runs fn in a write
// transaction: the tampering an attacker with file access could do.
func withBolt(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Update(fn); err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

// tamperFixture is a closed store of 30 events; session b holds seqs 13, 16
// and 19.
type tamperFixture struct {
	dir   string
	lines [][]byte // stored lines, index = seq-1
}

func newTamperFixture(t *testing.T) tamperFixture {
	t.Helper()
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	fill(t, db, 30)
	db.Close()
	f, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(f, []byte("\n")), []byte("\n"))
	var b []uint64
	for i, l := range lines {
		if bytes.Contains(l, []byte(`"session":"b"`)) {
			b = append(b, uint64(i+1))
		}
	}
	if len(lines) != 30 || len(b) != 3 || b[0] != 13 || b[2] != 19 {
		t.Fatalf("fixture: %d lines, session b at %v", len(lines), b)
	}
	return tamperFixture{dir: dir, lines: lines}
}

// copyTo copies the fixture's files into a fresh directory.
func (fx tamperFixture) copyTo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"events.db", "audit.jsonl"} {
		b, err := os.ReadFile(filepath.Join(fx.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// forge builds a correctly hashed event line with the given seq and prev.
func forge(seq uint64, prev, session string) []byte {
	line, _ := encodeLine(&Event{
		Seq: seq, Time: time.Date(2025, 3, 4, 5, 6, 8, 0, time.UTC), Session: session,
		Type: "user_message", Actor: "user:mallory", Payload: []byte(`{"text":"forged"}`), Prev: prev,
	})
	return line
}

func hashOf(line []byte) string {
	ev, _ := decodeLine(line)
	return ev.Hash
}

func TestVerifyDetectsTamperingInBolt(t *testing.T) {
	fx := newTamperFixture(t)
	put := func(tx *bolt.Tx, seq uint64, v []byte) error {
		return tx.Bucket(bucketEvents).Put(seqKey(seq), v)
	}
	del := func(tx *bolt.Tx, seq uint64, session string) error {
		if err := tx.Bucket(bucketEvents).Delete(seqKey(seq)); err != nil {
			return err
		}
		return tx.Bucket(bucketIndex).Delete(indexKey(session, seq))
	}
	tests := []struct {
		name    string
		tamper  func(tx *bolt.Tx) error
		wantSeq uint64
	}{
		{"changed payload", func(tx *bolt.Tx) error {
			return put(tx, 5, bytes.Replace(fx.lines[4], []byte("message 4"), []byte("message X"), 1))
		}, 5},
		{"changed hash", func(tx *bolt.Tx) error {
			l := bytes.Clone(fx.lines[4])
			l[len(l)-3] ^= 1
			return put(tx, 5, l)
		}, 5},
		{"rewritten event with recomputed hash", func(tx *bolt.Tx) error {
			return put(tx, 5, forge(5, hashOf(fx.lines[3]), "a"))
		}, 6},
		// Only the recorded head (seq and hash) can catch a rewritten last
		// event: no later event links to it.
		{"rewritten last event with recomputed hash", func(tx *bolt.Tx) error {
			return put(tx, 30, forge(30, hashOf(fx.lines[28]), "c"))
		}, 31},
		{"deleted event", func(tx *bolt.Tx) error { return del(tx, 5, "a") }, 5},
		{"deleted last event", func(tx *bolt.Tx) error { return del(tx, 30, "c") }, 30},
		{"deleted session", func(tx *bolt.Tx) error {
			for _, s := range []uint64{13, 16, 19} {
				if err := del(tx, s, "b"); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketIndex).Delete(summaryKey("b"))
		}, 13},
		{"deleted session index", func(tx *bolt.Tx) error {
			for _, s := range []uint64{13, 16, 19} {
				if err := tx.Bucket(bucketIndex).Delete(indexKey("b", s)); err != nil {
					return err
				}
			}
			return nil
		}, 13},
		{"deleted session record", func(tx *bolt.Tx) error { return tx.Bucket(bucketIndex).Delete(summaryKey("b")) }, 13},
		{"session record of a deleted session", func(tx *bolt.Tx) error {
			si := sessionInfo{events: 2, firstSeq: 31, lastSeq: 32}
			return tx.Bucket(bucketIndex).Put(summaryKey("gone"), si.encode())
		}, 31},
		{"malformed key in the session index", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIndex).Put([]byte("junk"), nil)
		}, 0},
		{"session record changed", func(tx *bolt.Tx) error {
			si := sessionInfo{events: 2, firstSeq: 13, lastSeq: 16}
			return tx.Bucket(bucketIndex).Put(summaryKey("b"), si.encode())
		}, 13},
		{"index entry pointing at nothing", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIndex).Put(indexKey("ghost", 99), nil)
		}, 99},
		{"index entry pointing at another session", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketIndex).Put(indexKey("b", 7), nil)
		}, 7},
		{"two events swapped", func(tx *bolt.Tx) error {
			if err := put(tx, 4, fx.lines[4]); err != nil {
				return err
			}
			return put(tx, 5, fx.lines[3])
		}, 4},
		{"event inserted in the middle", func(tx *bolt.Tx) error {
			// Shift 6..30 up by one and put a forged, correctly linked seq 6.
			for seq := uint64(30); seq >= 6; seq-- {
				if err := put(tx, seq+1, fx.lines[seq-1]); err != nil {
					return err
				}
			}
			if err := put(tx, 6, forge(6, hashOf(fx.lines[4]), "a")); err != nil {
				return err
			}
			return tx.Bucket(bucketIndex).Put(indexKey("a", 6), nil)
		}, 7},
		{"non-canonical line with valid hash", func(tx *bolt.Tx) error {
			l := bytes.Replace(fx.lines[4], []byte(`"seq":5,`), []byte(`"seq": 5,`), 1)
			return put(tx, 5, l)
		}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := fx.copyTo(t)
			withBolt(t, filepath.Join(dir, "events.db"), tt.tamper)
			db := openTest(t, dir, &Options{ReadOnly: true})
			rep, err := db.Verify(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.BadSeq != tt.wantSeq || rep.Problem == "" {
				t.Errorf("Verify = OK %v, BadSeq %d (%s); want BadSeq %d", rep.OK, rep.BadSeq, rep.Problem, tt.wantSeq)
			}
		})
	}
	t.Run("untouched", func(t *testing.T) {
		db := openTest(t, fx.copyTo(t), &Options{ReadOnly: true})
		rep, err := db.Verify(t.Context(), nil)
		if err != nil || !rep.OK || rep.Events != 30 || rep.Sessions != 3 || rep.LastHash != hashOf(fx.lines[29]) {
			t.Errorf("Verify(untouched) = %+v, %v", rep, err)
		}
	})
}

func TestVerifyDetectsTamperingInJSONL(t *testing.T) {
	fx := newTamperFixture(t)
	edit := func(fn func(ls [][]byte) [][]byte) func() []byte {
		return func() []byte {
			ls := make([][]byte, len(fx.lines))
			for i, l := range fx.lines {
				ls[i] = bytes.Clone(l)
			}
			ls = fn(ls)
			return append(bytes.Join(ls, []byte("\n")), '\n')
		}
	}
	tests := []struct {
		name      string
		file      func() []byte
		wantSeq   uint64 // 0: VerifyFile alone finds nothing
		auditSeq  uint64
		auditMore uint64 // Report.Beyond from VerifyJournal
	}{
		{"changed payload", edit(func(ls [][]byte) [][]byte {
			ls[4] = bytes.Replace(ls[4], []byte("message 4"), []byte("message X"), 1)
			return ls
		}), 5, 5, 26},
		{"changed hash", edit(func(ls [][]byte) [][]byte {
			ls[4][len(ls[4])-3] ^= 1
			return ls
		}), 5, 5, 26},
		{"deleted event", edit(func(ls [][]byte) [][]byte { return append(ls[:4], ls[5:]...) }), 5, 5, 26},
		{"deleted session", edit(func(ls [][]byte) [][]byte {
			var out [][]byte
			for _, l := range ls {
				if !bytes.Contains(l, []byte(`"session":"b"`)) {
					out = append(out, l)
				}
			}
			return out
		}), 13, 13, 18},
		{"two events swapped", edit(func(ls [][]byte) [][]byte {
			ls[3], ls[4] = ls[4], ls[3]
			return ls
		}), 4, 4, 27},
		{"event inserted in the middle", edit(func(ls [][]byte) [][]byte {
			return append(ls[:5], append([][]byte{forge(6, hashOf(ls[4]), "a")}, ls[5:]...)...)
		}), 7, 6, 25},
		{"duplicated line", edit(func(ls [][]byte) [][]byte {
			return append(ls[:5], append([][]byte{ls[4]}, ls[5:]...)...)
		}), 6, 6, 25},
		{"truncated tail", edit(func(ls [][]byte) [][]byte { return ls[:27] }), 0, 28, 3},
		{"cut last line", func() []byte {
			f := edit(func(ls [][]byte) [][]byte { return ls })()
			return f[:len(f)-30]
		}, 30, 30, 1},
		{"empty file", func() []byte { return nil }, 0, 1, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file()
			rep, err := VerifyFile(t.Context(), bytes.NewReader(file), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantSeq == 0 {
				if !rep.OK {
					t.Errorf("VerifyFile = BadSeq %d (%s); want OK (not detectable alone)", rep.BadSeq, rep.Problem)
				}
			} else if rep.OK || rep.BadSeq != tt.wantSeq {
				t.Errorf("VerifyFile = OK %v, BadSeq %d (%s); want BadSeq %d", rep.OK, rep.BadSeq, rep.Problem, tt.wantSeq)
			}

			dir := fx.copyTo(t)
			path := filepath.Join(dir, "tampered.jsonl")
			if err := os.WriteFile(path, file, 0o600); err != nil {
				t.Fatal(err)
			}
			db := openTest(t, dir, &Options{ReadOnly: true, AuditPath: path})
			rep.Report, err = db.VerifyJournal(t.Context(), Report{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.BadSeq != tt.auditSeq || rep.Beyond != tt.auditMore {
				t.Errorf("VerifyJournal = OK %v, BadSeq %d, Beyond %d (%s); want BadSeq %d, Beyond %d",
					rep.OK, rep.BadSeq, rep.Beyond, rep.Problem, tt.auditSeq, tt.auditMore)
			}
			if tt.name == "truncated tail" && !strings.Contains(rep.Problem, "3 more events") {
				t.Errorf("VerifyJournal problem %q does not say how many events the store has beyond", rep.Problem)
			}
		})
	}
}

// TestVerifyFlagsTimeGoingBackwards: a clock stepped back leaves the chain
// intact but verify names the event, in the store and in the export.
func TestVerifyFlagsTimeGoingBackwards(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := []time.Duration{0, time.Second, 2 * time.Second, -time.Hour, 3 * time.Second}
	i := 0
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := Open(path, &Options{Now: func() time.Time { d := clock[min(i, len(clock)-1)]; i++; return now.Add(d) }})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range clock {
		if _, err := db.Append(context.Background(), Event{Session: "s", Type: "note", Actor: "test", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := db.Verify(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.WarningCount != 1 || !strings.Contains(rep.Warnings[0], "time goes backwards at seq 4") {
		t.Errorf("store report = %+v", rep)
	}
	f, err := os.Open(db.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jrep, err := VerifyFile(context.Background(), f, nil)
	if err != nil || !jrep.OK || jrep.WarningCount != 1 {
		t.Errorf("export report = %+v, %v", jrep, err)
	}
}

// TestEventsIndexWithoutEvent: a session index entry whose event is gone
// is an error, yielded as such, not a shorter session.
func TestEventsIndexWithoutEvent(t *testing.T) {
	fx := newTamperFixture(t)
	dir := fx.copyTo(t)
	withBolt(t, filepath.Join(dir, "events.db"), func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).Delete(seqKey(16))
	})
	db, err := Open(filepath.Join(dir, "events.db"), &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seqs []uint64
	for ev, e := range db.Events("b", 0) {
		if err = e; e != nil {
			break
		}
		seqs = append(seqs, ev.Seq)
	}
	if err == nil || !strings.Contains(err.Error(), `store: read: session "b" index points at missing event 16`) {
		t.Errorf("Events(b) = %v, %v; want the missing event 16 as an error", seqs, err)
	}
}

// TestJSONLHashes: the second read of a verified export finds the hashes
// at the seqs asked for (up to last, in a file that may start after seq 1)
// and reports a wanted line that no longer verifies (the file changed
// between the reads) as an error.
func TestJSONLHashes(t *testing.T) {
	fx := newTamperFixture(t)
	file := func(ls [][]byte) *bytes.Reader { return bytes.NewReader(append(bytes.Join(ls, []byte("\n")), '\n')) }
	got, err := FileHashes(t.Context(), file(fx.lines), []uint64{5, 30, 31, 5}, 30, nil)
	if err != nil || len(got) != 2 || got[5] != hashOf(fx.lines[4]) || got[30] != hashOf(fx.lines[29]) {
		t.Errorf("FileHashes(5, 30, 31) = %v, %v", got, err)
	}
	// Past last: the lines a running daemon appended since the check.
	if got, err := FileHashes(t.Context(), file(fx.lines), []uint64{9, 20}, 10, nil); err != nil || len(got) != 1 || got[9] != hashOf(fx.lines[8]) {
		t.Errorf("FileHashes(9, 20) up to 10 = %v, %v", got, err)
	}
	// A file that starts after archived events.
	if got, err := FileHashes(t.Context(), file(fx.lines[3:]), []uint64{2, 4}, 30, nil); err != nil || len(got) != 1 || got[4] != hashOf(fx.lines[3]) {
		t.Errorf("FileHashes(2, 4) of a file from seq 4 = %v, %v", got, err)
	}
	changed := slices.Clone(fx.lines)
	changed[6] = bytes.Replace(changed[6], []byte("message 6"), []byte("message X"), 1)
	if got, err := FileHashes(t.Context(), file(changed), []uint64{7}, 30, nil); err == nil || !strings.Contains(err.Error(), "seq 7 no longer verifies") {
		t.Errorf("FileHashes of a line changed since: %v, %v", got, err)
	}
	if got, err := FileHashes(t.Context(), file(changed), []uint64{8}, 30, nil); err != nil || got[8] != hashOf(fx.lines[7]) {
		t.Errorf("FileHashes past a changed line not asked for: %v, %v", got, err)
	}
}
