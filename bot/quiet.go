package bot

import (
	"regexp"
	"strings"

	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// Text thinbot posts is written, in good part, by people it does not
// answer to: the model (which an alert annotation or a pasted log line can
// steer), a command's output, an alert. Two things in it must not act on
// the readers of a channel.
//
// Channel-wide mentions notify everyone: Mattermost's @channel, @all and
// @here, Slack's <!channel>, <!here>, <!everyone> and <!subteam^…>, and
// Slack's @channel and @here, which it parses in Block Kit text. Every text
// the bot posts, updates or streams, on every path and every platform,
// goes through QuietMentions: a zero-width space after the "@" (or the
// "<") leaves the text readable and the mention inert. Escaping all text,
// not only the unwatched paths', is deliberate: a watched thread's model
// can be steered as well, and a human who wants to notify the channel
// writes the mention themselves. The cost is an invisible character when
// such a word is copied out of the chat (a command containing "@here", say,
// as an approval card shows it; the chain keeps the command as judged). The
// web console has no channel-wide notification; it shows the same text
// live (a thread it rebuilds from the chain after a restart shows the
// chain's text, which notifies nobody there either). It links http(s) URLs
// outside code, as chat clients do, so PlainLinks holds there too (and a
// rebuilt unwatched run goes through it again).
//
// Links in a thread no human watches (an alert's first look, a scheduled
// check) are shown, not made clickable (PlainLinks): whoever wrote the
// alert must not get a link into the channel that reads as the bot's
// advice.

// zwsp is the zero-width space that breaks a mention.
const zwsp = "\u200b"

// mentionRe matches the channel-wide mentions of Mattermost and Slack
// (case-insensitive, not followed by a name character).
var mentionRe = regexp.MustCompile(`(?i)@(channel|here|all|everyone)\b|<!`)

// QuietMentions breaks every channel-wide mention in s ("@channel" becomes
// "@\u200bchannel", "<!here>" "<\u200b!here>"), in code as well as in
// text: not every platform leaves code alone. It is idempotent.
func QuietMentions(s string) string {
	if !strings.ContainsAny(s, "@<") {
		return s
	}
	return mentionRe.ReplaceAllStringFunc(s, func(m string) string {
		return m[:1] + zwsp + m[1:]
	})
}

// quiet is p with its text's mentions broken.
func quiet(p Post) Post {
	p.Text = QuietMentions(p.Text)
	return p
}

var (
	// linkRe finds, in text outside code, a Markdown link or image
	// [text](url "title"), an autolink <scheme:…>, or a bare URL
	// (scheme://…, www.…, mailto:…).
	linkRe = regexp.MustCompile(`!?\[([^\[\]\n]*)\]\(\s*<?([^()<>\s]*(?:\([^()\s]*\)[^()<>\s]*)*)>?(?:\s+(?:"[^"\n]*"|'[^'\n]*'))?\s*\)` +
		`|<((?:[a-zA-Z][a-zA-Z0-9+.\-]*:|www\.)[^<>\s]*)>` +
		`|(?i:\b[a-z][a-z0-9+.\-]*://|\bwww\.|\bmailto:)[^\s<>` + "`" + `]*`)
	// schemeRe finds what makes a client link a URL: a scheme's "://",
	// "www." and "mailto:".
	schemeRe = regexp.MustCompile(`(?i)\b(?:[a-z][a-z0-9+.\-]*:(//)|www(\.)|mailto:())`)
	// trailingPunct is what ends a bare URL's match but, as chat clients
	// judge it, not the URL.
	trailingPunct = ".,:;!?'\")]*_~"
)

// PlainLinks shows the links in Markdown text as text: a link becomes its
// text and its target in a code span, an autolink or a bare URL a code
// span, so that no chat client makes them clickable (Mattermost and Slack
// link bare URLs, not code). Each URL's scheme also gets a zero-width
// space ("https:\u200b//", "www\u200b.", "mailto:\u200b"), in code spans
// too: a client that pairs backticks otherwise than we do (a code span
// over two lines, an unclosed backtick) must still find no URL. Fenced code
// blocks are left as they are. It is idempotent.
func PlainLinks(s string) string {
	if !strings.Contains(s, ":") && !strings.Contains(s, "www.") && !strings.Contains(s, "](") {
		return s
	}
	lines := strings.Split(s, "\n")
	fence := ""
	for i, line := range lines {
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
		lines[i] = plainLinksLine(line)
	}
	return strings.Join(lines, "\n")
}

// fenceRun returns the run of ``` or ~~~ (three or more) that opens a
// fenced block at the start of line, or "".
func fenceRun(line string) string {
	if len(line) < 3 || (line[0] != '`' && line[0] != '~') {
		return ""
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 || (line[0] == '`' && strings.Contains(line[n:], "`")) {
		return ""
	}
	return line[:n]
}

// plainLinksLine applies PlainLinks to one line outside fenced blocks,
// skipping its code spans.
func plainLinksLine(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		start := strings.IndexByte(s, '`')
		if start < 0 {
			b.WriteString(plainLinksText(s))
			break
		}
		n := 0
		for start+n < len(s) && s[start+n] == '`' {
			n++
		}
		end := closingBackticks(s[start+n:], n)
		if end < 0 {
			// Unclosed: literal backticks, and no code span after them.
			b.WriteString(plainLinksText(s[:start]))
			b.WriteString(s[start : start+n])
			s = s[start+n:]
			continue
		}
		b.WriteString(plainLinksText(s[:start]))
		b.WriteString(breakSchemes(s[start : start+n+end+n]))
		s = s[start+n+end+n:]
	}
	return b.String()
}

// closingBackticks returns the index in s of a run of exactly n
// backticks, or -1.
func closingBackticks(s string, n int) int {
	for i := 0; i < len(s); {
		if s[i] != '`' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] == '`' {
			j++
		}
		if j-i == n {
			return i
		}
		i = j
	}
	return -1
}

// plainLinksText applies PlainLinks to text that holds no code.
func plainLinksText(s string) string {
	var b strings.Builder
	for {
		loc := linkRe.FindStringSubmatchIndex(s)
		if loc == nil {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:loc[0]])
		m := s[loc[0]:loc[1]]
		switch {
		case loc[2] >= 0: // [text](url)
			text, target := s[loc[2]:loc[3]], s[loc[4]:loc[5]]
			if strings.HasPrefix(m, "!") {
				text = "image " + text
			}
			// The link's text may itself look like a URL.
			b.WriteString(plainLinksText(strings.TrimSpace(text)))
			if target != "" {
				b.WriteString(" (" + breakSchemes(textfmt.CodeSpan(target, 2000)) + ")")
			}
		case loc[6] >= 0: // <url>
			b.WriteString(breakSchemes(textfmt.CodeSpan(s[loc[6]:loc[7]], 2000)))
		default: // a bare URL, less the punctuation after it
			url := strings.TrimRight(m, trailingPunct)
			if url == "" {
				b.WriteString(m)
				break
			}
			b.WriteString(breakSchemes(textfmt.CodeSpan(url, 2000)))
			b.WriteString(m[len(url):])
		}
		s = s[loc[1]:]
	}
}

// breakSchemes puts a zero-width space into each URL scheme of s (see
// schemeRe), so that no client finds a URL there.
func breakSchemes(s string) string {
	var b strings.Builder
	for {
		loc := schemeRe.FindStringSubmatchIndex(s)
		if loc == nil {
			b.WriteString(s)
			return b.String()
		}
		at := loc[1]
		for i := 2; i < len(loc); i += 2 {
			if loc[i] >= 0 {
				at = loc[i]
			}
		}
		b.WriteString(s[:at])
		if !strings.HasPrefix(s[at:], zwsp) {
			b.WriteString(zwsp)
		}
		b.WriteString(s[at:loc[1]])
		s = s[loc[1]:]
	}
}
