package skills

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPacksEmbedded checks that every pack folder on disk is embedded with
// all its installable files, so a new pack cannot be left out of the binary.
func TestPacksEmbedded(t *testing.T) {
	var onDisk []string
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(e.Name(), "SKILL.md")); e.IsDir() && err == nil {
			onDisk = append(onDisk, e.Name())
		}
	}
	if got := Packs(); !slices.Equal(got, onDisk) {
		t.Fatalf("embedded packs %q, folders with SKILL.md %q: add the folder to the go:embed line in embed.go", got, onDisk)
	}
	var files []string
	for _, pack := range onDisk {
		err := filepath.WalkDir(pack, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return fs.SkipDir
			}
			if !d.IsDir() && !strings.HasSuffix(p, "_test.go") {
				files = append(files, filepath.ToSlash(p))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(files)
	if got := PackFiles(); !slices.Equal(got, files) {
		t.Errorf("embedded files %q, on disk %q", got, files)
	}
}

// TestInstall writes the packs out twice and loads them as the bot would:
// modes are right, nothing is writable by the bot, sys-doctor keeps its
// read-only script, and the second install changes nothing.
func TestInstall(t *testing.T) {
	const bot = 4242424
	dir := filepath.Join(t.TempDir(), "usr", "share", "thinbot", "skills")
	written, err := Install(dir, bot)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(PackFiles()) {
		t.Errorf("wrote %d files, want %d", len(written), len(PackFiles()))
	}
	snapshot := func() map[string]string {
		m := map[string]string{}
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			data := []byte{}
			if !d.IsDir() {
				if data, err = os.ReadFile(p); err != nil {
					return err
				}
			}
			rel, _ := filepath.Rel(dir, p)
			m[rel] = fi.Mode().String() + " " + string(data)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := snapshot()
	for rel, v := range first {
		mode, _, _ := strings.Cut(v, " ")
		want := "-rw-r--r--"
		switch {
		case strings.HasPrefix(mode, "d"):
			want = "drwxr-xr-x"
		case strings.Contains(rel, "/scripts/"):
			want = "-rwxr-xr-x"
		}
		if mode != want {
			t.Errorf("%s: mode %s, want %s", rel, mode, want)
		}
		if strings.Contains(rel, "testdata") {
			t.Errorf("%s: test data installed", rel)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "sys-doctor", "SKILL.md")); !bytes.Equal(data, mustRead(t, "sys-doctor/SKILL.md")) {
		t.Error("installed sys-doctor/SKILL.md differs from the pack")
	}
	if _, err := Install(dir, bot); err != nil {
		t.Fatalf("second install: %v", err)
	}
	if second := snapshot(); !maps.Equal(first, second) {
		t.Error("second install changed the tree")
	}
	set := Load([]string{dir}, Options{Probe: Probe{UID: bot, Python: func() (int, int, error) { return 3, 12, nil }}})
	var ro []string
	for _, s := range set.Skills {
		ro = append(ro, s.ReadOnlyScripts...)
	}
	if want := filepath.Join(dir, "sys-doctor", "scripts", "doctor.sh"); !slices.Contains(ro, want) {
		t.Errorf("read-only scripts %q, want %s (filtered %+v)", ro, want, set.Filtered)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestInstallRefuses covers the targets the bot's user could change.
func TestInstallRefuses(t *testing.T) {
	root := t.TempDir()
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		bot  int
		want string
	}{
		{"world-writable target", open, 4242424, "group- or world-writable"},
		{"below a world-writable folder", filepath.Join(open, "a", "b"), 4242424, "group- or world-writable"},
		{"run as the bot", filepath.Join(root, "x"), os.Getuid(), "running as the bot's user"},
		{"symlinked target", link, 4242424, "is a symlink"},
		{"no bot user", filepath.Join(root, "y"), -1, "no bot user"},
	}
	if os.Getuid() == 0 {
		owned := filepath.Join(root, "owned")
		if err := os.Mkdir(owned, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(owned, 4242424, 4242424); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name string
			dir  string
			bot  int
			want string
		}{"owned by the bot", filepath.Join(owned, "skills"), 4242424, "owned by the bot's user"})
	} else if os.Getenv("CI") != "" {
		t.Fatal("the owned-by-the-bot case needs root to chown, and CI runs as root")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Install(tc.dir, tc.bot)
			if !errors.Is(err, ErrInstallUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrInstallUnsafe with %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(tc.dir, "sys-doctor")); err == nil {
				t.Error("a pack was written")
			}
		})
	}
}
