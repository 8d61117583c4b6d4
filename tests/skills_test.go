package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

func writeSkillFile(t *testing.T, dir, text string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// `thinbot skills --json` keeps a long description whole; `thinbot skills`
// shows a warning for a requirement written outside requires, and the
// skill still loads.
func TestCLISkillRecords(t *testing.T) {
	dir := t.TempDir()
	long := strings.TrimSpace(strings.Repeat("Triage noisy application logs and name the first error. ", 30))
	writeSkillFile(t, filepath.Join(dir, "skills", "long-one"), "---\nname: long-one\ndescription: "+long+"\n---\nBody.\n")
	writeSkillFile(t, filepath.Join(dir, "skills", "loose-req"), "---\nname: loose-req\ndescription: Needs jq.\nbins: [jq]\n---\nBody.\n")

	r := thinbot(t, dir, nil, "skills", "--json")
	if r.code != 0 {
		t.Fatalf("skills --json: exit %d: %s", r.code, r.stderr)
	}
	var out struct {
		Skills []struct {
			Name, Description string
			Warnings          []string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range out.Skills {
		got[s.Name] = s.Description
	}
	if got["long-one"] != long {
		t.Errorf("description in the record is %d bytes, want the whole %d", len(got["long-one"]), len(long))
	}
	if _, ok := got["loose-req"]; !ok {
		t.Errorf("loose-req did not load: %s", r.stdout)
	}

	r = thinbot(t, dir, nil, "skills")
	if r.code != 0 || !strings.Contains(r.stdout, `warning: top-level "bins" looks like a requirement but is not checked: put it under requires`) {
		t.Errorf("skills does not show the warning:\n%s\n%s", r.stdout, r.stderr)
	}
	r = thinbot(t, dir, nil, "skills", "--index", "--context-tokens", "8000")
	if line := firstLineWith(r.stdout, "long-one"); len(line) > 300 || len(line) < 60 {
		t.Errorf("index line for the long description is %d bytes: %q", len(line), line)
	}
}

func firstLineWith(s, sub string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// The skill tool reads the body when the skill is opened: an edit after the
// start is served, with Claude Code's ${CLAUDE_SKILL_DIR} and {{skillDir}}
// filled in; a removed SKILL.md gives the model a clear error.
func TestCLISkillBodyReadWhenOpened(t *testing.T) {
	dir := t.TempDir()
	skillDir := filepath.Join(dir, "skills", "disk-check")
	writeSkillFile(t, skillDir, "---\nname: disk-check\ndescription: Check disks.\n---\nOld body.\n")
	skillCall := fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "skill", Args: `{"name":"disk-check"}`}}}
	step := 0
	m := fakemodel.NewFunc(func(r fakemodel.Request) fakemodel.Reply {
		step++
		switch step {
		case 1: // thinbot has started and loaded the skill: edit it now
			writeSkillFile(t, skillDir, "---\nname: disk-check\ndescription: Check disks.\n---\nNew body: run bash ${CLAUDE_SKILL_DIR}/scripts/df.sh or {{skillDir}}/x.\n")
			return skillCall
		case 2:
			os.Remove(filepath.Join(skillDir, "SKILL.md"))
			return skillCall
		}
		return fakemodel.Reply{Content: "done"}
	})
	t.Cleanup(m.Close)
	r := thinbot(t, dir, modelEnv(m), "ask", "check the disks")
	if r.code != 0 {
		t.Fatalf("ask: exit %d: %s", r.code, r.stderr)
	}
	reqs := m.Requests()
	real, _ := filepath.EvalSymlinks(skillDir)
	if out := lastToolResult(reqs[1]); !strings.Contains(out, "New body: run bash "+real+"/scripts/df.sh or "+real+"/x.") {
		t.Errorf("the skill tool gave %q", out)
	}
	if out := lastToolResult(reqs[2]); !strings.Contains(out, "error: skill disk-check") || !strings.Contains(out, "readable when thinbot started") {
		t.Errorf("after removal the skill tool gave %q", out)
	}
	verifyChain(t, dbOf(dir))
}

// At a small window with many skills, the index keeps a long description
// for the skill that matches the thread's first message, and the system
// prompt stays byte-identical across the runs of the session.
func TestCLISkillIndexRankedAndStable(t *testing.T) {
	dir := t.TempDir()
	for i := range 60 {
		name := fmt.Sprintf("helper-%02d", i)
		writeSkillFile(t, filepath.Join(dir, "skills", name), fmt.Sprintf("---\nname: %s\ndescription: Generic helper %d for assorted chores on hosts and services, with a long explanation of its options and caveats.\n---\nBody.\n", name, i))
	}
	certDesc := "Check TLS certificate expiry, chains and SAN names of hosts and files. Use when a certificate is about to expire or clients report TLS errors."
	writeSkillFile(t, filepath.Join(dir, "skills", "tls-certs"), "---\nname: tls-certs\ndescription: "+certDesc+"\n---\nBody.\n")
	m := fakemodel.Start(t, fakemodel.Reply{Content: "Checked."}, fakemodel.Reply{Content: "Also checked."})
	env := append(modelEnv(m), "AGENT_CONTEXT_WINDOW=8192")
	if r := thinbot(t, dir, env, "ask", "-s", "does the TLS certificate of www expire soon?"); r.code != 0 {
		t.Fatalf("first ask: %s", r.stderr)
	}
	if r := thinbot(t, dir, env, "ask", "-s", "and what about helper-07?"); r.code != 0 {
		t.Fatalf("second ask: %s", r.stderr)
	}
	reqs := m.Requests()
	sys0, sys1 := reqs[0].Messages[0].Content, reqs[1].Messages[0].Content
	if sys0 != sys1 {
		t.Error("the system prompt changed between the runs of one session")
	}
	if !strings.Contains(sys0, "- tls-certs: "+certDesc) {
		t.Errorf("the matching skill lost its description:\n%s", sys0)
	}
	if !strings.Contains(sys0, "helper-59") {
		t.Error("a skill was dropped from the index")
	}
	verifyChain(t, dbOf(dir))
}
