package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// inspectorDir is where .ci/run installs the MCP Inspector from npm: the
// MCP client that is not ours, for the `thinbot mcp` tests.
const inspectorDir = "/var/cache/thinbot-test/mcp-inspector"

// inspectorCLI is the Inspector's CLI entry point; the test fails under
// CI=1 when it is missing, and skips elsewhere.
func inspectorCLI(t *testing.T) string {
	t.Helper()
	p := filepath.Join(inspectorDir, "node_modules/@modelcontextprotocol/inspector-cli/build/index.js")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the MCP Inspector is not installed (.ci/run installs it): %v", err)
		}
		t.Skipf("the MCP Inspector is not installed in %s (.ci/run installs it)", inspectorDir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("node: %v", err)
	}
	return p
}

// mcpRig is a thinbot serve with an mcp section whose sessions open their
// threads in the ops channel, and the files its clients use.
type mcpRig struct {
	*rig
	token, otherToken string // bearer tokens of identities "ci" and "laptop"
	tokenFile         string // the "ci" token alone, for thinbot mcp
	url               string
}

func newMCPRig(t *testing.T) *mcpRig {
	t.Helper()
	chat := newMMChat(t)
	m := fakemodel.Start(t)
	dir := t.TempDir()
	tok, other := "ci-0123456789abcdef0123456789abcdef", "lt-0123456789abcdef0123456789abcdef"
	tokens := writeSecret(t, dir, "mcp-tokens", "ci "+tok+"\nlaptop "+other)
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf("mcp:\n  tokens_file: %s\n  channel: %s\n", tokens, chat.Ops())})
	return &mcpRig{rig: r, token: tok, otherToken: other, tokenFile: writeSecret(t, dir, "ci.token", tok), url: "http://" + r.addr + "/mcp"}
}

// codexServer is the MCP server deploy/mcp.md's Codex block configures:
// its command and args, with the guide's URL and token file replaced by
// url and tokenFile, and the command by the binary under test.
func codexServer(t *testing.T, url, tokenFile string) []string {
	t.Helper()
	b, err := os.ReadFile("../deploy/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(b), "<!-- guide-test: codex -->\n```toml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("deploy/mcp.md has no codex block")
	}
	var command string
	var args []string
	timeout := false
	for _, line := range strings.Split(block, "\n") {
		k, v, found := strings.Cut(line, " = ")
		switch {
		case !found:
		case k == "command":
			if err := json.Unmarshal([]byte(v), &command); err != nil {
				t.Fatalf("command %s: %v", v, err)
			}
		case k == "args":
			if err := json.Unmarshal([]byte(v), &args); err != nil {
				t.Fatalf("args %s: %v", v, err)
			}
		case k == "tool_timeout_sec":
			timeout = true
		}
	}
	if command != "thinbot" || len(args) == 0 || args[0] != "mcp" || !timeout {
		t.Fatalf("the codex block starts %q %q (tool_timeout_sec set: %v), want thinbot mcp with a tool timeout", command, args, timeout)
	}
	out := []string{thinbotBin}
	for _, a := range args {
		a = strings.ReplaceAll(a, "https://thinbot.example.com/mcp", url)
		out = append(out, strings.ReplaceAll(a, "/home/me/.config/thinbot/mcp.token", tokenFile))
	}
	return out
}

// inspector starts the Inspector CLI calling tool with args through
// `thinbot mcp` (stdio), started as deploy/mcp.md's Codex block says.
func (r *mcpRig) inspector(t *testing.T, ctx context.Context, tool string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cli := inspectorCLI(t)
	server := codexServer(t, r.url, r.tokenFile)
	// The server's command and first argument come first, its flags after
	// "--" (the Inspector's own flags come between).
	a := append([]string{cli}, server[:2]...)
	a = append(a, "--method", "tools/call", "--tool-name", tool)
	for _, kv := range args {
		a = append(a, "--tool-arg", kv)
	}
	a = append(append(a, "--"), server[2:]...)
	cmd := exec.CommandContext(ctx, "node", a...)
	cmd.Env = baseEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// sessionRoots are the roots of the MCP session threads in ops, oldest first.
func (r *mcpRig) sessionRoots() []chatPost {
	var out []chatPost
	for _, p := range botRoots(r.chat, r.chat.Ops()) {
		if strings.Contains(p.Text, "MCP session") {
			out = append(out, p)
		}
	}
	return out
}

// card waits for the approval card in the n-th session thread.
func (r *mcpRig) card(n int) (root string, card chatPost) {
	r.waitFor(fmt.Sprintf("an approval card in MCP session %d", n), func() bool {
		roots := r.sessionRoots()
		if len(roots) < n {
			return false
		}
		root = roots[n-1].ID
		for _, p := range r.chat.BotPosts(r.chat.Ops(), root) {
			if len(p.Buttons) > 0 {
				card = p
				return true
			}
		}
		return false
	})
	return root, card
}

// An MCP client that is not ours (the MCP Inspector's CLI) calls thinbot
// through `thinbot mcp`: a read runs at once; a write waits for an
// approval given in chat and runs when approved, never when denied; a
// client that goes away while its call waits leaves the request cancelled
// and recorded, and the daemon serving the next call; every call is in
// the session's timeline, with the client's identity.
func TestMCPInspectorThroughTheGate(t *testing.T) {
	r := newMCPRig(t)
	ctx := t.Context()

	// A read: runs at once, in a thread of its own named after the client.
	cmd, out := r.inspector(t, ctx, "run", "command=echo hello-from-mcp", "reason=say hello")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("inspector: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "hello-from-mcp") || strings.Contains(out.String(), `"isError": true`) {
		t.Fatalf("read: %s", out)
	}
	roots := r.sessionRoots()
	if len(roots) != 1 || !strings.Contains(roots[0].Text, "inspector-cli") || !strings.Contains(roots[0].Text, "ci") {
		t.Fatalf("session threads %+v", roots)
	}

	// A write, approved in chat by bob.
	approved := filepath.Join(r.ws, "approved.txt")
	cmd, out = r.inspector(t, ctx, "run", "command=touch approved.txt", "reason=leave a mark")
	_, card := r.card(2)
	if !strings.Contains(card.Text, "touch approved.txt") || !strings.Contains(card.Text, "leave a mark") {
		t.Errorf("card %q", card.Text)
	}
	if _, err := os.Stat(approved); err == nil {
		t.Fatal("the write ran before the approval")
	}
	r.chat.Click(t, r.chat.Ops(), "", card.ID, "approve", "bob")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("inspector: %v\n%s", err, out)
	}
	if _, err := os.Stat(approved); err != nil {
		t.Fatalf("the approved write did not run: %v\n%s", err, out)
	}

	// A write, denied in chat: refused, and it never runs.
	denied := filepath.Join(r.ws, "denied.txt")
	cmd, out = r.inspector(t, ctx, "run", "command=touch denied.txt")
	deniedRoot, card := r.card(3)
	r.chat.Click(t, r.chat.Ops(), "", card.ID, "deny", "bob")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("inspector: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "refused") || !strings.Contains(out.String(), `"isError": true`) {
		t.Errorf("denied call answered %s", out)
	}
	if _, err := os.Stat(denied); err == nil {
		t.Fatal("a denied write ran")
	}

	// The client goes away while its call waits: the request is cancelled,
	// recorded so, and nothing runs.
	gone := filepath.Join(r.ws, "gone.txt")
	cmd, _ = r.inspector(t, ctx, "run", "command=touch gone.txt")
	goneRoot, card := r.card(4)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	r.waitFor("the abandoned request's card to say it was cancelled", func() bool {
		for _, p := range r.chat.BotPosts(r.chat.Ops(), goneRoot) {
			if p.ID == card.ID {
				return len(p.Buttons) == 0 && strings.Contains(p.Text, "Cancelled")
			}
		}
		return false
	})
	// The daemon serves the next client as before.
	cmd, out = r.inspector(t, ctx, "read_file", "path=approved.txt")
	if err := cmd.Wait(); err != nil || strings.Contains(out.String(), `"isError": true`) {
		t.Fatalf("read_file after the disconnect: %v\n%s", err, out)
	}
	if _, err := os.Stat(gone); err == nil {
		t.Fatal("the abandoned write ran")
	}

	// The auditor's timeline of each session has the calls and decisions.
	tl := thinbot(t, r.dir, nil, "audit", "timeline", "mattermost/"+r.chat.Ops()+"/"+deniedRoot, "--config", r.cfgPath)
	t.Logf("timeline:\n%s", tl.stdout)
	if tl.code != 0 || !strings.Contains(tl.stdout, "touch denied.txt") || !strings.Contains(tl.stdout, "mcp:ci") || !strings.Contains(tl.stdout, "denied") {
		t.Errorf("timeline of the denied call (exit %d):\n%s%s", tl.code, tl.stdout, tl.stderr)
	}
	tl = thinbot(t, r.dir, nil, "audit", "timeline", "mattermost/"+r.chat.Ops()+"/"+goneRoot, "--config", r.cfgPath)
	if tl.code != 0 || !strings.Contains(tl.stdout, "touch gone.txt") || !strings.Contains(tl.stdout, "cancelled") {
		t.Errorf("timeline of the abandoned call (exit %d):\n%s%s", tl.code, tl.stdout, tl.stderr)
	}
}

// The endpoint wants a known bearer token, and a session belongs to the
// identity that opened it: another token's requests for it are refused.
func TestMCPEndpointTokens(t *testing.T) {
	r := newMCPRig(t)
	post := func(token, session, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := r.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	for _, tok := range []string{"", "ci-0123456789abcdef0123456789abcdeX", r.token + "x"} {
		if resp, body := post(tok, "", initialize); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %q: status %d %s, want 401", tok, resp.StatusCode, body)
		}
	}
	resp, body := post(r.token, "", initialize)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp, body := post(r.otherToken, sid, list); resp.StatusCode != http.StatusForbidden {
		t.Errorf("another identity's request for the session: %d %s, want 403", resp.StatusCode, body)
	}
	resp, body = post(r.token, sid, list)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"read_file"`) || !strings.Contains(body, `"run"`) {
		t.Errorf("tools/list: %d %s", resp.StatusCode, body)
	}
}

// codexBin is Codex CLI as .ci/run installs it from npm; the test fails
// under CI=1 when it is missing, and skips elsewhere.
func codexBin(t *testing.T) string {
	t.Helper()
	p := "/var/cache/thinbot-test/codex/node_modules/.bin/codex"
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Codex CLI is not installed (.ci/run installs it): %v", err)
		}
		t.Skipf("Codex CLI is not installed in %s (.ci/run installs it)", p)
	}
	return p
}

// codexConfig is a Codex config.toml: the scripted model as its provider,
// then deploy/mcp.md's Codex block as it is written, with the daemon's URL
// and the token file put in for the guide's, and the binary under test
// for "thinbot".
func codexConfig(t *testing.T, modelURL, url, tokenFile string) string {
	t.Helper()
	codexServer(t, url, tokenFile) // the block's shape
	b, err := os.ReadFile("../deploy/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(b), "<!-- guide-test: codex -->\n```toml\n")
	block, _, _ = strings.Cut(block, "```")
	block = strings.NewReplacer("https://thinbot.example.com/mcp", url, "/home/me/.config/thinbot/mcp.token", tokenFile,
		`command = "thinbot"`, fmt.Sprintf("command = %q", thinbotBin)).Replace(block)
	return fmt.Sprintf(`model = "fake"
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = %q
env_key = "FAKE_MODEL_KEY"
wire_api = "responses"

`, modelURL) + block
}

// Codex CLI, configured as deploy/mcp.md says and driven by the scripted
// model, runs a write through thinbot: the write waits for bob's approval
// in chat, runs once approved, and Codex's model reads its result; a
// second write, denied, never runs and Codex's model reads the refusal.
func TestMCPCodexThroughTheGate(t *testing.T) {
	codex := codexBin(t)
	r := newMCPRig(t)
	call := func(cmd string) fakemodel.Reply {
		return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "mcp__thinbot__run", Args: fmt.Sprintf(`{"command":%q,"reason":"codex was asked to"}`, cmd)}}}
	}
	model := fakemodel.Start(t, call("touch codex-approved.txt"), fakemodel.Reply{Content: "made it"},
		call("touch codex-denied.txt"), fakemodel.Reply{Content: "it was refused"})
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(codexConfig(t, model.URL, r.url, r.tokenFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	exec1 := func(prompt string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.CommandContext(t.Context(), codex, "exec", "--strict-config", "--skip-git-repo-check", prompt)
		cmd.Dir = work
		cmd.Env = append(baseEnv(), "CODEX_HOME="+home, "HOME="+home, "FAKE_MODEL_KEY=test")
		cmd.Stdin = strings.NewReader("")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}

	cmd, out := exec1("create codex-approved.txt")
	t.Cleanup(func() {
		if t.Failed() {
			for _, q := range model.Requests() {
				t.Logf("model request %d: tool results %q", q.N, toolOutputs(q))
			}
			t.Logf("codex output:\n%s", out)
		}
	})
	root, card := r.card(1)
	if !strings.Contains(card.Text, "touch codex-approved.txt") || !strings.Contains(card.Text, "codex was asked to") {
		t.Errorf("card %q", card.Text)
	}
	if roots := r.sessionRoots(); !strings.Contains(roots[0].Text, "codex") {
		t.Errorf("the session's thread is not named after Codex: %q", roots[0].Text)
	}
	r.chat.Click(t, r.chat.Ops(), "", card.ID, "approve", "bob")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(r.ws, "codex-approved.txt")); err != nil {
		t.Fatalf("the approved write did not run: %v\n%s", err, out)
	}
	reqs := model.Requests()
	if len(reqs) < 2 || !strings.Contains(toolOutputs(reqs[1]), "exit code: 0") {
		t.Errorf("Codex's model did not read the command's result: %+v", reqs)
	}

	cmd, out = exec1("create codex-denied.txt")
	_, card = r.card(2)
	r.chat.Click(t, r.chat.Ops(), "", card.ID, "deny", "bob")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(r.ws, "codex-denied.txt")); err == nil {
		t.Fatal("a denied write ran")
	}
	reqs = model.Requests()
	if !strings.Contains(toolOutputs(reqs[len(reqs)-1]), "refused") {
		t.Errorf("Codex's model did not read the refusal: %s", toolOutputs(reqs[len(reqs)-1]))
	}
	tl := thinbot(t, r.dir, nil, "audit", "timeline", "mattermost/"+r.chat.Ops()+"/"+root, "--config", r.cfgPath)
	if tl.code != 0 || !strings.Contains(tl.stdout, "touch codex-approved.txt") || !strings.Contains(tl.stdout, "mcp:ci") {
		t.Errorf("timeline (exit %d):\n%s%s", tl.code, tl.stdout, tl.stderr)
	}
}

// toolOutputs are the tool results a model request carries.
func toolOutputs(req fakemodel.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		if m.Role == "tool" {
			b.WriteString(m.Content + "\n")
		}
	}
	return b.String()
}

// With platform web, a client session's thread opens in the web console,
// and the person on call approves its write from the console's inbox.
func TestMCPWebConsoleApproval(t *testing.T) {
	inspectorCLI(t)
	chat := newMMChat(t)
	m := fakemodel.Start(t)
	dir := t.TempDir()
	tok := "ci-0123456789abcdef0123456789abcdef"
	webAddr := freeAddr(t)
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`web:
  listen: %s
  trusted_proxies: [127.0.0.1/32]
  users: [alice]
  approvers: [bob]
  workspace: ws
mcp:
  tokens_file: %s
  platform: web
`, webAddr, writeSecret(t, dir, "mcp-tokens", "ci "+tok))})
	mr := &mcpRig{rig: r, token: tok, tokenFile: writeSecret(t, dir, "ci.token", tok), url: "http://" + r.addr + "/mcp"}
	api := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, "http://"+webAddr+path, strings.NewReader(body))
		req.Header.Set("X-Forwarded-User", "bob")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "http://"+webAddr) // as the console's page sends it
		resp, err := r.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	cmd, out := mr.inspector(t, t.Context(), "run", "command=touch console.txt", "reason=from the console")
	var item struct{ Thread, Post, Text string }
	r.waitFor("the request in the console's inbox", func() bool {
		var inbox struct {
			Items []struct{ Thread, Post, Text string }
		}
		json.Unmarshal([]byte(api("GET", "/api/inbox", "")), &inbox)
		for _, it := range inbox.Items {
			if strings.Contains(it.Text, "touch console.txt") {
				item = it
				return true
			}
		}
		return false
	})
	if res := api("POST", "/api/threads/"+item.Thread+"/posts/"+item.Post+"/click", `{"action":"approve"}`); !strings.Contains(res, `"updated":true`) {
		t.Fatalf("click: %s", res)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("inspector: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "ws", "console.txt")); err != nil {
		t.Fatalf("the write approved in the console did not run: %v\n%s", err, out)
	}
}
