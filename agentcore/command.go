package agentcore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// ModelSkillCommand is the model name recorded on the assistant_message of
// a command a person ran without the model.
const ModelSkillCommand = "skill-command"

// SkillCommand reads "!NAME ARGS" or "/run NAME ARGS" and reports whether
// NAME is a command of a loaded skill (metadata.thinbot.commands).
func (a *Agent) SkillCommand(text string) (name string, args []string, ok bool) {
	f := strings.Fields(text)
	switch {
	case len(f) >= 2 && (f[0] == "/run" || f[0] == "!run"):
		name, args = f[1], f[2:]
	case len(f) >= 1 && len(f[0]) > 1 && f[0][0] == '!':
		name, args = f[0][1:], f[1:]
	default:
		return "", nil, false
	}
	_, ok = a.cfg.Skills.Command(strings.ToLower(name))
	return strings.ToLower(name), args, ok
}

// SkillCommandsHelp lists the skill commands for /help, one line each; ""
// when there are none.
func (a *Agent) SkillCommandsHelp() string {
	var b strings.Builder
	for _, c := range a.cfg.Skills.Commands() {
		fmt.Fprintf(&b, "- `!%s` %s (skill %s)\n", c.Usage(), oneLine(c.Description), c.Skill)
	}
	return b.String()
}

// RunSkillCommand runs the skill command t.Text names ("!disk web-01")
// without the model: the arguments are checked against the command's
// declaration and quoted, and the command line goes to RunCommand. Bad
// arguments are recorded and answered with the command's usage; nothing
// runs.
func (a *Agent) RunSkillCommand(ctx context.Context, t Turn) (Result, error) {
	name, args, ok := a.SkillCommand(t.Text)
	if !ok {
		return a.RunCommand(ctx, t, "", fmt.Sprintf("There is no skill command %q; send /help for the list.", name))
	}
	c, _ := a.cfg.Skills.Command(name)
	if c.Tool != "" {
		return a.runToolCommand(ctx, t, c, args)
	}
	line, err := c.Line(args)
	if err != nil {
		return a.RunCommand(ctx, t, "", "Not run: "+err.Error())
	}
	return a.RunCommand(ctx, t, line, fmt.Sprintf("skill command %s of skill %s, run by %s", c.Name, c.Skill, t.Actor))
}

// runToolCommand runs a skill command that calls a tool (metadata.thinbot
// commands' tool: a datasource tool) with the person's arguments, recorded
// as RunCommand records a command line.
func (a *Agent) runToolCommand(ctx context.Context, t Turn, c skills.Command, args []string) (Result, error) {
	if datasourceKind[c.Tool] == "" {
		return a.RunCommand(ctx, t, "", fmt.Sprintf("Not run: skill command %s calls the tool %q; a skill command may call only the datasource tools.", c.Name, c.Tool))
	}
	targs, err := c.ToolArgs(args)
	if err != nil {
		return a.RunCommand(ctx, t, "", "Not run: "+err.Error())
	}
	return a.runFor(ctx, t, ToolCall{Name: c.Tool, Arguments: string(mustJSON(targs))}, "")
}

// RunCommand runs one command line for a person, without the model, through
// the same gate, approvals, sandbox and chain as a model's run tool: the
// turn's message, a tool call attributed to t.Actor (assistant_message,
// model "skill-command"), the gate decision, any approval, the result and
// the run's end are recorded, so that the model sees the command and its
// output in the session later. An empty command records the message and
// answers why with reason (a refused skill command). An error is a store
// failure.
func (a *Agent) RunCommand(ctx context.Context, t Turn, command, reason string) (Result, error) {
	if command == "" {
		return a.runFor(ctx, t, ToolCall{}, reason)
	}
	return a.runFor(ctx, t, ToolCall{Name: ToolRun, Arguments: string(mustJSON(map[string]string{"command": command, "reason": reason}))}, reason)
}

// runFor is RunCommand for one tool call: run (a command line) or a
// datasource tool; a call without a name records the message and answers
// reason.
func (a *Agent) runFor(ctx context.Context, t Turn, call ToolCall, reason string) (Result, error) {
	s := a.session(t.Session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(t.Session, s); err != nil {
		return Result{Status: StatusError}, err
	}
	r := &run{Agent: a, t: a.outward(t), s: s, budgets: a.cfg.Budgets.withDefaults(false), model: a.modelFor(s), started: a.cfg.Now()}
	s.setStatus(func(st *Status) { *st = Status{Running: true, Started: a.cfg.Now(), Budgets: r.budgets} })
	defer s.setStatus(func(st *Status) { *st = Status{} })

	evs := []store.Event{
		{Type: EvRunStarted, Actor: t.Actor, Payload: mustJSON(RunPayload{})},
		{Type: EvUserMessage, Actor: t.Actor, Payload: mustJSON(UserMessagePayload{Text: t.Text, MessageID: t.MessageID})},
	}
	res := Result{Status: StatusAnswered}
	if call.Name == "" {
		res.Answer = reason
	} else {
		call.ID = fmt.Sprintf("cmd%d", s.last+1)
		var args toolArgs
		json.Unmarshal([]byte(call.Arguments), &args)
		command := args.Command
		ap := AssistantPayload{ToolCalls: []ToolCall{call}, Model: ModelSkillCommand, FinishReason: "tool_calls", Protocol: "tools"}
		if r.textProtocol() {
			text := "```bash\n" + command + "\n```"
			if call.Name != ToolRun {
				text = `<tool_call>{"name": ` + string(mustJSON(call.Name)) + `, "arguments": ` + call.Arguments + `}</tool_call>`
			}
			ap = AssistantPayload{Content: text, Model: ModelSkillCommand, Protocol: "text"}
		}
		r.pending = append(evs, store.Event{Type: EvAssistantMessage, Actor: t.Actor, Payload: mustJSON(ap)})
		evs = nil
		var (
			content string
			isErr   bool
			ex      *ExecResult
			err     error
		)
		if call.Name == ToolRun {
			content, isErr, ex, err = r.runCommand(ctx, call, command, reason, "")
		} else {
			content, isErr, err = r.queryDatasource(ctx, call, args)
			command = strings.Join(strings.Fields(call.Name+" "+args.Window+" "+args.Query), " ")
		}
		if err != nil {
			return Result{Status: StatusError}, err
		}
		if err := r.result(call, content, isErr, ex); err != nil {
			return Result{Status: StatusError}, err
		}
		res.Answer = a.scrub.scrub("`" + strings.ReplaceAll(command, "`", "'") + "`\n```\n" + strings.ReplaceAll(content, "```", "'''") + "\n```")
		if ctx.Err() != nil {
			res.Status = StatusCancelled
		}
	}
	fin := RunPayload{Status: res.Status, Steps: 1}
	if ctx.Err() != nil {
		fin.Detail = ctx.Err().Error()
		res.Cause = CauseOf(ctx)
		fin.Cause, fin.CauseBy = causeFields(res.Cause)
		if res.Cause != nil {
			fin.Detail = res.Cause.Error()
		}
	}
	out, err := r.record(durable, append(evs, store.Event{Type: EvRunFinished, Actor: "system", Payload: mustJSON(fin)})...)
	if err != nil {
		r.logFinished(res)
		return res, err
	}
	res.Steps, res.LastSeq = 1, out[len(out)-1].Seq
	r.logFinished(res)
	if res.Status == StatusCancelled {
		return res, ctx.Err()
	}
	return res, nil
}
