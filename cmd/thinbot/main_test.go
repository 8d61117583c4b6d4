package main

import (
	"os"
	"testing"

	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// TestMain lets the test binary serve as the sandbox helper, as the thinbot
// binary does, for tests that start a terminal run in-process.
func TestMain(m *testing.M) {
	sandbox.Main(os.Args)
	// The tests' configs are not the host's daemon: a thinbot.service
	// installed on this machine (the release test installs the package
	// for a moment, in parallel with this package's tests) must not lend
	// them its User= and EnvironmentFiles. Discovery itself is tested
	// with directories of its own (TestDiscoverSystemd...).
	systemdDirs = nil
	os.Exit(m.Run())
}
