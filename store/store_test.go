package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fixedClock returns a clock that advances one millisecond per call.
func fixedClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func openTest(t testing.TB, dir string, o *Options) *DB {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	if o.Now == nil {
		o.Now = fixedClock()
	}
	db, err := Open(filepath.Join(dir, "events.db"), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// syncAudit waits until the export has every event Append returned.
func syncAudit(db *DB) {
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
}

// fill appends n events round-robin over sessions a, b, c (b only in the
// middle third), one Append per event.
func fill(t testing.TB, db *DB, n int) []Event {
	t.Helper()
	var out []Event
	for i := range n {
		s := []string{"a", "c"}[i%2]
		if i >= n/3 && i < 2*n/3 && i%3 == 0 {
			s = "b"
		}
		got, err := db.Append(context.Background(), Event{
			Session: s, Type: "user_message", Actor: "user:alice",
			Payload: json.RawMessage(fmt.Sprintf(`{"text": "message %d", "n": %d}`, i, i)),
		})
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		out = append(out, got...)
	}
	return out
}

func TestAppendAndRead(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	ctx := t.Context()
	got, err := db.Append(ctx,
		Event{Session: "s1", Type: "user_message", Actor: "user:alice", Payload: json.RawMessage(`{ "text" : "hi" }`)},
		Event{Session: "s2", Type: "gate_decision", Actor: "system", Branch: 2},
		Event{Session: "s1", Type: "tool_result", Actor: "bot", Payload: json.RawMessage(`"<&>\u2028"`)},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Append returned %d events, want 3", len(got))
	}
	prev := ZeroHash
	for i, ev := range got {
		if ev.Seq != uint64(i+1) || ev.Prev != prev || !isHex64(ev.Hash) || ev.Time.IsZero() {
			t.Errorf("event %d = seq %d prev %.8s hash %.8s time %v", i, ev.Seq, ev.Prev, ev.Hash, ev.Time)
		}
		prev = ev.Hash
	}
	if string(got[0].Payload) != `{"text":"hi"}` {
		t.Errorf("payload = %s, want compacted", got[0].Payload)
	}
	if string(got[1].Payload) != "null" {
		t.Errorf("nil payload stored as %s, want null", got[1].Payload)
	}
	if db.LastSeq() != 3 {
		t.Errorf("LastSeq = %d, want 3", db.LastSeq())
	}

	var all []Event
	for ev, err := range db.All(0) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
	}
	if len(all) != 3 {
		t.Fatalf("All returned %d events", len(all))
	}
	for i := range all {
		a, b := all[i], got[i]
		if a.Seq != b.Seq || !a.Time.Equal(b.Time) || a.Session != b.Session || a.Branch != b.Branch ||
			a.Type != b.Type || a.Actor != b.Actor || !bytes.Equal(a.Payload, b.Payload) || a.Prev != b.Prev || a.Hash != b.Hash {
			t.Errorf("All()[%d] = %+v, Append returned %+v", i, a, b)
		}
	}

	tests := []struct {
		session string
		from    uint64
		want    []uint64
	}{
		{"s1", 0, []uint64{1, 3}},
		{"s1", 2, []uint64{3}},
		{"s1", 4, nil},
		{"s2", 1, []uint64{2}},
		{"s", 0, nil},
		{"nope", 0, nil},
	}
	for _, tt := range tests {
		var seqs []uint64
		for ev, err := range db.Events(tt.session, tt.from) {
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, ev.Seq)
		}
		if fmt.Sprint(seqs) != fmt.Sprint(tt.want) {
			t.Errorf("Events(%q, %d) = %v, want %v", tt.session, tt.from, seqs, tt.want)
		}
	}

	ss, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].ID != "s2" || ss[0].Events != 1 || ss[1].ID != "s1" || ss[1].Events != 2 ||
		ss[1].FirstSeq != 1 || ss[1].LastSeq != 3 || !ss[1].First.Equal(got[0].Time) || !ss[1].Last.Equal(got[2].Time) {
		t.Errorf("Sessions = %+v", ss)
	}
}

func TestEventsAcrossChunks(t *testing.T) {
	db := openTest(t, t.TempDir(), &Options{AuditPath: "-"})
	evs := make([]Event, 3*readChunk+7)
	for i := range evs {
		evs[i] = Event{Session: []string{"x", "y"}[i%2], Type: "t"}
	}
	if _, err := db.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	n, want := 0, uint64(1)
	for ev, err := range db.Events("x", 0) {
		if err != nil || ev.Seq != want {
			t.Fatalf("Events(x) #%d = seq %d, %v; want seq %d", n, ev.Seq, err, want)
		}
		n++
		want += 2
	}
	if n != (len(evs)+1)/2 {
		t.Errorf("Events(x) gave %d events, want %d", n, (len(evs)+1)/2)
	}
	n = 0
	for ev, err := range db.All(100) {
		if err != nil || ev.Seq != uint64(100+n) {
			t.Fatalf("All(100) #%d = seq %d, %v", n, ev.Seq, err)
		}
		n++
	}
	if n != len(evs)-99 {
		t.Errorf("All(100) gave %d events, want %d", n, len(evs)-99)
	}
	// Breaking out early must not leak a transaction: Close would hang.
	for range db.All(1) {
		break
	}
}

func TestAppendInvalid(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	tests := []struct {
		name string
		ev   Event
	}{
		{"empty session", Event{Type: "t"}},
		{"empty type", Event{Session: "s"}},
		{"nul in session", Event{Session: "a\x00b", Type: "t"}},
		{"long session", Event{Session: strings.Repeat("s", MaxSessionLen+1), Type: "t"}},
		{"negative branch", Event{Session: "s", Type: "t", Branch: -1}},
		{"bad utf8 actor", Event{Session: "s", Type: "t", Actor: "\xff"}},
		{"payload not json", Event{Session: "s", Type: "t", Payload: json.RawMessage(`{"a":`)}},
		{"payload bad utf8", Event{Session: "s", Type: "t", Payload: json.RawMessage("\"\xff\"")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := db.Append(t.Context(), Event{Session: "ok", Type: "t"}, tt.ev)
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Append = %v, want ErrInvalid", err)
			}
		})
	}
	if db.LastSeq() != 0 {
		t.Errorf("invalid appends committed %d events", db.LastSeq())
	}
}

func TestPayloadCap(t *testing.T) {
	db := openTest(t, t.TempDir(), &Options{PayloadCap: 4096})
	big := `"` + strings.Repeat("héllo wörld ", 2000) + "\x01" + `"`
	big = strings.Replace(big, "\x01", `\u0001`, 1)
	small := json.RawMessage(`{"ok":true}`)
	got, err := db.Append(t.Context(),
		Event{Session: "s", Type: "tool_result", Payload: json.RawMessage(big)},
		Event{Session: "s", Type: "tool_result", Payload: small})
	if err != nil {
		t.Fatal(err)
	}
	if len(got[0].Payload) > 4096 {
		t.Errorf("capped payload is %d bytes, cap 4096", len(got[0].Payload))
	}
	c, ok := Capped(got[0].Payload)
	if !ok {
		t.Fatalf("payload %.80s… is not the capped marker", got[0].Payload)
	}
	if c.Size != int64(len(big)) || !strings.HasPrefix(big, c.Head) || !strings.HasSuffix(big, c.Tail) ||
		len(c.Head) < 1000 || len(c.Tail) < 1000 {
		t.Errorf("capped = size %d head %d bytes tail %d bytes; original %d bytes", c.Size, len(c.Head), len(c.Tail), len(big))
	}
	if _, ok := Capped(got[1].Payload); ok {
		t.Errorf("small payload reported as capped")
	}
	if rep, err := db.Verify(t.Context(), nil); err != nil || !rep.OK {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
}

func TestConcurrentAppend(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	const workers, per = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	results := make([][]Event, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				got, err := db.Append(context.Background(),
					Event{Session: fmt.Sprintf("w%d", w), Type: "a", Payload: json.RawMessage(fmt.Sprint(i))},
					Event{Session: fmt.Sprintf("w%d", w), Type: "b"})
				if err != nil {
					errs <- err
					return
				}
				if got[1].Seq != got[0].Seq+1 || got[1].Prev != got[0].Hash {
					errs <- fmt.Errorf("one call's events are not consecutive: %d, %d", got[0].Seq, got[1].Seq)
					return
				}
				results[w] = append(results[w], got...)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[uint64]string{}
	for _, evs := range results {
		for _, ev := range evs {
			if _, dup := seen[ev.Seq]; dup {
				t.Fatalf("seq %d returned twice", ev.Seq)
			}
			seen[ev.Seq] = ev.Hash
		}
	}
	if len(seen) != workers*per*2 || db.LastSeq() != uint64(workers*per*2) {
		t.Fatalf("%d distinct seqs, LastSeq %d, want %d", len(seen), db.LastSeq(), workers*per*2)
	}
	for ev, err := range db.All(1) {
		if err != nil || seen[ev.Seq] != ev.Hash {
			t.Fatalf("stored seq %d hash %.8s, Append returned %.8s (%v)", ev.Seq, ev.Hash, seen[ev.Seq], err)
		}
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.Events != workers*per*2 || rep.Sessions != workers {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	if rep, err := db.VerifyJournal(t.Context(), Report{}); err != nil || !rep.OK || rep.Events != workers*per*2 {
		t.Errorf("VerifyJournal = %+v, %v", rep, err)
	}
}

func TestAppendCancelledContext(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := db.Append(ctx, Event{Session: "s", Type: "t"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Append(cancelled) = %v, want context.Canceled", err)
	}
	if db.LastSeq() != 0 {
		t.Errorf("cancelled append committed")
	}
}

func TestCloseAndReopen(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	evs := fill(t, db, 10)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := db.Append(t.Context(), Event{Session: "s", Type: "t"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
	if err := db.Wait(t.Context(), 100); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
	for _, err := range db.All(0) {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("All after Close = %v, want ErrClosed", err)
		}
	}
	db = openTest(t, dir, nil)
	if db.LastSeq() != 10 {
		t.Fatalf("reopened LastSeq = %d, want 10", db.LastSeq())
	}
	got, err := db.Append(t.Context(), Event{Session: "a", Type: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Seq != 11 || got[0].Prev != evs[9].Hash {
		t.Errorf("after reopen: seq %d prev %.8s, want 11 and %.8s", got[0].Seq, got[0].Prev, evs[9].Hash)
	}
	for _, f := range []string{"events.db", "audit.jsonl"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, st.Mode().Perm(), err)
		}
	}
}

func TestOpenCreatesPrivateDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x", "y")
	db := openTest(t, dir, nil)
	db.Close()
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, %v; want 0700", st.Mode().Perm(), err)
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir, nil)
	path := filepath.Join(dir, "events.db")
	for _, ro := range []bool{false, true} {
		_, err := Open(path, &Options{Timeout: 50 * time.Millisecond, ReadOnly: ro})
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another thinbot process") {
			t.Errorf("Open(locked, readOnly=%v) = %v; want ErrLocked naming %s", ro, err, path)
		}
	}
}

func TestOpenCorrupt(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content []byte
	}{
		{"text", []byte(strings.Repeat("this is not a database\n", 1000))},
		{"zeros", make([]byte, 64<<10)},
		{"short", []byte("x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".db")
			if err := os.WriteFile(path, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(path, &Options{AuditPath: "-"})
			if err == nil {
				db.Close()
				t.Fatal("Open(corrupt) succeeded")
			}
			if !errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), path) {
				t.Errorf("Open(corrupt) = %v; want a clear error naming the file", err)
			}
		})
	}
	// A valid bbolt file without the thinbot format marker.
	db := openTest(t, dir, &Options{AuditPath: "-"})
	db.Close()
	path := filepath.Join(dir, "events.db")
	withBolt(t, path, func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketMeta) })
	if _, err := Open(path, &Options{AuditPath: "-"}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Open(bbolt file without thinbot format) = %v, want ErrCorrupt", err)
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	fill(t, db, 5)
	db.Close()
	ro := openTest(t, dir, &Options{ReadOnly: true})
	ro2 := openTest(t, dir, &Options{ReadOnly: true})
	if _, err := ro.Append(t.Context(), Event{Session: "s", Type: "t"}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Append(read-only) = %v", err)
	}
	for _, d := range []*DB{ro, ro2} {
		if rep, err := d.Verify(t.Context(), nil); err != nil || !rep.OK || rep.Events != 5 {
			t.Errorf("Verify = %+v, %v", rep, err)
		}
		if rep, err := d.VerifyJournal(t.Context(), Report{}); err != nil || !rep.OK || rep.Events != 5 {
			t.Errorf("VerifyJournal = %+v, %v", rep, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.db"), &Options{ReadOnly: true}); err == nil {
		t.Error("Open(missing, read-only) succeeded")
	}
}

func TestWait(t *testing.T) {
	db := openTest(t, t.TempDir(), nil)
	done := make(chan error, 1)
	go func() { done <- db.Wait(t.Context(), 0) }()
	if _, err := db.Append(t.Context(), Event{Session: "s", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Wait = %v", err)
	}
	if err := db.Wait(t.Context(), 0); err != nil {
		t.Errorf("Wait(already past) = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := db.Wait(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait(cancelled) = %v", err)
	}
}

func TestExport(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	fill(t, db, 30)
	syncAudit(db)
	var all bytes.Buffer
	if err := db.Export(t.Context(), &all, "", 0); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(db.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all.Bytes(), file) {
		t.Errorf("Export of the whole chain differs from audit.jsonl")
	}
	var one bytes.Buffer
	if err := db.Export(t.Context(), &one, "b", 15); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(one.String()) {
		ev, err := parseLine([]byte(strings.TrimSuffix(line, "\n")))
		if err != nil || ev.Session != "b" || ev.Seq < 15 {
			t.Errorf("Export(b, 15) line %q: %v", line, err)
		}
	}
	if one.Len() == 0 {
		t.Error("Export(b, 15) is empty")
	}
}

func TestAuditReconcile(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(path string, file []byte) error
		wantErr error
	}{
		// The journal was synced before each commit indexed its events:
		// a committed line cut off is not crash damage.
		{"cut last line", func(p string, f []byte) error { return os.WriteFile(p, f[:len(f)-40], 0o600) }, ErrAuditMismatch},
		// A process that died while writing leaves at most a cut line.
		{"cut line after the end", func(p string, f []byte) error {
			return os.WriteFile(p, append(f, []byte("{\"seq\":21,\"time\":\"2026")...), 0o600)
		}, nil},
		{"garbage line after the end", func(p string, f []byte) error {
			return os.WriteFile(p, append(f, []byte("{\"seq\":99,garbage\n\x00\x00")...), 0o600)
		}, ErrAuditMismatch},
		{"missing file", func(p string, _ []byte) error { return os.Remove(p) }, nil},
		{"empty file", func(p string, _ []byte) error { return os.WriteFile(p, nil, 0o600) }, ErrAuditMismatch},
		{"truncated behind journal mark", func(p string, f []byte) error {
			return os.WriteFile(p, f[:bytes.IndexByte(f, '\n')+1], 0o600)
		}, ErrAuditMismatch},
		{"edited", func(p string, f []byte) error {
			return os.WriteFile(p, bytes.Replace(f, []byte("message 19"), []byte("message XX"), 1), 0o600)
		}, ErrAuditMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db := openTest(t, dir, nil)
			fill(t, db, 20)
			// The journal mark is at seq 20, the last line: Open repairs
			// only what follows it.
			db.Close()
			path := filepath.Join(dir, "audit.jsonl")
			f, _ := os.ReadFile(path)
			if err := tt.damage(path, f); err != nil {
				t.Fatal(err)
			}
			db2, err := Open(filepath.Join(dir, "events.db"), &Options{})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Open = %v, want %v", err, tt.wantErr)
				}
				db2, err = Open(filepath.Join(dir, "events.db"), &Options{RebuildAudit: true})
				if err != nil {
					t.Fatalf("Open(RebuildAudit) = %v", err)
				}
			} else if err != nil {
				t.Fatalf("Open = %v", err)
			}
			defer db2.Close()
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, f) {
				t.Errorf("after reconcile the export is %d bytes, want the original %d", len(got), len(f))
			}
			if _, err := db2.Append(t.Context(), Event{Session: "a", Type: "t"}); err != nil {
				t.Fatal(err)
			}
			if rep, err := db2.VerifyJournal(t.Context(), Report{}); err != nil || !rep.OK || rep.Events != 21 {
				t.Errorf("VerifyJournal = %+v, %v", rep, err)
			}
			if tt.wantErr != nil {
				kept, _ := filepath.Glob(path + ".replaced-*")
				if len(kept) != 1 {
					t.Errorf("rebuild kept %v, want the old file", kept)
				}
			}
		})
	}
}

func TestRebuildAudit(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, nil)
	fill(t, db, 12)
	syncAudit(db)
	before, _ := os.ReadFile(db.AuditPath())
	if err := db.RebuildAudit(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(db.AuditPath())
	if !bytes.Equal(before, after) {
		t.Error("rebuild of an intact export changed it")
	}
	if kept, _ := filepath.Glob(db.AuditPath() + ".*"); len(kept) != 0 {
		t.Errorf("rebuild of an intact export left %v", kept)
	}
	fill(t, db, 3)
	if rep, err := db.VerifyJournal(t.Context(), Report{}); err != nil || !rep.OK || rep.Events != 15 {
		t.Errorf("VerifyJournal after rebuild and appends = %+v, %v", rep, err)
	}
}

// TestAuditAfterPowerLoss: an older thinbot did not fsync the export at
// every commit, so a power loss may have cut it behind its written
// journal mark. After a reboot (a
// different boot id in the journal mark) Open rebuilds the tail from the store
// down to the fsynced journal mark; in the same boot the same file is
// tampering (see TestAuditReconcile).
func TestAuditAfterPowerLoss(t *testing.T) {
	if bootID() == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no boot id (/proc/sys/kernel/random/boot_id): CI runs on Linux, which has one")
		}
		t.Skip("no boot id on this system: the export is fsynced at every commit")
	}
	for _, tt := range []struct {
		name    string
		boot    string
		wantErr error
	}{
		{"rebooted", "an-earlier-boot", nil},
		{"same boot", bootID(), ErrAuditMismatch},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			db := openTest(t, dir, nil)
			fill(t, db, 20)
			db.Close()
			path := filepath.Join(dir, "audit.jsonl")
			f, _ := os.ReadFile(path)
			first := bytes.IndexByte(f, '\n') + 1
			// Say the export was fsynced up to seq 1 only, under tt.boot,
			// and lose everything after it.
			bdb, err := bolt.Open(filepath.Join(dir, "events.db"), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = bdb.Update(func(tx *bolt.Tx) error {
				meta := tx.Bucket(bucketMeta)
				ck := bytes.Clone(meta.Get(keyAudit)[:32])
				binary.BigEndian.PutUint64(ck[16:], 1)
				binary.BigEndian.PutUint64(ck[24:], uint64(first))
				return meta.Put(keyAudit, append(ck, tt.boot...))
			})
			bdb.Close()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, f[:first], 0o600); err != nil {
				t.Fatal(err)
			}
			db2, err := Open(filepath.Join(dir, "events.db"), nil)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer db2.Close()
			if got, _ := os.ReadFile(path); !bytes.Equal(got, f) {
				t.Errorf("after reopen the export is %d bytes, want the original %d", len(got), len(f))
			}
		})
	}
}
