package agentcore

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/textproto.golden from this tree")

var durationField = regexp.MustCompile(`"(duration_ms|latency_ms)":\d+`)

// estimatedPrompt is the estimate of a prompt, which holds the test's
// temporary directory, whose name varies in length.
var estimatedPrompt = regexp.MustCompile(`("estimated_usage":\{"prompt_tokens":)\d+`)

// TestTextProtocolGolden pins what the loop does with text-protocol (and a
// few tool-protocol) replies, byte for byte: every event it records, the
// run's result, and what the model is sent next. The loop's text path has
// many small rules (which block runs, labels, notes, the call cap, goal
// mode's agent-done, the nudge) that other tests check only in part; a
// refactor of the loop must leave this file unchanged. After an intended
// change, rewrite it with go test -run TestTextProtocolGolden -update and
// read the diff.
func TestTextProtocolGolden(t *testing.T) {
	tc := func(name, args string) string {
		return fmt.Sprintf("<tool_call>{\"name\": %q, \"arguments\": %s}</tool_call>", name, args)
	}
	many := ""
	for i := 0; i < 10; i++ {
		many += tc("run", fmt.Sprintf(`{"command":"echo n%d"}`, i)) + "\n"
	}
	type scen struct {
		name    string
		goal    bool
		tools   bool
		replies []func(Request) (Response, error)
	}
	scens := []scen{
		{name: "answer", replies: []func(Request) (Response, error){say("just an answer")}},
		{name: "block", replies: []func(Request) (Response, error){say("why\n```bash\necho hi\n```"), say("done it")}},
		{name: "twoblocks", replies: []func(Request) (Response, error){say("```bash\necho one\n```\n```sh\necho two\n```"), say("ok")}},
		{name: "untagged", replies: []func(Request) (Response, error){say("```\necho quoted\n```")}},
		{name: "call", replies: []func(Request) (Response, error){say(tc("run", `{"command":"echo c1"}`)), say("fine")}},
		{name: "noname", replies: []func(Request) (Response, error){say("<tool_call>{garbage</tool_call>"), say("fine")}},
		{name: "unknown", replies: []func(Request) (Response, error){say(tc("nope", `{}`)), say("fine")}},
		{name: "badargs", replies: []func(Request) (Response, error){say(tc("run", `{"cmd":"x"}`)), say("fine")}},
		{name: "callsandblock", replies: []func(Request) (Response, error){say(tc("run", `{"command":"echo a"}`) + "\n" + tc("read_file", `{"path":"notes.txt"}`) + "\n```bash\necho b\n```"), say("fine")}},
		{name: "many", replies: []func(Request) (Response, error){say(many), say("fine")}},
		{name: "denied", replies: []func(Request) (Response, error){say("```bash\nrm -rf /\n```"), say("fine")}},
		{name: "confirm", replies: []func(Request) (Response, error){say("```bash\ntouch x\n```"), say("fine")}},
		{name: "goalnudge", goal: true, replies: []func(Request) (Response, error){say("thinking"), say("```bash\necho g\n```"), say("summary here\nagent-done")}},
		{name: "goaldonecall", goal: true, replies: []func(Request) (Response, error){say(tc("agent_done", `{"summary":"sum"}`))}},
		{name: "goaldoneblock", goal: true, replies: []func(Request) (Response, error){say("all\n```bash\nagent-done\n```")}},
		{name: "nongoaldone", replies: []func(Request) (Response, error){say("answer\nagent-done")}},
		{name: "skillcall", replies: []func(Request) (Response, error){say(tc("skill", `{"name":"x"}`)), say("fine")}},
		{name: "memory", replies: []func(Request) (Response, error){say(tc("memory", `{"note":"remember me"}`)), say("fine")}},
		{name: "switch", tools: true, replies: []func(Request) (Response, error){fail(fmt.Errorf("%w: no tools", ErrToolsUnsupported)), say("```bash\necho sw\n```"), say("after")}},
		{name: "toolsnudge", tools: true, goal: true, replies: []func(Request) (Response, error){say("hmm"), call(ToolAgentDone, `{"summary":"s"}`)}},
		{name: "toolsmix", tools: true, replies: []func(Request) (Response, error){runCmd("echo t"), call("nope", "{}"), call(ToolRun, "{bad"), say("end")}},
	}
	var out strings.Builder
	for _, sc := range scens {
		cfg := Config{TextProtocol: !sc.tools, Now: func() time.Time { return time.Unix(1e9, 0) }, Budgets: Budgets{MaxSteps: 5}}
		f := newFixture(t, cfg, sc.replies...)
		if err := os.WriteFile(filepath.Join(f.dir, "notes.txt"), []byte("a note\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: "go", Dir: f.dir, Goal: sc.goal})
		fmt.Fprintf(&out, "== %s: %s %q steps=%d calls=%d err=%v\n", sc.name, res.Status, res.Answer, res.Steps, res.ModelCalls, err)
		for _, e := range f.events(t, "s") {
			p := strings.ReplaceAll(string(e.Payload), f.dir, "DIR")
			p = durationField.ReplaceAllString(p, `"$1":0`)
			p = estimatedPrompt.ReplaceAllString(p, `${1}0`)
			fmt.Fprintf(&out, "%d %s %s b%d %s\n", e.Seq, e.Type, e.Actor, e.Branch, p)
		}
		for i, r := range f.model.reqs {
			fmt.Fprintf(&out, "req%d tools=%d msgs=%d last=%q\n", i, len(r.Tools), len(r.Messages), strings.ReplaceAll(lastToolContent(r), f.dir, "DIR"))
		}
	}
	golden := filepath.Join("testdata", "textproto.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("the loop's record differs from %s at line %d:\n got: %s\nwant: %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("the loop's record differs from %s in length: %d lines, want %d", golden, len(gl), len(wl))
	}
}
