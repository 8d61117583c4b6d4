package agentcore

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestRunsTheProgramTheGateJudged: the shell runs the gate's rendering of
// the tree it judged, not the model's text. The parser reads a comment
// that ends in a backslash as continuing the line before it, bash ends the
// comment at the newline; run as written, the second line below would run
// as a command of its own (the touch), which the gate never judged.
// Approved (allow-all here), it runs as the gate read it: one ls whose
// operands are "touch" and "made".
func TestRunsTheProgramTheGateJudged(t *testing.T) {
	const cmd = "ls #\\\ntouch made"
	f := newFixture(t, Config{}, runCmd(cmd), say("ok"))
	var asked Approval
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		asked = a
		return ApprovalDecision{Approved: true, By: "user:bob"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made")); err == nil {
		t.Fatal("bash ran a command the gate did not judge: the text ran, not the gate's program")
	}
	const program = "ls \\\n\ttouch made"
	if asked.Command != program {
		t.Errorf("the approver was shown %q, want what runs: %q", asked.Command, program)
	}
	var gp GatePayload
	for _, e := range f.events(t, "s") {
		if e.Type == EvGateDecision {
			json.Unmarshal(e.Payload, &gp)
		}
	}
	if gp.Command != program || gp.Requested != cmd || gp.Verdict != "confirm" {
		t.Errorf("gate decision = %+v, want command %q (what ran), requested %q (the model's text), confirm", gp, program, cmd)
	}
}
