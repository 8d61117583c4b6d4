package agentcore

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/gate"
)

// The tests in this file guard the kernel's security decisions that a
// one-line mistake would silently undo (tests/mutate lists those lines).

// startSandbox starts the real kernel sandbox with dir as the workspace.
// Only outside CI may a host that refuses it (EPERM) skip the test.
func startSandbox(t *testing.T, dir string) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.Start(t.Context(), sandbox.Config{Workspaces: []string{dir}})
	if err != nil {
		if os.Getenv("CI") == "" && errors.Is(err, syscall.EPERM) {
			t.Skipf("this host refuses the sandbox: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// gateDecisions returns the session's gate decisions in order.
func gateDecisions(t *testing.T, f *fixture, session string) []GatePayload {
	t.Helper()
	var out []GatePayload
	for _, e := range f.events(t, session) {
		if e.Type == EvGateDecision {
			var p GatePayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// TestSandboxUnavailableFailsClosed: when the sandbox that pass verdicts rely
// on is wanted but missing (NoSandbox) or broken (Err), a command the gate
// passes becomes confirm (rule sandbox-unavailable): refused without an
// approver, asked with one, and /status says so.
func TestSandboxUnavailableFailsClosed(t *testing.T) {
	broken := func(t *testing.T) ExecConfig {
		sb := startSandbox(t, t.TempDir())
		sb.Close() // a sandbox whose helpers are gone: Err() != nil
		if sb.Err() == nil {
			t.Fatal("a closed sandbox reports no error")
		}
		return ExecConfig{Sandbox: sb}
	}
	for name, exec := range map[string]func(*testing.T) ExecConfig{
		"missing": func(*testing.T) ExecConfig { return ExecConfig{NoSandbox: "kernel refused namespaces"} },
		"broken":  broken,
	} {
		t.Run(name, func(t *testing.T) {
			const cmd = "echo ran-without-sandbox"
			if d := gate.DefaultPolicy().Classify(cmd); d.Verdict != gate.Pass {
				t.Fatalf("%q is %v, not pass: the test proves nothing", cmd, d.Verdict)
			}
			var refused string
			f := newFixture(t, Config{Exec: exec(t)}, runCmd(cmd), func(r Request) (Response, error) {
				refused = lastToolContent(r)
				return Response{Content: "could not"}, nil
			})
			if st := f.a.SandboxState(); !strings.HasPrefix(st, "unavailable") {
				t.Errorf("SandboxState = %q", st)
			}
			if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir}); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(refused, "ran-without-sandbox") || !strings.Contains(refused, "not run") {
				t.Errorf("without an approver the model saw %q", refused)
			}
			d := gateDecisions(t, f, "s")
			if len(d) != 1 || d[0].Verdict != "confirm" || d[0].Rule != "sandbox-unavailable" || d[0].Action != "refuse" {
				t.Errorf("gate decisions = %+v", d)
			}

			// With an approver the same command is asked for.
			asked := 0
			f2 := newFixture(t, Config{Exec: exec(t)}, runCmd(cmd), say("ok"))
			approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
				asked++
				if a.Rule != "sandbox-unavailable" {
					t.Errorf("approval rule = %q", a.Rule)
				}
				return ApprovalDecision{Approved: false, By: "user:bob", Why: "no"}, nil
			})
			if _, err := f2.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f2.dir, Approver: approver}); err != nil {
				t.Fatal(err)
			}
			if asked != 1 {
				t.Errorf("approver asked %d times, want 1", asked)
			}
		})
	}
}

// TestSandboxStartingFailsClosed: a sandbox still starting
// (ExecConfig.Starting) does not hold up the first model call, and a
// command the gate passes waits for the start's outcome before its
// verdict stands: a start that ends without a sandbox makes it confirm
// (refused without an approver), never a pass run unconfined; a start
// that cannot end before the run does leaves it unrun too. An approved
// command waits as well, and runs in the sandbox the start ends with.
func TestSandboxStartingFailsClosed(t *testing.T) {
	const cmd = "echo ran-without-sandbox"
	if d := gate.DefaultPolicy().Classify(cmd); d.Verdict != gate.Pass {
		t.Fatalf("%q is %v, not pass: the test proves nothing", cmd, d.Verdict)
	}
	t.Run("ends without a sandbox", func(t *testing.T) {
		// The start ends when the first model call is made: a run that
		// waited for it before that call is an error (answered at once,
		// so that the test does not hang).
		release := make(chan struct{})
		starting := func(ctx context.Context) (*sandbox.Sandbox, string, error) {
			select {
			case <-release:
				return nil, "kernel refused namespaces", nil
			default:
			}
			if ctx.Err() == nil {
				t.Error("waited for the sandbox before the first model call")
				return nil, "kernel refused namespaces", nil
			}
			return nil, "", ctx.Err()
		}
		var refused string
		f := newFixture(t, Config{Exec: ExecConfig{Starting: starting}},
			func(r Request) (Response, error) {
				close(release)
				return runCmd(cmd)(r)
			},
			func(r Request) (Response, error) {
				refused = lastToolContent(r)
				return Response{Content: "could not"}, nil
			})
		if st := f.a.SandboxState(); !strings.HasPrefix(st, "starting") {
			t.Errorf("SandboxState while starting = %q", st)
		}
		if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(refused, "ran-without-sandbox") || !strings.Contains(refused, "not run") {
			t.Errorf("the model saw %q", refused)
		}
		d := gateDecisions(t, f, "s")
		if len(d) != 1 || d[0].Verdict != "confirm" || d[0].Rule != "sandbox-unavailable" || d[0].Action != "refuse" {
			t.Errorf("gate decisions = %+v", d)
		}
		if st := f.a.SandboxState(); !strings.HasPrefix(st, "unavailable") {
			t.Errorf("SandboxState after the start = %q", st)
		}
	})
	t.Run("ends with a sandbox", func(t *testing.T) {
		// An approved command (no fail-closed check stands before it)
		// waits too, and runs in the sandbox, which hides the state dir.
		dir, state := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(state, "key"), []byte("state-secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		sb, err := sandbox.Start(t.Context(), sandbox.Config{Hide: []string{state}, Workspaces: []string{dir}})
		if err != nil {
			if os.Getenv("CI") == "" && errors.Is(err, syscall.EPERM) {
				t.Skipf("this host refuses the sandbox: %v", err)
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close() })
		starting := func(context.Context) (*sandbox.Sandbox, string, error) { return sb, "", nil }
		var saw string
		f := newFixture(t, Config{Exec: ExecConfig{Starting: starting}}, runCmd("cat "+filepath.Join(state, "key")+"; echo end; touch made"), // touch: confirm
			func(r Request) (Response, error) {
				saw = lastToolContent(r)
				return Response{Content: "ok"}, nil
			})
		if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: dir, AllowAll: true}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(saw, "state-secret") || !strings.Contains(saw, "end") {
			t.Errorf("the approved command saw %q", saw)
		}
	})
	t.Run("never ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		starting := func(sctx context.Context) (*sandbox.Sandbox, string, error) {
			cancel() // the run ends (a /stop) while the start is under way
			<-sctx.Done()
			return nil, "", sctx.Err()
		}
		f := newFixture(t, Config{Exec: ExecConfig{Starting: starting}}, runCmd(cmd))
		res, _ := f.a.Run(ctx, Turn{Session: "s", Text: "x", Dir: f.dir, AllowAll: false})
		if res.Status != StatusCancelled {
			t.Errorf("status = %v", res.Status)
		}
		for _, d := range gateDecisions(t, f, "s") {
			if d.Verdict != "confirm" || d.Action != "refuse" {
				t.Errorf("gate decision while the sandbox was unknown: %+v", d)
			}
		}
		for _, e := range f.events(t, "s") {
			if e.Type == EvToolResult && strings.Contains(string(e.Payload), "ran-without-sandbox") {
				t.Errorf("the command ran: %s", e.Payload)
			}
		}
	})
}

// TestPassRunsReadOnlyApprovedRunsWritable: with the real sandbox, a command
// the gate passes runs read-only (so what a gate with holes passes still
// cannot write), and an approved command can write the workspace.
func TestPassRunsReadOnlyApprovedRunsWritable(t *testing.T) {
	dir := t.TempDir()
	sb := startSandbox(t, dir)
	// A policy with a hole: touch is declared read-only.
	policy, err := gate.ParsePolicy([]byte("commands:\n  touch: {operands: any}\n"), gate.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if d := policy.Classify("touch passed-wrote"); d.Verdict != gate.Pass {
		t.Fatalf("the broken policy does not pass touch (%v): the test proves nothing", d.Verdict)
	}
	if d := policy.Classify("mkdir approved-wrote"); d.Verdict != gate.Confirm {
		t.Fatalf("mkdir is %v, not confirm", d.Verdict)
	}
	f := newFixture(t, Config{Policy: policy, Exec: ExecConfig{Sandbox: sb}},
		runCmd("touch passed-wrote"), runCmd("mkdir approved-wrote"), say("done"))
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		return ApprovalDecision{Approved: true, By: "user:bob"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "passed-wrote")); err == nil {
		t.Error("a command the gate passed wrote the workspace: it ran in the writable sandbox")
	}
	if _, err := os.Stat(filepath.Join(dir, "approved-wrote")); err != nil {
		t.Errorf("the approved command could not write the workspace: %v", err)
	}
}

// TestRefusedApprovalDoesNotRun: an approver that refuses stops the command;
// the refusal is recorded and the model is told who refused and why.
func TestRefusedApprovalDoesNotRun(t *testing.T) {
	var saw string
	f := newFixture(t, Config{}, runCmd("touch refused-file"), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "ok"}, nil
	})
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		return ApprovalDecision{Approved: false, By: "user:bob", Why: "not now"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "refused-file")); err == nil {
		t.Error("a refused command ran")
	}
	if !strings.Contains(saw, "approval was refused by user:bob (not now)") {
		t.Errorf("model was told %q", saw)
	}
	var decided []ApprovalDecidedPayload
	for _, e := range f.events(t, "s") {
		if e.Type == EvApprovalDecided {
			var p ApprovalDecidedPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			decided = append(decided, p)
		}
	}
	if len(decided) != 1 || decided[0].Approved || decided[0].By != "user:bob" {
		t.Errorf("approval decisions = %+v", decided)
	}
}
