package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// TestGenerate: -gen builds a verifiable store of exactly n events in the
// issue #23 shape (sessions of about 50 events; the runs in flight at the end left open).
func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(context.Background(), dir, 2000); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(context.Background(), dir, 10); err == nil {
		t.Error("a second Generate into the same dir: no error")
	}
	db, err := store.Open(filepath.Join(dir, "events.db"), &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(context.Background(), nil)
	if err != nil || !rep.OK || rep.Events != 2000 || rep.Sessions < 30 || rep.Sessions > 50 {
		t.Fatalf("Verify = %+v, %v; want 2000 events in about 40 sessions", rep, err)
	}
	types := map[string]int{}
	for ev, err := range db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		types[ev.Type]++
	}
	if types["run_started"] <= types["run_finished"] || types["approval_requested"] <= types["approval_decision"] || types["user_message"] < 150 {
		t.Errorf("event types %v: want runs and an approval left open (what a crash leaves)", types)
	}
}
