package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// TestServeAfterArchive: the operator's steps on a store of the year's
// shape: `thinbot audit archive` (the daemon stopped), then the daemon
// starts on the archived store, recovers the runs the generator left open
// (their sessions were kept live), serves every viewer page, stops, and
// `thinbot audit verify` passes from the archive's head.
func TestServeAfterArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("builds thinbot and runs the daemon")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if _, err := Generate(context.Background(), state, 3000); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "thinbot")
	if err := build(t.Context(), bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "audit", "archive", "--db", filepath.Join(state, "events.db"), "--upto", "2000").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "archived events 1..") {
		t.Fatalf("audit archive: %v\n%s", err, out)
	}
	var row Row
	if err := measure(t.Context(), bin, dir, &row, true); err != nil {
		t.Fatalf("the daemon on the archived store: %v", err)
	}
	if len(row.Problems) > 0 {
		log, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
		t.Fatalf("the daemon on the archived store: %v\n%s", row.Problems, log)
	}
	db, err := store.Open(filepath.Join(state, "events.db"), &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.ArchivedSeq == 0 || rep.ArchivedSeq > 2000 || rep.LastSeq <= 3001 {
		t.Fatalf("after the restart: %+v, %v; want the live chain after the archive, with the recovery's events", rep, err)
	}
}
