package tests

import (
	"encoding/json"
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
