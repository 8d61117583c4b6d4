package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// TestBeginSandboxPublishesOnlyItsOutcome: the terminal commands start the
// sandbox in the background (beginSandbox), no child process starts before
// it has ended (afterStart), and what commands wait for
// (ExecConfig.Starting) answers only once the start has ended, with a
// sandbox or the reason there is none, never with neither (which would run
// a pass verdict unconfined), and only after the process was made
// non-dumpable (Harden, which comes after the helpers' start).
func TestBeginSandboxPublishesOnlyItsOutcome(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, ".thinbot")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// An earlier test may have hardened this process already.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	s := beginSandbox(t.Context(), "", []string{state}, []string{dir}, slog.New(slog.DiscardHandler))
	defer s.close()
	// python3's version probe, the one child the start-up may run, waits
	// for the start: it may move this process into a leaf cgroup, which a
	// child forked meanwhile would defeat. (The start takes milliseconds:
	// a probe that did not wait runs while it is under way.)
	s.afterStart(func() (int, int, error) {
		select {
		case <-s.started:
		default:
			t.Error("python3 ran while the sandbox was still starting")
		}
		return 3, 12, nil
	})()
	c := s.exec(agentcore.ExecConfig{})
	if c.Starting == nil || c.Sandbox != nil || c.NoSandbox != "" {
		t.Fatalf("exec of a start under way: Starting set %v, Sandbox %v, NoSandbox %q", c.Starting != nil, c.Sandbox, c.NoSandbox)
	}
	sb, no, err := c.Starting(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if sb == nil && no == "" {
		t.Fatal("the start ended with neither a sandbox nor the reason there is none")
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("dumpable = %d (%v) when the start's outcome was published", d, err)
	}
	if sb != nil {
		if hidden := strings.Join(sb.Info(sandbox.ReadOnly).Hidden, " "); !strings.Contains(hidden, state) {
			t.Errorf("the state dir is not hidden: %s", hidden)
		}
	}
}
