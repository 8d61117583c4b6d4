package agentcore

import (
	"context"
	"fmt"

	"github.com/thinbot/thinbot/store"
)

// ModelExternal is the model name recorded on the assistant_message of a
// tool call an agent outside thinbot made (an MCP client, bot/mcp).
const ModelExternal = "external-agent"

// ExternalCall is one tool call an agent outside thinbot makes: run or
// read_file, with the arguments the model's tools take (Target is not
// offered: remote hosts stay with thinbot's own model).
type ExternalCall struct {
	Tool    string // ToolRun or ToolReadFile
	Command string // run
	Reason  string // run: shown to the approver
	Path    string // read_file
	Offset  int    // read_file: first line, from 1
	Limit   int    // read_file: number of lines
}

// ExternalResult is what an external call gives back: the run's Result,
// and the tool's result as thinbot's model would read it (masked, cut to
// the model's view), which is also what the chain records.
type ExternalResult struct {
	Result
	Content string
	IsError bool
}

// CallTool runs one tool call of an agent outside thinbot through the
// same gate, approvals (t.Approver), sandbox, masking and chain as a tool
// call of thinbot's own model: t.Text is recorded as the turn's
// user_message (what the caller asked, in words), the call as an
// assistant_message attributed to t.Actor (model "external-agent"), then
// the gate decision, any approval, the result and the run's end. It holds
// the session's lock like Run, so the calls of one session are recorded
// one after the other. A call the tools reject (an unknown tool, a missing
// argument) is recorded and answered as an error result; nothing runs. A
// cancelled ctx (the caller went away) refuses a pending approval, or ends
// the command under way, and is recorded; CallTool then returns ctx's
// error with StatusCancelled. Any other error is a store failure.
func (a *Agent) CallTool(ctx context.Context, t Turn, c ExternalCall) (ExternalResult, error) {
	s := a.session(t.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(t.Session, s); err != nil {
		return ExternalResult{Result: Result{Status: StatusError}}, err
	}
	r := &run{Agent: a, t: a.outward(t), s: s, budgets: a.cfg.Budgets.withDefaults(false), model: a.modelFor(s), started: a.cfg.Now()}
	s.setStatus(func(st *Status) { *st = Status{Running: true, Started: a.cfg.Now(), Budgets: r.budgets} })
	defer s.setStatus(func(st *Status) { *st = Status{} })

	args := map[string]any{}
	switch c.Tool {
	case ToolRun:
		args["command"] = c.Command
		if c.Reason != "" {
			args["reason"] = c.Reason
		}
	case ToolReadFile:
		args["path"] = c.Path
		if c.Offset != 0 {
			args["offset"] = c.Offset
		}
		if c.Limit != 0 {
			args["limit"] = c.Limit
		}
	}
	call := ToolCall{ID: fmt.Sprintf("ext%d", s.last+1), Name: c.Tool, Arguments: string(mustJSON(args))}
	r.pending = []store.Event{
		{Type: EvRunStarted, Actor: t.Actor, Payload: mustJSON(RunPayload{})},
		{Type: EvUserMessage, Actor: t.Actor, Payload: mustJSON(UserMessagePayload{Text: t.Text, MessageID: t.MessageID})},
		{Type: EvAssistantMessage, Actor: t.Actor, Payload: mustJSON(AssistantPayload{ToolCalls: []ToolCall{call}, Model: ModelExternal,
			FinishReason: "tool_calls", Protocol: "tools"})},
	}
	res := ExternalResult{Result: Result{Status: StatusAnswered}}
	// Only the two tools an external agent is offered: skill, memory and
	// agent_done belong to thinbot's own model.
	var o outcome
	parsed, perr := parseArgs(call, toolDefs(false, false, false)[:2])
	if perr == nil {
		var err error
		if o, err = r.dispatch(ctx, call, parsed); err != nil {
			return ExternalResult{Result: Result{Status: StatusError}}, err
		}
	} else {
		o = outcome{content: "error: " + perr.Error(), isErr: true}
	}
	if err := r.result(call, o.content, o.isErr, o.ex); err != nil {
		return ExternalResult{Result: Result{Status: StatusError}}, err
	}
	res.Content, res.IsError = a.scrub.scrub(o.content), o.isErr
	fin := RunPayload{Status: StatusAnswered, Steps: 1}
	if ctx.Err() != nil {
		res.Status, fin.Status = StatusCancelled, StatusCancelled
		fin.Detail = ctx.Err().Error()
		res.Cause = CauseOf(ctx)
		fin.Cause, fin.CauseBy = causeFields(res.Cause)
		if res.Cause != nil {
			fin.Detail = res.Cause.Error()
		}
	}
	out, err := r.record(durable, store.Event{Type: EvRunFinished, Actor: "system", Payload: mustJSON(fin)})
	if err != nil {
		r.logFinished(res.Result)
		return res, err
	}
	res.Steps, res.LastSeq = 1, out[len(out)-1].Seq
	r.logFinished(res.Result)
	if res.Status == StatusCancelled {
		return res, ctx.Err()
	}
	return res, nil
}
