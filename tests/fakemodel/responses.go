package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// respond answers POST /v1/responses, OpenAI's Responses API, which Codex
// CLI speaks (it no longer speaks chat completions), from the same script:
// a Reply's tool calls become function_call items and its content a
// message item, streamed as response.created, response.output_item.done
// for each, and response.completed. A call named NAMESPACE__TOOL is sent
// as TOOL in NAMESPACE (the last "__" splits them), which is how Codex
// offers an MCP server's tools: `mcp__thinbot__run` is tool run in
// namespace mcp__thinbot. The request is recorded with its input items as
// Messages: a message's text, a function_call_output's output as a tool
// message (ToolCallID the call id), a function_call as an assistant
// message. Only the script's content, tool calls, Status and ErrorBody
// are used.
func (h *Handler) respond(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		h.fail(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var body struct {
		Model  string            `json:"model"`
		Stream bool              `json:"stream"`
		Input  []json.RawMessage `json:"input"`
		Tools  []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		h.fail(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Model: body.Model, Stream: body.Stream, Raw: raw}
	for _, in := range body.Input {
		req.Messages = append(req.Messages, inputMessage(in))
	}
	h.mu.Lock()
	req.N = len(h.reqs) + 1
	h.reqs = append(h.reqs, req)
	var reply Reply
	ok := true
	switch {
	case h.fn != nil:
	case len(h.script) == 0:
		ok = false
	default:
		reply = h.script[0]
		h.script = h.script[1:]
	}
	h.mu.Unlock()
	if !ok {
		h.fail(w, http.StatusInternalServerError, fmt.Sprintf("request %d: script exhausted (no reply left)", req.N))
		return
	}
	if h.fn != nil {
		reply = h.fn(req)
	}
	if reply.Status != 0 && reply.Status != http.StatusOK {
		writeError(w, reply.Status, reply.ErrorBody)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	id := fmt.Sprintf("resp_%d", req.N)
	event := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	event("response.created", map[string]any{"response": map[string]any{"id": id}})
	for _, c := range reply.ToolCalls {
		h.mu.Lock()
		h.calls++
		n := h.calls
		h.mu.Unlock()
		callID := c.ID
		if callID == "" {
			callID = fmt.Sprintf("call_%d", n)
		}
		item := map[string]any{"type": "function_call", "name": c.Name, "arguments": c.Args, "call_id": callID}
		if i := strings.LastIndex(c.Name, "__"); i > 0 {
			item["namespace"], item["name"] = c.Name[:i], c.Name[i+2:]
		}
		event("response.output_item.done", map[string]any{"item": item})
	}
	if reply.Content != "" {
		event("response.output_item.done", map[string]any{"item": map[string]any{"type": "message", "role": "assistant",
			"content": []map[string]any{{"type": "output_text", "text": reply.Content}}}})
	}
	event("response.completed", map[string]any{"response": map[string]any{"id": id,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}})
}

// inputMessage is a Responses API input item as a Message.
func inputMessage(raw json.RawMessage) Message {
	var it struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
		CallID  string          `json:"call_id"`
		Name    string          `json:"name"`
	}
	_ = json.Unmarshal(raw, &it)
	m := Message{Role: it.Role, RawContent: raw}
	switch it.Type {
	case "function_call_output":
		m.Role, m.ToolCallID, m.Content = "tool", it.CallID, itemText(it.Output)
	case "function_call":
		m.Role, m.Name = "assistant", it.Name
	default:
		m.Content = itemText(it.Content)
	}
	return m
}

// itemText is the text of a string or of an array of {text} parts.
func itemText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
