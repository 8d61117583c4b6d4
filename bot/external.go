package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// ErrNotServing is returned by OpenExternal and ExternalThread.Call when
// the Bot is stopping, or its channel is no longer configured.
var ErrNotServing = errors.New("bot: not serving this channel")

// ExternalThread is the thread of one session of an agent outside thinbot
// (an MCP client, bot/mcp): its calls are shown there, its writes wait for
// the channel's approvers there, and the thread's key is the session of
// its calls in the chain. Safe for concurrent use; its calls are recorded
// one at a time (the session's lock).
type ExternalThread struct {
	b       *Bot
	th      *thread
	user    User
	timeout time.Duration
}

// External describes an external agent's session for OpenExternal.
type External struct {
	// Thread names the platform and channel; its Root is ignored.
	Thread Thread
	// Who is the agent: ID its identity ("mcp:ci"), Name the name its
	// client gave; the chain's actor is "ID (Name)", the approval card's
	// requester Name.
	Who User
	// Title is the thread's root post ("MCP session of codex-mcp-client").
	Title string
	// ApprovalTimeout, if set, shortens the Bot's approval timeout for the
	// session's requests; a call's ctx deadline shortens it further.
	ApprovalTimeout time.Duration
}

// OpenExternal opens a thread for an external agent's session in the
// channel of e.Thread: its root post is e.Title. The channel's
// configuration (approvers, workspace, agent) applies, read again at each
// call. An error means no thread was opened.
func (b *Bot) OpenExternal(ctx context.Context, e External) (*ExternalThread, error) {
	t := e.Thread
	ch, ok := b.cfg.Channel(t.Channel)
	if !ok {
		return nil, fmt.Errorf("%w: channel %s", ErrNotServing, t.Channel)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id, err := b.cfg.Adapter.Post(pctx, Thread{Platform: t.Platform, Channel: t.Channel}, quiet(Post{Text: e.Title}))
	if err != nil {
		b.cfg.Metrics.error("chat")
		return nil, fmt.Errorf("open thread: %w", err)
	}
	t.Root = id
	key := t.Key()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil, ErrNotServing
	}
	th := b.threads[key]
	if th == nil {
		th = &thread{t: t, ch: ch, participants: map[string]bool{}}
		b.threads[key] = th
	}
	b.known[key] = true
	return &ExternalThread{b: b, th: th, user: e.Who, timeout: e.ApprovalTimeout}, nil
}

// Thread is the thread OpenExternal opened.
func (x *ExternalThread) Thread() Thread { return x.th.t }

// Call runs one tool call of the agent in its thread through
// agentcore.Agent.CallTool: a write's approval card is posted in the thread
// and the call waits for a click, the expiry (a deny) or ctx's end (the
// client went away or gave up: the request is cancelled, recorded, and
// nothing runs); the thread's status message shows the call and the first
// lines of its result. text is recorded as the call's user_message. A
// call takes one of the Bot's run slots (Config.MaxConcurrent), waiting
// for one if need be. The Bot's stop cancels a call under way. An error
// is a store failure, ErrNotServing, or ctx's.
func (x *ExternalThread) Call(ctx context.Context, text string, c agentcore.ExternalCall) (agentcore.ExternalResult, error) {
	b, th := x.b, x.th
	ch, ok := b.cfg.Channel(th.t.Channel)
	b.mu.Lock()
	if !ok || b.closing {
		b.mu.Unlock()
		return agentcore.ExternalResult{}, ErrNotServing
	}
	b.wg.Add(1)
	th.ch = ch
	runCtx := b.runCtx
	b.mu.Unlock()
	defer b.wg.Done()
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if runCtx != nil {
		// The daemon's shutdown ends the call as it ends a chat run, with
		// its cause (the signal).
		stop := context.AfterFunc(runCtx, func() { cancel(context.Cause(runCtx)) })
		defer stop()
	}
	// A call is a run: it takes one of the global run slots
	// (max_concurrent_runs), so that agents outside cannot run more
	// commands at once than the chat may.
	select {
	case b.slots <- struct{}{}:
	case <-callCtx.Done():
		return agentcore.ExternalResult{Result: agentcore.Result{Status: agentcore.StatusCancelled}}, context.Cause(callCtx)
	}
	defer func() { <-b.slots }()
	b.cfg.Metrics.activeRuns(1)
	defer b.cfg.Metrics.activeRuns(-1)

	r := newRenderer(b, th.t)
	r.unwatched()
	r.start(callCtx)
	approver := &threadApprover{b: b, th: th, requester: x.user, r: r, asked: map[string]*request{}, timeout: x.timeout}
	res, err := ch.Agent.CallTool(callCtx, agentcore.Turn{
		Session:  th.t.Key(),
		Actor:    x.user.ID + " (" + textfmt.OneLine(x.user.Name, 80) + ")",
		Text:     text,
		Dir:      ch.Workspace,
		AllowAll: ch.AllowAll,
		Approver: approver,
		Hooks:    r.hooks(),
	}, c)
	b.cfg.Metrics.run(res.Status)
	r.finishSteps(context.WithoutCancel(ctx))
	if err != nil && res.Status != agentcore.StatusCancelled {
		b.cfg.Metrics.error("store")
		b.log.Error("external call failed", "conv", th.t.Key(), "seq", res.LastSeq, "err", err)
	}
	return res, err
}

// finishSteps ends a renderer whose run has no answer to post (an external
// agent's call): the status message shows its final state, posted now if
// it was not yet.
func (r *renderer) finishSteps(ctx context.Context) {
	r.stop()
	r.mu.Lock()
	posted, steps := r.postID != "", !r.prog.Empty()
	text := r.statusText(true)
	r.mu.Unlock()
	switch {
	case posted:
		r.flush(ctx, true)
	case steps:
		r.b.post(ctx, r.t, Post{Text: text})
	}
}
