package gate

import (
	"errors"
	"regexp/syntax"
	"strconv"
	"strings"
	"unicode/utf16"
)

// jq programs are judged by their tokens, cut as jq's own lexer cuts them
// (jq 1.6, src/lexer.l), not by searching their text: jq reads `$ ENV`,
// `$#…\nENV` and `"\(env)"` as the environment, and `.env` as a field.

type jqKind int

const (
	jqPunct  jqKind = iota
	jqIdent         // a name or keyword, possibly mod::name
	jqField         // .name
	jqVar           // $name; jq 1.6 allows blanks and comments after the $
	jqString        // "…"; a string with \(…) is followed by its code in ( )
	jqNumber
)

// jqToken is one token of a jq program.
type jqToken struct {
	kind jqKind
	// text is the name (without . or $), the punctuation, the number, or
	// the decoded text of a string.
	text string
	// literal is false for a string whose text the gate cannot know: it
	// interpolates \(…) or holds an escape jq rejects.
	literal bool
}

var errJQLex = errors.New("not a jq program the gate can read")

// jqLex cuts a jq program into tokens. The code of a string's
// interpolations follows the string, each in its own ( ), so the tokens
// of the whole program are one flat list with balanced brackets. An
// unterminated string, an unbalanced bracket and a comment holding a
// backslash (jq 1.7 continues such a comment on the next line, 1.6 does
// not) are errors.
func jqLex(src string) ([]jqToken, error) {
	var toks []jqToken
	rest, err := jqLexCode(src, &toks, false)
	if err != nil {
		return nil, err
	}
	if rest != "" {
		return nil, errJQLex
	}
	return toks, nil
}

// jqLexCode lexes code until the end of src, or, in an interpolation,
// until the ) that closes it; it returns what follows that ).
func jqLexCode(src string, toks *[]jqToken, interp bool) (string, error) {
	var stack []byte
	for len(src) > 0 {
		c := src[0]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			src = src[1:]
		case c == '#':
			end := strings.IndexByte(src, '\n')
			if end < 0 {
				end = len(src)
			}
			if strings.IndexByte(src[:end], '\\') >= 0 {
				return "", errJQLex
			}
			src = src[end:]
		case c == '"':
			var err error
			if src, err = jqLexString(src[1:], toks); err != nil {
				return "", err
			}
		case c == '$':
			src = jqSkipBlank(src[1:])
			if n := jqIdentLen(src); n > 0 {
				*toks = append(*toks, jqToken{kind: jqVar, text: src[:n]})
				src = src[n:]
			} else {
				*toks = append(*toks, jqToken{kind: jqPunct, text: "$"})
			}
		case c == '.' && len(src) > 1 && isJQNameStart(src[1]):
			n := 1
			for n+1 < len(src) && isJQNameChar(src[n+1]) {
				n++
			}
			*toks = append(*toks, jqToken{kind: jqField, text: src[1 : n+1]})
			src = src[n+1:]
		case c >= '0' && c <= '9' || c == '.' && len(src) > 1 && src[1] >= '0' && src[1] <= '9':
			n := 1
			for n < len(src) && (src[n] >= '0' && src[n] <= '9' || src[n] == '.' || src[n] == 'e' || src[n] == 'E' ||
				(src[n] == '+' || src[n] == '-') && (src[n-1] == 'e' || src[n-1] == 'E')) {
				n++
			}
			*toks = append(*toks, jqToken{kind: jqNumber, text: src[:n]})
			src = src[n:]
		case isJQNameStart(c):
			n := jqIdentLen(src)
			*toks = append(*toks, jqToken{kind: jqIdent, text: src[:n]})
			src = src[n:]
		case c == '(' || c == '[' || c == '{':
			stack = append(stack, c)
			*toks = append(*toks, jqToken{kind: jqPunct, text: src[:1]})
			src = src[1:]
		case c == ')' || c == ']' || c == '}':
			if len(stack) == 0 && interp && c == ')' {
				return src[1:], nil
			}
			if len(stack) == 0 || stack[len(stack)-1] != map[byte]byte{')': '(', ']': '[', '}': '{'}[c] {
				return "", errJQLex
			}
			stack = stack[:len(stack)-1]
			*toks = append(*toks, jqToken{kind: jqPunct, text: src[:1]})
			src = src[1:]
		default:
			*toks = append(*toks, jqToken{kind: jqPunct, text: src[:1]})
			src = src[1:]
		}
	}
	if interp || len(stack) > 0 {
		return "", errJQLex
	}
	return "", nil
}

// jqLexString lexes a string whose opening quote is gone; it appends the
// string and then the code of each interpolation in ( ).
func jqLexString(src string, toks *[]jqToken) (string, error) {
	at := len(*toks)
	*toks = append(*toks, jqToken{kind: jqString, literal: true})
	var b strings.Builder
	for {
		if src == "" {
			return "", errJQLex
		}
		c := src[0]
		switch {
		case c == '"':
			(*toks)[at].text = b.String()
			return src[1:], nil
		case c == '\\' && len(src) > 1 && src[1] == '(':
			(*toks)[at].literal = false
			*toks = append(*toks, jqToken{kind: jqPunct, text: "("})
			var err error
			if src, err = jqLexCode(src[2:], toks, true); err != nil {
				return "", err
			}
			*toks = append(*toks, jqToken{kind: jqPunct, text: ")"})
		case c == '\\' && len(src) > 1:
			n, r, ok := jqEscape(src)
			if !ok {
				(*toks)[at].literal = false
			}
			b.WriteString(r)
			src = src[n:]
		case c == '\\':
			return "", errJQLex
		default:
			b.WriteByte(c)
			src = src[1:]
		}
	}
}

// jqEscape decodes the escape at the start of s (a backslash and more):
// its length, its text, and whether jq accepts it.
func jqEscape(s string) (int, string, bool) {
	switch s[1] {
	case '"', '\\', '/':
		return 2, s[1:2], true
	case 'b':
		return 2, "\b", true
	case 'f':
		return 2, "\f", true
	case 'n':
		return 2, "\n", true
	case 'r':
		return 2, "\r", true
	case 't':
		return 2, "\t", true
	case 'u':
		if len(s) >= 6 {
			if v, err := strconv.ParseUint(s[2:6], 16, 16); err == nil {
				r := rune(v)
				if utf16.IsSurrogate(r) {
					return 6, "", false // pairs: not worth decoding here
				}
				return 6, string(r), true
			}
		}
		return 2, "", false
	}
	return 2, "", false
}

func jqSkipBlank(s string) string {
	for s != "" {
		switch {
		case s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r':
			s = s[1:]
		case s[0] == '#':
			end := strings.IndexByte(s, '\n')
			if end < 0 || strings.IndexByte(s[:end], '\\') >= 0 {
				return s // the caller's lexer reports it
			}
			s = s[end:]
		default:
			return s
		}
	}
	return s
}

// jqIdentLen is the length of the identifier (a, a::b) at the start of s.
func jqIdentLen(s string) int {
	n := 0
	for {
		if n >= len(s) || !isJQNameStart(s[n]) {
			return n
		}
		m := n + 1
		for m < len(s) && isJQNameChar(s[m]) {
			m++
		}
		if m+2 < len(s) && s[m] == ':' && s[m+1] == ':' && isJQNameStart(s[m+2]) {
			n = m + 2
			continue
		}
		return m
	}
}

func isJQNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isJQNameChar(c byte) bool { return isJQNameStart(c) || c >= '0' && c <= '9' }

// jqProblem reports why a jq program must not pass, with the rule
// (jq.unsafe: it reads the environment or files; jq.endless: it may never
// end on jq 1.6, Debian's jq), or "" when it may.
func jqProblem(src string) (rule, why string) {
	toks, err := jqLex(src)
	if err != nil {
		return "jq.unsafe", "is not a jq program the gate can read (an unterminated string, unbalanced brackets, or a comment with a backslash, which jq versions end differently)"
	}
	for i, t := range toks {
		call := i+1 < len(toks) && toks[i+1].kind == jqPunct && toks[i+1].text == "("
		switch t.kind {
		case jqVar:
			if t.text == "ENV" {
				return "jq.unsafe", "uses $ENV, the environment"
			}
		case jqIdent:
			if strings.Contains(t.text, "::") {
				return "jq.unsafe", "names " + t.text + " in a module, which it reads from a file"
			}
			switch t.text {
			case "env":
				return "jq.unsafe", "uses env, the environment"
			case "import", "include", "modulemeta":
				return "jq.unsafe", "uses " + t.text + ", which reads other files"
			case "def":
				return "jq.endless", "defines a function, which can recurse without end"
			case "repeat", "range", "while", "until", "combinations":
				return "jq.endless", "uses " + t.text + ", which can loop without end"
			case "recurse":
				if call {
					return "jq.endless", "uses recurse(f), which can loop without end"
				}
			case "sub", "gsub":
				if !call || !jqRegexEnds(toks[i+2:]) {
					return "jq.endless", "uses " + t.text + " with a regular expression that may match the empty string (or one the gate cannot read), which never ends on jq 1.6"
				}
			case "indices", "index", "rindex", "_strindices":
				if !call || !jqNonEmptyArg(toks[i+2:]) {
					return "jq.endless", "uses " + t.text + " with an argument that may be the empty string, which never ends on jq 1.6"
				}
			}
		}
	}
	return "", ""
}

// jqArgs splits the arguments of a call whose ( is gone, at the ; at its
// own depth, up to its ).
func jqArgs(toks []jqToken) [][]jqToken {
	var args [][]jqToken
	depth, start := 0, 0
	for i, t := range toks {
		if t.kind != jqPunct {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			depth++
		case ")", "]", "}":
			if depth == 0 {
				return append(args, toks[start:i])
			}
			depth--
		case ";":
			if depth == 0 {
				args = append(args, toks[start:i])
				start = i + 1
			}
		}
	}
	return append(args, toks[start:])
}

// jqRegexEnds reports whether sub/gsub with these arguments ends on jq
// 1.6, whose gsub (and sub with flag g) starts again after each match and
// so never ends on an empty one: the regex must be a string literal that
// cannot match the empty string, and flags, if given, a literal without x
// (extended: blanks and # comments vanish, "a " becomes "a").
func jqRegexEnds(toks []jqToken) bool {
	args := jqArgs(toks)
	if len(args) < 2 || len(args) > 3 || !jqLiteral(args[0]) {
		return false
	}
	if len(args) == 3 && (!jqLiteral(args[2]) || strings.Contains(args[2][0].text, "x")) {
		return false
	}
	return regexNeverEmpty(args[0][0].text)
}

// jqNonEmptyArg reports whether the one argument is a non-empty string or
// a number: jq 1.6's indices("") never ends.
func jqNonEmptyArg(toks []jqToken) bool {
	args := jqArgs(toks)
	if len(args) != 1 || len(args[0]) != 1 {
		return false
	}
	t := args[0][0]
	return t.kind == jqNumber || jqLiteral(args[0]) && t.text != ""
}

func jqLiteral(toks []jqToken) bool {
	return len(toks) == 1 && toks[0].kind == jqString && toks[0].literal
}

// regexNeverEmpty reports whether an Oniguruma regex (jq's) surely cannot
// match the empty string anywhere. It is read with Go's parser, so only
// what both read alike may pass: no { (intervals, \p{…}), no (? other
// than a named group, and nothing Go rejects (\h, \K, backreferences).
func regexNeverEmpty(re string) bool {
	if strings.Contains(re, "{") || strings.Contains(strings.ReplaceAll(re, "(?<", ""), "(?") {
		return false
	}
	for rest := re; ; {
		i := strings.Index(rest, "(?<")
		if i < 0 {
			break
		}
		if i+3 >= len(rest) || !isJQNameStart(rest[i+3]) {
			return false // (?<= and (?<! look behind
		}
		rest = rest[i+3:]
	}
	r, err := syntax.Parse(re, syntax.Perl)
	if err != nil {
		return false
	}
	return !matchesEmpty(r)
}

// matchesEmpty reports whether r can match an empty string somewhere:
// zero-width assertions (^, $, \b) count as empty.
func matchesEmpty(r *syntax.Regexp) bool {
	switch r.Op {
	case syntax.OpNoMatch, syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return false
	case syntax.OpLiteral:
		return len(r.Rune) == 0
	case syntax.OpCapture, syntax.OpPlus:
		return matchesEmpty(r.Sub[0])
	case syntax.OpRepeat:
		return r.Min == 0 || matchesEmpty(r.Sub[0])
	case syntax.OpConcat:
		for _, s := range r.Sub {
			if !matchesEmpty(s) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, s := range r.Sub {
			if matchesEmpty(s) {
				return true
			}
		}
		return false
	}
	return true // empty match, star, quest, ^, $, \b, \B
}
