package agentcore

import (
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// TestSecretsRedactedEverywhere: a model that writes the bot's key into its
// text, its reasoning, its tool arguments and its commands leaves no copy in
// the chain, the streamed text or the answer.
func TestSecretsRedactedEverywhere(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	f := newFixture(t, Config{Secrets: []string{key}},
		func(Request) (Response, error) {
			return Response{Reasoning: "I will print " + key, FinishReason: "tool_calls",
				ToolCalls: []ToolCall{{ID: "c1", Name: ToolRun, Arguments: `{"command":"echo ` + key + `","reason":"use ` + key + `"}`}}}, nil
		},
		func(Request) (Response, error) {
			return Response{Content: "the key is " + key + " and it \"" + key + "\"", Reasoning: "<think>" + key + "</think>", FinishReason: "stop"}, nil
		})
	var streamed strings.Builder
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "hi " + "there", Dir: f.dir, Actor: "user:alice",
		AllowAll: true, Hooks: Hooks{Text: func(d string) { streamed.WriteString(d) }}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Answer, key) || strings.Contains(streamed.String(), key) {
		t.Errorf("answer %q / stream %q hold the key", res.Answer, streamed.String())
	}
	for _, ev := range f.events(t, "s") {
		if strings.Contains(string(ev.Payload), key) || strings.Contains(string(ev.Payload), "sk-live-0123") {
			t.Errorf("%s event holds the key: %s", ev.Type, ev.Payload)
		}
	}
	var reasoning int
	for _, ev := range f.events(t, "s") {
		if ev.Type == EvAssistantMessage && strings.Contains(string(ev.Payload), `"reasoning":"`) {
			reasoning++
		}
	}
	if reasoning != 2 {
		t.Errorf("%d assistant messages record reasoning, want 2: the test proves nothing", reasoning)
	}
}

func TestRedactStreamHoldsBackSplitSecrets(t *testing.T) {
	x := newScrubber([]string{"SECRETVALUE123"}, nil)
	var out strings.Builder
	rs := &redactStream{scrub: x.scrub, keep: x.keep(), out: func(s string) { out.WriteString(s) }}
	for _, d := range []string{"the key: SECR", "ETVAL", "UE123 ok, ", "done ünïcode"} {
		rs.write(d)
	}
	rs.flush()
	if got, want := out.String(), "the key: [REDACTED] ok, done ünïcode"; got != want {
		t.Errorf("stream = %q, want %q", got, want)
	}
}

// Without secrets, text passes at once up to the word under way.
func TestRedactStreamWithoutSecretsPassesWords(t *testing.T) {
	var out strings.Builder
	rs := &redactStream{scrub: func(s string) string { return s }, out: func(s string) { out.WriteString(s) }}
	for _, d := range []string{"hello", " ", "wörld\nand", " more"} {
		rs.write(d)
	}
	if out.String() != "hello wörld\nand " {
		t.Errorf("stream = %q", out.String())
	}
	rs.flush()
	if out.String() != "hello wörld\nand more" {
		t.Errorf("after flush = %q", out.String())
	}
}

// TestRedactStreamScrubsAcrossDeltas: a token split over three deltas and
// followed by more lines is never shown whole or in part.
func TestRedactStreamScrubsAcrossDeltas(t *testing.T) {
	m, err := NewMasker()
	if err != nil {
		t.Fatal(err)
	}
	x := newScrubber([]string{"sk-live-0123456789abcdefXYZ"}, m)
	var out strings.Builder
	rs := &redactStream{scrub: x.scrub, keep: x.keep(), out: func(s string) { out.WriteString(s) }}
	tail := strings.Repeat("more words on a line\n", 20)
	for _, d := range []string{"token ghp_R8vT2kLm9Q", "xZ4wNp7YbC3dFh6JsA1u", "Eo5GiK and sk-live-0123", "456789abcdefXYZ ok\n" + tail,
		"api_key: ", "Zq2LmZ8vR7tY1pW", "4nB6cf3k9\n" + tail} {
		rs.write(d)
	}
	shown := out.String()
	rs.flush()
	// Without configured secrets nothing is held back but the word under
	// way: the keyword is shown first, and its value is masked with it as
	// context.
	x2 := newScrubber(nil, m)
	rs2 := &redactStream{scrub: x2.scrub, keep: x2.keep(), out: func(s string) { out.WriteString(s) }}
	for _, d := range []string{"db password = ", "Xq2LmZ8vR7tY1pW", "4nB6cf3k9\n", "done"} {
		rs2.write(d)
	}
	rs2.flush()
	if !strings.Contains(shown, "[MASKED:github-pat]") || !strings.Contains(shown, "api_key: [MASKED:generic-api-key]") || !strings.Contains(out.String(), "db password = [MASKED:generic-api-key]") ||
		strings.Contains(out.String(), "R8vT2kLm9Q") || strings.Contains(out.String(), "0123456789") || strings.Contains(out.String(), "q2LmZ8v") || strings.Contains(out.String(), "4nB6cf3k9") {
		t.Errorf("shown before the flush %q, in all %q", shown, out.String())
	}
}

// BenchmarkRedact512K: what a 512 KiB command output costs to redact, with
// four configured secrets (model key, chat token, alert and web tokens).
// "before" is the per-site redaction this package had (Masker.Mask over
// the output, then each secret replaced in it and in the model's view);
// "after" is the scrubber's path: the output (every form, the Masker,
// learning), the view's payload at write, and the hook's copy (already
// scrubbed, so remembered).
func BenchmarkRedact512K(b *testing.B) {
	m, err := NewMasker()
	if err != nil {
		b.Fatal(err)
	}
	secrets := []string{"sk-live-0123456789abcdefXYZ", "xoxb-1234567890-0987654321-AbCdEfGhIj", "0123456789abcdef-alert-token", "web-token-Zq8Lm2Xw4Rt6Yv"}
	lines := "Dec  1 03:12:00 db1 kernel: [123.456] EXT4-fs (sda1): mounted filesystem with ordered data mode\n" +
		"Dec  1 03:12:01 db1 sshd[991]: Accepted publickey for deploy from 10.0.0.5 port 50122 ssh2\n" +
		"Dec  1 03:12:02 db1 app[77]: GET /api/v1/items?key=abc 200 12ms token usage ok\n"
	s := "GITHUB_TOKEN=ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK web-token-Zq8Lm2Xw4Rt6Yv\n" + strings.Repeat(lines, 512<<10/len(lines))
	b.Run("before", func(b *testing.B) {
		redact := func(s string) string {
			for _, v := range secrets {
				if strings.Contains(s, v) {
					s = strings.ReplaceAll(s, v, "[REDACTED]")
				}
			}
			return s
		}
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			out, _ := m.Mask(s)
			out = redact(out)
			_ = redact(textfmt.HeadTail(out, 16<<10))
		}
	})
	b.Run("after", func(b *testing.B) {
		x := newScrubber(secrets, m)
		b.SetBytes(int64(len(s)))
		for b.Loop() {
			out, _ := x.scrubCount(s)
			_ = x.payload(mustJSON(ToolResultPayload{Content: textfmt.HeadTail(out, 16<<10)}))
			if x.scrub(out) != out {
				b.Fatal("not idempotent")
			}
		}
	})
}
