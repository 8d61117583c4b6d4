package agentcore

import (
	"context"
	"fmt"
	"strings"
)

// textProtocolPrompt tells a model without tool calling how to act.
const textProtocolPrompt = `You act by writing shell commands. To run a command, reply with exactly one fenced block:

` + "```bash\n<one command or a short pipeline>\n```" + `

You will get its output in the next message. One command per reply; write a short reason above the block.
To read a skill's instructions, reply with only this line, with the skill's name from the skill index:
<tool_call>{"name": "skill", "arguments": {"name": "SKILL-NAME"}}</tool_call>
When the task is finished, reply with your final answer and no command block` + goalDoneHint + `.`

// goalDoneHint is said only in goal mode.
const goalDoneHint = ` (in goal mode, write agent-done on a line of its own after the final summary)`

// textInstructions is the text protocol's part of the system prompt.
func textInstructions(goal bool) string {
	if !goal {
		return strings.Replace(textProtocolPrompt, goalDoneHint, "", 1)
	}
	return textProtocolPrompt
}

// maxTextCalls bounds the text-form tool calls run from one reply.
const maxTextCalls = 8

// textModel is the text protocol as a Model, for servers without tool
// calling. It sends no tools: the system prompt (run.systemPrompt) says how
// to act, and the projection gives each result back as a user message. It
// reads the reply (ParseTextReply) into ordinary tool calls, which the run
// decides, runs and records as it does structured ones:
//   - the text-form calls, at most maxTextCalls; a call beyond them is
//     answered with an error and ends the step (the rest are dropped);
//   - otherwise the first shell block, as a run call.
//
// Each call carries a textCall: how the text protocol names it and words
// its result. The reply carries a textReply: its answer without the
// agent-done lines, and whether it said agent-done.
type textModel struct{ Model }

// Complete asks the wrapped Model without tools and reads the reply.
func (m textModel) Complete(ctx context.Context, req Request) (Response, error) {
	req.Tools = nil
	resp, err := m.Model.Complete(ctx, req)
	if err != nil {
		return resp, err
	}
	act := ParseTextReply(resp.Content)
	resp.ToolCalls = act.toolCalls()
	resp.text = &textReply{answer: strings.TrimSpace(stripDone(resp.Content)), done: act.Done}
	return resp, nil
}

// recorded are the tool calls the chain keeps with a reply: none for the
// text protocol, whose calls are in the content (the projection gives
// their results back as user messages).
func (r Response) recorded() []ToolCall {
	if r.text != nil {
		return nil
	}
	return r.ToolCalls
}

// textReply is what a text-protocol reply says beyond its tool calls.
type textReply struct {
	answer string // the content without agent-done lines, trimmed
	done   bool   // the reply says agent-done (goal mode's finish)
}

// textCall is how the text protocol names a call it read from a reply and
// words the call's result for the model. A nil *textCall (a structured
// call) changes nothing.
type textCall struct {
	// index is the call's place among the reply's text-form calls, or -1
	// for a shell block.
	index int
	// label goes before the result: "Output of `cmd`:" for a shell block,
	// "Result of name args:" for a call.
	label string
	// note goes after the result of a call that ran.
	note string
	// refusal, when set, answers the call without running it: it could
	// not be read, or it is over maxTextCalls.
	refusal string
}

// toolCalls turns a reply's actions into the calls the loop runs.
func (a TextAction) toolCalls() []ToolCall {
	if len(a.Calls) == 0 {
		if a.Command == "" {
			return nil
		}
		t := &textCall{index: -1, label: "Output of `" + oneLine(a.Command) + "`:\n"}
		if a.Blocks > 1 {
			t.note = "\n(Only the first command block of your reply ran; send one block per reply.)"
		}
		return []ToolCall{{Name: ToolRun, Arguments: string(mustJSON(map[string]string{"command": a.Command})), text: t}}
	}
	calls := make([]ToolCall, 0, min(len(a.Calls), maxTextCalls+1))
	for i, call := range a.Calls {
		t := &textCall{index: i, label: "Result of " + call.Name + " " + oneLine(call.Arguments) + ":\n"}
		switch {
		case i == maxTextCalls:
			t.refusal = fmt.Sprintf("error: only the first %d tool calls of a reply run; %d did not", maxTextCalls, len(a.Calls)-maxTextCalls)
		case call.Name == "":
			t.refusal = "error: could not read the tool call in your reply (" + oneLine(call.Arguments) +
				`). Write <tool_call>{"name": "run", "arguments": {"command": "df -h"}}</tool_call>, or one ` + "```bash block."
		case a.Blocks > 0 && i == len(a.Calls)-1:
			t.note = "\n(The shell block of your reply did not run: send one action per reply.)"
		}
		call.text = t
		calls = append(calls, call)
		if i == maxTextCalls {
			break
		}
	}
	return calls
}

// named gives a text-protocol call its id when it runs: text-<seq> for a
// shell block, text-<seq>-<index> for a text-form call, where seq is the
// session's last event before the call (last). The id cannot be given
// when the reply is read: a call's seq follows the events the calls
// before it recorded (gate decisions, approvals, results, memory notes),
// which only running them tells. A structured call keeps the server's id.
func (c ToolCall) named(last uint64) ToolCall {
	switch {
	case c.text == nil:
	case c.text.index < 0:
		c.ID = fmt.Sprintf("text-%d", last)
	default:
		c.ID = fmt.Sprintf("text-%d-%d", last, c.text.index)
	}
	return c
}

// refused is the answer to a call that does not run, or "".
func (t *textCall) refused() string {
	if t == nil {
		return ""
	}
	return t.refusal
}

// view is how the text protocol words a result for the model: the label
// before it and, when ran, the note after it.
func (t *textCall) view(content string, ran bool) string {
	if t == nil {
		return content
	}
	if ran {
		content += t.note
	}
	return t.label + content
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
