package agentcore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/store"
)

// CarriedApproval is an approval request a cluster's old leader left open,
// its buttons posted: the new leader keeps it open, and goes on with its
// run once it is decided (Agent.Resume). RecoverLeaderLost returns them.
type CarriedApproval struct {
	PendingApproval
	// Approval is the request as it was asked; Asked is when.
	Approval Approval
	Asked    time.Time
	call     ToolCall   // the call it asks for
	rest     []ToolCall // the reply's later calls
}

// carried finds in pa's session what Resume needs, or ok false when the
// request cannot be carried over: no post recorded (no buttons to click),
// a text-protocol reply, a remote command or a file read. Those expire as
// after a restart.
func carried(db *store.DB, pa PendingApproval) (c CarriedApproval, ok bool, err error) {
	if pa.PostID == "" {
		return c, false, nil
	}
	var reply AssistantPayload
	var gp GatePayload
	var asked *ApprovalAskedPayload
	for ev, err := range db.Events(pa.Session, 0) {
		if err != nil {
			return c, false, fmt.Errorf("read session %s: %w", pa.Session, err)
		}
		switch ev.Type {
		case EvAssistantMessage:
			reply = AssistantPayload{}
			json.Unmarshal(ev.Payload, &reply)
		case EvGateDecision:
			gp = GatePayload{}
			json.Unmarshal(ev.Payload, &gp)
		case EvApprovalAsked:
			var p ApprovalAskedPayload
			if json.Unmarshal(ev.Payload, &p) == nil && p.RequestID == pa.RequestID {
				asked, c.Asked = &p, ev.Time
			}
		}
		if asked != nil {
			break
		}
	}
	if asked == nil || reply.Protocol != "tools" || gp.Tool != ToolRun || gp.CallID != asked.CallID || len(gp.Targets) > 0 {
		return c, false, nil
	}
	for i, call := range reply.ToolCalls {
		if call.ID == asked.CallID {
			c.call, c.rest = call, reply.ToolCalls[i+1:]
			c.PendingApproval = pa
			c.Approval = Approval{Session: pa.Session, RequestID: pa.RequestID, Command: gp.Command, SHA256: asked.SHA256,
				Reason: asked.Reason, Rule: gp.Rule, Requester: asked.Requester, Dir: gp.Dir}
			return c, true, nil
		}
	}
	return c, false, nil
}

// Resume goes on with a run a cluster's old leader left waiting for the
// approval c (from RecoverLeaderLost): it awaits the decision through
// t.Approver on the request's existing post (the front end must know the
// request: Approver.Await gets c.PostID), records it, runs the command if
// it was approved (in the approved tier, as the run would have), then the
// reply's later calls and the run's next steps, as Run does, until the
// run's end (run_finished). t is the thread's turn as Run gets it; its
// Text is not recorded again. The rules are Run's: nothing runs before its
// decision is committed, a store failure stops the run.
func (a *Agent) Resume(ctx context.Context, t Turn, c CarriedApproval) (Result, error) {
	s := a.session(t.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(t.Session, s); err != nil {
		return Result{Status: StatusError}, err
	}
	r := &run{Agent: a, t: a.outward(t), s: s, budgets: a.cfg.Budgets.withDefaults(t.Goal).lower(t.Budgets), model: a.modelFor(s), started: a.cfg.Now()}
	s.setStatus(func(st *Status) { *st = Status{Running: true, Goal: t.Goal, Started: a.cfg.Now(), Budgets: r.budgets} })
	defer s.setStatus(func(st *Status) { *st = Status{} })
	runCtx, cancel := context.WithTimeoutCause(ctx, r.budgets.MaxWall, &StopCause{Kind: StopBudget, By: "wall time " + r.budgets.MaxWall.String()})
	defer cancel()
	res, runErr := r.resume(runCtx, c)
	return r.end(ctx, runCtx, res, runErr)
}

// resume is Resume's steps: the carried request's decision and command,
// the reply's later calls, then the loop.
func (r *run) resume(ctx context.Context, c CarriedApproval) (Result, error) {
	r.steps++
	ap := c.Approval
	dec, aerr := r.t.Approver.Await(ctx, ap, c.PostID)
	if aerr != nil {
		dec = ApprovalDecision{Approved: false, By: "system", Why: aerr.Error()}
		if ctx.Err() != nil {
			dec.Why = "cancelled before a decision"
			if cause := CauseOf(ctx); cause != nil {
				dec.Why += ": " + cause.Error()
			}
		}
	}
	_, err := r.record(durable, store.Event{Type: EvApprovalDecided, Actor: orSystem(dec.By), Payload: mustJSON(ApprovalDecidedPayload{
		CallID: c.call.ID, RequestID: ap.RequestID, Approved: dec.Approved, By: dec.By, Why: dec.Why, SHA256: ap.SHA256})})
	r.t.Approver.Decided(ctx, ap, c.PostID, dec, err)
	if err != nil {
		return Result{Status: StatusError}, err
	}
	info := CommandInfo{Tool: ToolRun, Command: ap.Command, Verdict: "confirm", Action: "ask"}
	var (
		content string
		isErr   = true
		ex      *ExecResult
	)
	switch {
	case !dec.Approved:
		why, by := dec.Why, ""
		if why == "" {
			why = "denied"
		}
		if dec.By != "" {
			by = " by " + dec.By
		}
		content = fmt.Sprintf("not run: the approval was refused%s (%s).", by, why)
		r.hookResult(info, content, true)
	case ctx.Err() != nil:
		r.stopped = CauseOf(ctx)
		content = notRun(r.stopped)
	default:
		res, err := Exec(ctx, r.cfg.Exec, sandbox.Approved, r.t.Dir, ap.Command)
		if err != nil {
			content = "error: " + err.Error()
			r.hookResult(info, content, true)
			break
		}
		res.Output = []byte(r.maskOutput(string(res.Output)))
		content = formatExec(res, r.cfg.Exec.ViewLimit)
		isErr = res.ExitCode != 0 || res.TimedOut || res.Cancelled || res.Limit != ""
		r.stopped = res.Cause
		if r.t.Hooks.Result != nil {
			info.Output, info.Size = res.Output, res.Size
		}
		r.hookResult(info, content, isErr)
		ex = &res
	}
	if err := r.result(c.call, c.call.text.view(content, ex != nil), isErr, ex); err != nil {
		return Result{Status: StatusError}, err
	}
	for _, call := range c.rest {
		done, summary, err := r.toolCall(ctx, call)
		if err != nil {
			return Result{Status: StatusError}, err
		}
		if done {
			return Result{Status: StatusDone, Answer: summary}, nil
		}
	}
	return r.loop(ctx)
}
