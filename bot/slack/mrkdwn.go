package slack

import (
	"regexp"
	"strings"
)

// boldMark stands in for a bold "*" while italics are converted, so that
// "**x**" -> "*x*" is not then mistaken for an italic "*x*".
const boldMark = "\x01"

var (
	headingRe = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	bulletRe  = regexp.MustCompile(`^([ \t]*)[-*+][ \t]+(.*)$`)
	quoteRe   = regexp.MustCompile(`^[ \t]*>[ \t]?(.*)$`)
	ruleRe    = regexp.MustCompile(`^ {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$`)
	linkRe    = regexp.MustCompile(`\[([^\[\]]+)\]\(([^()\s]+)\)|<(https?://[^<>\s]+)>`)
	boldRe    = regexp.MustCompile(`\*\*([^*\s](?:[^*]*[^*\s])?)\*\*|__([^_\s](?:[^_]*[^_\s])?)__`)
	italicRe  = regexp.MustCompile(`\*([^*\s](?:[^*]*[^*\s])?)\*`)
	strikeRe  = regexp.MustCompile(`~~([^~\s](?:[^~]*[^~\s])?)~~`)
)

// Mrkdwn converts the Markdown a model writes into Slack's mrkdwn dialect:
// **bold** and __bold__ become *bold*, *italic* becomes _italic_, ~~x~~
// becomes ~x~, [text](url) becomes <url|text>, headings become bold lines and
// bullets become "•". Fenced code blocks and code spans keep their content
// byte for byte apart from the &, < and > escaping Slack requires of all
// text (and a zero-width space that keeps a "```" inside code from ending
// Slack's block); a fence's language tag is dropped (Slack would show it as code) and
// an unterminated fence is closed. Mrkdwn is a pure function.
func Mrkdwn(markdown string) string {
	markdown = strings.ReplaceAll(markdown, boldMark, "\uFFFD")
	markdown = strings.ReplaceAll(markdown, "\r\n", "\n")
	lines := strings.Split(markdown, "\n")
	out := make([]string, 0, len(lines))
	var fence string // the opening fence while inside a code block
	for _, line := range lines {
		if fence != "" {
			if isClosingFence(line, fence) {
				out = append(out, "```")
				fence = ""
				continue
			}
			out = append(out, codeLine(line))
			continue
		}
		if f := openingFence(line); f != "" {
			fence = f
			out = append(out, "```")
			continue
		}
		out = append(out, convertLine(line))
	}
	if fence != "" {
		out = append(out, "```")
	}
	return strings.Join(out, "\n")
}

// openingFence returns the fence run ("```", "~~~~", ...) that opens a code
// block on line, or "" if line opens none.
func openingFence(line string) string {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 || len(trimmed) < 3 {
		return ""
	}
	c := trimmed[0]
	if c != '`' && c != '~' {
		return ""
	}
	n := 0
	for n < len(trimmed) && trimmed[n] == c {
		n++
	}
	if n < 3 {
		return ""
	}
	if c == '`' && strings.Contains(trimmed[n:], "`") {
		return "" // "```x```" on one line is an inline code span
	}
	return trimmed[:n]
}

// isClosingFence reports whether line closes a block opened with fence: the
// same character, at least as many, nothing after but space.
func isClosingFence(line, fence string) bool {
	trimmed := strings.TrimLeft(line, " ")
	if len(line)-len(trimmed) > 3 {
		return false
	}
	trimmed = strings.TrimRight(trimmed, " \t")
	if len(trimmed) < len(fence) {
		return false
	}
	for i := 0; i < len(trimmed); i++ {
		if trimmed[i] != fence[0] {
			return false
		}
	}
	return true
}

// convertLine converts one line outside code blocks.
func convertLine(line string) string {
	if ruleRe.MatchString(line) {
		return "──────────"
	}
	if m := headingRe.FindStringSubmatch(line); m != nil {
		text := strings.ReplaceAll(inline(m[1]), boldMark, "")
		if strings.TrimSpace(text) == "" {
			return ""
		}
		return "*" + text + "*"
	}
	if m := bulletRe.FindStringSubmatch(line); m != nil {
		return m[1] + "• " + finish(inline(m[2]))
	}
	if m := quoteRe.FindStringSubmatch(line); m != nil {
		return "> " + finish(inline(m[1]))
	}
	return finish(inline(line))
}

func finish(s string) string { return strings.ReplaceAll(s, boldMark, "*") }

// inline converts the inline syntax of a line, leaving code spans as they
// are. Bold is marked with boldMark for the caller to finish.
func inline(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		start := strings.IndexByte(s, '`')
		if start < 0 {
			b.WriteString(spans(s))
			break
		}
		n := 0
		for start+n < len(s) && s[start+n] == '`' {
			n++
		}
		run := s[start : start+n]
		end := closingRun(s[start+n:], n)
		if end < 0 {
			// No closing run: the backticks are literal text.
			b.WriteString(spans(s[:start+n]))
			s = s[start+n:]
			continue
		}
		b.WriteString(spans(s[:start]))
		code := s[start+n : start+n+end]
		if n > 1 && !strings.Contains(code, "`") {
			// Slack knows only single-backtick spans.
			b.WriteString("`" + escape(code) + "`")
		} else {
			b.WriteString(run + escape(code) + run)
		}
		s = s[start+n+end+n:]
	}
	return b.String()
}

// closingRun returns the index in s of a run of exactly n backticks, or -1.
func closingRun(s string, n int) int {
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

// spans converts links and emphasis in text that holds no code span.
func spans(s string) string {
	var b strings.Builder
	for {
		loc := linkRe.FindStringSubmatchIndex(s)
		if loc == nil {
			b.WriteString(emphasis(escape(s)))
			return b.String()
		}
		b.WriteString(emphasis(escape(s[:loc[0]])))
		if loc[6] >= 0 { // <https://...> autolink
			b.WriteString("<" + escapeURL(s[loc[6]:loc[7]]) + ">")
		} else {
			text := strings.ReplaceAll(emphasis(escape(s[loc[2]:loc[3]])), "|", "¦")
			b.WriteString("<" + escapeURL(s[loc[4]:loc[5]]) + "|" + text + ">")
		}
		s = s[loc[1]:]
	}
}

func emphasis(s string) string {
	s = boldRe.ReplaceAllString(s, boldMark+"${1}${2}"+boldMark)
	s = italicRe.ReplaceAllString(s, "_${1}_")
	return strikeRe.ReplaceAllString(s, "~${1}~")
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape applies the escaping Slack requires of &, < and > in all text.
func escape(s string) string { return escaper.Replace(s) }

// codeLine escapes a line inside a code block. Slack ends a block at any
// "```", so a triple backtick inside the code gets a zero-width space; the
// rest of the line is untouched.
func codeLine(s string) string {
	return strings.ReplaceAll(escape(s), "```", "``\u200b`")
}

// escapeURL escapes a link target; "|" would end the URL early.
func escapeURL(s string) string { return strings.ReplaceAll(escape(s), "|", "%7C") }

// unescape reverses escape, for text Slack sends us.
func unescape(s string) string {
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}
