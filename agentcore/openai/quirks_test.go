package openai

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// rawServer answers every request with the given status, content type and
// byte-exact body.
func rawServer(t *testing.T, status int, header map[string]string, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var sse = map[string]string{"Content-Type": "text/event-stream"}
var jsonCT = map[string]string{"Content-Type": "application/json"}

func TestStreamQuirks(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		tools     bool
		want      agentcore.Response
		wantShown string
	}{
		{
			name: "keep-alives, blank lines, CRLF, no space after data:",
			body: ": keep-alive\r\n\r\n\r\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\r\n\r\n" +
				": ping\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}]}\n\n\n\n" +
				"event: message\nid: 3\nretry: 100\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:      agentcore.Response{Content: "Hello", FinishReason: "stop"},
			wantShown: "Hello",
		},
		{
			name: "data lines without blank separators",
			body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\ndata: [DONE]\n",
			want:      agentcore.Response{Content: "ab", FinishReason: "stop"},
			wantShown: "ab",
		},
		{
			name: "tool call deltas by index, id and name only in the first",
			body: chunkTC(`{"index":0,"id":"c1","type":"function","function":{"name":"run","arguments":""}}`) +
				chunkTC(`{"index":1,"id":"c2","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}`) +
				chunkTC(`{"index":0,"function":{"arguments":"{\"comm"}}`) +
				chunkTC(`{"index":0,"function":{"arguments":"and\":\"ls\"}"}}`) +
				chunkTC(`{"index":1,"function":{"arguments":"th\":\"/x\"}"}}`) +
				"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n" +
				"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,\"prompt_cache_hit_tokens\":8}}\n\ndata: [DONE]\n\n",
			tools: true,
			want: agentcore.Response{FinishReason: "tool_calls", Usage: agentcore.Usage{PromptTokens: 10, CompletionTokens: 5, CachedTokens: 8},
				ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: "run", Arguments: `{"command":"ls"}`}, {ID: "c2", Name: "read_file", Arguments: `{"path":"/x"}`}}},
		},
		{
			name: "every call at index 0 with its own id",
			body: chunkTC(`{"index":0,"id":"c1","function":{"name":"run","arguments":"{\"command\":\"a\"}"}}`) +
				chunkTC(`{"index":0,"id":"c2","function":{"name":"run","arguments":"{\"command\":\"b\"}"}}`) +
				"data: [DONE]\n\n",
			tools: true,
			want:  agentcore.Response{ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: "run", Arguments: `{"command":"a"}`}, {ID: "c2", Name: "run", Arguments: `{"command":"b"}`}}},
		},
		{
			name: "deltas without index, arguments as an object (Ollama)",
			body: chunkTC(`{"id":"c1","function":{"name":"run","arguments":{"command":"df -h"}}}`) +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":null},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
			tools: true,
			want:  agentcore.Response{FinishReason: "tool_calls", ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: "run", Arguments: `{"command":"df -h"}`}}},
		},
		{
			name: "think tags split across chunks are hidden",
			body: chunkC("<thi") + chunkC("nk>let me") + chunkC(" see</th") + chunkC("ink>\n\nThe ans") + chunkC("wer <") + chunkC("is> 4") +
				"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:      agentcore.Response{Content: "The answer <is> 4", Reasoning: "let me see", FinishReason: "stop"},
			wantShown: "The answer <is> 4",
		},
		{
			name: "reasoning_content and reasoning fields",
			body: "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"step 1. \",\"reasoning\":\"step 1. \"}}]}\n\n" +
				"data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"step 2.\"}}]}\n\n" + chunkC("ok") + "data: [DONE]\n\n",
			want:      agentcore.Response{Content: "ok", Reasoning: "step 1. step 2."},
			wantShown: "ok",
		},
		{
			name: "text-form tool calls are moved out and hidden",
			body: chunkC("Checking.\n<tool_") + chunkC(`call>{"name":"run","arguments":{"command":"uptime"}}</tool_call>`) +
				chunkC(`<tool_call>{"name": "read_file", "arguments": "{\"path\":\"/x\"}"}</tool_call>`) + "data: [DONE]\n\n",
			tools: true,
			want: agentcore.Response{Content: "Checking.", ToolCalls: []agentcore.ToolCall{
				{ID: textCallID(agentcore.ToolCall{Name: "run", Arguments: `{"command":"uptime"}`}, 0), Name: "run", Arguments: `{"command":"uptime"}`},
				{ID: textCallID(agentcore.ToolCall{Name: "read_file", Arguments: `{"path":"/x"}`}, 1), Name: "read_file", Arguments: `{"path":"/x"}`}}},
			wantShown: "Checking.\n",
		},
		{
			name:      "no [DONE] but a finish_reason",
			body:      chunkC("fine") + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
			want:      agentcore.Response{Content: "fine", FinishReason: "stop"},
			wantShown: "fine",
		},
		{
			name: "model name is recorded",
			body: "data: {\"model\":\"qwen3-32b\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]",
			want: agentcore.Response{Content: "x", Model: "qwen3-32b"}, wantShown: "x",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, 200, sse, tt.body)
			c, _ := newClient(t, srv.URL, nil)
			req := userReq("q")
			if tt.tools {
				req.Tools = []agentcore.Tool{runTool}
			}
			var shown strings.Builder
			req.OnText = func(s string) { shown.WriteString(s) }
			resp, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !equalResp(resp, tt.want) {
				t.Errorf("Complete =\n %+v\nwant\n %+v", resp, tt.want)
			}
			if shown.String() != tt.wantShown {
				t.Errorf("shown %q, want %q", shown.String(), tt.wantShown)
			}
		})
	}
}

func chunkC(s string) string {
	return `data: {"choices":[{"index":0,"delta":{"content":` + jsonString(s) + `}}]}` + "\n\n"
}

func chunkTC(tc string) string {
	return `data: {"choices":[{"index":0,"delta":{"tool_calls":[` + tc + `]}}]}` + "\n\n"
}

func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func TestWholeAnswerQuirks(t *testing.T) {
	tests := []struct {
		name string
		ct   map[string]string
		body string
		want agentcore.Response
	}{
		{
			name: "content null with tool calls, arguments as object",
			ct:   jsonCT,
			body: `{"model":"llama3.1","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run","arguments":{"command":"df -h"}}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}}`,
			want: agentcore.Response{Model: "llama3.1", FinishReason: "tool_calls", Usage: agentcore.Usage{PromptTokens: 3, CompletionTokens: 4, CachedTokens: 2},
				ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: "run", Arguments: `{"command":"df -h"}`}}},
		},
		{
			name: "empty string content with tool calls, no id",
			ct:   jsonCT,
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"type":"function","function":{"name":"run","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			want: agentcore.Response{FinishReason: "tool_calls",
				ToolCalls: []agentcore.ToolCall{{ID: textCallID(agentcore.ToolCall{Name: "run", Arguments: "{}"}, 0), Name: "run", Arguments: `{}`}}},
		},
		{
			name: "unclosed leading think and reasoning field",
			ct:   jsonCT,
			body: `{"choices":[{"index":0,"message":{"role":"assistant","reasoning":"r1","content":"okay so df...\n</think>\n\nAll good."},"finish_reason":"stop"}]}`,
			want: agentcore.Response{Content: "All good.", Reasoning: "r1\n\nokay so df...", FinishReason: "stop"},
		},
		{
			name: "content as parts",
			ct:   jsonCT,
			body: `{"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`,
			want: agentcore.Response{Content: "ab", FinishReason: "stop"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, 200, tt.ct, tt.body)
			c, _ := newClient(t, srv.URL, func(c *Config) { c.NoStream = true })
			req := userReq("q", runTool)
			resp, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if !equalResp(resp, tt.want) {
				t.Errorf("Complete =\n %+v\nwant\n %+v", resp, tt.want)
			}
		})
	}
	t.Run("stream without its content type", func(t *testing.T) {
		srv := rawServer(t, 200, map[string]string{"Content-Type": "text/plain"}, "\n"+chunkC("sse")+"data: [DONE]\n\n")
		c, _ := newClient(t, srv.URL, nil)
		resp, err := c.Complete(t.Context(), userReq("q"))
		if err != nil || resp.Content != "sse" {
			t.Errorf("Complete = %+v, %v", resp, err)
		}
	})
	t.Run("server ignores stream", func(t *testing.T) {
		srv := rawServer(t, 200, jsonCT, `{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`)
		c, _ := newClient(t, srv.URL, nil)
		var shown string
		req := userReq("q")
		req.OnText = func(s string) { shown += s }
		resp, err := c.Complete(t.Context(), req)
		if err != nil || resp.Content != "whole" || shown != "whole" {
			t.Errorf("Complete = %+v, %v; shown %q", resp, err, shown)
		}
	})
}

func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		tools     bool
		wantMsg   string // substring of err.Error()
		wantIs    error
		wantHTML  bool
		retryable bool
	}{
		{"html proxy page", 502, map[string]string{"Content-Type": "text/html"},
			"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>",
			false, "HTTP 502 from a proxy (HTML page: 502 Bad Gateway)", nil, true, true},
		{"html without content type", 504, nil, "<!DOCTYPE html>\n<html><body><h1>Gateway &amp; Timeout</h1></body></html>",
			false, "HTTP 504 from a proxy (HTML page: Gateway & Timeout)", nil, true, true},
		{"vllm tools", 400, jsonCT, `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`,
			true, `HTTP 400: "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set (type BadRequestError)`, agentcore.ErrToolsUnsupported, false, false},
		{"ollama tools", 400, jsonCT, `{"error":{"message":"registry.ollama.ai/library/gemma2:latest does not support tools","type":"api_error","param":null,"code":null}}`,
			true, "does not support tools", agentcore.ErrToolsUnsupported, false, false},
		{"llama.cpp tools", 500, jsonCT, `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`,
			true, "tools param requires --jinja flag", agentcore.ErrToolsUnsupported, false, false},
		{"tools word without tools sent", 400, jsonCT, `{"error":{"message":"tool_choice is invalid"}}`,
			false, "tool_choice is invalid", nil, false, false},
		{"openai context length", 400, jsonCT, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			true, "code context_length_exceeded", agentcore.ErrContextLength, false, false},
		{"llama.cpp context", 400, jsonCT, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`,
			false, "exceeds the available context size", agentcore.ErrContextLength, false, false},
		{"anthropic-style too long", 400, jsonCT, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201000 tokens > 200000 maximum"}}`,
			false, "prompt is too long", agentcore.ErrContextLength, false, false},
		{"fastapi detail", 422, jsonCT, `{"detail":"Too many tokens in the prompt"}`,
			false, "HTTP 422: Too many tokens in the prompt", agentcore.ErrContextLength, false, false},
		{"plain text body", 503, map[string]string{"Content-Type": "text/plain"}, "upstream connect error\n or disconnect",
			false, "HTTP 503: upstream connect error or disconnect", nil, false, true},
		{"empty body", 429, nil, "", false, "HTTP 429: Too Many Requests", nil, false, true},
		{"html inside a 200", 200, map[string]string{"Content-Type": "text/html"}, "<html><title>Login required</title></html>",
			false, "HTTP 200 from a proxy (HTML page: Login required)", nil, true, false},
		{"error object inside a 200", 200, jsonCT, `{"error":{"message":"rate limited","code":429}}`,
			false, "error in answer: rate limited (code 429)", nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, tt.status, tt.header, tt.body)
			c, sl := newClient(t, srv.URL, func(c *Config) { c.MaxRetries = 1; c.NoStream = true })
			req := userReq("q")
			if tt.tools {
				req.Tools = []agentcore.Tool{runTool}
			}
			_, err := c.Complete(t.Context(), req)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantMsg)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.wantIs)
			}
			if tt.wantIs == nil && (errors.Is(err, agentcore.ErrContextLength) || errors.Is(err, agentcore.ErrToolsUnsupported)) {
				t.Errorf("err = %v wrongly wraps a sentinel", err)
			}
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.HTML != tt.wantHTML {
				t.Errorf("APIError = %+v, want HTML %v", apiErr, tt.wantHTML)
			}
			if got := len(sl.all()) > 0; got != tt.retryable {
				t.Errorf("retried = %v, want %v", got, tt.retryable)
			}
		})
	}
}

func TestStreamErrors(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantMsg string
		cut     bool
	}{
		{"error object in stream", chunkC("par") + `data: {"error":{"message":"internal error","type":"InternalServerError","code":500}}` + "\n\n",
			"error in answer: internal error (type InternalServerError, code 500)", false},
		{"error event", "event: error\ndata: {\"message\":\"overloaded\",\"type\":\"overloaded_error\"}\n\n", "error in answer: overloaded", false},
		{"ends without finish or done", chunkC("par"), "stream ended before the answer was complete", true},
		{"ends mid-event", chunkC("par") + `data: {"choices":[{"ind`, "stream ended before the answer was complete", true},
		{"empty stream", "", "stream ended before the answer was complete", true},
		{"garbage chunk", "data: {not json}\n\n", "decode stream chunk", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, 200, sse, tt.body)
			c, _ := newClient(t, srv.URL, func(c *Config) { c.MaxRetries = -1 })
			_, err := c.Complete(t.Context(), userReq("q"))
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %v, want %q", err, tt.wantMsg)
			}
			if errors.Is(err, ErrStreamCut) != tt.cut {
				t.Errorf("errors.Is(err, ErrStreamCut) = %v, want %v", !tt.cut, tt.cut)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		h    map[string]string
		want time.Duration
	}{
		{map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond},
		{map[string]string{"Retry-After": now.Add(20 * time.Second).Format(http.TimeFormat)}, 20 * time.Second},
		{map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0},
		{map[string]string{"Retry-After": "86400"}, maxRetryAfter},
		{map[string]string{"Retry-After": "soon"}, 0},
		{map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{nil, 0},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.h {
			h.Set(k, v)
		}
		if got := retryAfter(h, now); got != tt.want {
			t.Errorf("retryAfter(%v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	c, _ := newClient(t, "http://127.0.0.1:1/v1", nil)
	conn := &connError{errors.New("refused")}
	for attempt := range 12 {
		d, ok := c.retryWait(conn, false, attempt)
		base := min(backoffBase<<attempt, backoffCap)
		if !ok || d < base/2 || d > base {
			t.Errorf("attempt %d: wait %v, want in [%v, %v]", attempt, d, base/2, base)
		}
	}
}

func TestConnectionRefusedIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	c, sl := newClient(t, url, func(c *Config) { c.MaxRetries = 2 })
	_, err := c.Complete(t.Context(), userReq("q"))
	if err == nil || !strings.Contains(err.Error(), "(3 attempts)") || len(sl.all()) != 2 {
		t.Errorf("err = %v, sleeps %v", err, sl.all())
	}
}
