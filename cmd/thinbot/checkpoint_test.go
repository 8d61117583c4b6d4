package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
// checkpoint's hash no longer matches the event it vouches for).
func TestAuditVerifyChecksTheCheckpoints(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rehash bool
		want   string
	}{
		{"event edited before the checkpoint", false, "BROKEN at seq 3: hash mismatch"},
		{"history rewritten before the checkpoint", true, "BROKEN at seq 10: the checkpoint at seq 11"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := newAuditStore(t, 10)
			db, err := store.Open(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := db.Verify(t.Context())
			if err != nil || !rep.OK {
				t.Fatal(rep, err)
			}
			if _, err := agentcore.RecordChainVerified(db, rep, time.Millisecond, ""); err != nil {
				t.Fatal(err)
			}
			db.Close()
			e, out, _ := auditEnv()
			if err := run(t.Context(), e, []string{"audit", "verify", "--db", path}); err != nil {
				t.Fatalf("before the edit: %v\n%s", err, out)
			}
			rewrite(t, path, 3, tt.rehash)
			e, out, _ = auditEnv()
			err = run(t.Context(), e, []string{"audit", "verify", "--db", path})
			if code := exitCode(err); code != 2 || !strings.Contains(out.String(), "store  "+path+": "+tt.want) {
				t.Errorf("audit verify: exit %d (%v), want 2 and %q:\n%s", code, err, tt.want, out)
			}
		})
	}
}

// rewrite edits the stored event at seq in the bbolt file (as an attacker
// with write access could); with rehash it recomputes the hashes, links
// and head from there on (store/doc.go), so that each event verifies.
func rewrite(t *testing.T, path string, seq uint64, rehash bool) {
	t.Helper()
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	hashField := regexp.MustCompile(`,"hash":"[0-9a-f]{64}"\}$`)
	prevField := regexp.MustCompile(`,"prev":"[0-9a-f]{64}"`)
	err = b.Update(func(tx *bolt.Tx) error {
		events := tx.Bucket([]byte("events"))
		key := func(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }
		line := bytes.Replace(bytes.Clone(events.Get(key(seq))), []byte(`"text":"m`), []byte(`"text":"edited m`), 1)
		if !rehash {
			return events.Put(key(seq), line)
		}
		var prev string
		for s := seq; ; s++ {
			if s > seq {
				if line = events.Get(key(s)); line == nil {
					return nil
				}
				line = prevField.ReplaceAll(bytes.Clone(line), []byte(`,"prev":"`+prev+`"`))
			}
			body := append(hashField.ReplaceAll(line, nil), '}')
			sum := sha256.Sum256(body)
			prev = hex.EncodeToString(sum[:])
			if err := events.Put(key(s), append(body[:len(body)-1], `,"hash":"`+prev+`"}`...)); err != nil {
				return err
			}
			if err := tx.Bucket([]byte("meta")).Put([]byte("last"), append(key(s), sum[:]...)); err != nil {
				return err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
