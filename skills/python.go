package skills

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// defaultPythonTimeout bounds a PythonProbe's run of python3 when its
// Timeout is 0. It is generous on purpose: a skill hidden because a busy
// host started python3 slowly stays hidden until the next restart, and
// python3 -I -S starts in about 10 ms on an idle machine, 0.1 s with two
// cores running eight busy loops (skills/README.md); the 5 s bound this
// replaces was exceeded under load.
const defaultPythonTimeout = time.Minute

// PythonProbe reads python3's version once: the first call of Version
// runs `python3 -I -S -c 'import sys; print(*sys.version_info[:2])'`
// (isolated, without the site module, which spares it the scan of
// site-packages), and every call returns that answer. A daemon that loads
// the skills of several workspaces shares one probe among them
// (Probe.Python = p.Version) and may call Version early, in a goroutine it
// waits for, so that python3 starts while the rest of the daemon does.
//
// The zero PythonProbe is ready to use. Version may be called
// concurrently: calls during the run wait for its answer. A PythonProbe
// must not be copied after first use.
type PythonProbe struct {
	// Timeout bounds the run of python3; 0 means one minute.
	Timeout time.Duration

	once         sync.Once
	major, minor int
	err          error
}

// Version returns python3's major and minor version. It blocks while
// python3 runs (at most Timeout, on the first call only). The error says
// what failed: python3 not on PATH, its exit status and first line of
// stderr, an answer that is not a version, or no answer within Timeout.
func (p *PythonProbe) Version() (major, minor int, err error) {
	p.once.Do(func() {
		timeout := p.Timeout
		if timeout <= 0 {
			timeout = defaultPythonTimeout
		}
		p.major, p.minor, p.err = runPython(timeout)
	})
	return p.major, p.minor, p.err
}

// runPython runs python3 once, bounded by timeout, to read its version.
func runPython(timeout time.Duration) (int, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-I", "-S", "-c", "import sys; print(*sys.version_info[:2])")
	// A wrapper's child that keeps stdout open (a version manager's
	// shim) must not hold the probe past its bound.
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return 0, 0, fmt.Errorf("python3 did not report its version within %v (a busy host?)", timeout)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			if line, _, _ := strings.Cut(strings.TrimSpace(string(ee.Stderr)), "\n"); line != "" {
				return 0, 0, fmt.Errorf("python3: %w: %s", err, line)
			}
		}
		return 0, 0, fmt.Errorf("python3: %w", err)
	}
	var major, minor int
	if _, err := fmt.Sscan(string(bytes.TrimSpace(out)), &major, &minor); err != nil {
		return 0, 0, fmt.Errorf("python3 version %q: %w", strings.TrimSpace(string(out)), err)
	}
	return major, minor, nil
}
