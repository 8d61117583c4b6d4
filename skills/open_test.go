package skills

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Requirement-like keys outside requires load with a warning naming where
// they belong.
func TestRequirementLikeTopLevelKeysWarn(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, filepath.Join(root, "loose"), "loose", "Has loose requirements.", "bins: [jq]\nenv: [TOKEN]\npython: \">=3.10\"\nversion: 1.0\n")
	set := Load([]string{root}, Options{Probe: testProbe()})
	sk, ok := set.Get("loose")
	if !ok {
		t.Fatalf("the skill must still load: %+v", set.Filtered)
	}
	want := []string{
		`top-level "bins" looks like a requirement but is not checked: put it under requires (requires: {bins: ...})`,
		`top-level "env" looks like a requirement but is not checked: put it under requires (requires: {env: ...})`,
		`top-level "python" looks like a requirement but is not checked: put it under requires (requires: {python: ...})`,
	}
	if strings.Join(sk.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(sk.Warnings, "\n"), strings.Join(want, "\n"))
	}
	if len(sk.Requires.Bins) != 0 {
		t.Errorf("a top-level bins must not become a requirement silently: %+v", sk.Requires)
	}
	var log bytes.Buffer
	Load([]string{root}, Options{Probe: testProbe(), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if !strings.Contains(log.String(), `level=WARN msg="skill loaded with warnings" skill=loose`) || !strings.Contains(log.String(), `top-level \"bins\" looks like a requirement`) {
		t.Errorf("the warning is not logged:\n%s", log.String())
	}
}

// A long description stays whole in the record; only the index line is cut.
func TestLongDescriptionKeptWhole(t *testing.T) {
	root := t.TempDir()
	long := strings.TrimSpace(strings.Repeat("Summarises logs and finds errors. ", 60))
	writeSkill(t, filepath.Join(root, "long"), "long", long, "")
	set := Load([]string{root}, Options{Probe: testProbe()})
	sk, _ := set.Get("long")
	if sk.Description != long {
		t.Errorf("description cut to %d bytes, want %d", len(sk.Description), len(long))
	}
	if line := set.Index(0); len(line) > MaxIndexLine {
		t.Errorf("index line is %d bytes, over %d", len(line), MaxIndexLine)
	}
}

func TestDirPlaceholders(t *testing.T) {
	body := "a {SKILL_DIR}/x b {baseDir}/y c ${CLAUDE_SKILL_DIR}/z d {{skillDir}}/w e ${SKILL_DIR}/v f {{baseDir}}/u g $SKILL_DIR stays"
	want := "a /s/x b /s/y c /s/z d /s/w e /s/v f /s/u g $SKILL_DIR stays"
	if got := ReplaceDir(body, "/s"); got != want {
		t.Errorf("ReplaceDir =\n%s\nwant\n%s", got, want)
	}
}

// Bodies are read when a skill is opened: an edited body is served as
// edited; a removed file, or one swapped for a symlink out of the folder,
// gives a clear error.
func TestBodyIsReadWhenOpened(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "live")
	writeSkill(t, dir, "live", "Live body.", "")
	set := Load([]string{root}, Options{Probe: testProbe()})
	sk, _ := set.Get("live")
	file := filepath.Join(dir, "SKILL.md")
	if err := os.WriteFile(file, []byte("---\nname: live\ndescription: Live body.\n---\nEdited: run ${CLAUDE_SKILL_DIR}/go.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := sk.Text()
	if err != nil || !strings.HasPrefix(text, "Edited: run "+sk.Dir+"/go.sh") {
		t.Errorf("Text after an edit = %q, %v", text, err)
	}
	if err := os.WriteFile(file, []byte("no frontmatter any more"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sk.Text(); err == nil || !strings.Contains(err.Error(), "no longer parses") {
		t.Errorf("broken file: err = %v", err)
	}
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("---\nname: x\ndescription: y\n---\nSECRET\n"), 0o644)
	os.Remove(file)
	if _, err := sk.Text(); err == nil || !strings.Contains(err.Error(), "readable when thinbot started") {
		t.Errorf("removed file: err = %v", err)
	}
	if err := os.Symlink(secret, file); err != nil {
		t.Fatal(err)
	}
	if text, err := sk.Text(); err == nil || strings.Contains(text, "SECRET") {
		t.Errorf("symlink out of the folder: text %q, err %v", text, err)
	}
}

// Load reads only the frontmatter: a body that is not even text does not
// matter until the skill is opened.
func TestLoadReadsFrontmatterOnly(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "front")
	os.MkdirAll(dir, 0o755)
	data := "---\nname: front\ndescription: Front only.\n---\n" + strings.Repeat("x", 100<<10)
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readFront(filepath.Join(dir, "SKILL.md"), defaultMaxFileSize)
	if err != nil || string(got) != "---\nname: front\ndescription: Front only.\n---\n" {
		t.Errorf("readFront = %q, %v", got, err)
	}
	if _, ok := Load([]string{root}, Options{Probe: testProbe()}).Get("front"); !ok {
		t.Error("skill not loaded")
	}
}

// FuzzFrontPrefix checks that reading only the frontmatter gives the same
// frontmatter (or the same error) as reading the whole file.
func FuzzFrontPrefix(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/corpus/*/SKILL.md")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("---\nname: a\n---   \nbody\n---\n"))
	f.Add([]byte("\xef\xbb\xbf---\r\nname: a\r\n---\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		front, err := frontPrefix(strings.NewReader(string(data)), 1<<20)
		if err != nil {
			t.Fatalf("frontPrefix: %v", err)
		}
		if !strings.HasPrefix(string(data), string(front)) {
			t.Fatalf("prefix %q is not a prefix of %q", front, data)
		}
		fm1, _, err1 := ParseFrontmatter(data)
		fm2, _, err2 := ParseFrontmatter(front)
		if (err1 == nil) != (err2 == nil) || fmt.Sprint(fm1) != fmt.Sprint(fm2) {
			t.Fatalf("whole file: %v %v; prefix %q: %v %v", fm1, err1, front, fm2, err2)
		}
	})
}
