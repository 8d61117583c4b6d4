package mattermost

import (
	"strings"
	"unicode/utf8"

	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// maxPostRunes is Mattermost's limit on a post's message (PostMessageMaxRunesV2).
const maxPostRunes = 16383

// truncatedNotice ends a post whose text was cut to fit maxPostRunes.
const truncatedNotice = "\n\n… (truncated: the full text is attached as " + fullTextName + ")"

// updateTruncatedNotice ends an updated post whose text was cut.
const updateTruncatedNotice = "\n\n… (truncated)"

// fullTextName is the name of the file that carries a truncated post's text.
const fullTextName = "message.md"

// fitText cuts text to maxPostRunes, ending it with notice if it was cut.
func fitText(text, notice string) (string, bool) {
	if utf8.RuneCountInString(text) <= maxPostRunes {
		return text, false
	}
	keep := maxPostRunes - utf8.RuneCountInString(notice)
	i, n := 0, 0
	for i < len(text) && n < keep {
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
		n++
	}
	return text[:i] + notice, true
}

// isNameByte reports whether c may appear in a Mattermost username
// (lowercase letters, digits, '.', '-', '_'); upper case is accepted since
// mentions are matched case-insensitively.
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// stripMention removes every "@name" mention of the bot from text (with a
// following ':' or ','), trims surrounding space, and reports whether a
// mention was found. A mention must not be part of a longer name or an
// e-mail address; a trailing '.' (end of sentence) still counts.
func stripMention(text, name string) (string, bool) {
	if name == "" {
		return strings.TrimSpace(text), false
	}
	at := "@" + name
	// Byte for byte: strings.ToLower turns invalid UTF-8 into U+FFFD (three
	// bytes), so its indices would not be text's (a message of stray bytes
	// before the mention made this panic; FuzzStripMention found it).
	lower := textfmt.LowerASCII(text)
	needle := textfmt.LowerASCII(at)
	var b strings.Builder
	found := false
	last := 0
	for i := 0; i+len(needle) <= len(lower); {
		j := strings.Index(lower[i:], needle)
		if j < 0 {
			break
		}
		start := i + j
		end := start + len(needle)
		if start > 0 && isNameByte(text[start-1]) || !mentionEnds(text, end) {
			i = start + 1
			continue
		}
		found = true
		if end < len(text) && (text[end] == ':' || text[end] == ',') {
			end++
		}
		left := text[last:start]
		b.WriteString(left)
		// Avoid a double space where the mention was.
		if end < len(text) && text[end] == ' ' && (b.Len() == 0 || strings.HasSuffix(left, " ")) {
			end++
		}
		last = end
		i = end
	}
	if !found {
		return strings.TrimSpace(text), false
	}
	b.WriteString(text[last:])
	return strings.TrimSpace(b.String()), true
}

// mentionEnds reports whether a mention ending at text[end] is complete:
// the text ends, or the next byte cannot continue a username, or it is a
// '.', '-' or '_' not followed by another name byte.
func mentionEnds(text string, end int) bool {
	if end >= len(text) {
		return true
	}
	c := text[end]
	if !isNameByte(c) {
		return true
	}
	if c == '.' || c == '-' || c == '_' {
		return end+1 >= len(text) || !isNameByte(text[end+1])
	}
	return false
}
