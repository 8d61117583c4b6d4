package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// TestAuditVerifyChecksTheCheckpoints: `thinbot audit verify` is the
// auditor's full verification whatever the daemon recorded: an event edited
// before a recorded checkpoint is reported, and so is a history rewritten
// before it with every hash recomputed (the chain verifies on its own; the
// checkpoint's hash no longer matches the event it vouches for). The same
// holds for the store (--db) and for its export alone (--jsonl, what an
// auditor has while the daemon runs or when sent the file; --config of a
// running daemon verifies it too).
func TestAuditVerifyChecksTheCheckpoints(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rehash bool
		want   string
	}{
		{"event edited before the checkpoint", false, "BROKEN at seq 3: hash mismatch"},
		{"history rewritten before the checkpoint", true, "BROKEN at seq 10: the checkpoint at seq 11 recorded hash"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := newAuditStore(t, 10)
			db, _ := openCheckpointed(t, path)
			db.Close()
			jsonl := filepath.Join(filepath.Dir(path), "audit.jsonl")
			for _, args := range [][]string{{"--db", path}, {"--jsonl", jsonl}} {
				e, out, _ := auditEnv()
				if err := run(t.Context(), e, append([]string{"audit", "verify"}, args...)); err != nil {
					t.Fatalf("%v before the edit: %v\n%s", args, err, out)
				}
			}
			rewrite(t, path, 3, tt.rehash)
			e, out, _ := auditEnv()
			err := run(t.Context(), e, []string{"audit", "verify", "--db", path})
			if code := exitCode(err); code != 2 || !strings.Contains(out.String(), "store  "+path+": "+tt.want) {
				t.Errorf("audit verify --db: exit %d (%v), want 2 and %q:\n%s", code, err, tt.want, out)
			}

			rewriteJSONL(t, jsonl, 3, tt.rehash)
			f, err := os.Open(jsonl)
			if err != nil {
				t.Fatal(err)
			}
			chain, err := store.VerifyFile(t.Context(), f, nil)
			f.Close()
			if err != nil || chain.OK == !tt.rehash {
				t.Fatalf("the rewritten file's chain alone: %+v, %v; want it to verify only when rehashed", chain, err)
			}
			e, out, _ = auditEnv()
			err = run(t.Context(), e, []string{"audit", "verify", "--jsonl", jsonl})
			if code := exitCode(err); code != 2 || !strings.Contains(out.String(), "export "+jsonl+": "+tt.want) {
				t.Errorf("audit verify --jsonl: exit %d (%v), want 2 and %q:\n%s", code, err, tt.want, out)
			}
		})
	}
}

// rewriteFrom edits the event at seq (through get and put, the lines of a
// store or a file) as an attacker with write access could; with rehash it
// recomputes the hashes and links from there on (store/doc.go), so that
// each event verifies. get returns nil past the last event; put gets each
// rewritten line and its hash.
func rewriteFrom(seq uint64, rehash bool, get func(uint64) []byte, put func(seq uint64, line []byte, sum [32]byte) error) error {
	hashField := regexp.MustCompile(`,"hash":"[0-9a-f]{64}"\}$`)
	prevField := regexp.MustCompile(`,"prev":"[0-9a-f]{64}"`)
	line := bytes.Replace(bytes.Clone(get(seq)), []byte(`"text":"m`), []byte(`"text":"edited m`), 1)
	if !rehash {
		return put(seq, line, [32]byte{})
	}
	var prev string
	for s := seq; ; s++ {
		if s > seq {
			if line = get(s); line == nil {
				return nil
			}
			line = prevField.ReplaceAll(bytes.Clone(line), []byte(`,"prev":"`+prev+`"`))
		}
		body := append(hashField.ReplaceAll(line, nil), '}')
		sum := sha256.Sum256(body)
		prev = hex.EncodeToString(sum[:])
		if err := put(s, append(body[:len(body)-1], `,"hash":"`+prev+`"}`...), sum); err != nil {
			return err
		}
	}
}

// rewrite is rewriteFrom on the bbolt file at path, with the recorded head.
func rewrite(t *testing.T, path string, seq uint64, rehash bool) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = b.Update(func(tx *bolt.Tx) error {
		events := tx.Bucket([]byte("events"))
		key := func(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }
		return rewriteFrom(seq, rehash, func(s uint64) []byte { return events.Get(key(s)) }, func(s uint64, line []byte, sum [32]byte) error {
			if err := events.Put(key(s), line); err != nil || !rehash {
				return err
			}
			return tx.Bucket([]byte("meta")).Put([]byte("last"), append(key(s), sum[:]...))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rewriteJSONL is rewriteFrom on the JSONL file at path (from seq 1).
func rewriteJSONL(t *testing.T, path string, seq uint64, rehash bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	err = rewriteFrom(seq, rehash, func(s uint64) []byte {
		if s > uint64(len(lines)) {
			return nil
		}
		return lines[s-1]
	}, func(s uint64, line []byte, _ [32]byte) error {
		lines[s-1] = line
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAuditVerifyArchiveChecksTheCheckpoints: the checkpoints an archive
// file holds are checked like an export's. An archive rewritten before one
// of them with every hash recomputed, its seal (head and digest) too,
// verifies on its own; audit verify --archive of it alone now reports the
// checkpoint that no longer matches. One for the event before an archive's
// first is held to the archive's prev.
func TestAuditVerifyArchiveChecksTheCheckpoints(t *testing.T) {
	path := newSessionStore(t, 3)       // seqs 1..30
	db, cp := openCheckpointed(t, path) // seq 31, for 30
	for i := range 10 {
		if _, err := db.Append(t.Context(), store.Event{Session: "s9", Type: "user_message", Actor: "user:alice",
			Payload: json.RawMessage(fmt.Sprintf(`{"text":"m9%d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	res, err := store.Archive(t.Context(), path, nil, store.ArchiveOptions{UpTo: 31})
	if err != nil || res.Record.Last != cp.EventSeq {
		t.Fatalf("archive: %+v, %v; want events up to the checkpoint's", res.Record, err)
	}
	if out, errb, code := runAudit(t, "verify", "--archive", res.Path); code != 0 {
		t.Fatalf("verify --archive before the rewrite: exit %d\n%s%s", code, out, errb)
	}
	rewriteArchiveFrom(t, res.Path, 3)
	archive, err := os.ReadFile(res.Path)
	if err != nil {
		t.Fatal(err)
	}
	if arep, err := store.VerifyFile(t.Context(), bytes.NewReader(archive), &store.FileOptions{Archive: true}); err != nil || !arep.OK {
		t.Fatalf("the rewritten archive's chain alone: %+v, %v; want it to verify", arep, err)
	}
	want := fmt.Sprintf("archive %s: BROKEN at seq 30: the checkpoint at seq 31 recorded hash %.12s… for seq 30, which now has ", res.Path, cp.Hash)
	if out, errb, code := runAudit(t, "verify", "--archive", res.Path); code != 2 || !strings.Contains(out, want) {
		t.Errorf("verify --archive of the rewritten archive: exit %d, want 2 and %q:\n%s%s", code, want, out, errb)
	}

	// A checkpoint for the event before an archive's first is compared
	// with the archive's prev (the head of the one before it).
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := db.Append(t.Context(), store.Event{Session: agentcore.CheckpointSession, Type: agentcore.EvChainVerified, Actor: "system",
		Payload: json.RawMessage(fmt.Sprintf(`{"seq":%d,"hash":"%s","sessions":1,"took_ms":1}`, res.Record.Last, strings.Repeat("0", 64)))})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	res2, err := store.Archive(t.Context(), path, nil, store.ArchiveOptions{UpTo: forged[0].Seq})
	if err != nil || res2.Record.First != res.Record.Last+1 {
		t.Fatalf("second archive: %+v, %v", res2.Record, err)
	}
	want = fmt.Sprintf("BROKEN at seq %d: the checkpoint at seq %d recorded hash 000000000000… for seq %d, which the archive before it holds with head %.12s…", res.Record.Last, forged[0].Seq, res.Record.Last, res.Record.Head)
	if out, errb, code := runAudit(t, "verify", "--archive", res2.Path); code != 2 || !strings.Contains(out, want) {
		t.Errorf("verify --archive of the second archive: exit %d, want 2 and %q:\n%s%s", code, want, out, errb)
	}
}

// rewriteArchiveFrom is rewriteFrom on an archive file: the events from seq
// on, then the seal's head and digest, so that the file verifies alone.
func rewriteArchiveFrom(t *testing.T, p string, seq uint64) {
	t.Helper()
	b := gunzipFile(t, p)
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	var seal store.ArchiveRecord
	if err := json.Unmarshal(lines[len(lines)-1], &seal); err != nil {
		t.Fatal(err)
	}
	events := lines[1 : len(lines)-1] // between the header and the seal
	err := rewriteFrom(seq, true, func(s uint64) []byte {
		if s < seal.First || s > seal.Last {
			return nil
		}
		return events[s-seal.First]
	}, func(s uint64, line []byte, sum [32]byte) error {
		events[s-seal.First] = line
		seal.Head = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.New()
	for _, l := range events {
		digest.Write(append(l, '\n'))
	}
	seal.SHA256 = hex.EncodeToString(digest.Sum(nil))
	if lines[len(lines)-1], err = json.Marshal(seal); err != nil {
		t.Fatal(err)
	}
	gzipFile(t, p, append(bytes.Join(lines, []byte("\n")), '\n'))
}

// openCheckpointed opens the store at path, verifies it in full and
// records the checkpoint the daemon would (agentcore.RecordChainVerified).
func openCheckpointed(t *testing.T, path string) (*store.DB, agentcore.ChainCheckpoint) {
	t.Helper()
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK {
		t.Fatal(rep, err)
	}
	cp, err := agentcore.RecordChainVerified(db, rep, time.Millisecond, "")
	if err != nil {
		t.Fatal(err)
	}
	return db, cp
}
