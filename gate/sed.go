package gate

import "strings"

// sedScripts takes sed's scripts from -e/--expression values or, without
// them, from the first operand, and checks them. It returns the remaining
// operands, which are the files sed reads.
func sedScripts(seen []flagUse, operands []arg) ([]arg, *Decision) {
	var scripts []string
	for _, f := range seen {
		if f.name == "-e" || f.name == "--expression" {
			scripts = append(scripts, f.value)
		}
	}
	if len(scripts) == 0 {
		if len(operands) == 0 {
			return nil, ptr(confirm("sed.script", "`sed` without a script"))
		}
		if operands[0].glob {
			return nil, ptr(confirm("word.glob", "an unquoted glob as a sed script"))
		}
		scripts = append(scripts, operands[0].s)
		operands = operands[1:]
	}
	// GNU sed joins its -e scripts with newlines before it parses them, so
	// a script that ends inside a command continues in the next one.
	// Each script is also checked alone, in case a sed reads them apart.
	if len(scripts) > 1 {
		scripts = append(scripts, strings.Join(scripts, "\n"))
	}
	for _, s := range scripts {
		if reason := sedUnsafe(s); reason != "" {
			return nil, ptr(confirm("sed.script", "sed script %q %s", s, reason))
		}
	}
	return operands, nil
}

// sedUnsafe parses a sed script and returns why it is not read-only, or ""
// when it only prints, deletes, substitutes in the output stream, or moves
// between lines. Commands that write files (w, W, s///w), read files (r,
// R), run programs (e, s///e) or that the parser does not know are
// reported.
//
// The parser follows GNU sed 4.9 and is strict where sed implementations
// differ, so that every reading of the script is checked: a label ends at
// whitespace, `;` or `}` (GNU) but must then be followed by a separator
// (so a POSIX reading, where the label runs to the end of the line, hides
// nothing either); a bracket expression in a regular expression may not
// hold the delimiter, a newline or `\]` (GNU reads `s/[/]/x/` as one
// regex, a naive reader as two parts); text after a command is an error.
func sedUnsafe(script string) string {
	p := sedParser{s: script}
	return p.run()
}

type sedParser struct {
	s string
	i int
}

func (p *sedParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sedParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sedParser) run() string {
	for {
		for p.i < len(p.s) && strings.IndexByte(" \t\n;", p.s[p.i]) >= 0 {
			p.i++
		}
		if p.i >= len(p.s) {
			return ""
		}
		if p.peek() == '#' {
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
			continue
		}
		if r := p.address(); r != "" {
			return r
		}
		if p.peek() == ',' {
			p.i++
			p.skipSpace()
			if p.peek() == '+' || p.peek() == '~' {
				p.i++
				if p.peek() < '0' || p.peek() > '9' {
					return "has an address the gate cannot read"
				}
			}
			if p.i >= len(p.s) || strings.IndexByte("0123456789$/\\", p.s[p.i]) < 0 {
				return "has an address the gate cannot read"
			}
			if r := p.address(); r != "" {
				return r
			}
		}
		p.skipSpace()
		for p.peek() == '!' {
			p.i++
			p.skipSpace()
		}
		if p.i >= len(p.s) {
			return "ends without a command"
		}
		c := p.s[p.i]
		p.i++
		switch c {
		case '{', '}':
			continue // a block needs no separator after it
		case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'q', 'Q', 'l', 'L':
			p.skipSpace()
			for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
				p.i++
			}
		case ':', 'b', 't', 'T':
			if r := p.label(c); r != "" {
				return r
			}
		case 's':
			if r := p.substitute(); r != "" {
				return r
			}
		case 'y':
			if r := p.delimited(2, false); r != "" {
				return r
			}
		case 'w', 'W':
			return "writes a file (sed command " + string(c) + ")"
		case 'r', 'R':
			return "reads another file (sed command " + string(c) + ")"
		case 'e':
			return "runs a shell command (sed command e)"
		default:
			return "uses sed command " + string(c) + ", which the gate does not check"
		}
		p.skipSpace()
		if p.i < len(p.s) && strings.IndexByte(";\n}", p.s[p.i]) < 0 {
			return "has text after a command that the gate does not understand"
		}
	}
}

// label reads the label of :, b, t or T. Only plain labels are read-only:
// letters, digits and ._- , followed by nothing but a separator. GNU sed
// ends a label at whitespace or `;` and reads what follows as the next
// command (`:a e id` runs id); POSIX sed reads to the end of the line.
// Requiring a separator right after the label makes both readings agree.
func (p *sedParser) label(cmd byte) string {
	p.skipSpace()
	start := p.i
	for p.i < len(p.s) && isLabelByte(p.s[p.i]) {
		p.i++
	}
	if cmd == ':' && p.i == start {
		return "has a label the gate cannot read"
	}
	p.skipSpace()
	if p.i < len(p.s) && strings.IndexByte(";\n}", p.s[p.i]) < 0 {
		return "has text after a label (GNU sed runs it as the next command)"
	}
	if cmd == ':' && p.peek() == '}' {
		return "has a label the gate cannot read"
	}
	return ""
}

func isLabelByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// address skips one address: a line number, $, first~step, /regex/ or
// \cREGEXc, optionally followed by I or M.
func (p *sedParser) address() string {
	switch c := p.peek(); {
	case c >= '0' && c <= '9':
		for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '~') {
			p.i++
		}
	case c == '$':
		p.i++
	case c == '/' || c == '\\':
		if c == '\\' {
			p.i++
		}
		if p.i >= len(p.s) || p.s[p.i] == '\n' || p.s[p.i] == '\\' {
			return "has an address the gate cannot read"
		}
		if r := p.delimited(1, true); r != "" {
			return r
		}
		for p.peek() == 'I' || p.peek() == 'M' {
			p.i++
		}
	}
	return ""
}

// delimited skips n delimited parts starting at the delimiter p.s[p.i].
// When regex is set, the first part is a regular expression whose bracket
// expressions are checked (see bracket).
func (p *sedParser) delimited(n int, regex bool) string {
	if p.i >= len(p.s) {
		return "ends inside a command"
	}
	delim := p.s[p.i]
	if delim == '\n' || delim == '\\' || delim == ' ' || delim == '\t' {
		return "uses a delimiter the gate cannot read"
	}
	p.i++
	for k := 0; k < n; k++ {
		for {
			if p.i >= len(p.s) {
				return "ends inside a command"
			}
			c := p.s[p.i]
			p.i++
			if c == '\\' {
				p.i++
				continue
			}
			if c == delim {
				break
			}
			if c == '[' && regex && k == 0 {
				if r := p.bracket(delim); r != "" {
					return r
				}
			}
		}
	}
	return ""
}

// bracket skips a bracket expression whose `[` was just read. GNU sed
// does not end a regular expression at a delimiter inside brackets
// (`s/[/]/x/` replaces a slash), other readers do; a bracket that holds
// the delimiter, a newline or `\]` is reported so that both readings
// always end the regex at the same place.
func (p *sedParser) bracket(delim byte) string {
	const ambiguous = "has a bracket expression the gate cannot read unambiguously"
	if p.peek() == '^' {
		p.i++
	}
	if p.peek() == ']' {
		p.i++
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == delim || c == '\n':
			return ambiguous
		case c == '\\':
			if p.i >= len(p.s) || p.s[p.i] == ']' || p.s[p.i] == '\n' {
				return ambiguous
			}
			p.i++
		case c == '[' && p.i < len(p.s) && strings.IndexByte(":.=", p.s[p.i]) >= 0:
			end := "" + string(p.s[p.i]) + "]"
			j := strings.Index(p.s[p.i+1:], end)
			if j < 0 {
				return ambiguous
			}
			inner := p.s[p.i+1 : p.i+1+j]
			if strings.IndexByte(inner, delim) >= 0 || strings.ContainsAny(inner, "\n\\[") {
				return ambiguous
			}
			p.i += 1 + j + 2
		case c == ']':
			return ""
		}
	}
	return "ends inside a command"
}

func (p *sedParser) substitute() string {
	if r := p.delimited(2, true); r != "" {
		return r
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == 'g' || c == 'p' || c == 'i' || c == 'I' || c == 'm' || c == 'M' || c >= '0' && c <= '9':
			p.i++
		case c == 'w':
			return "writes a file (s///w)"
		case c == 'e':
			return "runs the pattern space as a shell command (s///e)"
		default:
			return ""
		}
	}
	return ""
}
