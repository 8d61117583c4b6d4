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
	os.Exit(m.Run())
}
