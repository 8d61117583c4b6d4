package agentcore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/tests/sshd"
)

// fleetFixture starts n real sshd hosts (group web, plus a down host when
// withDown) and an Agent whose fleet reaches them.
func fleetFixture(t *testing.T, n int, withDown bool, replies ...func(Request) (Response, error)) (*fixture, *sshd.Rig) {
	t.Helper()
	return fleetFixtureWith(t, n, withDown, Config{}, replies...)
}

// fleetFixtureWith is fleetFixture with cfg for the Agent (its Fleet set).
func fleetFixtureWith(t *testing.T, n int, withDown bool, cfg Config, replies ...func(Request) (Response, error)) (*fixture, *sshd.Rig) {
	t.Helper()
	rig := sshd.Start(t, "web", n, 0)
	inv, err := fleet.ParseINI(strings.NewReader(rig.Inventory("web", withDown)))
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Build(); err != nil {
		t.Fatal(err)
	}
	fl, err := fleet.New(fleet.Config{Inventory: inv, KnownHosts: rig.KnownHosts, SSHConfig: "/dev/null",
		Env: ChildEnv(os.Environ(), []string{"SSH_AUTH_SOCK"}, DefaultPath), Timeout: 30 * time.Second,
		Access: []fleet.Access{{Group: "web",
			ReadOnly:   fleet.Identity{User: sshd.UserRO, Key: rig.KeyRO},
			Privileged: fleet.Identity{User: sshd.UserRW, Key: rig.KeyRW}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fl.Close() })
	cfg.Fleet = fl
	return newFixture(t, cfg, replies...), rig
}

func runOn(cmd, target string) func(Request) (Response, error) {
	b, _ := json.Marshal(map[string]string{"command": cmd, "reason": "test", "target": target})
	return call(ToolRun, string(b))
}

func payloadOf[T any](t *testing.T, f *fixture, session, typ string) []T {
	t.Helper()
	var out []T
	for _, e := range f.events(t, session) {
		if e.Type == typ {
			var p T
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

func verifyStore(t *testing.T, f *fixture) {
	t.Helper()
	if rep, err := f.db.Verify(context.Background(), nil); err != nil {
		t.Fatalf("audit verify: %v (%+v)", err, rep)
	}
}

// TestFleetPassRunsEverywhereReadOnly: a pass verdict on a group runs on
// every host with the read-only login, without an approval; a down host
// is reported while the others answer; the chain records the targets and
// each host's exit code and output hash, and verifies.
func TestFleetPassRunsEverywhereReadOnly(t *testing.T) {
	var saw string
	f, _ := fleetFixture(t, 3, true, runOn("id -un", "web"), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "ok"}, nil
	})
	if !hasTarget(f) {
		t.Error("the run tool offers no target with a fleet configured")
	}
	if p := fleetPrompt(f.a.cfg.Fleet.Inventory(), nil); !strings.Contains(p, "# Remote hosts\n") || !strings.Contains(p, "- web (4): web-[01-03], web-down") {
		t.Errorf("fleet prompt:\n%s", p)
	}
	if p := fleetPrompt(f.a.cfg.Fleet.Inventory(), []string{"strangers"}); strings.Contains(p, "web") && strings.Contains(p, "- web") {
		t.Errorf("a limited turn sees other groups:\n%s", p)
	}
	asked := false
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "who?", Dir: f.dir,
		Approver: approverFunc(func(context.Context, Approval) (ApprovalDecision, error) {
			asked = true
			return ApprovalDecision{}, nil
		})})
	if err != nil || res.Status != StatusAnswered {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if asked {
		t.Error("a pass verdict asked for an approval")
	}
	if sys := f.model.reqs[0].Messages[0].Content; !strings.Contains(sys, "# Remote hosts") || strings.Contains(sys, "strangers") {
		t.Errorf("the system prompt does not list the fleet's groups (or lists an empty one):\n%s", sys)
	}
	for _, want := range []string{"4 host(s): 3 exit 0, 0 failed, 1 unreachable", "== web-[01-03] (3 hosts, exit 0):\nthinbot-ro\n", "unreachable, nothing ran: web-down"} {
		if !strings.Contains(saw, want) {
			t.Errorf("model saw no %q:\n%s", want, saw)
		}
	}
	g := payloadOf[GatePayload](t, f, "s", EvGateDecision)
	if len(g) != 1 || g[0].Verdict != "pass" || g[0].TargetCount != 4 || strings.Join(g[0].Targets, " ") != "web-01 web-02 web-03 web-down" {
		t.Errorf("gate decision %+v", g)
	}
	tr := payloadOf[ToolResultPayload](t, f, "s", EvToolResult)
	if len(tr) != 1 || len(tr[0].Hosts) != 4 || !tr[0].IsError {
		t.Fatalf("tool result %+v", tr)
	}
	for _, h := range tr[0].Hosts {
		if h.Host == "web-down" {
			if h.Error == "" || h.ExitCode != -1 {
				t.Errorf("down host %+v", h)
			}
			continue
		}
		if h.ExitCode != 0 || h.User != sshd.UserRO || len(h.OutputSHA) != 64 || h.OutputSize != int64(len("thinbot-ro\n")) {
			t.Errorf("host record %+v", h)
		}
	}
	verifyStore(t, f)
}

// TestFleetWaitsForTheSandbox: nothing starts, ssh included, while the
// local sandbox is still starting (its start ends with this process made
// non-dumpable): a start whose outcome the run cannot wait for leaves a
// remote command unrun.
func TestFleetWaitsForTheSandbox(t *testing.T) {
	var saw string
	starting := func(context.Context) (*sandbox.Sandbox, string, error) { return nil, "", context.Canceled }
	f, _ := fleetFixtureWith(t, 1, false, Config{Exec: ExecConfig{Starting: starting}}, runOn("echo remote-ran", "web"),
		func(r Request) (Response, error) {
			saw = lastToolContent(r)
			return Response{Content: "ok"}, nil
		})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(saw, "remote-ran") || !strings.Contains(saw, "still starting") {
		t.Errorf("the model saw %q", saw)
	}
}

// TestFleetWriteNeedsOneApprovalNamingAllTargets: a write asks once, the
// approval names every target and is bound to command and targets; once
// approved it runs with the privileged login everywhere.
func TestFleetWriteNeedsOneApprovalNamingAllTargets(t *testing.T) {
	file := filepath.Join(os.TempDir(), fmt.Sprintf("tb-fleet-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(file) })
	cmd := "touch " + file + " && id -un"
	var saw string
	f, _ := fleetFixture(t, 3, false, runOn(cmd, "web-0*"), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "done"}, nil
	})
	var mu sync.Mutex
	var asks []Approval
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "touch", Dir: f.dir,
		Approver: approverFunc(func(_ context.Context, ap Approval) (ApprovalDecision, error) {
			mu.Lock()
			asks = append(asks, ap)
			mu.Unlock()
			return ApprovalDecision{Approved: true, By: "user:bob"}, nil
		})})
	if err != nil || res.Status != StatusAnswered {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(asks) != 1 {
		t.Fatalf("%d approvals asked, want 1", len(asks))
	}
	ap := asks[0]
	if strings.Join(ap.Logins, " ") != sshd.UserRW || LoginSummary(ap.Logins) != "as thinbot-rw, the privileged login" {
		t.Errorf("approval logins %q", ap.Logins)
	}
	if ap.Command != cmd || strings.Join(ap.Targets, " ") != "web-01 web-02 web-03" || ap.SHA256 != BindingSHA(cmd, ap.Targets) || ap.SHA256 == BindingSHA(cmd, nil) {
		t.Errorf("approval %+v", ap)
	}
	if got := TargetSummary(ap.Targets); got != "3 hosts: web-[01-03]" {
		t.Errorf("TargetSummary = %q", got)
	}
	if !strings.Contains(saw, "== web-[01-03] (3 hosts, exit 0):\nthinbot-rw\n") {
		t.Errorf("model saw:\n%s", saw)
	}
	st, err := os.Stat(file)
	if err != nil {
		t.Fatalf("the approved write did not happen: %v", err)
	}
	if uid := fileUID(st); uid != sshd.UID(t, sshd.UserRW) {
		t.Errorf("the file is owned by uid %d, not %s", uid, sshd.UserRW)
	}
	asked := payloadOf[ApprovalAskedPayload](t, f, "s", EvApprovalAsked)
	if len(asked) != 1 || asked[0].TargetCount != 3 || asked[0].SHA256 != ap.SHA256 {
		t.Errorf("approval_requested %+v", asked)
	}
	verifyStore(t, f)
}

// TestFleetTargetErrors: an unknown pattern, and a channel limited to other
// groups, go back to the model as errors and run nothing.
func TestFleetTargetErrors(t *testing.T) {
	var saw []string
	next := func(r Request) (Response, error) {
		saw = append(saw, lastToolContent(r))
		return runOn("id -un", "web")(r)
	}
	f, _ := fleetFixture(t, 1, false, runOn("id -un", "db*"), next, func(r Request) (Response, error) {
		saw = append(saw, lastToolContent(r))
		return Response{Content: "ok"}, nil
	})
	_, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "x", Dir: f.dir, FleetGroups: []string{"strangers"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(saw) != 2 || !strings.Contains(saw[0], "matches no host") || !strings.Contains(saw[1], "may only target the groups strangers") {
		t.Errorf("model saw %q", saw)
	}
	if g := payloadOf[GatePayload](t, f, "s", EvGateDecision); len(g) != 0 {
		t.Errorf("gate decisions for refused targets: %+v", g)
	}
}

// TestFleetReadFile reads a file on every host, numbered like a local read.
func TestFleetReadFile(t *testing.T) {
	var saw string
	f, _ := fleetFixture(t, 2, false, call(ToolReadFile, `{"path":"/etc/hostname","target":"web"}`), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "ok"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "x", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	host, _ := os.ReadFile("/etc/hostname")
	if !strings.Contains(saw, "== web-[01-02] (2 hosts, exit 0):\n     1\t"+strings.TrimSpace(string(host))) {
		t.Errorf("model saw:\n%s", saw)
	}
}

func hasTarget(f *fixture) bool {
	for _, tool := range toolDefs(false, false, f.a.cfg.Fleet != nil) {
		if tool.Name == ToolRun && strings.Contains(string(tool.Parameters), `"target"`) {
			return true
		}
	}
	return false
}

// TestFleetStopKillsRemoteCommands: cancelling the run (what /stop does)
// mid fan-out kills the remote commands, and the chain records each host
// as stopped.
func TestFleetStopKillsRemoteCommands(t *testing.T) {
	marker := fmt.Sprintf("300.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
	f, _ := fleetFixture(t, 2, false, runOn("sleep "+marker, "web"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		// sleep is not read-only for the gate: allow-all approves it.
		_, err := f.a.Run(ctx, Turn{Session: "s", Actor: "user:al", Text: "sleep", Dir: f.dir, AllowAll: true})
		done <- err
	}()
	uid := sshd.UID(t, sshd.UserRW)
	waitUntil(t, func() bool { return len(remoteProcs("sleep "+marker, uid)) == 2 })
	cancel()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not end after cancel")
	}
	waitUntil(t, func() bool { return len(remoteProcs("sleep "+marker, uid)) == 0 })
	tr := payloadOf[ToolResultPayload](t, f, "s", EvToolResult)
	if len(tr) != 1 || len(tr[0].Hosts) != 2 || !tr[0].Hosts[0].Cancelled || !tr[0].Hosts[1].Cancelled {
		t.Errorf("tool result %+v", tr)
	}
	verifyStore(t, f)
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// remoteProcs returns the processes of uid whose command line holds s and
// whose command is its first word (not the shells that hold it too).
func remoteProcs(s string, uid int) []int {
	var out []int
	for _, p := range sshd.FindCmdline(s) {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p))
		if st, err := os.Stat(fmt.Sprintf("/proc/%d", p)); err == nil && fileUID(st) == uid && strings.TrimSpace(string(comm)) == strings.Fields(s)[0] {
			out = append(out, p)
		}
	}
	return out
}

// TestFleetOutputIsMasked: a token printed on remote hosts is masked like
// local output, before the model, the hooks (the chat's attachment) and the
// chain see it, and the result records what was masked.
func TestFleetOutputIsMasked(t *testing.T) {
	const token = "ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK"
	var saw, hooked string
	f, _ := fleetFixture(t, 2, false, runOn("echo github: ghp_R8vT2kLm9QxZ4wNp7Yb''C3dFh6JsA1uEo5GiK", "web"), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "ok"}, nil
	})
	_, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "show", Dir: f.dir,
		Hooks: Hooks{Result: func(c CommandInfo, content string, _ bool) { hooked = string(c.Output) + content }}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(saw, token) || !strings.Contains(saw, "github: [MASKED:github-pat]") {
		t.Errorf("the model saw %q", saw)
	}
	if strings.Contains(hooked, token) || strings.Count(hooked, "[MASKED:github-pat]") < 3 {
		t.Errorf("the hooks saw %q", hooked)
	}
	for _, e := range f.events(t, "s") {
		if strings.Contains(string(e.Payload), token) {
			t.Errorf("the chain holds the token: %s", e.Payload)
		}
	}
	tr := payloadOf[ToolResultPayload](t, f, "s", EvToolResult)
	if len(tr) != 1 || tr[0].Masked["github-pat"] != 2 {
		t.Errorf("the tool result does not record the two hosts' masked tokens: %+v", tr)
	}
}
