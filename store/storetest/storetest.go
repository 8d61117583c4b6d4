// Package storetest checks, at the end of a test, the chain the test left,
// as bbolt's btesting checks every test database when it is closed. Tests
// import it; the product does not.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// Decoder returns an event's typed payload, nil for a type it does not
// know (agentcore.Decode).
type Decoder func(store.Event) (any, error)

// CloseChecked closes db when the test ends, after checking that its chain
// holds together (store.DB.Verify) and that every event in it decodes with
// decode, which must know its type: whatever the test made the kernel and
// the front ends write, an auditor can verify and read. A test that closed
// db itself is not checked again. Call it before anything that writes to
// db is started, so that it runs after they have stopped.
func CloseChecked(t testing.TB, db *store.DB, decode Decoder) {
	t.Cleanup(func() {
		defer db.Close()
		rep, err := db.Verify(context.Background(), nil)
		switch {
		case errors.Is(err, store.ErrClosed):
			return
		case err != nil:
			t.Errorf("verifying the test's chain: %v", err)
			return
		case !rep.OK:
			t.Errorf("the test left a broken chain: seq %d: %s", rep.BadSeq, rep.Problem)
			return
		}
		if err := Decodes(db, decode); err != nil {
			t.Error(err)
		}
	})
}

// Decodes reports the first event of db whose type decode does not know
// or whose payload does not decode. The store's own events (archive
// records) and capped payloads are skipped.
func Decodes(db *store.DB, decode Decoder) error {
	for ev, err := range db.All(1) {
		if err != nil {
			return err
		}
		if ev.Type == store.TypeArchive {
			continue
		}
		if _, capped := store.Capped(ev.Payload); capped {
			continue
		}
		p, err := decode(ev)
		if err != nil {
			return err
		}
		if p == nil {
			return fmt.Errorf("event %d: type %q is not in the chain's schema", ev.Seq, ev.Type)
		}
	}
	return nil
}
