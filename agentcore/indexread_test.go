package agentcore

import (
	"errors"
	"fmt"
	"iter"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// openState appends, to f's store, a session s1 with a user message, an
// open run, two approval requests without a decision and the given
// number of model calls of 10 tokens each, and has the Agent keep the
// state index.
func openState(t *testing.T, f *fixture, calls int) {
	t.Helper()
	evs := []store.Event{
		{Session: "s1", Type: EvUserMessage, Actor: "user:u", Payload: mustJSON(UserMessagePayload{Text: "go", MessageID: "m1"})},
		{Session: "s1", Type: EvRunStarted, Actor: "user:u", Payload: mustJSON(RunPayload{})},
	}
	for i := range 2 {
		evs = append(evs, store.Event{Session: "s1", Type: EvApprovalAsked, Actor: "system",
			Payload: mustJSON(ApprovalAskedPayload{CallID: fmt.Sprint("c", i), RequestID: fmt.Sprint("r", i), Command: "touch x", SHA256: "x"})})
	}
	for range calls {
		evs = append(evs, store.Event{Session: "s1", Type: EvAssistantMessage, Actor: "model",
			Payload: mustJSON(AssistantPayload{Content: "x", Usage: Usage{PromptTokens: 10}})})
	}
	if _, err := f.db.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.a.TokenUses(); err != nil {
		t.Fatal(err)
	}
}

// TestStateIndexReadFailures: a read of the state index that fails is an
// error for every reader, never fewer records. Here the store closes
// under the readers (a real failed bbolt read, ErrClosed): before, the
// token tallies counted what they had read so far (nothing, or the first
// chunk: a budget that fails open), and Recover, OpenSessions, Sessions
// and SeenMessages found nothing open and no message handled.
func TestStateIndexReadFailures(t *testing.T) {
	t.Run("TokenUsesClosedMidScan", func(t *testing.T) {
		f := newFixture(t, Config{})
		openState(t, f, 5000) // more than one chunk of the store's scan
		uses, _, err := f.a.TokenUses()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		var got error
		for _, err := range uses {
			if err != nil {
				got = err
				break
			}
			if n++; n == 1 {
				f.db.Close()
			}
		}
		if !errors.Is(got, store.ErrClosed) || n == 5000 {
			t.Fatalf("TokenUses over a store closed after the first call: %d calls, error %v; want ErrClosed", n, got)
		}
	})
	t.Run("ApprovalsClosedMidScan", func(t *testing.T) {
		f := newFixture(t, Config{})
		openState(t, f, 0)
		entries, ok := IndexedApprovals(f.db, 0)
		if !ok {
			t.Fatal("index not current")
		}
		n := 0
		var got error
		for _, err := range entries {
			if err != nil {
				got = err
				break
			}
			if n++; n == 1 {
				f.db.Close() // the second request's decision is read after it
			}
		}
		if !errors.Is(got, store.ErrClosed) || n != 1 {
			t.Fatalf("IndexedApprovals over a store closed after the first: %d requests, error %v; want 1 and ErrClosed", n, got)
		}
	})
	t.Run("Closed", func(t *testing.T) {
		f := newFixture(t, Config{})
		openState(t, f, 3)
		if u, err := Recover(f.db); err != nil || len(u.Runs) != 1 || len(u.Approvals) != 2 {
			t.Fatalf("Recover: %+v, %v", u, err)
		}
		// Open again: a run and an approval request.
		if _, err := f.db.Append(t.Context(), store.Event{Session: "s1", Type: EvRunStarted, Actor: "user:u", Payload: mustJSON(RunPayload{})},
			store.Event{Session: "s1", Type: EvApprovalAsked, Actor: "system", Payload: mustJSON(ApprovalAskedPayload{CallID: "c9", RequestID: "r9", Command: "touch y", SHA256: "y"})}); err != nil {
			t.Fatal(err)
		}
		f.db.Close()
		wantClosed := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, store.ErrClosed) {
				t.Errorf("%s on a closed store: error %v, want ErrClosed", what, err)
			}
		}
		firstErr := func(uses iter.Seq2[TokenUse, error], _ uint64, err error) error {
			if err != nil {
				return err
			}
			for _, err := range uses {
				if err != nil {
					return err
				}
			}
			return nil
		}
		wantClosed("TokenUses", firstErr(f.a.TokenUses()))
		wantClosed("TokenUsesAfter", firstErr(f.a.TokenUsesAfter(0)))
		n, err := f.a.SessionTokens("s1", ^uint64(0))
		wantClosed(fmt.Sprintf("SessionTokens (%d tokens)", n), err)
		u, err := Recover(f.db)
		wantClosed(fmt.Sprintf("Recover (%d runs, %d approvals)", len(u.Runs), len(u.Approvals)), err)
		open, err := OpenSessions(f.db)
		wantClosed(fmt.Sprintf("OpenSessions (%v)", open), err)
		sessions, seen, err := Sessions(f.db)
		wantClosed(fmt.Sprintf("Sessions (%v, %v)", sessions, seen), err)
		seen, err = SeenMessages(f.db)
		wantClosed(fmt.Sprintf("SeenMessages (%v)", seen), err)
		known, err := KnownSession(f.db)("s1")
		wantClosed(fmt.Sprintf("KnownSession (%v)", known), err)
	})
}
