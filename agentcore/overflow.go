package agentcore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
)

// serverLimits is what the model server said about its context window in
// context-length errors. It is shared by all sessions of an Agent and never
// changes a prompt (only max_tokens and when to compact), so prompt
// prefixes stay stable.
type serverLimits struct {
	mu sync.Mutex
	// window is the server's context window, 0 until a server said it.
	window int
	// capCompletion is set once the server's completion budget (its default
	// for a request without max_tokens, or ours) overflowed the window: from
	// then on every request sends a max_tokens that fits.
	capCompletion bool
	// scale is server tokens per EstimateTokens token (at least 1), learned
	// from the server's prompt count.
	scale float64
}

// minCompletion is the smallest completion budget worth asking for: below
// it, the prompt must shrink instead.
func minCompletion(window int) int { return min(1024, max(window/8, 64)) }

// window is the context window the kernel plans with: the configured one,
// or the server's if a server said it is smaller.
func (a *Agent) window() int {
	a.limits.mu.Lock()
	defer a.limits.mu.Unlock()
	if a.limits.window > 0 && a.limits.window < a.cfg.ContextWindow {
		return a.limits.window
	}
	return a.cfg.ContextWindow
}

// maxTokens is the max_tokens to send with msgs: 0 (the server's default)
// unless the server's default was seen to overflow its window.
func (a *Agent) maxTokens(msgs []Message) int {
	a.limits.mu.Lock()
	defer a.limits.mu.Unlock()
	if !a.limits.capCompletion || a.limits.window <= 0 {
		return 0
	}
	prompt := int(float64(EstimateTokens(msgs))*a.limits.scale) + 1
	room := a.limits.window - prompt - overflowMargin(a.limits.window)
	return max(room, minCompletion(a.limits.window))
}

// overflowMargin is the slack left between prompt and completion: the
// server's count of the next prompt is not known exactly.
func overflowMargin(window int) int { return max(16, window/100) }

// overflow decides what to do after a context-length error on req: lower
// max_tokens to what the server says fits, or compact the session once, and
// return the max_tokens for the next attempt. When neither can help it
// returns the error to give up with, which wraps ErrModel and the server's
// error and says what to change. It never asks for the same request again:
// the caller refuses to resend an identical one.
func (r *run) overflow(ctx context.Context, req Request, err error) (int, error) {
	var cle *ContextLengthError
	if !errors.As(err, &cle) {
		cle = &ContextLengthError{}
	}
	if cle.Window > 0 {
		r.limits.mu.Lock()
		if r.limits.window == 0 || cle.Window < r.limits.window {
			r.limits.window = cle.Window
		}
		if est := EstimateTokens(req.Messages); cle.Prompt > 0 && est > 0 {
			r.limits.scale = max(1, float64(cle.Prompt)/float64(est))
		} else if r.limits.scale == 0 {
			r.limits.scale = 1
		}
		r.limits.mu.Unlock()
	}
	// The prompt fits and the completion budget does not: ask for less.
	if cle.Window > 0 && cle.Prompt > 0 {
		room := cle.Window - cle.Prompt - overflowMargin(cle.Window)
		if room >= minCompletion(cle.Window) && (req.MaxTokens == 0 || room < req.MaxTokens) {
			r.limits.mu.Lock()
			r.limits.capCompletion = true
			r.limits.mu.Unlock()
			r.log.Info("model context overflow: lowering max_tokens", "conv", r.t.Session,
				"window", cle.Window, "prompt", cle.Prompt, "completion", cle.Completion, "max_tokens", room)
			return room, nil
		}
	}
	// The prompt itself is too large: compact once, if there is history.
	if !r.compacted && len(req.Messages) >= 3 {
		r.compacted = true
		before := r.s.last
		if cerr := r.maybeCompact(ctx, true); cerr != nil {
			return 0, fmt.Errorf("compact after context overflow: %w (first error: %w)", cerr, err)
		}
		if r.s.last != before {
			return r.maxTokens(r.s.proj.Messages()), nil
		}
	}
	what := "there is no history left to compact"
	if r.compacted {
		what = "compacting the history did not make it fit"
	}
	return 0, fmt.Errorf("%w: %w: the prompt does not fit the model's context window%s and %s. "+
		"The system prompt (instructions, skill index, memory) and the newest message are too large for this model: "+
		"raise the server's context size (vLLM --max-model-len, llama.cpp -c, Ollama num_ctx) or set the model's context_window "+
		"in the config to the server's window so that thinbot sizes its prompt to it", ErrModel, err, windowNote(cle), what)
}

func windowNote(cle *ContextLengthError) string {
	switch {
	case cle.Window > 0 && cle.Prompt > 0:
		return fmt.Sprintf(" (the server counts %d prompt tokens against a window of %d)", cle.Prompt, cle.Window)
	case cle.Window > 0:
		return fmt.Sprintf(" (the server's window is %d tokens)", cle.Window)
	}
	return ""
}

// sameRequest reports whether two requests would send the same bytes.
func sameRequest(a, b Request) bool {
	return a.MaxTokens == b.MaxTokens && (a.Tools == nil) == (b.Tools == nil) && reflect.DeepEqual(a.Messages, b.Messages)
}
