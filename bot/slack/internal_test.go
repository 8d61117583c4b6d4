package slack

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestVerifySignature(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"type":"event_callback"}`)
	ts := strconv.FormatInt(now.Unix(), 10)
	hdr := func(ts, sig string) http.Header {
		h := http.Header{}
		if ts != "" {
			h.Set("X-Slack-Request-Timestamp", ts)
		}
		if sig != "" {
			h.Set("X-Slack-Signature", sig)
		}
		return h
	}
	old := strconv.FormatInt(now.Add(-301*time.Second).Unix(), 10)
	edge := strconv.FormatInt(now.Add(-300*time.Second).Unix(), 10)
	tests := []struct {
		name string
		h    http.Header
		body []byte
		ok   bool
	}{
		{"valid", hdr(ts, Sign("s", ts, body)), body, true},
		{"window edge", hdr(edge, Sign("s", edge, body)), body, true},
		{"stale", hdr(old, Sign("s", old, body)), body, false},
		{"wrong secret", hdr(ts, Sign("t", ts, body)), body, false},
		{"body changed", hdr(ts, Sign("s", ts, body)), []byte(`{"type":"event_callbacK"}`), false},
		{"timestamp changed", hdr(edge, Sign("s", ts, body)), body, false},
		{"no v0 prefix", hdr(ts, Sign("s", ts, body)[3:]), body, false},
		{"no signature", hdr(ts, ""), body, false},
		{"no timestamp", hdr("", Sign("s", ts, body)), body, false},
		{"bad timestamp", hdr("12x", Sign("s", "12x", body)), body, false},
	}
	for _, tt := range tests {
		err := verifySignature("s", tt.h, tt.body, now)
		if (err == nil) != tt.ok {
			t.Errorf("%s: verifySignature = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestButtonValue(t *testing.T) {
	a, err := New(Config{BotToken: "xoxb-1", AppToken: "xapp-1"})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(Config{BotToken: "xoxb-2", AppToken: "xapp-1"})
	signed := a.signValue("C1", "approve", "req.1")
	tests := []struct {
		name                    string
		a                       *Adapter
		channel, action, signed string
		ok                      bool
	}{
		{"valid", a, "C1", "approve", signed, true},
		{"other channel", a, "C2", "approve", signed, false},
		{"other action", a, "C1", "deny", signed, false},
		{"other key", other, "C1", "approve", signed, false},
		{"bare value", a, "C1", "approve", "req.1", false},
		{"empty", a, "C1", "approve", "", false},
		{"tampered value", a, "C1", "approve", "req.2" + signed[len("req.1"):], false},
	}
	for _, tt := range tests {
		v, ok := tt.a.verifyValue(tt.channel, tt.action, tt.signed)
		if ok != tt.ok || (ok && v != "req.1") {
			t.Errorf("%s: verifyValue = %q, %v; want ok=%v", tt.name, v, ok, tt.ok)
		}
	}
}

func TestTruncateAndChunks(t *testing.T) {
	long := "```\n" + string(make([]byte, 50)) + "é"
	for n := 10; n < len(long)+2; n++ {
		got := truncate(long, n+20)
		if len(got) > n+20 {
			t.Fatalf("truncate to %d gave %d bytes", n+20, len(got))
		}
	}
	for _, tt := range []struct {
		in   string
		n    int
		want int
	}{{"", 5, 1}, {"abc", 5, 1}, {"ab\ncd\nef", 5, 2}, {"ab\ncd\nef", 4, 3}, {"abcdefghij", 4, 3}} {
		got := chunks(tt.in, tt.n)
		if len(got) != tt.want {
			t.Errorf("chunks(%q, %d) = %q, want %d pieces", tt.in, tt.n, got, tt.want)
		}
		for _, c := range got {
			if len(c) > tt.n {
				t.Errorf("chunk %q longer than %d", c, tt.n)
			}
		}
	}
}

func TestParseTS(t *testing.T) {
	if got := parseTS("1700000000.000200"); !got.Equal(time.Unix(1700000000, 200000)) {
		t.Errorf("parseTS = %v", got)
	}
	if got := parseTS("junk"); !got.IsZero() {
		t.Errorf("parseTS(junk) = %v", got)
	}
}

func FuzzParseEventCallback(f *testing.F) {
	f.Add([]byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":"1.2","channel":"C1"}}`))
	f.Add([]byte(`{"type":"event_callback","event":{"type":"message","subtype":"message_changed","hidden":true}}`))
	f.Add([]byte(`{"type":"url_verification","challenge":"x"}`))
	f.Add([]byte(`{"type":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, _ := New(Config{BotToken: "xoxb", AppToken: "xapp"})
		a.self = identity{userID: "UBOT", botID: "BBOT"}
		ev, err := parseEventCallback(data)
		if err != nil {
			return
		}
		if m, ok := a.acceptEvent(ev); ok {
			if m.ID == "" || m.Thread.Channel == "" || m.Thread.Root == "" {
				t.Fatalf("accepted an incomplete message %+v", m)
			}
			if _, again := a.acceptEvent(ev); again {
				t.Fatal("the same event was accepted twice")
			}
		}
	})
}

func FuzzParseBlockActions(f *testing.F) {
	f.Add([]byte(`{"type":"block_actions","user":{"id":"U1"},"channel":{"id":"C1"},"container":{"message_ts":"1.2"},"actions":[{"action_id":"approve","value":"v.x"}]}`))
	f.Add([]byte(`{"type":"view_submission"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, _ := New(Config{BotToken: "xoxb", AppToken: "xapp"})
		ba, err := parseBlockActions(data)
		if err != nil {
			return
		}
		if c, refusal := a.acceptClick(ba); refusal == "" {
			// Only a value we signed can pass.
			if a.signValue(c.c.Thread.Channel, c.c.ActionID, c.c.Value) != ba.Actions[0].Value {
				t.Fatalf("accepted an unsigned click %+v", c)
			}
		}
	})
}

func BenchmarkVerifySignature(b *testing.B) {
	body := make([]byte, 4096)
	now := time.Now()
	ts := strconv.FormatInt(now.Unix(), 10)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", Sign("secret", ts, body))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if err := verifySignature("secret", h, body, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcceptEvent(b *testing.B) {
	a, _ := New(Config{BotToken: "xoxb", AppToken: "xapp"})
	a.self = identity{userID: "UBOT", botID: "BBOT"}
	data := []byte(`{"type":"event_callback","event_id":"Ev1","event":{"type":"message","user":"U1","text":"<@UBOT> check &lt;disk&gt;","ts":"1700000000.000100","channel":"C1","channel_type":"channel"}}`)
	for i := 0; b.Loop(); i++ {
		ev, err := parseEventCallback(data)
		if err != nil {
			b.Fatal(err)
		}
		ev.EventID = strconv.Itoa(i)
		ev.Event.TS = ev.EventID
		if _, ok := a.acceptEvent(ev); !ok {
			b.Fatal("not accepted")
		}
	}
}

// TestMentions: user ids become Slack mentions; what is no Slack id
// (markup, a channel-wide word) is left out.
func TestMentions(t *testing.T) {
	got := mentions([]string{"U012AB3CDE", "W1", "<!channel>", "u1", "", "U2|x"})
	if want := "<@U012AB3CDE> <@W1> "; got != want {
		t.Errorf("mentions = %q, want %q", got, want)
	}
}
