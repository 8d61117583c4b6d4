package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// procViewChildEnv makes the test binary the daemon of TestProcShowsNoHiddenPath.
const procViewChildEnv = "SANDBOX_TEST_PROC_VIEW"

// procViewMain, when the test binary was started by
// TestProcShowsNoHiddenPath, is a daemon as cmd/thinbot's main sets one up:
// HideEnviron first, then a sandbox that hides the paths its arguments
// name (after "--hide"), and a read-only command that reads the command
// lines of the daemon and of both helpers, what ps shows, and the other
// files of /proc/<pid> that could name a path (environ, maps, fds, cwd,
// root, exe; mountinfo is left out: see the test). It prints
// its arguments as it got them back and what the command saw, then exits.
func procViewMain() {
	_, handed := os.LookupEnv(environFD)
	if os.Getenv(procViewChildEnv) == "" && !handed {
		return
	}
	if err := HideEnviron(os.Args); err != nil || os.Getenv(procViewChildEnv) == "" {
		fmt.Println("set-up: hide the environment:", err)
		os.Exit(1)
	}
	fmt.Printf("args: %q\n", os.Args)
	var hide []string
	for i, a := range os.Args {
		if a == "--hide" && i+1 < len(os.Args) {
			hide = append(hide, os.Args[i+1])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := Start(ctx, Config{Hide: hide, Workspaces: []string{"/tmp"}})
	if err != nil {
		fmt.Println("set-up: start:", err)
		os.Exit(1)
	}
	defer sb.Close()
	ro, rw := sb.helperLocked(ReadOnly), sb.helperLocked(Approved)
	script := fmt.Sprintf(`for p in %d %d %d; do echo "cmdline $p: $(tr '\0' ' ' < /proc/$p/cmdline)"; done; ps -eo pid=,args=; for p in %[1]d %[2]d %[3]d; do for f in environ maps smaps fd fdinfo map_files cwd root exe status comm stack syscall; do echo "== $p $f"; ls -l /proc/$p/$f/ 2>&1; cat /proc/$p/$f 2>&1; done; done`, os.Getpid(), ro.proc.Pid, rw.proc.Pid)
	var out bytes.Buffer
	if _, err := sb.Run(ctx, ReadOnly, Cmd{Args: []string{"/bin/sh", "-c", script}, Dir: "/", Env: []string{testPath}}, &out); err != nil {
		fmt.Println("set-up: run:", err)
		os.Exit(1)
	}
	fmt.Printf("seen:\n%s", out.String())
	sb.Close()
	os.Exit(0)
}

// TestProcShowsNoHiddenPath: the paths the sandbox hides (the config file,
// the state dir, token files) are named nowhere a read-only command can
// read them in /proc: not in a helper's command line (its configuration
// comes in a memfd, not as an argument), not in the daemon's (HideEnviron
// hands its arguments over the same way, and the program still gets them
// all); environ, maps, fd and fdinfo links, cwd, root and exe of the daemon
// and the helpers are closed to a read-only command (another user, no
// ptrace access). Not covered, by design: /proc/<pid>/mountinfo and mounts
// of the helpers, and the command's own, list each hidden path as the
// mount point that hides it (the package doc: "their names may still be
// listed; their content cannot be read").
func TestProcShowsNoHiddenPath(t *testing.T) {
	newRig(t) // skips where the host refuses the sandbox
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	state := filepath.Join(dir, "state")
	os.WriteFile(config, []byte("x: 1\n"), 0o600)
	os.Mkdir(state, 0o700)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "serve", "--config", config, "--hide", config, "--hide", state)
	cmd.Env = []string{procViewChildEnv + "=1", testPath}
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("daemon: %v\n%s", err, out)
	}
	args, seen, ok := strings.Cut(out, "seen:\n")
	if !ok {
		t.Fatalf("no report:\n%s", out)
	}
	// The program gets its arguments back whole.
	if want := fmt.Sprintf("%q", []string{os.Args[0], "serve", "--config", config, "--hide", config, "--hide", state}); !strings.Contains(args, want) {
		t.Errorf("the daemon's arguments after the hand-over: %s, want %s", args, want)
	}
	// The command did read the three command lines (so a missing path
	// below means hidden, not unread).
	if n := len(regexp.MustCompile(`(?m)^cmdline `).FindAllString(seen, -1)); n != 3 || !strings.Contains(seen, helperArg) || !strings.Contains(seen, filepath.Base(os.Args[0])+" serve") {
		t.Fatalf("the read-only command did not see the daemon's and both helpers' command lines:\n%s", seen)
	}
	for _, p := range []string{config, state} {
		if strings.Contains(seen, p) {
			t.Errorf("a read-only command sees the hidden path %s in /proc:\n%s", p, seen)
		}
	}
}
