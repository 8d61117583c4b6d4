package bot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// Button ids of an approval request.
const (
	ActionApprove = "approve"
	ActionDeny    = "deny"
)

// request is an open approval request.
type request struct {
	ap agentcore.Approval
	th *thread
	// ch is the channel's configuration of the run that asked: its
	// approvers decide, even after a config reload (Bot.SetAccess).
	ch        Channel
	requester User
	expires   time.Time
	timeout   time.Duration // what expires is now plus
	reminders Reminders     // in force when it was asked
	postID    string
	decided   chan agentcore.ApprovalDecision // buffered 1; written once by whoever takes the request
	// committed tells the click that decided whether its decision is in
	// the chain (buffered 1; written once, by Decided).
	committed chan error
	// ready is closed once the post is recorded in the chain (or failed
	// to be): clicks wait for it, so the record always reads request,
	// post, then clicks.
	ready     chan struct{}
	readyOnce sync.Once
	// awaited is set when Await returned a decision, expired when that
	// decision is the expiry; both only on the run's goroutine.
	awaited, expired bool
}

// setReady closes ready once.
func (req *request) setReady() { req.readyOnce.Do(func() { close(req.ready) }) }

// threadApprover asks a thread's approvers through buttons. The run calls
// it from its own goroutine only.
type threadApprover struct {
	b         *Bot
	th        *thread
	requester User
	r         *renderer           // shows the decision on the waiting step
	asked     map[string]*request // by request id, from Ask to Decided
	// timeout, if set, shortens the Bot's approval timeout, and so does
	// the deadline of Ask's ctx (an external agent's call: the time its
	// client allows).
	timeout time.Duration
}

var _ agentcore.Approver = (*threadApprover)(nil)

// Ask posts the request with Approve/Deny buttons and returns the post's
// id. Clicks wait until Await: the run records the post in between. A
// failure to post is an error, so nothing runs (fail closed).
func (a *threadApprover) Ask(ctx context.Context, ap agentcore.Approval) (string, error) {
	b := a.b
	acc := b.access.Load()
	timeout := acc.ApprovalTimeout
	if a.timeout > 0 {
		timeout = min(timeout, a.timeout)
		if dl, ok := ctx.Deadline(); ok {
			timeout = max(min(timeout, time.Until(dl)), time.Second)
		}
	}
	req := &request{ap: ap, th: a.th, ch: a.th.ch, requester: a.requester, expires: b.cfg.Now().Add(timeout), timeout: timeout, reminders: acc.Reminders,
		decided: make(chan agentcore.ApprovalDecision, 1), committed: make(chan error, 1), ready: make(chan struct{})}
	b.mu.Lock()
	b.pending[ap.RequestID] = req
	b.mu.Unlock()
	postID, err := b.cfg.Adapter.Post(ctx, a.th.t, quiet(Post{
		Text:      approvalText(req, b.zone(req.ch)),
		Buttons:   []Button{{ID: ActionApprove, Label: "Approve", Style: "primary"}, {ID: ActionDeny, Label: "Deny", Style: "danger"}},
		Value:     ap.RequestID,
		Expires:   req.expires,
		Requester: req.requester,
	}))
	if err != nil {
		b.take(ap.RequestID)
		req.setReady()
		b.cfg.Metrics.error("chat")
		return "", fmt.Errorf("post approval request: %w", err)
	}
	b.mu.Lock()
	req.postID = postID
	b.mu.Unlock()
	a.asked[ap.RequestID] = req
	return postID, nil
}

// Await waits for an authorised click, the expiry (a deny) or ctx's end,
// which cancels the request.
func (a *threadApprover) Await(ctx context.Context, ap agentcore.Approval, _ string) (agentcore.ApprovalDecision, error) {
	b := a.b
	req := a.asked[ap.RequestID]
	if req == nil {
		return agentcore.ApprovalDecision{}, fmt.Errorf("approval request %s was not asked", ap.RequestID)
	}
	return b.await(ctx, req)
}

// await waits for an authorised click on req, the expiry (a deny) or
// ctx's end, which cancels the request; meanwhile it reminds (Reminders).
func (b *Bot) await(ctx context.Context, req *request) (agentcore.ApprovalDecision, error) {
	ap := req.ap
	req.setReady()
	timer := time.NewTimer(time.Until(req.expires))
	defer timer.Stop()
	remind, escalate := req.reminders.timers(req.expires.Add(-req.timeout), req.timeout, b.cfg.Now())
	defer remind.Stop()
	defer escalate.Stop()
	for {
		select {
		case <-remind.C:
			b.remind(ctx, req, stageRemind)
		case <-escalate.C:
			b.remind(ctx, req, stageEscalate)
		case d := <-req.decided:
			req.awaited = true
			return d, nil
		case <-timer.C:
			if b.take(ap.RequestID) == nil {
				req.awaited = true
				return <-req.decided, nil // a click won the race
			}
			b.cfg.Metrics.approval("expired")
			req.awaited, req.expired = true, true
			return agentcore.ApprovalDecision{By: "expiry", Why: "expired after " + req.timeout.String()}, nil
		case <-ctx.Done():
			if b.take(ap.RequestID) == nil {
				req.awaited = true
				return <-req.decided, nil
			}
			b.cfg.Metrics.approval("cancelled")
			b.update(ctx, req.th.t, req.postID, Post{Text: decidedText(req, cancelledOutcome(agentcore.CauseOf(ctx)))})
			return agentcore.ApprovalDecision{}, ctx.Err()
		}
	}
}

// Decided shows the decision once the run has recorded it (err nil) or
// failed to: to the click that decided, on an expired request's message,
// and on the status message's waiting step.
func (a *threadApprover) Decided(ctx context.Context, ap agentcore.Approval, _ string, d agentcore.ApprovalDecision, err error) {
	b := a.b
	req := a.asked[ap.RequestID]
	delete(a.asked, ap.RequestID)
	if req == nil {
		return
	}
	if b.take(ap.RequestID) != nil {
		// Never awaited: the post could not be recorded, so a restart
		// could not expire the message; no click may decide it.
		req.setReady()
		b.update(ctx, a.th.t, req.postID, Post{Text: "**Cancelled** — the request could not be recorded. Nothing was run."})
		return
	}
	if req.expired {
		// Shown once the expiry is in the chain (or failed to be: either
		// way nothing ran).
		b.update(ctx, a.th.t, req.postID, Post{Text: decidedText(req, "**Expired** — nobody decided within "+req.timeout.String()+". Nothing was run.")})
	}
	req.committed <- err
	if req.awaited && err == nil {
		a.r.decided(d.Approved, d.By, d.Why)
	}
}

// take removes an open request; nil means it was already taken (decided,
// expired or cancelled). Taking is what makes a decision final, so two
// clicks cannot both decide.
func (b *Bot) take(id string) *request {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.pending[id]
	delete(b.pending, id)
	return r
}

// HandleClick implements Handler: it authorises a click on an approval
// button and hands the decision to the waiting run, or a click on an alert
// card's Acknowledge (alertack.go).
func (b *Bot) HandleClick(ctx context.Context, c Click) ClickResult {
	if c.ActionID == ActionFirstLook {
		return b.runFirstLook(ctx, c)
	}
	if c.ActionID == ActionAck {
		return b.acknowledge(ctx, c)
	}
	b.mu.Lock()
	req := b.pending[c.Value]
	b.mu.Unlock()
	if req != nil {
		// A click that races the recording of the post waits for it.
		select {
		case <-req.ready:
		case <-ctx.Done():
			return ClickResult{Ephemeral: "The request is not ready yet; try again."}
		}
	}
	postID := ""
	if req != nil {
		b.mu.Lock()
		postID = req.postID // written under b.mu by Approve
		b.mu.Unlock()
	}
	if req == nil || (postID != "" && c.PostID != "" && c.PostID != postID) {
		return ClickResult{Ephemeral: "This approval request is no longer open (it was decided, expired, or thinbot restarted). Nothing was changed."}
	}
	if c.ActionID != ActionApprove && c.ActionID != ActionDeny {
		return ClickResult{Ephemeral: "Unknown action."}
	}
	if why := b.authorize(ctx, req, c.User); why != "" {
		b.cfg.Metrics.approval("refused_click")
		b.log.Warn("approval click refused", "conv", req.ap.Session, "request", req.ap.RequestID, "user", c.User.ID, "name", c.User.Name, "why", why)
		if _, err := req.ch.Agent.NoteUnlocked(req.ap.Session, agentcore.EvNote, actor(c.User), agentcore.NotePayload{
			Kind: agentcore.NoteClickRefused, RequestID: req.ap.RequestID, User: c.User.ID, Detail: why}); err != nil {
			b.log.Error("record refused click", "err", err)
		}
		return ClickResult{Ephemeral: "You cannot decide this request: " + why + ". Nothing was changed."}
	}
	if b.take(req.ap.RequestID) == nil {
		return ClickResult{Ephemeral: "This request was already decided. Nothing was changed."}
	}
	d := agentcore.ApprovalDecision{Approved: c.ActionID == ActionApprove, By: actor(c.User)}
	outcome := DecisionOutcome(d.Approved, d.By, "", b.cfg.Now(), b.zone(req.ch))
	if d.Approved {
		b.cfg.Metrics.approval("approved")
	} else {
		d.Why = "denied by " + displayName(c.User)
		b.cfg.Metrics.approval("denied")
	}
	req.decided <- d
	// Show the decision only once it is in the chain. The wait is short
	// (one commit); platforms time callbacks out after a few seconds.
	select {
	case err := <-req.committed:
		if err != nil {
			b.log.Error("record approval decision", "conv", req.ap.Session, "request", req.ap.RequestID, "err", err)
			outcome = "**Not recorded** — the decision could not be written to the audit log, so nothing was run."
		}
	case <-time.After(5 * time.Second):
		b.log.Warn("approval decision not yet recorded; updating the message anyway", "conv", req.ap.Session, "request", req.ap.RequestID)
	case <-ctx.Done():
	}
	return ClickResult{Update: &Post{Text: decidedText(req, outcome)}}
}

// authorize returns why u may not decide req, or "" if they may.
func (b *Bot) authorize(ctx context.Context, req *request, u User) string {
	ch := req.ch
	if ch.TwoPerson && u.ID == req.requester.ID {
		return "the two-person rule is on, so the requester cannot approve their own request"
	}
	if isApprover(ch.Approvers, u) {
		return ""
	}
	if ch.AnyMember {
		ok, err := b.cfg.Adapter.IsMember(ctx, req.th.t.Channel, u.ID)
		if err != nil {
			b.log.Warn("check channel membership", "channel", req.th.t.Channel, "user", u.ID, "err", err)
			return "your channel membership could not be checked"
		}
		if ok {
			return ""
		}
		return "only members of this channel may approve"
	}
	return "you are not an approver for this channel"
}

// approvalText is the approval card; its expiry is in loc.
func approvalText(req *request, loc *time.Location) string {
	var b strings.Builder
	what := "wants to run"
	if req.ap.Rule == silenceRule {
		what = "asks thinbot to change Alertmanager"
	}
	fmt.Fprintf(&b, "**Approval needed** — @%s's request %s:\n```\n%s\n```\n", displayName(req.requester), what, req.ap.Command)
	if len(req.ap.Targets) > 0 {
		fmt.Fprintf(&b, "**On %s** (%s)\n", agentcore.TargetSummary(req.ap.Targets), agentcore.LoginSummary(req.ap.Logins))
	}
	if req.ap.Reason != "" {
		fmt.Fprintf(&b, "Reason: %s\n", req.ap.Reason)
	}
	// The gate's words, not its rule's name (which the chain records):
	// the person on call reads this card.
	if req.ap.Why != "" {
		fmt.Fprintf(&b, "Why it needs approval: %s\n", textfmt.OneLine(req.ap.Why, 300))
	} else {
		fmt.Fprintf(&b, "Rule: `%s`\n", req.ap.Rule) // a request no gate decision made (a /silence)
	}
	fmt.Fprintf(&b, "Request `%s` · expires %s · sha256 `%s`", req.ap.RequestID,
		textfmt.Clock(req.expires, loc, "15:04"), req.ap.SHA256[:12])
	return b.String()
}

func decidedText(req *request, outcome string) string {
	return DecidedCard(outcome, req.ap.Command, req.ap.Targets, actor(req.requester), req.ap.RequestID)
}
