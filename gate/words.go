package gate

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// arg is one shell word resolved to the text bash would pass, when the gate
// can know it without running anything.
type arg struct {
	s     string
	glob  bool // has unquoted * ? [ that bash would expand
	tilde bool // starts with an unquoted ~ that bash would expand
}

// strictWord resolves a word made only of plain text, single quotes and
// double quotes holding plain text. Anything bash would expand at run time
// (variables, substitutions, arithmetic, $'…', brace forms, extended globs)
// is a Decision to confirm instead.
func strictWord(w *syntax.Word) (arg, *Decision) {
	return strictWordIn(w, nil)
}

// strictWordIn is strictWord where the loop variables in vars (`for f in
// a b`) stand for their item. Quoted ("$f", "/var/log/$f") the item is
// one word; unquoted, bash splits it on blanks and expands globs in it, so
// only an item without blanks and glob characters may stand there. An
// item that is a glob (for f in /var/log/*.log) makes the word a glob: it
// names one of the files the pattern matches.
func strictWordIn(w *syntax.Word, vars map[string]arg) (arg, *Decision) {
	var a arg
	var b strings.Builder
	var unquoted strings.Builder // unquoted text only, for brace detection
	for i, part := range w.Parts {
		switch x := part.(type) {
		case *syntax.Lit:
			s, glob := unescapeLit(x.Value)
			if i == 0 && strings.HasPrefix(x.Value, "~") {
				a.tilde = true
			}
			a.glob = a.glob || glob
			b.WriteString(s)
			unquoted.WriteString(x.Value)
		case *syntax.SglQuoted:
			if x.Dollar {
				return a, ptr(confirm("word.ansi-c", "$'…' quoting hides the real text of a word"))
			}
			b.WriteString(x.Value)
			unquoted.WriteByte(0)
		case *syntax.DblQuoted:
			if x.Dollar {
				return a, ptr(confirm("word.locale", "$\"…\" quoting is translated at run time"))
			}
			for _, qp := range x.Parts {
				if item, ok := loopVar(qp, vars); ok {
					b.WriteString(item.s)
					a.glob = a.glob || item.glob
					continue
				}
				l, ok := qp.(*syntax.Lit)
				if !ok {
					return a, ptr(expansionDecision(qp))
				}
				b.WriteString(unescapeDouble(l.Value))
			}
			unquoted.WriteByte(0)
		default:
			item, ok := loopVar(part, vars)
			if !ok {
				return a, ptr(expansionDecision(part))
			}
			if item.glob || strings.ContainsAny(item.s, " \t\n*?[") {
				return a, ptr(confirm("word.variable", "unquoted $%s is split and globbed by bash; quote it (\"$%s\")", part.(*syntax.ParamExp).Param.Value, part.(*syntax.ParamExp).Param.Value))
			}
			b.WriteString(item.s)
			unquoted.WriteByte(0)
		}
	}
	if hasBraceForm(unquoted.String()) {
		return a, ptr(confirm("word.brace", "brace expansion in %q makes several words the gate cannot see", b.String()))
	}
	if a.glob && !strings.ContainsRune(unquoted.String(), 0) {
		// Unquoted text only (mvdan.cc/sh cuts .items[] into two Lits).
		a.glob = litGlob(unquoted.String())
	}
	a.s = b.String()
	return a, nil
}

func ptr(d Decision) *Decision { return &d }

// loopVar returns the item a plain $NAME or ${NAME} stands for, when NAME
// is a loop variable in vars.
func loopVar(part syntax.WordPart, vars map[string]arg) (arg, bool) {
	p, ok := part.(*syntax.ParamExp)
	if !ok || p.Param == nil || len(vars) == 0 || !simpleParam(p, p.Param.Value) {
		return arg{}, false
	}
	item, ok := vars[p.Param.Value]
	return item, ok
}

// expansionDecision explains why a non-literal word part is not pass.
func expansionDecision(part syntax.WordPart) Decision {
	switch x := part.(type) {
	case *syntax.ParamExp:
		name := "…"
		if x.Param != nil {
			name = x.Param.Value
		}
		return confirm("word.variable", "$%s is only known when the command runs", name)
	case *syntax.CmdSubst:
		return confirm("syntax.substitution", "command substitution $(…) runs another command")
	case *syntax.ProcSubst:
		return confirm("syntax.substitution", "process substitution <(…) or >(…) runs another command")
	case *syntax.ArithmExp:
		return confirm("word.arithmetic", "arithmetic expansion $((…)) can run commands through array subscripts")
	case *syntax.ExtGlob:
		return confirm("word.glob", "extended glob patterns are not resolved by the gate")
	}
	return confirm("word.unknown", "a word the gate does not understand")
}

// unescapeLit applies bash's unquoted backslash rules to a literal: `\x`
// is x and backslash-newline disappears. It also reports unescaped glob
// characters.
func unescapeLit(s string) (string, bool) {
	if !strings.ContainsAny(s, `\*?[`) {
		return s, false
	}
	var b strings.Builder
	glob := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		case c == '*' || c == '?' || c == '[':
			glob = true
		}
		b.WriteByte(c)
	}
	return b.String(), glob
}

// litGlob reports whether bash expands the unquoted text s (a whole
// word) as a glob: an unescaped * or ?, or a [ that a later ] closes as a
// bracket expression. In .items[] the ] is the set's first member, not its
// end, and nothing closes the set, so the [ is literal and the word is
// itself whether or not a file of that name exists. Only a whole word is
// judged so: in .a["x"] the ] after a quoted part still closes the set.
func litGlob(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?':
			return true
		case '[':
			j := i + 1
			if j < len(s) && (s[j] == '!' || s[j] == '^') {
				j++
			}
			if j < len(s) && s[j] == ']' {
				j++
			}
			if strings.IndexByte(s[j:], ']') >= 0 {
				return true
			}
		}
	}
	return false
}

// unescapeDouble applies the backslash rules inside double quotes: only
// \$ \` \" \\ and backslash-newline are escapes.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hasBraceForm reports whether unquoted text holds {a,b} or {x..y}, which
// bash expands into several words. Quoted text is passed as NUL bytes, so a
// quoted brace never counts.
func hasBraceForm(s string) bool {
	for {
		i := strings.IndexByte(s, '{')
		if i < 0 {
			return false
		}
		if i > 0 && s[i-1] == '\\' {
			s = s[i+1:]
			continue
		}
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			return false
		}
		inner := s[i+1 : i+j]
		if strings.Contains(inner, ",") || strings.Contains(inner, "..") {
			return true
		}
		s = s[i+1:]
	}
}

// unknownField marks a word the deny scan could not resolve. The input
// never holds a NUL byte (that is denied before parsing), so it cannot be
// confused with real text.
const unknownField = "\x00"

// looseFields resolves a word the way the deny scan needs: as bash would,
// wherever that is knowable without running anything. $'…' is decoded,
// $HOME and ~ stand for "~", and an unquoted $IFS splits the word. It
// returns nil if some part cannot be known.
func looseFields(w *syntax.Word) []string {
	return looseFieldsIn(w, nil)
}

// looseFieldsIn is looseFields where the loop variables in vars stand for
// the item of the iteration being scanned.
func looseFieldsIn(w *syntax.Word, vars map[string]string) []string {
	var fields []string
	var b strings.Builder
	for _, part := range w.Parts {
		switch x := part.(type) {
		case *syntax.Lit:
			s, _ := unescapeLit(x.Value)
			b.WriteString(s)
		case *syntax.SglQuoted:
			if x.Dollar {
				b.WriteString(ansiC(x.Value))
			} else {
				b.WriteString(x.Value)
			}
		case *syntax.DblQuoted:
			for _, qp := range x.Parts {
				switch y := qp.(type) {
				case *syntax.Lit:
					b.WriteString(unescapeDouble(y.Value))
				case *syntax.ParamExp:
					if v, ok := vars[paramName(y)]; ok && simpleParam(y, paramName(y)) {
						b.WriteString(v)
						continue
					}
					if !simpleParam(y, "HOME") {
						return nil
					}
					b.WriteString("~")
				default:
					return nil
				}
			}
		case *syntax.ParamExp:
			switch {
			case vars != nil && simpleParam(x, paramName(x)) && hasKey(vars, paramName(x)):
				b.WriteString(vars[paramName(x)])
			case simpleParam(x, "HOME"):
				b.WriteString("~")
			case simpleParam(x, "IFS"):
				if b.Len() > 0 {
					fields = append(fields, b.String())
					b.Reset()
				}
			default:
				return nil
			}
		default:
			return nil
		}
	}
	if b.Len() > 0 || len(fields) == 0 {
		fields = append(fields, b.String())
	}
	return fields
}

func paramName(p *syntax.ParamExp) string {
	if p.Param == nil {
		return ""
	}
	return p.Param.Value
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func simpleParam(p *syntax.ParamExp, name string) bool {
	return p.Param != nil && p.Param.Value == name && p.Index == nil && p.Exp == nil &&
		p.Repl == nil && p.Slice == nil && !p.Excl && !p.Length && p.Names == 0
}

// looseArgs resolves a command's words for the deny scan; a word that
// cannot be known becomes unknownField.
func looseArgs(words []*syntax.Word) []string {
	return looseArgsIn(words, nil)
}

// looseArgsIn is looseArgs with loop variables (see looseFieldsIn).
func looseArgsIn(words []*syntax.Word, vars map[string]string) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		f := looseFieldsIn(w, vars)
		if f == nil {
			out = append(out, unknownField)
			continue
		}
		out = append(out, f...)
	}
	return out
}

// ansiC decodes the body of a $'…' word as bash does.
func ansiC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(e)
		case 'x', 'u', 'U':
			max := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			if e == 'x' {
				b.WriteByte(byte(n))
			} else {
				b.WriteString(string(rune(n)))
			}
			i = j - 1
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			}
		default:
			if e >= '0' && e <= '7' {
				j := i
				for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				n, _ := strconv.ParseUint(s[i:j], 8, 16)
				b.WriteByte(byte(n))
				i = j - 1
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	// bash stops a $'…' word at a decoded NUL byte.
	out := b.String()
	if k := strings.IndexByte(out, 0); k >= 0 {
		out = out[:k]
	}
	if !utf8.ValidString(out) {
		out = strings.ToValidUTF8(out, "\uFFFD")
	}
	return out
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
