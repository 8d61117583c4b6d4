package gate

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// passDecision is the result when every part of a command is read-only.
var passDecision = Decision{Verdict: Pass, Rule: "read-only", Reason: "every command is on the read-only table with safe arguments"}

// Classify judges a command whose working directory is unknown; see
// ClassifyIn.
func (p *Policy) Classify(command string) Decision {
	return p.ClassifyIn("", command)
}

// ClassifyIn judges a shell command that would run in the working directory
// dir ("" = unknown). It returns the strictest verdict of the command's
// parts, with the reason and rule of the part that decided:
//
//   - deny when any part, anywhere in the tree (lists, pipelines,
//     subshells, substitutions, function bodies, wrapped commands, `bash -c`
//     strings), matches a deny rule, or the text holds a NUL byte;
//   - pass when every simple command is on the read-only table with
//     allowed arguments, every word is plain text, and nothing writes,
//     substitutes, backgrounds or defines;
//   - confirm otherwise, including parse errors and anything not
//     understood.
//
// dir resolves relative paths for the sensitive-path check and decides
// whether git runs in a trusted repository. ClassifyIn does no I/O and may
// be called concurrently.
//
// The verdict is on the tree the parser read, so the shell must run that
// tree, not the text: Decision.Program is the tree rendered back to text
// (comments dropped, layout normalised), and it is what a caller hands to
// bash. A command whose rendering does not parse back to the same tree,
// or that holds a construct where bash is known to read the text
// otherwise than the parser (a comment or an unquoted here-document body
// with a backslash-newline in it), is confirm at best.
func (p *Policy) ClassifyIn(dir, command string) Decision {
	p = p.orZero()
	c := p.comp()
	if d, ok := checkText(command, c.maxBytes); !ok {
		return d
	}
	f, err := parse(command)
	if err != nil {
		return confirm("parse-error", "the shell parser could not read the command: %v", err)
	}
	program, alts, same := c.otherReadings(command, f)
	d := p.judge(c, dir, command, f, alts, same)
	d.Program = program
	return d
}

// judge returns the verdict on the parsed command f.
// alts are the other readings of command and same whether its rendering
// reads back as f (see otherReadings).
func (p *Policy) judge(c *compiled, dir, command string, f *syntax.File, alts []*syntax.File, same bool) Decision {
	if dir != "" {
		dir = path.Clean(dir)
	}
	s := scanner{p: p, c: c, dirs: []string{dir}}
	if d, hit := s.file(f, 0); hit {
		return d
	}
	if strings.TrimSpace(command) == "" {
		return confirm("input.empty", "the command is empty")
	}
	if danglingBackslash(command) {
		return confirm("input.trailing-backslash", "the command ends in a lone backslash, which joins it to whatever text a shell reads next")
	}
	// What runs is the rendering of f. Where it does not read back as f,
	// the parser is not a faithful model of its own output, and bash may
	// read it as the second reading; where a comment runs on through a
	// backslash-newline, bash reads a third. Those are scanned for deny
	// rules too, and the command is confirm at best.
	for _, alt := range alts {
		s := scanner{p: p, c: c, dirs: []string{dir}}
		if d, hit := s.file(alt, 0); hit {
			return d
		}
	}
	if !same {
		return confirm("input.rendering", "the command does not read back the same once rendered for the shell, so the gate cannot be sure what bash would run")
	}
	if d, ok := differsFromBash(command, f); !ok {
		return d
	}
	k := checker{p: p, c: c, dirs: []string{dir}}
	if d := k.stmts(f.Stmts); d != nil {
		return *d
	}
	return passDecision
}

// danglingBackslash reports whether s ends in an odd run of backslashes.
// bash -c keeps such a backslash as a literal, but wherever the text is
// followed by more (a newline and a wrapper's next line, a remote shell's
// own framing) it becomes a line continuation and changes what the last
// word is: `cat <\` reads a file named \ on its own and fails to parse
// once anything follows.
func danglingBackslash(s string) bool {
	n := len(s) - len(strings.TrimRight(s, `\`))
	return n%2 == 1
}

func parse(src string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
}

// checker walks a parsed command looking for anything that is not pass.
type checker struct {
	p *Policy
	c *compiled
	// dirs are the directories the next command may run in: the working
	// directory, plus every directory a cd may have moved to (a cd inside
	// a subshell or pipeline may or may not still apply). "" = unknown.
	dirs []string
	// endedFlags is set by rule when the command's flags were ended by a
	// real `--` (not one taken as a flag's value).
	endedFlags bool
	// vars are the variables of the `for` loops the checker is inside,
	// each bound to the item of the iteration being checked.
	vars map[string]arg
	// passes counts loop bodies checked, so that nested loops cannot make
	// the check itself run for minutes.
	passes int
	// seen, when set (by tests), is told every simple command judged,
	// with its words resolved: what bash must run and nothing else.
	seen func(assigns []string, args []arg)
}

// sensitive returns the sensitive pattern p matches in any possible
// working directory, or "".
func (k *checker) sensitive(p string, ignore []string) string {
	for _, d := range k.dirs {
		if pat := k.c.sensitive(p, d, ignore); pat != "" {
			return pat
		}
	}
	return ""
}

// readsSensitive is the decision for reading p, which matched the
// sensitive pattern pat.
func readsSensitive(p, pat string) Decision {
	switch pat {
	case lostPath:
		return confirm("secret.path", "reads %s in %s", p, pat)
	case endlessPath:
		return confirm("input.endless", "reads %s, which never ends, so the command grows or runs until a limit stops it (head -c N bounds it)", p)
	}
	return confirm("secret.path", "reads %s, a sensitive path (matches %s)", p, pat)
}

// cd adds the directories `cd ARGS`, `pushd ARGS` or `popd ARGS` may lead
// to; the rule has already checked the flags (-L, -P, -e; -n for the
// stack) and that there is at most one operand. A cd may fail, so every
// earlier directory stays possible. The set only grows, so every entry of
// the directory stack (pushd pushes the directory it leaves) is already in
// it: popd, a bare pushd and pushd +N add nothing. `cd -` and ~- go to
// $OLDPWD, which may have been inherited: lostDir. CDPATH is assumed
// unset, as in thinbot's command environment; setting it in front of cd
// is not on the assignments list.
func (k *checker) cd(name string, args []arg) {
	physical := false
	i := 0
	for ; i < len(args) && isFlag(args[i].s); i++ {
		if args[i].s == "--" {
			i++
			break
		}
		if name == "cd" && strings.Contains(args[i].s, "P") {
			physical = true
		}
		if name != "cd" && isNumber(args[i].s[1:]) {
			return // pushd -N, popd -N: a stack entry
		}
	}
	var t arg
	switch {
	case i < len(args):
		t = args[i]
	case name == "cd":
		t = arg{s: "~", tilde: true}
	default:
		return // pushd swaps, popd pops: a directory the set holds
	}
	if name != "cd" && len(t.s) > 1 && (t.s[0] == '+' || t.s[0] == '-') && isNumber(t.s[1:]) {
		return
	}
	for _, d := range k.cdTargets(t, physical) {
		k.dirs = appendNew(k.dirs, d)
	}
}

// cdTargets returns where cd to t may lead from each possible directory.
func (k *checker) cdTargets(t arg, physical bool) []string {
	s := t.s
	switch {
	case t.glob || s == "-":
		return []string{lostDir}
	case s == "":
		return nil // cd "" stays where it is
	}
	var out []string
	for _, d := range k.dirs {
		target := s
		if t.tilde {
			e, _ := expandTilde(s, d, k.c.home)
			if !strings.HasPrefix(e, "/") {
				e = lostDir // the home or directory is unknown
			}
			target = e
		}
		switch {
		case isLost(target) || (physical && strings.Contains(target, "..")):
			// -P resolves symbolic links before `..`: lexical cleaning
			// may name another directory.
			out = appendNew(out, lostDir)
		case strings.HasPrefix(target, "/"):
			out = appendNew(out, path.Clean(target))
		case d == "" || isLost(d):
			out = appendNew(out, lostDir)
		default:
			out = appendNew(out, path.Join(d, target))
		}
	}
	return out
}

func (k *checker) stmts(list []*syntax.Stmt) *Decision {
	for _, s := range list {
		if d := k.stmt(s); d != nil {
			return d
		}
	}
	return nil
}

func (k *checker) stmt(s *syntax.Stmt) *Decision {
	switch {
	case s.Background:
		return ptr(confirm("syntax.background", "runs a command in the background with &, where it outlives the check"))
	case s.Coprocess || s.Disown:
		return ptr(confirm("syntax.background", "starts a coprocess"))
	}
	for _, r := range s.Redirs {
		if d := k.redirect(r); d != nil {
			return d
		}
	}
	if s.Cmd == nil {
		return nil
	}
	return k.command(s.Cmd)
}

var fdNumber = regexp.MustCompile(`^[0-9]$`)

func (k *checker) redirect(r *syntax.Redirect) *Decision {
	if r.N != nil && !fdNumber.MatchString(r.N.Value) {
		return ptr(confirm("syntax.redirect", "redirection to a named file descriptor {%s}", r.N.Value))
	}
	var target arg
	if r.Word != nil {
		a, d := strictWordIn(r.Word, k.vars)
		if d != nil {
			return d
		}
		target = a
	}
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
		if target.s == "/dev/null" && !target.glob {
			return nil
		}
		return ptr(confirm("syntax.redirect-write", "writes to a file through redirection %s", r.Op))
	case syntax.DplOut, syntax.DplIn:
		if fdNumber.MatchString(target.s) {
			return nil
		}
		return ptr(confirm("syntax.redirect-write", "redirection %s%s is not a file descriptor copy", r.Op, target.s))
	case syntax.RdrIn:
		if target.glob {
			return ptr(confirm("word.glob", "a glob as an input redirection"))
		}
		if pat := k.sensitive(target.s, nil); pat != "" {
			return ptr(readsSensitive(target.s, pat))
		}
		return nil
	case syntax.Hdoc, syntax.DashHdoc:
		if r.Hdoc != nil {
			for _, part := range r.Hdoc.Parts {
				if _, ok := part.(*syntax.Lit); !ok {
					return ptr(expansionDecision(part))
				}
			}
		}
		return nil
	case syntax.WordHdoc:
		return nil // the word was resolved strictly above
	}
	return ptr(confirm("syntax.redirect", "redirection %s is not understood by the gate", r.Op))
}

func (k *checker) command(cmd syntax.Command) *Decision {
	switch x := cmd.(type) {
	case *syntax.CallExpr:
		return k.call(x)
	case *syntax.BinaryCmd:
		switch x.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe, syntax.PipeAll:
			if d := k.stmt(x.X); d != nil {
				return d
			}
			return k.stmt(x.Y)
		}
	case *syntax.Subshell:
		return k.stmts(x.Stmts)
	case *syntax.Block:
		return k.stmts(x.Stmts)
	case *syntax.TimeClause:
		if x.Stmt == nil {
			return nil
		}
		return k.stmt(x.Stmt)
	case *syntax.FuncDecl:
		return ptr(confirm("syntax.function", "defines a shell function"))
	case *syntax.DeclClause:
		return ptr(confirm("secret.variables", "`%s` sets or prints shell variables, which can hold secrets", x.Variant.Value))
	case *syntax.ArithmCmd, *syntax.LetClause:
		return ptr(confirm("word.arithmetic", "shell arithmetic can run commands through array subscripts"))
	case *syntax.IfClause:
		return ptr(confirm("syntax.compound", "`if` blocks are not on the read-only table"))
	case *syntax.WhileClause:
		return ptr(confirm("syntax.compound", "loops are not on the read-only table"))
	case *syntax.ForClause:
		return k.forLoop(x)
	case *syntax.CaseClause:
		return ptr(confirm("syntax.compound", "`case` blocks are not on the read-only table"))
	case *syntax.TestClause:
		return ptr(confirm("syntax.compound", "[[ … ]] tests are not on the read-only table"))
	}
	return ptr(confirm("syntax.unknown", "a shell construct the gate does not understand"))
}

func (k *checker) call(x *syntax.CallExpr) *Decision {
	for _, as := range x.Assigns {
		name := ""
		if as.Name != nil {
			name = as.Name.Value
		}
		if len(x.Args) == 0 {
			return ptr(confirm("assign", "sets shell variable %s", name))
		}
		if !k.c.assignments[name] || as.Append || as.Index != nil || as.Array != nil || as.Naked {
			return ptr(confirm("assign", "setting %s can change what the command does", name))
		}
		if as.Value != nil {
			a, d := strictWordIn(as.Value, k.vars)
			if d != nil {
				return d
			}
			if a.glob {
				return ptr(confirm("word.glob", "a glob in the value of %s", name))
			}
		}
	}
	args := make([]arg, 0, len(x.Args))
	for _, w := range x.Args {
		a, d := strictWordIn(w, k.vars)
		if d != nil {
			return d
		}
		args = append(args, a)
	}
	if k.seen != nil {
		var as []string
		for _, a := range x.Assigns {
			var v arg
			if a.Value != nil {
				v, _ = strictWordIn(a.Value, k.vars)
			}
			as = append(as, a.Name.Value+"="+v.s)
		}
		k.seen(as, args)
	}
	return k.argv(args, false)
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9._+-]+$`)

// commandName checks the identity of a command word: a bare name, or
// /usr/bin/NAME or /bin/NAME. ./cat and /tmp/cat are not cat.
func commandName(a arg) (string, *Decision) {
	if a.glob {
		return "", ptr(confirm("command.identity", "the command name %q is a glob pattern", a.s))
	}
	if a.tilde {
		return "", ptr(confirm("command.identity", "the command %q is not a trusted path", a.s))
	}
	name := a.s
	for _, dir := range []string{"/usr/bin/", "/bin/"} {
		if rest, ok := strings.CutPrefix(name, dir); ok && !strings.Contains(rest, "/") {
			name = rest
			break
		}
	}
	if !plainName.MatchString(name) || name == "." || name == ".." {
		return "", ptr(confirm("command.identity", "the command %q is not a trusted path: only bare names, /usr/bin/NAME and /bin/NAME are read-only", a.s))
	}
	return name, nil
}

// argv judges one simple command, unwrapping wrappers. viaXargs is set when
// xargs will append operands the gate cannot see.
func (k *checker) argv(args []arg, viaXargs bool) *Decision {
	if len(args) == 0 {
		return nil
	}
	name, d := commandName(args[0])
	if d != nil {
		return d
	}
	if d, ok := k.script(name, args); ok {
		return d
	}
	if w := k.p.Wrappers[name]; w != nil {
		return k.wrapper(name, w, args[1:], viaXargs)
	}
	if r := k.p.Commands[name]; r != nil {
		if viaXargs && !r.Xargs {
			return ptr(confirm("xargs", "xargs appends operands the gate cannot see, and `%s` is not marked safe for that", name))
		}
		d := k.rule(name, r, args[1:])
		if d == nil && r.Daemon != "" && !slices.Contains(k.p.AllowedDaemons, name) {
			d = ptr(confirm("command.daemon", "`%s` %s; list it in allowed_daemons to pass its read-only subcommands", name, r.Daemon))
		}
		if d == nil && viaXargs && !r.XargsFlags && !k.endedFlags {
			return ptr(confirm("xargs", "xargs can append flags the gate cannot see (`--files0-from=F`); end the flags of `%s` with --", name))
		}
		if d == nil && r.Check == "cd" {
			k.cd(name, args[1:])
		}
		return d
	}
	if reason := matchName(k.p.NeverPass, k.c.neverPats, name); reason != "" {
		return ptr(confirm("command.never-pass", "`%s` %s", name, reason))
	}
	return ptr(confirm("command.unknown", "`%s` is not on the read-only table", name))
}

// matchName looks a command name up in a table keyed by name patterns;
// pats are the table's keys that hold glob characters, sorted, so that
// the same command always gets the same reason.
func matchName(m map[string]string, pats []string, name string) string {
	if r, ok := m[name]; ok {
		return r
	}
	for _, pat := range pats {
		if ok, _ := path.Match(pat, name); ok {
			return m[pat]
		}
	}
	return ""
}

// globKeys returns the keys of m that are glob patterns, sorted.
func globKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		if strings.ContainsAny(k, `*?[\`) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// script passes `bash|sh PATH args...` and `python3 PATH args...` for the
// policy's read-only scripts. ok is false when the command is not of that
// form.
func (k *checker) script(name string, args []arg) (*Decision, bool) {
	if len(k.c.scripts) == 0 || len(args) < 2 {
		return nil, false
	}
	switch name {
	case "bash", "sh", "python3":
	default:
		return nil, false
	}
	if args[1].glob || args[1].tilde || !strings.HasPrefix(args[1].s, "/") || !k.c.scripts[path.Clean(args[1].s)] {
		return nil, false
	}
	for _, a := range args[2:] {
		if a.glob || a.tilde {
			return ptr(confirm("word.glob", "the arguments of a read-only script must be plain text")), true
		}
	}
	return nil, true
}

func (k *checker) wrapper(name string, w *Wrapper, args []arg, viaXargs bool) *Decision {
	if w.NeverPass != "" {
		return ptr(confirm("wrapper.never-pass", "`%s` %s", name, w.NeverPass))
	}
	i := 0
	flags := &Rule{Flags: w.Flags, ValueFlags: w.ValueFlags}
	for i < len(args) {
		a := args[i]
		if a.s == "--" {
			i++
			break
		}
		if !isFlag(a.s) {
			break
		}
		for _, lf := range w.LookupFlags {
			if a.s == lf {
				return k.plainOperands(name, args[i+1:])
			}
		}
		var seen []flagUse
		n, d := parseFlag(name, []*Rule{flags}, args[i:], &seen)
		if d != nil {
			return d
		}
		for _, f := range seen {
			if pat, ok := w.FlagValues[f.name]; ok {
				if re := k.c.operandRE[pat]; re == nil || !re.MatchString(f.value) {
					return ptr(confirm("flag.value", "`%s %s %s`: only values matching %s are read-only", name, f.name, f.value, pat))
				}
			}
		}
		i += 1 + n
	}
	if w.Assignments {
		for i < len(args) && strings.Contains(args[i].s, "=") {
			n, _, _ := strings.Cut(args[i].s, "=")
			if !k.c.assignments[n] {
				return ptr(confirm("assign", "`%s` sets %s, which can change what the command does", name, n))
			}
			i++
		}
	}
	for j := 0; j < w.Positional; j++ {
		if i >= len(args) {
			return ptr(confirm("wrapper.usage", "`%s` is missing an operand", name))
		}
		if args[i].glob {
			return ptr(confirm("word.glob", "a glob as an operand of `%s`", name))
		}
		i++
	}
	if i >= len(args) {
		if viaXargs {
			return ptr(confirm("xargs", "`%s` behind xargs runs whatever command xargs reads from its input", name))
		}
		if w.Alone != "" {
			return ptr(confirm("wrapper.alone", "`%s` %s", name, w.Alone))
		}
		return nil
	}
	return k.argv(args[i:], viaXargs || w.Xargs)
}

func (k *checker) plainOperands(name string, args []arg) *Decision {
	for _, a := range args {
		if a.glob {
			return ptr(confirm("word.glob", "a glob as an operand of `%s`", name))
		}
	}
	return nil
}

func isFlag(s string) bool {
	return len(s) > 1 && s[0] == '-'
}

// loopName is a variable a for loop may set: lower case, so it is none of
// bash's own (PATH, IFS, CDPATH, BASH_ENV, PS4…); histchars and
// auto_resume are bash's lower-case ones.
var loopName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// forLoop passes `for NAME in ITEMS; do BODY; done` when BODY passes for
// every item with $NAME standing for it: the loop is the commands it
// would run, written once. A C-style loop, a loop over "$@", items that
// are not plain text, and a body that changes directory (each pass would
// start somewhere else) are confirm.
func (k *checker) forLoop(x *syntax.ForClause) *Decision {
	wi, ok := x.Loop.(*syntax.WordIter)
	if !ok || x.Select {
		return ptr(confirm("syntax.compound", "only `for NAME in WORDS` loops are on the read-only table"))
	}
	name := wi.Name.Value
	if !wi.InPos.IsValid() {
		return ptr(confirm("syntax.compound", "`for %s` without `in` loops over the positional parameters", name))
	}
	if !loopName.MatchString(name) || name == "histchars" || name == "auto_resume" {
		return ptr(confirm("assign", "the loop sets %s, which can change what the shell does; use a lower-case name", name))
	}
	if _, shadowed := k.vars[name]; shadowed {
		return ptr(confirm("syntax.compound", "a nested loop reuses the variable %s", name))
	}
	items := make([]arg, 0, len(wi.Items))
	for _, w := range wi.Items {
		a, d := strictWordIn(w, k.vars)
		if d != nil {
			return d
		}
		if a.tilde {
			return ptr(confirm("word.tilde", "a loop item starting with ~"))
		}
		items = append(items, a)
	}
	if len(items) == 0 {
		// bash runs the body no times; check it once anyway, so that
		// what a reviewer reads is read-only too.
		items = append(items, arg{s: "x"})
	}
	if k.vars == nil {
		k.vars = map[string]arg{}
	}
	defer delete(k.vars, name)
	dirs := len(k.dirs)
	for _, item := range items {
		if k.passes++; k.passes > maxLoopPasses {
			return ptr(confirm("syntax.compound", "the loops run their bodies more than %d times, more than the gate checks", maxLoopPasses))
		}
		k.vars[name] = item
		if d := k.stmts(x.Do); d != nil {
			return d
		}
	}
	if len(k.dirs) != dirs {
		// A glob item runs the body an unknown number of times, and
		// each pass starts where the last one left.
		return ptr(confirm("syntax.compound", "a loop whose body changes directory starts each pass somewhere else"))
	}
	return nil
}
