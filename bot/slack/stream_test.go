package slack_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/tests/fakeslack"
)

func TestStreamRoundTrip(t *testing.T) {
	for _, mode := range []string{"socket", "http"} {
		t.Run(mode, func(t *testing.T) {
			e := start(t, mode, nil)
			ctx := ctxT(t)
			root := e.f.UserMessage("U1", "C1", "", "<@UBOT> how is the disk?")
			m := e.next(t)
			id, err := e.a.StartStream(ctx, m.Thread)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.a.AppendStream(ctx, m.Thread, id, "The **disk** "); err != nil {
				t.Fatal(err)
			}
			msg := e.f.Thread("C1", root)[1]
			if msg.TS != id || msg.ThreadTS != root || !msg.Streaming || msg.Recipient != "U1" || msg.Text != "The **disk** " {
				t.Fatalf("while streaming: %+v", msg)
			}
			if err := e.a.StopStream(ctx, m.Thread, id, "is [fine](https://x.test/d)."); err != nil {
				t.Fatal(err)
			}
			// Markdown goes as markdown_text, unconverted; the message ends
			// as streamed and can be updated like any other.
			msg = e.f.Thread("C1", root)[1]
			if msg.Streaming || msg.Text != "The **disk** is [fine](https://x.test/d)." {
				t.Fatalf("after stop: %+v", msg)
			}
			start := e.f.Calls("chat.startStream")[0].Params
			if start["recipient_team_id"] != fakeslack.TeamID || start["thread_ts"] != root {
				t.Errorf("chat.startStream params = %v", start)
			}
			if err := e.a.Update(ctx, m.Thread, id, bot.Post{Text: "replaced"}); err != nil {
				t.Fatal(err)
			}
			if err := e.a.StopStream(ctx, m.Thread, id, ""); err == nil || errors.Is(err, bot.ErrStreamingUnsupported) {
				t.Errorf("second stop = %v, want message_not_in_streaming_state", err)
			}
			// The bot's own streamed message never reaches the bot.
			e.expectOnly(t)
		})
	}
}

func TestStreamLongTextInPieces(t *testing.T) {
	e := start(t, "socket", nil)
	ctx := ctxT(t)
	e.f.UserMessage("U1", "D1", "", "hello")
	m := e.next(t)
	id, err := e.a.StartStream(ctx, m.Thread) // a DM needs no recipient
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 7000) + strings.Repeat("x", 11000) // 25,000 bytes
	if err := e.a.AppendStream(ctx, m.Thread, id, long); err != nil {
		t.Fatal(err)
	}
	if err := e.a.StopStream(ctx, m.Thread, id, long); err != nil {
		t.Fatal(err)
	}
	if n := len(e.f.Calls("chat.appendStream")); n != 5 {
		t.Errorf("%d chat.appendStream calls, want 5 (3 + 2 before the stop)", n)
	}
	if got := e.f.Thread("D1", m.Thread.Root)[1].Text; got != long+long {
		t.Errorf("streamed text has %d bytes, want %d", len(got), 2*len(long))
	}
}

func TestStreamNeedsRecipient(t *testing.T) {
	e := start(t, "socket", nil)
	_, err := e.a.StartStream(ctxT(t), bot.Thread{Platform: "slack", Channel: "C1", Root: "1700000000.000100"})
	if err == nil || !strings.Contains(err.Error(), "no recipient") {
		t.Errorf("StartStream in an unknown thread = %v", err)
	}
	if n := len(e.f.Calls("chat.startStream")); n != 0 {
		t.Errorf("%d calls made", n)
	}
}

func TestStreamUnsupportedIsRemembered(t *testing.T) {
	for _, code := range []string{"not_allowed", "unknown_method", "missing_scope", "not_enabled"} {
		t.Run(code, func(t *testing.T) {
			e := start(t, "socket", nil)
			ctx := ctxT(t)
			e.f.UserMessage("U1", "C1", "", "<@UBOT> hi")
			m := e.next(t)
			e.f.FailMethod("chat.startStream", code, 1)
			for i := range 2 {
				if _, err := e.a.StartStream(ctx, m.Thread); !errors.Is(err, bot.ErrStreamingUnsupported) {
					t.Fatalf("StartStream #%d = %v, want ErrStreamingUnsupported", i+1, err)
				}
			}
			if n := len(e.f.Calls("chat.startStream")); n != 1 {
				t.Errorf("%d chat.startStream calls, want 1 (then remembered)", n)
			}
			if n := strings.Count(e.logs.String(), "streaming is not available"); n != 1 {
				t.Errorf("%d log lines about it, want 1", n)
			}
		})
	}
	// Any other error is the call's own: the next call tries again.
	e := start(t, "socket", nil)
	ctx := ctxT(t)
	e.f.UserMessage("U1", "C1", "", "<@UBOT> hi")
	m := e.next(t)
	e.f.FailMethod("chat.startStream", "internal_error", 1)
	if _, err := e.a.StartStream(ctx, m.Thread); err == nil || errors.Is(err, bot.ErrStreamingUnsupported) {
		t.Fatalf("StartStream = %v, want internal_error", err)
	}
	if _, err := e.a.StartStream(ctx, m.Thread); err != nil {
		t.Fatalf("StartStream after a passing error = %v", err)
	}
}
