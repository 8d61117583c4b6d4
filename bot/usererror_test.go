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

// statusError is an endpoint's error answer, as agentcore/openai's
// APIError reports it.
type statusError int

func (e statusError) Error() string   { return fmt.Sprintf("HTTP %d", int(e)) }
func (e statusError) HTTPStatus() int { return int(e) }

// TestUserErrorModelAnswered: an endpoint that answered with an error was
// reached; the thread says what it answered.
func TestUserErrorModelAnswered(t *testing.T) {
	got := userError(fmt.Errorf("%w: %w", agentcore.ErrModel, statusError(500)), 9)
	if !strings.Contains(got, "answered with HTTP 500 Internal Server Error") || strings.Contains(got, "could not reach") {
		t.Errorf("userError(HTTP 500) = %q", got)
	}
	if got := userError(fmt.Errorf("%w: %w", agentcore.ErrModel, statusError(200)), 9); !strings.Contains(got, "an error inside its answer") {
		t.Errorf("userError(error in a 200 stream) = %q", got)
	}
}
