package agentcore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// benchCommand passes the gate (thinbot gate check true) and really runs,
// read-only, through the sandbox.
const benchCommand = "true"

// stepsPerRun is how many tool steps one benchmarked run makes before the
// model answers; the run's own events (start, user message, end) are spread
// over them.
const stepsPerRun = 10

// BenchmarkStep measures the kernel's cost per step: one model call answered
// at once with a command that passes the gate, the gate, the command run
// through the sandbox by Exec, and its result recorded, in a session that
// already holds 10 or 10,000 events (with an incremental projection the two
// should be close). Each run makes stepsPerRun such steps and then answers.
//
// baseline is what a step cannot avoid: the same command spawned through
// the sandbox directly, plus one fsync of a small write on the same disk.
// ratio interleaves a step and a baseline so that both see the same load on
// a noisy machine and reports step time / baseline time (target <= 1.3).
func BenchmarkStep(b *testing.B) {
	dir := b.TempDir()
	sb, err := sandbox.Start(b.Context(), sandbox.Config{Workspaces: []string{dir}})
	if err != nil {
		if os.Getenv("CI") == "" && errors.Is(err, syscall.EPERM) {
			b.Skipf("this host refuses the sandbox: %v", err)
		}
		b.Fatal(err)
	}
	defer sb.Close()
	exec := ExecConfig{Environ: []string{"PATH=" + os.Getenv("PATH")}, Sandbox: sb}
	shell := exec.withDefaults().Shell

	syncFile, err := os.OpenFile(filepath.Join(dir, "sync"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer syncFile.Close()
	baseline := func(b *testing.B) {
		var out bytes.Buffer
		res, err := sb.Run(context.Background(), sandbox.ReadOnly, sandbox.Cmd{Args: []string{shell, "-c", benchCommand}, Dir: dir, Env: []string{"PATH=" + DefaultPath}}, &out)
		if err != nil || res.ExitCode != 0 {
			b.Fatal(err, res)
		}
		if _, err := syncFile.WriteString(`{"seq":1,"type":"gate_decision"}` + "\n"); err != nil {
			b.Fatal(err)
		}
		if err := syncFile.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("baseline", func(b *testing.B) {
		for b.Loop() {
			baseline(b)
		}
	})
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			run := benchAgent(b, exec, dir, n)
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*stepsPerRun), "ns/step")
		})
	}
	b.Run("ratio", func(b *testing.B) {
		run := benchAgent(b, exec, dir, 10)
		var step, base time.Duration
		for b.Loop() {
			t0 := time.Now()
			run()
			t1 := time.Now()
			for range stepsPerRun {
				baseline(b)
			}
			step, base = step+t1.Sub(t0), base+time.Since(t1)
		}
		b.ReportMetric(float64(step.Nanoseconds())/float64(b.N*stepsPerRun), "ns/step")
		b.ReportMetric(float64(base.Nanoseconds())/float64(b.N*stepsPerRun), "ns/baseline")
		b.ReportMetric(float64(step)/float64(base), "step/baseline")
	})
}

// benchAgent opens a new store whose session "s" holds n
// events, and returns a function that makes one run of stepsPerRun steps in it.
func benchAgent(b *testing.B, exec ExecConfig, dir string, n int) func() {
	db, err := store.Open(filepath.Join(b.TempDir(), "events.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	var pre []store.Event
	for i := range n / 2 {
		pre = append(pre,
			store.Event{Session: "s", Type: EvUserMessage, Payload: mustJSON(UserMessagePayload{Text: fmt.Sprintf("question %d", i)})},
			store.Event{Session: "s", Type: EvAssistantMessage, Payload: mustJSON(AssistantPayload{Content: "answer", Protocol: "tools"})})
	}
	for len(pre) > 0 {
		k := min(len(pre), 1000)
		if _, err := db.Append(b.Context(), pre[:k]...); err != nil {
			b.Fatal(err)
		}
		pre = pre[k:]
	}
	step := 0
	model := funcModel(func(r Request) (Response, error) {
		if step%(stepsPerRun+1) != 0 {
			if last := r.Messages[len(r.Messages)-1]; last.Role != "tool" || last.Content != "exit code: 0\n(no output)" {
				return Response{}, fmt.Errorf("the command did not run: %+v", last)
			}
		}
		step++
		if step%(stepsPerRun+1) != 0 {
			return Response{ToolCalls: []ToolCall{{ID: fmt.Sprint("c", step), Name: ToolRun, Arguments: `{"command":"` + benchCommand + `"}`}}}, nil
		}
		return Response{Content: "ok"}, nil
	})
	a, err := New(Config{Store: db, Model: model, Policy: gate.DefaultPolicy(), ContextWindow: 1 << 24, Exec: exec})
	if err != nil {
		b.Fatal(err)
	}
	// Warm the session cache as a daemon would have it.
	if _, err := a.Messages("s"); err != nil {
		b.Fatal(err)
	}
	return func() {
		res, err := a.Run(b.Context(), Turn{Session: "s", Text: "go", Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if res.Status != StatusAnswered || res.Steps != stepsPerRun {
			b.Fatalf("run = %+v, want answered after %d steps", res, stepsPerRun)
		}
	}
}
