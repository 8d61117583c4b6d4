package agentcore

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// An external agent's calls go through the gate, the approver and the
// chain like the model's: a read passes, a write waits for the approver
// and runs only when approved, a denied one never runs, and each call is a
// run of its own in the session, attributed to the caller.
func TestCallToolGatesLikeTheModel(t *testing.T) {
	f := newFixture(t, Config{})
	if err := os.WriteFile(filepath.Join(f.dir, "notes.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	turn := func(ap Approver) Turn {
		return Turn{Session: "mcp", Actor: "mcp:codex", Text: "tools/call", Dir: f.dir, Approver: ap}
	}
	res, err := f.a.CallTool(t.Context(), turn(nil), ExternalCall{Tool: ToolRun, Command: "echo hi", Reason: "greet"})
	if err != nil || res.IsError || !strings.Contains(res.Content, "hi") {
		t.Fatalf("run echo = %+v, %v", res, err)
	}
	res, err = f.a.CallTool(t.Context(), turn(nil), ExternalCall{Tool: ToolReadFile, Path: "notes.txt", Offset: 2, Limit: 1})
	if err != nil || res.IsError || !strings.Contains(res.Content, "two") || strings.Contains(res.Content, "three") {
		t.Fatalf("read_file = %+v, %v", res, err)
	}
	// A write without an approver is refused and does not run.
	res, err = f.a.CallTool(t.Context(), turn(nil), ExternalCall{Tool: ToolRun, Command: "touch made"})
	if err != nil || !res.IsError || !strings.Contains(res.Content, "approval") {
		t.Fatalf("write without approver = %+v, %v", res, err)
	}
	deny := approverFunc(func(context.Context, Approval) (ApprovalDecision, error) {
		return ApprovalDecision{Approved: false, By: "user:bo", Why: "denied by bo"}, nil
	})
	res, err = f.a.CallTool(t.Context(), turn(deny), ExternalCall{Tool: ToolRun, Command: "touch made"})
	if err != nil || !res.IsError || !strings.Contains(res.Content, "refused by user:bo") {
		t.Fatalf("denied write = %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made")); err == nil {
		t.Fatal("a denied write ran")
	}
	var asked Approval
	approve := approverFunc(func(_ context.Context, a Approval) (ApprovalDecision, error) {
		asked = a
		return ApprovalDecision{Approved: true, By: "user:bo"}, nil
	})
	res, err = f.a.CallTool(t.Context(), turn(approve), ExternalCall{Tool: ToolRun, Command: "touch made", Reason: "leave a mark"})
	if err != nil || res.IsError {
		t.Fatalf("approved write = %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made")); err != nil {
		t.Fatal("the approved write did not run")
	}
	if asked.Requester != "mcp:codex" || asked.Reason != "leave a mark" || asked.Command != "touch made" {
		t.Errorf("approval %+v", asked)
	}
	// Tools the external agent is not offered are refused, recorded.
	res, err = f.a.CallTool(t.Context(), turn(approve), ExternalCall{Tool: ToolMemory})
	if err != nil || !res.IsError || !strings.Contains(res.Content, "unknown tool") {
		t.Fatalf("memory = %+v, %v", res, err)
	}
	evs := f.events(t, "mcp")
	runs := strings.Count(strings.Join(types(evs), " "), EvRunStarted)
	if runs != 6 {
		t.Errorf("%d runs recorded, want 6: %v", runs, types(evs))
	}
	want := []string{EvRunStarted, EvUserMessage, EvAssistantMessage, EvGateDecision, EvToolResult, EvRunFinished}
	if got := types(evs)[:6]; !reflect.DeepEqual(got, want) {
		t.Errorf("first call's events %v\nwant %v", got, want)
	}
	for _, e := range evs {
		if e.Type == EvAssistantMessage && e.Actor != "mcp:codex" {
			t.Errorf("assistant_message by %q, want the caller", e.Actor)
		}
	}
}

// A caller that goes away while its call waits for an approval: the
// request is refused, recorded as cancelled, and nothing runs.
func TestCallToolCallerGoneWhileWaiting(t *testing.T) {
	f := newFixture(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	wait := approverFunc(func(ctx context.Context, _ Approval) (ApprovalDecision, error) {
		cancel()
		<-ctx.Done()
		return ApprovalDecision{}, ctx.Err()
	})
	res, err := f.a.CallTool(ctx, Turn{Session: "mcp", Actor: "mcp:codex", Dir: f.dir, Approver: wait}, ExternalCall{Tool: ToolRun, Command: "touch made"})
	if err == nil || res.Status != StatusCancelled || !res.IsError {
		t.Fatalf("CallTool = %+v, %v; want cancelled", res, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made")); err == nil {
		t.Fatal("ran after its caller went away")
	}
	evs := f.events(t, "mcp")
	last := evs[len(evs)-1]
	if last.Type != EvRunFinished || !strings.Contains(string(last.Payload), StatusCancelled) {
		t.Errorf("last event %s %s", last.Type, last.Payload)
	}
	found := false
	for _, e := range evs {
		found = found || e.Type == EvApprovalDecided && strings.Contains(string(e.Payload), "cancelled before a decision")
	}
	if !found {
		t.Errorf("no cancelled approval_decision: %v", types(evs))
	}
}
