package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemattermost"
	"github.com/thinbot/thinbot/tests/fakemodel"
	"github.com/thinbot/thinbot/tests/fakeslack"
)

// This file is the rig of the `thinbot serve` end-to-end tests: a chat fake
// behind one small interface (so that one scenario runs against Mattermost
// and Slack alike), a config written into t.TempDir(), and the thinbot
// binary as a real process.

// waitTimeout bounds every wait for a condition; waits poll every waitTick.
const (
	waitTimeout = 20 * time.Second
	waitTick    = 20 * time.Millisecond
)

// Chat users of every scenario: alice asks, bob approves, carol watches.
// alice is an approver too, so that the two-person rule is what refuses her.
// mallory renamed her account to "bob": approvers are ids, so she is no
// approver.
var chatUsers = []string{"alice", "bob", "carol"}

// malloryName is mallory's user name on the platform: an approver's.
const malloryName = "bob"

// chatPost is one of the bot's posts in a thread, as the chat shows it now.
type chatPost struct {
	ID      string
	Text    string
	Buttons []string // action ids
}

// chatSide is a chat fake as the scenarios drive it. Users are named by
// their user names (alice, bob, carol).
type chatSide interface {
	// Platform is the config's platform value.
	Platform() string
	// Config writes the secrets into dir (mode 0600) and returns the
	// config's platform section for a thinbot listening on addr.
	Config(t *testing.T, dir, addr string) string
	// UserID is the platform's id of a scenario user (approvers are ids).
	UserID(user string) string
	// Lobby is a channel the bot is in that the config does not list;
	// DM is the direct-message channel of the bot and user.
	Lobby() string
	DM(user string) string
	// Files are the contents of the files the bot attached in a thread,
	// in order.
	Files(channel, root string) [][]byte
	// Ops is the channel with approvers; Sandbox is an allow_all channel.
	Ops() string
	Sandbox() string
	// Mention posts "@thinbot text" as user (in thread root unless it is
	// "") and returns the message id, which is the thread root of a
	// top-level post.
	Mention(user, channel, root, text string) string
	// Say posts text without a mention.
	Say(user, channel, root, text string) string
	// BotPosts are the bot's posts in a thread, in order.
	BotPosts(channel, root string) []chatPost
	// Click presses a button of the bot's post as user.
	Click(t *testing.T, channel, root, postID, action, user string)
	// KeepButton remembers a button so that it can still be pressed after
	// the post lost it (a stale client, a replayed click); the returned
	// press sends the click and returns what the clicker was shown.
	KeepButton(t *testing.T, channel, root, postID, action string) func(t *testing.T, user string) string
	// CopyButton is KeepButton for a click that names the post onto instead
	// of the button's own (a button copied into another message, a forged
	// callback).
	CopyButton(t *testing.T, channel, root, postID, action, onto string) func(t *testing.T, user string) string
	// Ephemerals are the texts shown to user alone, oldest first.
	Ephemerals(user string) []string
	// Connected reports whether thinbot holds an event connection.
	Connected() bool
	// CutConnection drops the event connection abruptly and keeps new
	// ones out (where the fake can) until Restore.
	CutConnection()
	Restore()
	// Dump describes the channels for a failure message.
	Dump() string
}

// ---- Mattermost ----

type mmChat struct {
	s       *fakemattermost.Server
	ids     map[string]string // user name -> id
	ops     string
	sandbox string
	lobby   string
}

func newMMChat(t *testing.T) chatSide {
	s := fakemattermost.New(t)
	c := &mmChat{s: s, ids: map[string]string{}}
	members := []string{s.Bot.ID}
	for _, name := range chatUsers {
		u := s.AddUser(name)
		c.ids[name] = u.ID
		members = append(members, u.ID)
	}
	mallory := s.AddUser(malloryName)
	c.ids["mallory"] = mallory.ID
	members = append(members, mallory.ID)
	c.ops = s.AddChannel("ops", members...)
	c.sandbox = s.AddChannel("sandbox", members...)
	c.lobby = s.AddChannel("lobby", members...)
	return c
}

func (c *mmChat) Lobby() string         { return c.lobby }
func (c *mmChat) DM(user string) string { return c.s.DirectChannel(c.ids[user]) }

func (c *mmChat) Files(_, root string) [][]byte {
	var out [][]byte
	for _, p := range c.s.Thread(root) {
		if p.UserID != c.s.Bot.ID {
			continue
		}
		for _, f := range p.Files {
			out = append(out, f.Data)
		}
	}
	return out
}

func (c *mmChat) Platform() string          { return "mattermost" }
func (c *mmChat) UserID(user string) string { return c.ids[user] }
func (c *mmChat) Ops() string               { return c.ops }
func (c *mmChat) Sandbox() string           { return c.sandbox }

func (c *mmChat) Config(t *testing.T, dir, addr string) string {
	tok := writeSecret(t, dir, "mattermost.token", c.s.Bot.Token)
	return fmt.Sprintf("platform: mattermost\nmattermost:\n  url: %s\n  token_file: %s\n  callback_url: http://%s/hooks/mattermost/actions\n",
		c.s.URL, tok, addr)
}

func (c *mmChat) Mention(user, channel, root, text string) string {
	return c.s.UserPost(c.ids[user], channel, root, "@thinbot "+text)
}

func (c *mmChat) Say(user, channel, root, text string) string {
	return c.s.UserPost(c.ids[user], channel, root, text)
}

func (c *mmChat) BotPosts(_, root string) []chatPost {
	var out []chatPost
	for _, p := range c.s.Thread(root) {
		if p.UserID != c.s.Bot.ID {
			continue
		}
		cp := chatPost{ID: p.ID, Text: p.Message}
		for _, a := range p.Attachments {
			for _, act := range a.Actions {
				cp.Buttons = append(cp.Buttons, act.ID)
			}
		}
		out = append(out, cp)
	}
	return out
}

func (c *mmChat) Click(t *testing.T, _, _, postID, action, user string) {
	t.Helper()
	res, err := c.s.Click(t.Context(), postID, action, c.ids[user])
	if err != nil || res.Status != http.StatusOK {
		t.Fatalf("click %s on %s as %s: status %d, %v", action, postID, user, res.Status, err)
	}
}

// KeepButton keeps the button's integration (URL and signed context) and
// later calls it the way Mattermost does, which is what a click on a stale
// client's copy of the post comes down to.
func (c *mmChat) KeepButton(t *testing.T, channel, root, postID, action string) func(*testing.T, string) string {
	t.Helper()
	return c.CopyButton(t, channel, root, postID, action, postID)
}

func (c *mmChat) CopyButton(t *testing.T, _, _, postID, action, onto string) func(*testing.T, string) string {
	t.Helper()
	p, ok := c.s.Post(postID)
	if !ok {
		t.Fatalf("no post %s", postID)
	}
	var act *fakemattermost.Action
	for _, a := range p.Attachments {
		for i := range a.Actions {
			if a.Actions[i].ID == action {
				act = &a.Actions[i]
			}
		}
	}
	if act == nil {
		t.Fatalf("post %s has no button %q", postID, action)
	}
	return func(t *testing.T, user string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{
			"user_id": c.ids[user], "user_name": user, "channel_id": p.ChannelID, "team_id": c.s.TeamID,
			"post_id": onto, "trigger_id": "stale-trigger", "type": "", "context": act.Context,
		})
		resp, err := http.Post(act.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("stale click: %v", err)
		}
		defer resp.Body.Close()
		var ir struct {
			Update        *json.RawMessage `json:"update"`
			EphemeralText string           `json:"ephemeral_text"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&ir); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stale click: status %d, %v", resp.StatusCode, err)
		}
		if ir.Update != nil {
			t.Errorf("a stale click updated the post: %s", *ir.Update)
		}
		return ir.EphemeralText
	}
}

func (c *mmChat) Ephemerals(user string) []string {
	var out []string
	for _, e := range c.s.Ephemerals() {
		if e.UserID == c.ids[user] {
			out = append(out, e.Message)
		}
	}
	return out
}

func (c *mmChat) Connected() bool { return c.s.WebSocketCount() > 0 }

func (c *mmChat) CutConnection() {
	c.s.BlockWebSockets(true)
	c.s.DropWebSockets()
}

func (c *mmChat) Restore() { c.s.BlockWebSockets(false) }

func (c *mmChat) Dump() string {
	var b strings.Builder
	names := map[string]string{c.s.Bot.ID: "thinbot"}
	for n, id := range c.ids {
		names[id] = n
	}
	for _, ch := range []string{c.ops, c.sandbox} {
		for _, p := range c.s.Posts(ch) {
			fmt.Fprintf(&b, "  [%s root=%s] %s: %q\n", p.ID, p.RootID, names[p.UserID], p.Message)
		}
	}
	return b.String()
}

// ---- Slack ----

type slackChat struct {
	f    *fakeslack.Server
	ids  map[string]string
	http string // "" for socket mode, else the signing secret
}

func newSlackChat(t *testing.T) chatSide { return newSlack(t, "") }

// newSlack starts a fake Slack; a non-empty signing secret selects HTTP
// mode (the rig then points the fake's delivery at thinbot).
func newSlack(t *testing.T, signingSecret string) *slackChat {
	f := fakeslack.New(t)
	c := &slackChat{f: f, ids: map[string]string{}, http: signingSecret}
	var members []string
	for _, name := range chatUsers {
		id := "U" + strings.ToUpper(name)
		f.AddUser(id, name)
		c.ids[name] = id
		members = append(members, id)
	}
	f.AddUser("UMALLORY", malloryName)
	c.ids["mallory"] = "UMALLORY"
	members = append(members, "UMALLORY")
	f.AddChannel("COPS", "ops", members...)
	f.AddChannel("CSANDBOX", "sandbox", members...)
	f.AddChannel("CLOBBY", "lobby", members...)
	for _, id := range members {
		f.AddIM("D"+id, id)
	}
	return c
}

func (c *slackChat) Lobby() string         { return "CLOBBY" }
func (c *slackChat) DM(user string) string { return "D" + c.ids[user] }

func (c *slackChat) Files(channel, root string) [][]byte {
	var out [][]byte
	for _, f := range c.f.Files() {
		if f.Channel == channel && f.ThreadTS == root {
			out = append(out, f.Data)
		}
	}
	return out
}

func (c *slackChat) Platform() string          { return "slack" }
func (c *slackChat) UserID(user string) string { return c.ids[user] }
func (c *slackChat) Ops() string               { return "COPS" }
func (c *slackChat) Sandbox() string           { return "CSANDBOX" }

func (c *slackChat) Config(t *testing.T, dir, addr string) string {
	bot := writeSecret(t, dir, "slack.bot", fakeslack.BotToken)
	if c.http != "" {
		sec := writeSecret(t, dir, "slack.signing", c.http)
		return fmt.Sprintf("platform: slack\nslack:\n  mode: http\n  bot_token_file: %s\n  signing_secret_file: %s\n  api_url: %s\n",
			bot, sec, c.f.APIURL())
	}
	app := writeSecret(t, dir, "slack.app", fakeslack.AppToken)
	return fmt.Sprintf("platform: slack\nslack:\n  mode: socket\n  bot_token_file: %s\n  app_token_file: %s\n  api_url: %s\n",
		bot, app, c.f.APIURL())
}

func (c *slackChat) Mention(user, channel, root, text string) string {
	return c.f.UserMessage(c.ids[user], channel, root, "<@"+fakeslack.BotUserID+"> "+text)
}

func (c *slackChat) Say(user, channel, root, text string) string {
	return c.f.UserMessage(c.ids[user], channel, root, text)
}

func (c *slackChat) BotPosts(channel, root string) []chatPost {
	var out []chatPost
	for _, m := range c.f.Thread(channel, root) {
		if m.User != fakeslack.BotUserID {
			continue
		}
		cp := chatPost{ID: m.TS, Text: m.Text}
		for _, b := range m.Buttons() {
			cp.Buttons = append(cp.Buttons, b.ActionID)
		}
		out = append(out, cp)
	}
	return out
}

func (c *slackChat) Click(t *testing.T, channel, _, postID, action, user string) {
	t.Helper()
	c.f.Click(channel, postID, action, c.ids[user])
}

func (c *slackChat) KeepButton(t *testing.T, channel, root, postID, action string) func(*testing.T, string) string {
	t.Helper()
	return c.CopyButton(t, channel, root, postID, action, postID)
}

func (c *slackChat) CopyButton(t *testing.T, channel, _, postID, action, onto string) func(*testing.T, string) string {
	t.Helper()
	var value string
	found := false
	for _, m := range c.f.Thread(channel, postID) {
		if m.TS != postID {
			continue
		}
		for _, b := range m.Buttons() {
			if b.ActionID == action {
				value, found = b.Value, true
			}
		}
	}
	if !found {
		// The post is a reply, so Thread(channel, postID) may miss it.
		for _, m := range c.f.Messages(channel) {
			if m.TS == postID {
				for _, b := range m.Buttons() {
					if b.ActionID == action {
						value, found = b.Value, true
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("message %s has no button %q", postID, action)
	}
	return func(t *testing.T, user string) string {
		t.Helper()
		before := len(c.Ephemerals(user))
		c.f.ClickValue(channel, onto, action, c.ids[user], value)
		var got string
		waitUntil(t, "the clicker is answered", func() bool {
			e := c.Ephemerals(user)
			if len(e) > before {
				got = e[before]
				return true
			}
			return false
		})
		return got
	}
}

func (c *slackChat) Ephemerals(user string) []string {
	var out []string
	for _, e := range c.f.Ephemerals(c.ids[user]) {
		out = append(out, e.Text)
	}
	return out
}

func (c *slackChat) Connected() bool {
	if c.http != "" {
		return true // HTTP mode has no connection; /healthz is the sign of life
	}
	return c.f.Connected()
}

// CutConnection drops the sockets. Slack offers no way to keep thinbot from
// reconnecting, and needs none: events wait for the next socket. The ack of
// the next envelope is lost as well, so that one is delivered again.
func (c *slackChat) CutConnection() {
	c.f.DropAcks(1)
	c.f.DropSockets()
}
func (c *slackChat) Restore() {}

func (c *slackChat) Dump() string {
	var b strings.Builder
	names := map[string]string{fakeslack.BotUserID: "thinbot"}
	for n, id := range c.ids {
		names[id] = n
	}
	for _, ch := range []string{"COPS", "CSANDBOX"} {
		for _, m := range c.f.Messages(ch) {
			fmt.Fprintf(&b, "  [%s %s thread=%s] %s: %q buttons=%d\n", ch, m.TS, m.ThreadTS, names[m.User], m.Text, len(m.Buttons()))
		}
	}
	for _, e := range c.f.Envelopes() {
		fmt.Fprintf(&b, "  envelope %s %s attempt=%d acked=%v\n", e.ID, e.Type, e.RetryAttempt, e.Acked)
	}
	return b.String()
}

// ---- the thinbot process ----

// rigOpts are the knobs of a rig's config.
type rigOpts struct {
	// ApprovalTimeout is approval_timeout; "" means 5m.
	ApprovalTimeout string
	// Extra is appended to the config verbatim.
	Extra string
	// Addr is the listen address; "" means a free port. CallbackAddr is
	// where the chat's callbacks go; "" means Addr.
	Addr, CallbackAddr string
	// ReadyLine is the log message start waits for; "" means "thinbot
	// serving", and then start waits for the chat connection too.
	ReadyLine string
}

// rig is one thinbot serve process with its config, state and chat fake.
type rig struct {
	t        *testing.T
	chat     chatSide
	dir      string
	addr     string
	cfgPath  string
	stateDir string
	ws       string // the ops channel's workspace
	sandbox  string // the sandbox channel's workspace
	log      *logBuffer
	proc     *proc
	hc       *http.Client
	ready    string // rigOpts.ReadyLine
	from     int    // where the current process's output starts in log
	startErr string // why startQuiet failed
}

// proc is a started thinbot process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	code int // valid after done
}

// logBuffer collects the process's output; it may be written and read
// concurrently, and awaited (grew).
type logBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	next chan struct{} // closed by the next Write
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next != nil {
		close(l.next)
		l.next = nil
	}
	return l.b.Write(p)
}

// grew returns a channel that is closed when the next output arrives.
func (l *logBuffer) grew() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next == nil {
		l.next = make(chan struct{})
	}
	return l.next
}

// Len is how much output there is so far.
func (l *logBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeSecret writes a credentials file with mode 0600.
func writeSecret(t *testing.T, dir, name, value string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// newRig writes a config for chat and the model at modelURL and starts
// thinbot serve with it; it returns once thinbot answers /healthz and holds
// its chat connection. The process is killed at cleanup if still running.
func newRig(t *testing.T, chat chatSide, modelURL string, o rigOpts) *rig {
	t.Helper()
	r := newRigNoStart(t, chat, modelURL, o)
	r.start()
	return r
}

// newRigNoStart is newRig without the start.
func newRigNoStart(t *testing.T, chat chatSide, modelURL string, o rigOpts) *rig {
	t.Helper()
	dir := t.TempDir()
	if o.Addr == "" {
		o.Addr = freeAddr(t)
	}
	if o.CallbackAddr == "" {
		o.CallbackAddr = o.Addr
	}
	r := &rig{t: t, chat: chat, dir: dir, addr: o.Addr, stateDir: filepath.Join(dir, "state"),
		ws: filepath.Join(dir, "ws"), sandbox: filepath.Join(dir, "sandbox"), log: &logBuffer{},
		hc: &http.Client{Timeout: 10 * time.Second}, ready: o.ReadyLine}
	for _, d := range []string{r.ws, r.sandbox} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if o.ApprovalTimeout == "" {
		o.ApprovalTimeout = "5m"
	}
	// systemd_unit names no unit: a thinbot.service installed on this
	// machine (the release test's package, for a moment) is not this
	// daemon's, and its User= must not judge the rig's secret files.
	cfg := chat.Config(t, dir, o.CallbackAddr) + fmt.Sprintf(`model:
  base_url: %s
  model: test-model
  max_retries: 0
listen: %s
state_dir: %s
approval_timeout: %s
log_level: debug
systemd_unit: thinbot-e2e-test.service
channels:
  - id: %s
    workspace: %s
    approvers: [%s, %s]
    two_person_rule: true
  - id: %s
    workspace: %s
    allow_all: true
`, modelURL, r.addr, r.stateDir, o.ApprovalTimeout, chat.Ops(), r.ws, chat.UserID("alice"), chat.UserID("bob"),
		chat.Sandbox(), r.sandbox) + o.Extra
	r.cfgPath = filepath.Join(dir, "thinbot.yaml")
	if err := os.WriteFile(r.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.proc != nil && !r.exited() {
			r.proc.cmd.Process.Kill()
			<-r.proc.done
		}
		if t.Failed() {
			t.Logf("thinbot output:\n%s", tail(r.log.String(), 6000))
		}
	})
	return r
}

// start runs thinbot serve and waits until it is serving and connected.
func (r *rig) start() {
	r.t.Helper()
	cmd := exec.Command(thinbotBin, "serve", "--config", r.cfgPath)
	cmd.Dir = r.dir
	cmd.Env = baseEnv()
	cmd.Stdout, cmd.Stderr = r.log, r.log
	from := r.log.Len() // a restart logs after the first run's lines
	r.from = from
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start thinbot serve: %v", err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		if err != nil && p.code == 0 {
			p.code = -1
		}
		close(p.done)
	}()
	r.proc = p
	ready := `"msg":"thinbot serving"`
	if r.ready != "" {
		ready = `"msg":"` + r.ready + `"`
	}
	waitLogged(r.t, "thinbot serve", r.log, from, ready, p.done)
	if code, body := r.get("/healthz"); code != http.StatusOK {
		r.t.Fatalf("thinbot logged that it serves, and /healthz answers %d %q", code, body)
	}
	if r.ready != "" {
		return
	}
	r.waitUntil(startDeadline(r.t), "thinbot to connect to "+r.chat.Platform(), r.chat.Connected)
}

// startDeadline bounds a wait for a process to start: the test's own
// deadline (go test -timeout), less a share of what is left for the
// failure to be reported, or ten minutes without one. A start is waited
// for, not guessed at: on a loaded machine a daemon built with -race
// takes its time, and a fixed bound fails tests that would have passed.
func startDeadline(t *testing.T) time.Time {
	d, ok := t.Deadline()
	if !ok {
		return time.Now().Add(10 * time.Minute)
	}
	return d.Add(-min(time.Minute, time.Until(d)/10))
}

// waitLogged waits until log has a line containing want after its first
// from bytes: the line a process writes once it is ready, which is an
// event to await rather than a condition to poll. It fails the test when
// the process exits first (done is closed) or startDeadline passes; the
// caller's cleanup logs the process's output.
func waitLogged(t *testing.T, what string, log *logBuffer, from int, want string, done <-chan struct{}) {
	t.Helper()
	timer := time.NewTimer(time.Until(startDeadline(t)))
	defer timer.Stop()
	for {
		grew := log.grew()
		if strings.Contains(log.String()[from:], want) {
			return
		}
		select {
		case <-grew:
		case <-done:
			if strings.Contains(log.String()[from:], want) {
				return
			}
			t.Fatalf("%s exited before it logged %s (its output follows at cleanup)", what, want)
		case <-timer.C:
			t.Fatalf("%s did not log %s by the test's deadline (its output follows at cleanup)", what, want)
		}
	}
}

func (r *rig) exited() bool {
	select {
	case <-r.proc.done:
		return true
	default:
		return false
	}
}

// get fetches a path from thinbot's listener; code 0 means no answer.
func (r *rig) get(path string) (int, string) {
	resp, err := r.hc.Get("http://" + r.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls cond until it holds, failing the test after waitTimeout or
// when thinbot exits while cond does not hold.
func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	r.waitUntil(time.Now().Add(waitTimeout), what, cond)
}

// waitUntil is waitFor with a deadline of its own.
func (r *rig) waitUntil(deadline time.Time, what string, cond func() bool) {
	r.t.Helper()
	tick := time.NewTicker(waitTick)
	defer tick.Stop()
	for !cond() {
		if r.exited() {
			if cond() {
				return
			}
			r.t.Fatalf("thinbot exited (code %d) while waiting for %s\nchat:\n%s", r.proc.code, what, r.chat.Dump())
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s\nchat:\n%s", what, r.chat.Dump())
		}
		<-tick.C
	}
}

// waitUntil is waitFor without a process to watch.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUntilBy(t, time.Now().Add(waitTimeout), what, cond)
}

// waitUntilBy is waitUntil with a deadline of its own.
func waitUntilBy(t *testing.T, deadline time.Time, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(waitTick)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waitPost waits for a bot post in the thread whose text contains want and
// returns it.
func (r *rig) waitPost(channel, root, want string) chatPost {
	r.t.Helper()
	var found chatPost
	r.waitFor(fmt.Sprintf("a post containing %q in thread %s", want, root), func() bool {
		for _, p := range r.chat.BotPosts(channel, root) {
			if strings.Contains(p.Text, want) {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// waitButtons waits for a bot post with buttons in the thread.
func (r *rig) waitButtons(channel, root string) chatPost {
	r.t.Helper()
	var found chatPost
	r.waitFor("an approval request with buttons in thread "+root, func() bool {
		for _, p := range r.chat.BotPosts(channel, root) {
			if len(p.Buttons) > 0 {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// post returns the bot's post id as it is now.
func (r *rig) post(channel, root, id string) chatPost {
	r.t.Helper()
	for _, p := range r.chat.BotPosts(channel, root) {
		if p.ID == id {
			return p
		}
	}
	r.t.Fatalf("post %s is gone from thread %s", id, root)
	return chatPost{}
}

// countPosts counts the bot's posts in the thread containing want.
func (r *rig) countPosts(channel, root, want string) int {
	n := 0
	for _, p := range r.chat.BotPosts(channel, root) {
		if strings.Contains(p.Text, want) {
			n++
		}
	}
	return n
}

// waitEphemeral waits until user was shown more than n ephemeral texts and
// returns the (n+1)th.
func (r *rig) waitEphemeral(user string, n int) string {
	r.t.Helper()
	var got string
	r.waitFor(fmt.Sprintf("ephemeral message %d for %s", n+1, user), func() bool {
		e := r.chat.Ephemerals(user)
		if len(e) > n {
			got = e[n]
			return true
		}
		return false
	})
	return got
}

// waitRecorded waits until the chain's JSONL export, which thinbot writes
// as events commit, has an event of the session whose line contains each
// of want. It is how a test knows that something is on the record before
// it kills the process or races a click against it.
func (r *rig) waitRecorded(session string, want ...string) {
	r.t.Helper()
	r.waitFor(fmt.Sprintf("the chain to record %q in %s", want, session), func() bool {
		b, err := os.ReadFile(filepath.Join(r.stateDir, "audit.jsonl"))
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(b), "\n") {
			var ev struct {
				Session string `json:"session"`
			}
			if json.Unmarshal([]byte(line), &ev) != nil || ev.Session != session {
				continue
			}
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return true
			}
		}
		return false
	})
}

// signal sends sig and waits for the process to exit, returning its code.
func (r *rig) signal(sig syscall.Signal) int {
	r.t.Helper()
	if err := r.proc.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal thinbot: %v", err)
	}
	select {
	case <-r.proc.done:
	case <-time.After(30 * time.Second):
		r.proc.cmd.Process.Kill()
		<-r.proc.done
		r.t.Fatalf("thinbot did not exit within 30s of %v", sig)
	}
	return r.proc.code
}

// stop ends thinbot with SIGTERM, expects a clean exit (code 0), and
// verifies the chain and its JSONL export.
func (r *rig) stop() {
	r.t.Helper()
	if code := r.signal(syscall.SIGTERM); code != 0 {
		r.t.Fatalf("thinbot exited with code %d after SIGTERM", code)
	}
	if !strings.Contains(r.log.String(), `"msg":"thinbot stopped"`) {
		r.t.Errorf("thinbot did not log its clean stop")
	}
	verifyState(r.t, r.stateDir)
	verifyChain(r.t, filepath.Join(r.stateDir, "events.db"))
}

// session is the session id of a thread.
func (r *rig) session(channel, root string) string {
	return r.chat.Platform() + "/" + channel + "/" + root
}

// verifyState checks the chain in stateDir: every hash link in the store,
// the session index, and the JSONL export against the store.
func verifyState(t *testing.T, stateDir string) {
	t.Helper()
	db, err := store.Open(filepath.Join(stateDir, "events.db"), &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	defer db.Close()
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK {
		t.Fatalf("verify the chain: %+v, %v", rep, err)
	}
	arep, err := db.VerifyJournal(t.Context(), store.Report{})
	if err != nil || !arep.OK || arep.Beyond != 0 {
		t.Fatalf("verify the audit export: %+v, %v", arep, err)
	}
	if rep.Events == 0 {
		t.Fatal("the chain is empty")
	}
}

// chainEvents reads every event of the (stopped) thinbot's chain.
func chainEvents(t *testing.T, stateDir string) []store.Event {
	t.Helper()
	db, err := store.Open(filepath.Join(stateDir, "events.db"), &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	defer db.Close()
	var out []store.Event
	for ev, err := range db.All(1) {
		if err != nil {
			t.Fatalf("read the chain: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

// trail renders a session's decisive events, one short string each:
// "gate_decision:confirm", "note:click_refused:user:carol",
// "approval_decision:true:user:bob", "tool_result", "run_finished:answered".
func trail(evs []store.Event, session string) []string {
	var out []string
	for _, ev := range evs {
		if ev.Session != session {
			continue
		}
		var p struct {
			Verdict  string `json:"verdict"`
			Kind     string `json:"kind"`
			User     string `json:"user"`
			Approved bool   `json:"approved"`
			By       string `json:"by"`
			Status   string `json:"status"`
		}
		json.Unmarshal(ev.Payload, &p)
		switch ev.Type {
		case "gate_decision":
			out = append(out, "gate_decision:"+p.Verdict)
		case "approval_requested", "tool_result", "run_started":
			out = append(out, ev.Type)
		case "approval_decision":
			out = append(out, "approval_decision:"+strconv.FormatBool(p.Approved)+":"+p.By)
		case "note":
			out = append(out, "note:"+p.Kind+":"+ev.Actor)
		case "run_finished":
			out = append(out, "run_finished:"+p.Status)
		}
	}
	return out
}

// modelFunc starts a function-driven fake model that the test owns: it is
// closed at cleanup and the test fails on anything unexpected it saw.
func modelFunc(t *testing.T, f func(fakemodel.Request) fakemodel.Reply) *fakemodel.Server {
	t.Helper()
	m := fakemodel.NewFunc(f)
	t.Cleanup(func() {
		m.Close()
		if err := m.Err(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// lastUser is the text of the newest user message of a model request.
func lastUser(r fakemodel.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// answerer answers each user message with "ANSWER(<text>)", after the gate
// in hold (if any) opens.
type answerer struct {
	hold chan struct{}
}

func (a *answerer) reply(req fakemodel.Request) fakemodel.Reply {
	if a.hold != nil {
		select {
		case <-a.hold:
		case <-time.After(waitTimeout):
		}
	}
	return fakemodel.Reply{Content: "ANSWER(" + lastUser(req) + ")"}
}

// processGroupAlive reports whether a process of group pgid is alive (not
// a zombie), from /proc.
func processGroupAlive(t *testing.T, pgid int) bool {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// postJSON sends a signed or unsigned body to thinbot and returns the status.
func postTo(ctx context.Context, t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
