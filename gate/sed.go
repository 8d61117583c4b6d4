package gate

import "strings"

// sedScripts takes sed's scripts from -e/--expression values or, without
// them, from the first operand, and checks each. It returns the remaining
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
		case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'l', 'n', 'N', 'p', 'P', 'x', 'z', 'F':
		case 'q', 'Q', 'L':
			p.skipSpace()
			for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
				p.i++
			}
		case ':', 'b', 't', 'T':
			for p.i < len(p.s) && p.s[p.i] != ';' && p.s[p.i] != '\n' {
				p.i++
			}
		case 's':
			if r := p.substitute(); r != "" {
				return r
			}
		case 'y':
			if r := p.delimited(2); r != "" {
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
		if r := p.delimited(1); r != "" {
			return r
		}
		for p.peek() == 'I' || p.peek() == 'M' {
			p.i++
		}
	}
	return ""
}

// delimited skips n delimited parts starting at the delimiter p.s[p.i].
func (p *sedParser) delimited(n int) string {
	if p.i >= len(p.s) {
		return "ends inside a command"
	}
	delim := p.s[p.i]
	if delim == '\n' || delim == '\\' {
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
		}
	}
	return ""
}

func (p *sedParser) substitute() string {
	if r := p.delimited(2); r != "" {
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
