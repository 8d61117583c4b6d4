package agentcore

import (
	"context"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/thinbot/thinbot/store"
)

func sayWithUsage(text string, prompt, completion int) func(Request) (Response, error) {
	return func(Request) (Response, error) {
		return Response{Content: text, FinishReason: "stop", Usage: Usage{PromptTokens: prompt, CompletionTokens: completion}}, nil
	}
}

// TestTokenUsesFromTheChain: each model call's tokens, the server's or
// the run's estimate, are in the state index as the call commits, newest
// first and per session, and an index rebuilt from the chain says the same.
func TestTokenUsesFromTheChain(t *testing.T) {
	f := newFixture(t, Config{}, sayWithUsage("a", 600, 100), say("b"), sayWithUsage("c", 30, 5))
	run := func(session string) Result {
		t.Helper()
		res, err := f.a.Run(t.Context(), Turn{Session: session, Actor: "user:u", Text: "go"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	run("s1")
	est := run("s2").Usage // no usage reported: the run's estimate
	run("s1")
	if est.PromptTokens == 0 || est.CompletionTokens == 0 {
		t.Fatalf("estimate %+v", est)
	}
	uses := func(a *Agent) []TokenUse {
		t.Helper()
		it, upTo, err := a.TokenUses()
		if err != nil || upTo != f.db.LastSeq() {
			t.Fatalf("TokenUses: upTo %d (last %d), %v", upTo, f.db.LastSeq(), err)
		}
		return collectUses(t, it)
	}
	got := uses(f.a)
	type use struct {
		session string
		tokens  int
	}
	var brief []use
	for i, u := range got {
		brief = append(brief, use{u.Session, u.Tokens})
		if e, ok, err := f.db.Event(u.Seq); err != nil || !ok || e.Type != EvAssistantMessage || e.Session != u.Session || !e.Time.Equal(u.Time) {
			t.Errorf("use %d %+v: event %+v %v %v", i, u, e, ok, err)
		}
		if i > 0 && u.Seq >= got[i-1].Seq {
			t.Errorf("not newest first: %+v", got)
		}
	}
	if want := []use{{"s1", 35}, {"s2", est.PromptTokens + est.CompletionTokens}, {"s1", 700}}; !slices.Equal(brief, want) {
		t.Fatalf("TokenUses = %+v, want %+v", brief, want)
	}
	for _, c := range []struct {
		session string
		upTo    uint64
		want    int
	}{
		{"s1", got[0].Seq, 735}, {"s1", got[0].Seq - 1, 700}, {"s1", got[2].Seq - 1, 0},
		{"s2", got[0].Seq, est.PromptTokens + est.CompletionTokens}, {"s", got[0].Seq, 0}, {"s1/x", got[0].Seq, 0},
	} {
		if n, err := f.a.SessionTokens(c.session, c.upTo); err != nil || n != c.want {
			t.Errorf("SessionTokens(%q, %d) = %d, %v; want %d", c.session, c.upTo, n, err, c.want)
		}
	}
	// Oldest first after a seq, across blocks of 256 seqs.
	var many []store.Event
	for i := range 700 {
		many = append(many, store.Event{Session: "s3", Type: EvAssistantMessage, Actor: "model",
			Payload: mustJSON(AssistantPayload{Content: "x", Usage: Usage{PromptTokens: i + 1}})})
		if i%3 == 0 {
			many = append(many, store.Event{Session: "s3", Type: EvNote, Actor: "test", Payload: mustJSON(NotePayload{Kind: "x"})})
		}
	}
	if _, err := f.db.Append(t.Context(), many...); err != nil {
		t.Fatal(err)
	}
	got = uses(f.a)
	slices.Reverse(got) // oldest first
	for _, after := range []uint64{0, 1, got[0].Seq, 255, 256, 257, 511, got[len(got)-2].Seq, got[len(got)-1].Seq, f.db.LastSeq() + 1000} {
		var want []TokenUse
		for _, u := range got {
			if u.Seq > after {
				want = append(want, u)
			}
		}
		it, upTo, err := f.a.TokenUsesAfter(after)
		if err != nil || upTo != f.db.LastSeq() {
			t.Fatalf("TokenUsesAfter: upTo %d (last %d), %v", upTo, f.db.LastSeq(), err)
		}
		if after := collectUses(t, it); !slices.Equal(after, want) {
			t.Errorf("TokenUsesAfter: %d uses, want %d", len(after), len(want))
		}
	}
	slices.Reverse(got)
	// Another index in between, then this one again: rebuilt from the chain.
	if err := f.db.UseIndex(t.Context(), store.Indexer{Name: "other", Ops: func(*store.Event) []store.IndexOp { return nil }}); err != nil {
		t.Fatal(err)
	}
	if err := f.db.UseIndex(context.Background(), StateIndex); err != nil {
		t.Fatal(err)
	}
	if again := uses(f.a); !slices.Equal(again, got) {
		t.Errorf("rebuilt: %+v\nwas: %+v", again, got)
	}
}

// collectUses collects uses, failing t on an error.
func collectUses(t *testing.T, uses iter.Seq2[TokenUse, error]) []TokenUse {
	t.Helper()
	var out []TokenUse
	for u, err := range uses {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func FuzzTokensValue(f *testing.F) {
	f.Add("fake/C1/R1", 700, int64(1764547200000000000), []byte{})
	f.Add("", 0, int64(-1), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Fuzz(func(t *testing.T, session string, n int, nanos int64, raw []byte) {
		readTokensValue(1, raw) // never panics
		if n < 0 || n > 1<<31-1 {
			return
		}
		e := &store.Event{Session: session, Time: time.Unix(0, nanos)}
		u, ok := readTokensValue(7, tokensValue(e, n))
		if !ok || u.Seq != 7 || u.Session != session || u.Tokens != n || u.Time.UnixNano() != nanos {
			t.Fatalf("round trip: %+v %v", u, ok)
		}
	})
}
