package agentcore

import (
	"os"
	"testing"

	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// TestMain lets the test binary serve as its own sandbox helper, as thinbot
// does, so tests and benchmarks can run commands through the real sandbox.
func TestMain(m *testing.M) {
	sandbox.Main(os.Args)
	probeMain()
	mcpFakeMain()
	os.Exit(m.Run())
}
