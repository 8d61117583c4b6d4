package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// fieldIndexer records every field of every event, as its Ops saw it.
func fieldIndexer() Indexer {
	return Indexer{Name: "fields-1", Ops: func(ev *Event) []IndexOp {
		v, _ := json.Marshal([]any{ev.Seq, ev.Time.Format(time.RFC3339Nano), ev.Session, ev.Branch, ev.Type, ev.Actor, string(ev.Payload), ev.Prev, ev.Hash})
		return []IndexOp{{Key: binary.BigEndian.AppendUint64([]byte("k/"), ev.Seq), Value: v}}
	}}
}

// TestIndexBuildMatchesIncremental: the state index built in one pass over
// an older store (UseIndex on a chain written without it, which reads each
// line's fields where the canonical layout puts them) holds exactly what
// the index kept as the same events committed holds, for plain lines and
// for lines with escapes, non-ASCII text, null and nested payloads.
func TestIndexBuildMatchesIncremental(t *testing.T) {
	clock := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	now := func() time.Time { clock = clock.Add(1500 * time.Millisecond); return clock }
	var evs []Event
	payloads := []string{`{"text":"plain"}`, `{"text":"quote \" and \\ and \n newline"}`, `{ "spaced" : [1, 2, {"a": null}] }`,
		`"just a string"`, `null`, `{"text":"grüße, 日本"}`, `[]`, `{"big":"` + string(bytes.Repeat([]byte("x"), 5000)) + `"}`}
	sessions := []string{"web/console/1", "mattermost/ch/po\"st", "slack/C1/1.2", "s\tab", "système"}
	for i := range 3000 {
		ev := Event{Session: sessions[i%len(sessions)], Type: []string{"user_message", "note", "ty\"pe"}[i%3], Actor: []string{"user:alice", "system", "ünïcode"}[i%3], Branch: i % 4}
		if p := payloads[i%len(payloads)]; p != "null" {
			ev.Payload = json.RawMessage(p)
		}
		evs = append(evs, ev)
	}
	build := func(indexFirst bool) map[string]string {
		dir := t.TempDir()
		db, err := Open(filepath.Join(dir, "events.db"), &Options{Now: func() time.Time { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		clock = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
		if indexFirst {
			if err := db.UseIndex(context.Background(), fieldIndexer()); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < len(evs); i += 700 {
			now()
			if _, err := db.Append(context.Background(), evs[i:min(i+700, len(evs))]...); err != nil {
				t.Fatal(err)
			}
		}
		if !indexFirst {
			if err := db.UseIndex(context.Background(), fieldIndexer()); err != nil {
				t.Fatal(err)
			}
		}
		out := map[string]string{}
		for r, err := range db.IndexScan([]byte("k/")) {
			if err != nil {
				t.Fatal(err)
			}
			out[string(r.Key)] = string(r.Value)
		}
		return out
	}
	kept, built := build(true), build(false)
	if len(kept) != len(evs) || len(built) != len(kept) {
		t.Fatalf("kept %d records, built %d, want %d", len(kept), len(built), len(evs))
	}
	for k, v := range kept {
		if built[k] != v {
			t.Fatalf("seq %d: built %s\nkept %s", binary.BigEndian.Uint64([]byte(k)[2:]), built[k], v)
		}
	}
}
