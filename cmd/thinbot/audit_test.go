package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/thinbot/thinbot/store"
)

func auditEnv() (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}, &out, &errb
}

// newAuditStore makes a closed store with n events over sessions s0 and s1.
func newAuditStore(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".thinbot", "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := db.Append(t.Context(), store.Event{Session: fmt.Sprintf("s%d", i%2), Type: "user_message",
			Actor: "user:alice", Payload: json.RawMessage(fmt.Sprintf(`{"text":"m%d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func exitCode(err error) int {
	var ec exitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return ec.ExitCode()
	}
	return 1
}

func TestAuditVerify(t *testing.T) {
	path := newAuditStore(t, 10)
	jsonl := filepath.Join(filepath.Dir(path), "audit.jsonl")
	good, _ := os.ReadFile(jsonl)
	tests := []struct {
		name   string
		args   []string
		damage []byte // written to audit.jsonl first, if set
		code   int
		want   []string
	}{
		{"store ok", []string{"--db", path}, nil, 0, []string{"store  " + path + ": ok, 10 events, 2 sessions", "identical to the store"}},
		{"jsonl ok", []string{"--jsonl", jsonl}, nil, 0, []string{": ok, 10 events, last seq 10"}},
		{"jsonl tampered", []string{"--jsonl", jsonl}, bytes.Replace(good, []byte("m3"), []byte("m4"), 1), 2, []string{"BROKEN at seq 4"}},
		{"store with truncated export", []string{"--db", path}, good[:bytes.Index(good, []byte(`{"seq":8,`))], 2,
			[]string{"store  " + path + ": ok", "BROKEN at seq 8", "3 more events"}},
		{"missing store", []string{"--db", filepath.Join(t.TempDir(), "none.db")}, nil, 1, nil},
		{"missing jsonl", []string{"--jsonl", filepath.Join(t.TempDir(), "none.jsonl")}, nil, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := good
			if tt.damage != nil {
				data = tt.damage
			}
			if err := os.WriteFile(jsonl, data, 0o600); err != nil {
				t.Fatal(err)
			}
			e, out, _ := auditEnv()
			err := run(t.Context(), e, append([]string{"audit", "verify"}, tt.args...))
			if code := exitCode(err); code != tt.code {
				t.Errorf("exit code %d (%v), want %d; output:\n%s", code, err, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestAuditVerifyLocked(t *testing.T) {
	path := newAuditStore(t, 2)
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, _, _ := auditEnv()
	err = run(t.Context(), e, []string{"audit", "verify", "--db", path})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "--jsonl") {
		t.Errorf("verify of a held store = %v; want ErrLocked and a hint", err)
	}
}

// TestAuditVerifyConfig: --config finds the daemon's store in its
// state_dir (the rest of the config need not be valid for an auditor);
// while the daemon holds the store, verify checks its export instead.
func TestAuditVerifyConfig(t *testing.T) {
	path := newAuditStore(t, 10)
	cfg := filepath.Join(t.TempDir(), "thinbot.yaml")
	conf := "platform: mattermost\nmattermost: {url: http://127.0.0.1:1, token_file: /nonexistent/token}\nstate_dir: " + filepath.Dir(path) + "\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, _ := auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--config", cfg}); err != nil {
		t.Fatalf("verify --config: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "store  "+path+": ok, 10 events") || !strings.Contains(out.String(), "identical to the store") {
		t.Errorf("verify --config of a stopped daemon's store:\n%s", out)
	}

	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "export", "--config", cfg}); err != nil || strings.Count(out.String(), "\n") != 10 {
		t.Errorf("export --config: %v, %d lines", err, strings.Count(out.String(), "\n"))
	}

	db, err := store.Open(path, nil) // the running daemon
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--config", cfg}); err != nil {
		t.Fatalf("verify --config of a running daemon: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "held by the running thinbot; verifying its export instead") ||
		!strings.Contains(out.String(), "export "+filepath.Join(filepath.Dir(path), "audit.jsonl")+": ok, 10 events") {
		t.Errorf("verify --config of a running daemon:\n%s", out)
	}

	e, _, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--config", cfg, "--db", path}); !errors.Is(err, errUsage) {
		t.Errorf("--config with --db: %v, want a usage error", err)
	}
	e, _, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--config", filepath.Join(t.TempDir(), "none.yaml")}); err == nil {
		t.Error("--config of a missing file: no error")
	}
}

func TestAuditExportRebuildSessions(t *testing.T) {
	path := newAuditStore(t, 6)
	jsonl := filepath.Join(filepath.Dir(path), "audit.jsonl")
	good, _ := os.ReadFile(jsonl)

	e, out, _ := auditEnv()
	if err := run(t.Context(), e, []string{"audit", "export", "--db", path}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), good) {
		t.Errorf("export differs from audit.jsonl:\n%s", out)
	}
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "export", "--db", path, "--session", "s1", "--since", "3"}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 || strings.Contains(out.String(), `"session":"s0"`) {
		t.Errorf("export --session s1 --since 3 = %d lines:\n%s", n, out)
	}

	if err := os.WriteFile(jsonl, good[:len(good)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "rebuild", "--db", path}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(jsonl); !bytes.Equal(got, good) || !strings.Contains(out.String(), "6 events") {
		t.Errorf("rebuild: %s", out)
	}

	// A restore: the journal alone in an empty directory becomes a store.
	restored := filepath.Join(t.TempDir(), "events.db")
	if err := os.WriteFile(filepath.Join(filepath.Dir(restored), "audit.jsonl"), good, 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "rebuild", "--db", restored}); err != nil || !strings.Contains(out.String(), "6 events") {
		t.Fatalf("rebuild from the journal alone: %v: %s", err, out)
	}
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--db", restored}); err != nil || !strings.Contains(out.String(), "ok, 6 events") {
		t.Errorf("verify of the restored store: %v: %s", err, out)
	}

	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"sessions", "list", "--db", path}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SESSION") || !strings.HasPrefix(lines[1], "s0 ") || !strings.Contains(lines[2], " 3 ") {
		t.Errorf("sessions list:\n%s", out)
	}
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"sessions", "clear", "--db", path, "--session", "s0"}); err != nil || !strings.Contains(out.String(), "s0 cleared") {
		t.Errorf("sessions clear = %v, %s", err, out)
	}
	for _, args := range [][]string{{"audit"}, {"audit", "nope"}, {"audit", "verify", "extra"}, {"sessions"}, {"sessions", "list", "x"}} {
		e, _, _ = auditEnv()
		if err := run(t.Context(), e, args); !errors.Is(err, errUsage) {
			t.Errorf("run %q = %v, want a usage error", args, err)
		}
	}
}

// lineWriter sends each write to a channel, so the test can wait for tail's
// output without sleeping.
type lineWriter struct {
	mu sync.Mutex
	ch chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ch <- string(p)
	return len(p), nil
}

func TestAuditTail(t *testing.T) {
	path := newAuditStore(t, 3)
	db, err := store.Open(path, nil) // the "daemon" holds the store while tail runs
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(t.Context())
	w := &lineWriter{ch: make(chan string, 100)}
	e, _, _ := auditEnv()
	e.stdout = w
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, e, []string{"audit", "tail", "--db", path, "--since", "2", "--session", "s0"})
	}()

	if got := <-w.ch; !strings.HasPrefix(got, "3 ") || !strings.Contains(got, "s0 b0 user_message user:alice") {
		t.Errorf("first tail line %q, want seq 3 of s0", got)
	}
	if _, err := db.Append(t.Context(),
		store.Event{Session: "s1", Type: "user_message"},
		store.Event{Session: "s0", Type: "tool_result", Payload: json.RawMessage(`{"exit":0}`)}); err != nil {
		t.Fatal(err)
	}
	if got := <-w.ch; !strings.HasPrefix(got, "5 ") || !strings.Contains(got, `tool_result  {"exit":0}`) {
		t.Errorf("followed line %q, want seq 5", got)
	}
	// A rebuild replaces the file; tail must not print old events again.
	if err := os.Rename(db.AuditPath(), db.AuditPath()+".old"); err != nil {
		t.Fatal(err)
	}
	if err := db.RebuildAudit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(t.Context(), store.Event{Session: "s0", Type: "agent_done"}); err != nil {
		t.Fatal(err)
	}
	if got := <-w.ch; !strings.HasPrefix(got, "6 ") {
		t.Errorf("line after rebuild %q, want seq 6", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("tail = %v", err)
	}
	select {
	case extra := <-w.ch:
		t.Errorf("unexpected tail output %q", extra)
	default:
	}
}

// TestAuditVerifyAfterACrash: after a process died between the journal and
// the store (the journal has an event the store has not indexed yet, which
// the next writable open replays), verify passes but says so: the export is
// not "identical to the store", and the warning is shown.
func TestAuditVerifyAfterACrash(t *testing.T) {
	path := newAuditStore(t, 10)
	indexed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(t.Context(), store.Event{Session: "s0", Type: "user_message"}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, indexed, 0o600); err != nil { // the store as it was before the 11th
		t.Fatal(err)
	}
	e, out, _ := auditEnv()
	err = run(t.Context(), e, []string{"audit", "verify", "--db", path})
	if code := exitCode(err); code != 0 {
		t.Errorf("exit code %d (%v), want 0; output:\n%s", code, err, out)
	}
	if !strings.Contains(out.String(), "WARNING: the journal has 1 events past the store's last") {
		t.Errorf("output lacks the warning about the unindexed event:\n%s", out)
	}
	if strings.Contains(out.String(), "identical to the store") {
		t.Errorf("output calls the export identical to the store:\n%s", out)
	}
}
