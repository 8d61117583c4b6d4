package agentcore

import (
	"context"
	"time"
)

// Approval is a confirm verdict put to a human.
type Approval struct {
	Session   string
	RequestID string // unique in the chain: "r" + the gate decision's sequence number
	Command   string // what will run if approved, the bot's secrets redacted
	// Targets are the remote hosts it will run on, all of them, in order;
	// empty for a local command. The approval is bound to them too.
	Targets []string
	// Logins are the logins it will run as on the Targets (their
	// privileged identities' users, distinct; "" where ssh_config decides).
	Logins []string
	// SHA256 is of Command alone for a local command; for a remote one, of
	// Command, a NUL byte and the Targets joined by newlines (BindingSHA).
	SHA256 string
	Reason string // the model's reason
	Rule   string // the gate rule that asked for confirmation
	// Why is the gate's reason for asking, in words ("`kubectl rollout`
	// is not a read-only subcommand"), the bot's secrets redacted.
	Why       string
	Requester string // the turn's actor
	Dir       string
}

// ApprovalDecision is a human's answer.
type ApprovalDecision struct {
	Approved bool
	By       string // who decided ("user:bob", "expiry", "terminal")
	Why      string // e.g. "expired after 15m0s"
}

// Approver asks a human whether a gated command may run. The run calls it
// from its own goroutine, one request at a time, in three steps, and
// records what it learns through its own append:
//
//  1. Ask shows the request and returns where it is shown (the chat post
//     id; "" for a front end with nothing to update later, such as a
//     terminal). The run records a non-empty where with a
//     NoteApprovalPosted note, so that a restart can update that message.
//     An error means nothing is shown: the request is refused.
//  2. Await blocks until a decision, ctx's end, or an error. The run calls
//     it only once where is recorded: if that record fails, the request is
//     refused without being awaited (fail closed).
//  3. Decided follows every successful Ask, once the run has tried to
//     record the decision: err is nil when d is in the chain, otherwise
//     nothing runs. d is what Await returned, or the run's own refusal when
//     it did not call Await or Await failed. Front ends show a decision
//     only from here, so they never show one the chain lacks.
//
// Anything other than an approved decision from Await with a nil error, and
// a nil error from recording it, means "do not run" (fail closed).
type Approver interface {
	Ask(ctx context.Context, a Approval) (where string, err error)
	Await(ctx context.Context, a Approval, where string) (ApprovalDecision, error)
	Decided(ctx context.Context, a Approval, where string, d ApprovalDecision, err error)
}

// Hooks let a front end show a run's progress. Every field may be nil. Hooks
// are called from the goroutine running Run, which waits for them: whatever
// a hook does delays the run by as much. Text and Command should return at
// once; Result may do a chat call (the bot uploads a long command output as
// a file there, bounded by its 30 s post timeout) before the next model
// call.
type Hooks struct {
	// Text receives model content as it streams.
	Text func(delta string)
	// Command is called when a command (or file read) has its decision,
	// before it runs or is refused. Action is "run", "ask" or "refuse".
	Command func(c CommandInfo)
	// Result is called with what the model will see of a tool's result.
	Result func(c CommandInfo, content string, isError bool)
	// Model is called after each model call with its latency and error.
	Model func(latency time.Duration, err error)
}

// CommandInfo describes one tool call for Hooks.
type CommandInfo struct {
	Tool    string
	Command string // the command line, the path for read_file, the skill name
	// Requested is the command as the model wrote it, when that differs
	// from Command: a shell command runs as the gate's rendering of what it
	// judged (gate.Decision.Program), which is what Command holds.
	Requested string
	Verdict   string
	Reason    string
	Action    string
	// Output is, in the Result hook of a command that ran, all of its
	// captured output (head and tail within ExecConfig.CaptureLimit,
	// secrets redacted) rather than the model's shorter view; Size is how
	// many bytes the command wrote in all. Chat attaches it as a file.
	Output []byte
	Size   int64
	// Targets are the remote hosts of a command with a target (empty for
	// a local one).
	Targets []string
	// Logins are the remote logins a command with a target needs an
	// approval for runs as (the targets' privileged logins, distinct).
	Logins []string
}

// Turn is one user message to handle.
type Turn struct {
	Session string
	// Actor is who speaks, e.g. "user:alice" (recorded with each event).
	Actor string
	Text  string
	// MessageID is the chat message id, recorded for deduplication.
	MessageID string
	// Dir is the working directory of commands and the workspace whose
	// AGENT.md and memory the prompt includes.
	Dir string
	// Instructions are extra instruction layers after the workspace's
	// AGENT.md (a chat channel's AGENT.md).
	Instructions []string
	// Goal runs in goal mode: the loop goes on until agent_done or a budget.
	Goal bool
	// AllowAll runs confirm verdicts without asking. It never overrides deny.
	AllowAll bool
	// Approver asks a human about confirm verdicts; nil refuses them.
	Approver Approver
	// NoApprover says, in words for the model and the person reading the
	// thread, why a run without an Approver cannot ask for an approval
	// ("an automatic first look cannot ask for one"); "" means a
	// non-interactive run without --allow-all.
	NoApprover string
	// FleetGroups, when not empty, are the only inventory groups whose
	// hosts this turn may target (a chat channel limited to some groups).
	FleetGroups []string
	Hooks       Hooks
	// Budgets, where a field is set, lower the agent's budgets for this
	// turn (an alert route's first look); they never raise them.
	Budgets Budgets
	// Spent, if set, is asked before each model call whether a budget
	// kept outside the run is spent (a channel's day, which the channel's
	// other runs spend too); a reason ends the run as a budget, with the
	// reason as its answer.
	Spent func() string
}

// Result is the outcome of a run.
type Result struct {
	Status     string // one of the Status* constants
	Answer     string
	Steps      int
	ModelCalls int
	Usage      Usage
	// LastSeq is the sequence number of the run's last event.
	LastSeq uint64
	// Cause is why a cancelled run stopped (and a run its wall time
	// ended), as recorded in its run_finished; nil when its context ended
	// without a StopCause, and for every other run.
	Cause *StopCause
}
