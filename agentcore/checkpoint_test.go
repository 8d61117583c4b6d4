package agentcore

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/store"
)

// TestVerifyJSONLChecksTheCheckpoints: verifyJSONL holds an export's
// checkpoints to checkChainCheckpoints' rule (a forged claim is a break at
// the seq it vouches for, though the chain alone verifies). The check reads
// the file a second time, from where it was opened at, which a pipe cannot
// give: a piped export with checkpoints is then an error (could not
// check), never an ok that skipped them; one without checkpoints verifies
// as before.
func TestVerifyJSONLChecksTheCheckpoints(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := db.Append(t.Context(), store.Event{Session: "s", Type: EvNote, Actor: "system", Payload: mustJSON(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	plain, err := os.ReadFile(db.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK {
		t.Fatal(rep, err)
	}
	if _, err := RecordChainVerified(db, rep, time.Millisecond, ""); err != nil {
		t.Fatal(err)
	}
	db.Close()
	withCheckpoint, err := os.ReadFile(db.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	piped := func(data []byte) (store.Report, error) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go func() {
			_, _ = w.Write(data)
			w.Close()
		}()
		rep, err := verifyJSONL(t.Context(), r)
		_, _ = io.Copy(io.Discard, r) // let the writer finish
		return rep, err
	}
	if rep, err := piped(plain); err != nil || !rep.OK || rep.LastSeq != 5 {
		t.Errorf("a piped export without checkpoints: %+v, %v", rep, err)
	}
	if rep, err := piped(withCheckpoint); err == nil || !strings.Contains(err.Error(), "cannot seek") {
		t.Errorf("a piped export with a checkpoint: %+v, %v; want an error", rep, err)
	}
	// A file opened at an offset (after a header an outside tool wrote)
	// is read twice from there.
	p := filepath.Join(dir, "with-header")
	if err := os.WriteFile(p, append([]byte("header\n"), withCheckpoint...), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(int64(len("header\n")), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if rep, err := verifyJSONL(t.Context(), f); err != nil || !rep.OK || rep.LastSeq != 6 {
		t.Errorf("a file read from an offset: %+v, %v", rep, err)
	}
	// A checkpoint that vouches for another hash than the file's event has
	// (the chain alone verifies: each event's hash is good) is a break at
	// the seq it vouches for, as in a store.
	db, err = store.Open(filepath.Join(dir, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	forged := strings.Repeat("0", 64)
	if _, err := db.Append(t.Context(), store.Event{Session: CheckpointSession, Type: EvChainVerified, Actor: "system",
		Payload: mustJSON(ChainVerifiedPayload{Seq: 3, Hash: forged})}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	file, err := os.ReadFile(db.AuditPath())
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := store.VerifyFile(t.Context(), bytes.NewReader(file), nil); err != nil || !rep.OK {
		t.Fatalf("the chain alone: %+v, %v", rep, err)
	}
	rep, err = verifyJSONL(t.Context(), bytes.NewReader(file))
	if err != nil || rep.OK || rep.BadSeq != 3 || !strings.HasPrefix(rep.Problem, "the checkpoint at seq 7 recorded hash 000000000000… for seq 3, which now has ") {
		t.Errorf("a forged checkpoint: %+v, %v", rep, err)
	}
}
