package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/bot/web"
	"github.com/thinbot/thinbot/store"
)

// TestRemovedWebUserIsLoggedOut: serve reloads web.tokens_file when it
// changes; a user whose line is gone loses their login, and logins survive
// a restart through the state dir's session table.
func TestRemovedWebUserIsLoggedOut(t *testing.T) {
	dir := t.TempDir()
	tokensFile := filepath.Join(dir, "web-tokens")
	os.WriteFile(tokensFile, []byte("alice alice-token-0123456789\ncarol carol-token-0123456789\n"), 0o600)
	w := webConfig{Listen: "127.0.0.1:0", TokensFile: tokensFile, Users: []string{"alice", "carol"}}
	auth, err := w.auth()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(dir, "state", "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	saved, save := sessionStore(filepath.Join(dir, "state"))
	newServer := func(saved []byte) *web.Server {
		srv, err := web.New(web.Config{Listen: "127.0.0.1:0", Auth: auth, Chain: db, Chat: true,
			Secret: []byte("0123456789abcdef0123456789abcdef"), Sessions: saved, SaveSessions: save})
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	srv := newServer(saved)
	login := func(token string) *http.Cookie {
		req := httptest.NewRequest("POST", "http://127.0.0.1:8080/login", strings.NewReader("token="+token))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://127.0.0.1:8080")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		for _, c := range rec.Result().Cookies() {
			return c
		}
		t.Fatalf("login: %d", rec.Code)
		return nil
	}
	status := func(s *web.Server, c *http.Cookie) int {
		req := httptest.NewRequest("GET", "http://127.0.0.1:8080/api/threads", nil)
		req.AddCookie(c)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec.Code
	}
	alice, carol := login("alice-token-0123456789"), login("carol-token-0123456789")
	// A restart keeps both logins.
	saved, _ = sessionStore(filepath.Join(dir, "state"))
	srv = newServer(saved)
	if status(srv, alice) != http.StatusOK || status(srv, carol) != http.StatusOK {
		t.Fatalf("after a restart: alice %d, carol %d", status(srv, alice), status(srv, carol))
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { watchTokens(ctx, tokensFile, srv, 5*time.Millisecond, slog.New(slog.DiscardHandler)) })
	defer func() { cancel(); wg.Wait() }()
	os.WriteFile(tokensFile, []byte("alice alice-token-0123456789\n"), 0o600)
	deadline := time.Now().Add(20 * time.Second)
	for status(srv, carol) != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatal("carol is still logged in after her line was removed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if status(srv, alice) != http.StatusOK {
		t.Error("alice was logged out too")
	}
}

// TestBrokenTokensFileFailsClosed: a tokens file that stays unreadable
// signs everyone out (a half-written one, seen once, does not).
func TestBrokenTokensFileFailsClosed(t *testing.T) {
	dir := t.TempDir()
	tokensFile := filepath.Join(dir, "web-tokens")
	os.WriteFile(tokensFile, []byte("carol carol-token-0123456789\n"), 0o600)
	db, err := store.Open(filepath.Join(dir, "state", "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv, err := web.New(web.Config{Listen: "127.0.0.1:0", Chain: db, Chat: true,
		Auth: web.Auth{Tokens: map[string]string{"carol-token-0123456789": "carol"}, Roles: map[string][]string{"carol": {web.RoleUser}}}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "http://127.0.0.1:8080/login", strings.NewReader("token=carol-token-0123456789"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://127.0.0.1:8080")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	cookie := rec.Result().Cookies()[0]
	loggedIn := func() bool {
		req := httptest.NewRequest("GET", "http://127.0.0.1:8080/api/threads", nil)
		req.AddCookie(cookie)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code == http.StatusOK
	}
	os.WriteFile(tokensFile, []byte("carol short\n"), 0o600) // not a valid line
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { watchTokens(ctx, tokensFile, srv, 5*time.Millisecond, slog.New(slog.DiscardHandler)) })
	defer func() { cancel(); wg.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for loggedIn() {
		if time.Now().After(deadline) {
			t.Fatal("carol is still logged in with a broken tokens file")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestConsoleLogsTheChainHeadAtStop: `thinbot serve` without a config logs
// the chain head when it stops, as the daemon does and the audit viewer's
// chain page says (field report B8).
func TestConsoleLogsTheChainHeadAtStop(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	t.Chdir(dir) // the console's workspace
	go func() {
		done <- run(ctx, e, []string{"serve", "--listen", "127.0.0.1:0", "--state-dir", filepath.Join(dir, "state")})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "web console serving") {
		if time.Now().After(deadline) {
			t.Fatalf("the console did not start:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// /readyz and /metrics as the daemon's (issue #31): ready without a
	// model, which is a line of its own; the counters there at zero.
	var addr string
	for _, line := range strings.Split(out.String(), "\n") {
		var m struct{ Msg, Listen string }
		if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "web console serving" {
			addr = m.Listen
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusOK || !strings.HasPrefix(body, "ready\n") || !strings.Contains(body, "model: unreachable") {
		t.Errorf("console /readyz = %d:\n%s", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, `thinbot_runs_total{status="answered"} 0`) ||
		!strings.Contains(body, "thinbot_chain_events") || !strings.Contains(body, "thinbot_model_up 0") {
		t.Errorf("console /metrics = %d:\n%s", code, body)
	}
	cancel()
	<-done
	// One log format: every line JSON, as the daemon's.
	stopped := false
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("console log line is not JSON: %q", line)
		}
		stopped = stopped || m["msg"] == "thinbot stopped" && m["head_hash"] != nil
	}
	if !stopped {
		t.Errorf("no chain head at stop:\n%s", out.String())
	}
}
