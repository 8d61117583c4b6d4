package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/storetest"
)

// fakeAdapter records what the bot posts; tests drive the bot's Handler
// methods directly, as an adapter would.
type fakeAdapter struct {
	mu      sync.Mutex
	posts   []fakePost
	members map[string]bool
	changed chan struct{}
	// onPost, if set, is called with each post after it is recorded here.
	onPost func(Post)
	// failPost, if set, is called with each post first: an error fails the
	// post (nothing recorded).
	failPost func(context.Context, Post) error
}

type fakePost struct {
	id     string
	thread Thread
	post   Post
}

func newFakeAdapter() *fakeAdapter {
	return &fakeAdapter{members: map[string]bool{}, changed: make(chan struct{}, 1)}
}

func (f *fakeAdapter) Run(ctx context.Context, h Handler) error { <-ctx.Done(); return ctx.Err() }

func (f *fakeAdapter) Post(ctx context.Context, t Thread, p Post) (string, error) {
	if f.failPost != nil {
		if err := f.failPost(ctx, p); err != nil {
			return "", err
		}
	}
	f.mu.Lock()
	id := fmt.Sprintf("p%d", len(f.posts)+1)
	f.posts = append(f.posts, fakePost{id: id, thread: t, post: p})
	f.notify()
	f.mu.Unlock()
	if f.onPost != nil {
		f.onPost(p)
	}
	return id, nil
}

func (f *fakeAdapter) Update(_ context.Context, _ Thread, id string, p Post) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.posts {
		if f.posts[i].id == id {
			f.posts[i].post = p
		}
	}
	f.notify()
	return nil
}

func (f *fakeAdapter) IsMember(_ context.Context, _, user string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[user], nil
}

func (f *fakeAdapter) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// waitPost waits until a post in thread t satisfies ok and returns it.
func (f *fakeAdapter) waitPost(t *testing.T, th Thread, ok func(Post) bool) fakePost {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		for _, p := range f.posts {
			if p.thread == th && ok(p.post) {
				f.mu.Unlock()
				return p
			}
		}
		f.mu.Unlock()
		select {
		case <-f.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("no matching post in %v; posts: %+v", th, f.posts)
		}
	}
}

func contains(s string) func(Post) bool {
	return func(p Post) bool { return strings.Contains(p.Text, s) }
}

// model answers with a tool call running cmd, then with "finished".
type cmdModel struct{ cmd string }

func (m cmdModel) Complete(_ context.Context, r agentcore.Request) (agentcore.Response, error) {
	if last := r.Messages[len(r.Messages)-1]; last.Role == agentcore.RoleTool {
		return agentcore.Response{Content: "finished: " + last.Content}, nil
	}
	args, _ := json.Marshal(map[string]string{"command": m.cmd, "reason": "because"})
	return agentcore.Response{ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: agentcore.ToolRun, Arguments: string(args)}}}, nil
}

type rig struct {
	b   *Bot
	ad  *fakeAdapter
	db  *store.DB
	dir string
	ctx context.Context
	// stop ends Run and waits for it (and so for every post it started);
	// stopWith does so with a cause (a shutdown's StopCause).
	stop     func()
	stopWith func(cause error)
}

func newRig(t *testing.T, model agentcore.Model, ch Channel, cfg Config) *rig {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseChecked(t, db, agentcore.Decode)
	return newRigOn(t, db, model, ch, cfg)
}

// newRigOn is newRig over an open store (a restart of the bot).
func newRigOn(t *testing.T, db *store.DB, model agentcore.Model, ch Channel, cfg Config) *rig {
	t.Helper()
	ag, err := agentcore.New(agentcore.Config{Store: db, Model: model, Policy: gate.DefaultPolicy(),
		Exec: agentcore.ExecConfig{Environ: []string{"PATH=" + os.Getenv("PATH")}}})
	if err != nil {
		t.Fatal(err)
	}
	ch.Agent = ag
	ch.Workspace = t.TempDir()
	ad := newFakeAdapter()
	cfg.Adapter = ad
	cfg.Channel = func(id string) (Channel, bool) { return ch, id == "C1" }
	cfg.UpdateInterval = 10 * time.Millisecond
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(nil); <-done })
	return &rig{b: b, ad: ad, db: db, dir: ch.Workspace, ctx: ctx, stop: func() { cancel(nil); <-done },
		stopWith: func(c error) { cancel(c); <-done }}
}

var (
	alice = User{ID: "U1", Name: "alice"}
	bob   = User{ID: "U2", Name: "bob"}
	eve   = User{ID: "U3", Name: "eve"}
	th1   = Thread{Platform: "fake", Channel: "C1", Root: "R1"}
)

func (r *rig) say(u User, th Thread, id, text string, mention bool) {
	r.b.HandleMessage(r.ctx, Message{Thread: th, ID: id, User: u, Text: text, Mentioned: mention})
}

func TestApprovalRules(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "touch approved.txt"}, Channel{Approvers: []string{"U2", "U1"}, TwoPerson: true}, Config{})
	r.say(alice, th1, "m1", "make the file", true)
	req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	if !strings.Contains(req.post.Text, "touch approved.txt") || !strings.Contains(req.post.Text, "because") {
		t.Errorf("approval message = %q", req.post.Text)
	}
	click := func(u User, action string) ClickResult {
		return r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: req.id, ActionID: action, Value: req.post.Value, User: u})
	}
	if res := click(eve, ActionApprove); !strings.Contains(res.Ephemeral, "not an approver") || res.Update != nil {
		t.Errorf("non-approver click = %+v", res)
	}
	// An account renamed to an approver's name is not an approver:
	// approvers are ids.
	if res := click(User{ID: "U9", Name: "bob"}, ActionApprove); !strings.Contains(res.Ephemeral, "not an approver") || res.Update != nil {
		t.Errorf("renamed user's click = %+v", res)
	}
	if res := click(alice, ActionApprove); !strings.Contains(res.Ephemeral, "two-person") {
		t.Errorf("requester's own click = %+v", res)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "approved.txt")); err == nil {
		t.Fatal("the command ran before an authorised approval")
	}
	res := click(bob, ActionApprove)
	if res.Update == nil || !strings.Contains(res.Update.Text, "Approved") || !strings.Contains(res.Update.Text, "bob") || len(res.Update.Buttons) != 0 {
		t.Fatalf("approver click = %+v", res)
	}
	if res := click(bob, ActionDeny); !strings.Contains(res.Ephemeral, "no longer open") {
		t.Errorf("second click = %+v", res)
	}
	r.ad.waitPost(t, th1, contains("finished: exit code: 0"))
	r.say(alice, th1, "m9", "/audit", true)
	r.ad.waitPost(t, th1, contains("`touch approved.txt` — confirm, approved by user:U2 (bob), exit 0"))
	if _, err := os.Stat(filepath.Join(r.dir, "approved.txt")); err != nil {
		t.Error("the approved command did not run")
	}
	// The chain holds the refused clicks, the decision and the result, in order.
	var kinds []string
	for e := range r.db.Events(th1.Key(), 1) {
		switch e.Type {
		case agentcore.EvNote:
			var p agentcore.NotePayload
			json.Unmarshal(e.Payload, &p)
			kinds = append(kinds, p.Kind)
		case agentcore.EvApprovalAsked, agentcore.EvApprovalDecided, agentcore.EvToolResult:
			kinds = append(kinds, e.Type)
		}
	}
	want := "approval_requested approval_posted click_refused click_refused click_refused approval_decision tool_result command_reply"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("chain = %s\nwant    %s", got, want)
	}
}

func TestAnyMemberMayApprove(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "touch x"}, Channel{AnyMember: true}, Config{})
	r.ad.members["U2"] = true
	r.say(alice, th1, "m1", "go", true)
	req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	if res := r.b.HandleClick(r.ctx, Click{PostID: req.id, ActionID: ActionDeny, Value: req.post.Value, User: eve}); !strings.Contains(res.Ephemeral, "members") {
		t.Errorf("non-member click = %+v", res)
	}
	res := r.b.HandleClick(r.ctx, Click{PostID: req.id, ActionID: ActionDeny, Value: req.post.Value, User: bob})
	if res.Update == nil || !strings.Contains(res.Update.Text, "Denied") {
		t.Fatalf("member's deny = %+v", res)
	}
	r.ad.waitPost(t, th1, contains("finished: not run: the approval was refused"))
}

func TestUnansweredRequestExpires(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "touch x"}, Channel{Approvers: []string{"U2"}}, Config{ApprovalTimeout: 50 * time.Millisecond})
	r.say(alice, th1, "m1", "go", true)
	r.ad.waitPost(t, th1, contains("Expired"))
	r.ad.waitPost(t, th1, contains("finished: not run"))
	if _, err := os.Stat(filepath.Join(r.dir, "x")); err == nil {
		t.Error("an expired request ran")
	}
}

// TestStopCancelsTheRunAndKeepsTheSession: /stop from a participant kills
// the running command's process, the run is recorded as cancelled, and the
// next message continues the same session (the model sees what came before).
func TestStopCancelsTheRunAndKeepsTheSession(t *testing.T) {
	// The sleeper is a child of the shell: only killing the process group
	// stops it.
	const cmd = "sleep 60 & echo $! > sleeper.pid; wait"
	var mu sync.Mutex
	var second []agentcore.Message
	model := funcModel(func(r agentcore.Request) (agentcore.Response, error) {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == agentcore.RoleUser && strings.Contains(last.Content, "are you there") {
			mu.Lock()
			second = r.Messages
			mu.Unlock()
			return agentcore.Response{Content: "still here"}, nil
		}
		return cmdModel{cmd: cmd}.Complete(t.Context(), r)
	})
	r := newRig(t, model, Channel{AllowAll: true}, Config{})
	r.say(alice, th1, "m1", "wait a minute", true)
	r.ad.waitPost(t, th1, contains("sleep 60"))
	var pid int
	waitFor(t, "the command to write its pid", func() bool {
		b, err := os.ReadFile(filepath.Join(r.dir, "sleeper.pid"))
		_, perr := fmt.Sscan(string(b), &pid)
		return err == nil && perr == nil && pid > 0
	})
	r.say(eve, th1, "m2", "/stop", true) // not a participant, not an approver
	r.ad.waitPost(t, th1, contains("Only people taking part"))
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the command died before a participant's /stop: %v", err)
	}
	r.say(alice, th1, "m3", "/stop", true)
	r.ad.waitPost(t, th1, contains("Stopped by `/stop` from @alice."))
	waitFor(t, "the stopped command's process to go away", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
	// The chain names who stopped the run, in the result the model reads
	// and in the run's end.
	ends, results := stopRecords(t, r.db, th1.Key())
	if want := "cancelled stop user:U1 (alice)"; len(ends) != 1 || ends[0] != want {
		t.Errorf("runs finished = %q, want one %q", ends, want)
	}
	if len(results) != 1 || !strings.HasPrefix(results[0], "stop user:U1 (alice): interrupted: stopped by user:U1 (alice) with /stop; the process group was killed") {
		t.Errorf("tool results = %q, want the command interrupted by alice's /stop", results)
	}

	// The session is kept: the next message continues it.
	r.say(alice, th1, "m4", "are you there?", false)
	r.ad.waitPost(t, th1, contains("still here"))
	mu.Lock()
	defer mu.Unlock()
	var earlier bool
	for _, m := range second {
		earlier = earlier || (m.Role == agentcore.RoleUser && strings.Contains(m.Content, "wait a minute"))
	}
	if !earlier {
		t.Errorf("the run after /stop does not see the session's earlier message: %+v", second)
	}
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMessagesDuringARunAreQueuedAndDeduplicated(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	model := funcModel(func(r agentcore.Request) (agentcore.Response, error) {
		last := r.Messages[len(r.Messages)-1].Content
		mu.Lock()
		seen = append(seen, last)
		mu.Unlock()
		if last == "first" {
			<-release
		}
		return agentcore.Response{Content: "answer to " + last}, nil
	})
	r := newRig(t, model, Channel{}, Config{})
	r.say(alice, th1, "m1", "first", true)
	r.say(alice, th1, "m2", "second", false) // a reply in the session's thread, no mention needed
	r.say(alice, th1, "m2", "second", false) // redelivered: ignored
	r.ad.waitPost(t, th1, contains("Queued"))
	close(release)
	r.ad.waitPost(t, th1, contains("answer to second"))
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "first,second" {
		t.Errorf("model saw %v", seen)
	}
}

func TestIgnoresWhatIsNotForIt(t *testing.T) {
	model := funcModel(func(agentcore.Request) (agentcore.Response, error) {
		t.Error("the model was called")
		return agentcore.Response{}, nil
	})
	// th1 is a known session, so replies there without a mention would
	// continue it; eve's must still not get one refusal per message.
	r := newRig(t, model, Channel{}, Config{Users: []string{"U1"}, Sessions: []string{th1.Key()}})
	r.say(alice, Thread{Platform: "fake", Channel: "C1", Root: "R9"}, "m1", "no mention, new thread", false)
	r.say(alice, Thread{Platform: "fake", Channel: "C2", Root: "R1"}, "m2", "unconfigured channel", true)
	r.say(alice, Thread{Platform: "fake", Channel: "C3", Root: "R1"}, "m2b", "unconfigured, no mention", false)
	r.b.HandleMessage(r.ctx, Message{Thread: th1, ID: "m3", User: bob, Text: "from a bot", Mentioned: true, FromBot: true})
	r.say(eve, th1, "m4", "not allowed", true)
	r.ad.waitPost(t, th1, contains("not allowed to use this bot"))
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C2", Root: "R1"}, contains("I am not enabled in this channel"))
	r.say(eve, th1, "m5", "just chatting in the thread", false) // no mention: no second refusal
	r.ad.mu.Lock()
	defer r.ad.mu.Unlock()
	if n := len(r.ad.posts); n != 2 {
		t.Errorf("%d posts, want only the refusal and the not-enabled notice: %+v", n, r.ad.posts)
	}
}

// A mention in an unconfigured channel (or a DM without configuration)
// gets one short notice per channel and hour, never more.
func TestNotEnabledNoticeOncePerHour(t *testing.T) {
	model := funcModel(func(agentcore.Request) (agentcore.Response, error) {
		t.Error("the model was called")
		return agentcore.Response{}, nil
	})
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	r := newRig(t, model, Channel{}, Config{Now: clock})
	lobby := Thread{Platform: "fake", Channel: "C2", Root: "R1"}
	dm := Thread{Platform: "fake", Channel: "D1", Root: "R2"}
	count := func(th Thread) int {
		r.ad.mu.Lock()
		defer r.ad.mu.Unlock()
		n := 0
		for _, p := range r.ad.posts {
			if p.thread.Channel == th.Channel && strings.Contains(p.post.Text, "not enabled") {
				n++
			}
		}
		return n
	}
	r.say(alice, lobby, "m1", "hello", true)
	r.ad.waitPost(t, lobby, contains("I am not enabled in this channel"))
	r.b.HandleMessage(r.ctx, Message{Thread: dm, ID: "m2", User: alice, Text: "psst", Direct: true})
	r.ad.waitPost(t, dm, contains("I am not enabled in direct messages"))
	r.say(bob, Thread{Platform: "fake", Channel: "C2", Root: "R3"}, "m3", "hello?", true)
	r.say(alice, lobby, "m1", "hello", true) // redelivered
	advance(59 * time.Minute)
	r.say(alice, lobby, "m4", "still nobody?", true)
	advance(time.Minute)
	r.say(alice, lobby, "m5", "an hour later", true)
	r.stop()
	if n := count(lobby); n != 2 {
		t.Errorf("%d notices in the channel within an hour and one after, want 2", n)
	}
	if n := count(dm); n != 1 {
		t.Errorf("%d notices in the DM, want 1", n)
	}
}

func TestRestartExpiresPendingRequests(t *testing.T) {
	ad := newFakeAdapter()
	b, _ := New(Config{Adapter: ad, Channel: func(string) (Channel, bool) { return Channel{}, false }})
	b.Recover(t.Context(), agentcore.Unfinished{
		Approvals: []agentcore.PendingApproval{{Session: th1.Key(), RequestID: "r7", Command: "touch x", PostID: "p1"},
			{Session: th1.Key(), RequestID: "r9", Command: "touch y"}},
		Runs: []string{th1.Key()},
	})
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if len(ad.posts) != 2 || !strings.Contains(ad.posts[0].post.Text, "r9") || !strings.Contains(ad.posts[1].post.Text, "interrupted") {
		t.Errorf("posts = %+v", ad.posts)
	}
	if res := b.HandleClick(t.Context(), Click{Value: "r7", ActionID: ActionApprove, User: bob}); !strings.Contains(res.Ephemeral, "no longer open") {
		t.Errorf("click on an old request = %+v", res)
	}
}

func TestThreadOfRoundTrip(t *testing.T) {
	for _, th := range []Thread{th1, {Platform: "slack", Channel: "C0ABC", Root: "1700000000.000100"}} {
		if got, ok := ThreadOf(th.Key()); !ok || got != th {
			t.Errorf("ThreadOf(%q) = %v, %v", th.Key(), got, ok)
		}
	}
	for _, bad := range []string{"", "a/b", "a//c", "/b/c"} {
		if _, ok := ThreadOf(bad); ok {
			t.Errorf("ThreadOf(%q) succeeded", bad)
		}
	}
}

type funcModel func(agentcore.Request) (agentcore.Response, error)

func (f funcModel) Complete(_ context.Context, r agentcore.Request) (agentcore.Response, error) {
	return f(r)
}

func TestMessagesQueuedBeforeARestartAreHandled(t *testing.T) {
	model := funcModel(func(r agentcore.Request) (agentcore.Response, error) {
		return agentcore.Response{Content: "answer to " + r.Messages[len(r.Messages)-1].Content}, nil
	})
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ag, _ := agentcore.New(agentcore.Config{Store: db, Model: model, Policy: gate.DefaultPolicy()})
	// The previous process noted a queued message and died.
	ag.NoteUnlocked(th1.Key(), agentcore.EvNote, "user:alice", agentcore.NotePayload{Kind: agentcore.NoteMessageQueued, PostID: "m7", User: "U1", Name: "alice", Detail: "are you there?"})
	u, err := agentcore.Recover(db)
	if err != nil || len(u.Queued) != 1 {
		t.Fatalf("Recover = %+v, %v", u, err)
	}
	ad := newFakeAdapter()
	ch := Channel{Agent: ag, Workspace: t.TempDir()}
	b, _ := New(Config{Adapter: ad, Channel: func(string) (Channel, bool) { return ch, true }, UpdateInterval: 10 * time.Millisecond})
	b.Recover(t.Context(), u)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { b.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	ad.waitPost(t, th1, contains("answer to are you there?"))
	// A redelivery of the same message is not handled twice.
	b.HandleMessage(ctx, Message{Thread: th1, ID: "m7", User: alice, Text: "are you there?", Mentioned: true})
	if u, _ := agentcore.Recover(db); len(u.Queued) != 0 {
		t.Errorf("still queued after handling: %+v", u.Queued)
	}
}

func TestLongAnswerIsCutOnARuneAndAttached(t *testing.T) {
	answer := strings.Repeat("é", maxPostText) // 2 bytes a rune: the cut falls mid-rune
	p := answerPost(answer)
	if !utf8.ValidString(p.Text) || p.File == nil || string(p.File.Data) != answer {
		t.Errorf("answerPost: valid text %v, file %v", utf8.ValidString(p.Text), p.File != nil)
	}
}

// The users list and the approvers list match ids only: an account renamed
// to a listed name gets nothing.
func TestUsersAndApproversMatchIDsOnly(t *testing.T) {
	list := []string{"U1", "U2"}
	for _, tc := range []struct {
		u    User
		want bool
	}{
		{User{ID: "U1", Name: "alice"}, true},
		{User{ID: "U2"}, true},
		{User{ID: "U9", Name: "alice"}, false},
		{User{ID: "U9", Name: "U1"}, false},
		{User{Name: "U1"}, false},
	} {
		if got := matchUser(list, tc.u); got != tc.want {
			t.Errorf("matchUser(%v) = %v, want %v", tc.u, got, tc.want)
		}
		if got := isApprover(list, tc.u); got != tc.want {
			t.Errorf("isApprover(%v) = %v, want %v", tc.u, got, tc.want)
		}
	}
	if !matchUser(nil, User{ID: "U9"}) || isApprover(nil, User{ID: "U9"}) {
		t.Error("an empty users list lets everyone talk; an empty approver list lets nobody approve")
	}
}

// TestRunningStateShowsTheApprover: once an approval is recorded, the
// status message says the command runs and who approved it, while it
// runs, instead of "waiting for approval" until it ends.
func TestRunningStateShowsTheApprover(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "sleep 30"}, Channel{Approvers: []string{"U2"}}, Config{})
	r.say(alice, th1, "m1", "wait", true)
	req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	r.ad.waitPost(t, th1, contains("`sleep 30` — waiting for approval (confirm)"))
	if res := r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: req.id, ActionID: ActionApprove, Value: req.post.Value, User: bob}); res.Update == nil {
		t.Fatalf("click = %+v", res)
	}
	r.ad.waitPost(t, th1, contains("`sleep 30` — running, approved by @bob (confirm)"))
	r.ad.mu.Lock()
	for _, p := range r.ad.posts {
		if strings.Contains(p.post.Text, "waiting for approval") {
			t.Errorf("a post still says waiting: %q", p.post.Text)
		}
	}
	r.ad.mu.Unlock()
	r.say(alice, th1, "m2", "/stop", true)
	r.ad.waitPost(t, th1, contains("Stopped by `/stop`"))
	if got := deciderName("user:U2 (bob)"); got != "bob" {
		t.Errorf("deciderName = %q", got)
	}
}

// intentModel says what it will do along with its tool call (its text
// reaching OnText), then answers.
type intentModel struct{ cmd, intent string }

func (m intentModel) Complete(_ context.Context, r agentcore.Request) (agentcore.Response, error) {
	if last := r.Messages[len(r.Messages)-1]; last.Role == agentcore.RoleTool {
		return agentcore.Response{Content: "finished"}, nil
	}
	if r.OnText != nil { // as the OpenAI client does, streaming or not
		r.OnText(m.intent)
	}
	args, _ := json.Marshal(map[string]string{"command": m.cmd, "reason": "because"})
	return agentcore.Response{Content: m.intent, ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: agentcore.ToolRun, Arguments: string(args)}}}, nil
}

// TestIntentIsShownAboveTheCommand: the model's words that came with a
// tool call are shown in the status message, above the command, before
// the approval card is posted.
func TestIntentIsShownAboveTheCommand(t *testing.T) {
	r := newRig(t, intentModel{cmd: "touch x", intent: "I will create x,\nbecause the deploy needs it."}, Channel{Approvers: []string{"U2"}}, Config{})
	r.say(alice, th1, "m1", "go", true)
	req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	r.ad.mu.Lock()
	var status string
	for _, p := range r.ad.posts {
		if p.id == req.id {
			break
		}
		if strings.Contains(p.post.Text, "`touch x`") {
			status = p.post.Text
		}
	}
	r.ad.mu.Unlock()
	want := "- 💬 I will create x, because the deploy needs it.\n- `touch x` — waiting for approval (confirm)"
	if !strings.Contains(status, want) {
		t.Errorf("status before the card = %q, want it to hold %q", status, want)
	}
	r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: req.id, ActionID: ActionDeny, Value: req.post.Value, User: bob})
	r.ad.waitPost(t, th1, contains("finished"))
}

// TestKnownSessionIsLookedUp: a session the Bot was not given at start
// (Config.Sessions) but the chain has (Config.Known) continues on a reply
// without a mention, as a listed one does; a thread the chain does not know
// still needs one.
func TestKnownSessionIsLookedUp(t *testing.T) {
	model := funcModel(func(req agentcore.Request) (agentcore.Response, error) {
		return agentcore.Response{Content: "answer to " + req.Messages[len(req.Messages)-1].Content}, nil
	})
	var asked []string
	var mu sync.Mutex
	r := newRig(t, model, Channel{}, Config{Known: func(key string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, key)
		return key == th1.Key(), nil
	}})
	other := Thread{Platform: "fake", Channel: "C1", Root: "R9"}
	r.say(alice, other, "m1", "no mention, unknown thread", false)
	r.say(alice, th1, "m2", "no mention, known thread", false)
	r.ad.waitPost(t, th1, contains("answer to no mention, known thread"))
	r.ad.mu.Lock()
	for _, p := range r.ad.posts {
		if p.thread == other {
			t.Errorf("a post in the unknown thread: %+v", p.post)
		}
	}
	r.ad.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(asked, th1.Key()) || !slices.Contains(asked, other.Key()) {
		t.Errorf("Known asked for %v", asked)
	}
}

// stopRecords are a session's run ends ("status cause cause_by") and tool
// results ("cause cause_by: content"), as the chain holds them.
func stopRecords(t *testing.T, db *store.DB, session string) (ends, results []string) {
	t.Helper()
	for e, err := range db.Events(session, 1) {
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Status  string `json:"status"`
			Cause   string `json:"cause"`
			CauseBy string `json:"cause_by"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case agentcore.EvRunFinished:
			ends = append(ends, strings.TrimSpace(p.Status+" "+p.Cause+" "+p.CauseBy))
		case agentcore.EvToolResult:
			results = append(results, p.Cause+" "+p.CauseBy+": "+p.Content)
		}
	}
	return ends, results
}

// TestShutdownIsNotAUsersStop: a shutdown (Run's ctx ended with a
// SIGTERM StopCause) while a command runs is recorded as the shutdown, in
// the result the model reads and in the run's end, the thread is told so,
// and the bot logs the signal and the sessions whose runs it cancelled.
func TestShutdownIsNotAUsersStop(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	r := newRig(t, cmdModel{cmd: "sleep 60 & echo $! > sleeper.pid; wait"}, Channel{AllowAll: true}, Config{Logger: logger})
	r.say(alice, th1, "m1", "wait a minute", true)
	waitFor(t, "the command to write its pid", func() bool {
		b, err := os.ReadFile(filepath.Join(r.dir, "sleeper.pid"))
		return err == nil && len(b) > 1
	})
	r.stopWith(&agentcore.StopCause{Kind: agentcore.StopShutdown, By: "SIGTERM"})
	r.ad.waitPost(t, th1, contains("Stopped: thinbot is shutting down (SIGTERM)."))
	ends, results := stopRecords(t, r.db, th1.Key())
	if want := "cancelled shutdown SIGTERM"; len(ends) != 1 || ends[0] != want {
		t.Errorf("runs finished = %q, want one %q", ends, want)
	}
	if len(results) != 1 || !strings.HasPrefix(results[0], "shutdown SIGTERM: interrupted: thinbot is shutting down (SIGTERM); the process group was killed") {
		t.Errorf("tool results = %q, want the command interrupted by the shutdown", results)
	}
	for _, r := range results {
		if strings.Contains(r, "user") {
			t.Errorf("the shutdown is recorded as a user's interrupt: %q", r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), `"msg":"bot stopped","signal":"SIGTERM","cancelled_runs":1,"sessions":["`+th1.Key()+`"]`) {
		t.Errorf("the bot did not log the signal and the cancelled run:\n%s", logs.String())
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestCancelledApprovalCardSaysWhy: an approval request whose run is
// stopped before anyone decides says who stopped it, or that thinbot is
// shutting down and on which signal.
func TestCancelledApprovalCardSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(r *rig)
		want string
	}{
		{"stop", func(r *rig) { r.say(alice, th1, "m2", "/stop", true) }, "**Cancelled** — the run was stopped by @alice. Nothing was run."},
		{"shutdown", func(r *rig) { r.stopWith(&agentcore.StopCause{Kind: agentcore.StopShutdown, By: "SIGTERM"}) },
			"**Cancelled** — thinbot is shutting down (SIGTERM). Nothing was run."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, cmdModel{cmd: "touch x"}, Channel{Approvers: []string{"U2"}}, Config{})
			r.say(alice, th1, "m1", "make x", true)
			req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
			waitFor(t, "the request to be awaited", func() bool {
				r.b.mu.Lock()
				defer r.b.mu.Unlock()
				return r.b.pending[req.post.Value] != nil && r.b.pending[req.post.Value].postID != ""
			})
			tc.stop(r)
			r.ad.waitPost(t, th1, func(p Post) bool { return strings.HasPrefix(p.Text, tc.want) })
		})
	}
}
