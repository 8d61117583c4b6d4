package agentcore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/thinbot/thinbot/store"
)

// defaultCompactPrompt asks the model for a summary that replaces history.
const defaultCompactPrompt = `The conversation is getting long. Write a summary that will replace everything above it.
Keep: the user's goal and requests, facts found (host names, paths, numbers, errors), commands that worked and their key results, decisions and approvals, what is still open and the next step.
Leave out: raw command output, failed attempts that taught nothing. Write plain text, at most 400 words.`

// EstimateTokens is the kernel's token estimate: one token per 4 bytes,
// rounded up, which over-counts English slightly and keeps compaction early
// rather than late.
func EstimateTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += msgBytes(m)
	}
	return (n + 3) / 4
}

// msgBytes is a message's size for EstimateTokens.
func msgBytes(m Message) int {
	n := len(m.Content) + len(m.Reasoning) + 8
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Arguments) + 8
	}
	return n
}

// maybeCompact compacts the session when its projection exceeds the
// configured share of the context window, or always when force is set.
func (r *run) maybeCompact(ctx context.Context, force bool) error {
	before := r.s.proj.Tokens()
	if !force && float64(before) < r.cfg.CompactAt*float64(r.window()) {
		return nil
	}
	// The summary covers what is committed: commit pending tool results
	// first (the model saw them).
	if _, err := r.record(durable); err != nil {
		return err
	}
	before = r.s.proj.Tokens()
	msgs := r.s.proj.Messages()
	if len(msgs) < 3 {
		return nil // nothing to summarise beyond the prompt and one message
	}
	return r.compact(ctx, r.t.Session, r.s, msgs, before, r)
}

// compact asks the model for a summary and records it. During a run
// (r != nil) the newest user message and what follows it are kept after
// the summary, so the question being worked on is not folded into it.
func (a *Agent) compact(ctx context.Context, id string, s *session, msgs []Message, before int, r *run) error {
	prompt := a.cfg.CompactPrompt
	if prompt == "" {
		prompt = defaultCompactPrompt
	}
	upTo := s.last
	history := msgs
	if r != nil {
		if idx, seq, ok := s.proj.lastUser(); ok && idx > 1 {
			history, upTo = msgs[:idx], seq-1
		}
	}
	// When the history itself overflows the window, drop the oldest
	// messages from the summarisation request (they stay in the chain).
	req := append(history[:len(history):len(history)], Message{Role: RoleUser, Content: prompt})
	limit := int(0.9 * float64(a.window()))
	for EstimateTokens(req) > limit && len(req) > 3 {
		req = append(req[:1:1], req[2:]...)
		for len(req) > 2 && req[1].Role == RoleTool {
			req = append(req[:1:1], req[2:]...)
		}
	}
	if r != nil {
		r.calls++
	}
	resp, err := a.cfg.Model.Complete(ctx, Request{Messages: req})
	if err != nil {
		return fmt.Errorf("%w: compaction: %w", ErrModel, err)
	}
	summary := strings.TrimSpace(resp.Content)
	if summary == "" {
		return errors.New("compaction: the model returned an empty summary")
	}
	ev := store.Event{Type: EvCompacted, Actor: "model", Payload: mustJSON(CompactedPayload{
		Summary: summary, UpToSeq: upTo, TokensBefore: before,
		TokensAfter: before - EstimateTokens(history) + EstimateTokens([]Message{{Role: RoleSystem, Content: s.proj.System()}, {Role: RoleUser, Content: summaryPrefix + summary}})})}
	if r != nil {
		_, err = r.record(durable, ev)
	} else {
		_, err = a.commit(id, s, durable, []store.Event{ev})
	}
	return err
}

// Compact summarises the session now (the /compact command). It reports the
// estimated tokens before and after.
func (a *Agent) Compact(ctx context.Context, id string) (before, after int, err error) {
	err = a.update(id, func(s *session) error {
		msgs := s.proj.Messages()
		before = EstimateTokens(msgs)
		if len(msgs) < 3 {
			after = before
			return errors.New("nothing to compact yet")
		}
		if err := a.compact(ctx, id, s, msgs, before, nil); err != nil {
			return err
		}
		after = EstimateTokens(s.proj.Messages())
		return nil
	})
	return before, after, err
}
