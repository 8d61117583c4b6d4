package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStartProfiles writes the daemon's profiles with and without the
// execution trace: every profile asked for is there and not empty, and the
// trace only when asked for.
func TestStartProfiles(t *testing.T) {
	for _, withTrace := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "prof")
		stop, err := startProfiles(dir, withTrace)
		if err != nil {
			t.Fatalf("trace %v: startProfiles: %v", withTrace, err)
		}
		if err := stop(); err != nil {
			t.Fatalf("trace %v: stop: %v", withTrace, err)
		}
		want := map[string]bool{"cpu.pprof": true, "heap.pprof": true, "allocs.pprof": true, "mutex.pprof": true,
			"trace.out": withTrace, "block.pprof": withTrace}
		for name, there := range want {
			fi, err := os.Stat(filepath.Join(dir, name))
			switch {
			case there && (err != nil || fi.Size() == 0):
				t.Errorf("trace %v: %s: %v", withTrace, name, err)
			case !there && err == nil:
				t.Errorf("trace %v: %s written, want none", withTrace, name)
			}
		}
	}
}

// TestProfileFilesPrivate: profiles are written mode 0600, never through a
// symlink, and only into a directory nobody else can write.
func TestProfileFilesPrivate(t *testing.T) {
	t.Run("modes", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "prof")
		// A file left by an earlier run, readable by others.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "heap.pprof"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		stop, err := startProfiles(dir, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", e.Name(), fi.Mode().Perm())
			}
		}
	})
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		victim := filepath.Join(t.TempDir(), "action.key")
		if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(dir, "cpu.pprof")); err != nil {
			t.Fatal(err)
		}
		if stop, err := startProfiles(dir, false); err == nil {
			stop()
			t.Error("startProfiles wrote through a symlink")
		}
		if b, _ := os.ReadFile(victim); string(b) != "secret" {
			t.Errorf("the symlink's target was overwritten: %q", b)
		}
	})
	t.Run("shared dir", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if stop, err := startProfiles(dir, false); err == nil {
			stop()
			t.Error("startProfiles accepted a directory others can write")
		}
	})
}
