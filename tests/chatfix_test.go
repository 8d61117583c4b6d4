package tests

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// End-to-end regressions of the field test (issue 10): Mattermost, Slack
// and the setup guides, against the real `thinbot serve` binary.

// metric returns the value line of a metric in /metrics, "" if absent.
func (r *rig) metric(name string) string {
	r.t.Helper()
	_, body := r.get("/metrics")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.TrimPrefix(l, name+" ")
		}
	}
	return ""
}

// A reconnect's catch-up never reaches before the first connection: a
// mention made before thinbot ever ran (with an empty state dir) is not
// answered when the WebSocket comes back, while a mention made during the
// outage is. thinbot_chat_connected follows the connection.
func TestServeMattermostCatchUpNeverBeforeFirstConnection(t *testing.T) {
	chat := newMMChat(t).(*mmChat)
	ops := chat.Ops()
	old := chat.Mention("alice", ops, "", "old question")
	chat.s.Backdate(old, time.Now().Add(-time.Minute)) // before thinbot existed, within the 2-minute overlap
	a := &answerer{}
	m := modelFunc(t, a.reply)
	r := newRig(t, chat, m.URL, rigOpts{})
	if got := r.metric("thinbot_chat_connected"); got != "1" {
		t.Errorf("thinbot_chat_connected = %q while connected, want 1", got)
	}

	chat.CutConnection()
	r.waitFor("thinbot_chat_connected to drop to 0", func() bool { return r.metric("thinbot_chat_connected") == "0" })
	r.waitFor("/readyz to say not connected", func() bool {
		code, body := r.get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "chat: not connected")
	})
	during := chat.Mention("bob", ops, "", "question during the outage")
	chat.Restore()
	r.waitFor("thinbot to reconnect", chat.Connected)
	r.waitPost(ops, during, "ANSWER(question during the outage)")
	r.waitFor("thinbot_chat_connected back to 1", func() bool { return r.metric("thinbot_chat_connected") == "1" })
	r.stop()

	if posts := chat.BotPosts(ops, old); len(posts) != 0 {
		t.Errorf("the mention from before thinbot started was answered: %+v", posts)
	}
	for _, req := range m.Requests() {
		if strings.Contains(lastUser(req), "old question") {
			t.Errorf("the model saw the old mention")
		}
	}
	for _, ev := range chainEvents(t, r.stateDir) {
		if ev.Session == r.session(ops, old) {
			t.Errorf("the chain has a session for the old mention: %s", ev.Type)
		}
	}
}

// A channel configured by id that the bot is not a member of stops the
// start with an error that says what to do, as an unresolvable name does:
// no "ready" with deaf mentions. On both platforms.
func TestServeChannelIDNotJoined(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.name, func(t *testing.T) {
			chat := p.newChat(t)
			lonely := "CLONELY"
			switch c := chat.(type) {
			case *mmChat:
				lonely = c.s.AddChannel("lonely", c.ids["alice"])
			case *slackChat:
				c.f.AddChannelWithoutBot(lonely, "lonely", c.ids["alice"])
			}
			m := modelFunc(t, (&answerer{}).reply)
			dir := t.TempDir()
			ws := filepath.Join(dir, "ws")
			os.Mkdir(ws, 0o755)
			addr := freeAddr(t)
			cfg := chat.Config(t, dir, addr) + fmt.Sprintf(`model: {base_url: %s, model: test-model}
listen: %s
state_dir: %s
channels:
  - {id: %s, workspace: %s, approvers: [%s]}
  - {id: %s, workspace: %s, approvers: [%s]}
`, m.URL, addr, filepath.Join(dir, "state"), chat.Ops(), ws, chat.UserID("bob"), lonely, ws, chat.UserID("bob"))
			path := filepath.Join(dir, "thinbot.yaml")
			os.WriteFile(path, []byte(cfg), 0o600)
			res := thinbot(t, dir, nil, "serve", "--config", path)
			if res.code == 0 {
				t.Fatalf("serve started with a channel the bot is not in:\n%s", res.stderr)
			}
			want := "the bot is not a member of channel " + lonely
			if !strings.Contains(res.stderr, want) || !strings.Contains(res.stderr, "/invite @thinbot") {
				t.Errorf("serve's error lacks %q and the fix:\n%s", want, tail(res.stderr, 2000))
			}
		})
	}
}

// A hung users.info call does not stop event delivery: messages from users
// whose name is unknown are handled with their id, every Web API call has a
// timeout, and the shutdown is clean. thinbot_chat_connected is 1 on Slack
// too.
func TestServeSlackHungUsersInfoDoesNotStopEvents(t *testing.T) {
	chat := newSlack(t, "")
	chat.f.HangMethod("users.info", true)
	m := modelFunc(t, (&answerer{}).reply)
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()
	if got := r.metric("thinbot_chat_connected"); got != "1" {
		t.Errorf("thinbot_chat_connected = %q, want 1", got)
	}
	first := chat.Mention("alice", ops, "", "first question")
	second := chat.Mention("bob", ops, "", "second question")
	third := chat.Mention("alice", ops, "", "third question")
	r.waitPost(ops, first, "ANSWER(first question)")
	r.waitPost(ops, second, "ANSWER(second question)")
	r.waitPost(ops, third, "ANSWER(third question)")
	if n := len(chat.f.Calls("users.info")); n == 0 {
		t.Error("users.info was never called: the test did not exercise the hang")
	}
	chat.f.HangMethod("users.info", false)
	r.stop()
	for _, ev := range chainEvents(t, r.stateDir) {
		if ev.Session == r.session(ops, first) && ev.Type == "user_message" && ev.Actor != "user:UALICE" {
			t.Errorf("actor of alice's message without a name = %q, want user:UALICE", ev.Actor)
		}
	}
}

// A long command output is attached whole (here 1.7 MiB, more than the
// 1 MiB the kernel used to keep, and far more than the model's 16 KiB
// view), after the status message that lists the command.
func scFullOutputAttached(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	const cmd = "seq 1 270000"
	m := fakemodel.Start(t, run(cmd), fakemodel.Reply{Content: "Counted."})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()
	root := chat.Mention("alice", ops, "", "count for me")
	r.waitPost(ops, root, "Counted.")
	r.stop()

	var want strings.Builder
	for i := 1; i <= 270000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	files := chat.Files(ops, root)
	if len(files) != 1 {
		t.Fatalf("%d files attached, want 1\n%s", len(files), chat.Dump())
	}
	if got := string(files[0]); got != want.String() {
		t.Errorf("the attachment has %d bytes (%q…%q), want the whole output (%d bytes)",
			len(got), head(got, 40), tailOf(got, 40), want.Len())
	}
	if seen := lastToolResult(m.Requests()[1]); len(seen) > 20000 {
		t.Errorf("the model saw %d bytes; the view should be short", len(seen))
	}
	status, file := -1, -1
	for i, p := range chat.BotPosts(ops, root) {
		switch {
		case status < 0 && strings.Contains(p.Text, "`"+cmd+"`") && strings.Contains(p.Text, "step"):
			status = i
		case strings.Contains(p.Text, "Full output of `"+cmd+"` attached (1.7 MiB)."):
			file = i
		}
	}
	if status < 0 || file < 0 || status > file {
		t.Errorf("status post at %d, file post at %d: want the status (listing the command) first\n%s", status, file, chat.Dump())
	}
}

func head(s string, n int) string { return s[:min(n, len(s))] }

func tailOf(s string, n int) string { return s[max(len(s)-n, 0):] }

// A mention in a channel without configuration, or a direct message when
// DMs are not configured, is answered once (per channel and hour) with a
// short notice instead of silence, and logged.
func scNotEnabledHere(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := modelFunc(t, (&answerer{}).reply)
	r := newRig(t, chat, m.URL, rigOpts{})
	lobby, dm := chat.Lobby(), chat.DM("alice")
	first := chat.Mention("alice", lobby, "", "hello?")
	r.waitPost(lobby, first, "I am not enabled in this channel")
	second := chat.Mention("bob", lobby, "", "anyone?")
	d := chat.Say("alice", dm, "", "psst")
	r.waitPost(dm, d, "I am not enabled in direct messages")
	// The ops channel still works, and answering there proves the second
	// lobby mention was handled (delivery is in order).
	root := chat.Mention("alice", chat.Ops(), "", "ping")
	r.waitPost(chat.Ops(), root, "ANSWER(ping)")
	r.stop()
	if n := len(chat.BotPosts(lobby, second)); n != 0 {
		t.Errorf("the second mention in the lobby got %d answers, want none (once per hour)", n)
	}
	if n := r.countPosts(lobby, first, "not enabled"); n != 1 {
		t.Errorf("the notice was posted %d times", n)
	}
	for _, req := range m.Requests() {
		if u := lastUser(req); u != "ping" {
			t.Errorf("the model saw %q from an unconfigured channel", u)
		}
	}
	if !strings.Contains(r.log.String(), `"msg":"message in a channel without configuration"`) {
		t.Error("the unconfigured channel was not logged")
	}
}

// After streaming fails (the workspace refuses chat.startStream), a slow
// answer falls back to the status message, which then becomes the answer:
// no "_Done: 0 step(s)._" post is left behind.
func TestServeSlackStreamingFallbackLeavesNoEmptyStatus(t *testing.T) {
	t.Parallel()
	chat := newSlack(t, "")
	chat.f.FailMethod("chat.startStream", "internal_error", -1)
	answer := "FALLBACK: " + strings.Repeat("the disk is fine and the load is low. ", 8)
	m := fakemodel.Start(t, fakemodel.Reply{Content: answer, Stream: true, Fragment: 6, ChunkDelay: 40 * time.Millisecond})
	r := newRig(t, chat, m.URL, rigOpts{})
	root := chat.Mention("alice", "COPS", "", "how is the machine?")
	r.waitPost("COPS", root, strings.TrimSpace(answer))
	r.stop()
	if len(chat.f.Calls("chat.startStream")) == 0 {
		t.Error("streaming was never tried: the test did not exercise the fallback")
	}
	if n := r.countPosts("COPS", root, "step(s)"); n != 0 {
		t.Errorf("a status without steps was left in the thread:\n%s", chat.Dump())
	}
	if n := r.countPosts("COPS", root, "FALLBACK:"); n != 1 {
		t.Errorf("the answer appears %d times, want once:\n%s", n, chat.Dump())
	}
}

// A model slow to start (no text for a few seconds) gets a "Working on it"
// status as a sign of life; the text then goes into that message, which
// becomes the answer: no "_Done: 0 step(s)._" above a streamed copy.
func TestServeSlackSlowStartLeavesNoEmptyStatus(t *testing.T) {
	t.Parallel()
	chat := newSlack(t, "")
	answer := "SLOW: " + strings.Repeat("the disk is fine and the load is low. ", 4)
	m := fakemodel.Start(t, fakemodel.Reply{Content: answer, Stream: true, Fragment: 6, ChunkDelay: 20 * time.Millisecond, Delay: 3 * time.Second})
	r := newRig(t, chat, m.URL, rigOpts{})
	root := chat.Mention("alice", "COPS", "", "how is the machine?")
	r.waitPost("COPS", root, "Working on it")
	r.waitPost("COPS", root, strings.TrimSpace(answer))
	r.stop()
	if n := r.countPosts("COPS", root, "step(s)"); n != 0 {
		t.Errorf("a status without steps was left in the thread:\n%s", chat.Dump())
	}
	if n := r.countPosts("COPS", root, "SLOW:"); n != 1 {
		t.Errorf("the answer appears %d times, want once:\n%s", n, chat.Dump())
	}
}
