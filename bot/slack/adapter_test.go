package slack_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/slack"
	"github.com/thinbot/thinbot/tests/fakeslack"
)

const secret = "test-signing-secret"

// recorder is a bot.Handler that hands messages and clicks to the test.
type recorder struct {
	msgs   chan bot.Message
	clicks chan bot.Click
	click  func(bot.Click) bot.ClickResult
}

func (r *recorder) HandleMessage(_ context.Context, m bot.Message) { r.msgs <- m }

func (r *recorder) HandleClick(_ context.Context, c bot.Click) bot.ClickResult {
	r.clicks <- c
	if r.click == nil {
		return bot.ClickResult{}
	}
	return r.click(c)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	f    *fakeslack.Server
	a    *slack.Adapter
	rec  *recorder
	logs *syncBuffer
	url  string // HTTP mode: the adapter's listener
}

// start runs an adapter in mode ("socket" or "http") against a fake with
// users U1 (alice), U2 (bob) in channel C1 and a DM D1 with alice.
func start(t *testing.T, mode string, click func(bot.Click) bot.ClickResult) *env {
	t.Helper()
	f := fakeslack.New(t)
	f.AddUser("U1", "alice")
	f.AddUser("U2", "bob")
	f.AddChannel("C1", "ops", "U1", "U2")
	f.AddIM("D1", "U1")
	logs := &syncBuffer{}
	a, err := slack.New(slack.Config{
		BotToken: fakeslack.BotToken, AppToken: fakeslack.AppToken, SigningSecret: secret,
		Mode: mode, APIURL: f.APIURL(), Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Backoff: bot.Backoff{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{f: f, a: a, logs: logs, rec: &recorder{msgs: make(chan bot.Message, 100), clicks: make(chan bot.Click, 100), click: click}}
	if mode == "http" {
		srv := httptest.NewServer(a.HTTPHandler())
		t.Cleanup(srv.Close)
		e.url = srv.URL
		f.DeliverHTTP(srv.URL, secret)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, e.rec) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	f.Wait(wctx, "adapter connected", a.Connected)
	return e
}

// next returns the next message the bot received.
func (e *env) next(t *testing.T) bot.Message {
	t.Helper()
	select {
	case m := <-e.rec.msgs:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message reached the bot")
		return bot.Message{}
	}
}

// expectOnly sends a marker message and checks that it is the next message
// the bot gets, proving nothing else was delivered before it.
func (e *env) expectOnly(t *testing.T) {
	t.Helper()
	ts := e.f.UserMessage("U2", "C1", "", "marker")
	if m := e.next(t); m.ID != ts || m.Text != "marker" {
		t.Fatalf("got unexpected message %+v, want the marker %s", m, ts)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestMentionRoundTrip(t *testing.T) {
	for _, mode := range []string{"socket", "http"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, mode, nil)
			ctx := ctxT(t)
			ts := e.f.UserMessage("U1", "C1", "", "<@UBOT> check the &lt;disk&gt; on <@U2>")
			m := e.next(t)
			want := bot.Thread{Platform: "slack", Channel: "C1", Root: ts}
			if m.Thread != want || m.ID != ts || m.User != (bot.User{ID: "U1", Name: "alice"}) ||
				m.Text != "check the <disk> on <@U2>" || !m.Mentioned || m.Direct || m.FromBot || m.Time.IsZero() {
				t.Fatalf("message = %+v", m)
			}
			id, err := e.a.Post(ctx, m.Thread, bot.Post{Text: "**done**, see [log](https://x.test/l)"})
			if err != nil {
				t.Fatal(err)
			}
			th := e.f.Thread("C1", ts)
			if len(th) != 2 || th[1].TS != id || th[1].ThreadTS != ts || th[1].Text != "*done*, see <https://x.test/l|log>" {
				t.Fatalf("thread = %+v", th)
			}
			if err := e.a.Update(ctx, m.Thread, id, bot.Post{Text: "_edited_"}); err != nil {
				t.Fatal(err)
			}
			if got := e.f.Thread("C1", ts)[1]; got.Text != "_edited_" || !got.Edited {
				t.Fatalf("after update: %+v", got)
			}
			// The app_mention twin, the bot's own post and its edit never reach the bot.
			e.expectOnly(t)
			reply := e.f.UserMessage("U1", "C1", ts, "and memory?")
			if m := e.next(t); m.ID != reply || m.Thread != want || m.Mentioned {
				t.Fatalf("thread reply = %+v", m)
			}
		})
	}
}

func TestFiltering(t *testing.T) {
	e := start(t, "socket", nil)
	ts := e.f.UserMessage("U1", "D1", "", "hello in private")
	if m := e.next(t); m.ID != ts || !m.Direct || m.Mentioned || m.Thread.Channel != "D1" {
		t.Fatalf("DM = %+v", m)
	}
	bts := e.f.BotMessage("BOTHER", "C1", "", "alert: disk full")
	if m := e.next(t); m.ID != bts || !m.FromBot {
		t.Fatalf("bot message = %+v", m)
	}
	e.f.EditMessage("C1", bts, "alert: disk fine")
	e.expectOnly(t)
}

func TestRedeliveredEventAnsweredOnce(t *testing.T) {
	e := start(t, "socket", nil)
	e.f.DropAcks(1)
	ts := e.f.UserMessage("U1", "C1", "", "<@UBOT> once")
	if m := e.next(t); m.ID != ts {
		t.Fatalf("got %+v", m)
	}
	e.f.Wait(ctxT(t), "a redelivered, acked envelope", func() bool {
		for _, env := range e.f.Envelopes() {
			if env.RetryAttempt >= 1 && env.RetryReason == "timeout" && env.Acked {
				return true
			}
		}
		return false
	})
	e.expectOnly(t)
}

func TestReconnectLosesNothing(t *testing.T) {
	for _, tt := range []struct {
		name string
		cut  func(f *fakeslack.Server)
	}{
		{"refresh_requested", func(f *fakeslack.Server) { f.Disconnect("refresh_requested") }},
		{"link_disabled", func(f *fakeslack.Server) { f.Disconnect("link_disabled") }},
		{"dropped socket", func(f *fakeslack.Server) { f.DropSockets() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, "socket", nil)
			ctx := ctxT(t)
			root := e.f.UserMessage("U1", "C1", "", "<@UBOT> stream please")
			m := e.next(t)
			id, err := e.a.Post(ctx, m.Thread, bot.Post{Text: "working"})
			if err != nil {
				t.Fatal(err)
			}
			var sent []string
			for i := range 6 {
				if i == 2 {
					tt.cut(e.f)
				}
				// A streamed answer keeps updating while the socket is replaced.
				if err := e.a.Update(ctx, m.Thread, id, bot.Post{Text: fmt.Sprintf("working %d", i)}); err != nil {
					t.Fatal(err)
				}
				sent = append(sent, e.f.UserMessage("U1", "C1", root, fmt.Sprintf("msg %d", i)))
			}
			for _, ts := range sent {
				if got := e.next(t); got.ID != ts {
					t.Fatalf("got %s %q, want %s", got.ID, got.Text, ts)
				}
			}
			e.expectOnly(t)
			if got := e.f.Thread("C1", root)[1].Text; got != "working 5" {
				t.Errorf("streamed post = %q, want the last update", got)
			}
			if n := e.f.Connections(); n < 2 {
				t.Errorf("connections = %d, want a reconnect", n)
			}
			e.f.Wait(ctx, "reconnected", e.a.Connected)
		})
	}
}

func TestRateLimitRetried(t *testing.T) {
	e := start(t, "socket", nil)
	e.f.RateLimitNext("chat.postMessage", time.Second)
	ts := e.f.UserMessage("U1", "C1", "", "<@UBOT> hi")
	m := e.next(t)
	if _, err := e.a.Post(ctxT(t), m.Thread, bot.Post{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	calls := e.f.Calls("chat.postMessage")
	if len(calls) != 2 || calls[0].Status != http.StatusTooManyRequests || calls[1].Status != http.StatusOK {
		t.Fatalf("calls = %+v, want a 429 then a success", calls)
	}
	if th := e.f.Thread("C1", ts); len(th) != 2 {
		t.Fatalf("thread = %+v, want exactly one reply", th)
	}
	if !strings.Contains(e.logs.String(), "rate limited") {
		t.Error("the 429 was not logged")
	}
}

func TestClickRoundTrip(t *testing.T) {
	for _, mode := range []string{"socket", "http"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, mode, func(c bot.Click) bot.ClickResult {
				if c.User.ID != "U1" {
					return bot.ClickResult{Ephemeral: "You are not an approver."}
				}
				return bot.ClickResult{Update: &bot.Post{Text: "`rm -rf /tmp/x` approved by @" + c.User.Name}}
			})
			ctx := ctxT(t)
			root := e.f.UserMessage("U1", "C1", "", "<@UBOT> clean up")
			m := e.next(t)
			id, err := e.a.Post(ctx, m.Thread, bot.Post{
				Text:    "Approve?\n```\nrm -rf /tmp/x\n```\nReason: **cleanup**",
				Buttons: []bot.Button{{ID: "approve", Label: "Approve", Style: "primary"}, {ID: "deny", Label: "Deny", Style: "danger"}},
				Value:   "req-1",
			})
			if err != nil {
				t.Fatal(err)
			}
			msg := e.f.Thread("C1", root)[1]
			btns := msg.Buttons()
			if len(btns) != 2 || btns[0].Style != "primary" || btns[1].Style != "danger" || btns[0].Label != "Approve" {
				t.Fatalf("buttons = %+v", btns)
			}
			if btns[0].Value == "req-1" || !strings.HasPrefix(btns[0].Value, "req-1.") {
				t.Fatalf("button value %q is not signed", btns[0].Value)
			}
			if !strings.Contains(string(msg.Blocks), "```\\nrm -rf /tmp/x\\n```") {
				t.Errorf("blocks lack the command code block: %s", msg.Blocks)
			}

			// Refused by the bot: ephemeral to the clicker, message unchanged.
			e.f.Click("C1", id, "approve", "U2")
			if c := <-e.rec.clicks; c.User.ID != "U2" || c.Value != "req-1" {
				t.Fatalf("click = %+v", c)
			}
			e.f.Wait(ctx, "ephemeral refusal", func() bool { return len(e.f.Ephemerals("U2")) == 1 })
			if ep := e.f.Ephemerals("U2")[0]; ep.Text != "You are not an approver." || ep.ThreadTS != root || ep.Channel != "C1" {
				t.Fatalf("ephemeral = %+v", ep)
			}

			// Forged and moved values never reach the bot.
			e.f.ClickValue("C1", id, "approve", "U1", "req-1")
			e.f.ClickValue("C1", id, "deny", "U1", btns[0].Value)
			e.f.Wait(ctx, "two refusals", func() bool { return len(e.f.Ephemerals("U1")) == 2 })
			for _, ep := range e.f.Ephemerals("U1") {
				if !strings.Contains(ep.Text, "could not be verified") {
					t.Errorf("refusal = %q", ep.Text)
				}
			}

			e.f.Click("C1", id, "approve", "U1")
			c := <-e.rec.clicks
			want := bot.Click{Thread: m.Thread, PostID: id, ActionID: "approve", Value: "req-1", User: bot.User{ID: "U1", Name: "alice"}}
			if c != want {
				t.Fatalf("click = %+v, want %+v", c, want)
			}
			e.f.Wait(ctx, "message updated", func() bool { return e.f.Thread("C1", root)[1].Edited })
			got := e.f.Thread("C1", root)[1]
			if got.Text != "`rm -rf /tmp/x` approved by @alice" || len(got.Buttons()) != 0 {
				t.Fatalf("updated = %+v", got)
			}
			select {
			case c := <-e.rec.clicks:
				t.Fatalf("unexpected click %+v", c)
			default:
			}
		})
	}
}

func TestFileUpload(t *testing.T) {
	e := start(t, "socket", nil)
	root := e.f.UserMessage("U1", "C1", "", "<@UBOT> logs")
	m := e.next(t)
	data := bytes.Repeat([]byte("line of output\n"), 5000)
	if _, err := e.a.Post(ctxT(t), m.Thread, bot.Post{Text: "Full output attached.", File: &bot.File{Name: "output.txt", Data: data}}); err != nil {
		t.Fatal(err)
	}
	files := e.f.Files()
	if len(files) != 1 || files[0].Name != "output.txt" || files[0].Channel != "C1" || files[0].ThreadTS != root || !bytes.Equal(files[0].Data, data) {
		t.Fatalf("files = %+v", files)
	}
	if th := e.f.Thread("C1", root); len(th) != 2 || th[1].Text != "Full output attached." {
		t.Fatalf("thread = %+v", th)
	}
}

func TestIsMember(t *testing.T) {
	e := start(t, "socket", nil)
	var members []string
	for i := range 450 {
		members = append(members, fmt.Sprintf("UM%03d", i))
	}
	e.f.AddChannel("CBIG", "big", members...)
	ctx := ctxT(t)
	for _, tt := range []struct {
		user string
		want bool
	}{{"UM449", true}, {"UM000", true}, {"UBOT", true}, {"UX", false}} {
		got, err := e.a.IsMember(ctx, "CBIG", tt.user)
		if err != nil || got != tt.want {
			t.Errorf("IsMember(CBIG, %s) = %v, %v; want %v", tt.user, got, err, tt.want)
		}
	}
	if n := len(e.f.Calls("conversations.members")); n != 3 {
		t.Errorf("conversations.members calls = %d, want 3 pages fetched once", n)
	}
	if _, err := e.a.IsMember(ctx, "CNONE", "U1"); err == nil {
		t.Error("IsMember of an unknown channel succeeded")
	}
}

func TestHTTPSignature(t *testing.T) {
	e := start(t, "http", nil)
	ctx := ctxT(t)
	body := e.f.MessageEvent("U1", "C1", "", "<@UBOT> signed")
	now := time.Now()
	for _, tt := range []struct {
		name   string
		body   []byte
		secret string
		at     time.Time
		strip  bool
		want   int
	}{
		{"good", body, secret, now, false, http.StatusOK},
		{"bad signature", body, "wrong-secret", now, false, http.StatusUnauthorized},
		{"stale", body, secret, now.Add(-6 * time.Minute), false, http.StatusUnauthorized},
		{"future", body, secret, now.Add(6 * time.Minute), false, http.StatusUnauthorized},
		{"unsigned", body, secret, now, true, http.StatusUnauthorized},
		{"challenge", fakeslack.URLVerification("c-123"), secret, now, false, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := fakeslack.SignedRequest(ctx, e.url+"/slack/events", "application/json", tt.body, tt.secret, tt.at)
			if err != nil {
				t.Fatal(err)
			}
			if tt.strip {
				req.Header.Del("X-Slack-Signature")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status = %d, want %d (%s)", resp.StatusCode, tt.want, got)
			}
			if tt.name == "challenge" && !strings.Contains(string(got), `"challenge":"c-123"`) {
				t.Errorf("challenge answer = %s", got)
			}
		})
	}
	if m := e.next(t); m.Text != "signed" {
		t.Fatalf("got %+v", m)
	}
	e.expectOnly(t) // the refused copies never arrived
	if n := strings.Count(e.logs.String(), "refused request"); n != 4 {
		t.Errorf("logged %d refusals, want 4:\n%s", n, e.logs.String())
	}
}

func TestBadToken(t *testing.T) {
	f := fakeslack.New(t)
	a, err := slack.New(slack.Config{BotToken: "xoxb-wrong", AppToken: fakeslack.AppToken, APIURL: f.APIURL(), Backoff: bot.Backoff{Min: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(ctxT(t), &recorder{})
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("Run = %v, want invalid_auth", err)
	}
	a, _ = slack.New(slack.Config{BotToken: fakeslack.BotToken, AppToken: "xapp-wrong", APIURL: f.APIURL(), Backoff: bot.Backoff{Min: time.Millisecond}})
	if err := a.Run(ctxT(t), &recorder{}); err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("Run with a bad app token = %v, want invalid_auth", err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  slack.Config
	}{
		{"no bot token", slack.Config{AppToken: "xapp"}},
		{"socket without app token", slack.Config{BotToken: "xoxb"}},
		{"http without secret", slack.Config{BotToken: "xoxb", Mode: "http"}},
		{"unknown mode", slack.Config{BotToken: "xoxb", AppToken: "xapp", Mode: "rtm"}},
	} {
		if _, err := slack.New(tt.cfg); err == nil {
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
}

func TestChannelIDByName(t *testing.T) {
	e := start(t, "socket", nil)
	e.f.AddChannel("C7", "incidents", "U1") // the fake makes the bot a member of every channel
	for _, name := range []string{"incidents", "#incidents"} {
		if id, err := e.a.ChannelID(t.Context(), name); err != nil || id != "C7" {
			t.Errorf("ChannelID(%q) = %q, %v; want C7", name, id, err)
		}
	}
	if _, err := e.a.ChannelID(t.Context(), "nope"); err == nil || !strings.Contains(err.Error(), "no channel named") {
		t.Errorf("an unknown channel resolved: %v", err)
	}
}

// Every Web API call has a timeout, even with a configured client that has
// none: a hung chat.postMessage returns an error instead of hanging.
func TestHungCallTimesOut(t *testing.T) {
	f := fakeslack.New(t)
	f.AddUser("UALICE", "alice")
	f.AddChannel("C1", "ops", "UALICE")
	f.HangMethod("chat.postMessage", true)
	a, err := slack.New(slack.Config{BotToken: fakeslack.BotToken, AppToken: fakeslack.AppToken, APIURL: f.APIURL(),
		HTTPClient: &http.Client{}, CallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Post(context.Background(), bot.Thread{Platform: slack.Platform, Channel: "C1"}, bot.Post{Text: "hello"})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a hung chat.postMessage succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a hung chat.postMessage hung the caller")
	}
}

// ThreadLink is the thread's permalink in the workspace auth.test named,
// as Slack writes them (the storm summary's links).
func TestThreadLink(t *testing.T) {
	e := start(t, "socket", nil)
	got := e.a.ThreadLink(bot.Thread{Platform: "slack", Channel: "C1", Root: "1700000000.000100"})
	if want := "https://fake.slack.com/archives/C1/p1700000000000100"; got != want {
		t.Errorf("ThreadLink = %q, want %q", got, want)
	}
	if got := e.a.ThreadLink(bot.Thread{Platform: "slack", Channel: "C1"}); got != "" {
		t.Errorf("ThreadLink of a channel = %q, want none", got)
	}
}
