package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"golang.org/x/sys/unix"
)

// cmdSandboxExec: thinbot sandbox exec --read-only [--hide PATH]...
//
// The forced command of a fleet's read-only key on a target host
// (authorized_keys: command="/usr/bin/thinbot sandbox exec --read-only"):
// it runs SSH_ORIGINAL_COMMAND with bash inside thinbot's read-only
// sandbox on that host, so a command the daemon's gate misjudged still
// cannot write there, whatever the read-only account may do. Only the
// read-only helper starts. The session's end (/stop or the timeout on the
// daemon's side: sshd stops reading the command's output) kills the
// command; its stdin does not, since a client with no input (ssh -n,
// </dev/null) closes that at once. The exit code is the command's.
func cmdSandboxExec(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sandbox exec")
	readOnly := fs.Bool("read-only", false, "run in the read-only sandbox (required: the only mode offered)")
	var hide stringsFlag
	fs.Var(&hide, "hide", "a `path` the command must see as empty (repeat; e.g. /etc/thinbot)")
	shell := fs.String("shell", "/bin/bash", "the `shell` that runs the command (-c)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if !*readOnly || fs.NArg() > 0 {
		return fmt.Errorf("%w: thinbot sandbox exec --read-only [--hide PATH]... (the command comes from SSH_ORIGINAL_COMMAND)", errUsage)
	}
	command := e.getenv("SSH_ORIGINAL_COMMAND")
	if strings.TrimSpace(command) == "" {
		return errors.New("sandbox exec: no command (SSH_ORIGINAL_COMMAND is empty): this key runs commands, not a login shell")
	}
	dir := e.getenv("HOME")
	if st, err := os.Stat(dir); dir == "" || err != nil || !st.IsDir() {
		dir = "/"
	}
	sb, err := sandbox.Start(ctx, sandbox.Config{Hide: hide, Workspaces: []string{dir}, NoApproved: true})
	if err != nil {
		// Fail closed: without the sandbox nothing runs.
		return fmt.Errorf("sandbox exec: %w; nothing ran", err)
	}
	defer sb.Close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The goroutine ends with the process.
	go func() {
		if waitHangup(e.stdout, e.stderr) {
			cancel()
		}
	}()
	out := &markerToStderr{stdout: e.stdout, stderr: e.stderr}
	env := agentcore.ChildEnv(os.Environ(), []string{"SSH_CONNECTION", "SSH_CLIENT"}, agentcore.DefaultPath)
	res, err := sb.Run(runCtx, sandbox.ReadOnly, sandbox.Cmd{Args: []string{*shell, "-c", command}, Dir: dir, Env: env}, out)
	out.flush()
	if err != nil {
		return fmt.Errorf("sandbox exec: %w", err)
	}
	code := res.ExitCode
	if code < 0 {
		code = 128 + res.Signal
	}
	if code != 0 {
		return exitStatus(code)
	}
	return nil
}

// waitHangup blocks until the reader of one of ws (sshd, for the session's
// output) is gone, and reports true then; false at once when none of ws is
// a file. A poll that asks for no event still gets the hangup (a pipe
// whose read end closed, a socket its peer closed) and the error.
func waitHangup(ws ...io.Writer) bool {
	var fds []unix.PollFd
	for _, w := range ws {
		if f, ok := w.(interface{ Fd() uintptr }); ok {
			fds = append(fds, unix.PollFd{Fd: int32(f.Fd())})
		}
	}
	if len(fds) == 0 {
		return false
	}
	for {
		n, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false
		}
		if n == 0 {
			continue
		}
		open := 0
		for i, p := range fds {
			switch {
			case p.Revents&(unix.POLLHUP|unix.POLLERR) != 0:
				return true
			case p.Revents&unix.POLLNVAL != 0:
				fds[i].Fd = -1 // not open: poll skips it from now on
			}
			if fds[i].Fd >= 0 {
				open++
			}
		}
		if open == 0 {
			return false
		}
	}
}

// exitStatus is a command's non-zero exit code, passed on as thinbot's own
// without a message (the command spoke for itself).
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }
func (s exitStatus) ExitCode() int { return int(s) }
func (s exitStatus) Silent() bool  { return true }

// markerToStderr passes the sandboxed command's output (stdout and stderr
// in one stream) to stdout, except fleet's start marker at its very
// beginning, which goes to stderr where the daemon looks for it.
type markerToStderr struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	head           []byte
	done           bool
}

func (m *markerToStderr) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return m.stdout.Write(p)
	}
	m.head = append(m.head, p...)
	marker := []byte(fleet.StartMarker)
	switch {
	case bytes.HasPrefix(m.head, marker):
		m.done = true
		_, _ = m.stderr.Write(marker)
		if rest := m.head[len(marker):]; len(rest) > 0 {
			_, _ = m.stdout.Write(rest)
		}
	case len(m.head) >= len(marker) || !bytes.HasPrefix(marker, m.head):
		m.done = true
		_, _ = m.stdout.Write(m.head)
	}
	return len(p), nil
}

func (m *markerToStderr) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.done {
		m.done = true
		_, _ = m.stdout.Write(m.head)
	}
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }
