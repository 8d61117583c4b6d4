package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

func runArgs(cmd, reason string) string {
	b, _ := json.Marshal(map[string]string{"command": cmd, "reason": reason})
	return string(b)
}

func run(cmd string) fakemodel.Reply {
	return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: runArgs(cmd, "test")}}}
}

func modelEnv(m *fakemodel.Server) []string {
	return []string{"AGENT_BASE_URL=" + m.URL, "AGENT_MODEL=test-model", "AGENT_API_KEY=sk-e2e-secret-key"}
}

// lastToolResult is the newest tool or user message of a request.
func lastToolResult(r fakemodel.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "tool" || m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

func dbOf(dir string) string { return filepath.Join(dir, ".thinbot", "events.db") }

// 1. A read-only command runs without asking and its output reaches the model.
func TestCLIReadOnlyCommandRuns(t *testing.T) {
	m := fakemodel.Start(t, run("df -h"), fakemodel.Reply{Content: "Disks look fine."})
	dir := t.TempDir()
	r := thinbot(t, dir, modelEnv(m), "ask", "how are the disks?")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "Disks look fine." {
		t.Fatalf("ask: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "[pass] df -h") {
		t.Errorf("stderr does not show the command with its verdict:\n%s", r.stderr)
	}
	if out := lastToolResult(m.Requests()[1]); !strings.Contains(out, "Filesystem") {
		t.Errorf("the model did not get df's output: %q", out)
	}
	verifyChain(t, dbOf(dir))
}

// 2. A write command is refused in ask mode without -a, and nothing is written.
// 3. With -a the write runs, but rm -rf / is still denied.
func TestCLIWritesNeedApproval(t *testing.T) {
	m := fakemodel.Start(t, run("touch x"), fakemodel.Reply{Content: "I was not allowed."})
	dir := t.TempDir()
	r := thinbot(t, dir, modelEnv(m), "ask", "create x")
	if r.code != 0 {
		t.Fatalf("ask: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Fatal("x was written without approval")
	}
	if out := lastToolResult(m.Requests()[1]); !strings.Contains(out, "approval") {
		t.Errorf("the model was told %q", out)
	}
	verifyChain(t, dbOf(dir))

	m2 := fakemodel.Start(t, run("touch x"), run("rm -rf /"), fakemodel.Reply{Content: "done"})
	r = thinbot(t, dir, modelEnv(m2), "ask", "-a", "create x, then wipe")
	if r.code != 0 {
		t.Fatalf("ask -a: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Errorf("with -a the write did not run: %v", err)
	}
	if out := lastToolResult(m2.Requests()[2]); !strings.Contains(out, "refused by policy") {
		t.Errorf("rm -rf / was not denied: %q", out)
	}
	if !strings.Contains(r.stderr, "[deny] rm -rf /") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	verifyChain(t, dbOf(dir))
}

// 4. Goal mode runs several steps and stops at agent_done; a budget stops a
// model that never calls it.
func TestCLIGoalMode(t *testing.T) {
	m := fakemodel.Start(t, run("uptime"), run("free -m"),
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "agent_done", Args: `{"summary":"Machine is healthy."}`}}})
	dir := t.TempDir()
	r := thinbot(t, dir, modelEnv(m), "goal", "check the machine")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "Machine is healthy." {
		t.Fatalf("goal: exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
	verifyChain(t, dbOf(dir))

	m2 := fakemodel.Start(t, run("true"), run("true"), run("true"))
	r = thinbot(t, dir, modelEnv(m2), "goal", "--max-steps", "3", "loop forever")
	if r.code == 0 || !strings.Contains(r.stderr, "budget") {
		t.Fatalf("goal without agent_done: exit %d stderr %s", r.code, r.stderr)
	}
	verifyChain(t, dbOf(dir))
}

// 5. The session persists: a second ask -s in the same directory sees the first exchange.
func TestCLISessionPersists(t *testing.T) {
	m := fakemodel.Start(t, fakemodel.Reply{Content: "The answer is 42."}, fakemodel.Reply{Content: "You asked about 42."})
	dir := t.TempDir()
	if r := thinbot(t, dir, modelEnv(m), "ask", "-s", "what is the answer?"); r.code != 0 {
		t.Fatalf("first ask: %s", r.stderr)
	}
	if r := thinbot(t, dir, modelEnv(m), "ask", "-s", "what did I ask?"); r.code != 0 {
		t.Fatalf("second ask: %s", r.stderr)
	}
	var joined []string
	for _, msg := range m.Requests()[1].Messages {
		joined = append(joined, msg.Content)
	}
	all := strings.Join(joined, "\n")
	if !strings.Contains(all, "what is the answer?") || !strings.Contains(all, "The answer is 42.") {
		t.Errorf("the second run did not see the first exchange:\n%s", all)
	}
	r := thinbot(t, dir, nil, "sessions", "list", "--db", dbOf(dir))
	if r.code != 0 || !strings.Contains(r.stdout, "cli") {
		t.Errorf("sessions list: %s %s", r.stdout, r.stderr)
	}
	// sessions clear starts a new branch: the next run does not see the old exchange.
	if r := thinbot(t, dir, nil, "sessions", "clear", "--db", dbOf(dir)); r.code != 0 {
		t.Fatalf("sessions clear: %s", r.stderr)
	}
	m2 := fakemodel.Start(t, fakemodel.Reply{Content: "fresh"})
	if r := thinbot(t, dir, modelEnv(m2), "ask", "-s", "anything before?"); r.code != 0 {
		t.Fatalf("third ask: %s", r.stderr)
	}
	for _, msg := range m2.Requests()[0].Messages {
		if strings.Contains(msg.Content, "The answer is 42.") {
			t.Error("after sessions clear the old exchange is still in the context")
		}
	}
	verifyChain(t, dbOf(dir))
}

// 5b. audit timeline: a session's postmortem (no hashes) and its verified
// appendix; an unknown session is an error (exit non-zero, saying so),
// from the store and from a JSONL export alike, not an empty timeline.
func TestCLIAuditTimeline(t *testing.T) {
	m := fakemodel.Start(t, fakemodel.Reply{Content: "The answer is 42."})
	dir := t.TempDir()
	if r := thinbot(t, dir, modelEnv(m), "ask", "-s", "what is the answer?"); r.code != 0 {
		t.Fatalf("ask: %s", r.stderr)
	}
	r := thinbot(t, dir, nil, "audit", "timeline", "cli", "--db", dbOf(dir), "--part", "postmortem")
	if r.code != 0 || !strings.Contains(r.stdout, "`tester` wrote: `what is the answer?`") || strings.Contains(r.stdout, "Chain verified") {
		t.Errorf("postmortem: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = thinbot(t, dir, nil, "audit", "timeline", "cli", "--db", dbOf(dir), "--part", "appendix")
	if r.code != 0 || !strings.Contains(r.stdout, "**Chain verified:**") || !strings.Contains(r.stdout, "**message** from `user:tester`: `what is the answer?`") {
		t.Errorf("appendix: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"--db", dbOf(dir)}, {"--jsonl", filepath.Join(filepath.Dir(dbOf(dir)), "audit.jsonl")}} {
		r := thinbot(t, dir, nil, append([]string{"audit", "timeline", "web/console/nope"}, args...)...)
		if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, `no session "web/console/nope" in the chain`) {
			t.Errorf("an unknown session %v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := thinbot(t, dir, nil, "audit", "timeline", "cli", "--db", dbOf(dir), "--part", "hashes"); r.code == 0 || !strings.Contains(r.stderr, "postmortem or appendix") {
		t.Errorf("--part hashes: exit %d, %s", r.code, r.stderr)
	}
}

// 6. The server rejects tools (400) and the run completes through the text protocol.
func TestCLITextProtocolFallback(t *testing.T) {
	m := fakemodel.Start(t,
		fakemodel.Reply{RejectTools: true, Content: "Let me look.\n```bash\nuname -s\n```"},
		fakemodel.Reply{Content: "It is Linux."})
	dir := t.TempDir()
	r := thinbot(t, dir, modelEnv(m), "ask", "which OS?")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "It is Linux." {
		t.Fatalf("ask: exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
	reqs := m.Requests()
	if !reqs[0].HasTools() || reqs[len(reqs)-1].HasTools() {
		t.Error("the client did not drop tools after the 400")
	}
	if out := lastToolResult(reqs[len(reqs)-1]); !strings.Contains(out, "Linux") {
		t.Errorf("the model did not get uname's output: %q", out)
	}
	exp := thinbot(t, dir, nil, "audit", "export", "--db", dbOf(dir))
	if !strings.Contains(exp.stdout, `"protocol_switch"`) {
		t.Error("the switch to the text protocol is not in the chain")
	}
	verifyChain(t, dbOf(dir))
}

// 7. Streamed tool calls in fragments, two tool calls in one reply, invalid
// JSON arguments, a 429 then success, and a stream cut mid-way.
func TestCLIModelQuirks(t *testing.T) {
	two := fakemodel.Reply{Stream: true, Fragment: 3, ToolCalls: []fakemodel.Call{
		{Name: "run", Args: runArgs("echo first-call", "a")},
		{Name: "run", Args: runArgs("echo second-call", "b")},
	}}
	m := fakemodel.Start(t,
		fakemodel.Reply{Status: 429, RetryAfter: "0"},
		two,
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: `{"command": "echo x"`}}},
		fakemodel.Reply{Stream: true, Content: "partial answer that is cut", CutAfter: 40},
		fakemodel.Reply{Stream: true, Fragment: 2, Content: "Both ran."},
	)
	dir := t.TempDir()
	r := thinbot(t, dir, modelEnv(m), "ask", "go")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "Both ran." {
		t.Fatalf("ask: exit %d stdout %q stderr %s", r.code, r.stdout, r.stderr)
	}
	reqs := m.Requests()
	var tools []string
	for _, msg := range reqs[2].Messages {
		if msg.Role == "tool" {
			tools = append(tools, msg.Content)
		}
	}
	if len(tools) != 2 || !strings.Contains(tools[0], "first-call") || !strings.Contains(tools[1], "second-call") {
		t.Errorf("tool results after two calls = %q", tools)
	}
	if out := lastToolResult(reqs[3]); !strings.Contains(out, "not a valid JSON") {
		t.Errorf("invalid arguments were reported as %q", out)
	}
	verifyChain(t, dbOf(dir))
}

// 8. The child process cannot see AGENT_API_KEY.
func TestCLIChildDoesNotSeeSecrets(t *testing.T) {
	m := fakemodel.Start(t, run("env"), fakemodel.Reply{Content: "listed"})
	dir := t.TempDir()
	env := append(modelEnv(m), "SLACK_BOT_TOKEN=xoxb-should-not-leak")
	r := thinbot(t, dir, env, "ask", "-a", "show env")
	if r.code != 0 {
		t.Fatalf("ask: %s", r.stderr)
	}
	out := lastToolResult(m.Requests()[1])
	if !strings.Contains(out, "PATH=") {
		t.Fatalf("env did not run: %q", out)
	}
	for _, secret := range []string{"sk-e2e-secret-key", "AGENT_API_KEY", "xoxb-should-not-leak"} {
		if strings.Contains(out, secret) {
			t.Errorf("the child saw %s", secret)
		}
	}
	exp := thinbot(t, dir, nil, "audit", "export", "--db", dbOf(dir))
	if strings.Contains(exp.stdout, "sk-e2e-secret-key") {
		t.Error("the API key reached the audit log")
	}
	verifyChain(t, dbOf(dir))
}

func TestCLIFailsClearlyWithoutModelConfig(t *testing.T) {
	r := thinbot(t, t.TempDir(), nil, "ask", "hi")
	if r.code == 0 || !strings.Contains(r.stderr, "AGENT_BASE_URL") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestCLIModelDownFailsWithOneLine(t *testing.T) {
	r := thinbot(t, t.TempDir(), []string{"AGENT_BASE_URL=http://127.0.0.1:1/v1", "AGENT_MODEL=m"}, "ask", "hi")
	if r.code == 0 || !strings.Contains(r.stderr, "model") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// chat mode: a write waits for y/N on the terminal; y runs it, n refuses;
// streamed text is shown once; /clear starts a new topic.
func TestCLIChatApprovesAtTheTerminal(t *testing.T) {
	m := fakemodel.Start(t,
		run("touch yes-file"), fakemodel.Reply{Content: "Made it.", Stream: true, Fragment: 3},
		run("touch no-file"), fakemodel.Reply{Content: "Skipped."},
		fakemodel.Reply{Content: "Fresh start."})
	dir := t.TempDir()
	r := thinbotIn(t, dir, modelEnv(m), "make one\ny\nmake another\nn\n/clear\nhello\n/exit\n", "chat")
	if r.code != 0 {
		t.Fatalf("chat: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "yes-file")); err != nil {
		t.Error("the approved command did not run")
	}
	if _, err := os.Stat(filepath.Join(dir, "no-file")); err == nil {
		t.Error("the refused command ran")
	}
	if strings.Count(r.stdout, "Made it.") != 1 || !strings.Contains(r.stdout, "Skipped.") {
		t.Errorf("stdout = %q", r.stdout)
	}
	if !strings.Contains(r.stderr, "Run it? [y/N]") {
		t.Errorf("no approval prompt on stderr:\n%s", r.stderr)
	}
	last := m.Requests()[len(m.Requests())-1]
	for _, msg := range last.Messages {
		if strings.Contains(msg.Content, "make one") {
			t.Error("after /clear the old topic is still in the context")
		}
	}
	verifyChain(t, dbOf(dir))
}
