package agentcore

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

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
