// Package fakeslack is a fake Slack for tests: an httptest server on
// 127.0.0.1 that speaks the Web API methods thinbot uses (form and JSON
// bodies, ok:false errors, injected 429s with Retry-After and injected
// error codes, chat.startStream/appendStream/stopStream), the Socket Mode
// WebSocket protocol (hello, envelopes, acks, redelivery of unacked
// envelopes with retry_attempt and retry_reason, disconnect, dropped
// sockets) and, as an alternative, HTTP-mode delivery of signed Events API
// and interactivity requests to an adapter's handler.
//
// A call to an unknown method answers ok:false unknown_method and fails the
// test. All methods may be called concurrently.
package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Identity of the fake workspace and its bot.
const (
	BotToken  = "xoxb-fake-bot-token"
	AppToken  = "xapp-fake-app-token"
	BotUserID = "UBOT"
	BotID     = "BBOT"
	TeamID    = "TFAKE"
	AppID     = "AFAKE"
)

// Message is a message stored in a channel.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // "" for a top-level message
	User     string
	BotID    string
	Subtype  string
	Text     string
	Blocks   json.RawMessage // as posted; nil without blocks
	// Metadata is the message metadata (event_type, event_payload) as
	// posted; nil without. conversations.history answers it only with
	// include_all_metadata.
	Metadata json.RawMessage
	Edited   bool
	// Streaming is true from chat.startStream until chat.stopStream; Text
	// is then the Markdown streamed so far.
	Streaming bool
	// Streamed reports that the message was made by chat.startStream.
	Streamed bool
	// Recipient is the recipient_user_id of a streamed message.
	Recipient string
}

// Button is a button found in a message's actions blocks.
type Button struct {
	ActionID, Label, Style, Value string
}

// Buttons returns the buttons of m's actions blocks.
func (m Message) Buttons() []Button {
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Style    string `json:"style"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	_ = json.Unmarshal(m.Blocks, &blocks)
	var out []Button
	for _, b := range blocks {
		if b.Type != "actions" {
			continue
		}
		for _, e := range b.Elements {
			if e.Type == "button" {
				out = append(out, Button{ActionID: e.ActionID, Label: e.Text.Text, Style: e.Style, Value: e.Value})
			}
		}
	}
	return out
}

// Ephemeral is a message shown to one user.
type Ephemeral struct {
	Channel, User, ThreadTS, Text string
}

// File is a completed upload.
type File struct {
	ID, Name, Channel, ThreadTS string
	Data                        []byte
}

// Request is a recorded Web API call.
type Request struct {
	Method string
	Params map[string]string
	Status int // HTTP status answered; 0 for a call left hanging (HangMethod)
}

// Envelope is a recorded Socket Mode envelope delivery.
type Envelope struct {
	ID           string
	Type         string
	RetryAttempt int
	RetryReason  string
	Acked        bool
}

type envelope struct {
	id       string
	typ      string
	payload  json.RawMessage
	attempt  int
	reason   string
	acked    bool
	onConn   *conn
	timer    *time.Timer
	inflight bool
}

type channel struct {
	id       string
	name     string
	im       bool
	members  []string
	messages []*Message
}

type conn struct {
	ws       *websocket.Conn
	send     chan []byte
	closed   chan struct{}
	once     sync.Once
	draining bool
}

func (c *conn) close() { c.once.Do(func() { close(c.closed); c.ws.Close() }) }

type upload struct {
	name string
	size int
	data []byte
}

// Server is a fake Slack. Create it with New; it closes at test cleanup.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	// AckTimeout is how long an envelope may stay unacked before it is
	// redelivered (Slack waits a few seconds). Set it before traffic.
	AckTimeout time.Duration
	// MaxRetries bounds redeliveries of one envelope (Slack: 3).
	MaxRetries int
	// HTTPRetryDelay is how long an HTTP delivery that failed waits before
	// its first retry, doubled for each later one. Slack spaces its
	// retries by minutes (at once, 1 minute, 5 minutes); the fake keeps
	// the spacing, scaled down, so that a receiver that is starting (503
	// until its adapter runs) sees a retry once it runs, as with Slack.
	HTTPRetryDelay time.Duration
	// PingInterval is how often sockets are pinged.
	PingInterval time.Duration

	mu          sync.Mutex
	changed     chan struct{}
	closed      bool
	users       map[string]string // id -> name
	bots        map[string]bool   // user ids of bot users
	channels    map[string]*channel
	ephemerals  []Ephemeral
	files       []File
	uploads     map[string]*upload
	requests    []Request
	envelopes   []*envelope
	pending     []*envelope
	conns       []*conn
	connCount   int
	rateLimit   map[string]int
	failures    map[string]*failure
	hang        map[string]bool
	dropAcks    int
	clock       int64
	nextID      int
	httpTarget  string
	httpSecret  string
	httpKick    chan struct{}
	httpRunning bool
	tickets     map[string]bool
	done        chan struct{}
	wg          sync.WaitGroup
}

// New starts a fake Slack with the bot user and no channels.
func New(t testing.TB) *Server {
	t.Helper()
	f := &Server{
		t:              t,
		AckTimeout:     3 * time.Second,
		MaxRetries:     3,
		PingInterval:   5 * time.Second,
		HTTPRetryDelay: 250 * time.Millisecond,
		changed:        make(chan struct{}),
		users:          map[string]string{BotUserID: "thinbot"},
		bots:           map[string]bool{BotUserID: true},
		channels:       map[string]*channel{},
		uploads:        map[string]*upload{},
		rateLimit:      map[string]int{},
		failures:       map[string]*failure{},
		hang:           map[string]bool{},
		httpKick:       make(chan struct{}, 1),
		tickets:        map[string]bool{},
		done:           make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", f.serveAPI)
	mux.HandleFunc("/upload/{id}", f.serveUpload)
	mux.HandleFunc("/link/", f.serveSocket)
	f.srv = httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(f.Close)
	return f
}

// APIURL is the Web API base URL to configure the adapter with.
func (f *Server) APIURL() string { return f.srv.URL + "/api/" }

// Close drops all sockets and stops the server. It is idempotent.
func (f *Server) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	close(f.done)
	conns := slices.Clone(f.conns)
	for _, e := range f.envelopes {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	f.notifyLocked()
	f.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	f.srv.CloseClientConnections()
	f.srv.Close()
	f.wg.Wait()
}

// notifyLocked wakes Wait callers. f.mu must be held.
func (f *Server) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Wait blocks until cond returns true, re-evaluating it after every change
// of the fake's state (and every 10ms, for conditions on state outside the
// fake such as an adapter's), or fails the test when ctx is done. cond must
// not block; it may call the fake's getters.
func (f *Server) Wait(ctx context.Context, what string, cond func() bool) {
	f.t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			f.t.Fatalf("fakeslack: timed out waiting for %s", what)
		}
	}
}

// AddUser adds a human user.
func (f *Server) AddUser(id, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[id] = name
}

// AddBotUser adds another bot's user.
func (f *Server) AddBotUser(id, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[id] = name
	f.bots[id] = true
}

// AddChannel adds a public channel with the given members; the bot is
// always a member.
func (f *Server) AddChannel(id, name string, members ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[id] = &channel{id: id, name: name, members: append([]string{BotUserID}, members...)}
}

// AddChannelWithoutBot adds a channel the bot has not been invited to.
func (f *Server) AddChannelWithoutBot(id, name string, members ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[id] = &channel{id: id, name: name, members: append([]string(nil), members...)}
}

// AddIM adds a direct-message channel between the bot and user.
func (f *Server) AddIM(id, user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[id] = &channel{id: id, im: true, members: []string{BotUserID, user}}
}

// tsLocked returns a fresh, increasing message ts: as Slack's, the time
// of the message (seconds and microseconds), unique in the workspace.
func (f *Server) tsLocked() string {
	f.clock = max(f.clock+1, time.Now().UnixMicro())
	return fmt.Sprintf("%d.%06d", f.clock/1e6, f.clock%1e6)
}

func (f *Server) idLocked(prefix string) string {
	f.nextID++
	return fmt.Sprintf("%s%06d", prefix, f.nextID)
}

// UserMessage posts text as user into channel (in the thread threadTS
// unless it is "") and returns the new ts. Slack's events follow: a message
// event and, when text mentions <@UBOT>, an app_mention event.
func (f *Server) UserMessage(user, channel, threadTS, text string) string {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.channelLocked(channel)
	m := &Message{Channel: channel, TS: f.tsLocked(), ThreadTS: threadTS, User: user, Text: text}
	ch.messages = append(ch.messages, m)
	f.emitMessageLocked(ch, m)
	if strings.Contains(text, "<@"+BotUserID+">") {
		ev := f.eventLocked(ch, m)
		ev["type"] = "app_mention"
		delete(ev, "channel_type")
		f.enqueueLocked("events_api", f.callbackLocked(ev))
	}
	f.notifyLocked()
	return m.TS
}

// BotMessage posts text as another bot (subtype bot_message) and returns its ts.
func (f *Server) BotMessage(botID, channel, threadTS, text string) string {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.channelLocked(channel)
	m := &Message{Channel: channel, TS: f.tsLocked(), ThreadTS: threadTS, BotID: botID, Subtype: "bot_message", Text: text}
	ch.messages = append(ch.messages, m)
	f.emitMessageLocked(ch, m)
	f.notifyLocked()
	return m.TS
}

// EditMessage changes a message's text and emits message_changed.
func (f *Server) EditMessage(channel, ts, text string) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.channelLocked(channel)
	m := f.findLocked(ch, ts)
	if m == nil {
		f.t.Errorf("fakeslack: EditMessage: no message %s in %s", ts, channel)
		return
	}
	m.Text, m.Edited = text, true
	f.emitChangedLocked(ch, m)
	f.notifyLocked()
}

func (f *Server) channelLocked(id string) *channel {
	f.t.Helper()
	ch, ok := f.channels[id]
	if !ok {
		f.t.Fatalf("fakeslack: no channel %q (call AddChannel)", id)
	}
	return ch
}

func (f *Server) findLocked(ch *channel, ts string) *Message {
	for _, m := range ch.messages {
		if m.TS == ts {
			return m
		}
	}
	return nil
}

func (f *Server) eventLocked(ch *channel, m *Message) map[string]any {
	ev := map[string]any{
		"type": "message", "channel": ch.id, "ts": m.TS, "text": m.Text,
		"event_ts": m.TS, "team": TeamID,
	}
	if m.User != "" {
		ev["user"] = m.User
	}
	if m.BotID != "" {
		ev["bot_id"] = m.BotID
	}
	if m.Subtype != "" {
		ev["subtype"] = m.Subtype
	}
	if m.ThreadTS != "" {
		ev["thread_ts"] = m.ThreadTS
	}
	if ch.im {
		ev["channel_type"] = "im"
	} else {
		ev["channel_type"] = "channel"
	}
	return ev
}

func (f *Server) emitMessageLocked(ch *channel, m *Message) {
	f.enqueueLocked("events_api", f.callbackLocked(f.eventLocked(ch, m)))
}

func (f *Server) emitChangedLocked(ch *channel, m *Message) {
	inner := f.eventLocked(ch, m)
	delete(inner, "channel_type")
	ev := map[string]any{
		"type": "message", "subtype": "message_changed", "channel": ch.id, "hidden": true,
		"ts": f.tsLocked(), "message": inner, "channel_type": "channel",
	}
	f.enqueueLocked("events_api", f.callbackLocked(ev))
}

func (f *Server) callbackLocked(ev map[string]any) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"token": "legacy-verification-token", "team_id": TeamID, "api_app_id": AppID,
		"event": ev, "type": "event_callback", "event_id": f.idLocked("Ev"),
		"event_time": f.clock / 1e6, "authorizations": []map[string]any{{"team_id": TeamID, "user_id": BotUserID, "is_bot": true}},
	})
	return b
}

// Click presses the button actionID of message ts as user, sending the
// value the message carries, and fails the test when there is no such
// button.
func (f *Server) Click(channel, ts, actionID, user string) {
	f.t.Helper()
	f.mu.Lock()
	ch := f.channelLocked(channel)
	m := f.findLocked(ch, ts)
	f.mu.Unlock()
	if m == nil {
		f.t.Fatalf("fakeslack: Click: no message %s in %s", ts, channel)
	}
	for _, b := range m.Buttons() {
		if b.ActionID == actionID {
			f.ClickValue(channel, ts, actionID, user, b.Value)
			return
		}
	}
	f.t.Fatalf("fakeslack: Click: message %s has no button %q", ts, actionID)
}

// ClickValue sends a block_actions interaction for message ts with an
// arbitrary value, as a forged or replayed click would.
func (f *Server) ClickValue(channel, ts, actionID, user, value string) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.channelLocked(channel)
	m := f.findLocked(ch, ts)
	if m == nil {
		f.t.Fatalf("fakeslack: ClickValue: no message %s in %s", ts, channel)
	}
	msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": m.User, "bot_id": m.BotID}
	if m.ThreadTS != "" {
		msg["thread_ts"] = m.ThreadTS
	}
	if m.Blocks != nil {
		msg["blocks"] = m.Blocks
	}
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": channel, "is_ephemeral": false}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	payload, _ := json.Marshal(map[string]any{
		"type":       "block_actions",
		"user":       map[string]any{"id": user, "username": f.users[user], "name": f.users[user], "team_id": TeamID},
		"api_app_id": AppID, "token": "legacy-verification-token",
		"container":    container,
		"trigger_id":   f.idLocked("trig."),
		"team":         map[string]any{"id": TeamID},
		"channel":      map[string]any{"id": channel, "name": ch.name},
		"message":      msg,
		"response_url": f.srv.URL + "/response/" + f.idLocked("R"),
		"actions": []map[string]any{{
			"action_id": actionID, "block_id": "thinbot_actions", "type": "button", "value": value,
			"action_ts": f.tsLocked(), "text": map[string]any{"type": "plain_text", "text": actionID},
		}},
	})
	f.enqueueLocked("interactive", payload)
	f.notifyLocked()
}

// Messages returns the messages of channel in order.
func (f *Server) Messages(channel string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.channels[channel]
	if !ok {
		return nil
	}
	out := make([]Message, len(ch.messages))
	for i, m := range ch.messages {
		out[i] = *m
	}
	return out
}

// Thread returns the root message ts of channel and its replies, in order.
func (f *Server) Thread(channel, ts string) []Message {
	var out []Message
	for _, m := range f.Messages(channel) {
		if m.TS == ts || m.ThreadTS == ts {
			out = append(out, m)
		}
	}
	return out
}

// Ephemerals returns the ephemeral messages shown to user.
func (f *Server) Ephemerals(user string) []Ephemeral {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Ephemeral
	for _, e := range f.ephemerals {
		if e.User == user {
			out = append(out, e)
		}
	}
	return out
}

// Files returns the completed uploads.
func (f *Server) Files() []File {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.files)
}

// Requests returns the Web API calls made so far.
func (f *Server) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// Calls returns the recorded calls of one method.
func (f *Server) Calls(method string) []Request {
	var out []Request
	for _, r := range f.Requests() {
		if r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// Envelopes returns the Socket Mode envelope deliveries so far, one entry
// per envelope with its latest attempt.
func (f *Server) Envelopes() []Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Envelope, len(f.envelopes))
	for i, e := range f.envelopes {
		out[i] = Envelope{ID: e.id, Type: e.typ, RetryAttempt: e.attempt, RetryReason: e.reason, Acked: e.acked}
	}
	return out
}

// Connections returns how many sockets have been opened so far.
func (f *Server) Connections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connCount
}

// Connected reports whether a socket that has not been told to disconnect
// is open.
func (f *Server) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.activeLocked() != nil
}

// RateLimitNext makes the next call of method answer 429 with Retry-After.
func (f *Server) RateLimitNext(method string, retryAfter time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rateLimit[method] = int(retryAfter.Round(time.Second) / time.Second)
}

// failure is an injected ok:false answer of a method.
type failure struct {
	code string
	n    int // calls left; < 0 means every call
}

// FailMethod makes the next n calls of method answer ok:false with the
// error code (n < 0: every call, until FailMethod(method, "", 0)). Slack
// answers streaming methods so in workspaces that cannot stream
// ("not_allowed", "unknown_method", "missing_scope").
func (f *Server) FailMethod(method, code string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if code == "" || n == 0 {
		delete(f.failures, method)
		return
	}
	f.failures[method] = &failure{code: code, n: n}
}

// HangMethod makes every call of method hang (no answer) until the caller
// gives up or the fake closes, as a Slack edge stuck mid-request does; a
// false hang answers again.
func (f *Server) HangMethod(method string, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hang[method] = hang
}

// DropAcks makes the fake lose the next n envelope acks; each of those
// envelopes is redelivered (retry_reason "timeout", as Slack does once its
// ack timeout passed) as soon as its lost ack arrives, without waiting for
// AckTimeout.
func (f *Server) DropAcks(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dropAcks += n
}

// Disconnect sends a disconnect message (reason "refresh_requested",
// "link_disabled" or "warning") on every open socket. Those sockets get no
// further envelopes; the client is expected to open a new one.
func (f *Server) Disconnect(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	msg, _ := json.Marshal(map[string]any{"type": "disconnect", "reason": reason, "debug_info": map[string]any{"host": "fakeslack"}})
	for _, c := range f.conns {
		if c.draining {
			continue
		}
		c.draining = true
		select {
		case c.send <- msg:
		default:
		}
	}
	f.notifyLocked()
}

// DropSockets closes every open socket abruptly, without a close frame.
// Unacked envelopes are redelivered on the next socket.
func (f *Server) DropSockets() {
	f.mu.Lock()
	conns := slices.Clone(f.conns)
	f.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}
