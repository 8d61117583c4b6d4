package agentcore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestApprovalWhyIsScrubbed: the gate's words for why a command needs an
// approval, which the approval card shows, quote the command; a secret in
// it is redacted there as in the command.
func TestApprovalWhyIsScrubbed(t *testing.T) {
	const key = "s3cretTokenValue0123456789"
	args, _ := json.Marshal(map[string]string{"command": "git " + key + " --all", "reason": "look"})
	var whys []string
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		whys = append(whys, a.Why)
		return ApprovalDecision{Approved: false, By: "user:bob"}, nil
	})
	f := newFixture(t, Config{Secrets: []string{key}},
		func(Request) (Response, error) {
			return Response{FinishReason: "tool_calls", ToolCalls: []ToolCall{{ID: "c1", Name: ToolRun, Arguments: string(args)}}}, nil
		},
		func(Request) (Response, error) { return Response{Content: "ok", FinishReason: "stop"}, nil })
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: "go", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if len(whys) != 1 || !strings.Contains(whys[0], "git") {
		t.Fatalf("the approval's reasons: %q, want one naming the command", whys)
	}
	if strings.Contains(whys[0], key) {
		t.Errorf("the approval's reason holds the secret: %s", whys[0])
	}
}
