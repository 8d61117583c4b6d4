package agentcore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/storetest"
)

// scriptedModel answers from a list of replies and records the requests.
// One call too many fails the test.
type scriptedModel struct {
	t       testing.TB
	mu      sync.Mutex
	replies []func(Request) (Response, error)
	reqs    []Request
}

func (m *scriptedModel) Complete(ctx context.Context, req Request) (Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	if len(m.replies) == 0 {
		m.t.Errorf("model called %d times, script has fewer replies", len(m.reqs))
		return Response{}, errors.New("script exhausted")
	}
	f := m.replies[0]
	m.replies = m.replies[1:]
	return f(req)
}

// approverFunc is an Approver whose Ask shows nothing (where "", so no
// post is recorded), whose Await calls the function, and whose Decided
// does nothing.
type approverFunc func(ctx context.Context, a Approval) (ApprovalDecision, error)

func (f approverFunc) Ask(context.Context, Approval) (string, error) { return "", nil }

func (f approverFunc) Await(ctx context.Context, a Approval, _ string) (ApprovalDecision, error) {
	return f(ctx, a)
}

func (f approverFunc) Decided(context.Context, Approval, string, ApprovalDecision, error) {}

// postingApprover is an Approver that shows requests at where (askErr
// fails Ask), decides with await, and records every call it gets.
type postingApprover struct {
	where  string
	askErr error
	ask    func(a Approval) // called in Ask, if set
	await  func(ctx context.Context, a Approval) (ApprovalDecision, error)
	calls  []string         // "ask", "await WHERE", "decided WHERE"
	dec    ApprovalDecision // the decision Decided was given
	decErr error            // the error Decided was given
}

func (p *postingApprover) Ask(_ context.Context, a Approval) (string, error) {
	p.calls = append(p.calls, "ask")
	if p.ask != nil {
		p.ask(a)
	}
	return p.where, p.askErr
}

func (p *postingApprover) Await(ctx context.Context, a Approval, where string) (ApprovalDecision, error) {
	p.calls = append(p.calls, "await "+where)
	return p.await(ctx, a)
}

func (p *postingApprover) Decided(_ context.Context, _ Approval, where string, d ApprovalDecision, err error) {
	p.calls = append(p.calls, "decided "+where)
	p.dec, p.decErr = d, err
}

func say(text string) func(Request) (Response, error) {
	return func(Request) (Response, error) { return Response{Content: text, FinishReason: "stop"}, nil }
}

func call(name, args string) func(Request) (Response, error) {
	return func(r Request) (Response, error) {
		return Response{ToolCalls: []ToolCall{{ID: fmt.Sprintf("c%d", len(r.Messages)), Name: name, Arguments: args}}, FinishReason: "tool_calls"}, nil
	}
}

func runCmd(cmd string) func(Request) (Response, error) {
	b, _ := json.Marshal(map[string]string{"command": cmd, "reason": "test"})
	return call(ToolRun, string(b))
}

func fail(err error) func(Request) (Response, error) {
	return func(Request) (Response, error) { return Response{}, err }
}

type fixture struct {
	a     *Agent
	db    *store.DB
	model *scriptedModel
	dir   string
}

func newFixture(t *testing.T, cfg Config, replies ...func(Request) (Response, error)) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseChecked(t, db, Decode)
	m := &scriptedModel{t: t, replies: replies}
	t.Cleanup(func() {
		if len(m.replies) > 0 {
			t.Errorf("%d scripted replies not used", len(m.replies))
		}
	})
	cfg.Store, cfg.Model = db, m
	if cfg.Policy == nil {
		cfg.Policy = gate.DefaultPolicy()
	}
	cfg.Exec.Environ = append(cfg.Exec.Environ, "PATH="+os.Getenv("PATH"))
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{a: a, db: db, model: m, dir: dir}
}

func (f *fixture) events(t *testing.T, session string) []store.Event {
	t.Helper()
	var out []store.Event
	for e, err := range f.db.Events(session, 1) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func types(evs []store.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func lastToolContent(r Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == RoleTool || r.Messages[i].Role == RoleUser {
			return r.Messages[i].Content
		}
	}
	return ""
}

func TestReadOnlyCommandRunsAndReachesModel(t *testing.T) {
	var saw string
	f := newFixture(t, Config{}, runCmd("echo hello-from-shell"), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "it said hello"}, nil
	})
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "say hi", Dir: f.dir})
	if err != nil || res.Status != StatusAnswered || res.Answer != "it said hello" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if !strings.Contains(saw, "hello-from-shell") || !strings.Contains(saw, "exit code: 0") {
		t.Errorf("model saw %q", saw)
	}
	want := []string{EvSystemPrompt, EvRunStarted, EvUserMessage, EvAssistantMessage, EvGateDecision, EvToolResult, EvAssistantMessage, EvRunFinished}
	if got := types(f.events(t, "s")); !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v\nwant %v", got, want)
	}
}

func TestConfirmWithoutApproverIsRefused(t *testing.T) {
	var saw string
	f := newFixture(t, Config{}, runCmd("touch made-by-model"), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "could not"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "make a file", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made-by-model")); err == nil {
		t.Fatal("the write ran without approval")
	}
	if !strings.Contains(saw, "approval") {
		t.Errorf("model was told %q", saw)
	}
}

func TestAllowAllRunsConfirmButNeverDeny(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("touch made"), runCmd("rm -rf /"), say("ok"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, AllowAll: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "made")); err != nil {
		t.Errorf("allow-all did not run the write: %v", err)
	}
	var verdicts []string
	for _, e := range f.events(t, "s") {
		if e.Type == EvGateDecision {
			var p GatePayload
			json.Unmarshal(e.Payload, &p)
			verdicts = append(verdicts, p.Verdict+"/"+p.Action)
		}
	}
	if want := []string{"confirm/run", "deny/refuse"}; !reflect.DeepEqual(verdicts, want) {
		t.Errorf("decisions = %v, want %v", verdicts, want)
	}
}

func TestApprovalIsCommittedBeforeTheCommandRuns(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("touch approved-file"), say("done"))
	var sawAsk bool
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		// The request is in the chain before the human is asked.
		for e := range f.db.Events("s", 1) {
			sawAsk = sawAsk || e.Type == EvApprovalAsked
		}
		if a.Command != "touch approved-file" || a.SHA256 == "" || a.RequestID == "" {
			t.Errorf("approval = %+v", a)
		}
		return ApprovalDecision{Approved: true, By: "user:bob"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if !sawAsk {
		t.Error("approval_requested was not committed before asking")
	}
	got := types(f.events(t, "s"))
	i := indexOf(got, EvApprovalDecided)
	if i < 0 || got[i+1] != EvToolResult {
		t.Errorf("events = %v: want approval_decision right before tool_result", got)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "approved-file")); err != nil {
		t.Error("approved command did not run")
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func TestStoreFailureStopsBeforeRunning(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("touch should-not-exist"))
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		f.db.Close() // the decision cannot be committed now
		return ApprovalDecision{Approved: true, By: "user:bob"}, nil
	})
	_, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver})
	if err == nil {
		t.Fatal("Run succeeded with a closed store")
	}
	if _, err := os.Stat(filepath.Join(f.dir, "should-not-exist")); err == nil {
		t.Fatal("command ran although its approval was not committed")
	}
}

func TestToolErrorsGoBackToTheModel(t *testing.T) {
	var seen []string
	grab := func(next func(Request) (Response, error)) func(Request) (Response, error) {
		return func(r Request) (Response, error) {
			seen = append(seen, lastToolContent(r))
			return next(r)
		}
	}
	f := newFixture(t, Config{},
		call(ToolRun, `{"command": "ls"`),
		grab(call("launch_missiles", `{}`)),
		grab(call(ToolRun, `{"reason":"no command"}`)),
		grab(call(ToolReadFile, `{"path":"/etc/shadow"}`)),
		grab(say("gave up")))
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir})
	if err != nil || res.Answer != "gave up" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	wants := []string{"not a valid JSON object", "unknown tool \"launch_missiles\"", "needs the field \"command\"", "not run"}
	for i, w := range wants {
		if !strings.Contains(seen[i], w) {
			t.Errorf("tool result %d = %q, want it to mention %q", i, seen[i], w)
		}
	}
}

func TestBudgetStopsAModelThatNeverFinishes(t *testing.T) {
	var replies []func(Request) (Response, error)
	for range 3 {
		replies = append(replies, runCmd("true"))
	}
	f := newFixture(t, Config{Budgets: Budgets{MaxSteps: 3}}, replies...)
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "loop", Dir: f.dir, Goal: true})
	if !errors.Is(err, ErrBudget) || res.Status != StatusBudget {
		t.Fatalf("Run = %+v, %v; want budget", res, err)
	}
	evs := f.events(t, "s")
	var p RunPayload
	json.Unmarshal(evs[len(evs)-1].Payload, &p)
	if p.Status != StatusBudget || !strings.Contains(p.Detail, "steps") {
		t.Errorf("run_finished = %+v", p)
	}
}

// TestWallTimeIsRecordedAsTheBudget: the run's wall time ending a running
// command is recorded as the budget, in the result and the run's end,
// never as someone's interrupt.
func TestWallTimeIsRecordedAsTheBudget(t *testing.T) {
	f := newFixture(t, Config{Budgets: Budgets{MaxWall: 2 * time.Second}}, runCmd("sleep 60"))
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "wait", Dir: f.dir, AllowAll: true})
	if !errors.Is(err, ErrBudget) || res.Status != StatusBudget || res.Cause == nil || res.Cause.Kind != StopBudget {
		t.Fatalf("Run = %+v, %v; want the wall-time budget", res, err)
	}
	for _, e := range f.events(t, "s") {
		var p struct {
			Status  string `json:"status"`
			Content string `json:"content"`
			Cause   string `json:"cause"`
			CauseBy string `json:"cause_by"`
		}
		json.Unmarshal(e.Payload, &p)
		switch e.Type {
		case EvToolResult:
			if p.Cause != StopBudget || p.CauseBy != "wall time 2s" || !strings.Contains(p.Content, "the run's budget ran out (wall time 2s)") {
				t.Errorf("tool_result = %+v", p)
			}
		case EvRunFinished:
			if p.Status != StatusBudget || p.Cause != StopBudget || p.CauseBy != "wall time 2s" {
				t.Errorf("run_finished = %+v", p)
			}
		}
	}
}

func TestGoalModeEndsAtAgentDone(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("true"), say("thinking aloud"), call(ToolAgentDone, `{"summary":"all good"}`))
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "check", Dir: f.dir, Goal: true})
	if err != nil || res.Status != StatusDone || res.Answer != "all good" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	// The model saw agent_done among its tools.
	if !hasTool(f.model.reqs[0].Tools, ToolAgentDone) {
		t.Error("goal mode did not offer agent_done")
	}
}

func hasTool(tools []Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

func TestPrefixIsStableAcrossCalls(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("echo one"), runCmd("echo two"), say("done"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	f.model.replies = append(f.model.replies, say("again"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "y", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	reqs := f.model.reqs
	for i := 1; i < len(reqs); i++ {
		prev, cur := reqs[i-1].Messages, reqs[i].Messages
		if len(cur) <= len(prev) {
			t.Fatalf("request %d has %d messages, previous %d", i, len(cur), len(prev))
		}
		a, _ := json.Marshal(prev)
		b, _ := json.Marshal(cur[:len(prev)])
		if string(a) != string(b) {
			t.Errorf("request %d does not start with request %d's messages", i, i-1)
		}
	}
}

func TestProjectIsPureAndMatchesIncremental(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("echo a"), say("first"), say("second"))
	f.a.Run(t.Context(), Turn{Session: "s", Text: "one", Dir: f.dir})
	if err := f.a.Clear("s", "user:x"); err != nil {
		t.Fatal(err)
	}
	f.a.Run(t.Context(), Turn{Session: "s", Text: "two", Dir: f.dir})
	evs := f.events(t, "s")
	a, _ := json.Marshal(Project(evs))
	b, _ := json.Marshal(Project(evs))
	inc, _ := f.a.Messages("s")
	c, _ := json.Marshal(inc)
	if string(a) != string(b) || string(a) != string(c) {
		t.Fatalf("projections differ:\n%s\n%s\n%s", a, b, c)
	}
	// After /clear only the new branch is projected.
	msgs := Project(evs)
	if strings.Contains(string(a), "\"one\"") || msgs[len(msgs)-1].Content != "second" {
		t.Errorf("projection after clear = %s", a)
	}
}

func TestInterruptedToolCallIsClosedInProjection(t *testing.T) {
	evs := []store.Event{
		{Type: EvUserMessage, Payload: mustJSON(UserMessagePayload{Text: "hi"})},
		{Type: EvAssistantMessage, Payload: mustJSON(AssistantPayload{Protocol: "tools", ToolCalls: []ToolCall{{ID: "c1", Name: ToolRun, Arguments: "{}"}}})},
		{Type: EvUserMessage, Payload: mustJSON(UserMessagePayload{Text: "again"})},
	}
	msgs := Project(evs)
	if len(msgs) != 4 || msgs[2].Role != RoleTool || msgs[2].ToolCallID != "c1" || msgs[3].Content != "again" {
		t.Errorf("Project = %+v", msgs)
	}
}

func TestChildEnvironmentIsAllowlisted(t *testing.T) {
	env := []string{"PATH=.:/usr/bin:/bin", "HOME=/root", "AGENT_API_KEY=sk-secret", "SLACK_BOT_TOKEN=xoxb-1",
		"LC_ALL=C", "MY_PASSWORD=x", "KUBECONFIG=/k", "THINBOT_X=1", "RANDOM_VAR=1"}
	env = append(env, "CDPATH=/etc", "BASH_ENV=/tmp/x", "LD_PRELOAD=/tmp/x.so", "GIT_CONFIG_PARAMETERS='core.pager=sh'",
		"OPENSSL_CONF=/tmp/c", "TAR_OPTIONS=--to-command=sh", "BASH_FUNC_ls%%=() { id; }")
	got := ChildEnv(env, []string{"KUBECONFIG", "AGENT_API_KEY", "MY_*", "PATH", "CDPATH", "BASH_ENV", "LD_*", "GIT_*",
		"OPENSSL_CONF", "TAR_OPTIONS", "BASH_FUNC_*"}, DefaultPath)
	want := []string{"PATH=" + DefaultPath, "HOME=/root", "LC_ALL=C", "KUBECONFIG=/k"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChildEnv = %v, want %v", got, want)
	}
}

func TestExecKillsTheProcessGroupOnCancel(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan ExecResult, 1)
	go func() {
		res, err := Exec(ctx, ExecConfig{}, sandbox.Approved, dir, "sleep 60 & echo $! > pid; wait")
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	var pid int
	for range 500 {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			fmt.Sscan(string(b), &pid)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("the child never wrote its pid")
	}
	cancel()
	res := <-done
	if !res.Cancelled {
		t.Errorf("result = %+v, want Cancelled", res)
	}
	// The background sleep in the group is gone (or a zombie being reaped).
	for range 200 {
		if err := syscall.Kill(pid, 0); err != nil {
			return
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("process %d of the group survived the cancellation", pid)
}

func TestExecTimeoutAndOutputCap(t *testing.T) {
	cfg := ExecConfig{Timeout: 200 * time.Millisecond, Environ: []string{"PATH=" + os.Getenv("PATH")}}
	res, err := Exec(t.Context(), cfg, sandbox.ReadOnly, t.TempDir(), "sleep 5")
	if err != nil || !res.TimedOut {
		t.Fatalf("Exec = %+v, %v; want timeout", res, err)
	}
	cfg = ExecConfig{CaptureLimit: 1000, Environ: []string{"PATH=" + os.Getenv("PATH")}}
	res, err = Exec(t.Context(), cfg, sandbox.ReadOnly, t.TempDir(), "seq 1 100000")
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != 588895 || len(res.Output) > 1100 || !strings.Contains(string(res.Output), "bytes omitted") ||
		!strings.HasPrefix(string(res.Output), "1\n2\n") || !strings.HasSuffix(string(res.Output), "100000\n") {
		t.Errorf("size %d, output %d bytes: %.80q...", res.Size, len(res.Output), res.Output)
	}
	if v := textfmt.HeadTail(strings.Repeat("é", 100), 51); !strings.Contains(v, "omitted") || !utf8Valid(v) {
		t.Errorf("headTail broke UTF-8: %q", v)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

func TestTextProtocolSwitchIsRecorded(t *testing.T) {
	f := newFixture(t, Config{},
		fail(fmt.Errorf("HTTP 400: %w", ErrToolsUnsupported)),
		func(r Request) (Response, error) {
			if r.Tools != nil {
				t.Error("tools sent after the switch")
			}
			return Response{Content: "Checking.\n```bash\necho via-text\n```"}, nil
		},
		func(r Request) (Response, error) {
			if !strings.Contains(lastToolContent(r), "via-text") {
				t.Errorf("model saw %q", lastToolContent(r))
			}
			return Response{Content: "All fine."}, nil
		})
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir})
	if err != nil || res.Answer != "All fine." {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if indexOf(types(f.events(t, "s")), EvProtocolSwitch) < 0 {
		t.Error("no protocol_switch event")
	}
}

func TestContextOverflowCompactsAndRetries(t *testing.T) {
	f := newFixture(t, Config{}, say("first answer"),
		fail(fmt.Errorf("HTTP 400: %w", ErrContextLength)),
		say("SUMMARY: user asked things"),
		func(r Request) (Response, error) {
			if !strings.Contains(r.Messages[1].Content, "SUMMARY: user asked things") {
				t.Errorf("after compaction the request starts with %q", r.Messages[1].Content)
			}
			return Response{Content: "second answer"}, nil
		})
	f.a.Run(t.Context(), Turn{Session: "s", Text: "one", Dir: f.dir})
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "two", Dir: f.dir})
	if err != nil || res.Answer != "second answer" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

// funcModel answers every request with f.
type funcModel func(Request) (Response, error)

func (f funcModel) Complete(_ context.Context, r Request) (Response, error) { return f(r) }

func TestAutomaticCompactionKeepsPromptUnderLimit(t *testing.T) {
	big := strings.Repeat("x", 3000)
	const window, share = 8000, 0.5
	var maxTokens, compactions int
	model := funcModel(func(r Request) (Response, error) {
		if last := r.Messages[len(r.Messages)-1].Content; strings.HasPrefix(last, "The conversation is getting long") {
			compactions++
			return Response{Content: "SUMMARY of earlier work"}, nil
		}
		maxTokens = max(maxTokens, EstimateTokens(r.Messages))
		return Response{Content: "noted " + big}, nil
	})
	f := newFixture(t, Config{ContextWindow: window, CompactAt: share})
	f.a.cfg.Model = model
	for i := range 12 {
		if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: fmt.Sprintf("message %d %s", i, big), Dir: f.dir}); err != nil {
			t.Fatal(err)
		}
	}
	if compactions < 2 {
		t.Errorf("%d compactions over 12 long turns, want at least 2", compactions)
	}
	// A request may exceed the threshold by at most the one message added
	// after the check (about 800 tokens here), never the window.
	if maxTokens > int(window*share)+800 || maxTokens > window {
		t.Errorf("largest prompt was %d tokens (threshold %d)", maxTokens, int(window*share))
	}
	msgs, _ := f.a.Messages("s")
	if !strings.Contains(msgs[1].Content, "SUMMARY of earlier work") {
		t.Errorf("projection does not start with the summary: %.80q", msgs[1].Content)
	}
}

func TestMemoryToolWritesFileAndEvent(t *testing.T) {
	f := newFixture(t, Config{}, call(ToolMemory, `{"note":"db01 is the primary"}`), say("remembered"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "remember", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(f.dir, MemoryFile))
	if err != nil || !strings.Contains(string(b), "db01 is the primary") {
		t.Fatalf("memory file = %q, %v", b, err)
	}
	f.model.replies = append(f.model.replies, func(r Request) (Response, error) {
		if !strings.Contains(r.Messages[0].Content, "db01 is the primary") {
			t.Error("memory not in the next run's system prompt")
		}
		return Response{Content: "ok"}, nil
	})
	f.a.Run(t.Context(), Turn{Session: "s2", Text: "hi", Dir: f.dir})
}

func TestRecoverClosesPendingApprovalsAndRuns(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("touch x"))
	// Simulate a crash while waiting for approval: the approver never
	// returns before the run's context dies and the record is cut short.
	ctx, cancel := context.WithCancel(t.Context())
	approver := &postingApprover{where: "post1", await: func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		f.db.Close() // the process "dies": nothing more is recorded
		cancel()
		return ApprovalDecision{}, ctx.Err()
	}}
	f.a.Run(ctx, Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver})
	db, err := store.Open(f.db.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := Recover(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Approvals) != 1 || u.Approvals[0].PostID != "post1" || len(u.Runs) != 1 {
		t.Fatalf("Recover = %+v", u)
	}
	u, _ = Recover(db)
	if len(u.Approvals)+len(u.Runs) != 0 {
		t.Errorf("second Recover = %+v, want nothing", u)
	}
}

func TestMessagesViewsAreNotChangedByLaterEvents(t *testing.T) {
	ev := func(seq uint64, typ string, payload any) store.Event {
		return store.Event{Seq: seq, Type: typ, Payload: mustJSON(payload)}
	}
	var p Projector
	p.Apply(ev(1, EvSystemPrompt, SystemPromptPayload{Text: "sys one"}))
	p.Apply(ev(2, EvUserMessage, UserMessagePayload{Text: "q1"}))
	p.Apply(ev(3, EvAssistantMessage, AssistantPayload{Content: "a1", Protocol: "tools"}))
	view := p.Messages()
	before, _ := json.Marshal(view)
	if p.Tokens() != EstimateTokens(view) {
		t.Errorf("Tokens() = %d, EstimateTokens = %d", p.Tokens(), EstimateTokens(view))
	}
	p.Apply(ev(4, EvUserMessage, UserMessagePayload{Text: "q2"}))
	_ = append(view, Message{Role: RoleUser, Content: "caller's own"}) // must not leak into p
	p.Apply(ev(5, EvSystemPrompt, SystemPromptPayload{Text: "sys two"}))
	p.Apply(ev(6, EvCompacted, CompactedPayload{Summary: "S", UpToSeq: 3}))
	after, _ := json.Marshal(view)
	if string(before) != string(after) {
		t.Errorf("an earlier view changed:\n%s\n%s", before, after)
	}
	got := p.Messages()
	if len(got) != 3 || got[0].Content != "sys two" || !strings.Contains(got[1].Content, "S") || got[2].Content != "q2" {
		t.Errorf("Messages after compaction = %+v", got)
	}
	if p.Tokens() != EstimateTokens(got) {
		t.Errorf("Tokens() = %d, EstimateTokens = %d", p.Tokens(), EstimateTokens(got))
	}
}

func TestSecretsAreRedactedFromOutput(t *testing.T) {
	var saw string
	f := newFixture(t, Config{Secrets: []string{"xoxb-very-secret-token", "short"}},
		runCmd("echo token=xoxb-very-secret-token; echo short"),
		func(r Request) (Response, error) {
			saw = lastToolContent(r)
			return Response{Content: "ok"}, nil
		})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, AllowAll: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(saw, "xoxb-very-secret-token") || !strings.Contains(saw, "token=[REDACTED]") || !strings.Contains(saw, "short") {
		t.Errorf("model saw %q", saw)
	}
	for _, e := range f.events(t, "s") {
		if strings.Contains(string(e.Payload), "xoxb-very-secret-token") && e.Type != EvAssistantMessage && e.Type != EvGateDecision {
			t.Errorf("%s event holds the secret: %s", e.Type, e.Payload)
		}
	}
}

func TestModelFailureIsErrModelAndRecorded(t *testing.T) {
	f := newFixture(t, Config{}, fail(errors.New("connection refused")))
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir})
	if !errors.Is(err, ErrModel) || res.Status != StatusError {
		t.Fatalf("Run = %+v, %v; want ErrModel", res, err)
	}
	evs := f.events(t, "s")
	var p RunPayload
	json.Unmarshal(evs[len(evs)-1].Payload, &p)
	if evs[len(evs)-1].Type != EvRunFinished || p.Status != StatusError || !strings.Contains(p.Detail, "connection refused") {
		t.Errorf("last event %s %+v", evs[len(evs)-1].Type, p)
	}
}

func TestRecoverReportsQueuedMessagesUntilHandled(t *testing.T) {
	f := newFixture(t, Config{}, say("handled"))
	note := func(id, text string) {
		if _, err := f.a.NoteUnlocked("s", EvNote, "user:al", NotePayload{Kind: NoteMessageQueued, PostID: id, User: "U1", Name: "al", Detail: text}); err != nil {
			t.Fatal(err)
		}
	}
	note("m1", "first")
	note("m2", "second")
	note("m1", "first") // noted twice: reported once
	u, err := Recover(f.db)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Queued) != 2 || u.Queued[0].MessageID != "m1" || u.Queued[1].Text != "second" || u.Queued[1].UserName != "al" {
		t.Fatalf("Queued = %+v", u.Queued)
	}
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "first", MessageID: "m1", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	u, _ = Recover(f.db)
	if len(u.Queued) != 1 || u.Queued[0].MessageID != "m2" {
		t.Errorf("after m1 was handled, Queued = %+v", u.Queued)
	}
}

// TestApprovalPostedIsRecordedByTheRun: where Ask shows the request is
// recorded by the run before it awaits the decision, and Decided follows
// the decision's commit.
func TestApprovalPostedIsRecordedByTheRun(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("touch x"), say("ok"))
	var kept Approval
	var sawNote bool
	approver := &postingApprover{where: "post9", await: func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		kept = a
		for e := range f.db.Events("s", 1) {
			var p NotePayload
			if e.Type == EvNote && json.Unmarshal(e.Payload, &p) == nil && p.Kind == NoteApprovalPosted {
				sawNote = true
			}
		}
		return ApprovalDecision{By: "user:bob", Why: "no"}, nil
	}}
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if !sawNote {
		t.Error("Await was called before the post was recorded")
	}
	var got []string
	for _, e := range f.events(t, "s") {
		switch e.Type {
		case EvApprovalAsked, EvApprovalDecided:
			got = append(got, e.Type)
		case EvNote:
			var p NotePayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Kind+" "+p.RequestID+" "+p.PostID)
		}
	}
	want := []string{EvApprovalAsked, NoteApprovalPosted + " " + kept.RequestID + " post9", EvApprovalDecided}
	if !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
	if want := []string{"ask", "await post9", "decided post9"}; !slices.Equal(approver.calls, want) {
		t.Errorf("approver calls = %q, want %q", approver.calls, want)
	}
	if approver.decErr != nil || approver.dec != (ApprovalDecision{By: "user:bob", Why: "no"}) {
		t.Errorf("Decided(%+v, %v), want the committed decision", approver.dec, approver.decErr)
	}
}

// TestApprovalPostNotRecordedIsNotAwaited: a request whose post cannot be
// recorded (a restart could not close it) is never awaited, so no click
// can decide it; the front end hears of it through Decided, and nothing
// runs.
func TestApprovalPostNotRecordedIsNotAwaited(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("touch should-not-exist"))
	approver := &postingApprover{where: "post1",
		ask: func(Approval) { f.db.Close() }, // the post is shown, its record fails
		await: func(context.Context, Approval) (ApprovalDecision, error) {
			return ApprovalDecision{Approved: true, By: "user:bob"}, nil
		}}
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err == nil {
		t.Error("Run succeeded although the post could not be recorded")
	}
	if want := []string{"ask", "decided post1"}; !slices.Equal(approver.calls, want) {
		t.Errorf("approver calls = %q, want %q", approver.calls, want)
	}
	if approver.decErr == nil || approver.dec.Approved {
		t.Errorf("Decided(%+v, %v), want a refusal that is not recorded", approver.dec, approver.decErr)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "should-not-exist")); err == nil {
		t.Error("the command ran")
	}
}

// TestApprovalAskFailureRefuses: a request that cannot be shown is refused
// and recorded as such; it is neither awaited nor reported as decided.
func TestApprovalAskFailureRefuses(t *testing.T) {
	var saw string
	f := newFixture(t, Config{}, runCmd("touch should-not-exist"), func(r Request) (Response, error) {
		saw = lastToolContent(r)
		return Response{Content: "ok"}, nil
	})
	approver := &postingApprover{askErr: errors.New("chat down")}
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ask"}; !slices.Equal(approver.calls, want) {
		t.Errorf("approver calls = %q, want %q", approver.calls, want)
	}
	d := payloadOf[ApprovalDecidedPayload](t, f, "s", EvApprovalDecided)
	if len(d) != 1 || d[0].Approved || d[0].By != "system" || d[0].Why != "chat down" {
		t.Errorf("decisions = %+v", d)
	}
	if !strings.Contains(saw, "approval was refused by system (chat down)") {
		t.Errorf("model was told %q", saw)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "should-not-exist")); err == nil {
		t.Error("the command ran")
	}
}

// TestStepIsOneCommit: a step is one durable commit, its gate decision
// (with the model reply that asked for the command) just before the command
// runs; a command's result is in the chain at once but made durable by that
// next commit. Every request showed the model exactly what the chain
// records before the reply to it, whether the step ran one command, two, or
// none (a malformed call).
func TestStepIsOneCommit(t *testing.T) {
	two := func(r Request) (Response, error) {
		return Response{ToolCalls: []ToolCall{
			{ID: "two", Name: ToolRun, Arguments: `{"command":"echo two"}`},
			{ID: "three", Name: ToolRun, Arguments: `{"command":"echo three"}`}}}, nil
	}
	// seen is the chain's last seq as each request went out.
	var db *store.DB
	var seen []uint64
	rec := func(next func(Request) (Response, error)) func(Request) (Response, error) {
		return func(r Request) (Response, error) {
			seen = append(seen, db.LastSeq())
			return next(r)
		}
	}
	f := newFixture(t, Config{}, rec(runCmd("echo one")), rec(two), rec(call(ToolRun, `{"command":`)), rec(runCmd("echo four")), rec(say("done")))
	db = f.db
	syncsBefore := db.Syncs()
	if res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "go", Dir: f.dir}); err != nil || res.Status != StatusAnswered {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	evs := f.events(t, "s")
	var replies []int
	for i, e := range evs {
		if e.Type == EvAssistantMessage {
			replies = append(replies, i)
		}
	}
	if len(replies) != len(f.model.reqs) {
		t.Fatalf("%d replies recorded for %d requests", len(replies), len(f.model.reqs))
	}
	for i, r := range f.model.reqs {
		want, _ := json.Marshal(Project(evs[:replies[i]]))
		got, _ := json.Marshal(r.Messages)
		if string(got) != string(want) {
			t.Errorf("request %d showed the model\n%s\nthe chain has before its reply\n%s", i, got, want)
		}
		if strings.Contains(string(got), interruptedResult) {
			t.Errorf("request %d showed a stand-in result: %s", i, got)
		}
	}
	var results, decisions int
	for _, e := range evs {
		switch e.Type {
		case EvToolResult:
			results++
		case EvGateDecision:
			decisions++
		}
	}
	if results != 5 || decisions != 4 {
		t.Fatalf("events = %v", types(evs))
	}
	// Durable: each decision, and the run's end (the start and the
	// results are synced by them).
	if got := f.db.Syncs() - syncsBefore; got != 4+1 {
		t.Errorf("the run made %d durable commits, want 5 (4 decisions, end): %v", got, types(evs))
	}
	// Each request was what the chain held when it went out: the results
	// it carried were readable already.
	for i, r := range f.model.reqs {
		var upTo []store.Event
		for _, e := range evs {
			if e.Seq <= seen[i] {
				upTo = append(upTo, e)
			}
		}
		want, _ := json.Marshal(Project(upTo))
		if got, _ := json.Marshal(r.Messages); string(got) != string(want) {
			t.Errorf("request %d is not the chain as it stood (seq %d):\n%s\n%s", i, seen[i], got, want)
		}
	}
}

// TestStreamedTextFollowsTheRecord: text streamed to the chat (Hooks.Text)
// is shown only once everything in the chain before it is durable: the
// run's start and a command's result are appended buffered, and an answer
// shown while they are not synced could outlive them in a machine restart.
func TestStreamedTextFollowsTheRecord(t *testing.T) {
	stream := func(text string) func(Request) (Response, error) {
		return func(r Request) (Response, error) {
			for _, w := range strings.SplitAfter(text, " ") {
				r.OnText(w)
			}
			return Response{Content: text, FinishReason: "stop"}, nil
		}
	}
	for _, tt := range []struct {
		name    string
		replies []func(Request) (Response, error)
	}{
		{"answer", []func(Request) (Response, error){stream("the disk is fine")}},
		{"answer after a command", []func(Request) (Response, error){runCmd("echo one"), stream("it said one")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Config{}, tt.replies...)
			var shown strings.Builder
			text := func(d string) {
				if durable, last := f.db.DurableSeq(), f.db.LastSeq(); durable != last {
					t.Errorf("text %q shown with the chain durable up to seq %d of %d", d, durable, last)
				}
				shown.WriteString(d)
			}
			res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "go", Dir: f.dir, Hooks: Hooks{Text: text}})
			if err != nil || res.Status != StatusAnswered {
				t.Fatalf("Run = %+v, %v", res, err)
			}
			if shown.String() != res.Answer {
				t.Errorf("shown %q, answer %q", shown.String(), res.Answer)
			}
		})
	}
}

// TestAuditSummaryIsDurable: /audit posts the session's record to the
// chat, so what it lists (a command's result appended buffered while the
// run goes on) is synced first.
func TestAuditSummaryIsDurable(t *testing.T) {
	f := newFixture(t, Config{}, runCmd("echo one"), say("done"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "go", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.AppendBuffered(t.Context(), store.Event{Session: "s", Type: EvNote, Actor: "bot"}); err != nil {
		t.Fatal(err)
	}
	rows, err := f.a.Audit("s", 20)
	if err != nil || len(rows) != 1 {
		t.Fatalf("Audit = %+v, %v", rows, err)
	}
	if durable, last := f.db.DurableSeq(), f.db.LastSeq(); durable != last {
		t.Errorf("Audit read the chain durable up to seq %d of %d", durable, last)
	}
}

// A run that reaches its wall time (the turn's, below the agent's) ends as
// a budget and says so: the answer names the budget, as the other budgets'
// do, so that a thread is told why the run stopped.
func TestWallTimeStopsTheRunAndSaysSo(t *testing.T) {
	f := newFixture(t, Config{})
	a, err := New(Config{Store: f.db, Model: waitingModel{}, Policy: gate.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(t.Context(), Turn{Session: "s", Text: "wait", Dir: f.dir, Budgets: Budgets{MaxWall: 200 * time.Millisecond}})
	if !errors.Is(err, ErrBudget) || res.Status != StatusBudget {
		t.Fatalf("Run = %+v, %v; want the wall-time budget", res, err)
	}
	if want := "Stopped: the run used its budget of 200ms wall time."; res.Answer != want {
		t.Errorf("answer %q, want %q", res.Answer, want)
	}
	evs := f.events(t, "s")
	var p RunPayload
	json.Unmarshal(evs[len(evs)-1].Payload, &p)
	if p.Status != StatusBudget || !strings.Contains(p.Detail, "wall time 200ms") {
		t.Errorf("run_finished = %+v", p)
	}
}

// waitingModel answers when the call is cancelled, not before.
type waitingModel struct{}

func (waitingModel) Complete(ctx context.Context, _ Request) (Response, error) {
	<-ctx.Done()
	return Response{}, ctx.Err()
}
