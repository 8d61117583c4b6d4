package tests

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
	"github.com/thinbot/thinbot/tests/fakeslack"
)

// The end-to-end tests of `thinbot serve`: the built binary runs as a real
// process with a config file, against a chat fake (Mattermost or Slack)
// and the scripted model. Each scenario starts its own process and ends
// with SIGTERM (exit code 0) and a verified chain.

// serveScenarios run against every chat platform.
var serveScenarios = []struct {
	name string
	run  func(t *testing.T, newChat func(*testing.T) chatSide)
}{
	{"MentionAnswersInThread", scMentionAnswersInThread},
	{"ReadOnlyCommandRuns", scReadOnlyCommandRuns},
	{"ApprovalRules", scApprovalRules},
	{"ApprovalExpires", scApprovalExpires},
	{"StopKillsProcessGroup", scStopKillsProcessGroup},
	{"ConcurrentThreads", scConcurrentThreads},
	{"ConnectionDropMidRun", func(t *testing.T, newChat func(*testing.T) chatSide) {
		scConnectionLossMidRun(t, newChat(t), func(c chatSide) { c.CutConnection() })
	}},
	{"ModelDown", scModelDown},
	{"RestartWithPendingApproval", scRestartWithPendingApproval},
	{"ReplyAfterRestart", scReplyAfterRestart},
	{"FullOutputAttached", scFullOutputAttached},
	{"NotEnabledHere", scNotEnabledHere},
	{"StatusShowsSandbox", scStatusShowsSandbox},
	{"SkillCommandModelDown", scSkillCommandModelDown},
	{"TokenBudgetsAfterACrash", scTokenBudgetsAfterACrash},
}

// A reply without a mention in a session's thread continues it after a
// restart too: the daemon looks the thread up in the chain's state index
// (bot.Config.Known) instead of listing every session at start.
func scReplyAfterRestart(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, fakemodel.Reply{Content: "hello there"}, fakemodel.Reply{Content: "still with you"})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()
	root := chat.Mention("alice", ops, "", "hi")
	r.waitPost(ops, root, "hello there")
	r.stop()
	r.start()
	chat.Say("alice", ops, root, "and now?")
	r.waitPost(ops, root, "still with you")
	r.stop()
}

// /status says how the kernel sandbox confines commands.
func scStatusShowsSandbox(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, fakemodel.Reply{Content: "hello there"})
	r := newRig(t, chat, m.URL, rigOpts{})
	sb := chat.Sandbox()
	root := chat.Mention("alice", sb, "", "hi")
	r.waitPost(sb, root, "hello there")
	chat.Mention("alice", sb, root, "/status")
	r.waitPost(sb, root, "Kernel sandbox: enforced")
	r.stop()
}

var platforms = []struct {
	name    string
	newChat func(*testing.T) chatSide
}{
	{"mattermost", newMMChat},
	{"slack", newSlackChat},
}

func TestServe(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range serveScenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, p.newChat) })
			}
		})
	}
}

// inOrder reports whether want is a subsequence of got.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// 1. A mention starts a thread session and the answer arrives in that
// thread; /healthz, /readyz and /metrics answer; SIGTERM exits cleanly.
func scMentionAnswersInThread(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, fakemodel.Reply{Content: "All quiet: nothing is on fire."})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()

	root := chat.Mention("alice", ops, "", "anything on fire?")
	r.waitPost(ops, root, "nothing is on fire")
	if got := lastUser(m.Requests()[0]); !strings.Contains(got, "anything on fire?") || strings.Contains(got, "thinbot") {
		t.Errorf("the model got the user text %q; want it without the mention", got)
	}
	if n := r.countPosts(ops, root, "nothing is on fire"); n != 1 {
		t.Errorf("the answer was posted %d times", n)
	}

	if code, body := r.get("/healthz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body := r.get("/readyz"); code != http.StatusOK || strings.TrimSpace(body) != "ready" {
		t.Errorf("/readyz = %d %q", code, body)
	}
	code, body := r.get("/metrics")
	if code != http.StatusOK || !strings.Contains(body, `thinbot_runs_total{status="answered"} 1`) ||
		!strings.Contains(body, "thinbot_messages_total 1") {
		t.Errorf("/metrics = %d, without thinbot_runs_total{status=\"answered\"} 1 or thinbot_messages_total 1:\n%s", code, tail(body, 3000))
	}
	if !regexp.MustCompile(`(?m)^thinbot_store_syncs_total [1-9]`).MatchString(body) {
		t.Errorf("/metrics without a nonzero thinbot_store_syncs_total:\n%s", tail(body, 3000))
	}

	r.stop()
	tr := trail(chainEvents(t, r.stateDir), r.session(ops, root))
	if want := []string{"run_started", "run_finished:answered"}; !slices.Equal(tr, want) {
		t.Errorf("session trail = %v, want %v", tr, want)
	}
}

// 2. A read-only command runs without asking and its output is shown.
func scReadOnlyCommandRuns(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, run("cat notes.txt"), fakemodel.Reply{Content: "The notes say the disk is fine."})
	r := newRig(t, chat, m.URL, rigOpts{})
	if err := os.WriteFile(filepath.Join(r.ws, "notes.txt"), []byte("disk: MARKER-4711 fine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ops := chat.Ops()

	root := chat.Mention("alice", ops, "", "what do the notes say?")
	r.waitPost(ops, root, "the disk is fine")
	// The status message shows the command with the first lines of its
	// output.
	r.waitFor("the command and its output in the status message", func() bool {
		for _, p := range r.chat.BotPosts(ops, root) {
			if strings.Contains(p.Text, "cat notes.txt") && strings.Contains(p.Text, "MARKER-4711") {
				return true
			}
		}
		return false
	})
	for _, p := range r.chat.BotPosts(ops, root) {
		if len(p.Buttons) > 0 {
			t.Errorf("a read-only command asked for approval: %q", p.Text)
		}
	}
	if out := lastToolResult(m.Requests()[1]); !strings.Contains(out, "MARKER-4711") {
		t.Errorf("the model did not get the output: %q", out)
	}

	r.stop()
	tr := trail(chainEvents(t, r.stateDir), r.session(ops, root))
	if want := []string{"run_started", "gate_decision:pass", "tool_result", "run_finished:answered"}; !slices.Equal(tr, want) {
		t.Errorf("session trail = %v, want %v", tr, want)
	}
}

// 3. A write posts buttons; a non-approver's click is refused and nothing
// runs; the requester's own click is refused under the two-person rule; an
// approver's click runs it and the message shows who approved; the chain
// holds all of it in order.
func scApprovalRules(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, run("touch approved.txt"), fakemodel.Reply{Content: "Created approved.txt."})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()
	target := filepath.Join(r.ws, "approved.txt")

	root := chat.Mention("alice", ops, "", "please create approved.txt")
	req := r.waitButtons(ops, root)
	r.waitRecorded(r.session(ops, root), `"approval_posted"`)
	if !slices.Contains(req.Buttons, "approve") || !slices.Contains(req.Buttons, "deny") {
		t.Errorf("buttons = %v, want approve and deny", req.Buttons)
	}
	if !strings.Contains(req.Text, "touch approved.txt") || !strings.Contains(req.Text, "alice") {
		t.Errorf("the request does not show the command and the requester:\n%s", req.Text)
	}

	chat.Click(t, ops, root, req.ID, "approve", "carol")
	if e := r.waitEphemeral("carol", 0); !strings.Contains(e, "not an approver") {
		t.Errorf("carol was told %q", e)
	}
	chat.Click(t, ops, root, req.ID, "approve", "alice")
	if e := r.waitEphemeral("alice", 0); !strings.Contains(e, "two-person rule") {
		t.Errorf("alice was told %q", e)
	}
	// mallory renamed her account to an approver's name: ids decide.
	chat.Click(t, ops, root, req.ID, "approve", "mallory")
	if e := r.waitEphemeral("mallory", 0); !strings.Contains(e, "not an approver") {
		t.Errorf("mallory (renamed to %q) was told %q", malloryName, e)
	}
	if fileExists(target) {
		t.Fatal("the command ran after refused clicks")
	}
	// The approver's click on a copy of the button in another post (here
	// the thread's root) decides nothing: the click names the wrong post.
	if e := chat.CopyButton(t, ops, root, req.ID, "approve", root)(t, "bob"); !strings.Contains(e, "no longer open") {
		t.Errorf("a click on a copy of the button in another post was answered %q", e)
	}
	if fileExists(target) {
		t.Fatal("a click on a copy of the button in another post ran the command")
	}
	if p := r.post(ops, root, req.ID); len(p.Buttons) == 0 {
		t.Fatalf("a refused click removed the buttons: %q", p.Text)
	}

	chat.Click(t, ops, root, req.ID, "approve", "bob")
	r.waitPost(ops, root, "Created approved.txt.")
	if !fileExists(target) {
		t.Error("the approved command did not run")
	}
	p := r.post(ops, root, req.ID)
	if !strings.Contains(p.Text, "Approved") || !strings.Contains(p.Text, "bob") || len(p.Buttons) != 0 {
		t.Errorf("the request was not updated to show bob's approval: %q buttons %v", p.Text, p.Buttons)
	}
	for _, e := range chat.Ephemerals("bob") { // the copied button's refusal, where the fake records it
		if !strings.Contains(e, "no longer open") {
			t.Errorf("bob was shown %q", e)
		}
	}

	r.stop()
	tr := trail(chainEvents(t, r.stateDir), r.session(ops, root))
	// Users are recorded by id, their name alongside.
	name := func(u string) string {
		if u == "mallory" {
			return "user:" + chat.UserID(u) + " (" + malloryName + ")"
		}
		return "user:" + chat.UserID(u) + " (" + u + ")"
	}
	want := []string{"run_started", "gate_decision:confirm", "approval_requested", "note:approval_posted:bot",
		"note:click_refused:" + name("carol"), "note:click_refused:" + name("alice"), "note:click_refused:" + name("mallory"),
		"approval_decision:true:" + name("bob"), "tool_result", "run_finished:answered"}
	if !slices.Equal(tr, want) {
		t.Errorf("session trail =\n%v\nwant\n%v", tr, want)
	}
}

// 4. An unanswered request expires as a deny. The card says when in the
// config's timezone.
func scApprovalExpires(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, run("touch expired.txt"), fakemodel.Reply{Content: "Nobody approved, so nothing changed."})
	r := newRig(t, chat, m.URL, rigOpts{ApprovalTimeout: "2s", Extra: "timezone: Asia/Kolkata\n"})
	ops := chat.Ops()

	root := chat.Mention("alice", ops, "", "please create expired.txt")
	req := r.waitButtons(ops, root)
	if !regexp.MustCompile(`expires \d\d:\d\d IST\b`).MatchString(req.Text) {
		t.Errorf("the card's expiry is not in the config's timezone (Asia/Kolkata, IST): %q", req.Text)
	}
	r.waitPost(ops, root, "Nobody approved")
	p := r.post(ops, root, req.ID)
	if !strings.Contains(p.Text, "Expired") || len(p.Buttons) != 0 {
		t.Errorf("the request was not updated to say it expired: %q buttons %v", p.Text, p.Buttons)
	}
	if fileExists(filepath.Join(r.ws, "expired.txt")) {
		t.Error("an expired request ran")
	}
	if out := lastToolResult(m.Requests()[1]); !strings.Contains(out, "not run") || !strings.Contains(out, "expired") {
		t.Errorf("the model was told %q, want that the command was not run because the request expired", out)
	}

	r.stop()
	tr := trail(chainEvents(t, r.stateDir), r.session(ops, root))
	if want := []string{"approval_requested", "approval_decision:false:expiry", "tool_result", "run_finished:answered"}; !inOrder(tr, want) {
		t.Errorf("session trail = %v, want %v in order", tr, want)
	}
}

// 5. /stop during a long command kills its process group and the thread
// is told.
func scStopKillsProcessGroup(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, run("sleep 300 & echo $$ > pid.txt; wait"))
	r := newRig(t, chat, m.URL, rigOpts{})
	sb := chat.Sandbox()

	root := chat.Mention("alice", sb, "", "run the long job")
	var pgid int
	r.waitFor("the long command to start", func() bool {
		b, err := os.ReadFile(filepath.Join(r.sandbox, "pid.txt"))
		if err != nil {
			return false
		}
		pgid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && processGroupAlive(t, pgid)
	})

	chat.Mention("alice", sb, root, "/stop")
	r.waitPost(sb, root, "Stopped by")
	r.waitFor("the command's process group to be gone", func() bool { return !processGroupAlive(t, pgid) })

	r.stop()
	tr := trail(chainEvents(t, r.stateDir), r.session(sb, root))
	if want := []string{"gate_decision:confirm", "run_finished:cancelled"}; !inOrder(tr, want) {
		t.Errorf("session trail = %v, want %v in order", tr, want)
	}
	if slices.Contains(tr, "approval_requested") {
		t.Errorf("an allow_all channel asked for approval: %v", tr)
	}
}

// 6. Two threads run concurrently and each answer lands in its own thread.
func scConcurrentThreads(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	var mu sync.Mutex
	arrived := map[string]bool{}
	both := make(chan struct{})
	// The model answers neither thread until it has both requests, which
	// only happens when the two runs are in progress at the same time.
	m := modelFunc(t, func(req fakemodel.Request) fakemodel.Reply {
		tok := "thread-A"
		if strings.Contains(lastUser(req), "thread-B") {
			tok = "thread-B"
		}
		mu.Lock()
		arrived[tok] = true
		if len(arrived) == 2 {
			select {
			case <-both:
			default:
				close(both)
			}
		}
		mu.Unlock()
		select {
		case <-both:
			return fakemodel.Reply{Content: "ANSWER(" + tok + ")"}
		case <-time.After(waitTimeout):
			return fakemodel.Reply{Content: "the other thread never ran"}
		}
	})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()

	rootA := chat.Mention("alice", ops, "", "question for thread-A")
	rootB := chat.Mention("bob", ops, "", "question for thread-B")
	r.waitPost(ops, rootA, "ANSWER(thread-A)")
	r.waitPost(ops, rootB, "ANSWER(thread-B)")
	if r.countPosts(ops, rootA, "thread-B") != 0 || r.countPosts(ops, rootB, "thread-A") != 0 {
		t.Errorf("an answer landed in the wrong thread\n%s", chat.Dump())
	}
	if n := len(m.Requests()); n != 2 {
		t.Errorf("the model was called %d times, want 2", n)
	}
	r.stop()
}

// 7. The event connection is lost while a run is in progress, and messages
// arrive meanwhile; thinbot reconnects, catches up and answers every
// message exactly once. cut breaks the connection.
func scConnectionLossMidRun(t *testing.T, chat chatSide, cut func(chatSide)) {
	hold := make(chan struct{})
	m := modelFunc(t, func(req fakemodel.Request) fakemodel.Reply {
		text := lastUser(req)
		for _, tok := range []string{"first", "second", "third"} {
			if strings.Contains(text, tok+" question") {
				if tok == "first" {
					select {
					case <-hold:
					case <-time.After(waitTimeout):
					}
				}
				return fakemodel.Reply{Content: "ANSWER(" + tok + ")"}
			}
		}
		return fakemodel.Reply{Content: "unexpected message " + text}
	})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()

	root := chat.Mention("alice", ops, "", "first question")
	r.waitFor("the first run to reach the model", func() bool { return len(m.Requests()) == 1 })
	cut(chat)
	chat.Say("alice", ops, root, "second question")
	root3 := chat.Mention("bob", ops, "", "third question")
	chat.Restore()
	r.waitFor("thinbot to reconnect", chat.Connected)
	close(hold)

	r.waitPost(ops, root, "ANSWER(first)")
	r.waitPost(ops, root, "ANSWER(second)")
	r.waitPost(ops, root3, "ANSWER(third)")
	r.stop()
	for _, c := range []struct{ root, answer string }{{root, "ANSWER(first)"}, {root, "ANSWER(second)"}, {root3, "ANSWER(third)"}} {
		if n := r.countPosts(ops, c.root, c.answer); n != 1 {
			t.Errorf("%s was posted %d times", c.answer, n)
		}
	}
	if n := len(m.Requests()); n != 3 {
		t.Errorf("the model was called %d times, want 3 (one per message)", n)
	}
	if mc, ok := chat.(*mmChat); ok {
		// The posts made while the WebSocket was refused reached thinbot
		// only through the catch-up read.
		caughtUp := false
		for _, req := range mc.s.Requests() {
			if req.Method == http.MethodGet && req.Path == "/api/v4/channels/"+ops+"/posts" && strings.Contains(req.RawQuery, "since=") {
				caughtUp = true
			}
		}
		if !caughtUp {
			t.Error("thinbot did not read the channel's posts since the drop")
		}
	}
	if sc, ok := chat.(*slackChat); ok {
		redelivered := 0
		for _, e := range sc.f.Envelopes() {
			if e.RetryAttempt > 0 {
				redelivered++
			}
		}
		if redelivered == 0 {
			t.Errorf("no envelope was redelivered; the test did not exercise redelivery\n%s", chat.Dump())
		}
	}
}

// 8. The model endpoint is down: the thread gets a clear message and
// nothing crashes.
func scModelDown(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	r := newRig(t, chat, "http://"+freeAddr(t)+"/v1", rigOpts{})
	ops := chat.Ops()

	root := chat.Mention("alice", ops, "", "hello?")
	r.waitPost(ops, root, "could not reach the model")
	chat.Say("alice", ops, root, "still there?")
	r.waitFor("the second message's notice", func() bool { return r.countPosts(ops, root, "could not reach the model") == 2 })
	if code, _ := r.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d after model failures", code)
	}
	// Ready all the same (commands, approvals and alert cards work without
	// the model), with the model named as a detail and in the metric.
	if code, body := r.get("/readyz"); code != http.StatusOK || !strings.Contains(body, "ready\nmodel: unreachable") {
		t.Errorf("/readyz = %d %q, want 200 ready with the model named", code, body)
	}
	if got := r.metric("thinbot_model_up"); got != "0" {
		t.Errorf("thinbot_model_up = %q with the model down, want 0", got)
	}
	// Series that saw no event are there at zero, so an alert rule on
	// rate() sees them from the start; the build is named.
	if got := r.metric(`thinbot_approvals_total{outcome="refused_click"}`); got != "0" {
		t.Errorf("refused_click approvals = %q before any click, want 0", got)
	}
	if _, body := r.get("/metrics"); !strings.Contains(body, "thinbot_build_info{goversion=") {
		t.Error("/metrics has no thinbot_build_info")
	}
	r.stop()
	// The notice is posted just before the thread's worker is free again:
	// a reply in that gap is queued (and recorded as queued), which this
	// test is not about.
	tr := slices.DeleteFunc(trail(chainEvents(t, r.stateDir), r.session(ops, root)), func(s string) bool {
		return strings.HasPrefix(s, "note:message_queued:")
	})
	if want := []string{"run_started", "run_finished:error", "run_started", "run_finished:error"}; !slices.Equal(tr, want) {
		t.Errorf("session trail = %v, want %v", tr, want)
	}
}

// 9. After a restart with a pending approval (SIGKILL), the old button
// answers that the request is no longer open and changes nothing; the
// message says it expired; the thread is told the run was interrupted.
func scRestartWithPendingApproval(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, run("touch restart.txt"))
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()

	root := chat.Mention("alice", ops, "", "please create restart.txt")
	req := r.waitButtons(ops, root)
	// The message can be expired after a restart only once its id is on
	// the record; the post and the record are not one transaction.
	r.waitRecorded(r.session(ops, root), `"approval_posted"`)
	press := chat.KeepButton(t, ops, root, req.ID, "approve")
	if code := r.signal(syscall.SIGKILL); code == 0 {
		t.Fatalf("SIGKILL gave exit code 0")
	}

	r.start()
	r.waitPost(ops, root, "interrupted")
	p := r.post(ops, root, req.ID)
	if !strings.Contains(p.Text, "Expired") || !strings.Contains(p.Text, "restarted") || len(p.Buttons) != 0 {
		t.Errorf("the request was not updated to say it expired: %q buttons %v", p.Text, p.Buttons)
	}
	if e := press(t, "bob"); !strings.Contains(e, "no longer open") {
		t.Errorf("the old button answered %q", e)
	}
	if fileExists(filepath.Join(r.ws, "restart.txt")) {
		t.Error("the old button ran the command")
	}
	if after := r.post(ops, root, req.ID); after.Text != p.Text {
		t.Errorf("the old button changed the message to %q", after.Text)
	}
	if n := r.countPosts(ops, root, "interrupted"); n != 1 {
		t.Errorf("the thread was told %d times about the interruption", n)
	}

	r.stop()
	tr := trail(chainEvents(t, r.stateDir), r.session(ops, root))
	want := []string{"approval_requested", "note:approval_posted:bot", "approval_decision:false:system", "run_finished:interrupted"}
	if !inOrder(tr, want) || slices.Contains(tr, "tool_result") {
		t.Errorf("session trail = %v, want %v in order and no tool_result", tr, want)
	}
}

// ---- Slack only ----

// A redelivered event (its ack was lost) is answered once.
func TestServeSlackRedeliveryAnsweredOnce(t *testing.T) {
	t.Parallel()
	chat := newSlack(t, "")
	m := fakemodel.Start(t, fakemodel.Reply{Content: "ANSWER(redelivered)"})
	r := newRig(t, chat, m.URL, rigOpts{})

	chat.f.DropAcks(2) // the message event and the app_mention event
	root := chat.Mention("alice", "COPS", "", "answer me once")
	r.waitPost("COPS", root, "ANSWER(redelivered)")
	r.waitFor("the redeliveries to be acked", func() bool {
		n := 0
		for _, e := range chat.f.Envelopes() {
			if e.RetryAttempt > 0 && e.Acked {
				n++
			}
		}
		return n == 2
	})
	r.stop()
	if n := r.countPosts("COPS", root, "ANSWER(redelivered)"); n != 1 {
		t.Errorf("the answer was posted %d times", n)
	}
	if n := len(m.Requests()); n != 1 {
		t.Errorf("the model was called %d times", n)
	}
}

// Slack's disconnect message mid-run loses nothing.
func TestServeSlackDisconnectMidRun(t *testing.T) {
	t.Parallel()
	scConnectionLossMidRun(t, newSlack(t, ""), func(c chatSide) {
		f := c.(*slackChat).f
		f.DropAcks(1) // and the next ack is lost, so that envelope comes again
		f.Disconnect("refresh_requested")
	})
}

// A 429 on chat.postMessage is retried after Retry-After.
func TestServeSlackRateLimitRetried(t *testing.T) {
	t.Parallel()
	chat := newSlack(t, "")
	m := fakemodel.Start(t, fakemodel.Reply{Content: "ANSWER(after 429)"})
	r := newRig(t, chat, m.URL, rigOpts{})

	chat.f.RateLimitNext("chat.postMessage", time.Second)
	root := chat.Mention("alice", "COPS", "", "hello")
	r.waitPost("COPS", root, "ANSWER(after 429)")
	r.stop()
	var statuses []int
	ok := 0
	for _, c := range chat.f.Calls("chat.postMessage") {
		statuses = append(statuses, c.Status)
		if c.Status == http.StatusOK {
			ok++
		}
	}
	if len(statuses) < 2 || statuses[0] != http.StatusTooManyRequests || slices.Contains(statuses[1:], http.StatusTooManyRequests) {
		t.Errorf("chat.postMessage statuses = %v, want one 429, then successes", statuses)
	}
	// Every accepted call is one message in the thread: the retry neither
	// lost the rate-limited post nor made it twice.
	if n := len(r.chat.BotPosts("COPS", root)); n != ok {
		t.Errorf("thread has %d bot posts after %d accepted chat.postMessage calls\n%s", n, ok, chat.Dump())
	}
	if n := r.countPosts("COPS", root, "ANSWER(after 429)"); n != 1 {
		t.Errorf("the answer was posted %d times", n)
	}
}

// HTTP mode: signed events work; requests with a bad, stale or missing
// signature are refused and change nothing.
func TestServeSlackHTTPModeSignatures(t *testing.T) {
	t.Parallel()
	const secret = "e2e-signing-secret"
	chat := newSlack(t, secret)
	m := fakemodel.Start(t, fakemodel.Reply{Content: "ANSWER(over http)"})
	r := newRig(t, chat, m.URL, rigOpts{})
	chat.f.DeliverHTTP("http://"+r.addr, secret)

	root := chat.Mention("alice", "COPS", "", "over http")
	r.waitPost("COPS", root, "ANSWER(over http)")

	events := "http://" + r.addr + "/slack/events"
	forged := chat.f.MessageEvent("UALICE", "COPS", "", "<@"+fakeslack.BotUserID+"> forged request")
	click := []byte(url.Values{"payload": {`{"type":"block_actions","user":{"id":"UBOB","name":"bob"},"actions":[{"action_id":"approve","value":"x"}]}`}}.Encode())
	cases := []struct {
		name, path, ctype, secret string
		body                      []byte
		at                        time.Time
	}{
		{"wrong secret", "/slack/events", "application/json", "not-the-secret", forged, time.Now()},
		{"stale timestamp", "/slack/events", "application/json", secret, forged, time.Now().Add(-10 * time.Minute)},
		{"future timestamp", "/slack/events", "application/json", secret, forged, time.Now().Add(10 * time.Minute)},
		{"forged click", "/slack/interactivity", "application/x-www-form-urlencoded", "not-the-secret", click, time.Now()},
	}
	for _, c := range cases {
		req, err := fakeslack.SignedRequest(t.Context(), "http://"+r.addr+c.path, c.ctype, c.body, c.secret, c.at)
		if err != nil {
			t.Fatal(err)
		}
		if code := postTo(t.Context(), t, req); code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", c.name, code)
		}
	}
	unsigned, _ := http.NewRequest(http.MethodPost, events, strings.NewReader(string(forged)))
	unsigned.Header.Set("Content-Type", "application/json")
	if code := postTo(t.Context(), t, unsigned); code != http.StatusUnauthorized {
		t.Errorf("unsigned: status %d, want 401", code)
	}

	r.stop()
	if n := len(m.Requests()); n != 1 {
		t.Errorf("the model was called %d times; a refused request reached it", n)
	}
	for _, msg := range chat.f.Messages("COPS") {
		if strings.Contains(msg.Text, "forged") && len(r.chat.BotPosts("COPS", msg.TS)) > 0 {
			t.Errorf("thinbot answered the refused request\n%s", chat.Dump())
		}
	}
	if !strings.Contains(r.log.String(), "refused request") {
		t.Error("refused requests were not logged")
	}
}

// A slow model's answer streams into the Slack thread through Slack's chat
// streaming methods and is shown exactly once.
func TestServeSlackStreamsSlowAnswer(t *testing.T) {
	t.Parallel()
	chat := newSlack(t, "")
	answer := "STREAMED: " + strings.Repeat("the disk is fine and the load is low. ", 8)
	// ~300 bytes in 6-byte pieces, 40 ms apart: about 2 s of writing, so
	// several stream ticks (every 500 ms) happen while it is written.
	m := fakemodel.Start(t, fakemodel.Reply{Content: answer, Stream: true, Fragment: 6, ChunkDelay: 40 * time.Millisecond})
	r := newRig(t, chat, m.URL, rigOpts{})
	root := chat.Mention("alice", "COPS", "", "how is the machine?")
	r.waitFor("the streamed answer to be complete", func() bool {
		for _, msg := range chat.f.Thread("COPS", root) {
			if msg.Streamed && !msg.Streaming && strings.TrimSpace(msg.Text) == strings.TrimSpace(answer) {
				return true
			}
		}
		return false
	})
	r.stop()
	if n := len(chat.f.Calls("chat.startStream")); n != 1 {
		t.Errorf("chat.startStream called %d times, want 1", n)
	}
	if n := len(chat.f.Calls("chat.appendStream")); n < 1 {
		t.Errorf("chat.appendStream called %d times, want at least 1 (the answer was not streamed progressively)", n)
	}
	if n := r.countPosts("COPS", root, "STREAMED:"); n != 1 {
		t.Errorf("the answer appears %d times in the thread, want once", n)
	}
}

// On Mattermost (no streaming API) a slow answer shows progressively in the
// status message, then arrives once as its own post.
func TestServeMattermostShowsStreamedTextProgressively(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t)
	answer := "STREAMED: " + strings.Repeat("the disk is fine and the load is low. ", 8)
	m := fakemodel.Start(t, fakemodel.Reply{Content: answer, Stream: true, Fragment: 6, ChunkDelay: 40 * time.Millisecond})
	r := newRig(t, chat, m.URL, rigOpts{})
	root := chat.Mention("alice", chat.Ops(), "", "how is the machine?")
	r.waitFor("part of the answer to show while it is written", func() bool {
		for _, p := range chat.BotPosts(chat.Ops(), root) {
			if strings.Contains(p.Text, "STREAMED:") && !strings.Contains(p.Text, strings.TrimSpace(answer)) {
				return true
			}
		}
		return false
	})
	r.waitPost(chat.Ops(), root, strings.TrimSpace(answer))
	r.stop()
	if n := r.countPosts(chat.Ops(), root, "STREAMED:"); n != 1 {
		t.Errorf("the answer appears %d times in the thread, want once", n)
	}
	if n := r.countPosts(chat.Ops(), root, "step(s)"); n != 0 {
		t.Errorf("a status without steps was left in the thread:\n%s", chat.Dump())
	}
}
