// Package fakemodel is a scripted OpenAI-compatible model server for tests
// and offline demos. It answers /v1/chat/completions from a script of
// Replies (text, tool calls, streamed or not, and faults: 429 with
// Retry-After, 500, a connection cut mid-answer, 400 on tools) and records
// every request it receives so tests can assert what the client sent.
//
// A Server listens on 127.0.0.1. Replies are consumed in order; a request
// after the script is used up gets HTTP 500 with a clear message and is
// recorded as a failure (see Err). Start ties a Server to a test and fails
// the test if the script was not used up or anything unexpected arrived.
package fakemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// Reply is one scripted answer. The zero Reply is an empty text answer.
//
// Streaming follows the request: the answer is SSE when the request said
// "stream": true, or when Stream is set; JSON forces one JSON body even for
// a streaming request (a server that ignores "stream").
type Reply struct {
	// Content is the answer text.
	Content string `json:"content,omitempty"`
	// Reasoning is sent as reasoning_content.
	Reasoning string `json:"reasoning,omitempty"`
	// ToolCalls are sent in order, as tool_calls.
	ToolCalls []Call `json:"tool_calls,omitempty"`
	// Stream answers with SSE even if the request did not ask for it.
	Stream bool `json:"stream,omitempty"`
	// JSON answers with one JSON body even if the request asked to stream.
	JSON bool `json:"json,omitempty"`
	// Fragment streams content, reasoning and arguments in pieces of this
	// many bytes; 0 sends each in one piece.
	Fragment int `json:"fragment,omitempty"`
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	FinishReason string `json:"finish_reason,omitempty"`
	// Usage, if set, is reported (in the last chunk when streaming).
	Usage *agentcore.Usage `json:"usage,omitempty"`
	// Status, if not 0 or 200, answers with that status and ErrorBody.
	Status int `json:"status,omitempty"`
	// ErrorBody is the raw error body (JSON or HTML); empty means an
	// OpenAI-style JSON error naming the status.
	ErrorBody string `json:"error_body,omitempty"`
	// RetryAfter is sent as the Retry-After header.
	RetryAfter string `json:"retry_after,omitempty"`
	// CutAfter, if > 0, closes the connection after this many bytes of the
	// body (mid-stream or mid-JSON).
	CutAfter int `json:"cut_after,omitempty"`
	// Drop closes the connection without answering at all.
	Drop bool `json:"drop,omitempty"`
	// StreamError sends an error object inside a 200 answer after the
	// content: its text as the message, or itself if it is a JSON object.
	StreamError string `json:"stream_error,omitempty"`
	// NoDone ends the stream without data: [DONE].
	NoDone bool `json:"no_done,omitempty"`
	// KeepAlive sends SSE comment lines and blank lines between chunks.
	KeepAlive bool `json:"keep_alive,omitempty"`
	// Delay waits before answering; a cancelled request ends the wait. In
	// JSON scripts it is a duration string such as "1.5s".
	Delay time.Duration `json:"-"`
	// ChunkDelay pauses between the events of a streamed answer (a slow
	// model writing); a cancelled request ends the stream. In JSON scripts
	// it is a duration string ("chunk_delay": "50ms").
	ChunkDelay time.Duration `json:"-"`
	// RejectTools answers a request that offers tools with vLLM's 400
	// "auto" tool choice error and leaves this Reply at the head of the
	// script, so the retry without tools gets it.
	RejectTools bool `json:"reject_tools,omitempty"`
}

// UnmarshalJSON reads a Reply, with "delay" as a duration string.
func (r *Reply) UnmarshalJSON(b []byte) error {
	type plain Reply
	var v struct {
		plain
		Delay      string `json:"delay"`
		ChunkDelay string `json:"chunk_delay"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = Reply(v.plain)
	for _, f := range []struct {
		name string
		in   string
		out  *time.Duration
	}{{"delay", v.Delay, &r.Delay}, {"chunk_delay", v.ChunkDelay, &r.ChunkDelay}} {
		if f.in == "" {
			continue
		}
		d, err := time.ParseDuration(f.in)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		*f.out = d
	}
	return nil
}

// Call is one scripted tool call.
type Call struct {
	// ID defaults to call_<n>, counting calls over the server's life.
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Args is the arguments text, sent as it is (it may be invalid JSON).
	Args string `json:"args"`
	// ArgsObject sends Args as a JSON object instead of a string, as Ollama
	// does. Args must then be valid JSON.
	ArgsObject bool `json:"args_object,omitempty"`
}

// Request is one request the server received, decoded.
type Request struct {
	// N counts requests from 1.
	N           int
	Path        string
	Header      http.Header
	Model       string
	Messages    []Message
	Tools       []Tool
	ToolChoice  json.RawMessage
	Stream      bool
	MaxTokens   int
	Temperature *float64
	// Raw is the body exactly as sent.
	Raw []byte
}

// HasTools reports whether the request offered tools.
func (r Request) HasTools() bool { return len(r.Tools) > 0 }

// Message is one message of a recorded request.
type Message struct {
	Role string `json:"role"`
	// Content is the text; ContentNull is set when content was null.
	Content          string          `json:"-"`
	ContentNull      bool            `json:"-"`
	RawContent       json.RawMessage `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

// Tool is one tool definition of a recorded request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Handler is the fake's http.Handler, for serving it on a listener of your
// own (cmd/fakemodel does). Its methods may be called concurrently.
type Handler struct {
	mu       sync.Mutex
	script   []Reply
	fn       func(Request) Reply
	reqs     []Request
	failures []string
	calls    int
}

// NewHandler returns a Handler that answers from script, in order.
func NewHandler(script ...Reply) *Handler {
	return &Handler{script: append([]Reply(nil), script...)}
}

// NewHandlerFunc returns a Handler that asks f for each reply. f may be
// called concurrently.
func NewHandlerFunc(f func(Request) Reply) *Handler {
	return &Handler{fn: f}
}

// Requests returns the chat-completion requests received so far, in order.
func (h *Handler) Requests() []Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Request(nil), h.reqs...)
}

// Remaining is the number of scripted replies not yet used.
func (h *Handler) Remaining() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.script)
}

// Err reports everything unexpected the server saw (requests beyond the
// script, unknown routes, undecodable bodies), or nil.
func (h *Handler) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.failures) == 0 {
		return nil
	}
	return errors.New("fakemodel: " + strings.Join(h.failures, "; "))
}

func (h *Handler) fail(w http.ResponseWriter, status int, msg string) {
	h.mu.Lock()
	h.failures = append(h.failures, msg)
	h.mu.Unlock()
	writeError(w, status, "fakemodel: "+msg)
}

// ServeHTTP answers /v1/chat/completions, /v1/responses (responses.go)
// and /v1/models (with or without /v1).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	switch {
	case path == "/models" && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"fake","object":"model","owned_by":"fakemodel"}]}`)
	case path == "/chat/completions" && r.Method == http.MethodPost:
		h.complete(w, r)
	case path == "/responses" && r.Method == http.MethodPost:
		h.respond(w, r)
	default:
		h.fail(w, http.StatusNotFound, fmt.Sprintf("unexpected %s %s", r.Method, r.URL.Path))
	}
}

func (h *Handler) complete(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		h.fail(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var req Request
	var body struct {
		Model       string          `json:"model"`
		Messages    []Message       `json:"messages"`
		Tools       []Tool          `json:"tools"`
		ToolChoice  json.RawMessage `json:"tool_choice"`
		Stream      bool            `json:"stream"`
		MaxTokens   int             `json:"max_tokens"`
		Temperature *float64        `json:"temperature"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		h.fail(w, http.StatusBadRequest, "decode request: "+err.Error())
		return
	}
	for i := range body.Messages {
		m := &body.Messages[i]
		if len(m.RawContent) == 0 || string(m.RawContent) == "null" {
			m.ContentNull = true
		} else if err := json.Unmarshal(m.RawContent, &m.Content); err != nil {
			h.fail(w, http.StatusBadRequest, fmt.Sprintf("message %d: content is not a string: %s", i, m.RawContent))
			return
		}
	}
	req = Request{Path: r.URL.Path, Header: r.Header.Clone(), Model: body.Model, Messages: body.Messages,
		Tools: body.Tools, ToolChoice: body.ToolChoice, Stream: body.Stream, MaxTokens: body.MaxTokens,
		Temperature: body.Temperature, Raw: raw}

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
		if !(reply.RejectTools && req.HasTools()) {
			h.script = h.script[1:]
		}
	}
	h.mu.Unlock()
	if !ok {
		h.fail(w, http.StatusInternalServerError, fmt.Sprintf("request %d: script exhausted (no reply left)", req.N))
		return
	}
	if h.fn != nil {
		reply = h.fn(req)
	}
	h.answer(w, r, req, reply)
}

// vllmToolsError is what vLLM answers when started without tool calling.
const vllmToolsError = `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`

func (h *Handler) answer(w http.ResponseWriter, r *http.Request, req Request, rep Reply) {
	if rep.Delay > 0 {
		t := time.NewTimer(rep.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if rep.Drop {
		panic(http.ErrAbortHandler) // net/http closes the connection, unlogged
	}
	if rep.RejectTools && req.HasTools() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, vllmToolsError)
		return
	}
	if rep.RetryAfter != "" {
		w.Header().Set("Retry-After", rep.RetryAfter)
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		body := rep.ErrorBody
		ct := "application/json"
		if body == "" {
			body = errorJSON(http.StatusText(rep.Status), rep.Status)
		} else if strings.HasPrefix(strings.TrimSpace(body), "<") {
			ct = "text/html; charset=utf-8"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(rep.Status)
		io.WriteString(w, body)
		return
	}
	h.mu.Lock()
	first := h.calls
	h.calls += len(rep.ToolCalls)
	h.mu.Unlock()
	for i := range rep.ToolCalls {
		if rep.ToolCalls[i].ID == "" {
			rep.ToolCalls[i].ID = "call_" + strconv.Itoa(first+i+1)
		}
	}
	cw := &cutWriter{w: w, left: rep.CutAfter}
	if (req.Stream || rep.Stream) && !rep.JSON {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		writeStream(r.Context(), cw, req.Model, rep)
	} else {
		body := wholeAnswer(req.Model, rep)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		cw.Write(body)
	}
	if rep.CutAfter > 0 {
		panic(http.ErrAbortHandler)
	}
}

// cutWriter passes writes through, flushing each, until left bytes were
// written (when left > 0); after that it swallows them.
type cutWriter struct {
	w    http.ResponseWriter
	left int
	done bool
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if c.done {
		return len(p), nil
	}
	n := len(p)
	if c.left > 0 {
		if len(p) >= c.left {
			p, c.done = p[:c.left], true
		}
		c.left -= len(p)
	}
	c.w.Write(p)
	http.NewResponseController(c.w).Flush()
	return n, nil
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, errorJSON(msg, status))
}

func errorJSON(msg string, status int) string {
	typ := "server_error"
	if status < 500 {
		typ = "invalid_request_error"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": status}})
	return string(b)
}

func finish(rep Reply) string {
	switch {
	case rep.FinishReason != "":
		return rep.FinishReason
	case len(rep.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

func argsValue(c Call) json.RawMessage {
	if c.ArgsObject && json.Valid([]byte(c.Args)) {
		return json.RawMessage(c.Args)
	}
	b, _ := json.Marshal(c.Args)
	return b
}

func usageJSON(u *agentcore.Usage) map[string]any {
	m := map[string]any{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"total_tokens": u.PromptTokens + u.CompletionTokens}
	if u.CachedTokens > 0 {
		m["prompt_tokens_details"] = map[string]any{"cached_tokens": u.CachedTokens}
	}
	return m
}

// wholeAnswer is a non-streamed chat.completion body.
func wholeAnswer(model string, rep Reply) []byte {
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	if rep.Content == "" && len(rep.ToolCalls) > 0 {
		msg["content"] = nil
	}
	if rep.Reasoning != "" {
		msg["reasoning_content"] = rep.Reasoning
	}
	if len(rep.ToolCalls) > 0 {
		var calls []map[string]any
		for _, c := range rep.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": argsValue(c)}})
		}
		msg["tool_calls"] = calls
	}
	out := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish(rep)}}}
	if rep.Usage != nil {
		out["usage"] = usageJSON(rep.Usage)
	}
	if rep.StreamError != "" {
		out = map[string]any{"error": streamErrorValue(rep.StreamError)}
	}
	b, _ := json.Marshal(out)
	return b
}

func streamErrorValue(s string) any {
	if strings.HasPrefix(strings.TrimSpace(s), "{") && json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return map[string]any{"message": s, "type": "server_error", "code": 500}
}

// pieces splits s into n-byte pieces (n <= 0: one piece).
func pieces(s string, n int) []string {
	if n <= 0 || len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// writeStream writes a chat.completion.chunk stream.
func writeStream(ctx context.Context, w io.Writer, model string, rep Reply) {
	var buf bytes.Buffer
	event := func(v any) {
		if rep.ChunkDelay > 0 {
			t := time.NewTimer(rep.ChunkDelay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		b, _ := json.Marshal(v)
		buf.Reset()
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if rep.KeepAlive {
			buf.WriteString(": keep-alive\n\n\n")
		}
		w.Write(buf.Bytes())
	}
	chunk := func(delta map[string]any, fin any) map[string]any {
		return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}}
	}
	if rep.KeepAlive {
		w.Write([]byte(": connected\n\n"))
	}
	event(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	if rep.Reasoning != "" {
		for _, p := range pieces(rep.Reasoning, rep.Fragment) {
			event(chunk(map[string]any{"reasoning_content": p}, nil))
		}
	}
	if rep.Content != "" {
		for _, p := range pieces(rep.Content, rep.Fragment) {
			event(chunk(map[string]any{"content": p}, nil))
		}
	}
	for i, c := range rep.ToolCalls {
		head := map[string]any{"index": i, "id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}}
		if c.ArgsObject {
			head["function"] = map[string]any{"name": c.Name, "arguments": argsValue(c)}
			event(chunk(map[string]any{"tool_calls": []any{head}}, nil))
			continue
		}
		event(chunk(map[string]any{"tool_calls": []any{head}}, nil))
		if c.Args == "" {
			continue
		}
		for _, p := range pieces(c.Args, rep.Fragment) {
			event(chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil))
		}
	}
	if rep.StreamError != "" {
		event(map[string]any{"error": streamErrorValue(rep.StreamError)})
		return
	}
	event(chunk(map[string]any{}, finish(rep)))
	if rep.Usage != nil {
		event(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model,
			"choices": []any{}, "usage": usageJSON(rep.Usage)})
	}
	if !rep.NoDone {
		w.Write([]byte("data: [DONE]\n\n"))
	}
}

// Server is a Handler served over HTTP on 127.0.0.1.
type Server struct {
	*Handler
	// URL is the API root including /v1, as AGENT_BASE_URL takes it.
	URL string
	srv *httptest.Server
}

// New starts a Server that answers from script, in order.
func New(script ...Reply) *Server { return serve(NewHandler(script...)) }

// NewFunc starts a Server that asks f for each reply; f may be called
// concurrently (for concurrent sessions and load tests).
func NewFunc(f func(Request) Reply) *Server { return serve(NewHandlerFunc(f)) }

func serve(h *Handler) *Server {
	srv := httptest.NewServer(h) // binds 127.0.0.1
	return &Server{Handler: h, URL: srv.URL + "/v1", srv: srv}
}

// Start starts a Server for a test: it is closed when the test ends, and
// the test fails if replies are left over or anything unexpected arrived.
func Start(t testing.TB, script ...Reply) *Server {
	t.Helper()
	s := New(script...)
	t.Cleanup(func() {
		s.Close()
		if err := s.Err(); err != nil {
			t.Errorf("%v", err)
		}
		if n := s.Remaining(); n > 0 {
			t.Errorf("fakemodel: %d scripted replies not used", n)
		}
	})
	return s
}

// Close shuts the server down, ending open connections.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}
