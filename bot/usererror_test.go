package bot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

// A run stopped by a context overflow tells the thread what to do, not
// that the model could not be reached.
func TestUserErrorContextOverflow(t *testing.T) {
	err := fmt.Errorf("%w: %w", agentcore.ErrModel, &agentcore.ContextLengthError{Window: 8192, Prompt: 9000})
	got := userError(err, 42)
	if !strings.Contains(got, "context window") || !strings.Contains(got, "/clear") || strings.Contains(got, "could not reach") {
		t.Errorf("userError = %q", got)
	}
	if got := userError(fmt.Errorf("%w: connection refused", agentcore.ErrModel), 7); !strings.Contains(got, "could not reach the model") {
		t.Errorf("userError(unreachable) = %q", got)
	}
}
