package skills

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lockFixture installs two skills, one with a read-only script, as an
// administrator would (not writable by the bot, uid 4242424).
func lockFixture(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"disk/SKILL.md":         "---\nname: disk\ndescription: Disk usage.\nmetadata:\n  thinbot:\n    read-only-scripts: [scripts/du.sh]\n---\nRun bash {SKILL_DIR}/scripts/du.sh\n",
		"disk/scripts/du.sh":    "#!/bin/sh\ndf -h\n",
		"notes/SKILL.md":        "---\nname: notes\ndescription: Notes.\n---\nBody.\n",
		"notes/references/a.md": "alpha\n",
	}
	for rel, data := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLockRoundTripIsDeterministic(t *testing.T) {
	root := lockFixture(t)
	set := Load([]string{root}, Options{Probe: Probe{UID: 4242424}})
	lock, err := NewLock(set)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if _, err := lock.WriteTo(&a); err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseLock(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parsed.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("round trip changed the lock:\n%s\n%s", a.String(), b.String())
	}
	lines := strings.Split(strings.TrimSpace(a.String()), "\n")[1:]
	want := []string{"disk/SKILL.md", "disk/scripts/du.sh", "notes/SKILL.md", "notes/references/a.md"}
	if len(lines) != len(want) {
		t.Fatalf("lock lines %q", lines)
	}
	for i, l := range lines {
		if !strings.HasSuffix(l, "  "+want[i]) || len(l) != 64+2+len(want[i]) {
			t.Errorf("line %d %q, want hash  %s", i, l, want[i])
		}
	}
	for _, bad := range []string{"xyz  disk/SKILL.md", strings.Repeat("a", 64) + "  nofile", strings.Repeat("a", 64) + " disk/x"} {
		if _, err := ParseLock(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseLock(%q) accepted", bad)
		}
	}
}

// TestLockHidesChangedSkills changes pinned skills in each way and checks
// each is hidden with a reason naming the file.
func TestLockHidesChangedSkills(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, root string)
		hidden string // skill name, "" for none
		want   string
		err    error
	}{
		{"unchanged", func(*testing.T, string) {}, "", "", nil},
		{"script changed", func(t *testing.T, root string) {
			write(t, filepath.Join(root, "disk/scripts/du.sh"), "#!/bin/sh\nrm -rf /\n")
		}, "disk", "changed: scripts/du.sh (sha256 ", ErrLockMismatch},
		{"file added", func(t *testing.T, root string) {
			write(t, filepath.Join(root, "notes/references/b.md"), "new\n")
		}, "notes", "added: references/b.md", ErrLockMismatch},
		{"file removed", func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, "notes/references/a.md")); err != nil {
				t.Fatal(err)
			}
		}, "notes", "missing: references/a.md", ErrLockMismatch},
		{"new skill", func(t *testing.T, root string) {
			write(t, filepath.Join(root, "extra/SKILL.md"), "---\nname: extra\ndescription: Not reviewed.\n---\n")
		}, "extra", "not in skills.lock", ErrNotLocked},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := lockFixture(t)
			lock, err := NewLock(Load([]string{root}, Options{Probe: Probe{UID: 4242424}}))
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, root)
			set := Load([]string{root}, Options{Probe: Probe{UID: 4242424}, Lock: lock})
			if tc.hidden == "" {
				if len(set.Filtered) != 0 || len(set.Skills) != 2 {
					t.Fatalf("filtered %+v", set.Filtered)
				}
				disk, _ := set.Get("disk")
				if sum, err := disk.Digest(); err != nil || disk.SHA256 != sum || Digest(lock["disk"]) != sum {
					t.Errorf("digest %q, pinned %q, %v", sum, disk.SHA256, err)
				}
				if p := filepath.Join(root, "disk/scripts/du.sh"); set.PinnedScripts()[p] == "" {
					t.Errorf("pinned scripts %v", set.PinnedScripts())
				}
				return
			}
			if len(set.Filtered) != 1 || set.Filtered[0].Name != tc.hidden || !strings.Contains(set.Filtered[0].Reason, tc.want) ||
				!strings.HasPrefix(set.Filtered[0].Reason, tc.err.Error()) {
				t.Fatalf("filtered %+v, want %s hidden: %q", set.Filtered, tc.hidden, tc.want)
			}
			if _, ok := set.Get(tc.hidden); ok {
				t.Error("the hidden skill is loaded")
			}
		})
	}
}

// TestVerifyScript is the check made before a pinned read-only script runs.
func TestVerifyScript(t *testing.T) {
	root := lockFixture(t)
	set := Load([]string{root}, Options{Probe: Probe{UID: 4242424}})
	lock, err := NewLock(set)
	if err != nil {
		t.Fatal(err)
	}
	set = Load([]string{root}, Options{Probe: Probe{UID: 4242424}, Lock: lock})
	p := filepath.Join(root, "disk/scripts/du.sh")
	sum := set.PinnedScripts()[p]
	if err := VerifyScript(p, sum); err != nil {
		t.Fatal(err)
	}
	write(t, p, "#!/bin/sh\necho changed\n")
	if err := VerifyScript(p, sum); !errors.Is(err, ErrLockMismatch) {
		t.Errorf("changed script: %v", err)
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
