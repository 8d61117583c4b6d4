package mattermost

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mattermost/mattermost/server/public/model"
)

func TestStripMention(t *testing.T) {
	tests := []struct {
		text, want string
		found      bool
	}{
		{"@thinbot df -h", "df -h", true},
		{"@thinbot: df -h", "df -h", true},
		{"hey @ThinBot, look", "hey look", true},
		{"@thinbot", "", true},
		{"ask @thinbot.", "ask .", true},
		{"@thinbotx hi", "@thinbotx hi", false},
		{"@thinbot.dev hi", "@thinbot.dev hi", false},
		{"mail me@thinbot now", "mail me@thinbot now", false},
		{"  plain  ", "plain", false},
		{"@thinbot a @thinbot b", "a b", true},
	}
	for _, tt := range tests {
		got, found := stripMention(tt.text, "thinbot")
		if got != tt.want || found != tt.found {
			t.Errorf("stripMention(%q) = %q, %v; want %q, %v", tt.text, got, found, tt.want, tt.found)
		}
	}
}

func TestFitText(t *testing.T) {
	short := strings.Repeat("a", maxPostRunes)
	if got, cut := fitText(short, truncatedNotice); cut || got != short {
		t.Errorf("a text at the limit was cut")
	}
	long := strings.Repeat("日本", maxPostRunes)
	got, cut := fitText(long, truncatedNotice)
	if !cut || utf8.RuneCountInString(got) != maxPostRunes || !utf8.ValidString(got) || !strings.HasSuffix(got, truncatedNotice) {
		t.Errorf("long text: cut=%v runes=%d", cut, utf8.RuneCountInString(got))
	}
}

func TestRetryDelay(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, time.Second},
		{"retry-after", http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"retry-after date", http.Header{"Retry-After": {now.Add(5 * time.Second).Format(http.TimeFormat)}}, 5 * time.Second},
		{"reset seconds", http.Header{"X-Ratelimit-Reset": {"2"}}, 2 * time.Second},
		{"reset unix", http.Header{"X-Ratelimit-Reset": {"1735689607"}}, 7 * time.Second},
		{"retry-after wins", http.Header{"Retry-After": {"1"}, "X-Ratelimit-Reset": {"9"}}, time.Second},
		{"garbage", http.Header{"Retry-After": {"soon"}}, time.Second},
		{"huge", http.Header{"Retry-After": {"99999999999999"}}, maxDelaySeconds * time.Second},
	}
	for _, tt := range tests {
		if got := retryDelay(tt.h, now); got != tt.want {
			t.Errorf("%s: retryDelay = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestActionID(t *testing.T) {
	used := map[string]bool{}
	for i, tt := range []struct{ in, want string }{{"approve", "approve"}, {"deny_now", "denynow"}, {"approve", "button2"}, {"--", "button3"}} {
		if got := actionID(tt.in, i, used); got != tt.want {
			t.Errorf("actionID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

var postedSeed = `{"channel_display_name":"ops","channel_name":"ops","channel_type":"O","mentions":"[\"b1\"]","post":"{\"id\":\"p1\",\"create_at\":1700000000000,\"user_id\":\"u1\",\"channel_id\":\"c1\",\"root_id\":\"\",\"message\":\"@thinbot uptime\",\"type\":\"\",\"props\":{}}","sender_name":"@alice","set_online":true,"team_id":"t1"}`

// frame wraps the data of a "posted" event in a WebSocket frame as
// Mattermost sends it.
func frame(data string) []byte {
	return []byte(`{"event":"posted","data":` + data + `,"broadcast":{"omit_users":null,"user_id":"","channel_id":"c1","team_id":"","connection_id":"","omit_connection_id":""},"seq":7}`)
}

// decodeFrame decodes a frame as model.WebSocketClient's reader does: an
// event, else a response to a request.
func decodeFrame(b []byte) (*model.WebSocketEvent, *model.WebSocketResponse, error) {
	ev, err := model.WebSocketEventFromJSON(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	if ev.IsValid() {
		return ev, nil, nil
	}
	var r model.WebSocketResponse
	if err := json.Unmarshal(b, &r); err != nil || !r.IsValid() {
		return nil, nil, errors.New("neither an event nor a response")
	}
	return nil, &r, nil
}

func TestParsePosted(t *testing.T) {
	ev, _, err := decodeFrame(frame(postedSeed))
	if err != nil {
		t.Fatal(err)
	}
	in, err := parsePosted(ev)
	if err != nil {
		t.Fatal(err)
	}
	if ev.EventType() != model.WebsocketEventPosted || in.post.Id != "p1" || in.post.ChannelId != "c1" || in.post.UserId != "u1" ||
		in.post.CreateAt != 1700000000000 || in.post.Message != "@thinbot uptime" || fromBot(in.post) ||
		in.channelType != model.ChannelTypeOpen || in.senderName != "alice" || len(in.mentions) != 1 || in.mentions[0] != "b1" {
		t.Errorf("parsed %+v (post %+v)", in, in.post)
	}
	for _, bad := range []string{`{}`, `{"post":"{}"}`, `{"post":"{\"id\":\"x\",\"channel_id\":\"c\"}","mentions":"nope"}`,
		`{"post":"{\"id\":\"x\",\"channel_id\":\"c\"}","mentions":["b1"]}`, `[]`, `{"post":{"id":"x"}}`} {
		ev, _, err := decodeFrame(frame(bad))
		if err == nil {
			_, err = parsePosted(ev)
		}
		if err == nil {
			t.Errorf("posted data %s accepted", bad)
		}
	}
}

// TestParseFrame: the frames the adapter relies on, as the client's reader
// decodes them and the adapter then reads them.
func TestParseFrame(t *testing.T) {
	tests := []struct {
		name, frame string
		ok          bool
		check       func(*model.WebSocketEvent, *model.WebSocketResponse) bool
	}{
		{"hello", `{"event":"hello","data":{"connection_id":"x","server_version":"9.11.0"},"broadcast":{},"seq":0}`, true,
			func(ev *model.WebSocketEvent, _ *model.WebSocketResponse) bool {
				return ev != nil && ev.EventType() == model.WebsocketEventHello
			}},
		{"auth ok", `{"status":"OK","seq_reply":1}`, true,
			func(_ *model.WebSocketEvent, r *model.WebSocketResponse) bool {
				return r != nil && r.SeqReply == 1 && r.Status == model.StatusOk
			}},
		{"auth refused", `{"status":"FAIL","seq_reply":1,"error":{"id":"api.web_socket_router.bad_token.app_error","message":"Invalid token.","status_code":401}}`, true,
			func(_ *model.WebSocketEvent, r *model.WebSocketResponse) bool {
				return r != nil && r.Status == model.StatusFail && r.Error != nil && r.Error.Id == "api.web_socket_router.bad_token.app_error"
			}},
		{"data before event", `{"data":{"post":"{}"},"event":"posted"}`, true,
			func(ev *model.WebSocketEvent, _ *model.WebSocketResponse) bool {
				return ev != nil && ev.EventType() == model.WebsocketEventPosted && ev.GetData()["post"] == "{}"
			}},
		// Another event may use the names of posted's fields for other types.
		{"other event, object post", `{"event":"custom_plugin","data":{"post":{"id":"x"},"mentions":[1]},"seq":3}`, true,
			func(ev *model.WebSocketEvent, _ *model.WebSocketResponse) bool {
				return ev != nil && ev.EventType() == "custom_plugin"
			}},
		// A posted event whose post is not a string decodes, and the
		// adapter refuses it.
		{"posted, object post", `{"event":"posted","data":{"post":{"id":"x"}}}`, true,
			func(ev *model.WebSocketEvent, _ *model.WebSocketResponse) bool {
				_, err := parsePosted(ev)
				return ev != nil && err != nil
			}},
		// Data that is not an object: the client's reader cannot decode
		// the frame and drops it (with a log line); for another event
		// nothing is lost, for a posted one the catch-up of the next
		// reconnect would not help either (the server sends objects).
		{"other event, array data", `{"event":"custom_plugin","data":[1,2]}`, false, nil},
		{"posted, array data", `{"event":"posted","data":[]}`, false, nil},
		{"not json", `posted`, false, nil},
		{"truncated", `{"event":"posted","data":{"post":"{`, false, nil},
	}
	for _, tt := range tests {
		ev, r, err := decodeFrame([]byte(tt.frame))
		if (err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.name, err, tt.ok)
			continue
		}
		if tt.ok && !tt.check(ev, r) {
			t.Errorf("%s: decoded %+v %+v", tt.name, ev, r)
		}
	}
}

// FuzzParseFrame checks the adapter's reading of a "posted" event against
// a direct decoding of the frame: what parsePosted accepts is the post in
// the frame's data (same id, channel, user, message), with an id and a
// channel; and nothing panics.
func FuzzParseFrame(f *testing.F) {
	f.Add(frame(postedSeed))
	f.Add(frame(`{"post":"{\"id\":\"x\",\"channel_id\":\"c\"}"}`))
	f.Add(frame(`{"post":"not json"}`))
	f.Add([]byte(`{"status":"OK","seq_reply":1}`))
	f.Add([]byte(`{"event":"custom","data":{"post":{"id":"x"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, _, err := decodeFrame(data)
		if err != nil || ev == nil || ev.EventType() != model.WebsocketEventPosted {
			return
		}
		in, err := parsePosted(ev)
		if err != nil {
			return
		}
		if in.post == nil || in.post.Id == "" || in.post.ChannelId == "" {
			t.Fatalf("accepted a post without id or channel: %+v", in)
		}
		var env struct {
			Data struct {
				Post string `json:"post"`
			} `json:"data"`
		}
		var want struct {
			ID        string `json:"id"`
			ChannelID string `json:"channel_id"`
			UserID    string `json:"user_id"`
			Message   string `json:"message"`
		}
		if json.Unmarshal(data, &env) != nil || json.Unmarshal([]byte(env.Data.Post), &want) != nil {
			return
		}
		if in.post.Id != want.ID || in.post.ChannelId != want.ChannelID || in.post.UserId != want.UserID || in.post.Message != want.Message {
			t.Fatalf("parsePosted(%q) = %+v, direct decoding: %+v", data, in.post, want)
		}
	})
}

func FuzzStripMention(f *testing.F) {
	for _, s := range []string{"@thinbot df", "hi @ThinBot: x", "me@thinbot", "@thinbot.", "@@thinbot,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, found := stripMention(text, "thinbot")
		if len(got) > len(text) {
			t.Fatalf("stripMention grew %q to %q", text, got)
		}
		if !found && got != strings.TrimSpace(text) {
			t.Fatalf("no mention found but text changed: %q -> %q", text, got)
		}
		if found {
			if again, _ := stripMention(got, "thinbot"); len(again) > len(got) {
				t.Fatalf("second strip grew %q", got)
			}
		}
	})
}

func FuzzCallbackBody(f *testing.F) {
	a, err := New(Config{URL: "http://127.0.0.1:1", Token: "t", CallbackURL: "http://127.0.0.1:2/cb", ActionSecret: testSecret})
	if err != nil {
		f.Fatal(err)
	}
	valid, _ := json.Marshal(map[string]any{"user_id": "u", "channel_id": "c", "post_id": "p",
		"context": map[string]any{"value": "v", "action": "approve", "root": "", "mac": a.mac("c", "", "v", "approve")}})
	f.Add(valid)
	f.Add([]byte(`{"context":{"mac":1}}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w := newRecorderWriter()
		r, _ := http.NewRequest(http.MethodPost, "/cb", strings.NewReader(string(body)))
		a.CallbackHandler().ServeHTTP(w, r)
		// Run is not active: nothing may ever be accepted.
		if w.code == http.StatusOK {
			t.Fatalf("accepted %q without a handler", body)
		}
	})
}

// recorderWriter is a minimal http.ResponseWriter.
type recorderWriter struct {
	h    http.Header
	code int
}

func newRecorderWriter() *recorderWriter              { return &recorderWriter{h: http.Header{}} }
func (w *recorderWriter) Header() http.Header         { return w.h }
func (w *recorderWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *recorderWriter) WriteHeader(c int)           { w.code = c }

// BenchmarkParsePosted measures what is done with each "posted" frame:
// the client's decoding of the frame, then the adapter's of the post and
// mentions in it.
func BenchmarkParsePosted(b *testing.B) {
	data := frame(postedSeed)
	for b.Loop() {
		ev, err := model.WebSocketEventFromJSON(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		if in, err := parsePosted(ev); err != nil || in.post.Id != "p1" {
			b.Fatal(in, err)
		}
	}
}

func BenchmarkStripMention(b *testing.B) {
	text := "hey @thinbot: please check " + strings.Repeat("disk usage on web-01 ", 20)
	want := "hey please check " + strings.TrimSpace(strings.Repeat("disk usage on web-01 ", 20))
	if got, found := stripMention(text, "thinbot"); !found || strings.TrimSpace(got) != want {
		b.Fatalf("stripMention = %q, %v; want %q, true", got, found, want)
	}
	for b.Loop() {
		stripMention(text, "thinbot")
	}
}

// BenchmarkMAC times the check of a button callback's signature: accept
// (a valid MAC, every callback a user really clicks) and reject (a forged
// one of the same length), each asserted, so an early return cannot pass
// as fast.
func BenchmarkMAC(b *testing.B) {
	a := &Adapter{cfg: Config{ActionSecret: testSecret}}
	valid := a.mac("channel", "root", "request-id", "approve")
	forged := []byte(valid)
	forged[len(forged)/2] ^= 1
	for _, tt := range []struct {
		name string
		mac  string
		want bool
	}{{"accept", valid, true}, {"reject", string(forged), false}} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				if a.validMAC("channel", "root", "request-id", "approve", tt.mac) != tt.want {
					b.Fatalf("validMAC(%q) != %v", tt.mac, tt.want)
				}
			}
		})
	}
}
