// Package tests holds thinbot's end-to-end tests: they build the thinbot
// binary and run it as a real process against the scripted model server
// (tests/fakemodel) and the chat fakes (tests/fakemattermost,
// tests/fakeslack), then verify the event chain with `thinbot audit verify`.
package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// thinbotBin is the binary built once for all tests.
var thinbotBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "thinbot-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	thinbotBin = filepath.Join(dir, "thinbot")
	build := exec.Command("go", "build", "-race", "-o", thinbotBin, "../cmd/thinbot")
	if os.Getenv("THINBOT_E2E_NORACE") != "" {
		build = exec.Command("go", "build", "-o", thinbotBin, "../cmd/thinbot")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build thinbot:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is what one thinbot invocation did.
type result struct {
	stdout, stderr string
	code           int
}

// thinbot runs the binary in dir with the given environment additions.
func thinbot(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return thinbotIn(t, dir, env, "", args...)
}

func thinbotIn(t *testing.T, dir string, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, thinbotBin, args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run thinbot %v: %v", args, err)
	}
	return r
}

// baseEnv is a small, clean environment: PATH and HOME only.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "USER=tester"}
}

// verifyChain runs `thinbot audit verify` on a directory's store.
func verifyChain(t *testing.T, db string) {
	t.Helper()
	r := thinbot(t, filepath.Dir(db), nil, "audit", "verify", "--db", db)
	if r.code != 0 {
		t.Fatalf("audit verify failed (exit %d):\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
