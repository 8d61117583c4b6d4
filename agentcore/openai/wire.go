package openai

import (
	"encoding/json"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
)

// The request as /v1/chat/completions takes it.
type wireRequest struct {
	Model         string         `json:"model"`
	Messages      []wireMessage  `json:"messages"`
	Tools         []wireTool     `json:"tools,omitempty"`
	ToolChoice    string         `json:"tool_choice,omitempty"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage always carries content as a string, "" on an assistant turn
// that only calls tools: every server accepts that, while null trips
// strictly typed ones.
type wireMessage struct {
	Role             string         `json:"role"`
	Content          string         `json:"content"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string         `json:"tool_call_id,omitempty"`
	Name             string         `json:"name,omitempty"`
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type wireTool struct {
	Type     string      `json:"type"`
	Function wireToolDef `json:"function"`
}

type wireToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest turns an agentcore.Request into the wire request.
func (c *Client) buildRequest(req agentcore.Request, stream bool) wireRequest {
	w := wireRequest{
		Model:       c.cfg.Model,
		Stream:      stream,
		MaxTokens:   req.MaxTokens,
		Temperature: c.cfg.Temperature,
	}
	if stream {
		w.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.Tools != nil {
		w.ToolChoice = "auto"
		w.Tools = make([]wireTool, 0, len(req.Tools))
		for _, t := range req.Tools {
			p := t.Parameters
			if len(p) == 0 || string(p) == "null" {
				p = emptySchema
			}
			w.Tools = append(w.Tools, wireTool{Type: "function", Function: wireToolDef{Name: t.Name, Description: t.Description, Parameters: p}})
		}
		w.Messages = c.toolMessages(req.Messages)
	} else {
		w.Messages = textMessages(req.Messages)
	}
	return w
}

// toolMessages converts messages for a request with tools.
func (c *Client) toolMessages(msgs []agentcore.Message) []wireMessage {
	out := make([]wireMessage, 0, len(msgs))
	for _, m := range msgs {
		w := wireMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		if m.Role == agentcore.RoleTool {
			w.Name = m.Name
		}
		if m.Role == agentcore.RoleAssistant && len(m.ToolCalls) > 0 {
			if c.cfg.FeedReasoning {
				w.ReasoningContent = m.Reasoning
			}
			w.ToolCalls = make([]wireToolCall, len(m.ToolCalls))
			for i, tc := range m.ToolCalls {
				w.ToolCalls[i] = wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: argumentsJSON(tc.Arguments)}}
			}
		}
		out = append(out, w)
	}
	return out
}

// argumentsJSON encodes arguments text as the JSON string the API expects.
// Invalid JSON text is sent as it is, inside the string: it is what the
// model wrote, and the tool result next to it says what was wrong.
func argumentsJSON(s string) json.RawMessage {
	if s == "" {
		s = "{}"
	}
	b, _ := json.Marshal(s) // marshalling a string cannot fail
	return b
}

// textMessages converts messages for the text protocol. Tool calls and tool
// results from before a switch to the text protocol become plain text:
// a run call as the fenced shell block the text protocol uses, any other
// call as a short note, a tool result as a user message. Consecutive user
// messages are merged, for chat templates that demand alternating roles.
func textMessages(msgs []agentcore.Message) []wireMessage {
	out := make([]wireMessage, 0, len(msgs))
	for _, m := range msgs {
		w := wireMessage{Role: m.Role, Content: m.Content}
		switch {
		case m.Role == agentcore.RoleAssistant && len(m.ToolCalls) > 0:
			var b strings.Builder
			b.WriteString(strings.TrimSpace(m.Content))
			for _, tc := range m.ToolCalls {
				if b.Len() > 0 {
					b.WriteString("\n\n")
				}
				b.WriteString(callAsText(tc))
			}
			w.Content = b.String()
		case m.Role == agentcore.RoleTool:
			w.Role = agentcore.RoleUser
		}
		if n := len(out); n > 0 && w.Role == agentcore.RoleUser && out[n-1].Role == agentcore.RoleUser {
			out[n-1].Content += "\n\n" + w.Content
			continue
		}
		out = append(out, w)
	}
	return out
}

// callAsText renders a tool call in the text protocol's words.
func callAsText(tc agentcore.ToolCall) string {
	var args struct {
		Command string `json:"command"`
	}
	if tc.Name == "run" && json.Unmarshal([]byte(tc.Arguments), &args) == nil && args.Command != "" {
		return "```bash\n" + strings.TrimRight(args.Command, "\n") + "\n```"
	}
	return "(called " + tc.Name + " " + tc.Arguments + ")"
}

// The response: a whole answer (message) or one stream chunk (delta).
type wireResponse struct {
	Model   string          `json:"model"`
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type wireChoice struct {
	Index        int         `json:"index"`
	Message      *wireAnswer `json:"message"`
	Delta        *wireAnswer `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

type wireAnswer struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ToolCalls        []wireToolCall  `json:"tool_calls"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptCacheHit      int `json:"prompt_cache_hit_tokens"` // DeepSeek
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *wireUsage) usage() agentcore.Usage {
	r := agentcore.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.PromptCacheHit}
	if u.PromptTokensDetails != nil && u.PromptTokensDetails.CachedTokens > 0 {
		r.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	return r
}

// contentText reads content that is a string, null, or (rarely) an array of
// {"type":"text","text":…} parts.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

func (a *wireAnswer) reasoning() string {
	if a.ReasoningContent != nil {
		return *a.ReasoningContent
	}
	if a.Reasoning != nil {
		return *a.Reasoning
	}
	return ""
}

// answer assembles a Response from a whole answer or from stream chunks.
type answer struct {
	content   strings.Builder
	reasoning strings.Builder
	calls     []*agentcore.ToolCall
	byIndex   map[int]*agentcore.ToolCall
	finish    string
	usage     agentcore.Usage
	model     string
	chunks    int
}

// add merges one response body or stream chunk. Only the first choice is
// used: thinbot never asks for n > 1.
func (a *answer) add(r *wireResponse) (text string) {
	a.chunks++
	if r.Model != "" {
		a.model = r.Model
	}
	if r.Usage != nil {
		a.usage = r.Usage.usage()
	}
	for _, ch := range r.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.finish = *ch.FinishReason
		}
		m := ch.Delta
		if m == nil {
			m = ch.Message
		}
		if m == nil {
			continue
		}
		text = contentText(m.Content)
		a.content.WriteString(text)
		a.reasoning.WriteString(m.reasoning())
		for i := range m.ToolCalls {
			a.addCall(&m.ToolCalls[i])
		}
	}
	return text
}

// addCall merges one tool-call delta. Deltas are matched by index; a delta
// without index continues the last call unless it brings a new id; a new id
// at a used index (a server that numbers every call 0) starts a new call.
func (a *answer) addCall(d *wireToolCall) {
	if a.byIndex == nil {
		a.byIndex = make(map[int]*agentcore.ToolCall)
	}
	var tc *agentcore.ToolCall
	switch {
	case d.Index != nil:
		tc = a.byIndex[*d.Index]
		if tc != nil && d.ID != "" && tc.ID != "" && d.ID != tc.ID {
			tc = nil
		}
	case d.ID == "" && len(a.calls) > 0:
		tc = a.calls[len(a.calls)-1]
	}
	if tc == nil {
		tc = &agentcore.ToolCall{}
		a.calls = append(a.calls, tc)
		if d.Index != nil {
			a.byIndex[*d.Index] = tc
		}
	}
	if tc.ID == "" {
		tc.ID = d.ID
	}
	if tc.Name == "" {
		tc.Name = d.Function.Name
	}
	raw := d.Function.Arguments
	switch {
	case len(raw) == 0 || string(raw) == "null":
	case raw[0] == '"':
		tc.Arguments += agentcore.ArgumentsText(raw)
	default:
		// A whole object at once (Ollama): it replaces, never appends.
		tc.Arguments = agentcore.ArgumentsText(raw)
	}
}

// response finishes the answer. Text-form tool calls are looked for only
// when the request offered tools.
func (a *answer) response(tools bool) agentcore.Response {
	x := extract(a.content.String(), tools)
	resp := agentcore.Response{
		Content:      x.Content,
		FinishReason: a.finish,
		Usage:        a.usage,
		Model:        a.model,
	}
	var rs []string
	if r := strings.TrimSpace(a.reasoning.String()); r != "" {
		rs = append(rs, r)
	}
	if x.Reasoning != "" {
		rs = append(rs, x.Reasoning)
	}
	resp.Reasoning = strings.Join(rs, "\n\n")
	for i, tc := range a.calls {
		c := *tc
		if c.ID == "" {
			c.ID = textCallID(c, i)
		}
		resp.ToolCalls = append(resp.ToolCalls, c)
	}
	for i, c := range x.ToolCalls {
		c.ID = textCallID(c, len(a.calls)+i)
		resp.ToolCalls = append(resp.ToolCalls, c)
	}
	return resp
}
