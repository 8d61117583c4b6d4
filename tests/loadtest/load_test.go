package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// TestLoadSmall runs the load command at a reduced scale so that CI keeps
// it working: every message is answered exactly once, every message cost
// the scripted number of model calls, and the chain verifies (in process
// and with `thinbot audit verify`). It asserts nothing about timing.
// TestMain lets the test binary serve the fakes, as the loadtest program
// does when it starts them in their own process.
func TestMain(m *testing.M) {
	if spec := os.Getenv(fakesEnv); spec != "" {
		if err := serveFakes(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest fakes:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestLoadSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds thinbot and runs the daemon")
	}
	const threads, messages, steps = 20, 2, 1
	prof := t.TempDir()
	res, err := Run(t.Context(), Config{
		Threads: threads, Messages: messages, Steps: steps, Latency: 20 * time.Millisecond,
		Timeout: time.Minute, Dir: t.TempDir(), Profile: prof,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := threads * messages; res.Sent != want || res.Answered != want {
		t.Errorf("sent %d, answered %d; want %d each", res.Sent, res.Answered, want)
	}
	if res.Missing != 0 || res.Duplicates != 0 {
		t.Errorf("%d answers missing, %d duplicated; want exactly one each", res.Missing, res.Duplicates)
	}
	if want := threads * messages * (steps + 1); res.ModelCalls != want {
		t.Errorf("model calls = %d, want %d", res.ModelCalls, want)
	}
	if !res.ChainOK || res.Events == 0 {
		t.Errorf("chain: ok=%v events=%d", res.ChainOK, res.Events)
	}
	if res.AuditErr != nil || !strings.Contains(res.AuditVerify, "ok") {
		t.Errorf("audit verify: %q, %v", res.AuditVerify, res.AuditErr)
	}
	if res.EndToEnd.N != threads*messages || res.Added.N != res.EndToEnd.N {
		t.Errorf("samples: end-to-end %d, added %d; want %d", res.EndToEnd.N, res.Added.N, threads*messages)
	}
	if res.PeakRSS <= 0 {
		t.Errorf("peak RSS = %d, want > 0", res.PeakRSS)
	}
	// Its CPU taken apart while it ran: the parts are there and add up to
	// no more than what the daemon's wait reported after it stopped (one
	// clock tick of slack per part).
	if sp := res.Split; sp.Daemon <= 0 || sp.Helpers <= 0 || sp.Commands <= 0 || sp.Daemon+sp.Helpers+sp.Commands > res.DaemonCPU+3*clockTick {
		t.Errorf("CPU split %+v of %s", sp, res.DaemonCPU)
	}
	// What it asked of the chat server and the store: each answer is a
	// post; runs share commits, some of them synced.
	if res.BotRequests["POST /api/v4/posts"] < res.Sent || res.Syncs <= 0 || res.Commits < res.Syncs {
		t.Errorf("bot requests %v, store syncs %v, commits %v for %d messages", res.BotRequests, res.Syncs, res.Commits, res.Sent)
	}
	// The daemon wrote its profiles when it stopped (no trace: not asked),
	// the fakes their CPU profile.
	for _, name := range []string{"cpu.pprof", "heap.pprof", "allocs.pprof", "mutex.pprof", "fakes-cpu.pprof"} {
		if fi, err := os.Stat(filepath.Join(prof, name)); err != nil || fi.Size() == 0 {
			t.Errorf("profile %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(prof, "trace.out")); err == nil {
		t.Error("trace.out written without Trace")
	}
	var out bytes.Buffer
	printResult(&out, res)
	for _, want := range []string{"end-to-end", "added", "VmHWM", "daemon / helpers / commands", "daemon+helpers per command", "chat requests per message", "POST /api/v4/posts", "store syncs / commits per message", "events in chain", "thinbot audit verify: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

func TestRunFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-threads", "0"},
		{"-messages", "-1"},
		{"-steps", "-1"},
		{"-ramp", "-1s"},
		{"-trace"}, // without -profile
		{"-nosuchflag"},
		{"extra"},
	} {
		var out, errb bytes.Buffer
		if err := run(t.Context(), args, &out, &errb); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
}

func TestStats(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: stats must sort
	}
	tests := []struct {
		name                   string
		in                     []time.Duration
		min, med, p90, p99, mx time.Duration
	}{
		{"empty", nil, 0, 0, 0, 0, 0},
		{"one", ms(7), ms(7)[0], ms(7)[0], ms(7)[0], ms(7)[0], ms(7)[0]},
		{"two", ms(9, 1), ms(1)[0], ms(1)[0], ms(9)[0], ms(9)[0], ms(9)[0]},
		{"hundred", ms(hundred...), ms(1)[0], ms(50)[0], ms(90)[0], ms(99)[0], ms(100)[0]},
		{"negative", ms(-5, 3, 1), ms(-5)[0], ms(1)[0], ms(3)[0], ms(3)[0], ms(3)[0]},
	}
	for _, tt := range tests {
		s := stats(tt.in)
		if s.N != len(tt.in) || s.Min != tt.min || s.Median != tt.med || s.P90 != tt.p90 || s.P99 != tt.p99 || s.Max != tt.mx {
			t.Errorf("%s: stats = %+v, want min %v median %v p90 %v p99 %v max %v", tt.name, s, tt.min, tt.med, tt.p90, tt.p99, tt.mx)
		}
	}
}

// hwmSeeds are /proc/PID/status excerpts.
var hwmSeeds = []string{
	"Name:\tthinbot\nVmPeak:\t 2061824 kB\nVmSize:\t 2061824 kB\nVmHWM:\t   45612 kB\nVmRSS:\t   40000 kB\n",
	"VmHWM:\t1 kB\n",
	"VmHWM:\t12 MB\n",
	"VmHWM:\tx kB\n",
	"VmRSS:\t5 kB\n",
	"VmHWM:\t-3 kB\n",
	"",
}

func TestParseHWM(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{hwmSeeds[0], 45612 << 10, false},
		{hwmSeeds[1], 1024, false},
		{hwmSeeds[2], 0, true},
		{hwmSeeds[3], 0, true},
		{hwmSeeds[4], 0, true},
		{hwmSeeds[5], 0, true},
		{hwmSeeds[6], 0, true},
	}
	for _, tt := range tests {
		got, err := parseHWM(strings.NewReader(tt.in))
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("parseHWM(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzParseHWM(f *testing.F) {
	for _, s := range hwmSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseHWM(strings.NewReader(s))
		if err != nil && n != 0 {
			t.Errorf("parseHWM(%q) = %d with error %v; want 0", s, n, err)
		}
		if n < 0 || n%1024 != 0 {
			t.Errorf("parseHWM(%q) = %d: not a non-negative count of KiB", s, n)
		}
	})
}

// wsEvent builds a "posted" WebSocket event as the fake sends it.
func wsEvent(userID, message string) string {
	post, _ := json.Marshal(map[string]any{"id": "p1", "user_id": userID, "message": message, "root_id": "r1"})
	b, _ := json.Marshal(map[string]any{"event": "posted", "data": map[string]any{"post": string(post)}, "seq": 3})
	return string(b)
}

func TestAnswerTag(t *testing.T) {
	tests := []struct {
		msg    string
		want   string
		wantOK bool
	}{
		{wsEvent("bot", "Answer for load-3-1."), "load-3-1", true},
		{wsEvent("bot", "_Working on it…_"), "", false},
		{wsEvent("bot", "Queued: load-3-1"), "", false},
		{wsEvent("alice", "Answer for load-3-1."), "", false},
		{strings.Replace(wsEvent("bot", "Answer for load-3-1."), "posted", "post_edited", 1), "", false},
		{`{"event":"hello","data":{}}`, "", false},
		{`{"event":"posted","data":{"post":"not json"}}`, "", false},
		{`not json`, "", false},
	}
	for _, tt := range tests {
		got, ok := answerTag([]byte(tt.msg), "bot")
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("answerTag(%s) = %q, %v; want %q, %v", tt.msg, got, ok, tt.want, tt.wantOK)
		}
	}
}

func FuzzAnswerTag(f *testing.F) {
	f.Add(wsEvent("bot", "Answer for load-3-1."))
	f.Add(wsEvent("bot", "Answer for nothing"))
	f.Add(`{"event":"posted","data":{"post":"{}"}}`)
	f.Add(`{"event":"hello"}`)
	f.Fuzz(func(t *testing.T, msg string) {
		tag, ok := answerTag([]byte(msg), "bot")
		if ok != (tag != "") || (ok && !tagRe.MatchString(tag)) {
			t.Errorf("answerTag(%q) = %q, %v", msg, tag, ok)
		}
	})
}

// TestScriptedModel checks the model's script against conversations as the
// agent projects them: steps tool calls after each user message, then the
// answer naming the message's tag.
func TestScriptedModel(t *testing.T) {
	msg := func(role, content string) fakemodel.Message { return fakemodel.Message{Role: role, Content: content} }
	sys := msg("system", "You are thinbot.")
	tests := []struct {
		name     string
		steps    int
		msgs     []fakemodel.Message
		wantTool bool
		want     string // the answer text or the command
	}{
		{"plain", 0, []fakemodel.Message{sys, msg("user", "please look at load-4-0")}, false, "Answer for load-4-0."},
		{"first step", 1, []fakemodel.Message{sys, msg("user", "please look at load-4-0")}, true, "echo load-4-0"},
		{"after step", 1, []fakemodel.Message{sys, msg("user", "load-4-0"), msg("assistant", ""), msg("tool", "load-4-0")}, false, "Answer for load-4-0."},
		{"second message", 1, []fakemodel.Message{sys, msg("user", "load-4-0"), msg("assistant", ""), msg("tool", "x"),
			msg("assistant", "Answer for load-4-0."), msg("user", "again load-4-1")}, true, "echo load-4-1"},
		{"two steps", 2, []fakemodel.Message{sys, msg("user", "load-1-0"), msg("assistant", ""), msg("tool", "x")}, true, "echo load-1-0"},
		{"no tag", 0, []fakemodel.Message{sys, msg("user", "hello")}, false, "Answer for (no tag)."},
	}
	for _, tt := range tests {
		rec := &calls{at: map[string][]time.Time{}}
		rep := scriptedModel(tt.steps, time.Millisecond, rec)(fakemodel.Request{Messages: tt.msgs})
		if rep.Delay != time.Millisecond {
			t.Errorf("%s: delay %v, want 1ms", tt.name, rep.Delay)
		}
		if tt.wantTool {
			var args struct{ Command string }
			if len(rep.ToolCalls) != 1 || rep.ToolCalls[0].Name != "run" || json.Unmarshal([]byte(rep.ToolCalls[0].Args), &args) != nil || args.Command != tt.want {
				t.Errorf("%s: reply %+v, want one run of %q", tt.name, rep, tt.want)
			}
			continue
		}
		if len(rep.ToolCalls) != 0 || rep.Content != tt.want {
			t.Errorf("%s: reply %+v, want the answer %q", tt.name, rep, tt.want)
		}
	}
}

var statSeeds = []string{
	"4242 (thinbot) S 1 4242 4242 0 -1 4194560 1200 0 0 0 91 29 40 12 20 0 9 0 100 0 0\n",
	"77 (a) b (c)) R 4242 77 77 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5 0 0\n",
	"1 (init) S 0 1 1 0 -1 0 0 0 0 0 1 2\n",
	"1 init S 0 1 1\n",
	"5 (x) S 1 5 5 0 -1 0 0 0 0 0 -1 2 3 4 20\n",
}

// TestParseStat: the times of /proc/PID/stat are read after the command
// name, however odd the name.
func TestParseStat(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    procTime
		wantErr bool
	}{
		{statSeeds[0], procTime{ppid: 1, own: 1200 * time.Millisecond, children: 520 * time.Millisecond}, false},
		{statSeeds[1], procTime{ppid: 4242, own: 70 * time.Millisecond}, false},
		{statSeeds[2], procTime{}, true},
		{statSeeds[3], procTime{}, true},
		{statSeeds[4], procTime{}, true},
	} {
		got, err := parseStat(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	// This process as the kernel writes it.
	if pt, err := procTimes("self"); err != nil || pt.ppid != os.Getppid() {
		t.Errorf("procTimes(self) = %+v, %v; want parent %d", pt, err, os.Getppid())
	}
}

func FuzzParseStat(f *testing.F) {
	for _, s := range statSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pt, err := parseStat(s)
		if err != nil && pt != (procTime{}) {
			t.Errorf("parseStat(%q) = %+v with error %v; want zero", s, pt, err)
		}
		if pt.own < 0 || pt.children < 0 {
			t.Errorf("parseStat(%q) = %+v: negative time", s, pt)
		}
	})
}
