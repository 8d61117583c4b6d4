package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Summary is the start-up line serve logs: what is enforced, as Info says.
func TestSummary(t *testing.T) {
	r := newRig(t)
	ro := r.sb.Info(ReadOnly)
	got := r.sb.Summary()
	for _, want := range []string{"enforced: read-only commands as ", "Landlock ABI " + strconv.Itoa(ro.LandlockABI), ro.Net, "limits by " + ro.LimitsBy,
		strconv.Itoa(len(r.sb.Info(Approved).Hidden)) + " secret paths hidden"} {
		if !strings.Contains(got, want) {
			t.Errorf("Summary() = %q, lacks %q", got, want)
		}
	}
}

// UnreadableWorkspaces names the workspaces read-only commands cannot
// enter and passes over readable and missing ones.
func TestUnreadableWorkspaces(t *testing.T) {
	r := newRig(t)
	open, closed := filepath.Join(r.ws, "open-ws"), filepath.Join(r.ws, "closed-ws")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(closed, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(closed, 0o700); os.Remove(closed); os.Remove(open) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := r.sb.UnreadableWorkspaces(ctx, []string{r.ws, open, closed, filepath.Join(r.ws, "missing")})
	if len(got) != 1 || got[0].Dir != closed {
		t.Errorf("UnreadableWorkspaces = %+v, want %s alone", got, closed)
	}
}
