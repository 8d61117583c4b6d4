package agentcore

import (
	"context"
	"errors"
)

// Kinds of StopCause: why a run's context ended. They are recorded in the
// chain (run_finished's and tool_result's "cause"): never rename one, only
// add.
const (
	StopShutdown = "shutdown" // the process is ending: By names the signal
	StopUser     = "stop"     // a person stopped the run: By names them, Via how (/stop, Ctrl+C)
	StopBudget   = "budget"   // a budget of the run ran out: By names it (the wall time)
)

// StopCause is why a run was cancelled. A front end that cancels a run
// gives one as the cause of its context's end (context.WithCancelCause;
// cmd does the same for a signal), and the run records it: in the text of
// the result of the command it interrupted (what the model reads), in the
// result's and run_finished's "cause" and "cause_by" fields, and in
// Result.Cause. A run cancelled without one is recorded as interrupted,
// with no cause: the record never guesses who stopped it.
type StopCause struct {
	// Kind is StopShutdown, StopUser or StopBudget.
	Kind string
	// By is who or what stopped the run: the signal of a shutdown
	// ("SIGTERM"), the actor who stopped it ("user:U1 (alice)"), the
	// budget that ran out ("wall time 30m0s").
	By string
	// Via is how a person stopped it: "/stop", "Ctrl+C".
	Via string
}

// Error says why the run stopped, as the chain and the model read it.
func (c *StopCause) Error() string {
	switch c.Kind {
	case StopShutdown:
		return "thinbot is shutting down (" + c.By + ")"
	case StopUser:
		s := "stopped by " + c.By
		if c.Via != "" {
			s += " with " + c.Via
		}
		return s
	case StopBudget:
		return "the run's budget ran out (" + c.By + ")"
	}
	return "stopped (" + c.Kind + ")"
}

// CauseOf returns why ctx ended: its StopCause, or nil when ctx is not
// done or was cancelled without one.
func CauseOf(ctx context.Context) *StopCause {
	var c *StopCause
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &c) {
		return c
	}
	return nil
}

// interrupted is the first line of what the model reads of a command that
// ctx ended: "interrupted: thinbot is shutting down (SIGTERM)".
func interrupted(c *StopCause) string {
	if c == nil {
		return "interrupted"
	}
	return "interrupted: " + c.Error()
}

// notRun is what the model reads of a command the run's cancellation kept
// from running (it ended while the approval was awaited).
func notRun(c *StopCause) string {
	if c != nil {
		return "not run: the run was interrupted: " + c.Error()
	}
	return "not run: the run was interrupted"
}

// causeFields are a cause's kind and who or what, as the chain's cause and
// cause_by fields hold them: "" for none.
func causeFields(c *StopCause) (kind, by string) {
	if c == nil {
		return "", ""
	}
	return c.Kind, c.By
}
