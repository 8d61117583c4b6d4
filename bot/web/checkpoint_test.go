package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// The verified checkpoint across restarts (issue #23): a good full
// verification is recorded in the chain, a restart verifies only the
// events after it, and the full verification still runs at least daily
// and when an auditor asks.

func openChain(t *testing.T, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path, &store.Options{AuditPath: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func appendNotes(t *testing.T, db *store.DB, n int) {
	t.Helper()
	evs := make([]store.Event, n)
	for i := range evs {
		evs[i] = store.Event{Session: bigSession, Type: "note", Actor: "test", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	if _, err := db.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
}

// waitRecorded waits (bounded) until s's verifier has recorded a
// checkpoint, and returns it.
func waitRecorded(t *testing.T, s *Server) agentcore.ChainCheckpoint {
	t.Helper()
	for range 1000 {
		s.verifyMu.Lock()
		cp := s.verified.recorded
		s.verifyMu.Unlock()
		if cp != nil {
			return *cp
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no checkpoint recorded")
	return agentcore.ChainCheckpoint{}
}

// editLine rewrites the stored line at seq with edit, as an attacker with
// write access to the file could. With rehash, it recomputes that event's
// hash and every later event's prev and hash and the recorded chain head
// (store/doc.go: HASH = SHA-256 of the line without its hash field), so
// that each event verifies on its own: a rewritten history.
func editLine(t *testing.T, path string, seq uint64, rehash bool, edit func([]byte) []byte) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hashField := regexp.MustCompile(`,"hash":"[0-9a-f]{64}"\}$`)
	prevField := regexp.MustCompile(`,"prev":"[0-9a-f]{64}"`)
	err = b.Update(func(tx *bolt.Tx) error {
		events, meta := tx.Bucket([]byte("events")), tx.Bucket([]byte("meta"))
		key := func(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }
		line := edit(bytes.Clone(events.Get(key(seq))))
		if !rehash {
			return events.Put(key(seq), line)
		}
		var prev string
		for s := seq; ; s++ {
			if s > seq {
				old := events.Get(key(s))
				if old == nil {
					break
				}
				line = prevField.ReplaceAll(bytes.Clone(old), []byte(`,"prev":"`+prev+`"`))
			}
			body := append(hashField.ReplaceAll(bytes.Clone(line), nil), '}')
			sum := sha256.Sum256(body)
			prev = hex.EncodeToString(sum[:])
			line = append(body[:len(body)-1], []byte(`,"hash":"`+prev+`"}`)...)
			if err := events.Put(key(s), line); err != nil {
				return err
			}
			head := append(key(s), sum[:]...)
			if err := meta.Put([]byte("last"), head); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

func changeNote(line []byte) []byte { return bytes.Replace(line, []byte(`{"i":`), []byte(`{"i":9`), 1) }

// TestRestartVerifiesFromTheCheckpoint: after a good full verification is
// recorded, a restart verifies only the events after it (an event edited
// before it goes unseen by the restart: that is the saving), while a full
// verification, asked for by an auditor or due a day after the last one,
// still finds the edit.
func TestRestartVerifiesFromTheCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db := openChain(t, path)
	// Longer than a page request verifies inline (catchUp).
	const n = inlineVerify + 100
	appendNotes(t, db, n)
	s, err := New(Config{Listen: "127.0.0.1:0", Chain: db, CheckpointMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	cp := waitRecorded(t, s)
	if cp.Seq != n || cp.EventSeq != n+1 {
		t.Fatalf("checkpoint = %+v, want seq %d recorded at seq %d", cp, n, n+1)
	}
	appendNotes(t, db, 5) // events after the checkpoint
	db.Close()
	editLine(t, path, 5, false, changeNote) // before the checkpoint

	db = openChain(t, path)
	s, err = New(Config{Listen: "127.0.0.1:0", Chain: db, CheckpointMin: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, fmt.Sprintf("verified up to seq %d", n+6))
	s.verifyMu.Lock()
	resumed, fulls := s.verified.resumed, s.verified.fulls
	s.verifyMu.Unlock()
	if !resumed || fulls != 0 {
		t.Fatalf("restart: resumed %v after %d full verifications; want the events after the checkpoint verified, not the whole chain", resumed, fulls)
	}
	page := get(t, s, "GET", "/audit/verify")
	if !bytes.Contains(page, []byte(`id="recorded"`)) || !bytes.Contains(page, []byte("Verify the whole chain now")) {
		t.Errorf("Chain page after a resumed start:\n%s", page)
	}
	// A cross-origin form cannot start one (the secure wrapper refuses it).
	req := httptest.NewRequest("POST", "/audit/verify", nil)
	req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
	req.Header.Set("Origin", "http://evil.example")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != 403 || len(s.verifyNow) != 0 {
		t.Fatalf("cross-origin POST /audit/verify: %d, %d requests queued; want 403 and none", w.Code, len(s.verifyNow))
	}
	// An auditor asks for the full verification.
	get(t, s, "POST", "/audit/verify")
	waitStatus(t, s, "broken at seq 5")
	db.Close()

	// A day after the checkpoint, a start verifies the whole chain.
	db = openChain(t, path)
	s, err = New(Config{Listen: "127.0.0.1:0", Chain: db, CheckpointMin: 1, Now: func() time.Time { return time.Now().Add(agentcore.FullVerifyEvery + time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, "broken at seq 5")
}

// TestCheckpointTamperingIsDetected: the checkpoint is an event of the
// chain, so editing it breaks the chain there; a history rewritten before
// it with every hash recomputed is caught both by a restart (the chain no
// longer continues from the checkpoint's hash) and by a full verification
// (the checkpoint's hash no longer matches the event it vouches for).
func TestCheckpointTamperingIsDetected(t *testing.T) {
	const n = inlineVerify + 100 // longer than a page request verifies inline
	cp := fmt.Sprintf("%d", n+1)
	fixture := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "events.db")
		db := openChain(t, path)
		appendNotes(t, db, n)
		s, err := New(Config{Listen: "127.0.0.1:0", Chain: db, CheckpointMin: 1})
		if err != nil {
			t.Fatal(err)
		}
		if cp := waitRecorded(t, s); cp.EventSeq != n+1 {
			t.Fatalf("checkpoint at seq %d, want %d", cp.EventSeq, n+1)
		}
		appendNotes(t, db, 3)
		db.Close()
		return path
	}
	later := func() time.Time { return time.Now().Add(agentcore.FullVerifyEvery + time.Hour) }
	for _, tt := range []struct {
		name   string
		seq    uint64
		rehash bool
		edit   func([]byte) []byte
		now    func() time.Time // nil: a restart within the day (resumes); later: a full verification
		want   string
	}{
		{"checkpoint moved", n + 1, false, func(l []byte) []byte {
			return bytes.Replace(l, []byte(fmt.Sprintf(`"seq":%d,`, n)), []byte(fmt.Sprintf(`"seq":%d,`, n-1)), 1)
		}, nil, "broken at seq " + cp},
		{"checkpoint moved, full verification", n + 1, false, func(l []byte) []byte {
			return bytes.Replace(l, []byte(fmt.Sprintf(`"seq":%d,`, n)), []byte(fmt.Sprintf(`"seq":%d,`, n-1)), 1)
		}, later, "broken at seq " + cp},
		{"history rewritten before the checkpoint", 10, true, changeNote, nil, "broken at seq " + cp},
		{"history rewritten before the checkpoint, full verification", 10, true, changeNote, later, fmt.Sprintf("broken at seq %d: the checkpoint at seq %d", n, n+1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := fixture(t)
			editLine(t, path, tt.seq, tt.rehash, tt.edit)
			db := openChain(t, path)
			if tt.rehash {
				// Each event verifies on its own: only the checkpoint tells.
				if rep, err := db.Verify(t.Context(), nil); err != nil || !rep.OK {
					t.Fatalf("rewritten chain: Verify = %+v, %v; want it to verify on its own", rep, err)
				}
			}
			s, err := New(Config{Listen: "127.0.0.1:0", Chain: db, CheckpointMin: 1, Now: tt.now})
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, s, tt.want)
		})
	}
}

// get serves one request of the local operator (an auditor) and returns
// the body.
func get(t *testing.T, s *Server, method, path string) []byte {
	t.Helper()
	req := httptest.NewRequestWithContext(context.Background(), method, path, nil)
	req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
	if method != "GET" {
		req.Header.Set("Origin", "http://127.0.0.1:8080")
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code >= 400 {
		t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
	}
	return w.Body.Bytes()
}

// TestRestartAfterAnArchive: when the newest checkpoint vouches for an
// event that was archived since (thinbot audit archive), a restart
// verifies the live chain in full from the archive's head instead of
// resuming from an event the store no longer holds, and finds it good.
func TestRestartAfterAnArchive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	open := func() *store.DB { // with its journal: an archive needs one
		db, err := store.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db := open()
	const n = inlineVerify + 100
	appendNotes(t, db, n)
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	appendNotes(t, db, 10) // committed while that verification ran
	cp, err := agentcore.RecordChainVerified(db, rep, time.Millisecond, "")
	if err != nil || cp.Seq != n || cp.EventSeq != n+11 {
		t.Fatalf("checkpoint = %+v, %v", cp, err)
	}
	appendNotes(t, db, 5)
	db.Close()
	res, err := store.Archive(t.Context(), path, nil, store.ArchiveOptions{UpTo: n + 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Record.Last <= cp.Seq || res.Record.Last >= cp.EventSeq {
		t.Fatalf("archived up to %d; want between the checkpoint's seq %d and its event %d", res.Record.Last, cp.Seq, cp.EventSeq)
	}

	db = open()
	var logs syncBuffer
	s, err := New(Config{Listen: "127.0.0.1:0", Chain: db, CheckpointMin: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, "verified up to seq")
	if l := logs.String(); strings.Contains(l, "broken") || strings.Contains(l, "level=WARN") {
		t.Errorf("restart after the archive logged:\n%s", l)
	}
	s.verifyMu.Lock()
	resumed, bad := s.verified.resumed, s.verified.bad
	s.verifyMu.Unlock()
	if resumed || bad != nil {
		t.Fatalf("restart after the archive: resumed %v, bad %+v; want the live chain verified in full and good", resumed, bad)
	}
}

// syncBuffer is a bytes.Buffer for a logger written from other goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
