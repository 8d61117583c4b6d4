package tests

import (
	"bytes"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// A context-length error on a short history: with the server's numbers
// (vLLM) the retry asks for a max_tokens that fits; when the prompt alone is
// too large (llama.cpp) or the server gives no numbers (Ollama), the user is
// told what to change. The same request is never sent twice.
func TestCLIContextOverflowOnShortHistory(t *testing.T) {
	vllm := `{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (1000 in the messages, 32000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`
	m := fakemodel.Start(t, fakemodel.Reply{Status: 400, ErrorBody: vllm}, fakemodel.Reply{Content: "It fits now."})
	dir := t.TempDir()
	r := thinbot(t, dir, modelEnv(m), "ask", "hello")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "It fits now." {
		t.Fatalf("ask: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	reqs := m.Requests()
	if len(reqs) != 2 || reqs[0].MaxTokens != 0 || reqs[1].MaxTokens != 32768-1000-327 {
		t.Fatalf("%d requests, max_tokens %d then %d; want 0 then %d", len(reqs), reqs[0].MaxTokens, reqs[len(reqs)-1].MaxTokens, 32768-1000-327)
	}
	if bytes.Equal(reqs[0].Raw, reqs[1].Raw) {
		t.Error("the same request was sent twice")
	}
	verifyChain(t, dbOf(dir))

	for _, tt := range []struct{ name, body string }{
		{"llama.cpp", `{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}`},
		{"ollama", `{"error":"the input length exceeds the context length"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fakemodel.Start(t, fakemodel.Reply{Status: 400, ErrorBody: tt.body})
			dir := t.TempDir()
			r := thinbot(t, dir, modelEnv(m), "ask", "hello")
			if r.code == 0 {
				t.Fatalf("ask succeeded: %s", r.stdout)
			}
			if !strings.Contains(r.stderr, "does not fit the model's context window") || !strings.Contains(r.stderr, "context_window") {
				t.Errorf("stderr does not say what to change:\n%s", r.stderr)
			}
			if n := len(m.Requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			verifyChain(t, dbOf(dir))
		})
	}
}
