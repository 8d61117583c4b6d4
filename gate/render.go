package gate

import (
	"reflect"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// render prints a parsed command back as shell text: the program thinbot
// runs for a command the gate judged, and whether that text reads back as
// the same tree (other, when it reads as another tree, is that tree).
// Comments are not kept by the parser, so none are printed; the one
// trailing newline is dropped. A command written on one line is rendered
// on one line (`a; b` stays so) where that reads back the same, else on
// several lines, as one written on several lines is.
func (c *compiled) render(f *syntax.File, src string) (program string, same bool, other *syntax.File) {
	if !strings.Contains(src, "\n") {
		program = c.print(f, true)
		if program == src {
			return program, true, nil // the same text reads as the same tree
		}
		if f2, err := parse(program); err == nil && sameTree(f, f2) {
			return program, true, nil
		}
	}
	program = c.print(f, false)
	if program == src {
		return program, true, nil
	}
	f2, err := parse(program)
	if err != nil {
		return program, false, nil
	}
	if sameTree(f, f2) {
		return program, true, nil
	}
	return program, false, f2
}

// printers holds syntax.Printers for reuse: a new one allocates a 4 KiB
// buffer, a sixth of what judging a short command costs.
type printers struct{ pool sync.Pool }

func (c *compiled) print(f *syntax.File, oneLine bool) string {
	pr, _ := c.printers.pool.Get().(*syntax.Printer)
	if pr == nil {
		pr = syntax.NewPrinter()
	}
	defer c.printers.pool.Put(pr)
	syntax.SingleLine(oneLine)(pr)
	var b strings.Builder
	if err := pr.Print(&b, f); err != nil {
		return "" // a strings.Builder does not fail
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// otherReadings returns the trees bash may run for src other than f, the
// parser's reading: the reading of f's rendering when it is not f, and the
// reading with comments ended as bash ends them. same reports whether the
// rendering reads back as f.
func (c *compiled) otherReadings(src string, f *syntax.File) (program string, alts []*syntax.File, same bool) {
	program, same, other := c.render(f, src)
	if other != nil {
		alts = append(alts, other)
	}
	if b, fixed := bashReading(src); fixed {
		if f3, err := parse(b); err == nil {
			alts = append(alts, f3)
		}
	}
	return program, alts, same
}

var posType = reflect.TypeFor[syntax.Pos]()

// sameTree reports whether two parsed commands are the same tree, their
// positions aside.
func sameTree(a, b *syntax.File) bool {
	return sameValue(reflect.ValueOf(a), reflect.ValueOf(b))
}

func sameValue(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		if a.Type() == posType {
			return true
		}
		for i := range a.NumField() {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	}
	return false // a kind the syntax tree does not hold: not the same
}

// differsFromBash looks for the constructs where bash reads the text
// otherwise than the parser, which the rendering cannot always undo:
//
//   - a comment whose line ends in a backslash: bash ends the comment at
//     the newline and runs the next line; the parser reads the
//     backslash-newline as a continuation of the line before the `#`;
//   - a backslash-newline in an unquoted here-document body: bash removes
//     it before expanding the body, so `$\` + newline + `(id)` is $(id),
//     where the parser sees a literal `$`.
//
// It returns the decision and false for such a command.
func differsFromBash(src string, f *syntax.File) (Decision, bool) {
	if commentContinues(src) {
		return confirm("input.bash-differs", "a comment ends in a backslash: bash ends the comment at the newline and runs the next line, the gate reads one line"), false
	}
	bad := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if r, ok := n.(*syntax.Redirect); ok && (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil && !quotedDelim(r.Word) {
			start, end := r.Hdoc.Pos().Offset(), r.Hdoc.End().Offset()
			if int(end) <= len(src) && start <= end && strings.Contains(src[start:end], "\\\n") {
				bad = true
			}
		}
		return !bad
	})
	if bad {
		return confirm("input.bash-differs", "a backslash-newline in an unquoted here-document: bash joins the lines before it expands the body, the gate reads them as text"), false
	}
	return Decision{}, true
}

// quotedDelim reports whether a here-document's delimiter word is quoted,
// which makes bash take the body as it is.
func quotedDelim(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		case *syntax.Lit:
			if strings.ContainsRune(x.Value, '\\') {
				return true
			}
		}
	}
	return false
}

// commentContinues reports whether src holds a comment, as the parser
// finds them, that is followed by a backslash-newline.
func commentContinues(src string) bool {
	if !strings.Contains(src, "#") || !strings.Contains(src, "\\\n") {
		return false
	}
	_, fixed := bashReading(src)
	return fixed
}

// bashReading returns src as bash reads its comments: the backslash that
// ends a comment's line is taken out of the text, so that the parser, too,
// ends the comment at the newline. fixed reports whether it changed
// anything. Each cut may uncover a comment on the next line, so it repeats
// until nothing changes (at most once per backslash).
func bashReading(src string) (string, bool) {
	fixed := false
	for range strings.Count(src, "\\\n") {
		cut := firstContinuedComment(src)
		if cut < 0 {
			break
		}
		src, fixed = src[:cut]+src[cut+1:], true
	}
	return src, fixed
}

// firstContinuedComment returns the offset of the backslash that the
// parser reads as continuing the first such comment's line, or -1.
func firstContinuedComment(src string) int {
	p := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true))
	f, err := p.Parse(strings.NewReader(src), "")
	if err != nil {
		return -1
	}
	cut := -1
	syntax.Walk(f, func(n syntax.Node) bool {
		c, ok := n.(*syntax.Comment)
		if !ok || cut >= 0 {
			return cut < 0
		}
		start, end := int(c.Pos().Offset()), int(c.End().Offset())
		if end > len(src) || start >= end {
			return true
		}
		// bash ends the comment at its first newline.
		if i := strings.IndexByte(src[start:end], '\n'); i > 0 && src[start+i-1] == '\\' {
			cut = start + i - 1
		}
		return true
	})
	return cut
}
