package slack

import (
	"regexp"
	"strings"
	"testing"
)

func TestMrkdwn(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello world", "hello world"},
		{"bold stars", "a **bold** word", "a *bold* word"},
		{"bold underscores", "a __bold__ word", "a *bold* word"},
		{"italic star", "an *italic* word", "an _italic_ word"},
		{"italic underscore", "an _italic_ word", "an _italic_ word"},
		{"bold and italic", "**b** and *i*", "*b* and _i_"},
		{"bold inside italic", "*it **b** it*", "_it *b* it_"},
		{"strike", "~~gone~~", "~gone~"},
		{"lone star", "2 * 3 = 6", "2 * 3 = 6"},
		{"link", "see [the docs](https://example.com/a?b=1&c=2)", "see <https://example.com/a?b=1&amp;c=2|the docs>"},
		{"bold link text", "[**x**](http://h)", "<http://h|*x*>"},
		{"autolink", "<https://example.com>", "<https://example.com>"},
		{"pipe in link text", "[a|b](http://h)", "<http://h|a¦b>"},
		{"escape", "a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"},
		{"mention-like text escaped", "<@U123> <!channel>", "&lt;@U123&gt; &lt;!channel&gt;"},
		{"h1", "# Title", "*Title*"},
		{"h3 with bold", "### A **b** c ###", "*A b c*"},
		{"heading needs space", "#hashtag", "#hashtag"},
		{"bullets", "- one\n* two\n+ three", "• one\n• two\n• three"},
		{"nested bullets", "- a\n  - b\n    - **c**", "• a\n  • b\n    • *c*"},
		{"numbered", "1. first\n2. *second*", "1. first\n2. _second_"},
		{"quote", "> quoted **text**", "> quoted *text*"},
		{"rule", "---", "──────────"},
		{"code span untouched", "run `ls **x** *y*` now", "run `ls **x** *y*` now"},
		{"code span escaped", "`a<b`", "`a&lt;b`"},
		{"double backtick span", "``a*b*``", "`a*b*`"},
		{"double backtick with backtick", "`` a`b ``", "`` a`b ``"},
		{"unclosed backtick", "a ` b **c**", "a ` b *c*"},
		{"fence", "```\n**x** # y\n- z\n```", "```\n**x** # y\n- z\n```"},
		{"fence language dropped", "```bash\nls > out\n```", "```\nls &gt; out\n```"},
		{"triple backticks inside code", "~~~\necho ```\n~~~", "```\necho ``\u200b`\n```"},
		{"tilde fence", "~~~\n*a*\n~~~", "```\n*a*\n```"},
		{"longer fence", "````\n```\n*a*\n````", "```\n``\u200b`\n*a*\n```"},
		{"unterminated fence closed", "```\nrm *x*", "```\nrm *x*\n```"},
		{"text around fence", "**a**\n```\n**b**\n```\n**c**", "*a*\n```\n**b**\n```\n*c*"},
		{"one-line triple backticks", "```x```", "`x`"},
		{"crlf", "**a**\r\n**b**", "*a*\n*b*"},
		{"control char", "a\x01b", "a\uFFFDb"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Mrkdwn(tt.in); got != tt.want {
				t.Errorf("Mrkdwn(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// fencedBodies returns the lines inside ``` fences of mrkdwn output.
func fencedBodies(s string) []string {
	var body []string
	in := false
	for _, line := range strings.Split(s, "\n") {
		if line == "```" {
			in = !in
			continue
		}
		if in {
			body = append(body, line)
		}
	}
	return body
}

func FuzzMrkdwn(f *testing.F) {
	for _, s := range []string{
		"**a** *b* _c_ ~~d~~ [e](http://f) `g`",
		"# h\n- i\n  - j\n> k\n---",
		"```go\nfunc main() { *p = 1 }\n```\nafter",
		"````\n```\n````",
		"`` ` ``",
		"a & b < c > d",
		"```\nunterminated <x>",
		"[a](b)(c)[d]",
		"\x01\x01**\x01**",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Mrkdwn(in)
		if strings.Contains(out, boldMark) {
			t.Fatalf("Mrkdwn(%q) leaked the bold marker: %q", in, out)
		}
		if strings.Count(out, "\n") != strings.Count(strings.ReplaceAll(in, "\r\n", "\n"), "\n")+trailingFence(in) {
			t.Fatalf("Mrkdwn(%q) changed the line count: %q", in, out)
		}
		// Every line inside a fenced block of the input comes out byte for
		// byte (after Slack's escaping) inside a fenced block.
		var want []string
		fence := ""
		for _, line := range strings.Split(strings.ReplaceAll(in, "\r\n", "\n"), "\n") {
			line = strings.ReplaceAll(line, boldMark, "\uFFFD")
			switch {
			case fence != "" && refClosingFence(line, fence):
				fence = ""
			case fence != "":
				want = append(want, refCodeLine(line))
			default:
				fence = refOpeningFence(line)
			}
		}
		got := fencedBodies(out)
		if len(got) < len(want) {
			t.Fatalf("Mrkdwn(%q) lost code lines: got %q, want %q", in, got, want)
		}
		for i := range want {
			if !strings.Contains(strings.Join(got, "\n"), want[i]) {
				t.Fatalf("Mrkdwn(%q): code line %q not preserved in %q", in, want[i], out)
			}
		}
	})
}

// The fuzz oracle reads fences and escapes code on its own, with CommonMark's
// rules written as regular expressions, so that a bug in the converter's
// fence detection (openingFence, isClosingFence, codeLine) is not mirrored
// in the check.
var (
	refOpenRE  = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	refCloseRE = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})[ \t]*$")
)

// refOpeningFence returns the fence a line opens, or "": three or more
// backticks or tildes after at most three spaces; a backtick fence's info
// string holds no backtick.
func refOpeningFence(line string) string {
	m := refOpenRE.FindStringSubmatch(line)
	if m == nil || (m[1][0] == '`' && strings.Contains(m[2], "`")) {
		return ""
	}
	return m[1]
}

// refClosingFence: at most three spaces, at least as many of the opening
// fence's character and nothing else, then only blanks.
func refClosingFence(line, fence string) bool {
	m := refCloseRE.FindStringSubmatch(line)
	return m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence)
}

// refCodeLine is a code line as Slack must receive it: &, < and > escaped,
// and no "```" left to end the block early.
func refCodeLine(s string) string {
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	return strings.ReplaceAll(s, "```", "``\u200b`")
}

// trailingFence is 1 when the input ends inside an unterminated fence (the
// converter adds a closing line), else 0.
func trailingFence(in string) int {
	fence := ""
	for _, line := range strings.Split(strings.ReplaceAll(strings.ReplaceAll(in, boldMark, "\uFFFD"), "\r\n", "\n"), "\n") {
		switch {
		case fence != "" && refClosingFence(line, fence):
			fence = ""
		case fence == "":
			fence = refOpeningFence(line)
		}
	}
	if fence != "" {
		return 1
	}
	return 0
}

func BenchmarkMrkdwn(b *testing.B) {
	in := strings.Repeat("## Step\nRun **this** with *care*, see [docs](https://example.com).\n- item `code`\n```sh\nls -la | grep x > out\n```\n", 50)
	b.SetBytes(int64(len(in)))
	if out := Mrkdwn(in); !strings.Contains(out, "*Step*") || !strings.Contains(out, "<https://example.com|docs>") {
		b.Fatalf("Mrkdwn did not convert the input:\n%.300s", out)
	}
	for b.Loop() {
		Mrkdwn(in)
	}
}
