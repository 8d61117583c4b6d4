package bot

import (
	"context"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
)

// resumeCarried queues the runs a cluster's old leader left waiting for an
// approval (Recover's Unfinished.Carried), each first in its thread.
func (b *Bot) resumeCarried(ctx context.Context) {
	b.mu.Lock()
	carried := b.carried
	b.carried = nil
	b.mu.Unlock()
	for i := range carried {
		c := &carried[i]
		t, ok := ThreadOf(c.Session)
		if !ok {
			continue
		}
		ch, ok := b.cfg.Channel(t.Channel)
		if !ok {
			continue
		}
		b.log.Info("going on with a run the old leader left waiting for an approval", "conv", c.Session, "request", c.RequestID)
		m := Message{Thread: t, User: userOfActor(c.Approval.Requester)}
		b.enqueue(ctx, m, ch, item{msg: m, cmd: "resume", carried: c})
	}
}

// resume goes on with a carried run: its request is adopted with its post
// (clicks on the old leader's buttons decide it, under the same rules), and
// the agent awaits it and goes on (agentcore.Agent.Resume).
func (b *Bot) resume(ctx context.Context, th *thread, it item) {
	c := it.carried
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.mu.Lock()
	th.cancel = cancel
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		th.cancel = nil
		b.mu.Unlock()
	}()
	b.cfg.Metrics.activeRuns(1)
	defer b.cfg.Metrics.activeRuns(-1)
	r := newRenderer(b, th.t)
	r.start(ctx)
	defer r.stop()
	approver := &threadApprover{b: b, th: th, requester: it.msg.User, r: r, asked: map[string]*request{}}
	approver.adopt(c)
	t := agentcore.Turn{
		Session:      th.t.Key(),
		Actor:        actor(it.msg.User),
		Dir:          th.ch.Workspace,
		Instructions: []string{th.ch.Instructions},
		AllowAll:     th.ch.AllowAll,
		FleetGroups:  th.ch.FleetGroups,
		Approver:     approver,
		Hooks:        r.hooks(),
	}
	res, err := th.ch.Agent.Resume(runCtx, t, *c)
	b.ended(ctx, th, r, res, err)
}

// adopt registers a request another process asked (a cluster's old
// leader), with its post, as Ask would have: Await and the clicks on that
// post decide it. Its expiry runs from when it was asked.
func (a *threadApprover) adopt(c *agentcore.CarriedApproval) {
	b := a.b
	acc := b.access.Load()
	timeout := acc.ApprovalTimeout
	req := &request{ap: c.Approval, th: a.th, ch: a.th.ch, requester: a.requester, expires: c.Asked.Add(timeout), timeout: timeout,
		reminders: acc.Reminders, postID: c.PostID,
		decided: make(chan agentcore.ApprovalDecision, 1), committed: make(chan error, 1), ready: make(chan struct{})}
	b.mu.Lock()
	b.pending[c.RequestID] = req
	b.mu.Unlock()
	a.asked[c.RequestID] = req
}

// userOfActor is the chat user an actor string names ("user:ID (name)", as
// actor writes it).
func userOfActor(s string) User {
	id, _ := strings.CutPrefix(s, "user:")
	if i := strings.Index(id, " ("); i >= 0 && strings.HasSuffix(id, ")") {
		return User{ID: id[:i], Name: id[i+2 : len(id)-1]}
	}
	return User{ID: id}
}
