package sandbox

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDaemonFilesUnreachable: files the daemon holds open (its chain, a
// token) cannot be read through /proc/<daemon>/fd, /proc/<daemon>/cwd or
// /proc/<daemon>/root by commands of either mode, although the mount that
// hides them is only in the commands' namespaces.
func TestDaemonFilesUnreachable(t *testing.T) {
	r := newRig(t)
	f, err := os.Open(r.token)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pid := os.Getpid()
	for _, m := range []Mode{ReadOnly, Approved} {
		out, _ := r.run(t, m, fmt.Sprintf("ls -l /proc/%d/fd/ 2>&1 | head -3; cat /proc/%d/fd/%d 2>&1; cat /proc/%d/task/%d/fd/%d 2>&1", pid, pid, f.Fd(), pid, pid, f.Fd()))
		if strings.Contains(out, "xoxb-secret-token-value") {
			t.Errorf("%s: a command read the daemon's open token file through /proc: %s", m, out)
		}
		t.Logf("%s: %s", m, out)
	}
}
