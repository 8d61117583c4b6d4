package agentcore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// BenchmarkStep measures the kernel's overhead per step (one model call
// answered at once with a no-op command, gate, exec of ":", and the final
// answer) in a session that already holds 10 or 10,000 events. With an
// incremental projection the two should be close.
func BenchmarkStep(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			db, err := store.Open(filepath.Join(b.TempDir(), "events.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var pre []store.Event
			for i := range n / 2 {
				pre = append(pre,
					store.Event{Session: "s", Type: EvUserMessage, Payload: mustJSON(userMessagePayload{Text: fmt.Sprintf("question %d", i)})},
					store.Event{Session: "s", Type: EvAssistantMessage, Payload: mustJSON(assistantPayload{Content: "answer", Protocol: "tools"})})
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
				step++
				if step%2 == 1 {
					return Response{ToolCalls: []ToolCall{{ID: fmt.Sprint("c", step), Name: ToolRun, Arguments: `{"command":":"}`}}}, nil
				}
				return Response{Content: "ok"}, nil
			})
			a, err := New(Config{Store: db, Model: model, Policy: gate.DefaultPolicy(), ContextWindow: 1 << 24,
				Exec: ExecConfig{Environ: []string{"PATH=" + os.Getenv("PATH")}}})
			if err != nil {
				b.Fatal(err)
			}
			dir := b.TempDir()
			// Warm the session cache as a daemon would have it.
			if _, err := a.Messages("s"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.Run(b.Context(), Turn{Session: "s", Text: "go", Dir: dir}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
