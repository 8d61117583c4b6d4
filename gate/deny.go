package gate

import (
	"path"
	"slices"
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
	// dirs are the directories the next command may run in, as in
	// checker: the working directory plus every directory a cd may have
	// moved to ("" = unknown). A relative rm target is resolved in each.
	dirs []string
	// onlyIn holds the directories for the right side of `cd DIR && …`,
	// which runs only if the cd succeeded.
	onlyIn map[*syntax.Stmt][]string
	// vars are the variables of the for loops being scanned, each set to
	// the item of the pass being scanned: `for d in /; do rm -rf "$d";
	// done` is rm -rf /.
	vars map[string]string
	// passes counts loop bodies scanned, to bound nested loops.
	passes int
}

// maxLoopPasses bounds how many loop bodies (items times nested loops) the
// deny scan walks in one command; the checker confirms every loop it does
// not pass, so a cut-off loses a deny reason, never a confirm.
const maxLoopPasses = 256

// file scans a whole tree; hit reports a deny.
func (s *scanner) file(f *syntax.File, depth int) (Decision, bool) {
	return s.node(f, depth)
}

// forLoop scans a `for NAME in WORDS` loop: its words, then its body once
// for each item with $NAME standing for it.
func (s *scanner) forLoop(x *syntax.ForClause, wi *syntax.WordIter, depth int) (Decision, bool) {
	for _, w := range wi.Items {
		if d, hit := s.node(w, depth); hit {
			return d, true
		}
	}
	name := wi.Name.Value
	old, shadowed := s.vars[name]
	if s.vars == nil {
		s.vars = map[string]string{}
	}
	defer func() {
		if shadowed {
			s.vars[name] = old
		} else {
			delete(s.vars, name)
		}
	}()
	items := looseArgsIn(wi.Items, s.vars)
	if len(items) == 0 {
		items = []string{""}
	}
	for _, item := range items {
		if s.passes++; s.passes > maxLoopPasses {
			break
		}
		s.vars[name] = item
		if item == unknownField {
			delete(s.vars, name)
		}
		for _, st := range x.Do {
			if d, hit := s.node(st, depth); hit {
				return d, true
			}
		}
	}
	return Decision{}, false
}

// node scans the tree under n; hit reports a deny.
func (s *scanner) node(f syntax.Node, depth int) (Decision, bool) {
	var found Decision
	hit := false
	var stack []syntax.Node
	var saved [][]string
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			// Leaving the node on top of the stack.
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if st, ok := top.(*syntax.Stmt); ok && s.onlyIn[st] != nil {
				// Back to every directory possible before, plus any a cd
				// inside reached: `cd /a && cd /; rm -rf *`.
				s.dirs = appendNew(slices.Clone(saved[len(saved)-1]), s.dirs...)
				saved = saved[:len(saved)-1]
			}
			return true
		}
		if hit {
			return false
		}
		stack = append(stack, n)
		var d Decision
		switch x := n.(type) {
		case *syntax.ForClause:
			if wi, ok := x.Loop.(*syntax.WordIter); ok && wi.Name != nil {
				d, hit = s.forLoop(x, wi, depth)
				if !hit {
					stack = stack[:len(stack)-1] // the loop's parts were scanned above
					return false
				}
			}
		case *syntax.CallExpr:
			args := looseArgsIn(x.Args, s.vars)
			d, hit = s.call(args, depth)
			if cd := cdArgs(args); !hit && cd != nil {
				s.dirs = appendNew(s.dirs, s.cdDirs(cd, s.dirs)...)
			}
		case *syntax.Redirect:
			d, hit = s.redirect(x)
		case *syntax.FuncDecl:
			d, hit = s.forkBomb(x)
		case *syntax.Stmt:
			if dirs := s.onlyIn[x]; dirs != nil {
				saved = append(saved, s.dirs)
				s.dirs = dirs
			}
			d, hit = s.fedShell(x, depth)
		case *syntax.BinaryCmd:
			s.andCd(x)
			if d, hit = s.pipedDelete(x); !hit {
				d, hit = s.pipedScript(x, depth)
			}
		}
		if hit {
			found = d
			stack = stack[:len(stack)-1] // Walk does not leave a node it was told to skip
		}
		return !hit
	})
	return found, hit
}

// andCd records that the right side of `cd DIR && …` (also `cd A && cd B
// && …`) runs only where the cds lead.
func (s *scanner) andCd(b *syntax.BinaryCmd) {
	if b.Op != syntax.AndStmt || b.X == nil || b.Y == nil {
		return
	}
	dirs := s.afterSuccess(b.X, s.dirs)
	if dirs == nil {
		return
	}
	if s.onlyIn == nil {
		s.onlyIn = map[*syntax.Stmt][]string{}
	}
	s.onlyIn[b.Y] = dirs
}

// afterSuccess returns the directories the shell is in after st succeeded
// when it started in one of from, or nil if st holds no cd it can follow.
func (s *scanner) afterSuccess(st *syntax.Stmt, from []string) []string {
	if st == nil || len(st.Redirs) > 0 || st.Negated || st.Background {
		return nil
	}
	switch x := st.Cmd.(type) {
	case *syntax.CallExpr:
		args := looseArgsIn(x.Args, s.vars)
		cd := cdArgs(args)
		if cd == nil {
			return nil
		}
		return s.cdDirs(cd, from)
	case *syntax.BinaryCmd:
		if x.Op != syntax.AndStmt {
			return nil
		}
		left := s.afterSuccess(x.X, from)
		if left == nil {
			left = from
		}
		if right := s.afterSuccess(x.Y, left); right != nil {
			return right
		}
		if s.afterSuccess(x.X, from) != nil {
			return left
		}
	}
	return nil
}

// cdArgs returns the arguments of a cd or pushd (also behind builtin,
// command or exec), or nil if args is not one.
func cdArgs(args []string) []string {
	for len(args) > 0 && (args[0] == "builtin" || args[0] == "command" || args[0] == "exec") {
		args = args[1:]
	}
	if len(args) == 0 || (args[0] != "cd" && args[0] != "pushd") {
		return nil
	}
	return args[1:len(args):len(args)]
}

// cdDirs returns the directories `cd ARGS` may lead to from the
// directories from.
func (s *scanner) cdDirs(args []string, from []string) []string {
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && args[0] != unknownField {
		ended := args[0] == "--"
		args = args[1:]
		if ended {
			break
		}
	}
	t := "~"
	if len(args) > 0 {
		t = args[0]
	}
	if t == "~" || strings.HasPrefix(t, "~/") {
		if s.c.home == "" {
			return []string{""}
		}
		t = s.c.home + t[1:]
	}
	if t == "~root" || strings.HasPrefix(t, "~root/") {
		t = "/root" + t[len("~root"):]
	}
	switch {
	case t == "":
		return slices.Clone(from) // cd "" stays where it is
	case t == unknownField || t == "-" || strings.HasPrefix(t, "~") || strings.Contains(t, unknownField):
		// cd $X may stay (X empty), go home (X unset) or anywhere.
		out := appendNew(slices.Clone(from), "")
		if s.c.home != "" {
			out = appendNew(out, s.c.home)
		}
		return out
	case strings.HasPrefix(t, "/"):
		return []string{path.Clean(t)}
	}
	var out []string
	for _, d := range from {
		if d == "" {
			out = appendNew(out, "")
			continue
		}
		out = appendNew(out, path.Join(d, t))
	}
	return out
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
	if d, hit := s.file(f, depth+1); hit {
		return d, true
	}
	// bash may read the text otherwise than the parser (see
	// otherReadings): every reading is scanned.
	_, alts, _ := s.c.otherReadings(text, f)
	for _, alt := range alts {
		if d, hit := s.file(alt, depth+1); hit {
			return d, true
		}
	}
	return Decision{}, false
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
	if reason := matchName(s.p.Deny.Commands, s.c.denyPats, name); reason != "" {
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
	switch name {
	case "kill":
		if d, hit := killAll(args[1:]); hit {
			return d, true
		}
	case "pkill", "killall":
		if d, hit := killMatching(name, args[1:]); hit {
			return d, true
		}
	}
	if d, hit := partitionTable(name, args[1:]); hit {
		return d, true
	}
	if !nameOnly[name] {
		for _, a := range pathArgs(args[1:]) {
			if t := s.readTarget(a); t != "" {
				return deny("deny.read-target", "`%s` reads %s (matches %s): another process's memory or environment", name, a, t), true
			}
		}
	}
	if s.p.Wrappers[name] == nil {
		if d, hit := s.protectedUse(name, args); hit {
			return d, true
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
	if name == "sysctl" {
		if d, hit := s.sysctl(args[1:]); hit {
			return d, true
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
		if s.recTarget(t) {
			return deny("deny.recursive-root", "`%s` recursively on %s is never run", name, s.shown(t)), true
		}
	}
	return Decision{}, false
}

// recTarget reports whether t, in any directory the command may run in,
// is one of the recursive targets (/, /etc, ~, …).
func (s *scanner) recTarget(t string) bool {
	if t == unknownField {
		return false
	}
	for _, d := range s.dirs {
		clean := cleanTarget(t, d)
		for _, pp := range s.c.recTargets {
			if matchSegs(pp.segs, clean) {
				return true
			}
		}
	}
	return false
}

// shown names a relative target with the directories it was resolved in.
func (s *scanner) shown(t string) string {
	if strings.HasPrefix(t, "/") || strings.HasPrefix(t, "~") {
		return t
	}
	var known []string
	for _, d := range s.dirs {
		if d != "" {
			known = append(known, d)
		}
	}
	if len(known) == 0 {
		return t
	}
	return t + " (in " + strings.Join(known, " or ") + ")"
}

// cleanTarget cleans a path operand for the recursive-target check and
// removes a trailing /* or /.* (rm -rf /* empties / as surely as rm -rf /).
// A relative t is resolved in dir; "" means unknown, and then it matches
// nothing.
func cleanTarget(t, dir string) []string {
	if !strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "~") && dir != "" {
		t = dir + "/" + t
	}
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

// writeTarget denies writes to block devices and to the write targets. A
// relative target is resolved in every directory the command may run in,
// and a glob (which bash expands in a redirection when it matches one
// file) matches any name.
func (s *scanner) writeTarget(what, target string) (Decision, bool) {
	if target == unknownField || target == "" {
		return Decision{}, false
	}
	dirs := s.dirs
	if strings.HasPrefix(target, "/") {
		dirs = []string{""}
	}
	glob := strings.ContainsAny(target, "*?[")
	for _, dir := range dirs {
		w := resolvePath(target, dir, "")
		if !w.absolute {
			continue
		}
		if w.rootTail != nil {
			w = where{segs: w.rootTail, absolute: true} // /proc/PID/root/dev/sda is /dev/sda
		}
		for _, pp := range s.c.blockDevices {
			if pp.matches(w) || glob && globMayMatch(pp.segs, w.segs) {
				return deny("deny.block-device", "%s writes to a block device and destroys its data", what), true
			}
		}
		for _, pp := range s.c.writeTargets {
			if pp.matches(w) || glob && globMayMatch(pp.segs, w.segs) {
				return deny("deny.write-target", "%s writes to %s, which is never written (matches %s)", what, target, pp.raw), true
			}
		}
	}
	return Decision{}, false
}

// sysctlDirs are where the system keeps its sysctl settings files; `sysctl
// -p FILE` from anywhere else loads settings no reviewer can see.
var sysctlDirs = []string{"/etc/sysctl.conf", "/etc/sysctl.d/", "/run/sysctl.d/", "/usr/lib/sysctl.d/", "/lib/sysctl.d/", "/usr/local/lib/sysctl.d/"}

// sysctl denies `sysctl [-w] KEY=VALUE` when KEY is a write target under
// /proc/sys (kernel.core_pattern, kernel.modprobe: the kernel runs the
// program they name, outside any sandbox), and `sysctl -p FILE` for a file
// outside the system's settings folders, which could set them unseen.
func (s *scanner) sysctl(args []string) (Decision, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == unknownField {
			continue
		}
		var file string
		loads := false
		switch {
		case a == "-p" || a == "--load" || a == "-f":
			loads = true
			if i+1 < len(args) && (!strings.HasPrefix(args[i+1], "-") || args[i+1] == "-") {
				file = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--load="):
			loads, file = true, strings.TrimPrefix(a, "--load=")
		case len(a) > 2 && a[0] == '-' && a[1] != '-' && !strings.Contains(a, "=") && strings.ContainsAny(a, "pf"):
			// A cluster such as -qp FILE or -pFILE: the rest is the file.
			j := strings.IndexAny(a, "pf")
			loads, file = true, a[j+1:]
			if file == "" && i+1 < len(args) {
				file = args[i+1]
				i++
			}
		}
		if loads {
			if file == "" {
				continue // /etc/sysctl.conf
			}
			if file == unknownField || !slices.ContainsFunc(sysctlDirs, func(d string) bool {
				return file == d || strings.HasSuffix(d, "/") && strings.HasPrefix(path.Clean(file), d)
			}) {
				return deny("deny.write-target", "`sysctl %s` loads settings from %s, which no reviewer can see and which may set kernel.core_pattern or kernel.modprobe (programs the kernel runs); load them from /etc/sysctl.d", a, file), true
			}
			continue
		}
		key, _, ok := strings.Cut(a, "=")
		if !ok {
			continue
		}
		key = strings.TrimLeft(strings.TrimSpace(key), "-")
		for _, p := range sysctlPaths(key) {
			if d, hit := s.writeTarget("`sysctl "+a+"`", p); hit {
				return d, true
			}
		}
	}
	return Decision{}, false
}

// sysctlPaths returns the /proc/sys files a sysctl key may name: procps
// reads / as the separator when it comes first (dots are then part of a
// name, as in net/ipv4/conf/eth0.1/...), otherwise dots.
func sysctlPaths(key string) []string {
	dotted := strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, key)
	return []string{"/proc/sys/" + key, "/proc/sys/" + dotted}
}

func (s *scanner) redirect(r *syntax.Redirect) (Decision, bool) {
	read := false
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob, syntax.RdrInOut, syntax.DplOut:
	case syntax.RdrIn:
		read = true
	default:
		return Decision{}, false
	}
	if r.Word == nil {
		return Decision{}, false
	}
	f := looseFieldsIn(r.Word, s.vars)
	if len(f) != 1 || f[0] == unknownField || (r.Op == syntax.DplOut && fdNumber.MatchString(f[0])) {
		return Decision{}, false
	}
	if t := s.readTarget(f[0]); t != "" {
		return deny("deny.read-target", "redirection %s %s reads %s: another process's memory or environment", r.Op, f[0], t), true
	}
	if read {
		return Decision{}, false
	}
	if pat := s.protectedArg(f[0]); pat != "" {
		return deny("deny.protected", "redirection %s %s writes %s, the bot's own state", r.Op, f[0], pat), true
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
	args := looseArgsIn(call.Args, s.vars)
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
		if text := looseFieldsIn(w, s.vars); text != nil {
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
	if !ok1 || !ok2 || len(left.Args) == 0 || !s.isShell(looseArgsIn(right.Args, s.vars)) {
		return Decision{}, false
	}
	args := looseArgsIn(left.Args, s.vars)
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

// find denies find over a recursive target (/, /etc, /usr, …) that
// deletes (-delete, or -exec rm and the like), and scans the commands of
// -exec, -execdir, -ok and -okdir.
func (s *scanner) find(args []string, depth int) (Decision, bool) {
	var starts []string
	i := 0
	for i < len(args) && (args[i] == "-H" || args[i] == "-L" || args[i] == "-P") {
		i++
	}
	for i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "(" && args[i] != "!" {
		starts = append(starts, args[i])
		i++
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	for ; i < len(args); i++ {
		switch args[i] {
		case "-delete":
			if t, ok := s.findRoot(starts); ok {
				return deny("deny.recursive-root", "`find %s -delete` deletes everything under %s", t, t), true
			}
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			deletes := j > i+1 && s.c.deleters[base(args[i+1])]
			if !deletes && j > i+1 && s.c.shells[base(args[i+1])] {
				if text, ok := shellScript(args[i+2 : j]); ok {
					deletes = s.scriptDeletes(text)
				}
			}
			if deletes {
				if t, ok := s.findRoot(starts); ok {
					return deny("deny.recursive-root", "`find %s %s %s` deletes or destroys everything under %s", t, args[i], args[i+1], t), true
				}
			}
			if d, hit := s.call(args[i+1:j], depth); hit {
				return d, true
			}
			i = j
		}
	}
	return Decision{}, false
}

// findRoot returns the first start path of find that is a recursive
// target.
func (s *scanner) findRoot(starts []string) (string, bool) {
	for _, t := range starts {
		if s.recTarget(t) {
			return s.shown(t), true
		}
	}
	return "", false
}
