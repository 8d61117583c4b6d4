package replica

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/store"
)

// stepEvents is one step's commit as agentcore makes it: the model's reply
// with its tool call and the gate's decision, one durable Append.
func stepEvents(i int) []store.Event {
	reply := fmt.Sprintf(`{"text":"checking the disk","tool_calls":[{"id":"c%d","name":"run","arguments":{"command":"df -h /var","reason":"%s"}}]}`, i, strings.Repeat("r", 300))
	return []store.Event{
		{Session: "mattermost/ops/root", Type: "assistant_message", Actor: "model", Payload: []byte(reply)},
		{Session: "mattermost/ops/root", Type: "gate_decision", Actor: "gate", Payload: []byte(fmt.Sprintf(`{"call_id":"c%d","verdict":"pass","command":"df -h /var"}`, i))},
	}
}

// BenchmarkStepCommit is the cost of the cluster on a step's commit: one
// durable Append of a step's events on a lone store, and on the leader of a
// three-node cluster on loopback (the entry in a majority's raft logs,
// fsynced, and applied to the leader's store). Each iteration commits one
// step on each, alternately, so that a loaded machine's drift falls on both
// alike; it reports the mean of each (single-ms/step, cluster3-ms/step)
// and their ratio:
//
//	go test -run X -bench StepCommit -benchtime 300x -count 3 ./store/replica
func BenchmarkStepCommit(b *testing.B) {
	single, err := store.Open(filepath.Join(b.TempDir(), "events.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer single.Close()
	// raft's default timeouts, as a deployment has them.
	cluster := leader(b, newClusterWith(b, newCA(b), 3, func(c Config) Config { return c })).db
	var took [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k, db := range []*store.DB{single, cluster} {
			start := time.Now()
			if _, err := db.Append(context.Background(), stepEvents(i)...); err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(start)
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(ms(took[0]), "single-ms/step")
	b.ReportMetric(ms(took[1]), "cluster3-ms/step")
	b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
}
