package gate

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// The deny checks for whole-system destruction that needs more than a
// command name: signals to every process, killing by a pattern that
// matches every process, partition-table writers, and the bot's own state
// and other processes' memory as targets.

// killAll denies kill with the pid -1, which signals every process the
// caller may signal: `kill -9 -1`, `kill -KILL -1`, `kill -- -1`.
func killAll(args []string) (Decision, bool) {
	endOpts := false
	sawSignal := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case endOpts:
		case a == "--":
			endOpts = true
			continue
		case a == "-s" || a == "-n" || a == "--signal":
			if i+1 < len(args) && args[i+1] == "0" {
				return Decision{}, false // signal 0 only tests for existence
			}
			i++
			sawSignal = true
			continue
		case a == "-l" || a == "-L" || a == "--list" || a == "--table":
			return Decision{}, false
		case a == "-0" && !sawSignal && i == 0:
			return Decision{}, false
		case strings.HasPrefix(a, "-") && !sawSignal && i == 0:
			sawSignal = true // -9, -KILL, -SIGKILL, -1 (HUP)
			continue
		case strings.HasPrefix(a, "-") && !isPid(a[1:]):
			continue // another option
		}
		if strings.HasPrefix(a, "-") && strings.TrimLeft(a[1:], "0") == "1" {
			return deny("deny.kill-all", "`kill %s` signals every process on the machine", strings.Join(args, " ")), true
		}
	}
	return Decision{}, false
}

func isPid(s string) bool { return isNumber(s) }

// killPatternProbe is a set of process names unlike each other: a pkill
// or killall pattern that matches all of them matches every process.
var killPatternProbe = []string{"systemd", "init", "sshd", "kthreadd", "bash", "thinbot", "dbus-daemon", "x", "1", "/usr/sbin/cron -f"}

// killMatching denies pkill and killall whose selection is every process
// (`pkill .`, `pkill -f ""`, `killall -r .`), every process but a few
// (`pkill -v nginx`), every root process (`pkill -u root`, `killall -u
// root`) or every child of init (`pkill -P 1`).
func killMatching(name string, args []string) (Decision, bool) {
	all := func(why string) (Decision, bool) {
		return deny("deny.kill-all", "`%s %s` %s", name, strings.Join(args, " "), why), true
	}
	var patterns []string
	regex := name == "pkill"
	exact, invert, hasSelector := false, false, false
	valueFlags := map[string]bool{"-s": true, "--signal": true, "-g": true, "--pgroup": true, "-G": true, "--group": true,
		"-P": true, "--parent": true, "-t": true, "--terminal": true, "-u": true, "--euid": true, "-U": true, "--uid": true,
		"--session": true, "-F": true, "--pidfile": true, "--ns": true, "--nslist": true, "-O": true, "--older": true,
		"--cgroup": true, "-Z": true, "--context": true}
	if name == "killall" {
		valueFlags = map[string]bool{"-s": true, "--signal": true, "-u": true, "--user": true, "-o": true, "--older-than": true,
			"-y": true, "--younger-than": true, "-n": true, "--ns": true, "-Z": true, "--context": true}
	}
	endOpts := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if endOpts || !strings.HasPrefix(a, "-") || a == "-" {
			patterns = append(patterns, a)
			continue
		}
		if a == "--" {
			endOpts = true
			continue
		}
		// Each use is a flag and its value: --name=v, --name v, -x v, -xv,
		// and clusters of short flags (-fv is -f -v).
		var uses [][2]string
		if strings.HasPrefix(a, "--") {
			flag, value, hasValue := strings.Cut(a, "=")
			if !hasValue && valueFlags[flag] && i+1 < len(args) {
				value = args[i+1]
				i++
			}
			uses = append(uses, [2]string{flag, value})
		} else {
			for j := 1; j < len(a); j++ {
				f := "-" + a[j:j+1]
				if !valueFlags[f] {
					uses = append(uses, [2]string{f, ""})
					continue
				}
				value := a[j+1:]
				if value == "" && i+1 < len(args) {
					value = args[i+1]
					i++
				}
				uses = append(uses, [2]string{f, value})
				break
			}
		}
		for _, u := range uses {
			flag, value := u[0], u[1]
			switch flag {
			case "-r", "--regexp":
				regex = true
			case "-x", "--exact":
				exact = true
			case "-v", "--inverse":
				invert = name == "pkill"
			case "-u", "--euid", "-U", "--uid", "--user":
				hasSelector = true
				for _, u := range strings.Split(value, ",") {
					if u == "root" || u == "0" {
						return all("signals every process of root")
					}
				}
			case "-P", "--parent":
				hasSelector = true
				for _, p := range strings.Split(value, ",") {
					if strings.TrimLeft(p, "0") == "1" || p == "0" {
						return all("signals every service started by init")
					}
				}
			case "-g", "--pgroup", "-G", "--group", "-t", "--terminal", "--session", "--cgroup", "--ns", "-F", "--pidfile":
				hasSelector = true
			case "-n", "--newest", "-o", "--oldest":
				if name == "pkill" {
					return Decision{}, false // one process only
				}
			}
		}
	}
	if invert {
		return all("signals every process that does not match")
	}
	if name == "killall" && len(patterns) == 0 {
		return Decision{}, false // killall -u bob: selected above
	}
	if len(patterns) == 0 {
		return Decision{}, false
	}
	for _, pat := range patterns {
		if pat == unknownField {
			continue
		}
		if !regex {
			continue // killall NAME: exact process names
		}
		expr := pat
		if exact {
			expr = "^(?:" + pat + ")$"
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(killPatternProbe, func(n string) bool { return !re.MatchString(n) }) && !hasSelector {
			return all("matches every process")
		}
	}
	return Decision{}, false
}

// partitionTools maps the partition-table editors to the flags that make
// them only list. Without one of these they write a partition table (or
// wait for commands on stdin, which may write one).
var partitionTools = map[string][]string{
	"fdisk":    {"-l", "--list", "-x", "--list-details"},
	"sfdisk":   {"-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size", "-g", "--show-geometry", "-V", "--verify", "-F", "--list-free", "-T", "--list-types"},
	"gdisk":    {"-l"},
	"sgdisk":   {"-p", "--print", "-i", "--info", "-v", "--verify", "-O", "--print-mbr", "-L", "--list-types"},
	"parted":   {"-l", "--list"},
	"cfdisk":   nil,
	"cgdisk":   nil,
	"fixparts": nil,
}

// partedReadWords are the parted script words that only print: `parted
// /dev/sda unit s print`.
var partedReadWords = map[string]bool{"print": true, "p": true, "unit": true, "s": true, "B": true, "kB": true,
	"MB": true, "GB": true, "TB": true, "KiB": true, "MiB": true, "GiB": true, "TiB": true, "%": true,
	"cyl": true, "chs": true, "compact": true, "free": true, "all": true, "devices": true, "list": true}

// sfdiskWriters are the sfdisk actions that change a disk even next to a
// listing flag.
var sfdiskWriters = []string{"--delete", "--part-type", "--part-uuid", "--part-label", "--part-attrs", "--disk-id", "-N", "--append", "-a", "-A", "--activate", "--relocate", "-r", "--reorder", "--move-data", "--backup", "-b", "--wipe", "-w", "--wipe-partitions", "-W"}

// partitionTable denies partition-table editors unless they only list:
// `fdisk -l` and `parted -l` are confirm (they are on no read-only
// table), `fdisk /dev/sda` and `sgdisk --zap-all /dev/sda` never run.
func partitionTable(name string, args []string) (Decision, bool) {
	list, ok := partitionTools[name]
	if !ok {
		return Decision{}, false
	}
	writes := deny("deny.partition-table", "`%s` writes partition tables (only listing, such as `fdisk -l`, may run)", name)
	listing := false
	var words []string
	for _, a := range args {
		if a == unknownField {
			return writes, true
		}
		if !strings.HasPrefix(a, "-") {
			words = append(words, a)
			continue
		}
		flag, _, _ := strings.Cut(a, "=")
		switch {
		case slices.Contains(list, flag):
			listing = true
		case name == "sfdisk" && slices.Contains(sfdiskWriters, flag):
			return writes, true
		case name == "sgdisk" && !strings.HasPrefix(a, "--") && len(a) > 2:
			return writes, true // a cluster may hold a writing letter
		case name == "sgdisk" && flag != "-P" && flag != "--pretend":
			return writes, true // every other sgdisk option changes the disk
		}
	}
	if name == "parted" && !listing {
		// parted DEV print: script words after the device must all print.
		if len(words) >= 2 && slices.Contains(words[1:], "print") && !slices.ContainsFunc(words[1:], func(w string) bool { return !partedReadWords[w] }) {
			return Decision{}, false
		}
	}
	if !listing {
		return writes, true
	}
	return Decision{}, false
}

// nameOnly are commands that take paths as names and never open them, so
// naming another process's environ is not reading it.
var nameOnly = map[string]bool{"echo": true, "printf": true, "ls": true, "stat": true, "readlink": true,
	"realpath": true, "basename": true, "dirname": true, "test": true, "[": true, "which": true, "type": true}

// pathArgs returns the arguments that may be paths: each word, and the
// value of each --opt=VALUE or key=VALUE word.
func pathArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if a == unknownField {
			continue
		}
		out = append(out, a)
		if _, v, ok := strings.Cut(a, "="); ok && v != "" {
			out = append(out, v)
		}
	}
	return out
}

// readTarget reports the read target (another process's memory or
// environment) a word names in any working directory, or "".
func (s *scanner) readTarget(a string) string {
	if len(s.c.readTargets) == 0 {
		return ""
	}
	if !strings.Contains(a, "proc") && !strings.Contains(a, "dev") && !slices.ContainsFunc(s.dirs, func(d string) bool {
		return strings.HasPrefix(d, "/proc") || strings.HasPrefix(d, "/dev")
	}) {
		return ""
	}
	glob := strings.ContainsAny(a, "*?[")
	for _, d := range s.dirs {
		w := resolvePath(a, d, s.c.home)
		for _, pp := range s.c.readTargets {
			if pp.matches(w) || w.rootTail != nil && pp.matches(where{segs: w.rootTail, absolute: true}) {
				return pp.raw
			}
			if glob && w.absolute && globMayMatch(pp.segs, w.segs) {
				return pp.raw // cat /proc/*/environ
			}
		}
	}
	return ""
}

// globMayMatch reports whether a path whose elements may hold glob
// patterns (/proc/*/environ) can name something pattern matches: an
// element with a glob matches any pattern element.
func globMayMatch(pat, segs []string) bool {
	if len(pat) != len(segs) {
		return false
	}
	for i := range pat {
		if strings.ContainsAny(segs[i], "*?[") {
			continue
		}
		if ok, _ := path.Match(pat[i], segs[i]); !ok {
			return false
		}
	}
	return true
}

// scriptDeletes reports whether a shell script (find -exec sh -c '…')
// runs a deleter.
func (s *scanner) scriptDeletes(text string) bool {
	f, err := parse(text)
	if err != nil {
		return true // cannot tell: treat as deleting
	}
	found := false
	syntax.Walk(f, func(n syntax.Node) bool {
		if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
			if f := looseFields(c.Args[0]); len(f) > 0 && s.c.deleters[base(f[0])] {
				found = true
			}
		}
		return !found
	})
	return found
}

// pipedDelete denies `find ROOT … | xargs rm …`, which destroys ROOT as
// surely as find -delete.
func (s *scanner) pipedDelete(b *syntax.BinaryCmd) (Decision, bool) {
	if b.Op != syntax.Pipe && b.Op != syntax.PipeAll {
		return Decision{}, false
	}
	left, ok1 := b.X.Cmd.(*syntax.CallExpr)
	right, ok2 := b.Y.Cmd.(*syntax.CallExpr)
	if !ok1 || !ok2 || len(left.Args) == 0 || len(right.Args) == 0 {
		return Decision{}, false
	}
	largs := looseArgsIn(left.Args, s.vars)
	if base(largs[0]) != "find" {
		return Decision{}, false
	}
	var starts []string
	for _, a := range largs[1:] {
		if strings.HasPrefix(a, "-") || a == "(" || a == "!" {
			break
		}
		starts = append(starts, a)
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	rargs := looseArgsIn(right.Args, s.vars)
	if base(rargs[0]) != "xargs" {
		return Decision{}, false
	}
	w := s.p.Wrappers["xargs"]
	i := 1
	for i < len(rargs) && strings.HasPrefix(rargs[i], "-") {
		if w != nil && slices.Contains(w.ValueFlags, rargs[i]) {
			i++
		}
		i++
	}
	if i >= len(rargs) || !s.c.deleters[base(rargs[i])] {
		return Decision{}, false
	}
	if t, ok := s.findRoot(starts); ok {
		return deny("deny.recursive-root", "`find %s | xargs %s` destroys everything under %s", t, rargs[i], t), true
	}
	return Decision{}, false
}

// protectedArg reports the protected path a word names in any working
// directory, or "".
func (s *scanner) protectedArg(a string) string {
	if len(s.c.protected) == 0 {
		return ""
	}
	for _, d := range s.dirs {
		if pat := s.c.protectedPath(resolvePath(a, d, s.c.home)); pat != "" {
			return pat
		}
	}
	return ""
}

// sedWriteFiles returns the file names sed's w and W commands and s///w
// flags could write, read leniently: the rest of the line after every w
// or W that follows a separator, address, `}` or a substitution.
func sedWriteFiles(script string) []string {
	var out []string
	for i := 0; i < len(script); i++ {
		if script[i] != 'w' && script[i] != 'W' {
			continue
		}
		end := strings.IndexByte(script[i:], '\n')
		if end < 0 {
			end = len(script) - i
		}
		name := strings.TrimSpace(script[i+1 : i+end])
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// protectedUse denies a command that names a protected path (the bot's
// config, state or tokens) unless the command would pass as a plain read
// with those paths not sensitive: a read such as `cat audit.jsonl` is left
// to the checker, which confirms it; anything else (rm, cp, tee, sed -i,
// sort -o, vim, sqlite3) never runs.
func (s *scanner) protectedUse(name string, args []string) (Decision, bool) {
	if len(s.c.protected) == 0 || !s.mayNameProtected(args) {
		return Decision{}, false
	}
	hit := ""
	for _, a := range pathArgs(args[1:]) {
		if hit = s.protectedArg(a); hit != "" {
			break
		}
	}
	if hit == "" && name == "sed" {
		for _, a := range args[1:] {
			for _, f := range sedWriteFiles(a) {
				if s.protectedArg(f) != "" {
					return deny("deny.protected", "`sed` would write %s, the bot's own state", f), true
				}
			}
		}
	}
	if hit == "" {
		return Decision{}, false
	}
	if s.p.Commands[name] != nil && s.plainRead(args) {
		return Decision{}, false
	}
	return deny("deny.protected", "`%s` touches %s (the bot's own config, state or tokens) in a way that is not a plain read", name, hit), true
}

// mayNameProtected is a quick test before the path checks: a word can
// name a protected path only if it holds the path's last element, goes
// through /proc, or the command may run inside a protected folder.
func (s *scanner) mayNameProtected(args []string) bool {
	if s.c.protectedNames == nil {
		return true
	}
	for _, a := range args[1:] {
		if strings.Contains(a, "proc") {
			return true
		}
		for _, n := range s.c.protectedNames {
			if strings.Contains(a, n) {
				return true
			}
		}
	}
	for _, d := range s.dirs {
		if d != "" && s.c.protectedPath(resolvePath(d, "", s.c.home)) != "" {
			return true
		}
	}
	return false
}

// plainRead reports whether a table command passes when the protected
// paths are not sensitive: it only reads.
func (s *scanner) plainRead(args []string) bool {
	q := s.p.clone()
	q.ProtectedPaths = nil
	k := checker{p: q, c: q.compile(), dirs: slices.Clone(s.dirs)}
	as := make([]arg, len(args))
	for i, a := range args {
		if a == unknownField {
			return false
		}
		as[i] = arg{s: a}
	}
	d := k.argv(as, false)
	return d == nil || d.Rule == "secret.path" || d.Rule == "secret.recursive"
}
