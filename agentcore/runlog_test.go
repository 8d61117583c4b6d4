package agentcore

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer for a logger and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// runLines are the "run finished" lines of a JSON log.
func (l *lockedBuffer) runLines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "run finished" {
			out = append(out, m)
		}
	}
	return out
}

// TestRunFinishedLogLine: every finished run, a model's or a skill
// command's, writes one log line with the session, the last seq, the
// outcome, steps, model calls, tokens and duration: what an operator
// greps for before opening the chain.
func TestRunFinishedLogLine(t *testing.T) {
	var log lockedBuffer
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { // one second per reading
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	f := newFixture(t, Config{Logger: slog.New(slog.NewJSONHandler(&log, nil)), Now: clock},
		func(r Request) (Response, error) {
			resp, err := runCmd("echo hi")(r)
			resp.Usage = Usage{PromptTokens: 50, CompletionTokens: 10}
			return resp, err
		},
		func(Request) (Response, error) {
			return Response{Content: "done", FinishReason: "stop", Usage: Usage{PromptTokens: 70, CompletionTokens: 3}}, nil
		})
	res, err := f.a.Run(t.Context(), Turn{Session: "s1", Actor: "user:alice", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	lines := log.runLines(t)
	if len(lines) != 1 {
		t.Fatalf("%d run finished lines, want 1: %v", len(lines), lines)
	}
	l := lines[0]
	want := map[string]any{"conv": "s1", "seq": float64(res.LastSeq), "status": StatusAnswered, "steps": float64(1),
		"model_calls": float64(2), "prompt_tokens": float64(120), "completion_tokens": float64(13)}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("run finished %s = %v, want %v (line %v)", k, l[k], v, l)
		}
	}
	if d, ok := l["duration_ms"].(float64); !ok || d < 1000 {
		t.Errorf("run finished duration_ms = %v, want the run's time on the clock", l["duration_ms"])
	}

	if _, err := f.a.RunCommand(t.Context(), Turn{Session: "s2", Actor: "user:alice", Text: "!disk"}, "echo disk", "skill"); err != nil {
		t.Fatal(err)
	}
	lines = log.runLines(t)
	if len(lines) != 2 || lines[1]["conv"] != "s2" || lines[1]["steps"] != float64(1) || lines[1]["status"] != StatusAnswered {
		t.Errorf("a skill command's run finished line: %v", lines)
	}
}
