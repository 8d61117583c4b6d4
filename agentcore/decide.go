package agentcore

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// decide records the gate's decision and, for confirm, the human's; it
// reports whether the action may go ahead and, if not, what the model is
// told. A false with a nil error is a refusal; an error is a store failure.
func (r *run) decide(ctx context.Context, call ToolCall, info CommandInfo, d gate.Decision, reason string) (bool, string, error) {
	action := "refuse"
	switch {
	case d.Verdict == gate.Pass:
		action = "run"
	case d.Verdict == gate.Confirm && r.t.AllowAll:
		action = "run"
	case d.Verdict == gate.Confirm && r.t.Approver != nil:
		action = "ask"
	}
	// The hash binds the exact command (and targets); everything shown or
	// recorded is scrubbed on its way out (write, outwardTurn).
	binding := BindingSHA(info.Command, info.Targets)
	info.Verdict, info.Reason, info.Action = d.Verdict.String(), d.Reason, action
	gp := GatePayload{CallID: call.ID, Tool: info.Tool, Dir: r.t.Dir, Verdict: d.Verdict.String(), Reason: info.Reason, Rule: d.Rule, Action: action,
		Targets: info.Targets, TargetCount: len(info.Targets)}
	if len(info.Targets) > 0 {
		gp.Dir = ""
	}
	if info.Tool == ToolReadFile {
		gp.Path = info.Command
	} else {
		gp.Command = info.Command
		if info.Requested != "" && info.Requested != info.Command {
			gp.Requested = info.Requested
		}
	}
	evs, err := r.record(durable, store.Event{Type: EvGateDecision, Actor: "gate", Payload: mustJSON(gp)})
	if err != nil {
		return false, "", err
	}
	r.hookCommand(info)
	switch action {
	case "run":
		return true, "", nil
	case "refuse":
		if d.Verdict == gate.Deny {
			return false, fmt.Sprintf("refused by policy (%s): %s. Do not try to get around this; choose another way or tell the user.", d.Rule, info.Reason), nil
		}
		// The rule's name is in the gate decision; the words are for the
		// model and for the person who reads the thread.
		why := cmp.Or(r.t.NoApprover, "this run has no approver (non-interactive, without --allow-all)")
		return false, fmt.Sprintf("not run: %s. It needs a human's approval, and %s.", info.Reason, why), nil
	}
	ap := Approval{Session: r.t.Session, RequestID: fmt.Sprintf("r%d", evs[0].Seq), Command: info.Command,
		Targets: info.Targets, Logins: info.Logins, SHA256: binding, Reason: reason, Rule: d.Rule, Why: info.Reason, Requester: r.t.Actor, Dir: r.t.Dir}
	if info.Tool == ToolReadFile {
		ap.Command = "read_file " + info.Command
	}
	if len(info.Targets) > 0 {
		ap.Dir = ""
	}
	if _, err := r.record(durable, store.Event{Type: EvApprovalAsked, Actor: "gate", Payload: mustJSON(ApprovalAskedPayload{
		CallID: call.ID, RequestID: ap.RequestID, Command: info.Command, SHA256: ap.SHA256, Reason: reason, Requester: r.t.Actor,
		Targets: info.Targets, TargetCount: len(info.Targets)})}); err != nil {
		return false, "", err
	}
	dec, where, asked, aerr := r.askApproval(ctx, ap)
	if aerr != nil {
		dec = ApprovalDecision{Approved: false, By: "system", Why: aerr.Error()}
		if ctx.Err() != nil {
			dec.Why = "cancelled before a decision"
			if c := CauseOf(ctx); c != nil {
				dec.Why += ": " + c.Error()
			}
		}
	}
	_, err = r.record(durable, store.Event{Type: EvApprovalDecided, Actor: orSystem(dec.By), Payload: mustJSON(ApprovalDecidedPayload{
		CallID: call.ID, RequestID: ap.RequestID, Approved: dec.Approved, By: dec.By, Why: dec.Why, SHA256: ap.SHA256})})
	if asked {
		r.t.Approver.Decided(ctx, ap, where, dec, err)
	}
	if err != nil {
		return false, "", err
	}
	if !dec.Approved {
		why := dec.Why
		if why == "" {
			why = "denied"
		}
		by := ""
		if dec.By != "" {
			by = " by " + dec.By
		}
		return false, fmt.Sprintf("not run: the approval was refused%s (%s).", by, why), nil
	}
	return true, "", nil
}

// askApproval asks the turn's Approver and records where the request is
// shown. asked reports whether Ask succeeded (the Approver then expects
// Decided). A request whose post cannot be recorded is not awaited: a
// restart could not close it, so it must not be decided (fail closed).
func (r *run) askApproval(ctx context.Context, ap Approval) (dec ApprovalDecision, where string, asked bool, err error) {
	where, err = r.t.Approver.Ask(ctx, ap)
	if err != nil {
		return ApprovalDecision{}, "", false, err
	}
	if where != "" {
		if _, err := r.record(durable, store.Event{Type: EvNote, Actor: "bot", Payload: mustJSON(NotePayload{
			Kind: NoteApprovalPosted, RequestID: ap.RequestID, PostID: where})}); err != nil {
			return ApprovalDecision{}, where, true, err
		}
	}
	dec, err = r.t.Approver.Await(ctx, ap, where)
	return dec, where, true, err
}

func orSystem(by string) string {
	if by == "" {
		return "system"
	}
	return by
}

// runCommand gates and runs one shell command, returning what the model sees.
func (r *run) runCommand(ctx context.Context, call ToolCall, command, reason, target string) (string, bool, *ExecResult, error) {
	if target != "" {
		return r.runRemote(ctx, call, command, reason, target)
	}
	judged := r.cfg.Policy.ClassifyIn(r.t.Dir, command)
	requested := command
	command = program(judged, command)
	d := r.checkPins(requested, r.failClosed(ctx, judged))
	info := CommandInfo{Tool: ToolRun, Command: command, Requested: requested}
	ok, refusal, err := r.decide(ctx, call, info, d, reason)
	if err != nil {
		return "", false, nil, err
	}
	info.Verdict, info.Reason = d.Verdict.String(), d.Reason
	if !ok {
		r.hookResult(info, refusal, true)
		return refusal, true, nil, nil
	}
	if err := ctx.Err(); err != nil {
		// Cancelled while waiting for approval: record why nothing ran.
		r.stopped = CauseOf(ctx)
		return notRun(r.stopped), true, nil, nil
	}
	ex, err := Exec(ctx, r.cfg.Exec, modeFor(d.Verdict), r.t.Dir, command)
	if err != nil {
		content := "error: " + err.Error()
		r.hookResult(info, content, true)
		return content, true, nil, nil
	}
	ex.Output = []byte(r.maskOutput(string(ex.Output)))
	content := formatExec(ex, r.cfg.Exec.ViewLimit)
	isErr := ex.ExitCode != 0 || ex.TimedOut || ex.Cancelled || ex.Limit != ""
	r.stopped = ex.Cause
	if r.t.Hooks.Result != nil {
		info.Output, info.Size = ex.Output, ex.Size
	}
	r.hookResult(info, content, isErr)
	return content, isErr, &ex, nil
}

// program is the text the shell runs for a command the gate judged: the
// gate's rendering of the tree it judged, so that bash runs what the gate
// read (a comment or a here-document bash reads otherwise cannot smuggle
// another program past it). A command the gate could not parse has no
// rendering; it runs as written, and only after a human approved it.
func program(d gate.Decision, command string) string {
	if d.Program != "" {
		return d.Program
	}
	return command
}

// modeFor is the tier a command the gate (and, for a confirm, its
// approver) let through runs with, here and on remote hosts: read-only
// for a pass, approved for anything else.
func modeFor(v gate.Verdict) sandbox.Mode {
	if v == gate.Pass {
		return sandbox.ReadOnly
	}
	return sandbox.Approved
}

// SandboxState says, for /status, how commands run: "enforced", "off"
// (the operator turned it off, or no sandbox was configured),
// "unavailable: why" (every command then needs an approval) or "starting"
// (commands wait for it). It does not wait.
func (a *Agent) SandboxState() string {
	now, cancel := context.WithCancel(context.Background())
	cancel()
	ec, err := a.cfg.Exec.started(now)
	switch {
	case err != nil:
		return "starting: commands wait until it is up"
	case ec.NoSandbox != "":
		return "unavailable (" + ec.NoSandbox + "): every command needs an approval"
	case ec.Sandbox == nil:
		return "off: commands run unconfined, only the gate stands in the way"
	case ec.Sandbox.Err() != nil:
		return "unavailable (" + ec.Sandbox.Err().Error() + "): every command needs an approval"
	}
	return "enforced: read-only commands cannot write, the bot's secrets are hidden from every command"
}

// failClosed turns a pass verdict into confirm while the kernel sandbox
// that pass verdicts rely on is wanted but missing or broken. A sandbox
// still starting is waited for (ExecConfig.Starting); one whose state
// stays unknown (ctx ended first) counts as missing.
func (a *Agent) failClosed(ctx context.Context, d gate.Decision) gate.Decision {
	if d.Verdict != gate.Pass {
		return d
	}
	ec, err := a.cfg.Exec.started(ctx)
	why := ec.NoSandbox
	if err != nil {
		why = err.Error()
	} else if why == "" && ec.Sandbox != nil {
		if err := ec.Sandbox.Err(); err != nil {
			why = err.Error()
		}
	}
	if why == "" {
		return d
	}
	return gate.Decision{Verdict: gate.Confirm, Rule: "sandbox-unavailable",
		Reason: "read-only, but the kernel sandbox is unavailable (" + why + "), so every command needs an approval"}
}

func formatExec(ex ExecResult, view int) string {
	var b strings.Builder
	switch {
	case ex.OutputCut:
		fmt.Fprintf(&b, "output limit reached: thinbot read %d bytes, then stopped reading and killed the process group; the rest of the output was not read\n", ex.Size)
	case ex.TimedOut:
		fmt.Fprintf(&b, "timed out after %s; the process group was killed\n", ex.Duration.Round(time.Second))
	case ex.Cancelled:
		b.WriteString(interrupted(ex.Cause) + "; the process group was killed\n")
	default:
		fmt.Fprintf(&b, "exit code: %d\n", ex.ExitCode)
	}
	if ex.Limit != "" {
		b.WriteString(ex.Limit + "\n")
	}
	out := string(ex.Output)
	if out == "" {
		b.WriteString("(no output)")
	} else {
		b.WriteString(textfmt.HeadTail(out, view))
	}
	return b.String()
}

// oneLine is how the model's labels ("Output of `...`", "Result of ...")
// and the skill command list quote a command or arguments: one line of at
// most 80 bytes.
func oneLine(s string) string { return textfmt.OneLine(s, 80) }
