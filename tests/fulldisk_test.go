package tests

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// TestCLIFullDisk: with the state dir on a full file system, a run stops
// with a clear error before anything runs, the chain loses nothing, and
// once there is room again thinbot carries on where it was.
func TestCLIFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root to mount a small tmpfs, and CI runs as root")
		}
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, ".thinbot")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=4m,mode=0700"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("cannot mount a tmpfs here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(state, syscall.MNT_DETACH) })

	m := fakemodel.Start(t, run("df -h"), fakemodel.Reply{Content: "Disks look fine."})
	if r := thinbot(t, dir, modelEnv(m), "ask", "how are the disks?"); r.code != 0 {
		t.Fatalf("first ask: exit %d: %s", r.code, r.stderr)
	}
	before := auditVerify(t, dir)

	// Fill the file system to the last block.
	filler := filepath.Join(state, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()

	// The run may stop before the model is asked: its replies may be left.
	m2 := fakemodel.New(run("touch written"), fakemodel.Reply{Content: "done"})
	t.Cleanup(m2.Close)
	r := thinbot(t, dir, modelEnv(m2), "ask", "-a", "create a file")
	if r.code == 0 || !strings.Contains(r.stderr, "no space left on device") {
		t.Fatalf("ask on a full disk: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "written")); err == nil {
		t.Error("a command ran although its decision could not be recorded")
	}
	t.Logf("on a full disk: %s", strings.TrimSpace(r.stderr))

	os.Remove(filler)
	if got := auditVerify(t, dir); !strings.HasPrefix(got, before) && got != before {
		t.Errorf("after the full disk the chain is %q, before it was %q", got, before)
	}
	m3 := fakemodel.Start(t, fakemodel.Reply{Content: "back"})
	if r := thinbot(t, dir, modelEnv(m3), "ask", "still there?"); r.code != 0 || strings.TrimSpace(r.stdout) != "back" {
		t.Fatalf("ask after freeing space: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	auditVerify(t, dir)
}

// auditVerify runs `thinbot audit verify` on dir's store and the JSONL,
// failing the test unless both verify; it returns the store's line.
func auditVerify(t *testing.T, dir string) string {
	t.Helper()
	verifyChain(t, dbOf(dir))
	r := thinbot(t, dir, nil, "audit", "verify", "--jsonl", filepath.Join(dir, ".thinbot", "audit.jsonl"))
	if r.code != 0 {
		t.Fatalf("audit verify --jsonl: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	return r.stdout
}
