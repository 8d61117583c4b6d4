package bot

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

func TestQuietMentions(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"no mention here", "no mention here"},
		{"@channel", "@\u200bchannel"},
		{"hey @here, disk full", "hey @\u200bhere, disk full"},
		{"@ALL and @Everyone.", "@\u200bALL and @\u200bEveryone."},
		{"**@channel**", "**@\u200bchannel**"},
		{"x@here.com", "x@\u200bhere.com"},
		{"`@channel` in code", "`@\u200bchannel` in code"},
		{"@allison @channels @here_x @alice", "@allison @channels @here_x @alice"},
		{"<!channel> <!here> <!everyone> <!here|here> <!subteam^S1>", "<\u200b!channel> <\u200b!here> <\u200b!everyone> <\u200b!here|here> <\u200b!subteam^S1>"},
		{"<@U123> <#C1> a < b", "<@U123> <#C1> a < b"},
		{"@\u200bchannel <\u200b!here>", "@\u200bchannel <\u200b!here>"},
	} {
		if got := QuietMentions(tc.in); got != tc.want {
			t.Errorf("QuietMentions(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPlainLinks(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"mixed `curl http://x` then https://y", "mixed `curl http:\u200b//x` then `https:\u200b//y`"},
		{"a `b\nc` http://x `d`", "a `b\nc` http:\u200b//x `d`"},
		{"", ""},
		{"no links: a ratio 1:2", "no links: a ratio 1:2"},
		{"see http://evil.example/x now", "see `http://evil.example/x` now"},
		{"see https://evil.example/x.", "see `https://evil.example/x`."},
		{"(https://evil.example/x)", "(`https://evil.example/x`)"},
		{"**https://evil.example/x**", "**`https://evil.example/x`**"},
		{"www.evil.example/login", "`www.evil.example/login`"},
		{"mail mailto:a@b.example", "mail `mailto:a@b.example`"},
		{"ftp://h/f and HTTP://H/", "`ftp://h/f` and `HTTP://H/`"},
		{"[runbook](https://evil.example/r)", "runbook (`https://evil.example/r`)"},
		{"[click here](https://evil.example/r \"title\")!", "click here (`https://evil.example/r`)!"},
		{"[https://good.example](https://evil.example)", "`https://good.example` (`https://evil.example`)"},
		{"![pixel](https://evil.example/p.png)", "image pixel (`https://evil.example/p.png`)"},
		{"[wiki](https://w.example/A_(b))", "wiki (`https://w.example/A_(b)`)"},
		{"<https://evil.example/a>", "`https://evil.example/a`"},
		{"[ref]: https://evil.example/r", "[ref]: `https://evil.example/r`"},
		{"code `curl https://x.example/` stays", "code `curl https://x.example/` stays"},
		{"```\ncurl https://x.example/\n```\nthen https://y.example", "```\ncurl https://x.example/\n```\nthen `https://y.example`"},
		{"~~~sh\nwget http://x\n~~~", "~~~sh\nwget http://x\n~~~"},
		{"odd ` tick http://x.example", "odd ` tick `http://x.example`"},
		{"url with `tick`http://a`b", "url with `tick``http:\u200b//a``b"},
		{"javascript:alert(1)", "javascript:alert(1)"},
	} {
		got := PlainLinks(tc.in)
		if strings.Count(tc.want, zwsp) == 0 {
			got = strings.ReplaceAll(got, zwsp, "")
		}
		if got != tc.want {
			t.Errorf("PlainLinks(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if once := PlainLinks(tc.in); PlainLinks(once) != once {
			t.Errorf("PlainLinks is not idempotent on %q: %q", once, PlainLinks(once))
		}
	}
}

// unbrokenScheme returns a line outside fenced blocks of s in which a URL
// scheme is left whole (a client could link it), or "".
func unbrokenScheme(s string) string {
	fence := ""
	for _, line := range strings.Split(s, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]+" \t") == "" {
				fence = ""
			}
			continue
		}
		if f := fenceRun(trimmed); f != "" {
			fence = f
			continue
		}
		if breakSchemes(line) != line {
			return line
		}
	}
	return ""
}

func FuzzPlainLinks(f *testing.F) {
	for _, s := range []string{"see http://x.example/a.", "[a](https://b) ![c](d)", "```\nhttp://x\n```\nwww.y.z", "`a` http://b `c", "<https://x>", "[x](y(z))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := PlainLinks(s)
		if l := unbrokenScheme(got); l != "" {
			t.Fatalf("PlainLinks(%q) = %q leaves a URL whole in %q", s, got, l)
		}
		if again := PlainLinks(got); again != got {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, got, again)
		}
	})
}

func FuzzQuietMentions(f *testing.F) {
	for _, s := range []string{"@channel", "<!here>", "a@here.b", "@@all", "<<!!everyone>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := QuietMentions(s)
		if mentionRe.MatchString(got) {
			t.Fatalf("QuietMentions(%q) = %q still mentions", s, got)
		}
		if strings.ReplaceAll(got, zwsp, "") != strings.ReplaceAll(s, zwsp, "") {
			t.Fatalf("QuietMentions(%q) = %q changed more than mentions", s, got)
		}
	})
}

// loudModel runs one command that needs an approval, with mentions in its
// words and its reason, then answers with mentions and links.
type loudModel struct{}

const loudAnswer = "Done @channel <!here> @all: see https://evil.example/fix and [runbook](https://evil.example/rb)"

func (loudModel) Complete(_ context.Context, r agentcore.Request) (agentcore.Response, error) {
	if last := r.Messages[len(r.Messages)-1]; last.Role == agentcore.RoleTool {
		return agentcore.Response{Content: loudAnswer}, nil
	}
	if r.OnText != nil {
		r.OnText("@here I will look at http://evil.example/intent")
	}
	args, _ := json.Marshal(map[string]string{"command": "touch x", "reason": "<!channel> says so"})
	return agentcore.Response{Content: "@here I will look at http://evil.example/intent",
		ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: agentcore.ToolRun, Arguments: string(args)}}}, nil
}

// loud returns a post text of th that notifies a channel, or "".
func (f *fakeAdapter) loud(th Thread) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.posts {
		if p.thread == th && QuietMentions(p.post.Text) != p.post.Text {
			return p.post.Text
		}
	}
	return ""
}

// TestMentionsAreQuiet: no post, update or card the bot sends can notify
// a whole channel, watched or not; in a first look (no human watching) the
// model's links are shown as text too.
func TestMentionsAreQuiet(t *testing.T) {
	r := newRig(t, loudModel{}, Channel{Approvers: []string{"U2"}}, Config{})
	// A watched thread: mentions are broken, links stay links.
	r.say(alice, th1, "m1", "go", true)
	req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	if !strings.Contains(req.post.Text, "<\u200b!channel> says so") {
		t.Errorf("approval card = %q", req.post.Text)
	}
	r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: req.id, ActionID: ActionDeny, Value: req.post.Value, User: bob})
	answer := r.ad.waitPost(t, th1, contains("Done @"))
	if s := r.ad.loud(th1); s != "" {
		t.Errorf("a watched thread's post notifies the channel: %q", s)
	}
	if want := "Done @\u200bchannel <\u200b!here> @\u200ball: see https://evil.example/fix and [runbook](https://evil.example/rb)"; answer.post.Text != want {
		t.Errorf("watched answer = %q, want %q", answer.post.Text, want)
	}

	// A first look: mentions broken, and no link.
	h := r.alerts(t, AlertsConfig{})
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
		t.Fatalf("deliver: %d %s", w.Code, w.Body)
	}
	root := r.ad.rootPosts()[0]
	th := Thread{Platform: "fake", Channel: "C1", Root: root.id}
	got := r.ad.waitPost(t, th, contains("Done @"))
	if s := r.ad.loud(th); s != "" {
		t.Errorf("a first look's post notifies the channel: %q", s)
	}
	if s := r.ad.loud(Thread{Platform: "fake", Channel: "C1"}); s != "" {
		t.Errorf("the alert card notifies the channel: %q", s)
	}
	want := "Done @\u200bchannel <\u200b!here> @\u200ball: see `https:\u200b//evil.example/fix` and runbook (`https:\u200b//evil.example/rb`)"
	if got.post.Text != want {
		t.Errorf("first look's answer = %q, want %q", got.post.Text, want)
	}
	r.ad.mu.Lock()
	for _, p := range r.ad.posts {
		if p.thread == th && unbrokenScheme(p.post.Text) != "" {
			t.Errorf("a first look's post has a link: %q", p.post.Text)
		}
	}
	r.ad.mu.Unlock()
}

// TestStreamedMentionsAreQuiet: a mention the model writes across two
// stream appends is held back until whole, so that it is broken as well.
func TestStreamedMentionsAreQuiet(t *testing.T) {
	ad := newStreamAdapter()
	b, err := New(Config{Adapter: ad, Channel: func(string) (Channel, bool) { return Channel{}, false }})
	if err != nil {
		t.Fatal(err)
	}
	r := newRenderer(b, th1)
	ctx := t.Context()
	for _, op := range []streamOp{{text: "Heads up @cha"}, {text: "nnel and <"}, {text: "!here> now"}, {text: " done", cut: true}} {
		if err := r.streamOp(ctx, ad, op, false); err != nil {
			t.Fatal(err)
		}
	}
	ad.mu.Lock()
	defer ad.mu.Unlock()
	var shown string
	for _, p := range ad.posts {
		if ad.streams[p.id] {
			shown = p.post.Text
		}
	}
	if want := "Heads up @\u200bchannel and <\u200b!here> now done"; shown != want {
		t.Errorf("stream shows %q, want %q (calls %q)", shown, want, ad.calls)
	}
}
