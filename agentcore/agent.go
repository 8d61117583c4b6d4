package agentcore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// Errors returned by Run (wrapped).
var (
	// ErrBudget is returned when a run ends because a budget was exhausted.
	ErrBudget = errors.New("budget exhausted")
	// ErrModel is returned (wrapping the cause) when the model endpoint
	// failed: unreachable, an error answer after retries, or a failed
	// compaction. Store failures are not ErrModel.
	ErrModel = errors.New("model")
)

// Budgets limit one run. Zero fields take the defaults noted.
type Budgets struct {
	MaxSteps      int           // tool-using steps per run; 0 means 30 (goal mode: 100)
	MaxModelCalls int           // model calls per run; 0 means 2×MaxSteps
	MaxWall       time.Duration // wall time per run; 0 means 30 minutes
	MaxToolErrors int           // consecutive failed tool calls; 0 means 8
	// MaxTokens is the run's budget of prompt plus completion tokens, as
	// the server reports them (estimated, 4 bytes a token, for a reply
	// without usage); 0 means none. It is checked before each model call.
	MaxTokens int
}

// Config configures an Agent. Store, Model and Policy are required.
type Config struct {
	Store  *store.DB
	Model  Model
	Policy *gate.Policy
	// Skills are the loaded skills; the zero Set means none.
	Skills skills.Set
	// Prompt is the base system prompt; "" means the built-in one.
	Prompt string
	// GlobalInstructions is the global AGENT.md text (config folder), put
	// before the workspace's own AGENT.md.
	GlobalInstructions string
	// TextProtocol forces the text protocol (no tool calling).
	TextProtocol bool
	Exec         ExecConfig
	// Fleet, if set, lets run and read_file take a target: inventory hosts
	// reached over OpenSSH (see package fleet). Nil offers no target.
	Fleet   *fleet.Fleet
	Budgets Budgets
	// ContextWindow is the model's context window in tokens; 0 means 32768.
	ContextWindow int
	// CompactAt is the share of ContextWindow at which the session is
	// compacted before a model call; 0 means 0.75.
	CompactAt float64
	// CompactPrompt replaces the built-in compaction instruction if set.
	CompactPrompt string
	// SkillIndexShare is the share of the context window the skill index
	// takes; 0 means 0.02 (as Codex does). The index may grow to four times
	// that so every skill keeps a short description and the skills matching
	// the session's first message keep long ones (skills.IndexOptionsFor).
	SkillIndexShare float64
	// Secrets are values (the model API key, chat tokens) replaced by
	// [REDACTED] wherever they appear in command output or a file read, so
	// that even an approved `cat` of a token file cannot carry them to the
	// model, the chat or the audit log. Values shorter than 8 bytes are
	// ignored.
	Secrets []string
	// NoMask turns off the masking of well-known secret shapes (gitleaks'
	// rules, see Masker) in command output and file reads.
	NoMask bool
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Agent runs turns of sessions. One Agent serves many sessions; Run may be
// called concurrently for different sessions (calls for the same session
// are serialised).
type Agent struct {
	cfg       Config
	maxSecret int // the longest secret's length, for streaming redaction
	log       *slog.Logger
	mu        sync.Mutex
	state     map[string]*session
	// limits is what the model server said about its context window.
	limits serverLimits
	// mask masks secret shapes in output; nil with Config.NoMask.
	mask *Masker
}

// session is the cached projection of one session.
type session struct {
	mu   sync.Mutex
	proj Projector
	last uint64
	// smu guards status, which /status reads while a turn runs.
	smu    sync.Mutex
	status Status
}

func (s *session) setStatus(f func(*Status)) {
	s.smu.Lock()
	f(&s.status)
	s.smu.Unlock()
}

// Status is what a session is doing, for /status.
type Status struct {
	Running    bool
	Goal       bool
	Steps      int
	ModelCalls int
	Started    time.Time
	Current    string // the command running or awaiting approval, if any
	Budgets    Budgets
	Usage      Usage
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Store == nil || cfg.Model == nil || cfg.Policy == nil {
		return nil, errors.New("agentcore: Store, Model and Policy are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ContextWindow <= 0 {
		cfg.ContextWindow = 32768
	}
	if cfg.CompactAt <= 0 || cfg.CompactAt > 1 {
		cfg.CompactAt = 0.75
	}
	if cfg.SkillIndexShare <= 0 {
		cfg.SkillIndexShare = 0.02
	}
	var secrets []string
	for _, v := range cfg.Secrets {
		if len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
	cfg.Secrets = secrets
	maxSecret := 0
	for _, v := range secrets {
		maxSecret = max(maxSecret, len(v))
	}
	if ro := cfg.Skills.ReadOnlyScripts(); len(ro) > 0 {
		cfg.Policy = cfg.Policy.WithReadOnlyScripts(ro...)
	}
	cfg.Exec = cfg.Exec.withDefaults()
	a := &Agent{cfg: cfg, log: cfg.Logger, state: map[string]*session{}, maxSecret: maxSecret}
	if !cfg.NoMask {
		m, err := NewMasker()
		if err != nil {
			return nil, err
		}
		a.mask = m
	}
	return a, nil
}

func (b Budgets) withDefaults(goal bool) Budgets {
	if b.MaxSteps <= 0 {
		b.MaxSteps = 30
		if goal {
			b.MaxSteps = 100
		}
	}
	if b.MaxModelCalls <= 0 {
		b.MaxModelCalls = 2 * b.MaxSteps
	}
	if b.MaxWall <= 0 {
		b.MaxWall = 30 * time.Minute
	}
	if b.MaxToolErrors <= 0 {
		b.MaxToolErrors = 8
	}
	return b
}

// lower returns b with each field of o that is set and smaller put in.
func (b Budgets) lower(o Budgets) Budgets {
	low := func(v *int, w int) {
		if w > 0 && w < *v {
			*v = w
		}
	}
	low(&b.MaxSteps, o.MaxSteps)
	low(&b.MaxModelCalls, o.MaxModelCalls)
	low(&b.MaxToolErrors, o.MaxToolErrors)
	if o.MaxWall > 0 && o.MaxWall < b.MaxWall {
		b.MaxWall = o.MaxWall
	}
	if o.MaxTokens > 0 && (b.MaxTokens == 0 || o.MaxTokens < b.MaxTokens) {
		b.MaxTokens = o.MaxTokens
	}
	return b
}

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
	SHA256    string
	Reason    string // the model's reason
	Rule      string // the gate rule that asked for confirmation
	Requester string // the turn's actor
	Dir       string
	// Posted records where the request is shown (the chat post id) with a
	// NoteApprovalPosted note, through the run's own append, so that a
	// restart can update that message. An Approver calls it at most once,
	// from Approve (the run's goroutine), before it waits for a decision. An
	// error means the post is not recorded: the request must not be
	// decided (fail closed).
	Posted func(postID string) error
}

// ApprovalDecision is a human's answer.
type ApprovalDecision struct {
	Approved bool
	By       string // who decided ("user:bob", "expiry", "terminal")
	Why      string // e.g. "expired after 15m0s"
	// Committed, if set, is called once the decision is in the chain (err
	// nil) or could not be recorded (then nothing runs). Front ends use it
	// to show a decision only after it is recorded.
	Committed func(err error)
}

// Approver asks a human whether a gated command may run. Approve blocks
// until a decision, ctx's end, or an error. Anything other than an approved
// decision with a nil error means "do not run" (fail closed).
type Approver interface {
	Approve(ctx context.Context, a Approval) (ApprovalDecision, error)
}

// ApproverFunc adapts a function to Approver.
type ApproverFunc func(ctx context.Context, a Approval) (ApprovalDecision, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, a Approval) (ApprovalDecision, error) {
	return f(ctx, a)
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
	Verdict string
	Reason  string
	Action  string
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
	// FleetGroups, when not empty, are the only inventory groups whose
	// hosts this turn may target (a chat channel limited to some groups).
	FleetGroups []string
	Hooks       Hooks
	// Budgets, where a field is set, lower the agent's budgets for this
	// turn (an alert route's first look); they never raise them.
	Budgets Budgets
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
}

// maxCachedSessions bounds the projections kept in memory; an evicted
// session is read back from the store when it is next used.
const maxCachedSessions = 2000

func (a *Agent) session(id string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.state[id]
	if !ok {
		if len(a.state) >= maxCachedSessions {
			a.evict()
		}
		s = &session{}
		a.state[id] = s
	}
	return s
}

// evict drops the cached projections of idle sessions, about half of the
// cache. The caller holds a.mu.
func (a *Agent) evict() {
	n := 0
	for id, s := range a.state {
		if n >= maxCachedSessions/2 {
			return
		}
		if s.mu.TryLock() {
			delete(a.state, id)
			s.mu.Unlock()
			n++
		}
	}
}

// load brings the session's projection up to date with the chain. The
// caller holds s.mu.
func (a *Agent) load(id string, s *session) error {
	for e, err := range a.cfg.Store.Events(id, s.last+1) {
		if err != nil {
			return fmt.Errorf("read session %s: %w", id, err)
		}
		s.proj.Apply(e)
		s.last = e.Seq
	}
	return nil
}

// runState carries one run's counters.
type runState struct {
	t          Turn
	s          *session
	budgets    Budgets
	steps      int
	calls      int
	toolErrors int
	usage      Usage
	text       bool
	compacted  bool // compacted after a context-length error in this step
	// pending is the model reply of the step under way: it commits with
	// what follows it (the gate decision, durably, just before the command
	// runs; or the tool's result), so a step is one durable commit and the
	// chain never holds a reply without the results it read. A tool's
	// result is appended buffered as soon as it is known (readable at once,
	// durable with the next append): a crash of the machine before that
	// loses it together with everything after it; a crash of the process
	// keeps it.
	pending []store.Event
	// unsynced: the run appended buffered events since its last durable
	// commit; streamed text syncs them before it is shown (showText).
	unsynced bool
	// textOff stops streamed text after a sync failed.
	textOff bool
	// masked counts the secret spans masked in the tool result under way,
	// by rule; result records and resets it.
	masked map[string]int
}

// Run handles one turn: it records the user's message, then calls the model
// and runs tools until the model answers, agent_done (goal mode), a budget
// ends the run, or ctx is cancelled. Every step is committed to the store
// before it takes effect; if the store cannot append, nothing more runs and
// the error is returned. A cancelled run returns a Result with
// StatusCancelled and ctx's error.
func (a *Agent) Run(ctx context.Context, t Turn) (Result, error) {
	s := a.session(t.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(t.Session, s); err != nil {
		return Result{Status: StatusError}, err
	}
	rs := &runState{t: t, s: s, budgets: a.cfg.Budgets.withDefaults(t.Goal).lower(t.Budgets)}
	rs.text = a.cfg.TextProtocol || s.proj.TextProtocol()
	s.setStatus(func(st *Status) { *st = Status{Running: true, Goal: t.Goal, Started: a.cfg.Now(), Budgets: rs.budgets} })
	defer s.setStatus(func(st *Status) { *st = Status{} })

	runCtx, cancel := context.WithTimeout(ctx, rs.budgets.MaxWall)
	defer cancel()

	start := append(a.promptEvent(rs),
		store.Event{Type: EvRunStarted, Actor: t.Actor, Payload: mustJSON(runPayload{Goal: t.Goal})},
		store.Event{Type: EvUserMessage, Actor: t.Actor, Payload: mustJSON(userMessagePayload{Text: t.Text, MessageID: t.MessageID})})
	// Buffered: the first decision (before a command runs) or the run's
	// end (before the answer is posted) syncs it; an answer then costs one
	// sync.
	if _, err := a.appendBuffered(rs, start...); err != nil {
		return Result{Status: StatusError}, err
	}
	res, runErr := a.loop(runCtx, rs)
	if runErr != nil && ctx.Err() != nil {
		res.Status = StatusCancelled
	} else if runErr != nil && runCtx.Err() != nil && res.Status != StatusBudget {
		res.Status = StatusBudget
		runErr = fmt.Errorf("%w: wall time %s", ErrBudget, rs.budgets.MaxWall)
	}
	res.Steps, res.ModelCalls, res.Usage = rs.steps, rs.calls, rs.usage
	detail := ""
	if runErr != nil {
		detail = runErr.Error()
	}
	evs, err := a.append(rs, store.Event{Type: EvRunFinished, Actor: "system", Payload: mustJSON(runPayload{
		Status: res.Status, Goal: t.Goal, Steps: rs.steps, ModelCalls: rs.calls, Detail: detail})})
	if err != nil {
		return res, errors.Join(runErr, err)
	}
	res.LastSeq = evs[len(evs)-1].Seq
	return res, runErr
}

// append commits the run's pending events and evs to the session's current
// branch, durably, and applies them to the projection. It returns the
// committed evs (without the pending ones). The caller holds rs.s.mu.
func (a *Agent) append(rs *runState, evs ...store.Event) ([]store.Event, error) {
	return a.appendRun(rs, true, evs)
}

// appendBuffered is append without waiting for the disk: the events are in
// the chain (readable, shown) at once and durable with the run's next
// append (store.DB.AppendBuffered).
func (a *Agent) appendBuffered(rs *runState, evs ...store.Event) ([]store.Event, error) {
	return a.appendRun(rs, false, evs)
}

func (a *Agent) appendRun(rs *runState, durable bool, evs []store.Event) ([]store.Event, error) {
	all := append(rs.pending, evs...)
	rs.pending = nil
	if len(all) == 0 {
		return nil, nil
	}
	out, err := a.commit(rs.t.Session, rs.s, durable, all)
	if err != nil {
		return nil, err
	}
	rs.unsynced = !durable
	return out[len(out)-len(evs):], nil
}

func (a *Agent) appendTo(id string, s *session, evs ...store.Event) ([]store.Event, error) {
	return a.commit(id, s, true, evs)
}

func (a *Agent) commit(id string, s *session, durable bool, evs []store.Event) ([]store.Event, error) {
	for i := range evs {
		evs[i].Session = id
		if evs[i].Type != EvClear {
			evs[i].Branch = s.proj.Branch()
		}
	}
	// Never a cancellable ctx: Append gives up on a done ctx before the
	// commit takes the events, and the record of a cancelled run (its
	// refusals, its run_finished) must still be written.
	appendFn := a.cfg.Store.Append
	if !durable {
		appendFn = a.cfg.Store.AppendBuffered
	}
	out, err := appendFn(context.Background(), evs...)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", evs[0].Type, err)
	}
	for _, e := range out {
		s.proj.Apply(e)
		s.last = e.Seq
	}
	return out, nil
}

func (a *Agent) loop(ctx context.Context, rs *runState) (Result, error) {
	for {
		if rs.steps >= rs.budgets.MaxSteps {
			return a.exhausted(rs, "steps", rs.budgets.MaxSteps)
		}
		if rs.calls >= rs.budgets.MaxModelCalls {
			return a.exhausted(rs, "model calls", rs.budgets.MaxModelCalls)
		}
		if rs.toolErrors >= rs.budgets.MaxToolErrors {
			return a.exhausted(rs, "consecutive tool errors", rs.budgets.MaxToolErrors)
		}
		if rs.budgets.MaxTokens > 0 && rs.usage.PromptTokens+rs.usage.CompletionTokens >= rs.budgets.MaxTokens {
			return a.exhausted(rs, "tokens", rs.budgets.MaxTokens)
		}
		if err := ctx.Err(); err != nil {
			return Result{Status: StatusCancelled}, err
		}
		if err := a.maybeCompact(ctx, rs, false); err != nil {
			return Result{Status: StatusError}, err
		}
		resp, err := a.complete(ctx, rs)
		if err != nil {
			return Result{Status: StatusError}, err
		}
		if rs.text {
			done, answer, err := a.textStep(ctx, rs, resp)
			if done || err != nil {
				return answer, err
			}
			continue
		}
		if len(resp.ToolCalls) == 0 {
			if rs.t.Goal {
				if err := a.nudge(rs); err != nil {
					return Result{Status: StatusError}, err
				}
				rs.steps++
				continue
			}
			return Result{Status: StatusAnswered, Answer: a.redact(resp.Content)}, nil
		}
		rs.steps++
		for _, call := range resp.ToolCalls {
			done, summary, err := a.toolCall(ctx, rs, call)
			if err != nil {
				return Result{Status: StatusError}, err
			}
			if done {
				return Result{Status: StatusDone, Answer: a.redact(summary)}, nil
			}
		}
	}
}

func (a *Agent) exhausted(rs *runState, what string, limit int) (Result, error) {
	return Result{Status: StatusBudget, Answer: fmt.Sprintf("Stopped: the run used its budget of %d %s.", limit, what)},
		fmt.Errorf("%w: %d %s", ErrBudget, limit, what)
}

// nudge tells a goal-mode model that a reply without a tool call does not end
// the goal.
func (a *Agent) nudge(rs *runState) error {
	msg := "Continue working toward the goal. When it is reached, call agent_done with a summary."
	if rs.text {
		msg = "Continue working toward the goal. When it is reached, write your summary and then agent-done on its own line."
	}
	_, err := a.append(rs, store.Event{Type: EvUserMessage, Actor: "system", Payload: mustJSON(userMessagePayload{Text: msg})})
	return err
}

// complete makes one model call with the session's projection, handling the
// switch to the text protocol and one compaction on a context-length error.
func (a *Agent) complete(ctx context.Context, rs *runState) (Response, error) {
	var failed *Request // the last request refused for its size
	maxTokens := -1     // set by overflow for the next attempt
	for attempt := 0; ; attempt++ {
		var stream *redactStream
		if err := a.flushPending(rs); err != nil {
			return Response{}, err
		}
		req := Request{Messages: rs.s.proj.Messages()}
		if rs.t.Hooks.Text != nil {
			stream = &redactStream{redact: a.redact, keep: a.maxSecret, out: a.showText(rs)}
			req.OnText = stream.write
		}
		if !rs.text {
			req.Tools = toolDefs(rs.t.Goal, len(a.cfg.Skills.Skills) > 0, a.cfg.Fleet != nil)
		}
		req.MaxTokens = maxTokens
		if maxTokens < 0 {
			req.MaxTokens = a.maxTokens(req.Messages)
		}
		if failed != nil && sameRequest(*failed, req) {
			return Response{}, fmt.Errorf("%w: %w: the request would be sent again unchanged", ErrModel, ErrContextLength)
		}
		rs.calls++
		rs.s.setStatus(func(st *Status) { st.ModelCalls, st.Steps = rs.calls, rs.steps })
		start := a.cfg.Now()
		resp, err := a.cfg.Model.Complete(ctx, req)
		stream.flush()
		latency := a.cfg.Now().Sub(start)
		if rs.t.Hooks.Model != nil {
			rs.t.Hooks.Model(latency, err)
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrToolsUnsupported) && !rs.text && attempt < 2:
			rs.text = true
			sw := store.Event{Type: EvProtocolSwitch, Actor: "system",
				Payload: mustJSON(protocolSwitchPayload{From: "tools", To: "text", Reason: err.Error()})}
			if _, err := a.append(rs, append([]store.Event{sw}, a.promptEvent(rs)...)...); err != nil {
				return Response{}, err
			}
			continue
		case errors.Is(err, ErrContextLength) && attempt < 4:
			mt, oerr := a.overflow(ctx, rs, req, err)
			if oerr != nil {
				return Response{}, oerr
			}
			failed, maxTokens = &req, mt
			continue
		default:
			return Response{}, fmt.Errorf("%w: %w", ErrModel, err)
		}
		rs.compacted = false
		u := resp.Usage
		if u.PromptTokens == 0 && u.CompletionTokens == 0 {
			// The server reported no usage: the kernel's estimate.
			u.PromptTokens = EstimateTokens(req.Messages)
			u.CompletionTokens = EstimateTokens([]Message{{Content: resp.Content, Reasoning: resp.Reasoning, ToolCalls: resp.ToolCalls}})
		}
		rs.usage.PromptTokens += u.PromptTokens
		rs.usage.CompletionTokens += u.CompletionTokens
		rs.usage.CachedTokens += u.CachedTokens
		rs.s.setStatus(func(st *Status) { st.Usage = rs.usage })
		proto := "tools"
		calls := resp.ToolCalls
		if rs.text {
			proto, calls = "text", nil
		}
		// What the model wrote is recorded (and later projected, shown and
		// exported) without the bot's secrets; the command that runs is the
		// one the model wrote.
		rcalls := make([]ToolCall, len(calls))
		for i, c := range calls {
			c.Arguments = a.redactJSON(c.Arguments)
			rcalls[i] = c
		}
		if len(calls) == 0 {
			rcalls = nil
		}
		rs.pending = append(rs.pending, store.Event{Type: EvAssistantMessage, Actor: "model", Payload: mustJSON(assistantPayload{
			Content: a.redact(resp.Content), Reasoning: a.redact(resp.Reasoning), ToolCalls: rcalls, FinishReason: resp.FinishReason,
			Usage: resp.Usage, Model: resp.Model, Protocol: proto, LatencyMS: latency.Milliseconds()})})
		return resp, nil
	}
}

// textStep acts on a text-protocol reply.
func (a *Agent) textStep(ctx context.Context, rs *runState, resp Response) (bool, Result, error) {
	act := ParseTextReply(resp.Content)
	if len(act.Calls) > 0 {
		return a.textCalls(ctx, rs, act)
	}
	if act.Command == "" {
		if act.Done || !rs.t.Goal {
			st := StatusAnswered
			if act.Done && rs.t.Goal {
				st = StatusDone
			}
			return true, Result{Status: st, Answer: a.redact(strings.TrimSpace(stripDone(resp.Content)))}, nil
		}
		return false, Result{}, a.nudge(rs)
	}
	rs.steps++
	call := ToolCall{ID: fmt.Sprintf("text-%d", rs.s.last), Name: ToolRun}
	content, isErr, ex, err := a.runCommand(ctx, rs, call, act.Command, "", "")
	if err != nil {
		return true, Result{Status: StatusError}, err
	}
	if act.Blocks > 1 {
		content += "\n(Only the first command block of your reply ran; send one block per reply.)"
	}
	if err := a.result(rs, call, "Output of `"+oneLine(act.Command)+"`:\n"+content, isErr, ex); err != nil {
		return true, Result{Status: StatusError}, err
	}
	return false, Result{}, nil
}

func stripDone(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !isDone(l) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// toolCall handles one structured tool call; done reports agent_done.
func (a *Agent) toolCall(ctx context.Context, rs *runState, call ToolCall) (done bool, summary string, err error) {
	args, perr := parseArgs(call, toolDefs(rs.t.Goal, len(a.cfg.Skills.Skills) > 0, a.cfg.Fleet != nil))
	if perr != nil {
		return false, "", a.result(rs, call, "error: "+perr.Error(), true, nil)
	}
	o, err := a.dispatch(ctx, rs, call, args)
	if err != nil {
		return false, "", err
	}
	return o.done, o.summary, a.result(rs, call, o.content, o.isErr, o.ex)
}

// result records a tool's result (what the model sees) and counts errors.
func (a *Agent) result(rs *runState, call ToolCall, content string, isErr bool, ex *ExecResult) error {
	p := toolResultPayload{CallID: call.ID, Tool: call.Name, Content: content, IsError: isErr, Masked: rs.masked}
	rs.masked = nil
	if ex != nil && ex.Remote != nil {
		p.Targets, p.Hosts = ex.Targets, hostRecords(ex.Remote)
		p.OutputSize, p.OutputSHA, p.DurationMS = ex.Size, ex.SHA256, ex.Duration.Milliseconds()
	} else if ex != nil {
		code := ex.ExitCode
		p.ExitCode, p.OutputSize, p.OutputSHA = &code, ex.Size, ex.SHA256
		p.DurationMS, p.TimedOut = ex.Duration.Milliseconds(), ex.TimedOut
	}
	if isErr {
		rs.toolErrors++
	} else {
		rs.toolErrors = 0
	}
	// The result is in the chain at once and durable with the run's next
	// append (the next decision, or the run's end), which comes before
	// anything acts on it (see runState.pending).
	_, err := a.appendBuffered(rs, store.Event{Type: EvToolResult, Actor: "system", Payload: mustJSON(p)})
	return err
}

// flushPending records a model reply still pending when the next request
// goes out (a step without a gate decision or tool result, such as a
// malformed call), so that the chain holds what the model answered before
// what it answers next.
func (a *Agent) flushPending(rs *runState) error {
	_, err := a.appendBuffered(rs)
	return err
}

// showText passes streamed model text on to Hooks.Text once the chain
// before it is durable: the run's start and a command's result are
// appended buffered, and text in the chat must not outlive them in a
// machine restart. The first delta after a buffered append syncs them
// (store.DB.Sync); if that fails, no more text is shown, and the run's
// next durable append fails too.
func (a *Agent) showText(rs *runState) func(string) {
	return func(delta string) {
		if rs.textOff {
			return
		}
		if rs.unsynced {
			if err := a.cfg.Store.Sync(); err != nil {
				a.log.Warn("streamed text not shown: the chain before it could not be synced", "session", rs.t.Session, "err", err)
				rs.textOff = true
				return
			}
			rs.unsynced = false
		}
		rs.t.Hooks.Text(delta)
	}
}

func (a *Agent) hookCommand(rs *runState, c CommandInfo) {
	rs.s.setStatus(func(st *Status) { st.Current = c.Command })
	if rs.t.Hooks.Command != nil {
		rs.t.Hooks.Command(c)
	}
}

func (a *Agent) hookResult(rs *runState, c CommandInfo, content string, isErr bool) {
	rs.s.setStatus(func(st *Status) { st.Current = "" })
	if rs.t.Hooks.Result != nil {
		rs.t.Hooks.Result(c, content, isErr)
	}
}

// decide records the gate's decision and, for confirm, the human's; it
// reports whether the action may go ahead and, if not, what the model is
// told. A false with a nil error is a refusal; an error is a store failure.
func (a *Agent) decide(ctx context.Context, rs *runState, call ToolCall, info CommandInfo, d gate.Decision, reason string) (bool, string, error) {
	action := "refuse"
	switch {
	case d.Verdict == gate.Pass:
		action = "run"
	case d.Verdict == gate.Confirm && rs.t.AllowAll:
		action = "run"
	case d.Verdict == gate.Confirm && rs.t.Approver != nil:
		action = "ask"
	}
	// The hash binds the exact command (and targets); everything shown or
	// recorded has the bot's secrets redacted.
	binding := BindingSHA(info.Command, info.Targets)
	info.Command = a.redact(info.Command)
	info.Verdict, info.Reason, info.Action = d.Verdict.String(), a.redact(d.Reason), action
	reason = a.redact(reason)
	gp := gatePayload{CallID: call.ID, Tool: info.Tool, Dir: rs.t.Dir, Verdict: d.Verdict.String(), Reason: info.Reason, Rule: d.Rule, Action: action,
		Targets: info.Targets, TargetCount: len(info.Targets)}
	if len(info.Targets) > 0 {
		gp.Dir = ""
	}
	if info.Tool == ToolReadFile {
		gp.Path = info.Command
	} else {
		gp.Command = info.Command
	}
	evs, err := a.append(rs, store.Event{Type: EvGateDecision, Actor: "gate", Payload: mustJSON(gp)})
	if err != nil {
		return false, "", err
	}
	a.hookCommand(rs, info)
	switch action {
	case "run":
		return true, "", nil
	case "refuse":
		if d.Verdict == gate.Deny {
			return false, fmt.Sprintf("refused by policy (%s): %s. Do not try to get around this; choose another way or tell the user.", d.Rule, info.Reason), nil
		}
		return false, fmt.Sprintf("not run: %s (%s). It needs a human's approval, and this run has no approver (non-interactive, without --allow-all).", info.Reason, d.Rule), nil
	}
	ap := Approval{Session: rs.t.Session, RequestID: fmt.Sprintf("r%d", evs[0].Seq), Command: info.Command,
		Targets: info.Targets, Logins: info.Logins, SHA256: binding, Reason: reason, Rule: d.Rule, Requester: rs.t.Actor, Dir: rs.t.Dir}
	if info.Tool == ToolReadFile {
		ap.Command = "read_file " + info.Command
	}
	if len(info.Targets) > 0 {
		ap.Dir = ""
	}
	if _, err := a.append(rs, store.Event{Type: EvApprovalAsked, Actor: "gate", Payload: mustJSON(approvalAskedPayload{
		CallID: call.ID, RequestID: ap.RequestID, Command: info.Command, SHA256: ap.SHA256, Reason: reason, Requester: rs.t.Actor,
		Targets: info.Targets, TargetCount: len(info.Targets)})}); err != nil {
		return false, "", err
	}
	open := true // Posted works only while Approve runs
	ap.Posted = func(postID string) error {
		if !open {
			return errors.New("approval request already closed")
		}
		_, err := a.append(rs, store.Event{Type: EvNote, Actor: "bot", Payload: mustJSON(NotePayload{
			Kind: NoteApprovalPosted, RequestID: ap.RequestID, PostID: postID})})
		return err
	}
	dec, aerr := rs.t.Approver.Approve(ctx, ap)
	open = false
	if aerr != nil {
		dec = ApprovalDecision{Approved: false, By: "system", Why: aerr.Error()}
		if ctx.Err() != nil {
			dec.Why = "cancelled before a decision"
		}
	}
	_, err = a.append(rs, store.Event{Type: EvApprovalDecided, Actor: orSystem(dec.By), Payload: mustJSON(approvalDecidedPayload{
		CallID: call.ID, RequestID: ap.RequestID, Approved: dec.Approved, By: dec.By, Why: dec.Why, SHA256: ap.SHA256})})
	if dec.Committed != nil {
		dec.Committed(err)
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

func orSystem(by string) string {
	if by == "" {
		return "system"
	}
	return by
}

// runCommand gates and runs one shell command, returning what the model sees.
func (a *Agent) runCommand(ctx context.Context, rs *runState, call ToolCall, command, reason, target string) (string, bool, *ExecResult, error) {
	if target != "" {
		return a.runRemote(ctx, rs, call, command, reason, target)
	}
	d := a.checkPins(command, a.failClosed(a.cfg.Policy.ClassifyIn(rs.t.Dir, command)))
	info := CommandInfo{Tool: ToolRun, Command: command}
	ok, refusal, err := a.decide(ctx, rs, call, info, d, reason)
	if err != nil {
		return "", false, nil, err
	}
	info.Command, info.Verdict, info.Reason = a.redact(info.Command), d.Verdict.String(), a.redact(d.Reason)
	if !ok {
		a.hookResult(rs, info, refusal, true)
		return refusal, true, nil, nil
	}
	if err := ctx.Err(); err != nil {
		// Cancelled while waiting for approval: record why nothing ran.
		return "not run: the run was interrupted", true, nil, nil
	}
	mode := sandbox.ReadOnly
	if d.Verdict != gate.Pass {
		mode = sandbox.Approved
	}
	ex, err := Exec(ctx, a.cfg.Exec, mode, rs.t.Dir, command)
	if err != nil {
		content := "error: " + err.Error()
		a.hookResult(rs, info, content, true)
		return content, true, nil, nil
	}
	ex.Output = []byte(a.maskOutput(rs, string(ex.Output)))
	content := a.redact(formatExec(ex, a.cfg.Exec.ViewLimit))
	isErr := ex.ExitCode != 0 || ex.TimedOut || ex.Cancelled
	if rs.t.Hooks.Result != nil {
		info.Output, info.Size = []byte(a.redact(string(ex.Output))), ex.Size
	}
	a.hookResult(rs, info, content, isErr)
	return content, isErr, &ex, nil
}

// SandboxState says, for /status, how commands run: "enforced", "off"
// (the operator turned it off, or no sandbox was configured) or
// "unavailable: why" (every command then needs an approval).
func (a *Agent) SandboxState() string {
	switch {
	case a.cfg.Exec.NoSandbox != "":
		return "unavailable (" + a.cfg.Exec.NoSandbox + "): every command needs an approval"
	case a.cfg.Exec.Sandbox == nil:
		return "off: commands run unconfined, only the gate stands in the way"
	case a.cfg.Exec.Sandbox.Err() != nil:
		return "unavailable (" + a.cfg.Exec.Sandbox.Err().Error() + "): every command needs an approval"
	}
	return "enforced: read-only commands cannot write, the bot's secrets are hidden from every command"
}

// failClosed turns a pass verdict into confirm while the kernel sandbox
// that pass verdicts rely on is wanted but missing or broken.
func (a *Agent) failClosed(d gate.Decision) gate.Decision {
	if d.Verdict != gate.Pass {
		return d
	}
	why := a.cfg.Exec.NoSandbox
	if why == "" && a.cfg.Exec.Sandbox != nil {
		if err := a.cfg.Exec.Sandbox.Err(); err != nil {
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
	case ex.TimedOut:
		fmt.Fprintf(&b, "timed out after %s; the process group was killed\n", ex.Duration.Round(time.Second))
	case ex.Cancelled:
		b.WriteString("interrupted by the user; the process group was killed\n")
	default:
		fmt.Fprintf(&b, "exit code: %d\n", ex.ExitCode)
	}
	out := string(ex.Output)
	if out == "" {
		b.WriteString("(no output)")
	} else {
		b.WriteString(headTail(out, view))
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = strings.ToValidUTF8(s[:77], "") + "..."
	}
	return s
}

// redactJSON redacts secrets inside a JSON text (tool arguments), also
// where JSON escaping changed their bytes; the result stays valid JSON
// because the replacement has no character JSON escapes.
func (a *Agent) redactJSON(s string) string {
	s = a.redact(s)
	for _, v := range a.cfg.Secrets {
		b, _ := json.Marshal(v)
		if esc := string(b[1 : len(b)-1]); esc != v && strings.Contains(s, esc) {
			s = strings.ReplaceAll(s, esc, "[REDACTED]")
		}
	}
	return s
}

// redactStream passes streamed text on with the secrets redacted, holding
// back the last keep bytes until more text (or flush) shows whether they
// start a secret.
type redactStream struct {
	redact func(string) string
	keep   int
	out    func(string)
	buf    string
}

func (r *redactStream) write(delta string) {
	r.buf = r.redact(r.buf + delta)
	cut := len(r.buf) - r.keep
	if r.keep <= 0 {
		cut = len(r.buf)
	}
	for cut > 0 && cut < len(r.buf) && !utf8Start(r.buf[cut]) {
		cut--
	}
	if cut > 0 {
		r.out(r.buf[:cut])
		r.buf = r.buf[cut:]
	}
}

func (r *redactStream) flush() {
	if r == nil || r.buf == "" {
		return
	}
	r.out(r.redact(r.buf))
	r.buf = ""
}

// redact replaces the configured secret values in s.
func (a *Agent) redact(s string) string {
	for _, v := range a.cfg.Secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}
