package gate

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// maxDepth bounds how deep nested scripts (`bash -c "bash -c '…'"`) are
// parsed by the deny scan.
const maxDepth = 4

// scanner looks for deny rules anywhere in a parsed command.
type scanner struct {
	p *Policy
	c *compiled
}

// file scans a whole tree; hit reports a deny.
func (s *scanner) file(f *syntax.File, depth int) (Decision, bool) {
	var found Decision
	hit := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if hit {
			return false
		}
		var d Decision
		switch x := n.(type) {
		case *syntax.CallExpr:
			d, hit = s.call(looseArgs(x.Args), depth)
		case *syntax.Redirect:
			d, hit = s.redirect(x)
		case *syntax.FuncDecl:
			d, hit = s.forkBomb(x)
		case *syntax.Stmt:
			d, hit = s.fedShell(x, depth)
		case *syntax.BinaryCmd:
			d, hit = s.pipedScript(x, depth)
		}
		if hit {
			found = d
		}
		return !hit
	})
	return found, hit
}

// script parses text as a nested script and scans it.
func (s *scanner) script(text string, depth int) (Decision, bool) {
	if depth >= maxDepth || strings.IndexByte(text, 0) >= 0 {
		return Decision{}, false
	}
	f, err := parse(text)
	if err != nil {
		return Decision{}, false
	}
	return s.file(f, depth+1)
}

func base(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[i+1:]
	}
	return name
}

// call scans one simple command given as loosely resolved fields.
func (s *scanner) call(args []string, depth int) (Decision, bool) {
	if len(args) == 0 || args[0] == unknownField {
		return Decision{}, false
	}
	name := base(args[0])
	if reason := matchName(s.p.Deny.Commands, name); reason != "" {
		return deny("deny.command", "`%s` %s", name, reason), true
	}
	if verbs, ok := s.p.Deny.Verbs[name]; ok {
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			if reason, ok := verbs[a]; ok {
				return deny("deny.verb", "`%s %s` %s", name, a, reason), true
			}
			break
		}
	}
	if s.c.recCommands[name] {
		if d, hit := s.recursive(name, args[1:]); hit {
			return d, true
		}
	}
	if name == "dd" {
		for _, a := range args[1:] {
			if t, ok := strings.CutPrefix(a, "of="); ok {
				if d, hit := s.writeTarget("dd of="+t, t); hit {
					return d, true
				}
			}
		}
	}
	if s.c.deviceWriters[name] {
		for _, a := range args[1:] {
			if d, hit := s.writeTarget("`"+name+"` onto "+a, a); hit {
				return d, true
			}
		}
	}
	if name == "find" {
		return s.find(args[1:], depth)
	}
	if s.c.shells[name] {
		if text, ok := shellScript(args[1:]); ok {
			return s.script(text, depth)
		}
	}
	if name == "eval" {
		return s.script(strings.Join(args[1:], " "), depth)
	}
	if w := s.p.Wrappers[name]; w != nil {
		return s.unwrap(w, args[1:], depth)
	}
	return Decision{}, false
}

// shellScript finds the string of `sh -c STRING` (also in clusters such as
// -lc or -ec).
func shellScript(args []string) (string, bool) {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			if a == "--" || strings.HasPrefix(a, "--") {
				continue
			}
			return "", false // a script file or operand: not a -c string
		}
		if strings.Contains(a[1:], "c") && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// unwrap skips a wrapper's flags, assignments and positional operands
// (leniently: an unknown flag is taken to have no value) and scans the
// wrapped command.
func (s *scanner) unwrap(w *Wrapper, args []string, depth int) (Decision, bool) {
	if w.ScriptFlag != "" {
		for i, a := range args {
			if a == w.ScriptFlag && i+1 < len(args) {
				return s.script(args[i+1], depth)
			}
		}
	}
	i := 0
	for i < len(args) {
		a := args[i]
		if a == "--" {
			i++
			break
		}
		if !isFlag(a) {
			break
		}
		i++
		if containsString(w.ValueFlags, a) || (len(a) == 2 && !strings.HasPrefix(a, "--") && containsString(w.ValueFlags, a)) {
			i++
		}
	}
	if w.Assignments {
		for i < len(args) && strings.Contains(args[i], "=") && !strings.HasPrefix(args[i], "=") {
			i++
		}
	}
	i += w.Positional
	if i >= len(args) {
		return Decision{}, false
	}
	return s.call(args[i:], depth)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// recursive denies rm -r, chmod -R, chown -R and chgrp -R on a protected
// target, and any --no-preserve-root.
func (s *scanner) recursive(name string, args []string) (Decision, bool) {
	rec := false
	var targets []string
	endFlags := false
	for _, a := range args {
		switch {
		case endFlags || !strings.HasPrefix(a, "-") || a == "-":
			targets = append(targets, a)
		case a == "--":
			endFlags = true
		case a == "--no-preserve-root":
			return deny("deny.recursive-root", "`%s --no-preserve-root` exists only to destroy /", name), true
		case a == "--recursive":
			rec = true
		case !strings.HasPrefix(a, "--"):
			letters := a[1:]
			if strings.Contains(letters, "R") || name == "rm" && strings.Contains(letters, "r") {
				rec = true
			}
		}
	}
	if !rec {
		return Decision{}, false
	}
	for _, t := range targets {
		if t == unknownField {
			continue
		}
		clean := cleanTarget(t)
		for _, pp := range s.c.recTargets {
			if matchSegs(pp.segs, clean) || (!pp.anchored && len(pp.segs) > 0 && pp.segs[0] == "~" && matchSegs(pp.segs, clean)) {
				return deny("deny.recursive-root", "`%s` recursively on %s is never run", name, t), true
			}
		}
	}
	return Decision{}, false
}

// cleanTarget cleans a path operand for the recursive-target check and
// removes a trailing /* or /.* (rm -rf /* empties / as surely as rm -rf /).
func cleanTarget(t string) []string {
	for {
		trimmed := strings.TrimSuffix(strings.TrimSuffix(t, "/*"), "/.*")
		if trimmed == t {
			break
		}
		t = trimmed
		if t == "" {
			t = "/"
		}
	}
	if t == "~" || strings.HasPrefix(t, "~/") {
		return strings.Split(path.Clean(t), "/")
	}
	if !strings.HasPrefix(t, "/") {
		return []string{"\x00relative"}
	}
	t = path.Clean(t)
	if t == "/" {
		return nil
	}
	return strings.Split(t[1:], "/")
}

// writeTarget denies writes to block devices and to the write targets.
func (s *scanner) writeTarget(what, target string) (Decision, bool) {
	if target == unknownField || !strings.HasPrefix(target, "/") {
		return Decision{}, false
	}
	w := resolvePath(target, "", "")
	for _, pp := range s.c.blockDevices {
		if pp.matches(w) {
			return deny("deny.block-device", "%s writes to a block device and destroys its data", what), true
		}
	}
	for _, pp := range s.c.writeTargets {
		if pp.matches(w) {
			return deny("deny.write-target", "%s writes to %s, which is never written", what, target), true
		}
	}
	return Decision{}, false
}

func (s *scanner) redirect(r *syntax.Redirect) (Decision, bool) {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrInOut, syntax.DplOut:
	default:
		return Decision{}, false
	}
	if r.Word == nil {
		return Decision{}, false
	}
	f := looseFields(r.Word)
	if len(f) != 1 {
		return Decision{}, false
	}
	return s.writeTarget("redirection "+r.Op.String()+" "+f[0], f[0])
}

// forkBomb denies a function that calls itself in a pipeline or in the
// background: :(){ :|:& };:
func (s *scanner) forkBomb(fn *syntax.FuncDecl) (Decision, bool) {
	if !s.p.Deny.ForkBombs || fn.Name == nil || fn.Body == nil {
		return Decision{}, false
	}
	self, spawns := false, false
	syntax.Walk(fn.Body, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CallExpr:
			if len(x.Args) > 0 && x.Args[0].Lit() == fn.Name.Value {
				self = true
			}
		case *syntax.BinaryCmd:
			if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
				spawns = true
			}
		case *syntax.Stmt:
			if x.Background {
				spawns = true
			}
		}
		return true
	})
	if self && spawns {
		return deny("deny.fork-bomb", "function %s calls itself in a pipeline or in the background: a fork bomb", fn.Name.Value), true
	}
	return Decision{}, false
}

// fedShell scans a here-document or here-string fed to a shell.
func (s *scanner) fedShell(st *syntax.Stmt, depth int) (Decision, bool) {
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return Decision{}, false
	}
	args := looseArgs(call.Args)
	if !s.isShell(args) {
		return Decision{}, false
	}
	for _, r := range st.Redirs {
		var w *syntax.Word
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			w = r.Hdoc
		case syntax.WordHdoc:
			w = r.Word
		}
		if w == nil {
			continue
		}
		if text := looseFields(w); text != nil {
			if d, hit := s.script(strings.Join(text, " "), depth); hit {
				return d, true
			}
		}
	}
	return Decision{}, false
}

// isShell reports a shell that reads its script from stdin (no -c, no
// script file).
func (s *scanner) isShell(args []string) bool {
	if len(args) == 0 || !s.c.shells[base(args[0])] {
		return false
	}
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "-") {
			return false
		}
		if !strings.HasPrefix(a, "--") && strings.Contains(a, "c") {
			return false
		}
	}
	return true
}

// pipedScript scans `echo SCRIPT | sh` and `printf SCRIPT | bash`.
func (s *scanner) pipedScript(b *syntax.BinaryCmd, depth int) (Decision, bool) {
	if b.Op != syntax.Pipe && b.Op != syntax.PipeAll {
		return Decision{}, false
	}
	left, ok1 := b.X.Cmd.(*syntax.CallExpr)
	right, ok2 := b.Y.Cmd.(*syntax.CallExpr)
	if !ok1 || !ok2 || len(left.Args) == 0 || !s.isShell(looseArgs(right.Args)) {
		return Decision{}, false
	}
	args := looseArgs(left.Args)
	switch base(args[0]) {
	case "echo", "printf":
	default:
		return Decision{}, false
	}
	var words []string
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") && len(words) == 0 {
			continue
		}
		words = append(words, a)
	}
	text := strings.Join(words, " ")
	text = strings.ReplaceAll(text, `\n`, "\n")
	return s.script(text, depth)
}

// find denies find on a protected root with -delete, and scans the
// commands of -exec, -execdir, -ok and -okdir.
func (s *scanner) find(args []string, depth int) (Decision, bool) {
	var starts []string
	i := 0
	for i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "(" && args[i] != "!" {
		starts = append(starts, args[i])
		i++
	}
	for ; i < len(args); i++ {
		switch args[i] {
		case "-delete":
			for _, t := range starts {
				clean := cleanTarget(t)
				for _, pp := range s.c.recTargets {
					if matchSegs(pp.segs, clean) {
						return deny("deny.recursive-root", "`find %s -delete` deletes everything under %s", t, t), true
					}
				}
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			if d, hit := s.call(args[i+1:j], depth); hit {
				return d, true
			}
			i = j
		}
	}
	return Decision{}, false
}
