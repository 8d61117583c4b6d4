// Package textfmt shapes text for the people and the model that read it:
// output cut to its head and tail, untrusted text put on one line or into
// a code span, a word quoted for a POSIX shell, a URL checked and
// escaped for a Markdown link. It is below every package
// of ours that uses it (agentcore and its sandbox and fleet, bot, cmd) and
// imports none of them.
//
// Every cut lands on a UTF-8 sequence boundary, so valid UTF-8 in gives
// valid UTF-8 out. The functions are pure and may be called concurrently.
package textfmt

import (
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Ends returns the head of s, at most head bytes, and its tail, at most
// tail bytes, each cut where no UTF-8 sequence is split (a cut backs off:
// the head gets shorter, the tail starts later). When head+tail covers s,
// h is s and t is empty. Negative sizes count as 0.
func Ends(s string, head, tail int) (h, t string) {
	head, tail = max(head, 0), max(tail, 0)
	if head+tail >= len(s) {
		return s, ""
	}
	i := head
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	j := len(s) - tail
	for j < len(s) && !utf8.RuneStart(s[j]) {
		j++
	}
	return s[:i], s[j:]
}

// HeadTail shortens s to about limit bytes: its first and last limit/2
// bytes (cut by Ends) around a line saying how many bytes were left out,
// "[... N bytes omitted ...]". The marker is extra: the result may be
// longer than limit by the marker's length. s up to limit bytes comes back
// whole. This is how a command's output reaches the model and the chain,
// so the marker's words are part of what the model sees.
func HeadTail(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	h, t := Ends(s, limit/2, limit/2)
	return fmt.Sprintf("%s\n[... %d bytes omitted ...]\n%s", h, len(s)-len(h)-len(t), t)
}

// OneLine puts s on one line, its runs of white space (newlines included)
// folded into single spaces, and cuts it to at most limit bytes ending in
// "..." when it is longer. The cut drops a split UTF-8 sequence (and any
// invalid byte before it). limit should be at least 3.
func OneLine(s string, limit int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:max(limit-3, 0)], "") + "..."
	}
	return s
}

// CodeSpan puts untrusted text into a Markdown code span on one line:
// backquotes become ' (so the text cannot close the span), then OneLine
// with limit. Empty text shows as `-`.
func CodeSpan(s string, limit int) string {
	s = OneLine(strings.ReplaceAll(s, "`", "'"), limit)
	if s == "" {
		return "`-`"
	}
	return "`" + s + "`"
}

// LowerASCII lowers A-Z alone, so that the result has s's length and an
// index in it is an index in s (strings.ToLower changes the length of some
// non-ASCII text, and turns invalid UTF-8 into U+FFFD).
func LowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// ShellQuote quotes s as one word for a POSIX shell: in single quotes,
// each ' written as '\”.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Clock formats t in loc (nil means UTC) by layout, followed by a space
// and the zone's abbreviation at t ("03:12 CET", "15:04 UTC"), so that a
// time in chat is never read in the wrong zone. Where the zone database
// has no abbreviation for a zone, Go's is its offset ("-03").
func Clock(t time.Time, loc *time.Location, layout string) string {
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format(layout + " MST")
}

// LinkURL returns u, trimmed, if it is an absolute http(s) URL with a
// host, its scheme lowered and the characters that could end a Markdown
// link or start markup percent-encoded, else "". Any other scheme
// (javascript:, data:, file:, a chat client's own) is refused, as is a URL
// over 2,000 bytes. An alert card's and a timeline's links go through it.
func LinkURL(u string) string {
	u = strings.TrimSpace(u)
	if len(u) > 2000 {
		return ""
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		// url.Parse lowers the scheme: HTTPS:// is https.
		return ""
	}
	scheme, rest, _ := strings.Cut(u, ":")
	u = strings.ToLower(scheme) + ":" + rest
	var b strings.Builder
	for _, c := range []byte(u) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("()<>[]|`\"'\\*_~{}", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
