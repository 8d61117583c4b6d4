package agentcore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/thinbot/thinbot/store"
)

// run is one turn under way: the Agent it belongs to (embedded, so that
// its configuration and helpers read as the run's own), the turn, the
// session's cached projection (whose lock the run holds throughout), the
// budgets and counters, and what the run has staged for the chain. Its
// methods are the loop and everything a step does; the Agent's own methods
// are what does not depend on a run.
type run struct {
	*Agent
	t          Turn
	s          *session
	budgets    Budgets
	steps      int
	calls      int
	toolErrors int
	usage      Usage
	// model is what the run asks: the configured Model, or textModel
	// around it once the session uses the text protocol.
	model     Model
	compacted bool // compacted after a context-length error in this step
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
	// started is when the run began (its log line's duration).
	started time.Time
	// stopped is why the run's cancellation ended the command under way
	// or kept it from running (nil: it did not, or gave no cause); result
	// records and resets it.
	stopped *StopCause
}

// Run handles one turn: it records the user's message, then calls the model
// and runs tools until the model answers, agent_done (goal mode), a budget
// ends the run, or ctx is cancelled. Every step is committed to the store
// before it takes effect; if the store cannot append, nothing more runs and
// the error is returned. A cancelled run returns a Result with
// StatusCancelled, ctx's error, and in Result.Cause the StopCause ctx was
// cancelled with, which it records (see StopCause).
func (a *Agent) Run(ctx context.Context, t Turn) (Result, error) {
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

	start := append(r.promptEvent(),
		store.Event{Type: EvRunStarted, Actor: t.Actor, Payload: mustJSON(RunPayload{Goal: t.Goal})},
		store.Event{Type: EvUserMessage, Actor: t.Actor, Payload: mustJSON(UserMessagePayload{Text: t.Text, MessageID: t.MessageID})})
	// Buffered: the first decision (before a command runs) or the run's
	// end (before the answer is posted) syncs it; an answer then costs one
	// sync.
	if _, err := r.record(buffered, start...); err != nil {
		return Result{Status: StatusError}, err
	}
	res, runErr := r.loop(runCtx)
	return r.end(ctx, runCtx, res, runErr)
}

// end records the run's end (run_finished: its status, steps and cause)
// and returns its Result: ctx is the caller's, runCtx the run's own.
func (r *run) end(ctx, runCtx context.Context, res Result, runErr error) (Result, error) {
	a, t := r.Agent, r.t
	res.Answer = a.scrub.scrub(res.Answer)
	if runErr != nil && ctx.Err() != nil {
		res.Status = StatusCancelled
	} else if runErr != nil && runCtx.Err() != nil && res.Status != StatusBudget {
		res.Status = StatusBudget
		res.Answer = fmt.Sprintf("Stopped: the run used its budget of %s wall time.", r.budgets.MaxWall)
		runErr = fmt.Errorf("%w: wall time %s", ErrBudget, r.budgets.MaxWall)
	}
	res.Steps, res.ModelCalls, res.Usage = r.steps, r.calls, r.usage
	detail := ""
	if runErr != nil {
		detail = runErr.Error()
	}
	fin := RunPayload{Status: res.Status, Goal: t.Goal, Steps: r.steps, ModelCalls: r.calls, Detail: detail}
	if runErr != nil && runCtx.Err() != nil {
		res.Cause = CauseOf(runCtx)
		fin.Cause, fin.CauseBy = causeFields(res.Cause)
		if res.Status == StatusCancelled && res.Cause != nil {
			fin.Detail = res.Cause.Error()
		}
	}
	evs, err := r.record(durable, store.Event{Type: EvRunFinished, Actor: "system", Payload: mustJSON(fin)})
	if err != nil {
		r.logFinished(res)
		return res, errors.Join(runErr, err)
	}
	res.LastSeq = evs[len(evs)-1].Seq
	r.logFinished(res)
	return res, runErr
}

// logFinished writes the operator's one log line for a finished run: the
// session, where its record ends, the outcome, the steps, the tokens and
// how long it took. The chain has the rest.
func (r *run) logFinished(res Result) {
	r.log.Info("run finished", "conv", r.t.Session, "seq", res.LastSeq, "status", res.Status, "steps", res.Steps,
		"model_calls", res.ModelCalls, "prompt_tokens", res.Usage.PromptTokens, "completion_tokens", res.Usage.CompletionTokens,
		"duration_ms", r.cfg.Now().Sub(r.started).Milliseconds())
}

// loop is the run's steps: ask the model, then act on its reply, until an
// answer, agent_done, a budget, cancellation or a store failure. Both
// protocols take this one path: the text protocol is a Model (textModel)
// whose replies come back as ordinary tool calls.
func (r *run) loop(ctx context.Context) (Result, error) {
	for {
		if res, err := r.overBudget(ctx); err != nil {
			return res, err
		}
		resp, latency, err := r.ask(ctx) // compaction, overflow and the protocol switch inside
		if err != nil {
			return Result{Status: StatusError}, err
		}
		r.stage(resp, latency)
		if len(resp.ToolCalls) == 0 {
			if res, ok := r.answer(resp); ok {
				return res, nil
			}
			if err := r.nudge(resp); err != nil {
				return Result{Status: StatusError}, err
			}
			continue
		}
		r.steps++
		for _, call := range resp.ToolCalls {
			done, summary, err := r.toolCall(ctx, call)
			if err != nil {
				return Result{Status: StatusError}, err
			}
			if done {
				return Result{Status: StatusDone, Answer: summary}, nil
			}
		}
	}
}

// overBudget returns, with a non-nil error, the result of a run that must
// not make another model call: a budget is spent or ctx is done.
func (r *run) overBudget(ctx context.Context) (Result, error) {
	switch {
	case r.steps >= r.budgets.MaxSteps:
		return r.exhausted("steps", r.budgets.MaxSteps)
	case r.calls >= r.budgets.MaxModelCalls:
		return r.exhausted("model calls", r.budgets.MaxModelCalls)
	case r.toolErrors >= r.budgets.MaxToolErrors:
		return r.exhausted("consecutive tool errors", r.budgets.MaxToolErrors)
	case r.budgets.MaxTokens > 0 && r.usage.PromptTokens+r.usage.CompletionTokens >= r.budgets.MaxTokens:
		return r.exhausted("tokens", r.budgets.MaxTokens)
	}
	if r.t.Spent != nil {
		if why := r.t.Spent(); why != "" {
			return Result{Status: StatusBudget, Answer: why}, fmt.Errorf("%w: %s", ErrBudget, why)
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{Status: StatusCancelled}, err
	}
	return Result{}, nil
}

func (r *run) exhausted(what string, limit int) (Result, error) {
	return Result{Status: StatusBudget, Answer: fmt.Sprintf("Stopped: the run used its budget of %d %s.", limit, what)},
		fmt.Errorf("%w: %d %s", ErrBudget, limit, what)
}

// answer is the run's result for a reply without tool calls; ok is false
// when a goal-mode run goes on. Only agent_done, or in the text protocol
// an agent-done line, finishes a goal.
func (r *run) answer(resp Response) (Result, bool) {
	text, done := resp.Content, false
	if resp.text != nil {
		text, done = resp.text.answer, resp.text.done
	}
	switch {
	case done && r.t.Goal:
		return Result{Status: StatusDone, Answer: text}, true
	case !r.t.Goal:
		return Result{Status: StatusAnswered, Answer: text}, true
	}
	return Result{}, false
}

// nudge tells a goal-mode model that a reply without a tool call does not
// end the goal. Under tool calling the nudge counts as a step; under the
// text protocol it does not (as the chain has recorded since the text
// protocol came in).
func (r *run) nudge(resp Response) error {
	msg := "Continue working toward the goal. When it is reached, call agent_done with a summary."
	if resp.text != nil {
		msg = "Continue working toward the goal. When it is reached, write your summary and then agent-done on its own line."
	} else {
		r.steps++
	}
	_, err := r.record(durable, store.Event{Type: EvUserMessage, Actor: "system", Payload: mustJSON(UserMessagePayload{Text: msg})})
	return err
}

// modelFor is the Model a run of s asks: the configured one, or the text
// protocol around it when the configuration asks for it or the session
// switched to it.
func (a *Agent) modelFor(s *session) Model {
	if a.cfg.TextProtocol || s.proj.TextProtocol() {
		return textModel{a.cfg.Model}
	}
	return a.cfg.Model
}

// textProtocol reports whether the run asks its model in the text protocol.
func (r *run) textProtocol() bool {
	_, ok := r.model.(textModel)
	return ok
}

// ask makes one model call with the session's projection and counts its
// usage; it returns the reply and how long the call took. It is the one
// place that retries: it compacts the session first when it is near the
// context window, and on an error it switches to the text protocol (tools
// unsupported) or lowers max_tokens or compacts once (context overflow,
// see overflow) and asks again.
func (r *run) ask(ctx context.Context) (Response, time.Duration, error) {
	if err := r.maybeCompact(ctx, false); err != nil {
		return Response{}, 0, err
	}
	var failed *Request // the last request refused for its size
	maxTokens := -1     // set by overflow for the next attempt
	for attempt := 0; ; attempt++ {
		if _, err := r.record(buffered); err != nil {
			return Response{}, 0, err
		}
		req, stream := r.request(maxTokens)
		if failed != nil && sameRequest(*failed, req) {
			return Response{}, 0, fmt.Errorf("%w: %w: the request would be sent again unchanged", ErrModel, ErrContextLength)
		}
		r.calls++
		r.s.setStatus(func(st *Status) { st.ModelCalls, st.Steps = r.calls, r.steps })
		start := r.cfg.Now()
		resp, err := r.model.Complete(ctx, req)
		stream.flush()
		latency := r.cfg.Now().Sub(start)
		if r.t.Hooks.Model != nil {
			r.t.Hooks.Model(latency, err)
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrToolsUnsupported) && !r.textProtocol() && attempt < 2:
			r.model, failed = textModel{r.cfg.Model}, nil
			sw := store.Event{Type: EvProtocolSwitch, Actor: "system",
				Payload: mustJSON(ProtocolSwitchPayload{From: "tools", To: "text", Reason: err.Error()})}
			if _, err := r.record(durable, append([]store.Event{sw}, r.promptEvent()...)...); err != nil {
				return Response{}, 0, err
			}
			continue
		case errors.Is(err, ErrContextLength) && attempt < 4:
			mt, oerr := r.overflow(ctx, req, err)
			if oerr != nil {
				return Response{}, 0, oerr
			}
			failed, maxTokens = &req, mt
			continue
		default:
			return Response{}, 0, fmt.Errorf("%w: %w", ErrModel, err)
		}
		r.compacted = false
		resp.estimate = r.count(req, resp)
		return resp, latency, nil
	}
}

// request is the next model call: the session's projection, the tools
// (textModel sends none), max_tokens (overflow's, or when negative the
// kernel's own), and Hooks.Text behind a redacting stream.
func (r *run) request(maxTokens int) (Request, *redactStream) {
	req := Request{Messages: r.s.proj.Messages(), Tools: r.tools(), MaxTokens: maxTokens}
	if maxTokens < 0 {
		req.MaxTokens = r.maxTokens(req.Messages)
	}
	var stream *redactStream
	if r.t.Hooks.Text != nil {
		stream = &redactStream{scrub: r.scrub.scrub, keep: r.scrub.keep(), out: r.showText()}
		req.OnText = stream.write
	}
	return req, stream
}

// count adds a call's usage to the run's: the server's, or when it
// reported none the kernel's estimate, which it returns (nil otherwise)
// for the call's assistant event.
func (r *run) count(req Request, resp Response) *Usage {
	u, est := resp.Usage, (*Usage)(nil)
	if u.PromptTokens == 0 && u.CompletionTokens == 0 {
		u.PromptTokens = EstimateTokens(req.Messages)
		u.CompletionTokens = EstimateTokens([]Message{{Content: resp.Content, Reasoning: resp.Reasoning, ToolCalls: resp.recorded()}})
		est = &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
	}
	r.usage.PromptTokens += u.PromptTokens
	r.usage.CompletionTokens += u.CompletionTokens
	r.usage.CachedTokens += u.CachedTokens
	r.s.setStatus(func(st *Status) { st.Usage = r.usage })
	return est
}

// stage adds the model's reply to run.pending: it commits with what
// follows it. What the model wrote is recorded (and later projected, shown
// and exported) scrubbed, as every payload is (write); the command that
// runs is the one the model wrote.
func (r *run) stage(resp Response, latency time.Duration) {
	proto := "tools"
	if resp.text != nil {
		proto = "text"
	}
	r.pending = append(r.pending, store.Event{Type: EvAssistantMessage, Actor: "model", Payload: mustJSON(AssistantPayload{
		Content: resp.Content, Reasoning: resp.Reasoning, ToolCalls: resp.recorded(), FinishReason: resp.FinishReason,
		Usage: resp.Usage, Estimated: resp.estimate, Model: resp.Model, Protocol: proto, LatencyMS: latency.Milliseconds()})})
}

// toolCall decides, runs and records one tool call, structured or read
// from text (whose textCall names it and words its result); done reports
// agent_done.
func (r *run) toolCall(ctx context.Context, call ToolCall) (done bool, summary string, err error) {
	call = call.named(r.s.last)
	if msg := call.text.refused(); msg != "" {
		return false, "", r.result(call, msg, true, nil)
	}
	if t, ok := r.cfg.MCP.Tool(call.Name); ok {
		content, isErr, err := r.callMCP(ctx, call, t)
		if err != nil {
			return false, "", err
		}
		return false, "", r.result(call, call.text.view(content, true), isErr, nil)
	}
	args, perr := parseArgs(call, r.tools())
	if perr != nil {
		return false, "", r.result(call, call.text.view("error: "+perr.Error(), false), true, nil)
	}
	o, err := r.dispatch(ctx, call, args)
	if err != nil {
		return false, "", err
	}
	if o.done {
		return true, o.summary, r.result(call, o.content, o.isErr, o.ex)
	}
	return false, "", r.result(call, call.text.view(o.content, true), o.isErr, o.ex)
}

// tools are the tools the run offers.
func (r *run) tools() []Tool {
	tools := append(toolDefs(r.t.Goal, len(r.cfg.Skills.Skills) > 0, r.cfg.Fleet != nil), datasourceTools(r.cfg.Datasources)...)
	return append(tools, r.mcpTools()...)
}

// result records a tool's result (what the model sees) and counts errors.
func (r *run) result(call ToolCall, content string, isErr bool, ex *ExecResult) error {
	p := ToolResultPayload{CallID: call.ID, Tool: call.Name, Content: content, IsError: isErr, Masked: r.masked}
	p.Cause, p.CauseBy = causeFields(r.stopped)
	r.masked, r.stopped = nil, nil
	if ex != nil && ex.Remote != nil {
		p.Targets, p.Hosts = ex.Targets, hostRecords(ex.Remote)
		p.OutputSize, p.OutputSHA, p.DurationMS = ex.Size, ex.SHA256, ex.Duration.Milliseconds()
	} else if ex != nil {
		code := ex.ExitCode
		p.ExitCode, p.OutputSize, p.OutputSHA = &code, ex.Size, ex.SHA256
		p.DurationMS, p.TimedOut = ex.Duration.Milliseconds(), ex.TimedOut
	}
	if isErr {
		r.toolErrors++
	} else {
		r.toolErrors = 0
	}
	// The result is in the chain at once and durable with the run's next
	// append (the next decision, or the run's end), which comes before
	// anything acts on it (see run.pending).
	_, err := r.record(buffered, store.Event{Type: EvToolResult, Actor: "system", Payload: mustJSON(p)})
	return err
}

// showText passes streamed model text on to Hooks.Text once the chain
// before it is durable: the run's start and a command's result are
// appended buffered, and text in the chat must not outlive them in a
// machine restart. The first delta after a buffered append syncs them
// (store.DB.Sync); if that fails, no more text is shown, and the run's
// next durable append fails too.
func (r *run) showText() func(string) {
	return func(delta string) {
		if r.textOff {
			return
		}
		if r.unsynced {
			if err := r.cfg.Store.Sync(); err != nil {
				r.log.Warn("streamed text not shown: the chain before it could not be synced", "session", r.t.Session, "err", err)
				r.textOff = true
				return
			}
			r.unsynced = false
		}
		r.t.Hooks.Text(delta)
	}
}

func (r *run) hookCommand(c CommandInfo) {
	r.s.setStatus(func(st *Status) { st.Current = c.Command })
	if r.t.Hooks.Command != nil {
		r.t.Hooks.Command(c)
	}
}

func (r *run) hookResult(c CommandInfo, content string, isErr bool) {
	r.s.setStatus(func(st *Status) { st.Current = "" })
	if r.t.Hooks.Result != nil {
		r.t.Hooks.Result(c, content, isErr)
	}
}
