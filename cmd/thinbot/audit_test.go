package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
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

func exitCode(err error) int { return exitCodeOf(err) }

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
	e, out, _ := auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--db", path}); err != nil || !strings.Contains(out.String(), "verifying its export instead") {
		t.Errorf("verify --db of a held store = %v; want its journal verified:\n%s", err, out)
	}
	// --from needs the store; the hint names no flag verify lacks.
	e, _, _ = auditEnv()
	err = run(t.Context(), e, []string{"audit", "verify", "--db", path, "--from", "1:" + strings.Repeat("0", 64)})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "stop the daemon") || strings.Contains(err.Error(), "--jsonl") {
		t.Errorf("verify --from of a held store = %v; want ErrLocked and a hint", err)
	}
}

// TestAuditLiveDaemon: export, sessions list and timeline work on a store
// a running daemon holds, from its journal: the same bytes the store
// exports, only complete lines (not one the daemon is writing), nothing
// from a journal that does not verify or is not the daemon's, and an
// unknown session is an error.
func TestAuditLiveDaemon(t *testing.T) {
	path := newAuditStore(t, 6)
	dir := filepath.Dir(path)
	journal := filepath.Join(dir, "audit.jsonl")
	cfg := filepath.Join(t.TempDir(), "thinbot.yaml")
	if err := os.WriteFile(cfg, []byte("state_dir: "+dir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(path, nil) // the running daemon
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 3 {
		if _, err := db.Append(t.Context(), store.Event{Session: "s2", Type: "user_message", Actor: "user:bob",
			Payload: json.RawMessage(fmt.Sprintf(`{"text":"live%d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	var want bytes.Buffer
	if err := db.Export(t.Context(), &want, "", 0); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(journal)

	for _, args := range [][]string{{"--db", path}, {"--config", cfg}} {
		e, out, errb := auditEnv()
		if err := run(t.Context(), e, append([]string{"audit", "export"}, args...)); err != nil {
			t.Fatalf("export %v of a running daemon: %v\n%s", args, err, errb)
		}
		if !bytes.Equal(out.Bytes(), want.Bytes()) || !strings.Contains(errb.String(), "held by the running thinbot: reading its journal") {
			t.Errorf("export %v of a running daemon differs from the store's export:\n%s\nstderr: %s", args, out, errb)
		}
		e, out, errb = auditEnv()
		if err := run(t.Context(), e, append([]string{"sessions", "list"}, args...)); err != nil {
			t.Fatalf("sessions list %v of a running daemon: %v\n%s", args, err, errb)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[3], "s2 ") || !strings.Contains(lines[3], " 3 ") {
			t.Errorf("sessions list %v of a running daemon:\n%s", args, out)
		}
	}
	e, out, _ := auditEnv()
	if err := run(t.Context(), e, []string{"audit", "export", "--db", path, "--session", "s2", "--since", "8"}); err != nil || strings.Count(out.String(), "\n") != 2 || !strings.Contains(out.String(), "live2") {
		t.Errorf("export --session s2 --since 8 = %v:\n%s", err, out)
	}
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "timeline", "s2", "--db", path}); err != nil || !strings.Contains(out.String(), "**Chain verified:** 9 events") || !strings.Contains(out.String(), "live1") {
		t.Errorf("timeline of a running daemon = %v:\n%s", err, out)
	}
	for _, args := range [][]string{{"audit", "export", "--session", "nope"}, {"audit", "timeline", "nope"}} {
		e, out, _ = auditEnv()
		if err := run(t.Context(), e, append(args, "--db", path)); err == nil || !strings.Contains(err.Error(), `no session "nope"`) || out.Len() > 0 && args[1] == "export" {
			t.Errorf("%v of a running daemon = %v, want an unknown session error:\n%s", args, err, out)
		}
	}

	// A line the daemon is writing is not read half.
	if err := os.WriteFile(journal, append(bytes.Clone(good), `{"seq":10,"time":"20`...), 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, errb := auditEnv()
	if err := run(t.Context(), e, []string{"audit", "export", "--db", path}); err != nil || !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Errorf("export beside a line being written = %v:\n%s\n%s", err, out, errb)
	}

	// A tampered line: nothing is exported, and the exit code says broken.
	bad := bytes.Replace(good, []byte(`"live1"`), []byte(`"LIVE1"`), 1)
	if err := os.WriteFile(journal, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"audit", "export"}, {"sessions", "list"}, {"audit", "timeline", "s2"}} {
		e, out, _ = auditEnv()
		err := run(t.Context(), e, append(args, "--db", path))
		if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), "BROKEN at seq 8") || out.Len() > 0 {
			t.Errorf("%v of a tampered journal: exit %d (%v), want 2 and nothing shown:\n%s", args, code, err, out)
		}
	}
	if err := os.WriteFile(journal, good, 0o600); err != nil {
		t.Fatal(err)
	}

	// Rotated away: the file at the path is not the daemon's journal.
	if err := os.Rename(journal, journal+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, good[:bytes.IndexByte(good, '\n')+1], 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, _ = auditEnv()
	err = run(t.Context(), e, []string{"audit", "export", "--db", path})
	if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), "NOT the running thinbot's journal") || out.Len() > 0 {
		t.Errorf("export beside a rotated journal: exit %d (%v), want 2:\n%s", code, err, out)
	}
	if err := os.Rename(journal+".1", journal); err != nil {
		t.Fatal(err)
	}
}

// TestAuditUsage: audit -h prints the commands and succeeds; an unknown
// audit command is a usage error that lists them.
func TestAuditUsage(t *testing.T) {
	for _, h := range []string{"-h", "--help", "-help"} {
		e, out, errb := auditEnv()
		if err := run(t.Context(), e, []string{"audit", h}); err != nil {
			t.Errorf("audit %s = %v", h, err)
		}
		if s := out.String(); !strings.Contains(s, "export    the chain as JSONL") || strings.Contains(s, "unknown") {
			t.Errorf("audit %s printed:\n%s%s", h, s, errb)
		}
	}
	e, out, _ := auditEnv()
	if err := run(t.Context(), e, []string{"sessions", "-h"}); err != nil || !strings.Contains(out.String(), "sessions list|clear [--db PATH | --config FILE]") {
		t.Errorf("sessions -h = %v:\n%s", err, out)
	}
	e, _, _ = auditEnv()
	err := run(t.Context(), e, []string{"audit", "frob"})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `unknown audit command "frob"`) || !strings.Contains(err.Error(), "timeline  a session") {
		t.Errorf("audit frob = %v", err)
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

	// Rotated under the running daemon (logrotate's rename and create):
	// the new, empty file verifies alone, but it is not the journal.
	journal := filepath.Join(filepath.Dir(path), "audit.jsonl")
	if err := os.Rename(journal, journal+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, _ = auditEnv()
	err = run(t.Context(), e, []string{"audit", "verify", "--config", cfg})
	if code := exitCode(err); code != 2 || !strings.Contains(out.String(), "NOT the running thinbot's journal") || !strings.Contains(out.String(), journal+".1") {
		t.Errorf("verify --config beside a rotated journal: exit %d (%v), want 2 and where the daemon writes:\n%s", code, err, out)
	}
	if err := os.Rename(journal+".1", journal); err != nil {
		t.Fatal(err)
	}
	e, out, _ = auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--config", cfg}); err != nil {
		t.Errorf("verify --config with the journal back: %v\n%s", err, out)
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
	// It starts as fast as any: its state index is built (issue #35).
	db, err := store.Open(restored, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !agentcore.IndexIsCurrent(db) {
		t.Error("the store rebuilt from its journal has no current state index: the next start builds it from the chain")
	}
	db.Close()

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
	e, _, _ = auditEnv()
	if err := run(t.Context(), e, []string{"sessions", "clear", "--db", path, "--session", "nope"}); err == nil || !strings.Contains(err.Error(), `no session "nope"`) {
		t.Errorf("sessions clear of an unknown session = %v", err)
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

// TestAuditVerifyFrom: verify --from SEQ:HASH checks the events after an
// anchor that an earlier verify printed.
func TestAuditVerifyFrom(t *testing.T) {
	path := newAuditStore(t, 10)
	e, out, _ := auditEnv()
	if err := run(t.Context(), e, []string{"audit", "verify", "--db", path}); err != nil {
		t.Fatal(err, out)
	}
	head := regexp.MustCompile(`head seq (\d+) hash ([0-9a-f]{64})`).FindStringSubmatch(out.String())
	if head == nil {
		t.Fatalf("no head in %s", out)
	}
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := db.Append(t.Context(), store.Event{Session: "s2", Type: "note", Actor: "test", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	for _, tt := range []struct {
		anchor string
		code   int
		want   string
	}{
		{head[1] + ":" + head[2], 0, "ok from the anchor seq 10: 5 events after it, head seq 15"},
		{head[1] + ":" + strings.Repeat("0", 64), 2, "BROKEN at seq 11"},
		{"10", 1, ""},
		{"0:" + head[2], 1, ""},
		{head[1] + ":" + strings.ToUpper(head[2]), 1, ""},
	} {
		e, out, errb := auditEnv()
		err := run(t.Context(), e, []string{"audit", "verify", "--db", path, "--from", tt.anchor})
		if code := exitCode(err); code != tt.code || !strings.Contains(out.String(), tt.want) {
			t.Errorf("--from %s: exit %d (%v), want %d with %q; output:\n%s%s", tt.anchor, code, err, tt.code, tt.want, out, errb)
		}
	}
}

func FuzzParseAnchor(f *testing.F) {
	f.Add("10:" + strings.Repeat("ab", 32))
	f.Add("0:")
	f.Add(":")
	f.Fuzz(func(t *testing.T, s string) {
		seq, hash, err := parseAnchor(s)
		if err != nil {
			return
		}
		if seq == 0 || len(hash) != 64 || fmt.Sprintf("%d:%s", seq, hash) != strings.TrimLeft(s, "+0") && !strings.HasSuffix(s, ":"+hash) {
			t.Errorf("parseAnchor(%q) = %d, %q", s, seq, hash)
		}
	})
}
