package agentcore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// textProtocolPrompt tells a model without tool calling how to act.
const textProtocolPrompt = `You act by writing shell commands. To run a command, reply with exactly one fenced block:

` + "```bash\n<one command or a short pipeline>\n```" + `

You will get its output in the next message. One command per reply; write a short reason above the block.
To read a skill's instructions, reply with only this line, with the skill's name from the skill index:
<tool_call>{"name": "skill", "arguments": {"name": "SKILL-NAME"}}</tool_call>
When the task is finished, reply with your final answer and no command block` + goalDoneHint + `.`

const goalDoneHint = ` (in goal mode, write agent-done on a line of its own after the final summary)`

// maxTextCalls bounds the text-form tool calls run from one reply.
const maxTextCalls = 8

// TextAction is what a text-protocol reply asks for.
type TextAction struct {
	// Command is the first shell block's content, "" if there is none.
	Command string
	// Blocks is the number of shell blocks in the reply; only the first runs.
	Blocks int
	// Done reports that the reply says agent-done (goal mode's finish).
	Done bool
	// Calls are tool calls the reply wrote in a chat template's text form
	// outside fenced blocks: Hermes/Qwen <tool_call>{"name":…,"arguments":…}</tool_call>
	// (arguments as an object or a JSON string, several objects per block
	// allowed), and Qwen3-coder/Llama <function=name><parameter=p>v</parameter></function>
	// (bare or inside <tool_call>). Models trained on tool calling keep
	// writing them after the switch to the text protocol. A call whose JSON
	// cannot be read has the raw text as Arguments and, if it could not be
	// found, an empty Name. IDs are left empty.
	Calls []ToolCall
}

const (
	tagToolCall    = "<tool_call>"
	tagToolCallEnd = "</tool_call>"
	tagFunction    = "<function="
	tagFunctionEnd = "</function>"
	tagParam       = "<parameter="
	tagParamEnd    = "</parameter>"
)

// ParseTextReply reads a text-protocol reply: fenced blocks tagged bash, sh,
// shell or zsh are shell blocks (an untagged block is text: models quote
// output in them, and quoted output must never run); a line "agent-done" outside a
// block, or a shell block holding only agent-done, finishes a goal; text-form
// tool calls outside fenced blocks (and not right after a backtick, which
// quotes them) are Calls. It never fails: a reply without a block or a call
// is a final answer.
func ParseTextReply(s string) TextAction {
	var a TextAction
	s = strings.ReplaceAll(s, "\r\n", "\n")
	for pos := 0; pos < len(s); {
		line, next := lineAt(s, pos)
		fence, info, ok := openFence(strings.TrimSpace(line))
		if !ok {
			if k := callTag(line); k >= 0 {
				// A call may span lines; after it, the rest of its last
				// line is read like a line of its own.
				calls, used := parseCalls(s[pos+k:])
				a.Calls = append(a.Calls, calls...)
				pos += k + used
				continue
			}
			if isDone(line) {
				a.Done = true
			}
			pos = next
			continue
		}
		var body []string
		closed := false
		for pos = next; pos < len(s); {
			l, n := lineAt(s, pos)
			pos = n
			t := strings.TrimSpace(l)
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" && len(t) >= len(fence) {
				closed = true
				break
			}
			body = append(body, l)
		}
		if !shellInfo(info) {
			continue
		}
		cmd := strings.TrimSpace(strings.Join(body, "\n"))
		if !closed && cmd == "" {
			continue
		}
		if isDone(cmd) {
			a.Done = true
			continue
		}
		if cmd == "" {
			continue
		}
		a.Blocks++
		if a.Blocks == 1 {
			a.Command = cmd
		}
	}
	return a
}

// lineAt returns the line of s starting at pos (without its newline) and
// the offset of the next line.
func lineAt(s string, pos int) (string, int) {
	if k := strings.IndexByte(s[pos:], '\n'); k >= 0 {
		return s[pos : pos+k], pos + k + 1
	}
	return s[pos:], len(s)
}

// callTag returns the offset of the first text-form call tag in line, or -1.
// A tag right after a backtick is quoted (`<tool_call>`), not a call.
func callTag(line string) int {
	off := 0
	for {
		rest := line[off:]
		k := strings.Index(rest, "<")
		if k < 0 {
			return -1
		}
		at := off + k
		if strings.HasPrefix(rest[k:], tagToolCall) || strings.HasPrefix(rest[k:], tagFunction) {
			if at == 0 || line[at-1] != '`' {
				return at
			}
		}
		off = at + 1
	}
}

// parseCalls reads one call block at the start of s (which starts with a
// call tag) and returns its calls and the bytes used. An unclosed block
// takes the rest of s (an answer cut by max_tokens).
func parseCalls(s string) ([]ToolCall, int) {
	if strings.HasPrefix(s, tagFunction) {
		body, used := cutTag(s, len(tagFunction), tagFunctionEnd)
		return []ToolCall{parseFunction(body)}, used
	}
	body, used := cutTag(s, len(tagToolCall), tagToolCallEnd)
	t := strings.TrimSpace(body)
	if strings.HasPrefix(t, tagFunction) {
		var calls []ToolCall
		for t != "" {
			if !strings.HasPrefix(t, tagFunction) {
				break
			}
			fb, n := cutTag(t, len(tagFunction), tagFunctionEnd)
			calls = append(calls, parseFunction(fb))
			t = strings.TrimSpace(t[n:])
		}
		return calls, used
	}
	return parseJSONCalls(t), used
}

// cutTag returns what lies between the opening tag (open bytes long) and
// end, and the bytes used including end; without end, the rest of s.
func cutTag(s string, open int, end string) (string, int) {
	rest := s[open:]
	if k := strings.Index(rest, end); k >= 0 {
		return rest[:k], open + k + len(end)
	}
	return rest, len(s)
}

// parseJSONCalls reads one or more {"name":…, "arguments"|"parameters":…}
// objects. Text that is not such an object becomes one call with the raw
// text as arguments (and the name, if it can be seen), so that the model is
// told what was wrong rather than having its action dropped.
func parseJSONCalls(body string) []ToolCall {
	type wireCall struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	toCall := func(v wireCall) ToolCall {
		args := v.Arguments
		if len(args) == 0 {
			args = v.Parameters
		}
		return ToolCall{Name: v.Name, Arguments: ArgumentsText(args)}
	}
	if strings.HasPrefix(body, "[") {
		var list []wireCall
		if json.Unmarshal([]byte(body), &list) == nil && len(list) > 0 {
			calls := make([]ToolCall, 0, len(list))
			for _, v := range list {
				calls = append(calls, toCall(v))
			}
			return calls
		}
	}
	dec := json.NewDecoder(strings.NewReader(body))
	var calls []ToolCall
	for {
		off := int(dec.InputOffset())
		var v wireCall
		if err := dec.Decode(&v); err != nil || v.Name == "" {
			rest := strings.TrimSpace(body[min(off, len(body)):])
			return append(calls, ToolCall{Name: rawName(rest), Arguments: rest})
		}
		calls = append(calls, toCall(v))
		if !dec.More() {
			return calls
		}
	}
}

// rawName finds "name": "…" in text that is not valid JSON.
func rawName(body string) string {
	i := strings.Index(body, `"name"`)
	if i < 0 {
		return ""
	}
	rest := strings.TrimLeft(body[i+len(`"name"`):], " \t\n")
	if !strings.HasPrefix(rest, ":") {
		return ""
	}
	rest = strings.TrimLeft(rest[1:], " \t\n")
	if !strings.HasPrefix(rest, `"`) {
		return ""
	}
	end := strings.IndexByte(rest[1:], '"')
	if end < 0 {
		return ""
	}
	return rest[1 : end+1]
}

// ArgumentsText turns tool-call arguments sent as a JSON string into that
// string and an object (Ollama, text-form calls) into compact JSON text.
func ArgumentsText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// intParams are the tool parameters that are integers, for the
// <parameter=…> form whose values are plain text.
var intParams = map[string]bool{"offset": true, "limit": true}

// parseFunction reads "name>" followed by <parameter=key>value</parameter>
// entries (Qwen3-coder) or a JSON object (Llama 3.1's <function=name>{…}).
func parseFunction(body string) ToolCall {
	name, rest, _ := strings.Cut(body, ">")
	call := ToolCall{Name: strings.TrimSpace(name)}
	rest = strings.TrimSpace(rest)
	if !strings.Contains(rest, tagParam) {
		if rest != "" {
			call.Arguments = ArgumentsText(json.RawMessage(rest))
		}
		return call
	}
	args := map[string]any{}
	for {
		k := strings.Index(rest, tagParam)
		if k < 0 {
			break
		}
		rest = rest[k+len(tagParam):]
		key, after, ok := strings.Cut(rest, ">")
		if !ok {
			break
		}
		key = strings.TrimSpace(key)
		val := after
		next := len(after)
		if e := strings.Index(after, tagParamEnd); e >= 0 {
			val, next = after[:e], e+len(tagParamEnd)
		} else if e := strings.Index(after, tagParam); e >= 0 {
			val, next = after[:e], e
		}
		rest = after[next:]
		// The template puts the value on lines of its own.
		val = strings.TrimPrefix(val, "\n")
		val = strings.TrimSuffix(val, "\n")
		if n, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && intParams[key] {
			args[key] = n
		} else {
			args[key] = val
		}
	}
	b, _ := json.Marshal(args) // strings and ints only
	call.Arguments = string(b)
	return call
}

func isDone(s string) bool {
	s = strings.Trim(strings.TrimSpace(s), "`*")
	return s == "agent-done" || s == "agent_done"
}

// openFence reports whether line opens a fenced block, with the fence run
// (``` or ~~~, three or more) and the info string.
func openFence(line string) (fence, info string, ok bool) {
	for _, ch := range []string{"`", "~"} {
		n := 0
		for n < len(line) && line[n] == ch[0] {
			n++
		}
		if n >= 3 {
			info = strings.TrimSpace(line[n:])
			if ch == "`" && strings.Contains(info, "`") {
				return "", "", false
			}
			return line[:n], info, true
		}
	}
	return "", "", false
}

func shellInfo(info string) bool {
	if f := strings.Fields(info); len(f) > 0 {
		info = strings.ToLower(f[0])
	}
	switch info {
	case "bash", "sh", "shell", "zsh":
		return true
	}
	return false
}

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
// its result. A reply without calls carries a textReply: its answer
// without the agent-done line, and whether it said agent-done.
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
