package openai

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

// Context-length errors carry the server's numbers, read from each server's
// real error body (wordings collected from vLLM, llama.cpp, SGLang, Ollama,
// OpenAI and DeepSeek answers).
func TestContextLengthNumbers(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   agentcore.ContextLengthError
	}{
		{"vllm old", 400, `{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (1000 in the messages, 32000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
			agentcore.ContextLengthError{Window: 32768, Prompt: 1000, Completion: 32000}},
		{"vllm max_tokens too large", 400, `{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778). None","type":"BadRequestError","param":null,"code":400}}`,
			agentcore.ContextLengthError{Window: 4096, Prompt: 2778, Completion: 8000}},
		{"vllm at least", 400, `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 65536 output tokens and your prompt contains at least 65537 input tokens, for a total of at least 131073 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=65537)","type":"BadRequestError","param":"input_tokens","code":400}}`,
			agentcore.ContextLengthError{Window: 131072, Prompt: 65537, Completion: 65536}},
		{"vllm newest", 400, `{"error":{"message":"You passed 12289 input tokens and requested 4096 output tokens. However, the model's context length is only 16384 tokens, resulting in a maximum input length of 12288 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=12289)","type":"BadRequestError","param":"input_tokens","code":400}}`,
			agentcore.ContextLengthError{Window: 16384, Prompt: 12289, Completion: 4096}},
		{"openai", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130021 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			agentcore.ContextLengthError{Window: 128000, Prompt: 130021}},
		{"deepseek", 400, `{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70123 tokens (62123 in the messages, 8000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			agentcore.ContextLengthError{Window: 65536, Prompt: 62123, Completion: 8000}},
		{"llama.cpp old", 400, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`,
			agentcore.ContextLengthError{Window: 8192, Prompt: 9000}},
		{"llama.cpp new", 400, `{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}`,
			agentcore.ContextLengthError{Window: 4096, Prompt: 4476}},
		{"sglang", 400, `{"object":"error","message":"The input (4097 tokens) is longer than the model's context length (4096 tokens).","type":"BadRequestError","param":null,"code":400}`,
			agentcore.ContextLengthError{Window: 4096, Prompt: 4097}},
		{"ollama", 400, `{"error":"the input length exceeds the context length"}`, agentcore.ContextLengthError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := rawServer(t, tt.status, jsonCT, tt.body)
			c, _ := newClient(t, srv.URL, func(c *Config) { c.MaxRetries = 1; c.NoStream = true })
			_, err := c.Complete(t.Context(), userReq("q"))
			if !errors.Is(err, agentcore.ErrContextLength) {
				t.Fatalf("err = %v, want ErrContextLength", err)
			}
			var cle *agentcore.ContextLengthError
			if !errors.As(err, &cle) {
				t.Fatalf("err = %v carries no numbers", err)
			}
			if *cle != tt.want {
				t.Errorf("numbers = %+v, want %+v", *cle, tt.want)
			}
		})
	}
}

// In the text protocol (no tools sent) a text-form tool call stays in
// Content for the kernel to run, but is never shown as streamed text.
func TestTextProtocolToolCallsAreNotShown(t *testing.T) {
	call := `<tool_call>{"name":"run","arguments":{"command":"df -h"}}</tool_call>`
	for _, stream := range []bool{true, false} {
		body := `{"choices":[{"index":0,"message":{"role":"assistant","content":"Checking. ` + strings.ReplaceAll(call, `"`, `\"`) + `"},"finish_reason":"stop"}]}`
		ct := jsonCT
		if stream {
			body = "data: " + `{"choices":[{"index":0,"delta":{"content":"Checking. ` + strings.ReplaceAll(call, `"`, `\"`) + `"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
			ct = sse
		}
		srv := rawServer(t, 200, ct, body)
		c, _ := newClient(t, srv.URL, func(c *Config) { c.NoStream = !stream })
		var shown strings.Builder
		req := userReq("q")
		req.OnText = func(s string) { shown.WriteString(s) }
		resp, err := c.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.Content, call) || len(resp.ToolCalls) != 0 {
			t.Errorf("stream %v: Content %q, ToolCalls %v; want the call kept as text", stream, resp.Content, resp.ToolCalls)
		}
		if got := strings.TrimSpace(shown.String()); got != "Checking." {
			t.Errorf("stream %v: shown %q", stream, got)
		}
	}
}

// FuzzParseAPIError: any error answer (status, body, Retry-After) gives an
// APIError without panicking whose text starts with its status, never holds
// a request or answer header's secret, and keeps the message short; a
// context-length or tools-unsupported meaning comes only from the statuses
// servers use for it (tools only when tools were sent), is never retried,
// and carries no negative numbers; Retry-After stays within its cap.
func FuzzParseAPIError(f *testing.F) {
	for _, b := range []string{
		`{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}`,
		`{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (1000 in the messages, 32000 in the completion).","code":400}`,
		`{"error":"the input length exceeds the context length"}`,
		`{"detail":"Too many tokens"}`, `<html><title>x</title></html>`, ``,
		`{"error":{"message":"exceeds the available context size","n_ctx":-5,"n_prompt_tokens":-1}}`,
		`{"error":{"message":"tools param requires --jinja flag","type":"server_error"}}`,
		`{"error":{"message":"` + strings.Repeat("é", 400) + `"}}`,
		`<!DOCTYPE html><h1>502 Bad <b>Gateway</b></h1>`,
		`{"error":{"message":"rate limited","type":"rate_limit_error","code":"429"}}`,
		`{"detail":[{"loc":["body","tools"],"msg":"extra fields not permitted"}]}`,
	} {
		for _, status := range []int{400, 413, 422, 429, 500, 501, 502, 503} {
			f.Add(status, b, "", true)
		}
	}
	f.Add(429, `{}`, "7", false)
	f.Add(503, `{}`, "Wed, 21 Oct 2015 07:28:00 GMT", false)
	f.Add(503, `{}`, "99999999", false)
	f.Add(503, `{}`, "-3", false)
	const secret = "sk-fuzz-header-secret"
	f.Fuzz(func(t *testing.T, status int, body, retry string, hadTools bool) {
		h := http.Header{}
		h.Set("Retry-After", retry)
		h.Set("Set-Cookie", "session="+secret)
		h.Set("Authorization", "Bearer "+secret)
		e := parseAPIError(status, h, []byte(body), hadTools)
		msg := e.Error()
		if e.StatusCode != status || !strings.HasPrefix(msg, "HTTP "+strconv.Itoa(status)) {
			t.Fatalf("Error() = %q for status %d", msg, status)
		}
		if !strings.Contains(body, secret) && strings.Contains(msg, secret) {
			t.Fatalf("Error() %q echoes a header", msg)
		}
		if len(e.Message) > maxMessage+len("…") {
			t.Fatalf("message of %d bytes, limit %d", len(e.Message), maxMessage)
		}
		if e.RetryAfter < 0 || e.RetryAfter > maxRetryAfter {
			t.Fatalf("RetryAfter %v from %q", e.RetryAfter, retry)
		}
		var cle *agentcore.ContextLengthError
		if errors.As(e, &cle) && (cle.Window < 0 || cle.Prompt < 0 || cle.Completion < 0) {
			t.Fatalf("negative numbers %+v from %q", *cle, body)
		}
		overflow, tools := errors.Is(e, agentcore.ErrContextLength), errors.Is(e, agentcore.ErrToolsUnsupported)
		switch status {
		case 400, 413, 422, 500:
		default:
			if overflow {
				t.Fatalf("status %d read as a context overflow: %q", status, body)
			}
		}
		switch status {
		case 400, 422, 500, 501:
		default:
			if tools {
				t.Fatalf("status %d read as tools unsupported: %q", status, body)
			}
		}
		if tools && !hadTools {
			t.Fatalf("tools unsupported although none were sent: %q", body)
		}
		if (overflow || tools) && e.retryable() {
			t.Fatalf("%v is retried", e)
		}
	})
}
