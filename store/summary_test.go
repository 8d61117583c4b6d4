package store

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// format1Store copies testdata/format1 into a temporary directory and
// returns its database path: a store (40 events in 6 sessions, ids with
// 0x01 bytes among them, closed cleanly) that thinbot 8d4c47b wrote, with
// the summaries in bucket "sessions". It was made by mkv1.go.txt beside
// it, run in `git archive 8d4c47b go.mod go.sum store` as cmd/mkv1.
func format1Store(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("testdata", "format1")
	f, err := os.Open(filepath.Join(src, "events.db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	db, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(filepath.Join(src, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "events.db")
	for name, b := range map[string][]byte{path: db, filepath.Join(dir, "audit.jsonl"): journal, statePath(path): []byte(stateClosed)} {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

var format1Sessions = []string{"a", "a\x01b", "mm:town-square:a1", "slack:C01:1700000000.000100", "web:x", "web:x\x01"}

// storeFormat returns the format marker of the (closed) store at path and
// whether it has bucket "sessions".
func storeFormat(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var format string
	var sessions bool
	_ = b.View(func(tx *bolt.Tx) error {
		format, sessions = formatIn(tx)
		return nil
	})
	return format, sessions
}

// storeFormatOf is storeFormat of an open store.
func storeFormatOf(t *testing.T, db *DB) (format string, sessions bool) {
	t.Helper()
	_ = db.view(func(tx *bolt.Tx) error {
		format, sessions = formatIn(tx)
		return nil
	})
	return format, sessions
}

func formatIn(tx *bolt.Tx) (string, bool) {
	return string(tx.Bucket(bucketMeta).Get(keyFormat)), tx.Bucket(bucketSessions) != nil
}

// checkSummaries checks db's session list, summaries and recent list
// against want (the ids) and the chain's events.
func checkSummaries(t *testing.T, db *DB, want []string) []SessionInfo {
	t.Helper()
	list, err := db.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	total := 0
	for _, si := range list {
		ids = append(ids, si.ID)
		total += si.Events
		n := 0
		for ev, err := range db.Events(si.ID, 1) {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 1 && ev.Seq != si.FirstSeq || ev.Seq > si.LastSeq {
				t.Errorf("session %q: event %d outside its summary %+v", si.ID, ev.Seq, si)
			}
		}
		if n != si.Events {
			t.Errorf("session %q: %d events, summary says %d", si.ID, n, si.Events)
		}
		if got, ok, err := db.Session(si.ID); err != nil || !ok || got != si {
			t.Errorf("Session(%q) = %+v, %v, %v; Sessions has %+v", si.ID, got, ok, err, si)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, want) || total != int(db.LastSeq()) {
		t.Errorf("sessions %q with %d events, want %q with %d", ids, total, want, db.LastSeq())
	}
	var recent []SessionInfo
	for si, err := range db.RecentSessions(0) {
		if err != nil {
			t.Fatal(err)
		}
		recent = append(recent, si)
	}
	slices.Reverse(recent)
	if !slices.Equal(recent, list) {
		t.Errorf("RecentSessions = %+v, want %+v reversed", recent, list)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.Sessions != len(want) {
		t.Errorf("Verify = %+v, %v", rep, err)
	}
	return list
}

// TestFormat1ReadOnly: a store an older thinbot wrote reads and verifies
// as it is when opened read-only (thinbot audit verify), which changes
// nothing in it, and its summaries are still checked.
func TestFormat1ReadOnly(t *testing.T) {
	path := format1Store(t)
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkSummaries(t, db, format1Sessions)
	db.Close()
	if format, sessions := storeFormat(t, path); format != formatV1 || !sessions {
		t.Fatalf("a read-only open changed the store: format %q, bucket sessions %v", format, sessions)
	}
	withBolt(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketSessions).Delete([]byte("web:x")) })
	db, err = Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || rep.OK || !strings.Contains(rep.Problem, `session "web:x" has events but no session record`) {
		t.Fatalf("Verify of a format 1 store without a session record = %+v, %v", rep, err)
	}
}

// TestFormat1Migrates: the first writable open moves the summaries of a
// store an older thinbot wrote into the index (logged, once); the sessions
// read the same before and after, and later commits keep them.
func TestFormat1Migrates(t *testing.T) {
	path := format1Store(t)
	rdb, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	before := checkSummaries(t, rdb, format1Sessions)
	rdb.Close()

	var logs bytes.Buffer
	opts := &Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	db, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "moved the session summaries into the index") || !strings.Contains(logs.String(), "sessions=6") {
		t.Errorf("no migration logged: %s", logs.String())
	}
	if after := checkSummaries(t, db, format1Sessions); !slices.Equal(after, before) {
		t.Errorf("sessions after the migration %+v, before %+v", after, before)
	}
	for _, s := range []string{"a", "a\x01", "web:x\x01", "new"} {
		if _, err := db.Append(t.Context(), Event{Session: s, Type: "note", Actor: "bot"}); err != nil {
			t.Fatal(err)
		}
	}
	checkSummaries(t, db, []string{"a", "a\x01", "a\x01b", "mm:town-square:a1", "new", "slack:C01:1700000000.000100", "web:x", "web:x\x01"})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if format, sessions := storeFormat(t, path); format != formatVersion || sessions {
		t.Fatalf("after a writable open: format %q, bucket sessions %v; want %q and none", format, sessions, formatVersion)
	}
	logs.Reset()
	db, err = Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if strings.Contains(logs.String(), "moved the session summaries") {
		t.Errorf("migrated twice: %s", logs.String())
	}
	if rep, err := db.Verify(t.Context(), nil); err != nil || !rep.OK || rep.Events != 44 {
		t.Errorf("Verify after reopening = %+v, %v", rep, err)
	}
}

// TestFormat1MigratesDamageAsItIs: a damaged session record of a store an
// older thinbot wrote does not stop it from opening; it is moved as it is,
// and Verify reports it as before.
func TestFormat1MigratesDamageAsItIs(t *testing.T) {
	path := format1Store(t)
	withBolt(t, path, func(tx *bolt.Tx) error { return tx.Bucket(bucketSessions).Put([]byte("web:x"), []byte("bad")) })
	db, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open of a format 1 store with a damaged session record: %v", err)
	}
	defer db.Close()
	if format, _ := storeFormatOf(t, db); format != formatVersion {
		t.Fatalf("format %q after a writable open", format)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || rep.OK || !strings.Contains(rep.Problem, `session "web:x": damaged session record`) {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

// FuzzSummaries: walking the summaries of a format 2 index (one seek past
// each session's entries) yields what a scan of every key would: each key
// without a NUL, in order, as the id it ends in 0x01 after, and an error
// at the first such key that does not end so. Keys are the input split at
// 0xff bytes.
func FuzzSummaries(f *testing.F) {
	f.Add([]byte("a\x00\x00\x00\x00\x00\x00\x00\x00\x01\xffa\x01\xffa\x01b\x00\x00\x00\x00\x00\x00\x00\x00\x02\xffa\x01b\x01"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x07\xffweb:x\x01\xffweb:x\x01\x01\xffjunk"))
	b, err := bolt.Open(filepath.Join(f.TempDir(), "walk.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	defer b.Close()
	f.Fuzz(func(t *testing.T, in []byte) {
		var keys [][]byte
		for _, k := range bytes.Split(in, []byte{0xff}) {
			if len(k) > 0 {
				keys = append(keys, k)
			}
		}
		err := b.Update(func(tx *bolt.Tx) error {
			_ = tx.DeleteBucket(bucketIndex)
			_ = tx.DeleteBucket(bucketMeta)
			index, err := tx.CreateBucket(bucketIndex)
			if err != nil {
				return err
			}
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(keyFormat, []byte(formatVersion)); err != nil {
				return err
			}
			for _, k := range keys {
				if err := index.Put(k, []byte("v")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		wantErr := false
		slices.SortFunc(keys, bytes.Compare)
		for _, k := range slices.CompactFunc(keys, bytes.Equal) {
			if bytes.IndexByte(k, 0) >= 0 {
				continue
			}
			if len(k) < 2 || k[len(k)-1] != 1 {
				wantErr = true
				break
			}
			want = append(want, string(k[:len(k)-1]))
		}
		var got []string
		_ = b.View(func(tx *bolt.Tx) error {
			err = summariesOf(tx).forEach(func(id, v []byte) error {
				got = append(got, string(id))
				return nil
			})
			return nil
		})
		if !slices.Equal(got, want) || (err != nil) != wantErr {
			t.Fatalf("keys %q: walk gave %q, %v; a scan gives %q, error %v", keys, got, err, want, wantErr)
		}
	})
}
