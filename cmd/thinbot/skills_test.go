package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTestSkill writes dir/SKILL.md with the given frontmatter lines.
func writeTestSkill(t *testing.T, dir, front string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\n"+front+"---\nBody.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func skillsEnv(vars map[string]string) (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return vars[k] }}, &out, &errb
}

func TestCmdSkillsList(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	writeTestSkill(t, filepath.Join(d1, "alpha"), "name: alpha\ndescription: First skill.\n")
	writeTestSkill(t, filepath.Join(d2, "alpha"), "name: alpha\ndescription: Shadowed copy.\n")
	writeTestSkill(t, filepath.Join(d2, "Beta"), "description: No name given.\n")
	writeTestSkill(t, filepath.Join(d2, "gamma"), "name: gamma\ndescription: Needs a token.\nrequires:\n  env: [GAMMA_TOKEN]\n")

	e, out, _ := skillsEnv(map[string]string{"AGENT_SKILLS_DIR": d1 + ":" + d2})
	if err := run(t.Context(), e, []string{"skills", "--json"}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		SearchPath []string `json:"search_path"`
		Skills     []struct {
			Name, Description, Dir string
			Warnings               []string
		}
		Shadowed []struct{ Name, Dir, By string }
		Filtered []struct{ Name, Dir, Reason string }
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(got.SearchPath) != 3 || got.SearchPath[2] != "skills" {
		t.Errorf("search path %q", got.SearchPath)
	}
	if len(got.Skills) != 2 || got.Skills[0].Name != "Beta" || got.Skills[1].Name != "alpha" ||
		got.Skills[1].Description != "First skill." || len(got.Skills[0].Warnings) != 2 {
		t.Errorf("skills %+v", got.Skills)
	}
	if len(got.Shadowed) != 1 || got.Shadowed[0].Dir != filepath.Join(d2, "alpha") || got.Shadowed[0].By != filepath.Join(d1, "alpha") {
		t.Errorf("shadowed %+v", got.Shadowed)
	}
	if len(got.Filtered) != 1 || got.Filtered[0].Reason != "requirements not met: environment not set: GAMMA_TOKEN" {
		t.Errorf("filtered %+v", got.Filtered)
	}

	// --dir overrides the environment; the text form names every part.
	e, out, _ = skillsEnv(map[string]string{"GAMMA_TOKEN": "set"})
	if err := run(t.Context(), e, []string{"skills", "--dir", d2, "--dir", d1}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, w := range []string{"loaded (3):", "  alpha  " + filepath.Join(d2, "alpha") + "\n      Shadowed copy.",
		"warning: no name: using the folder's name \"Beta\"", "shadowed (1):", "shadowed by " + filepath.Join(d2, "alpha")} {
		if !strings.Contains(text, w) {
			t.Errorf("text output lacks %q:\n%s", w, text)
		}
	}
	if strings.Contains(text, "hidden (") {
		t.Errorf("gamma hidden although its token is set:\n%s", text)
	}

	e, out, errb := skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "--dir", d1, "--index"}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "- alpha: First skill.\n" || !strings.Contains(errb.String(), "1 skills") {
		t.Errorf("index %q / %q", out, errb)
	}

	e, _, _ = skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "stray"}); !errors.Is(err, errUsage) {
		t.Errorf("stray argument: err = %v", err)
	}
}

func TestCmdSkillsCheck(t *testing.T) {
	root := t.TempDir()
	good := filepath.Join(root, "good-one")
	writeTestSkill(t, good, "name: good-one\ndescription: Works fine.\n")
	warned := filepath.Join(root, "warned")
	writeTestSkill(t, warned, "name: Other Name\ndescription: Loads with warnings.\n")
	broken := filepath.Join(root, "broken")
	writeTestSkill(t, broken, "name: broken\n")

	tests := []struct {
		dir     string
		wantErr bool
		want    []string
	}{
		{good, false, []string{"ok: good-one", "- good-one: Works fine."}},
		{warned, false, []string{"warning: name \"Other Name\" breaks the naming rule", "warning: name \"Other Name\" differs from its folder", "ok: Other Name"}},
		{broken, true, []string{"error: no description"}},
		{filepath.Join(root, "missing"), true, []string{"error: unreadable"}},
		{"../../skills/log-triage", false, []string{"ok: log-triage"}},
	}
	for _, tt := range tests {
		e, out, _ := skillsEnv(nil)
		err := run(t.Context(), e, []string{"skills", "check", tt.dir})
		if (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, errSkillInvalid)) {
			t.Errorf("check %s: err = %v, want error %v", tt.dir, err, tt.wantErr)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("check %s: output lacks %q:\n%s", tt.dir, w, out)
			}
		}
	}
	e, _, _ := skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "check"}); !errors.Is(err, errUsage) {
		t.Errorf("check without a folder: err = %v", err)
	}
}

// TestCmdSkillsInstall installs the embedded packs as a new user would and
// lists them from the installed folder.
func TestCmdSkillsInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skills")
	e, out, _ := skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "install", "--bot-user", "4242424", dir}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "csv-stats, log-triage, promql, skill-author, sys-doctor") {
		t.Errorf("output %q", out)
	}
	e, out, _ = skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "--dir", dir, "--json"}); err != nil {
		t.Fatal(err)
	}
	var got struct{ Skills []struct{ Name, Dir string } }
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Skills) < 2 || got.Skills[0].Dir != filepath.Join(dir, got.Skills[0].Name) {
		t.Errorf("skills %+v", got.Skills)
	}
	e, _, _ = skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "install", "--bot-user", "no-such-user-xyz", dir}); err == nil {
		t.Error("unknown bot user accepted")
	}
}

// TestCmdSkillsLock pins a skill set, changes a script and shows the skill
// hidden with its reason, as an operator would see it.
func TestCmdSkillsLock(t *testing.T) {
	dir := t.TempDir()
	writeTestSkill(t, filepath.Join(dir, "alpha"), "name: alpha\ndescription: First skill.\n")
	writeTestSkill(t, filepath.Join(dir, "beta"), "name: beta\ndescription: Second skill.\n")
	script := filepath.Join(dir, "beta", "scripts", "run.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("echo one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(t.TempDir(), "skills.lock")
	e, out, _ := skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "lock", "--dir", dir, "--out", lock}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "pinned 2 skills, 3 files") {
		t.Errorf("lock output %q", out)
	}
	first, _ := os.ReadFile(lock)
	e, _, _ = skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "lock", "--dir", dir, "--out", lock}); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(lock); !bytes.Equal(first, second) {
		t.Error("the same skills gave a different lock")
	}
	if err := os.WriteFile(script, []byte("echo two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e, out, _ = skillsEnv(map[string]string{"AGENT_SKILLS_LOCK": lock})
	if err := run(t.Context(), e, []string{"skills", "--dir", dir}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "loaded (1):") || !strings.Contains(s, "hidden (1):") ||
		!strings.Contains(s, "files differ from skills.lock: changed: scripts/run.sh") || !strings.Contains(s, "pinned: sha256 ") {
		t.Errorf("skills output:\n%s", s)
	}
	e, _, _ = skillsEnv(nil)
	if err := run(t.Context(), e, []string{"skills", "--dir", dir, "--lock", filepath.Join(dir, "missing.lock")}); err == nil {
		t.Error("a missing lock was accepted")
	}
}
