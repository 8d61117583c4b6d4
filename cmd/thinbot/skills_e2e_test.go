package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

func toolCall(name string, args map[string]string) fakemodel.Reply {
	b, _ := json.Marshal(args)
	return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: name, Args: string(b)}}}
}

// TestSkillEndToEnd: the scripted model finds log-triage in the index, loads
// it with the skill tool, runs its script on a sample log through the gate,
// and answers; the event chain verifies.
func TestSkillEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not installed (log-triage needs it); .ci/run installs it")
		}
		t.Skip("python3 is not installed; log-triage needs it")
	}
	packs, err := filepath.Abs("../../skills")
	if err != nil {
		t.Fatal(err)
	}
	lt, err := skills.LoadOne(filepath.Join(packs, "log-triage"), skills.Options{})
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	sample, err := os.ReadFile(filepath.Join(packs, "log-triage", "testdata", "app.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "app.log"), sample, 0o644); err != nil {
		t.Fatal(err)
	}

	command := "python3 " + lt.Dir + "/scripts/triage.py app.log"
	answer := "The database at 10.0.0.7:5432 refuses connections (3 times since 10:00:05), and requests time out."
	m := fakemodel.Start(t,
		toolCall("skill", map[string]string{"name": "log-triage"}),
		toolCall("run", map[string]string{"command": command, "reason": "group the errors of app.log"}),
		fakemodel.Reply{Content: answer},
	)
	e, out, errb := skillsEnv(map[string]string{
		"AGENT_BASE_URL": m.URL, "AGENT_MODEL": "test-model", "AGENT_API_KEY": "sk-test",
		"AGENT_SKILLS_DIR": packs,
	})
	if err := run(t.Context(), e, []string{"ask", "-a", "-C", work, "what is failing in app.log?"}); err != nil {
		t.Fatalf("ask: %v\nstderr:\n%s", err, errb)
	}
	if !strings.Contains(out.String(), answer) {
		t.Errorf("stdout %q lacks the answer", out)
	}

	reqs := m.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	system := reqs[0].Messages[0].Content
	if !strings.Contains(system, "- log-triage: Groups the error lines of a log file") ||
		!strings.Contains(system, "- csv-stats: ") || strings.Contains(system, "# Log triage") {
		t.Errorf("system prompt does not hold the skill index (and only it):\n%s", system)
	}
	skillText := lastTool(reqs[1])
	if !strings.Contains(skillText, "python3 "+lt.Dir+"/scripts/triage.py") || !strings.Contains(skillText, "- scripts/triage.py") ||
		strings.Contains(skillText, "{SKILL_DIR}") {
		t.Errorf("skill tool result:\n%s", skillText)
	}
	triage := lastTool(reqs[2])
	for _, w := range []string{"lines 12, matched 9, signatures 4", "sig: ERROR db: connection to <ip> refused (attempt <n>)"} {
		if !strings.Contains(triage, w) {
			t.Errorf("script output given to the model lacks %q:\n%s", w, triage)
		}
	}

	db, err := store.Open(filepath.Join(work, ".thinbot", "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.Events < 6 {
		t.Fatalf("verify: %+v, %v", rep, err)
	}
	var sawCommand bool
	for ev, err := range db.All(0) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(ev.Payload), "scripts/triage.py app.log") {
			sawCommand = true
		}
	}
	if !sawCommand {
		t.Error("the script command is not in the event chain")
	}
}

// lastTool is the newest tool-result message of a request.
func lastTool(r fakemodel.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return r.Messages[i].Content
		}
	}
	return ""
}
