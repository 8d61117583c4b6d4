package openai

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
)

const (
	thinkOpen     = "<think>"
	thinkClose    = "</think>"
	toolCallOpen  = "<tool_call>"
	toolCallClose = "</tool_call>"
)

// extracted is what extract finds in a reply's content.
type extracted struct {
	Content   string
	Reasoning string
	ToolCalls []agentcore.ToolCall
}

// extract splits content into visible text, <think> reasoning and, when
// toolCalls is set, text-form tool calls. A leading block closed by
// </think> without an opening tag (the template put <think> in the prompt)
// is reasoning; so is an unclosed <think> to the end (the answer was cut).
// An unclosed <tool_call> at the end (cut by max_tokens) is still a call,
// with whatever arguments arrived.
func extract(content string, toolCalls bool) extracted {
	var x extracted
	var reasoning []string
	// An unclosed leading think block: "</think>" before any "<think>".
	if end := strings.Index(content, thinkClose); end >= 0 {
		if start := strings.Index(content, thinkOpen); start < 0 || start > end {
			reasoning = append(reasoning, strings.TrimSpace(content[:end]))
			content = content[end+len(thinkClose):]
		}
	}
	var vis strings.Builder
	for content != "" {
		ti := strings.Index(content, thinkOpen)
		ci := -1
		if toolCalls {
			ci = strings.Index(content, toolCallOpen)
		}
		if ti < 0 && ci < 0 {
			vis.WriteString(content)
			break
		}
		if ci < 0 || (ti >= 0 && ti < ci) {
			vis.WriteString(content[:ti])
			rest := content[ti+len(thinkOpen):]
			body, after, _ := strings.Cut(rest, thinkClose)
			reasoning = append(reasoning, strings.TrimSpace(body))
			content = after
			continue
		}
		vis.WriteString(content[:ci])
		rest := content[ci+len(toolCallOpen):]
		body, after, _ := strings.Cut(rest, toolCallClose)
		x.ToolCalls = append(x.ToolCalls, parseTextCall(body))
		content = after
	}
	x.Content = strings.TrimSpace(vis.String())
	var rs []string
	for _, r := range reasoning {
		if r != "" {
			rs = append(rs, r)
		}
	}
	x.Reasoning = strings.Join(rs, "\n\n")
	for i := range x.ToolCalls {
		x.ToolCalls[i].ID = textCallID(x.ToolCalls[i], i)
	}
	return x
}

var nameRE = regexp.MustCompile(`"name"\s*:\s*"((?:[^"\\]|\\.)*)"`)

// parseTextCall reads {"name": …, "arguments": …} (or "parameters", as some
// Llama templates write). Unreadable JSON still becomes a call, named if
// the name can be found, with the raw text as arguments, so the loop can
// tell the model what was wrong rather than dropping its action.
func parseTextCall(body string) agentcore.ToolCall {
	body = strings.TrimSpace(body)
	var v struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		call := agentcore.ToolCall{Arguments: body}
		if m := nameRE.FindStringSubmatch(body); m != nil {
			if s, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
				call.Name = s
			}
		}
		return call
	}
	args := v.Arguments
	if len(args) == 0 {
		args = v.Parameters
	}
	return agentcore.ToolCall{Name: v.Name, Arguments: agentcore.ArgumentsText(args)}
}

// textCallID makes a stable id for a call the model wrote as text, so the
// same answer always gives the same ids (stable prompts, stable logs).
func textCallID(c agentcore.ToolCall, i int) string {
	h := sha256.Sum256([]byte(strconv.Itoa(i) + "\x00" + c.Name + "\x00" + c.Arguments))
	return "call_" + hex.EncodeToString(h[:8])
}

// textFilter hides <think> blocks and text-form tool calls from streamed
// text, holding back a tail that may be the start of a tag split across
// chunks. Leading white space of the visible text is dropped.
type textFilter struct {
	toolCalls bool
	state     int // 0 visible, 1 in think, 2 in tool call
	pending   string
	started   bool
}

// push adds a delta and returns the text that may be shown now.
func (f *textFilter) push(delta string) string {
	f.pending += delta
	var out strings.Builder
	for f.pending != "" {
		switch f.state {
		case 0:
			ti := strings.Index(f.pending, thinkOpen)
			ci := -1
			if f.toolCalls {
				ci = strings.Index(f.pending, toolCallOpen)
			}
			if ti < 0 && ci < 0 {
				keep := partialTagLen(f.pending, thinkOpen)
				if f.toolCalls {
					keep = max(keep, partialTagLen(f.pending, toolCallOpen))
				}
				f.emit(&out, f.pending[:len(f.pending)-keep])
				f.pending = f.pending[len(f.pending)-keep:]
				return out.String()
			}
			if ci < 0 || (ti >= 0 && ti < ci) {
				f.emit(&out, f.pending[:ti])
				f.pending, f.state = f.pending[ti+len(thinkOpen):], 1
			} else {
				f.emit(&out, f.pending[:ci])
				f.pending, f.state = f.pending[ci+len(toolCallOpen):], 2
			}
		default:
			closeTag := thinkClose
			if f.state == 2 {
				closeTag = toolCallClose
			}
			i := strings.Index(f.pending, closeTag)
			if i < 0 {
				keep := partialTagLen(f.pending, closeTag)
				f.pending = f.pending[len(f.pending)-keep:]
				return out.String()
			}
			f.pending, f.state = f.pending[i+len(closeTag):], 0
		}
	}
	return out.String()
}

// flush returns held-back visible text at the end of the answer.
func (f *textFilter) flush() string {
	if f.state != 0 {
		f.pending = ""
		return ""
	}
	var out strings.Builder
	f.emit(&out, f.pending)
	f.pending = ""
	return out.String()
}

func (f *textFilter) emit(out *strings.Builder, s string) {
	if !f.started {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return
		}
		f.started = true
	}
	out.WriteString(s)
}

// partialTagLen is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialTagLen(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
