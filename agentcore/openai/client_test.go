package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// sleeps records the waits a Client asked for instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newClient(t *testing.T, url string, mod func(*Config)) (*Client, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	cfg := Config{BaseURL: url, Model: "test-model", Sleep: sl.sleep}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, sl
}

var runTool = agentcore.Tool{Name: "run", Description: "run a shell command",
	Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"reason":{"type":"string"}},"required":["command"]}`)}

func userReq(text string, tools ...agentcore.Tool) agentcore.Request {
	r := agentcore.Request{Messages: []agentcore.Message{
		{Role: agentcore.RoleSystem, Content: "You are thinbot."},
		{Role: agentcore.RoleUser, Content: text},
	}}
	if len(tools) > 0 {
		r.Tools = tools
	}
	return r
}

func TestCompleteText(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "whole"}[stream]
		t.Run(name, func(t *testing.T) {
			srv := fakemodel.Start(t, fakemodel.Reply{
				Content:   "Disk is 42% full.",
				Reasoning: "df shows /",
				Fragment:  3,
				Usage:     &agentcore.Usage{PromptTokens: 120, CompletionTokens: 8, CachedTokens: 100},
			})
			c, _ := newClient(t, srv.URL, func(c *Config) { c.NoStream = !stream; c.APIKey = "sk-test" })
			var shown strings.Builder
			req := userReq("how full is the disk?")
			req.OnText = func(s string) { shown.WriteString(s) }
			resp, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := agentcore.Response{Content: "Disk is 42% full.", Reasoning: "df shows /", FinishReason: "stop",
				Usage: agentcore.Usage{PromptTokens: 120, CompletionTokens: 8, CachedTokens: 100}, Model: "test-model"}
			if !equalResp(resp, want) {
				t.Errorf("Complete = %+v, want %+v", resp, want)
			}
			if shown.String() != want.Content {
				t.Errorf("OnText got %q, want %q", shown.String(), want.Content)
			}
			r := srv.Requests()[0]
			if r.Stream != stream {
				t.Errorf("request stream = %v, want %v", r.Stream, stream)
			}
			if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
				t.Errorf("Authorization = %q", got)
			}
			if r.Model != "test-model" || len(r.Tools) != 0 || len(r.ToolChoice) != 0 {
				t.Errorf("request model %q tools %d tool_choice %s", r.Model, len(r.Tools), r.ToolChoice)
			}
		})
	}
}

func equalResp(a, b agentcore.Response) bool {
	aj, _ := json.Marshal(a)
	bj, _ := json.Marshal(b)
	return string(aj) == string(bj)
}

func TestCompleteToolCalls(t *testing.T) {
	calls := []fakemodel.Call{
		{ID: "call_a", Name: "run", Args: `{"command":"df -h","reason":"disk"}`},
		{ID: "call_b", Name: "read_file", Args: `{"path":"/etc/hostname"}`},
		{ID: "call_c", Name: "run", Args: `{"command": "ls`}, // invalid JSON, kept as sent
		{ID: "call_d", Name: "run", Args: `{"command":"uptime"}`, ArgsObject: true},
	}
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "whole"}[stream]
		t.Run(name, func(t *testing.T) {
			srv := fakemodel.Start(t, fakemodel.Reply{ToolCalls: calls, Fragment: 2})
			c, _ := newClient(t, srv.URL, func(c *Config) { c.NoStream = !stream })
			var shown strings.Builder
			req := userReq("check", runTool)
			req.OnText = func(s string) { shown.WriteString(s) }
			resp, err := c.Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := []agentcore.ToolCall{
				{ID: "call_a", Name: "run", Arguments: `{"command":"df -h","reason":"disk"}`},
				{ID: "call_b", Name: "read_file", Arguments: `{"path":"/etc/hostname"}`},
				{ID: "call_c", Name: "run", Arguments: `{"command": "ls`},
				{ID: "call_d", Name: "run", Arguments: `{"command":"uptime"}`},
			}
			if len(resp.ToolCalls) != len(want) {
				t.Fatalf("ToolCalls = %+v, want %+v", resp.ToolCalls, want)
			}
			for i := range want {
				if resp.ToolCalls[i] != want[i] {
					t.Errorf("ToolCalls[%d] = %+v, want %+v", i, resp.ToolCalls[i], want[i])
				}
			}
			if resp.FinishReason != "tool_calls" || resp.Content != "" || shown.Len() != 0 {
				t.Errorf("finish %q content %q shown %q", resp.FinishReason, resp.Content, shown.String())
			}
			r := srv.Requests()[0]
			if len(r.Tools) != 1 || r.Tools[0].Type != "function" || r.Tools[0].Function.Name != "run" {
				t.Errorf("tools sent = %+v", r.Tools)
			}
			if string(r.ToolChoice) != `"auto"` {
				t.Errorf("tool_choice = %s", r.ToolChoice)
			}
		})
	}
}

func TestRequestEncoding(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Reply{Content: "ok"}, fakemodel.Reply{Content: "ok"})
	msgs := []agentcore.Message{
		{Role: agentcore.RoleSystem, Content: "sys"},
		{Role: agentcore.RoleUser, Content: "disk?"},
		{Role: agentcore.RoleAssistant, Reasoning: "think first", ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: "run", Arguments: `{"command":"df -h"}`}}},
		{Role: agentcore.RoleTool, ToolCallID: "c1", Name: "run", Content: "/dev/sda1 42%"},
		{Role: agentcore.RoleAssistant, Content: "42%", Reasoning: "easy"},
	}
	temp := 0.2
	for _, feed := range []bool{false, true} {
		c, _ := newClient(t, srv.URL, func(c *Config) { c.FeedReasoning = feed; c.Temperature = &temp; c.NoStream = true })
		if _, err := c.Complete(t.Context(), agentcore.Request{Messages: msgs, Tools: []agentcore.Tool{runTool, {Name: "noargs"}}, MaxTokens: 99}); err != nil {
			t.Fatalf("Complete: %v", err)
		}
	}
	reqs := srv.Requests()
	for i, feed := range []bool{false, true} {
		r := reqs[i]
		if len(r.Messages) != len(msgs) {
			t.Fatalf("sent %d messages, want %d", len(r.Messages), len(msgs))
		}
		a := r.Messages[2]
		if a.ContentNull || a.Content != "" {
			t.Errorf("tool-call turn content = %q (null %v), want empty string", a.Content, a.ContentNull)
		}
		if len(a.ToolCalls) != 1 || a.ToolCalls[0].ID != "c1" || string(a.ToolCalls[0].Function.Arguments) != `"{\"command\":\"df -h\"}"` {
			t.Errorf("tool call sent = %+v", a.ToolCalls)
		}
		gotReason := a.ReasoningContent != nil && *a.ReasoningContent == "think first"
		if gotReason != feed {
			t.Errorf("FeedReasoning %v: reasoning_content sent = %v", feed, a.ReasoningContent)
		}
		if r.Messages[4].ReasoningContent != nil {
			t.Errorf("reasoning of a plain answer was sent back")
		}
		if tm := r.Messages[3]; tm.Role != "tool" || tm.ToolCallID != "c1" || tm.Name != "run" {
			t.Errorf("tool message = %+v", tm)
		}
		if string(r.Tools[1].Function.Parameters) != `{"type":"object","properties":{}}` {
			t.Errorf("nil parameters sent as %s", r.Tools[1].Function.Parameters)
		}
		if r.MaxTokens != 99 || r.Temperature == nil || *r.Temperature != 0.2 {
			t.Errorf("max_tokens %d temperature %v", r.MaxTokens, r.Temperature)
		}
		if r.Header.Get("Authorization") != "" {
			t.Errorf("Authorization sent without a key")
		}
	}
}

func TestTextProtocolRequest(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Reply{Content: "Next:\n\n```bash\nuptime\n```\n<tool_call>kept</tool_call>"})
	c, _ := newClient(t, srv.URL, nil)
	msgs := []agentcore.Message{
		{Role: agentcore.RoleSystem, Content: "sys"},
		{Role: agentcore.RoleUser, Content: "disk?"},
		{Role: agentcore.RoleAssistant, Content: "Checking.", ToolCalls: []agentcore.ToolCall{
			{ID: "c1", Name: "run", Arguments: `{"command":"df -h"}`},
			{ID: "c2", Name: "read_file", Arguments: `{"path":"/x"}`}}},
		{Role: agentcore.RoleTool, ToolCallID: "c1", Name: "run", Content: "out1"},
		{Role: agentcore.RoleTool, ToolCallID: "c2", Name: "read_file", Content: "out2"},
		{Role: agentcore.RoleUser, Content: "and now?"},
	}
	resp, err := c.Complete(t.Context(), agentcore.Request{Messages: msgs})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if len(resp.ToolCalls) != 0 || !strings.Contains(resp.Content, "```bash\nuptime\n```") || !strings.Contains(resp.Content, "<tool_call>kept</tool_call>") {
		t.Errorf("text protocol answer changed: %+v", resp)
	}
	r := srv.Requests()[0]
	if len(r.Tools) != 0 || strings.Contains(string(r.Raw), `"tool_choice"`) || strings.Contains(string(r.Raw), `"tool_calls"`) || strings.Contains(string(r.Raw), `"tool"`) {
		t.Errorf("text protocol request mentions tools: %s", r.Raw)
	}
	want := []struct{ role, content string }{
		{"system", "sys"},
		{"user", "disk?"},
		{"assistant", "Checking.\n\n```bash\ndf -h\n```\n\n(called read_file {\"path\":\"/x\"})"},
		{"user", "out1\n\nout2\n\nand now?"},
	}
	if len(r.Messages) != len(want) {
		t.Fatalf("messages = %+v", r.Messages)
	}
	for i, w := range want {
		if r.Messages[i].Role != w.role || r.Messages[i].Content != w.content {
			t.Errorf("message %d = %s %q, want %s %q", i, r.Messages[i].Role, r.Messages[i].Content, w.role, w.content)
		}
	}
}

func TestRejectToolsThenText(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Reply{RejectTools: true, Content: "```bash\ndf -h\n```"})
	c, sl := newClient(t, srv.URL, nil)
	_, err := c.Complete(t.Context(), userReq("disk?", runTool))
	if !errors.Is(err, agentcore.ErrToolsUnsupported) {
		t.Fatalf("Complete with tools: err = %v, want ErrToolsUnsupported", err)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "enable-auto-tool-choice") {
		t.Errorf("APIError = %+v", apiErr)
	}
	if len(sl.all()) != 0 {
		t.Errorf("a tools rejection was retried")
	}
	resp, err := c.Complete(t.Context(), userReq("disk?"))
	if err != nil {
		t.Fatalf("Complete without tools: %v", err)
	}
	if resp.Content != "```bash\ndf -h\n```" {
		t.Errorf("Content = %q", resp.Content)
	}
}

func TestRetries(t *testing.T) {
	ok := fakemodel.Reply{Content: "fine"}
	tests := []struct {
		name   string
		script []fakemodel.Reply
		waits  int           // sleeps expected
		wait0  time.Duration // first sleep, if exact
		errIs  error
		status int // APIError status, if an error
	}{
		{"429 retry-after seconds", []fakemodel.Reply{{Status: 429, RetryAfter: "7"}, ok}, 1, 7 * time.Second, nil, 0},
		{"500 then ok", []fakemodel.Reply{{Status: 500}, ok}, 1, 0, nil, 0},
		{"502 503 504 then ok", []fakemodel.Reply{{Status: 502}, {Status: 503}, {Status: 504}, ok}, 3, 0, nil, 0},
		{"connection dropped", []fakemodel.Reply{{Drop: true}, ok}, 1, 0, nil, 0},
		{"cut before text", []fakemodel.Reply{{Content: "hello there", CutAfter: 20}, ok}, 1, 0, nil, 0},
		{"400 not retried", []fakemodel.Reply{{Status: 400}}, 0, 0, nil, 400},
		{"401 not retried", []fakemodel.Reply{{Status: 401}}, 0, 0, nil, 401},
		{"403 not retried", []fakemodel.Reply{{Status: 403}}, 0, 0, nil, 403},
		{"404 not retried", []fakemodel.Reply{{Status: 404, ErrorBody: `{"error":"model \"x\" not found, try pulling it first"}`}}, 0, 0, nil, 404},
		{"gives up after max", []fakemodel.Reply{{Status: 500}, {Status: 500}, {Status: 500}}, 2, 0, nil, 500},
		{"context length", []fakemodel.Reply{{Status: 400, ErrorBody: `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}`}}, 0, 0, agentcore.ErrContextLength, 400},
		{"stream error retryable", []fakemodel.Reply{{StreamError: `{"message":"overloaded","code":503}`}, ok}, 1, 0, nil, 0},
		{"stream error context", []fakemodel.Reply{{StreamError: "prompt is too long: 210000 tokens > 200000 maximum"}}, 0, 0, agentcore.ErrContextLength, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakemodel.Start(t, tt.script...)
			c, sl := newClient(t, srv.URL, func(c *Config) { c.MaxRetries = 3; c.Logger = nil })
			if tt.name == "gives up after max" {
				c.cfg.MaxRetries = 2
			}
			resp, err := c.Complete(t.Context(), userReq("hi"))
			waits := sl.all()
			if len(waits) != tt.waits {
				t.Errorf("slept %d times (%v), want %d", len(waits), waits, tt.waits)
			}
			if tt.wait0 != 0 && (len(waits) == 0 || waits[0] != tt.wait0) {
				t.Errorf("first wait %v, want %v", waits, tt.wait0)
			}
			for _, w := range waits {
				if w <= 0 || w > maxRetryAfter {
					t.Errorf("wait %v out of range", w)
				}
			}
			if tt.status == 0 {
				if err != nil || resp.Content != "fine" {
					t.Fatalf("Complete = %+v, %v; want fine", resp, err)
				}
				return
			}
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
				t.Fatalf("err = %v, want APIError %d", err, tt.status)
			}
			if tt.errIs != nil && !errors.Is(err, tt.errIs) {
				t.Errorf("err = %v, want %v", err, tt.errIs)
			}
		})
	}
}

func TestStreamCut(t *testing.T) {
	t.Run("after text is not retried", func(t *testing.T) {
		// Cut inside the third chunk: the first words were shown already.
		srv := fakemodel.Start(t, fakemodel.Reply{Content: "The disk is nearly full, says df.", Fragment: 8, CutAfter: 400})
		c, sl := newClient(t, srv.URL, nil)
		var shown strings.Builder
		req := userReq("hi")
		req.OnText = func(s string) { shown.WriteString(s) }
		_, err := c.Complete(t.Context(), req)
		if !errors.Is(err, ErrStreamCut) {
			t.Fatalf("err = %v, want ErrStreamCut", err)
		}
		if shown.Len() == 0 || len(sl.all()) != 0 {
			t.Errorf("shown %q, sleeps %v", shown.String(), sl.all())
		}
	})
	t.Run("no done but finished", func(t *testing.T) {
		srv := fakemodel.Start(t, fakemodel.Reply{Content: "done", NoDone: true})
		c, _ := newClient(t, srv.URL, nil)
		resp, err := c.Complete(t.Context(), userReq("hi"))
		if err != nil || resp.Content != "done" || resp.FinishReason != "stop" {
			t.Errorf("Complete = %+v, %v", resp, err)
		}
	})
	t.Run("whole answer cut", func(t *testing.T) {
		srv := fakemodel.Start(t, fakemodel.Reply{Content: "done", JSON: true, CutAfter: 30}, fakemodel.Reply{Content: "again", JSON: true})
		c, sl := newClient(t, srv.URL, nil)
		resp, err := c.Complete(t.Context(), userReq("hi"))
		if err != nil || resp.Content != "again" || len(sl.all()) != 1 {
			t.Errorf("Complete = %+v, %v; sleeps %v", resp, err, sl.all())
		}
	})
}

func TestLengthTruncatedToolCall(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: `{"command":"find / -na`}}, FinishReason: "length", Fragment: 5})
	c, _ := newClient(t, srv.URL, nil)
	resp, err := c.Complete(t.Context(), userReq("hi", runTool))
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.FinishReason != "length" || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Arguments != `{"command":"find / -na` || json.Valid([]byte(resp.ToolCalls[0].Arguments)) {
		t.Errorf("Complete = %+v", resp)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	t.Run("timeout not retried", func(t *testing.T) {
		srv := fakemodel.Start(t, fakemodel.Reply{Delay: time.Minute})
		c, sl := newClient(t, srv.URL, func(c *Config) { c.Timeout = 50 * time.Millisecond })
		_, err := c.Complete(t.Context(), userReq("hi"))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no complete answer within 50ms") {
			t.Errorf("err = %v, want a timeout", err)
		}
		if len(sl.all()) != 0 {
			t.Errorf("timed-out call was retried")
		}
	})
	t.Run("cancel mid-stream", func(t *testing.T) {
		// The second reply would be the retry; cancellation must stop before it.
		srv := fakemodel.New(fakemodel.Reply{Content: "first words and then a long wait", Fragment: 6})
		defer srv.Close()
		c, sl := newClient(t, srv.URL, nil)
		ctx, cancel := context.WithCancel(t.Context())
		req := userReq("hi")
		req.OnText = func(string) { cancel() }
		_, err := c.Complete(ctx, req)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if len(sl.all()) != 0 {
			t.Errorf("cancelled call was retried")
		}
	})
	t.Run("cancel during backoff", func(t *testing.T) {
		srv := fakemodel.Start(t, fakemodel.Reply{Status: 503})
		ctx, cancel := context.WithCancel(t.Context())
		c, _ := newClient(t, srv.URL, func(c *Config) {
			c.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
		})
		_, err := c.Complete(ctx, userReq("hi"))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestRealSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := sleepCtx(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleepCtx = %v", err)
	}
	if err := sleepCtx(t.Context(), time.Nanosecond); err != nil {
		t.Errorf("sleepCtx = %v", err)
	}
}

func TestPing(t *testing.T) {
	srv := fakemodel.New()
	defer srv.Close()
	c, _ := newClient(t, srv.URL, nil)
	if err := c.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	bad, _ := newClient(t, srv.URL+"/nope", nil)
	var apiErr *APIError
	if err := bad.Ping(t.Context()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("Ping of a wrong path = %v, want HTTP 404", err)
	}
	if srv.Err() == nil {
		t.Errorf("fake did not record the unexpected route")
	}
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		base, wantChat string
		ok             bool
	}{
		{"http://10.0.0.8:8000/v1", "http://10.0.0.8:8000/v1/chat/completions", true},
		{"http://10.0.0.8:8000/v1/", "http://10.0.0.8:8000/v1/chat/completions", true},
		{"http://10.0.0.8:8000", "http://10.0.0.8:8000/v1/chat/completions", true},
		{"http://10.0.0.8:8000/", "http://10.0.0.8:8000/v1/chat/completions", true},
		{"https://api.example.com/openai/v1", "https://api.example.com/openai/v1/chat/completions", true},
		{"https://proxy.example.com/llm", "https://proxy.example.com/llm/chat/completions", true},
		{"", "", false},
		{"localhost:8000", "", false},
		{"ftp://x/v1", "", false},
	}
	for _, tt := range tests {
		c, err := New(Config{BaseURL: tt.base, Model: "m"})
		if (err == nil) != tt.ok {
			t.Errorf("New(%q) err = %v, want ok %v", tt.base, err, tt.ok)
			continue
		}
		if err == nil && c.chatURL != tt.wantChat {
			t.Errorf("New(%q) chat URL = %q, want %q", tt.base, c.chatURL, tt.wantChat)
		}
	}
	if _, err := New(Config{BaseURL: "http://x/v1"}); err == nil {
		t.Errorf("New without a model succeeded")
	}
	c, err := New(Config{BaseURL: "http://h/v1", Model: "qwen"})
	if err != nil || c.cfg.Timeout != 10*time.Minute || c.cfg.MaxRetries != 4 {
		t.Errorf("defaults: %+v, %v", c.cfg, err)
	}
	c, _ = New(Config{BaseURL: "http://h", Model: "m", MaxRetries: -1})
	if c.cfg.MaxRetries != 0 {
		t.Errorf("MaxRetries -1 gave %d", c.cfg.MaxRetries)
	}
}

func TestConcurrentCalls(t *testing.T) {
	srv := fakemodel.NewFunc(func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Content: "echo " + r.Messages[len(r.Messages)-1].Content, Fragment: 4}
	})
	defer srv.Close()
	c, _ := newClient(t, srv.URL, nil)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			text := strings.Repeat("x", i+1)
			resp, err := c.Complete(t.Context(), userReq(text))
			if err == nil && resp.Content != "echo "+text {
				err = errors.New("wrong answer " + resp.Content)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := len(srv.Requests()); got != n {
		t.Errorf("server saw %d requests, want %d", got, n)
	}
	if err := srv.Err(); err != nil {
		t.Error(err)
	}
}
