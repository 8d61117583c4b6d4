//go:build unix

package skills

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mkfifo makes dir/SKILL.md a named pipe, which would block a naive reader.
func mkfifo(t *testing.T, dir string) error {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return syscall.Mkfifo(filepath.Join(dir, "SKILL.md"), 0o644)
}
