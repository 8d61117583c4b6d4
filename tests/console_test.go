package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// startConsole runs `thinbot serve` without a config in dir (the README's
// first command) and waits until it answers.
func startConsole(t *testing.T, dir, addr string, env []string) (*exec.Cmd, *logBuffer, chan struct{}) {
	t.Helper()
	cmd := exec.Command(thinbotBin, "serve", "--listen", addr)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	log := &logBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("thinbot output:\n%s", tail(log.String(), 6000))
		}
	})
	// The line that tells the user where to open it comes once it listens.
	waitLogged(t, "thinbot serve", log, 0, "thinbot console: open http://", done)
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("the console said where to open it, and /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the console said where to open it, and /healthz answers %d", resp.StatusCode)
	}
	return cmd, log, done
}

func TestConsoleServeWithoutConfig(t *testing.T) {
	model := fakemodel.Start(t, fakemodel.Reply{Content: "Hello from the console test.", Stream: true, Fragment: 5})
	dir, addr := t.TempDir(), freeAddr(t)
	cmd, log, done := startConsole(t, dir, addr, []string{"AGENT_BASE_URL=" + model.URL, "AGENT_MODEL=test-model"})
	if !strings.Contains(log.String(), "open http://"+addr) {
		t.Errorf("the console did not say where to open it:\n%s", log.String())
	}
	base := "http://" + addr
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `id="composer"`) || strings.Contains(string(page), "No model is configured") {
		t.Fatalf("console page: %d\n%s", resp.StatusCode, page)
	}
	req, _ := http.NewRequest("POST", base+"/api/threads", strings.NewReader(`{"text":"say hello"}`))
	req.Header.Set("Origin", base)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var th struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&th)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || th.ID == "" {
		t.Fatalf("new thread: %d", resp.StatusCode)
	}
	// Follow the thread until the answer is there.
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	sreq, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/threads/"+th.ID+"/events", nil)
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(sresp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var stream strings.Builder
	for sc.Scan() && !strings.Contains(stream.String(), "Hello from the console test.") {
		stream.WriteString(sc.Text())
	}
	sresp.Body.Close()
	if !strings.Contains(stream.String(), "Hello from the console test.") {
		t.Fatalf("the answer never reached the page's event stream: %s", stream.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("thinbot serve did not stop on SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	verifyChain(t, filepath.Join(dir, ".thinbot", "events.db"))
	if _, err := os.Stat(filepath.Join(dir, ".thinbot", "audit.jsonl")); err != nil {
		t.Errorf("no audit export in ./.thinbot: %v", err)
	}
}

func TestConsoleWithoutModelSaysHowToSetIt(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	startConsole(t, dir, addr, nil)
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "No model is configured") || !strings.Contains(string(page), "AGENT_BASE_URL") {
		t.Errorf("the console page does not say how to configure the model:\n%s", page)
	}
}

func TestConsoleRefusesNonLoopbackWithoutAuth(t *testing.T) {
	r := thinbot(t, t.TempDir(), nil, "serve", "--listen", "0.0.0.0:0")
	if r.code == 0 || !strings.Contains(r.stderr, "refusing to serve 0.0.0.0:0 without authentication") {
		t.Errorf("serve --listen 0.0.0.0:0: exit %d\n%s", r.code, r.stderr)
	}
}

func TestConfigWebSectionChecked(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	tok := writeSecret(t, dir, "mm.token", "tok")
	cfg := `platform: mattermost
mattermost: {url: "http://127.0.0.1:1", token_file: ` + tok + `, callback_url: "http://127.0.0.1:1/cb"}
model: {base_url: "http://127.0.0.1:1/v1", model: m}
state_dir: ` + filepath.Join(dir, "state") + `
channels: [{id: c1, workspace: ` + ws + `, approvers: [4xp9fdt4e3rpcqa8cwyb3ou3yw]}]
web:
  listen: 0.0.0.0:8081
`
	p := filepath.Join(dir, "thinbot.yaml")
	os.WriteFile(p, []byte(cfg), 0o600)
	r := thinbot(t, dir, nil, "config", "check", "--config", p)
	for _, want := range []string{"refusing to serve 0.0.0.0:8081 without authentication", "web has no auditors and no users"} {
		if r.code == 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("config check: exit %d, want %q in\n%s", r.code, want, r.stdout)
		}
	}
}

// TestServeWebSectionBesideMattermost runs the daemon with Mattermost and a
// web section: the console answers its users, the audit viewer shows both
// platforms' sessions to its auditor only.
func TestServeWebSectionBesideMattermost(t *testing.T) {
	model := fakemodel.Start(t, fakemodel.Reply{Content: "Answer in the web console."})
	webAddr := freeAddr(t)
	r := newRig(t, newMMChat(t), model.URL, rigOpts{Extra: `web:
  listen: ` + webAddr + `
  trusted_proxies: [127.0.0.1/32]
  users: [alice]
  approvers: [bob]
  auditors: [audrey]
  workspace: ws
`})
	base := "http://" + webAddr
	call := func(user, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("X-Forwarded-User", user)
		if method == "POST" {
			req.Header.Set("Origin", base)
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := call("alice", "POST", "/api/threads", `{"text":"hello from the browser"}`)
	var th struct{ ID string }
	json.Unmarshal([]byte(body), &th)
	if code != http.StatusCreated || th.ID == "" {
		t.Fatalf("new thread: %d %s", code, body)
	}
	r.waitFor("the console's answer in the chain", func() bool {
		_, page := call("audrey", "GET", "/audit/session?id=web/console/"+th.ID, "")
		return strings.Contains(page, "Answer in the web console.")
	})
	if code, _ := call("audrey", "POST", "/api/threads", `{"text":"an auditor writes"}`); code != http.StatusForbidden {
		t.Errorf("an auditor's message: status %d, want 403", code)
	}
	if code, _ := call("alice", "GET", "/audit", ""); code != http.StatusForbidden {
		t.Errorf("a console user on the audit viewer: status %d, want 403", code)
	}
	if code, page := call("audrey", "GET", "/audit", ""); code != http.StatusOK || !strings.Contains(page, "verified up to seq") {
		t.Errorf("the audit viewer: %d\n%s", code, page)
	}
	r.stop()
}

// TestConsoleHangup: the console without a config has no file to reload;
// a SIGHUP is logged as such and the console serves on, then stops on
// SIGTERM with exit code 0 (Go's default for SIGHUP ends the process).
func TestConsoleHangup(t *testing.T) {
	t.Parallel()
	dir, addr := t.TempDir(), freeAddr(t)
	cmd, log, done := startConsole(t, dir, addr, nil)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, "thinbot serve", log, 0, "SIGHUP: no config file to reload", done)
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("after SIGHUP, /healthz: %v", err)
	}
	resp.Body.Close()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("thinbot serve did not stop on SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGHUP and SIGTERM, want 0", code)
	}
}
