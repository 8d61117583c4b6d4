package agentcore

import (
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// TestExecOutputLimit: an endless producer, unconfined, is killed once it
// has written OutputLimit bytes, and the result and the model's text say
// so; one that stays below the limit is untouched.
func TestExecOutputLimit(t *testing.T) {
	cfg := ExecConfig{Timeout: time.Minute, OutputLimit: 64 << 10, Environ: []string{"PATH=" + DefaultPath}}
	res, err := Exec(t.Context(), cfg, sandbox.ReadOnly, t.TempDir(), "yes thinbot")
	if err != nil {
		t.Fatal(err)
	}
	if !res.OutputCut || res.TimedOut || res.Size != 64<<10 {
		t.Errorf("yes: OutputCut %v TimedOut %v Size %d, want cut at %d", res.OutputCut, res.TimedOut, res.Size, 64<<10)
	}
	if text := formatExec(res, 1024); !strings.Contains(text, "output limit reached: thinbot read 65536 bytes") {
		t.Errorf("the model is not told: %q", text[:min(len(text), 200)])
	}
	res, err = Exec(t.Context(), cfg, sandbox.ReadOnly, t.TempDir(), "head -c 65536 /dev/zero")
	if err != nil || res.OutputCut || res.ExitCode != 0 || res.Size != 64<<10 {
		t.Errorf("exactly the limit: %v %+v", err, res)
	}
}

// TestFormatExecLimit: the limit a command's cgroup hit is in what the
// model reads.
func TestFormatExecLimit(t *testing.T) {
	text := formatExec(ExecResult{ExitCode: -1, Limit: "killed: memory limit 1 GiB"}, 1024)
	if !strings.Contains(text, "exit code: -1\nkilled: memory limit 1 GiB\n") {
		t.Errorf("formatExec = %q", text)
	}
}
