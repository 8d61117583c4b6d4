package agentcore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/skills"
)

// pinnedSkill writes a skill with a read-only script and loads it pinned
// by a lock of its files, as the bot's user (uid 4242424) would.
func pinnedSkill(t *testing.T) (skills.Set, string) {
	t.Helper()
	root := t.TempDir()
	script := filepath.Join(root, "disk", "scripts", "du.sh")
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "disk", "SKILL.md"), []byte("---\nname: disk\ndescription: Disk usage.\nread-only-scripts: [scripts/du.sh]\n---\nRun bash {SKILL_DIR}/scripts/du.sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("echo pinned-script-ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := skills.Options{Probe: skills.Probe{UID: 4242424}}
	lock, err := skills.NewLock(skills.Load([]string{root}, opts))
	if err != nil {
		t.Fatal(err)
	}
	opts.Lock = lock
	set := skills.Load([]string{root}, opts)
	if len(set.Skills) != 1 || len(set.PinnedScripts()) != 1 {
		t.Fatalf("skills %+v filtered %+v", set.Skills, set.Filtered)
	}
	return set, script
}

// The chain records the hash of every file of a skill the model opens.
func TestSkillOpenRecordsHash(t *testing.T) {
	set, _ := pinnedSkill(t)
	f := newFixture(t, Config{Skills: set}, call(ToolSkill, `{"name":"disk"}`), say("ok"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "disk?", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	var got []SkillOpenedPayload
	for _, e := range f.events(t, "s") {
		if e.Type == EvSkillOpened {
			var p SkillOpenedPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			got = append(got, p)
		}
	}
	want := set.Skills[0].SHA256
	if len(got) != 1 || got[0].Name != "disk" || got[0].SHA256 != want || got[0].Pinned != want || len(want) != 64 {
		t.Errorf("skill_opened %+v, want sha256 %s", got, want)
	}
}

// A pinned read-only script passes the gate only with its pinned hash: once
// changed, it needs an approval (refused here: no approver), and a changed
// skill is not opened.
func TestPinnedScriptChangedNeedsApproval(t *testing.T) {
	set, script := pinnedSkill(t)
	var saw []string
	var changed bool
	then := func(next func(Request) (Response, error)) func(Request) (Response, error) {
		return func(r Request) (Response, error) {
			saw = append(saw, lastToolContent(r))
			return next(r)
		}
	}
	tamper := func(r Request) (Response, error) {
		if err := os.WriteFile(script, []byte("echo tampered\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		changed = true
		return runCmd("bash " + script)(r)
	}
	f := newFixture(t, Config{Skills: set},
		runCmd("bash "+script), then(tamper), then(call(ToolSkill, `{"name":"disk"}`)), then(say("done")))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "disk?", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	if !changed || len(saw) != 3 {
		t.Fatalf("saw %q", saw)
	}
	if !strings.Contains(saw[0], "pinned-script-ran") {
		t.Errorf("pinned script did not pass: %q", saw[0])
	}
	if strings.Contains(saw[1], "tampered") || !strings.Contains(saw[1], "approval") || !strings.Contains(saw[1], "skills.lock") {
		t.Errorf("changed script: model saw %q", saw[1])
	}
	if !strings.Contains(saw[2], "changed since it was pinned") {
		t.Errorf("changed skill opened: %q", saw[2])
	}
}
