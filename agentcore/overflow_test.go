package agentcore

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// A context-length error on a short history is never answered by sending
// the same request again: the server's numbers lower max_tokens, a prompt
// that cannot fit stops with a clear error.
func TestContextOverflowOnShortHistory(t *testing.T) {
	overflowErr := func(o ContextLengthError) func(Request) (Response, error) {
		return fail(fmt.Errorf("HTTP 400: %w", &o))
	}
	t.Run("completion budget too large: max_tokens lowered", func(t *testing.T) {
		f := newFixture(t, Config{},
			overflowErr(ContextLengthError{Window: 32768, Prompt: 1000, Completion: 32000}),
			func(r Request) (Response, error) {
				if want := 32768 - 1000 - 327; r.MaxTokens != want {
					t.Errorf("retry max_tokens = %d, want %d", r.MaxTokens, want)
				}
				return Response{ToolCalls: []ToolCall{{ID: "c1", Name: ToolRun, Arguments: `{"command":"true"}`}}}, nil
			},
			func(r Request) (Response, error) {
				if r.MaxTokens <= 0 || r.MaxTokens > 32768-1000 {
					t.Errorf("later call max_tokens = %d, want a budget that fits", r.MaxTokens)
				}
				return Response{Content: "fits now"}, nil
			})
		res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "hi", Dir: f.dir})
		if err != nil || res.Answer != "fits now" {
			t.Fatalf("Run = %+v, %v", res, err)
		}
	})
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"prompt alone too large (llama.cpp)", &ContextLengthError{Window: 4096, Prompt: 4476}},
		{"no numbers (Ollama)", ErrContextLength},
		{"completion floor does not fit", &ContextLengthError{Window: 4096, Prompt: 4000, Completion: 2000}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{}, fail(fmt.Errorf("HTTP 400: %w", tt.err)))
			_, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "hi", Dir: f.dir})
			if !errors.Is(err, ErrContextLength) || !errors.Is(err, ErrModel) {
				t.Fatalf("err = %v, want ErrContextLength and ErrModel", err)
			}
			if !strings.Contains(err.Error(), "context_window") || !strings.Contains(err.Error(), "max-model-len") {
				t.Errorf("the error does not say what to change: %v", err)
			}
			if n := len(f.model.reqs); n != 1 {
				t.Errorf("%d model calls, want 1 (no resend)", n)
			}
		})
	}
	t.Run("a server that keeps refusing gets different requests, then an error", func(t *testing.T) {
		var reqs []Request
		refuse := func(r Request) (Response, error) {
			reqs = append(reqs, r)
			return Response{}, fmt.Errorf("HTTP 400: %w", &ContextLengthError{Window: 32768, Prompt: 1000, Completion: 32000})
		}
		f := newFixture(t, Config{}, refuse, refuse)
		_, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "hi", Dir: f.dir})
		if !errors.Is(err, ErrContextLength) {
			t.Fatalf("err = %v", err)
		}
		for i := 1; i < len(reqs); i++ {
			for j := range i {
				if reqs[i].MaxTokens == reqs[j].MaxTokens && reflect.DeepEqual(reqs[i].Messages, reqs[j].Messages) {
					t.Errorf("request %d repeats request %d", i, j)
				}
			}
		}
	})
}
