package bot

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

// verdictModel answers scheduled questions with the verdicts in order.
type verdictModel struct {
	mu       sync.Mutex
	verdicts []string
}

func (m *verdictModel) Complete(_ context.Context, r agentcore.Request) (agentcore.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.verdicts[0]
	if len(m.verdicts) > 1 {
		m.verdicts = m.verdicts[1:]
	}
	return agentcore.Response{Content: v}, nil
}

func (f *fakeAdapter) count(sub string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, p := range f.posts {
		if strings.Contains(p.post.Text, sub) {
			n++
		}
	}
	return n
}

// A scheduled question posts when it fails (once while the failure stays
// the same) and when it recovers; a passing, unchanged check is silent.
// Every run is in the chain.
func TestScheduledQuestion(t *testing.T) {
	m := &verdictModel{verdicts: []string{"OK\nall fine", "OK\nstill fine", "FAIL\ndisk 97%", "FAIL\ndisk 97%", "OK\nfreed"}}
	r := newRig(t, m, Channel{}, Config{})
	s := Schedule{Name: "disk", Spec: "@every 1h", Channel: "C1", Platform: "fake", Question: "Is any disk over 90% full?"}
	st := &scheduleState{}
	want := []int{0, 0, 1, 1, 2} // posts after each run
	for i, w := range want {
		r.b.runSchedule(r.ctx, s, st)
		if n := r.ad.count("Scheduled check `disk`"); n != w {
			t.Fatalf("after run %d: %d posts, want %d: %+v", i+1, n, w, r.ad.posts)
		}
	}
	if r.ad.count("**failed**") != 1 || r.ad.count("**recovered** (it passes again)") != 1 {
		t.Errorf("posts: %+v", r.ad.posts)
	}
	runs := 0
	for e, err := range r.db.Events("schedule:disk", 1) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == agentcore.EvRunFinished {
			runs++
		}
	}
	if runs != 5 {
		t.Errorf("%d runs in the chain, want 5", runs)
	}
}

// RunSchedules runs a skill-less command check on its spec; a bad spec is
// refused.
func TestRunSchedules(t *testing.T) {
	r := newRig(t, &verdictModel{verdicts: []string{"FAIL\nno"}}, Channel{}, Config{})
	if err := r.b.RunSchedules(r.ctx, []Schedule{{Name: "x", Spec: "every minute", Channel: "C1", Question: "q"}}); err == nil {
		t.Error("a bad spec was accepted")
	}
	if err := ParseSpec("CRON_TZ=Europe/Berlin 30 3 * * 1-5"); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan error, 1)
	go func() {
		done <- r.b.RunSchedules(ctx, []Schedule{{Name: "q", Spec: "@every 1s", Channel: "C1", Platform: "fake", Question: "anything wrong?"}})
	}()
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1"}, contains("Scheduled check `q` **failed**"))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A scheduled check has no human watching: its answer notifies nobody and
// shows its links as text.
func TestScheduledAnswerIsQuiet(t *testing.T) {
	r := newRig(t, &verdictModel{verdicts: []string{"FAIL\n@channel <!here> read https://evil.example/fix or [this](http://evil.example/x)"}}, Channel{}, Config{})
	r.b.runSchedule(r.ctx, Schedule{Name: "disk", Spec: "@every 1h", Channel: "C1", Platform: "fake", Question: "q"}, &scheduleState{})
	p := r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1"}, contains("Scheduled check"))
	want := "FAIL\n@\u200bchannel <\u200b!here> read `https:\u200b//evil.example/fix` or this (`http:\u200b//evil.example/x`)"
	if !strings.HasSuffix(p.post.Text, want) {
		t.Errorf("post = %q, want it to end %q", p.post.Text, want)
	}
}
