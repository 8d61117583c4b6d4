package agentcore

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/skills"
)

// commandSkills loads a skill declaring a read-only and a writing command.
func commandSkills(t *testing.T) skills.Set {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "ops")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	md := "---\nname: ops\ndescription: Ops.\nmetadata:\n  thinbot:\n    commands:\n" +
		"      - {name: greet, description: Say hello, command: 'echo hello {who}', args: [{name: who, type: host}]}\n" +
		"      - {name: mark, description: Leave a mark, command: 'touch {file}', args: [{name: file, type: enum, values: [marked]}]}\n---\nBody.\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	set := skills.Load([]string{root}, skills.Options{Probe: skills.Probe{UID: 4242424}})
	if len(set.Commands()) != 2 {
		t.Fatalf("commands %+v, skills %+v", set.Commands(), set.Skills)
	}
	return set
}

// A skill command runs without the model, through the gate and the chain,
// and the model sees it in the session afterwards.
func TestRunSkillCommandWithoutModel(t *testing.T) {
	var later Request
	f := newFixture(t, Config{Skills: commandSkills(t)}, func(r Request) (Response, error) {
		later = r
		return Response{Content: "it greeted web-01"}, nil
	})
	if _, _, ok := f.a.SkillCommand("!nope x"); ok {
		t.Error("unknown command accepted")
	}
	var commands []CommandInfo
	hooks := Hooks{Command: func(c CommandInfo) { commands = append(commands, c) }}
	res, err := f.a.RunSkillCommand(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "!greet web-01", Dir: f.dir, Hooks: hooks})
	if err != nil || res.Status != StatusAnswered || !strings.Contains(res.Answer, "hello web-01") || !strings.Contains(res.Answer, "`echo hello web-01`") {
		t.Fatalf("RunSkillCommand = %+v, %v", res, err)
	}
	if len(commands) != 1 || commands[0].Verdict != "pass" || commands[0].Action != "run" {
		t.Errorf("command hooks %+v", commands)
	}
	want := []string{EvRunStarted, EvUserMessage, EvAssistantMessage, EvGateDecision, EvToolResult, EvRunFinished}
	if got := types(f.events(t, "s")); !reflect.DeepEqual(got, want) {
		t.Errorf("events %v\nwant %v", got, want)
	}
	// The same via /run; bad arguments run nothing.
	res, err = f.a.RunSkillCommand(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "/run greet 'web-01;reboot'", Dir: f.dir})
	if err != nil || !strings.Contains(res.Answer, "Not run: ") || !strings.Contains(res.Answer, "usage: greet who:host") {
		t.Errorf("bad argument: %+v, %v", res, err)
	}
	if n := strings.Count(strings.Join(types(f.events(t, "s")), " "), EvGateDecision); n != 1 {
		t.Errorf("%d gate decisions, want 1", n)
	}
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "what did it say?", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	var sawCall, sawOutput bool
	for _, m := range later.Messages {
		sawCall = sawCall || len(m.ToolCalls) == 1 && strings.Contains(m.ToolCalls[0].Arguments, "echo hello web-01")
		sawOutput = sawOutput || m.Role == RoleTool && strings.Contains(m.Content, "hello web-01")
	}
	if !sawCall || !sawOutput {
		t.Errorf("the model did not see the command and its output: %+v", later.Messages)
	}
}

// A writing skill command needs an approval like a model's command.
func TestRunSkillCommandNeedsApproval(t *testing.T) {
	f := newFixture(t, Config{Skills: commandSkills(t)})
	res, err := f.a.RunSkillCommand(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "!mark marked", Dir: f.dir})
	if err != nil || !strings.Contains(res.Answer, "approval") {
		t.Fatalf("without approver: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "marked")); err == nil {
		t.Fatal("ran without approval")
	}
	var asked Approval
	approver := approverFunc(func(_ context.Context, a Approval) (ApprovalDecision, error) {
		asked = a
		return ApprovalDecision{Approved: true, By: "user:bo"}, nil
	})
	res, err = f.a.RunSkillCommand(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "!mark marked", Dir: f.dir, Approver: approver})
	if err != nil || !strings.Contains(res.Answer, "exit code: 0") {
		t.Fatalf("approved: %+v, %v", res, err)
	}
	if asked.Command != "touch marked" || asked.Requester != "user:al" {
		t.Errorf("approval %+v", asked)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "marked")); err != nil {
		t.Error("the approved command did not run")
	}
}
