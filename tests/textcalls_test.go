package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// After the switch to the text protocol, a model that keeps writing its
// chat template's tool calls as text (Hermes/Qwen <tool_call>, Qwen3-coder
// <function=…>) gets them run, not shown as the answer; an unknown tool
// gets a clear error back.
func TestCLITextProtocolToolCallsInText(t *testing.T) {
	m := fakemodel.Start(t,
		fakemodel.Reply{RejectTools: true, Content: "Checking.\n<tool_call>\n{\"name\": \"run\", \"arguments\": {\"command\": \"echo hermes-ran\", \"reason\": \"check\"}}\n</tool_call>"},
		fakemodel.Reply{Stream: true, Fragment: 5, Content: "<tool_call>{\"name\":\"run\",\"arguments\":\"{\\\"command\\\":\\\"echo string-args-ran\\\"}\"}</tool_call>\n" +
			"<tool_call>\n<function=run>\n<parameter=command>\necho qwen-coder-ran\n</parameter>\n</function>\n</tool_call>"},
		fakemodel.Reply{Content: "<tool_call>{\"name\": \"browse\", \"arguments\": {\"url\": \"http://x\"}}</tool_call>"},
		fakemodel.Reply{Content: "All three ran."})
	dir := t.TempDir()
	r := thinbot(t, dir, modelEnv(m), "ask", "run the checks")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "All three ran." {
		t.Fatalf("ask: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	reqs := m.Requests()
	if len(reqs) != 5 || reqs[len(reqs)-1].HasTools() {
		t.Fatalf("%d requests; the last offers tools: %v", len(reqs), reqs[len(reqs)-1].HasTools())
	}
	if out := lastToolResult(reqs[2]); !strings.Contains(out, "hermes-ran") {
		t.Errorf("the Hermes call's output did not reach the model: %q", out)
	}
	var after []string
	for _, msg := range reqs[3].Messages {
		if msg.Role == "user" {
			after = append(after, msg.Content)
		}
	}
	all := strings.Join(after, "\n")
	if !strings.Contains(all, "string-args-ran") || !strings.Contains(all, "qwen-coder-ran") {
		t.Errorf("both calls of the second reply should have run; the model saw:\n%s", all)
	}
	if out := lastToolResult(reqs[4]); !strings.Contains(out, `unknown tool "browse"`) || !strings.Contains(out, "run") {
		t.Errorf("an unknown tool should get an error naming the tools: %q", out)
	}
	for _, want := range []string{"[pass] echo hermes-ran", "[pass] echo string-args-ran", "[pass] echo qwen-coder-ran"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not show %q:\n%s", want, r.stderr)
		}
	}
	verifyChain(t, dbOf(dir))
}

// In the text protocol a skill is opened with the skill tool_call the
// prompt shows; the body comes back with its folder filled in (a cat of
// SKILL.md would leave the placeholders, and the prompt gives no path).
func TestCLITextProtocolOpensSkills(t *testing.T) {
	dir := t.TempDir()
	skillDir := filepath.Join(dir, "skills", "disk-check")
	writeSkillFile(t, skillDir, "---\nname: disk-check\ndescription: Check disks.\n---\nRun bash {SKILL_DIR}/scripts/df.sh\n")
	m := fakemodel.Start(t,
		fakemodel.Reply{Content: `<tool_call>{"name": "skill", "arguments": {"name": "disk-check"}}</tool_call>`},
		fakemodel.Reply{Content: "Read it."})
	r := thinbot(t, dir, modelEnv(m), "ask", "--text", "check the disks")
	if r.code != 0 {
		t.Fatalf("ask: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	reqs := m.Requests()
	if !strings.Contains(reqs[0].Messages[0].Content, `<tool_call>{"name": "skill", "arguments": {"name": "SKILL-NAME"}}</tool_call>`) {
		t.Errorf("the text-protocol prompt does not show how to open a skill:\n%s", reqs[0].Messages[0].Content)
	}
	real, _ := filepath.EvalSymlinks(skillDir)
	if out := lastToolResult(reqs[1]); !strings.Contains(out, "Run bash "+real+"/scripts/df.sh") {
		t.Errorf("the model got %q", out)
	}
}
