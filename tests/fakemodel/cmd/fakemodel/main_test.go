package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// start runs the command with args until the test ends and returns its
// base URL.
func start(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address printed: %v", err)
	}
	go io.Copy(io.Discard, pr)
	f := strings.Fields(line)
	for _, w := range f {
		if strings.HasPrefix(w, "http://127.0.0.1:") {
			return w
		}
	}
	t.Fatalf("no URL in %q", line)
	return ""
}

func ask(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const withTools = `{"model":"m","messages":[{"role":"user","content":"disk?"}],"tools":[{"type":"function","function":{"name":"run","parameters":{}}}]}`
const noTools = `{"model":"m","messages":[{"role":"user","content":"disk?"}]}`

func TestDemo(t *testing.T) {
	url := start(t, "-demo", "-port", "0")
	code, body := ask(t, url, withTools)
	if code != 200 || !strings.Contains(body, "df -h") || !strings.Contains(body, "tool_calls") {
		t.Errorf("demo: %d %s", code, body)
	}
}

func TestScriptFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(`[{"content":"first","reject_tools":true},{"content":"second"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	url := start(t, "-script", path, "-port", "0", "-repeat")
	for i, want := range []string{"enable-auto-tool-choice", "first", "second", "first"} {
		body := noTools
		if i == 0 {
			body = withTools
		}
		if _, got := ask(t, url, body); !strings.Contains(got, want) {
			t.Errorf("request %d: %s, want %q", i, got, want)
		}
	}
}

func TestScriptExhausted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	os.WriteFile(path, []byte(`[{"content":"only"}]`), 0o600)
	url := start(t, "-script", path, "-port", "0", "-reject-tools")
	if code, _ := ask(t, url, withTools); code != 400 {
		t.Errorf("-reject-tools: %d", code)
	}
	ask(t, url, noTools)
	if code, body := ask(t, url, noTools); code != 500 || !strings.Contains(body, "script exhausted") {
		t.Errorf("exhausted: %d %s", code, body)
	}
}

func TestBadArgs(t *testing.T) {
	for _, args := range [][]string{{}, {"-demo", "-script", "x"}, {"-script", "/does/not/exist"}, {"-nope"}} {
		if err := run(t.Context(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
	path := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(path, []byte(`[]`), 0o600)
	if err := run(t.Context(), []string{"-script", path}, io.Discard, io.Discard); err == nil {
		t.Errorf("empty script accepted")
	}
}
