package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/openai"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// usageModel answers with a fixed usage.
type usageModel struct{}

func (usageModel) Complete(context.Context, agentcore.Request) (agentcore.Response, error) {
	return agentcore.Response{Content: "answered", Usage: agentcore.Usage{PromptTokens: 600, CompletionTokens: 100}}, nil
}

// A thread over its token budget does not start another run, and a
// channel over its daily budget neither; the tokens are counted per
// channel.
func TestTokenBudgets(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 1000, PerDay: 2000}}, Config{Metrics: NewMetrics(reg)})
	r.say(alice, th1, "m1", "one", true)
	r.ad.waitPost(t, th1, contains("answered"))
	r.say(alice, th1, "m2", "two", true)
	for deadline := time.Now().Add(20 * time.Second); r.ad.count("answered") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no second answer")
		}
	}
	r.say(alice, th1, "m3", "three", true)
	r.ad.waitPost(t, th1, contains("this thread has used its budget of 1000 model tokens (1400 used)"))
	th2 := Thread{Platform: "fake", Channel: "C1", Root: "R2"}
	r.say(alice, th2, "m4", "four", true)
	r.ad.waitPost(t, th2, contains("answered"))
	r.say(bob, Thread{Platform: "fake", Channel: "C1", Root: "R3"}, "m5", "five", true)
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: "R3"}, contains("this channel has used its budget of 2000 model tokens for today"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, mf := range mfs {
		if mf.GetName() != "thinbot_tokens_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 2 && m.GetLabel()[0].GetValue() == "C1" && m.GetLabel()[1].GetValue() == "prompt" {
				got = m.GetCounter().GetValue()
			}
		}
	}
	if got != 1800 {
		t.Errorf("prompt tokens counted: %v", got)
	}
}

// A store and a clock that outlive the bots over it: reopen is a restart
// of the daemon (the store closed and opened again, a new Bot and Agent).
type restartRig struct {
	t    *testing.T
	path string
	now  atomic.Int64 // unix nanos
	db   *store.DB
	r    *rig
	ch   Channel
	m    agentcore.Model
}

func newRestartRig(t *testing.T, m agentcore.Model, ch Channel, at time.Time) *restartRig {
	rr := &restartRig{t: t, path: filepath.Join(t.TempDir(), "events.db"), ch: ch, m: m}
	rr.now.Store(at.UnixNano())
	t.Cleanup(func() {
		if rr.r != nil {
			rr.r.stop()
		}
		if rr.db != nil {
			rr.db.Close()
		}
	})
	rr.reopen()
	return rr
}

func (rr *restartRig) clock() time.Time { return time.Unix(0, rr.now.Load()).UTC() }

// reopen stops the bot and closes the store, if open, then opens both
// again, as `thinbot serve` starts: Recover first.
func (rr *restartRig) reopen() {
	t := rr.t
	t.Helper()
	if rr.r != nil {
		rr.r.stop()
		rr.r = nil
	}
	if rr.db != nil {
		if err := rr.db.Close(); err != nil {
			t.Fatal(err)
		}
		rr.db = nil
	}
	db, err := store.Open(rr.path, &store.Options{Now: rr.clock})
	if err != nil {
		t.Fatal(err)
	}
	rr.db = db
	if _, err := agentcore.Recover(db); err != nil {
		t.Fatal(err)
	}
	rr.r = newRigOn(t, db, rr.m, rr.ch, Config{Now: rr.clock})
}

// ask says text in th and returns the thread's answer or refusal.
func (rr *restartRig) ask(th Thread, id string) string {
	rr.t.Helper()
	ends := func() []string {
		var out []string
		rr.r.ad.mu.Lock()
		defer rr.r.ad.mu.Unlock()
		for _, p := range rr.r.ad.posts {
			if p.thread == th && (strings.Contains(p.post.Text, "answered") || strings.HasPrefix(p.post.Text, "Not started") || strings.HasPrefix(p.post.Text, "Stopped")) {
				out = append(out, p.post.Text)
			}
		}
		return out
	}
	before := len(ends())
	rr.r.say(alice, th, id, "go", true)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if e := ends(); len(e) > before {
			return e[len(e)-1]
		}
		if time.Now().After(deadline) {
			rr.t.Fatalf("no answer to %s in %v", id, th)
		}
	}
}

// A channel that spent its day and a thread that spent its budget stay
// refused after a restart, with the same words: the tallies are the
// chain's, not the process's.
func TestTokenBudgetsHoldAcrossARestart(t *testing.T) {
	rr := newRestartRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 1000, PerDay: 2000}}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	th := func(root string) Thread { return Thread{Platform: "fake", Channel: "C1", Root: root} }
	for i, want := range []string{"answered", "answered"} { // 700 each
		if got := rr.ask(th1, fmt.Sprintf("a%d", i)); got != want {
			t.Fatalf("run %d: %q", i, got)
		}
	}
	threadOver := rr.ask(th1, "a3")
	if !strings.Contains(threadOver, "this thread has used its budget of 1000 model tokens (1400 used)") {
		t.Fatalf("thread over budget: %q", threadOver)
	}
	if got := rr.ask(th("R2"), "b1"); got != "answered" { // the channel's day: 2100
		t.Fatalf("second thread: %q", got)
	}
	dayOver := rr.ask(th("R3"), "c1")
	if !strings.Contains(dayOver, "this channel has used its budget of 2000 model tokens for today") {
		t.Fatalf("channel over budget: %q", dayOver)
	}

	rr.reopen()
	if got := rr.ask(th1, "a4"); got != threadOver {
		t.Errorf("the thread after a restart: %q\nbefore: %q", got, threadOver)
	}
	if got := rr.ask(th("R4"), "d1"); got != dayOver {
		t.Errorf("a new thread after a restart: %q\nbefore: %q", got, dayOver)
	}
	// And after a second restart, whose index the first one kept.
	rr.reopen()
	if got := rr.ask(th("R5"), "e1"); got != dayOver {
		t.Errorf("after a second restart: %q", got)
	}
}

// Yesterday's spending does not count today, across a midnight in one
// process and across a restart after it; a thread's does, across both.
func TestTokenBudgetDayIsTheUTCDay(t *testing.T) {
	rr := newRestartRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 1400, PerDay: 1000}}, time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC))
	th := func(root string) Thread { return Thread{Platform: "fake", Channel: "C1", Root: root} }
	if got := rr.ask(th1, "m1"); got != "answered" { // 700 yesterday
		t.Fatalf("day one: %q", got)
	}
	rr.now.Store(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC).UnixNano())
	if got := rr.ask(th1, "m2"); got != "answered" { // 700 today, 1400 in the thread
		t.Fatalf("day two, same process: %q", got)
	}
	threadOver := rr.ask(th1, "m3")
	if !strings.Contains(threadOver, "this thread has used its budget of 1400 model tokens (1400 used)") {
		t.Fatalf("the thread on day two, same process: %q", threadOver)
	}
	rr.reopen()
	if got := rr.ask(th1, "m4"); got != threadOver {
		t.Fatalf("the thread on day two after a restart: %q", got)
	}
	if got := rr.ask(th("R3"), "m5"); got != "answered" { // 1400 today
		t.Fatalf("day two after a restart (700 used today): %q", got)
	}
	if got := rr.ask(th("R4"), "m6"); !strings.Contains(got, "this channel has used its budget of 1000 model tokens for today") {
		t.Fatalf("day two after a restart (1400 used today): %q", got)
	}
}

// silentModel reports no usage: the run counts its estimate.
type silentModel struct{}

func (silentModel) Complete(context.Context, agentcore.Request) (agentcore.Response, error) {
	return agentcore.Response{Content: "answered"}, nil
}

// A server that reports no usage is counted by the kernel's estimate, and
// the estimate is in the chain beside the server's zeros, so a restart
// counts it too.
func TestTokenBudgetEstimatesAcrossARestart(t *testing.T) {
	rr := newRestartRig(t, silentModel{}, Channel{Tokens: TokenBudgets{PerThread: 100}}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if got := rr.ask(th1, "m1"); got != "answered" {
		t.Fatalf("first run: %q", got)
	}
	over := rr.ask(th1, "m2")
	if !strings.Contains(over, "this thread has used its budget of 100 model tokens (") {
		t.Fatalf("second run: %q", over)
	}
	var p struct {
		Usage     agentcore.Usage  `json:"usage"`
		Estimated *agentcore.Usage `json:"estimated_usage"`
	}
	for e := range rr.db.Events(th1.Key(), 1) {
		if e.Type == agentcore.EvAssistantMessage {
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if p.Usage != (agentcore.Usage{}) || p.Estimated == nil || p.Estimated.PromptTokens == 0 || p.Estimated.CompletionTokens == 0 {
		t.Fatalf("assistant event: usage %+v, estimate %+v", p.Usage, p.Estimated)
	}
	if want := fmt.Sprintf("(%d used)", p.Estimated.PromptTokens+p.Estimated.CompletionTokens); !strings.Contains(over, want) {
		t.Errorf("refusal %q, want %s", over, want)
	}
	rr.reopen()
	if got := rr.ask(th1, "m3"); got != over {
		t.Errorf("after a restart: %q\nbefore: %q", got, over)
	}
}

// A thread whose tally the process forgot (beyond maxThreadTallies) is
// read from the chain again, not started afresh.
func TestTokenBudgetForgottenThreadIsReadAgain(t *testing.T) {
	rr := newRestartRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 700}}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if got := rr.ask(th1, "m1"); got != "answered" {
		t.Fatalf("first run: %q", got)
	}
	over := rr.ask(th1, "m2")
	if !strings.Contains(over, "(700 used)") {
		t.Fatalf("second run: %q", over)
	}
	tt := &rr.r.b.tokens
	tt.mu.Lock()
	clear(tt.threads)
	tt.mu.Unlock()
	if got := rr.ask(th1, "m3"); got != over {
		t.Errorf("after the tally was forgotten: %q", got)
	}
}

// A store the tallies cannot be read from refuses the run: the budget is
// a cost control.
func TestTokenBudgetUnreadableRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	r := newRigOn(t, ro, usageModel{}, Channel{Tokens: TokenBudgets{PerDay: 1000}}, Config{})
	r.say(alice, th1, "m1", "go", true)
	r.ad.waitPost(t, th1, contains("Not started: this channel's token budget could not be checked"))
}

// A tally whose read fails once the store is in use refuses the run too:
// the failed read of the state index is an error, not the end of the
// calls, which counted nothing new and let a thread past its budget (the
// store closed here, after a first run read the tallies).
func TestTokenBudgetFailedReadRefuses(t *testing.T) {
	r := newRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 1000, PerDay: 100000}}, Config{})
	r.say(alice, th1, "m1", "one", true)
	r.ad.waitPost(t, th1, contains("answered"))
	if err := r.db.Close(); err != nil {
		t.Fatal(err)
	}
	r.say(alice, th1, "m2", "two", true)
	r.ad.waitPost(t, th1, contains("Not started: this channel's token budget could not be checked (the event store failed)"))
	if n := r.ad.count("answered"); n != 1 {
		t.Errorf("%d answers, want 1", n)
	}
	// A tally read in part is not kept: the next look reads afresh rather
	// than adding the same calls again after the old mark.
	tt := &r.b.tokens
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.ready || tt.threads != nil {
		t.Errorf("after a failed read the tally is kept: ready %v, threads %v", tt.ready, tt.threads)
	}
}

// A check reads the chain's calls after the last it read, and that mark
// moves past stretches without calls: a store whose calls counted nothing
// is not read again from its first event at every run.
func TestTokenBudgetMarkPassesEventsWithoutCalls(t *testing.T) {
	rr := newRestartRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerDay: 100000}}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	var notes []store.Event
	for range 600 {
		notes = append(notes, store.Event{Session: "other", Type: agentcore.EvNote, Actor: "test", Payload: json.RawMessage(`{"kind":"x"}`)})
	}
	for i, th := range []Thread{th1, {Platform: "fake", Channel: "C1", Root: "R2"}} {
		if _, err := rr.db.Append(t.Context(), notes...); err != nil {
			t.Fatal(err)
		}
		last := rr.db.LastSeq()
		if got := rr.ask(th, fmt.Sprintf("m%d", i)); got != "answered" {
			t.Fatalf("run %d: %q", i, got)
		}
		tt := &rr.r.b.tokens
		tt.mu.Lock()
		mark := tt.mark
		tt.mu.Unlock()
		if mark < last {
			t.Errorf("check %d: mark %d, before the run the chain was at %d", i, mark, last)
		}
	}
}

// A refused message is recorded in the chain (a run_refused note with the
// reply) and counts as handled: after a restart it is among the seen
// message ids, so a platform's redelivery is not refused a second time, and
// it is not reported as waiting.
func TestTokenBudgetRefusalIsRecorded(t *testing.T) {
	rr := newRestartRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 500}}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if got := rr.ask(th1, "m1"); got != "answered" {
		t.Fatalf("first run: %q", got)
	}
	over := rr.ask(th1, "m2")
	if !strings.HasPrefix(over, "Not started") {
		t.Fatalf("second run: %q", over)
	}
	var refused []agentcore.NotePayload
	for e := range rr.db.Events(th1.Key(), 1) {
		var p agentcore.NotePayload
		if e.Type == agentcore.EvNote && json.Unmarshal(e.Payload, &p) == nil && p.Kind == agentcore.NoteRunRefused {
			refused = append(refused, p)
		}
	}
	if len(refused) != 1 || refused[0].PostID != "m2" || refused[0].Detail != over {
		t.Fatalf("run_refused notes: %+v", refused)
	}
	rr.reopen()
	seen, err := agentcore.SeenMessages(rr.db)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(seen, "m2") {
		t.Errorf("seen message ids after a restart: %q, want m2 among them", seen)
	}
	u, err := agentcore.Recover(rr.db)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Queued) != 0 {
		t.Errorf("waiting after a restart: %+v", u.Queued)
	}
}

// spendingServer is the scripted OpenAI-compatible server (tests/fakemodel)
// behind the real client: every call reports 700 tokens (600 prompt, 100
// completion). A thread that says "answer" is answered at once; any other
// run is asked to run `true` again and again, until a budget stops it.
func spendingServer(t *testing.T) (*fakemodel.Server, agentcore.Model) {
	t.Helper()
	used := &agentcore.Usage{PromptTokens: 600, CompletionTokens: 100}
	fm := fakemodel.NewFunc(func(req fakemodel.Request) fakemodel.Reply {
		for _, m := range slices.Backward(req.Messages) {
			if m.Role == "user" && strings.Contains(m.Content, "answer") {
				return fakemodel.Reply{Content: "answered", Usage: used}
			}
			if m.Role == "user" {
				break
			}
		}
		return fakemodel.Reply{Usage: used, ToolCalls: []fakemodel.Call{{Name: "run", Args: `{"command":"true","reason":"again"}`}}}
	})
	t.Cleanup(fm.Close)
	m, err := openai.New(openai.Config{BaseURL: fm.URL, Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return fm, m
}

// A started run gets the smallest of the budgets that apply, less what
// its thread and its channel have used: it stops, with a message naming
// that budget, at the first model call it would make at or beyond it, so
// it never spends more than one call past the thread's or the day's
// budget (three calls of 700 for 1500, two for 800 or 1000).
func TestRunGetsTheSmallestTokenBudget(t *testing.T) {
	th2 := Thread{Platform: "fake", Channel: "C1", Root: "R2"}
	for _, tc := range []struct {
		name   string
		tokens TokenBudgets
		before []Thread // an answered run (700 tokens) in each, first
		limit  int
		calls  int // the run's model calls
	}{
		{"the day's below the thread's", TokenBudgets{PerThread: 5000, PerDay: 1500}, nil, 1500, 3},
		{"the thread's below the day's", TokenBudgets{PerThread: 1500, PerDay: 5000}, nil, 1500, 3},
		{"the run's below both", TokenBudgets{PerRun: 1000, PerThread: 5000, PerDay: 5000}, nil, 1000, 2},
		{"what the thread has left", TokenBudgets{PerThread: 1500, PerDay: 5000}, []Thread{th1}, 800, 2},
		{"what the day has left", TokenBudgets{PerThread: 5000, PerDay: 1500}, []Thread{th2}, 800, 2},
		{"the run's below what is left", TokenBudgets{PerRun: 1000, PerThread: 5000, PerDay: 5000}, []Thread{th1, th2}, 1000, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fm, m := spendingServer(t)
			r := newRig(t, m, Channel{Tokens: tc.tokens}, Config{})
			for i, th := range tc.before {
				r.say(alice, th, fmt.Sprint("b", i), "answer", true)
				r.ad.waitPost(t, th, contains("answered"))
				// The answer shows before its run is finished and its
				// model call counted: the run below must see it spent.
				waitFor(t, th.Key()+"'s run_finished", func() bool { return runFinished(t, r, th) })
			}
			before := len(fm.Requests())
			r.say(alice, th1, "m1", "go on", true)
			want := fmt.Sprintf("Stopped: the run used its budget of %d tokens.", tc.limit)
			r.ad.waitPost(t, th1, contains("Stopped: the run used its budget of"))
			if r.ad.count(want) != 1 {
				r.ad.mu.Lock()
				defer r.ad.mu.Unlock()
				t.Fatalf("want %q in the thread; posts: %+v", want, r.ad.posts)
			}
			if n := len(fm.Requests()) - before; n != tc.calls {
				t.Errorf("the run made %d model calls (%d tokens), want %d", n, 700*n, tc.calls)
			}
		})
	}
}

// A turn that comes with a token budget of its own keeps it where it is
// the smaller: the channel's budgets lower a run's budget, never raise it.
func TestTokenBudgetKeepsASmallerTurnBudget(t *testing.T) {
	r := newRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 1500, PerDay: 5000}}, Config{})
	ch, _ := r.b.cfg.Channel("C1")
	th := &thread{t: th1, ch: ch}
	for _, tc := range []struct{ turn, want int }{{0, 1500}, {1000, 1000}, {3000, 1500}} {
		tr := agentcore.Turn{Budgets: agentcore.Budgets{MaxTokens: tc.turn}}
		if why := r.b.tokenBudget(th, &tr); why != "" || tr.Budgets.MaxTokens != tc.want {
			t.Errorf("a turn with MaxTokens %d: %d (%q), want %d", tc.turn, tr.Budgets.MaxTokens, why, tc.want)
		}
	}
}

// Runs of one channel that overlap share the day's budget: each checks
// the channel's tally before each model call, so together they end at
// most one call each past the day, not each with the whole of what the
// day had left when it started (two runs of 3 calls for 2000 tokens).
func TestOverlappingRunsShareTheDay(t *testing.T) {
	used := &agentcore.Usage{PromptTokens: 600, CompletionTokens: 100}
	var mu sync.Mutex
	arrived, both, done := 0, make(chan struct{}), make(chan struct{})
	fm := fakemodel.NewFunc(func(fakemodel.Request) fakemodel.Reply {
		mu.Lock()
		arrived++
		n := arrived
		if n == 2 {
			close(both)
		}
		mu.Unlock()
		if n <= 2 { // both runs have started before either spends
			select {
			case <-both:
			case <-done:
			}
		}
		return fakemodel.Reply{Usage: used, ToolCalls: []fakemodel.Call{{Name: "run", Args: `{"command":"true","reason":"again"}`}}}
	})
	t.Cleanup(fm.Close)
	m, err := openai.New(openai.Config{BaseURL: fm.URL, Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, m, Channel{Tokens: TokenBudgets{PerThread: 100000, PerDay: 2000}}, Config{})
	t.Cleanup(func() { close(done) }) // before the rig stops
	th2 := Thread{Platform: "fake", Channel: "C1", Root: "R2"}
	r.say(alice, th1, "m1", "go on", true)
	r.say(bob, th2, "m2", "go on", true)
	for _, th := range []Thread{th1, th2} {
		r.ad.waitPost(t, th, contains("Stopped:"))
	}
	if n := len(fm.Requests()); n > 4 {
		t.Errorf("the channel's runs made %d model calls (%d tokens) for a day of 2000, want at most 4", n, 700*n)
	}
	if r.ad.count("Stopped: this channel has used its budget of 2000 model tokens for today (UTC).") == 0 {
		r.ad.mu.Lock()
		defer r.ad.mu.Unlock()
		t.Errorf("no run was told the day is spent; posts: %+v", r.ad.posts)
	}
}

// A scheduled question is a run of its channel: what it spends counts in
// the channel's day, and once the day is spent it does not start (the
// check fails saying why, and the chain records it); the thread budget
// does not apply to it. After a restart, the schedules' spending of the
// day still counts before they run again.
func TestScheduledQuestionsCountInTheDay(t *testing.T) {
	rr := newRestartRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 500, PerDay: 1000}}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	s := Schedule{Name: "disk", Spec: "@every 1h", Channel: "C1", Platform: "fake", Question: "Is any disk full?"}
	if _, err := rr.r.b.NewScheduler([]Schedule{s}); err != nil {
		t.Fatal(err)
	}
	st := &scheduleState{}
	runs := func() (finished, refused int) {
		for e, err := range rr.db.Events("schedule:disk", 1) {
			if err != nil {
				t.Fatal(err)
			}
			var p agentcore.NotePayload
			switch {
			case e.Type == agentcore.EvRunFinished:
				finished++
			case e.Type == agentcore.EvNote && json.Unmarshal(e.Payload, &p) == nil && p.Kind == agentcore.NoteRunRefused:
				refused++
			}
		}
		return finished, refused
	}
	// Two runs of 700 tokens: the second starts (700 < 1000 for the day;
	// the thread budget of 500 is not the schedule's).
	rr.r.b.runSchedule(rr.r.ctx, s, st)
	rr.r.b.runSchedule(rr.r.ctx, s, st)
	if f, _ := runs(); f != 2 {
		t.Fatalf("%d scheduled runs finished, want 2", f)
	}
	if got := rr.ask(th1, "m1"); !strings.Contains(got, "has used its budget of 1000 model tokens for today") {
		t.Fatalf("a thread's run after the schedule spent the day: %q", got)
	}
	rr.r.b.runSchedule(rr.r.ctx, s, st)
	if f, refused := runs(); f != 2 || refused != 1 {
		t.Fatalf("after the day was spent: %d scheduled runs finished, %d refused; want 2 and 1", f, refused)
	}
	// The first run's "answered" has no verdict, so the check could not
	// run; the refusal is another reason it could not, posted.
	if rr.r.ad.count("Scheduled check `disk` **could not run**") != 2 || rr.r.ad.count("has used its budget of 1000 model tokens for today") != 2 {
		t.Errorf("posts: %+v", rr.r.ad.posts)
	}

	rr.reopen()
	if _, err := rr.r.b.NewScheduler([]Schedule{s}); err != nil {
		t.Fatal(err)
	}
	th2 := Thread{Platform: "fake", Channel: "C1", Root: "R2"}
	if got := rr.ask(th2, "m2"); !strings.Contains(got, "has used its budget of 1000 model tokens for today") {
		t.Fatalf("after a restart, a thread's run: %q", got)
	}
}

// runFinished says whether thread th's session has a run_finished event.
func runFinished(t *testing.T, r *rig, th Thread) bool {
	t.Helper()
	for e, err := range r.db.Events(th.Key(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == agentcore.EvRunFinished {
			return true
		}
	}
	return false
}
