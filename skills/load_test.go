package skills

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// testProbe is a machine where only sh is installed, OC_TOKEN and HOME_SET
// are set, python3 is 3.11, and the bot runs as a user owning no files.
func testProbe() Probe {
	env := map[string]string{"OC_TOKEN": "x", "HOME_SET": "y"}
	return Probe{
		LookPath: func(s string) (string, error) {
			if s == "sh" {
				return "/bin/sh", nil
			}
			return "", errors.New("not found")
		},
		Getenv: func(k string) string { return env[k] },
		Python: func() (int, int, error) { return 3, 11, nil },
		UID:    4242424,
	}
}

func TestLoadCorpus(t *testing.T) {
	set := Load([]string{"testdata/corpus"}, Options{Probe: testProbe()})
	type loaded struct {
		name, desc string
		warnings   []string
	}
	want := []loaded{
		{"404", "Explains HTTP status codes.", []string{`name "404" differs from its folder "numeric-name"`}},
		{"PDF Tools", "Fills PDF forms.", []string{
			`name "PDF Tools" breaks the naming rule (lowercase letters, digits, single hyphens, at most 64 characters)`,
			`name "PDF Tools" differs from its folder "bad-name"`}},
		{"body-hr", "The body has a horizontal rule.", nil},
		{"bom", "Starts with a byte order mark.", nil},
		{"claude-style", "Reviews a pull request diff for risky changes. Use when the user asks for a code review.", nil},
		{"codex-style", "Turns a failing CI log into a short root-cause note. Use when a build is red.", nil},
		{"colon-fallback", "Use when: the user mentions backups or restores", []string{
			"frontmatter is not valid YAML (line 2: mapping values are not allowed in this context); read line by line"}},
		{"crlf", "Written on Windows with a folded continuation.", nil},
		{"dup-key", "second wins", []string{`duplicate key "description": the last one is used`}},
		{"folded", "Summarises disk usage per directory,\nlargest first.", nil},
		{"literal", "Line one of the description.\nLine two: with a colon.", nil},
		{"long-desc", strings.TrimSpace(strings.Repeat("lorem ipsum ", 130)), []string{
			"description is 1559 characters, over the format's limit of 1024: kept whole, only its index line is cut"}},
		{"no-name", "A skill without a name field.", []string{`no name: using the folder's name "no-name"`}},
		{"openclaw-style", "Query the weather service (needs the OC token).", nil},
		{"other-name", "Its name differs from its folder.", []string{`name "other-name" differs from its folder "mismatch"`}},
		{"plain", "Counts words in text files.", nil},
		{"quoted", `Explains "why" a unit failed: reads journal, it's careful.`, nil},
		{"requires-ok", "Needs sh, python 3.8 and HOME_SET.", nil},
		{"requires-prose", "Declares requirements as prose.", []string{"requires is a list, not a mapping of bins/python/env: ignored"}},
		{"unicode", "Prüft Zertifikate und meldet Ablaufdaten — 証明書の期限を確認します。", nil},
	}
	var got []loaded
	for _, s := range set.Skills {
		got = append(got, loaded{s.Name, s.Description, s.Warnings})
	}
	if len(got) != len(want) {
		t.Errorf("loaded %d skills, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.name != w.name || g.desc != w.desc || !slices.Equal(g.warnings, w.warnings) {
			t.Errorf("skill %d = %q %q %q\nwant %q %q %q", i, g.name, g.desc, g.warnings, w.name, w.desc, w.warnings)
		}
	}

	wantFiltered := []Filtered{
		{"anybins-none", "anybins-none", "requirements not met: none of these on PATH: nope-one, nope-two"},
		{"description-list", "description-list", "no description: description is not text"},
		{"empty-description", "empty-description", "no description"},
		{"empty-frontmatter", "empty-frontmatter", "no description"},
		{"invalid-yaml", "invalid-yaml", "invalid frontmatter: yaml: line 1: did not find expected ',' or ']'"},
		{"missing-bin", "missing-bin", "requirements not met: not on PATH: no-such-tool-xyz"},
		{"missing-env", "missing-env", "requirements not met: environment not set: UNSET_TOKEN"},
		{"no-description", "no-description", "no description"},
		{"no-frontmatter", "no-frontmatter", "no frontmatter: SKILL.md must start with a --- line"},
		{"not-mapping", "not-mapping", "invalid frontmatter: frontmatter is not a mapping"},
		{"old-python", "old-python", "requirements not met: python3 >= 3.99 needed, found 3.11"},
		{"scalar-frontmatter", "scalar-frontmatter", "invalid frontmatter: frontmatter is not a mapping"},
		{"skillmd-dir", "skillmd-dir", "unreadable: SKILL.md is not a regular file"},
		{"unclosed", "unclosed", "frontmatter is never closed by a --- line"},
		{"wrong-os", "wrong-os", "requirements not met: runs on windows, not " + runtime.GOOS},
	}
	if len(set.Filtered) != len(wantFiltered) {
		t.Errorf("filtered %d, want %d: %+v", len(set.Filtered), len(wantFiltered), set.Filtered)
	}
	for i := range min(len(set.Filtered), len(wantFiltered)) {
		g, w := set.Filtered[i], wantFiltered[i]
		if filepath.Base(g.Dir) != w.Dir || g.Name != w.Name || g.Reason != w.Reason {
			t.Errorf("filtered %d = %q %q %q\nwant %q %q %q", i, filepath.Base(g.Dir), g.Name, g.Reason, w.Dir, w.Name, w.Reason)
		}
	}
	if len(set.Shadowed) != 0 {
		t.Errorf("shadowed = %+v, want none", set.Shadowed)
	}

	// Field details of the other agents' styles.
	cs, _ := set.Get("claude-style")
	if !slices.Equal(cs.AllowedTools, []string{"Read", "Grep", "Bash(git diff:*)"}) {
		t.Errorf("claude-style allowed-tools = %q", cs.AllowedTools)
	}
	if cs.Extra["argument-hint"] != "<pr-number> [--strict]" || cs.Extra["model"] != "inherit" {
		t.Errorf("claude-style extra = %v", cs.Extra)
	}
	oc, _ := set.Get("openclaw-style")
	if !slices.Equal(oc.Requires.Bins, []string{"sh"}) || !slices.Equal(oc.Requires.Env, []string{"OC_TOKEN"}) {
		t.Errorf("openclaw-style requires = %+v", oc.Requires)
	}
	if oc.Extra["homepage"] != "https://example.org/weather" {
		t.Errorf("openclaw-style extra = %v", oc.Extra)
	}
	rq, _ := set.Get("requires-ok")
	if want := (Requires{Bins: []string{"sh"}, Env: []string{"HOME_SET"}, Python: "3.8"}); fmt.Sprint(rq.Requires) != fmt.Sprint(want) {
		t.Errorf("requires-ok requires = %+v, want %+v", rq.Requires, want)
	}
	cx, _ := set.Get("codex-style")
	if cx.License != "Apache-2.0" || cx.Metadata["short-description"] != "CI root cause" {
		t.Errorf("codex-style license %q metadata %v", cx.License, cx.Metadata)
	}
	hr, _ := set.Get("body-hr")
	if b, err := hr.ReadBody(); err != nil || b != "Above\n\n---\n\nBelow\n" {
		t.Errorf("body-hr body = %q, %v", b, err)
	}
	crlf, _ := set.Get("crlf")
	if b, err := crlf.ReadBody(); err != nil || b != "Body line\n" {
		t.Errorf("crlf body = %q, %v", b, err)
	}
	for _, s := range set.Skills {
		if !filepath.IsAbs(s.Dir) || s.File != filepath.Join(s.Dir, "SKILL.md") {
			t.Errorf("%s: Dir %q File %q not absolute", s.Name, s.Dir, s.File)
		}
	}
	if _, ok := set.Get("hidden"); ok {
		t.Error("a dot-folder skill was loaded")
	}
}

func TestLoadOne(t *testing.T) {
	tests := []struct {
		dir     string
		wantErr error
		warns   int
	}{
		{"plain", nil, 0},
		{"colon-fallback", nil, 1},
		{"bad-name", nil, 2},
		{"unclosed", ErrUnclosedFrontmatter, 0},
		{"no-frontmatter", ErrNoFrontmatter, 0},
		{"invalid-yaml", ErrInvalidFrontmatter, 0},
		{"no-description", ErrNoDescription, 0},
		{"missing-bin", ErrRequirements, 0},
		{"skillmd-dir", ErrUnreadable, 0},
		{"not-a-skill", ErrNoSkillFile, 0},
		{"does-not-exist", ErrUnreadable, 0},
	}
	for _, tt := range tests {
		sk, err := LoadOne(filepath.Join("testdata/corpus", tt.dir), Options{Probe: testProbe()})
		if !errors.Is(err, tt.wantErr) || (tt.wantErr != nil && err == nil) {
			t.Errorf("LoadOne(%s) err = %v, want %v", tt.dir, err, tt.wantErr)
		}
		if len(sk.Warnings) != tt.warns {
			t.Errorf("LoadOne(%s) warnings = %q, want %d", tt.dir, sk.Warnings, tt.warns)
		}
	}
}

// writeSkill writes dir/SKILL.md with the given name, description and
// extra frontmatter lines.
func writeSkill(t testing.TB, dir, name, desc, extra string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("---\nname: %s\ndescription: %s\n%s---\nBody of %s.\n", name, desc, extra, name)
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestShadowing(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	writeSkill(t, filepath.Join(d1, "a"), "a", "first a", "")
	writeSkill(t, filepath.Join(d2, "a"), "a", "second a", "")
	writeSkill(t, filepath.Join(d2, "b"), "b", "only b", "")
	writeSkill(t, filepath.Join(d1, "c"), "c", "broken c", "requires:\n  bins: [no-such-tool]\n")
	writeSkill(t, filepath.Join(d2, "c"), "c", "working c", "")
	writeSkill(t, filepath.Join(d2, "x"), "dup", "dup in x", "")
	writeSkill(t, filepath.Join(d2, "y"), "dup", "dup in y", "")
	missing := filepath.Join(d1, "missing")

	set := Load([]string{d1, missing, d2}, Options{Probe: testProbe()})
	var got []string
	for _, s := range set.Skills {
		got = append(got, s.Name+"="+s.Description)
	}
	want := []string{"a=first a", "b=only b", "c=working c", "dup=dup in x"}
	if !slices.Equal(got, want) {
		t.Errorf("loaded %q, want %q", got, want)
	}
	wantShadow := []Shadowed{
		{"a", filepath.Join(d2, "a"), filepath.Join(d1, "a")},
		{"dup", filepath.Join(d2, "y"), filepath.Join(d2, "x")},
	}
	if !slices.Equal(set.Shadowed, wantShadow) {
		t.Errorf("shadowed %+v, want %+v", set.Shadowed, wantShadow)
	}
	if len(set.Filtered) != 1 || set.Filtered[0].Name != "c" {
		t.Errorf("filtered %+v, want c only", set.Filtered)
	}
}

func TestLoadHostileFolders(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	writeSkill(t, filepath.Join(root, "good"), "good", "still loads", "")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(root, "loop"), filepath.Join(root, "loop")))
	must(os.Symlink(root, filepath.Join(root, "parent")))
	must(os.MkdirAll(filepath.Join(root, "mdloop"), 0o755))
	must(os.Symlink("SKILL.md", filepath.Join(root, "mdloop", "SKILL.md")))
	must(os.MkdirAll(filepath.Join(root, "dangling"), 0o755))
	must(os.Symlink("nowhere.md", filepath.Join(root, "dangling", "SKILL.md")))
	writeSkill(t, filepath.Join(outside, "real"), "escape", "outside", "")
	must(os.MkdirAll(filepath.Join(root, "escape"), 0o755))
	must(os.Symlink(filepath.Join(outside, "real", "SKILL.md"), filepath.Join(root, "escape", "SKILL.md")))
	must(os.MkdirAll(filepath.Join(root, "huge"), 0o755))
	huge := append([]byte("---\nname: huge\ndescription: big\n---\n"), make([]byte, 10<<20)...)
	must(os.WriteFile(filepath.Join(root, "huge", "SKILL.md"), huge, 0o644))
	must(mkfifo(t, filepath.Join(root, "fifo")))
	// A symlinked skill folder inside the root loads under its resolved path.
	must(os.Symlink(filepath.Join(root, "good"), filepath.Join(root, "alias")))

	set := Load([]string{root}, Options{Probe: testProbe()})
	reasons := map[string]string{}
	for _, f := range set.Filtered {
		reasons[filepath.Base(f.Dir)] = f.Reason
	}
	want := map[string]string{
		"loop":     "unreadable: too many levels of symbolic links",
		"mdloop":   "unreadable: too many levels of symbolic links",
		"dangling": "unreadable: SKILL.md is a broken symlink",
		"escape":   "unreadable: SKILL.md links outside its folder",
		"huge":     fmt.Sprintf("SKILL.md too large: %d bytes, over the 262144-byte limit", len(huge)),
	}
	if runtime.GOOS != "windows" {
		want["fifo"] = "unreadable: SKILL.md is not a regular file"
	}
	for k, w := range want {
		if reasons[k] != w {
			t.Errorf("%s: reason %q, want %q", k, reasons[k], w)
		}
	}
	if len(reasons) != len(want) {
		t.Errorf("filtered %v, want %v", reasons, want)
	}
	if len(set.Skills) != 1 || set.Skills[0].Name != "good" {
		t.Errorf("skills %+v, want good only", set.Skills)
	}
	if len(set.Shadowed) != 1 || set.Shadowed[0].Name != "good" {
		t.Errorf("shadowed %+v, want the alias of good", set.Shadowed)
	}
}

func TestReadOnlyScripts(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	skill := filepath.Join(root, "ro")
	writeSkill(t, skill, "ro", "read-only scripts", `read-only-scripts: scripts/top.py
metadata:
  thinbot:
    read-only-scripts:
      - scripts/ok.sh
      - "{SKILL_DIR}/scripts/ok.sh"
      - scripts/ww.sh
      - scripts/link.sh
      - scripts/inner-link.sh
      - ../ro/scripts/ok.sh
      - ../other.sh
      - /etc/passwd
      - scripts/missing.sh
      - scripts
      - scripts/open/x.sh
`)
	files := map[string]os.FileMode{
		"scripts/ok.sh": 0o755, "scripts/top.py": 0o644, "scripts/ww.sh": 0o666, "scripts/open/x.sh": 0o755,
	}
	for rel, mode := range files {
		p := filepath.Join(skill, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("echo hi\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "evil.sh"), []byte("rm -rf /\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{skill, 0o755}, {filepath.Join(skill, "scripts"), 0o755}, {filepath.Join(skill, "scripts", "open"), 0o777}, {root, 0o755}} {
		if err := os.Chmod(c.path, c.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "evil.sh"), filepath.Join(skill, "scripts", "link.sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ok.sh", filepath.Join(skill, "scripts", "inner-link.sh")); err != nil {
		t.Fatal(err)
	}

	sk, err := LoadOne(skill, Options{Probe: testProbe()})
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(skill)
	want := []string{filepath.Join(real, "scripts", "top.py"), filepath.Join(real, "scripts", "ok.sh")}
	if !slices.Equal(sk.ReadOnlyScripts, want) {
		t.Errorf("ReadOnlyScripts = %q, want %q", sk.ReadOnlyScripts, want)
	}
	wantWarn := []string{
		`"scripts/ww.sh" not declared: the script is group- or world-writable`,
		`"scripts/link.sh" not declared: symlink leads out of the skill folder`,
		`"../other.sh" not declared: path leaves the skill folder`,
		`"/etc/passwd" not declared: path must be relative to the skill folder`,
		`"scripts/missing.sh" not declared: no such file or directory`,
		`"scripts" not declared: not a regular file`,
		`"scripts/open/x.sh" not declared: folder ` + filepath.Join(real, "scripts", "open") + ` is group- or world-writable`,
	}
	if len(sk.Warnings) != len(wantWarn) {
		t.Errorf("warnings %q, want %d", sk.Warnings, len(wantWarn))
	}
	for i := range min(len(wantWarn), len(sk.Warnings)) {
		if !strings.HasSuffix(sk.Warnings[i], wantWarn[i]) {
			t.Errorf("warning %d = %q, want suffix %q", i, sk.Warnings[i], wantWarn[i])
		}
	}

	// The bot's own files are writable by the bot, so nothing is read-only.
	own := testProbe()
	own.UID = -1
	sk, err = LoadOne(skill, Options{Probe: own})
	if err != nil {
		t.Fatal(err)
	}
	if len(sk.ReadOnlyScripts) != 0 {
		t.Errorf("ReadOnlyScripts for the owner = %q, want none", sk.ReadOnlyScripts)
	}
	set := Set{Skills: []Skill{{Name: "b", ReadOnlyScripts: []string{"/b", "/a"}}, {Name: "c", ReadOnlyScripts: []string{"/a"}}}}
	if got := set.ReadOnlyScripts(); !slices.Equal(got, []string{"/a", "/b"}) {
		t.Errorf("Set.ReadOnlyScripts = %q", got)
	}
}
