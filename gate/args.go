package gate

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// flagUse records one flag given to a command, with its value if any.
type flagUse struct {
	name  string
	value string
}

type flagKind int

const (
	flagUnknown flagKind = iota
	flagUnsafe
	flagBool     // takes no value
	flagValue    // takes a value
	flagOptional // long flag that may take an attached value (--color=)
)

// lookupFlag finds a flag in rules, most specific first: the first rule
// that mentions the flag decides, so a verb can allow a flag its command
// marks unsafe (git -p pages, git log -p prints patches).
func lookupFlag(rules []*Rule, flag string) (flagKind, string) {
	for _, r := range rules {
		if reason, ok := r.UnsafeFlags[flag]; ok {
			return flagUnsafe, reason
		}
		switch {
		case slices.Contains(r.ValueFlags, flag):
			return flagValue, ""
		case slices.Contains(r.OptionalValueFlags, flag):
			return flagOptional, ""
		case slices.Contains(r.Flags, flag):
			return flagBool, ""
		case strings.HasPrefix(flag, "--") && slices.Contains(r.Flags, flag+"="):
			return flagOptional, ""
		}
	}
	return flagUnknown, ""
}

// parseFlag reads the flag at args[0] against the flag tables of rules (a
// verb's rule, then its command's). It returns how many following
// arguments the flag consumed as its value, and records uses in seen.
func parseFlag(cmd string, rules []*Rule, args []arg, seen *[]flagUse) (int, *Decision) {
	a := args[0].s
	record := func(name, value string) {
		if seen != nil {
			*seen = append(*seen, flagUse{name, value})
		}
	}
	unsafe := func(flag, reason string) *Decision {
		return ptr(confirm("flag.unsafe", "`%s %s` %s", cmd, flag, reason))
	}
	unknown := func(flag string) *Decision {
		return ptr(confirm("flag.unknown", "`%s` flag %s is not on the read-only table", cmd, flag))
	}
	missing := func(flag string) *Decision {
		return ptr(confirm("flag.unknown", "`%s` flag %s is missing its value", cmd, flag))
	}
	if strings.HasPrefix(a, "--") {
		name, value, hasValue := strings.Cut(a, "=")
		kind, reason := lookupFlag(rules, name)
		switch {
		case kind == flagUnsafe:
			return 0, unsafe(name, reason)
		case hasValue && (kind == flagValue || kind == flagOptional):
			record(name, value)
			return 0, nil
		case !hasValue && (kind == flagBool || kind == flagOptional):
			record(name, "")
			return 0, nil
		case !hasValue && kind == flagValue:
			if len(args) < 2 {
				return 0, missing(name)
			}
			record(name, args[1].s)
			return 1, nil
		}
		return 0, unknown(name)
	}
	// A single-dash word flag (find's -name, ip's -br) or a short flag.
	switch kind, reason := lookupFlag(rules, a); kind {
	case flagUnsafe:
		return 0, unsafe(a, reason)
	case flagBool, flagOptional:
		record(a, "")
		return 0, nil
	case flagValue:
		if len(args) < 2 {
			return 0, missing(a)
		}
		record(a, args[1].s)
		return 1, nil
	}
	if wholeFlags(rules) {
		// No clusters: only a value flag with a number attached (-l64).
		f := a[:2]
		kind, reason := lookupFlag(rules, f)
		switch {
		case kind == flagUnsafe:
			return 0, unsafe(f, reason)
		case (kind == flagValue || kind == flagOptional) && attachedNumber.MatchString(a[2:]):
			record(f, a[2:])
			return 0, nil
		}
		return 0, unknown(a)
	}
	if isNumber(a[1:]) {
		for _, r := range rules {
			if r.NumericFlags {
				record(a, "")
				return 0, nil
			}
		}
		return 0, unknown(a)
	}
	// A cluster of short flags: -la, -n5, -tn 5.
	for i := 1; i < len(a); i++ {
		f := "-" + a[i:i+1]
		switch kind, reason := lookupFlag(rules, f); kind {
		case flagUnsafe:
			return 0, unsafe(f, reason)
		case flagValue:
			if i+1 < len(a) {
				record(f, a[i+1:])
				return 0, nil
			}
			if len(args) < 2 {
				return 0, missing(f)
			}
			record(f, args[1].s)
			return 1, nil
		case flagOptional:
			// getopt gives an optional argument the rest of the cluster,
			// never the next word.
			record(f, a[i+1:])
			return 0, nil
		case flagBool:
			record(f, "")
		default:
			return 0, unknown(f)
		}
	}
	return 0, nil
}

// attachedNumber is a number attached to a whole-word value flag: xxd
// -l64, -s+0x10, -c16.
var attachedNumber = regexp.MustCompile(`^[+-]?(0[xX][0-9a-fA-F]+|[0-9]+)$`)

func wholeFlags(rules []*Rule) bool {
	for _, r := range rules {
		if r.WholeFlags {
			return true
		}
	}
	return false
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// rule judges a read-only table command's arguments.
func (k *checker) rule(name string, r *Rule, args []arg) *Decision {
	if r.Check == "find" {
		return k.find(name, r, args)
	}
	if r.ResponseFiles {
		// libiberty expands @FILE wherever it stands, even after --.
		for _, a := range args {
			if strings.HasPrefix(a.s, "@") {
				return ptr(confirm("flag.response-file", "`%s %s` reads more arguments from the file %s", name, a.s, a.s[1:]))
			}
		}
	}
	if r.Check == "tar" && len(args) > 0 && !strings.HasPrefix(args[0].s, "-") {
		// Old-style options (tar tzf FILE): the first word is a cluster
		// whose value letters take the following words in order. Read as
		// a dashed cluster only when f, the one value letter on the
		// table, comes last; then both readings agree.
		if i := strings.IndexByte(args[0].s, 'f'); i >= 0 && i != len(args[0].s)-1 {
			return ptr(confirm("flag.unknown", "`tar %s`: old-style options with f before other letters are not on the read-only table", args[0].s))
		}
		args = append([]arg{{s: "-" + args[0].s}}, args[1:]...)
	}
	k.endedFlags = false
	rules := []*Rule{r}
	cur := r
	verb := ""
	var seen []flagUse
	var operands []arg
	endFlags := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !endFlags && a.s == "--" {
			endFlags = true
			k.endedFlags = true
			continue
		}
		if !endFlags && r.OptionsFirst && len(operands) > 0 {
			endFlags = true // the tool reads no flags after its first operand
		}
		if !endFlags && isFlag(a.s) && !a.glob {
			n, d := parseFlag(quoteless(name, verb), rules, args[i:], &seen)
			if d != nil {
				return d
			}
			i += n
			continue
		}
		if len(cur.Verbs) > 0 {
			label := quoteless(name, verb)
			if a.glob {
				return ptr(confirm("word.glob", "a glob as the subcommand of `%s`", label))
			}
			vr, ok := cur.Verbs[a.s]
			if !ok {
				if reason, ok := cur.UnsafeOperands[a.s]; ok {
					return ptr(confirm("verb.unsafe", "`%s %s` %s", label, a.s, reason))
				}
				return ptr(confirm("verb.unknown", "`%s %s` is not a read-only subcommand", label, a.s))
			}
			verb = strings.TrimSpace(verb + " " + a.s)
			cur = vr
			rules = append([]*Rule{vr}, rules...)
			if r.GlobalFlagsFirst {
				rules = []*Rule{vr}
			}
			continue
		}
		if !endFlags && a.glob && !r.XargsFlags && !cur.XargsFlags && globMayStartDash(a.s) {
			// A file named --files0-from=x in the directory would be
			// read as a flag (wc -l * runs wc -l --files0-from=x).
			return ptr(confirm("word.glob", "the glob %q may expand to a name that `%s` reads as a flag; end the flags with -- first", a.s, quoteless(name, verb)))
		}
		operands = append(operands, a)
	}
	label := quoteless(name, verb)
	for _, f := range seen {
		for _, rr := range rules {
			pat, ok := rr.FlagValues[f.name]
			if !ok {
				continue
			}
			if re := k.c.operandRE[pat]; re == nil || !re.MatchString(f.value) {
				return ptr(confirm("flag.value", "`%s %s %s`: only values matching %s are read-only", label, f.name, f.value, pat))
			}
			break
		}
	}
	for _, rr := range rules {
		// Sorted, so that the same command always gets the same reason.
		for _, flag := range slices.Sorted(maps.Keys(rr.RequireFlags)) {
			if !slices.ContainsFunc(seen, func(f flagUse) bool { return f.name == flag }) {
				return ptr(confirm("flag.required", "`%s` %s", label, rr.RequireFlags[flag]))
			}
		}
	}
	switch cur.Check {
	case "sed":
		var d *Decision
		if operands, d = sedScripts(seen, operands); d != nil {
			return d
		}
	case "ps":
		if d := psOperands(operands); d != nil {
			return d
		}
	case "date":
		for _, a := range operands {
			if !strings.HasPrefix(a.s, "+") {
				return ptr(confirm("operand.unsafe", "`date %s` sets the system clock; only +FORMAT operands are read-only", a.s))
			}
		}
	case "interval":
		// vmstat, iostat, mpstat: without a count they report forever.
		for _, a := range operands {
			if !isNumber(a.s) {
				return ptr(confirm("operand.unknown", "`%s %s`: only a numeric delay and count are read-only", label, a.s))
			}
		}
		if len(operands) == 1 {
			return ptr(confirm("operand.count", "`%s %s` reports forever without a count (use DELAY COUNT)", label, operands[0].s))
		}
	case "ip":
		if d := ipOperands(operands); d != nil {
			return d
		}
	case "seq":
		if d := seqOperands(operands); d != nil {
			return d
		}
	case "tar":
		has := func(names ...string) bool {
			return slices.ContainsFunc(seen, func(f flagUse) bool { return slices.Contains(names, f.name) })
		}
		if !has("-t", "--list") {
			return ptr(confirm("flag.required", "`tar` only lists (-t) on the read-only table"))
		}
		if !has("-f", "--file") {
			return ptr(confirm("flag.required", "`tar -t` without -f reads the tape drive or $TAPE; name the archive with -f"))
		}
	case "jq":
		// Every operand: --arg NAME VALUE takes two words, the gate one.
		for _, a := range operands {
			if rule, why := jqProblem(a.s); rule != "" {
				return ptr(confirm(rule, "`jq` filter %q %s", a.s, why))
			}
		}
	case "git-branch":
		listing := slices.ContainsFunc(seen, func(f flagUse) bool { return f.name == "--list" || f.name == "-l" })
		if len(operands) > 0 && !listing {
			return ptr(confirm("git.branch", "`git branch NAME` creates a branch; only listing (--list) is read-only"))
		}
	}
	if r.Check == "git" {
		if d := k.gitRepo(seen); d != nil {
			return d
		}
	}
	if len(cur.PatternFlags) > 0 && len(operands) > 0 {
		given := slices.ContainsFunc(seen, func(f flagUse) bool { return slices.Contains(cur.PatternFlags, f.name) })
		if !given {
			if operands[0].glob {
				return ptr(confirm("word.glob", "an unquoted glob as the pattern of `%s`", label))
			}
			operands = operands[1:] // the pattern, not a file
		}
	}
	return k.operands(label, r, cur, seen, operands)
}

func quoteless(name, verb string) string {
	if verb == "" {
		return name
	}
	return name + " " + verb
}

// operands checks the non-flag arguments against the rule's operand kind.
func (k *checker) operands(label string, r, cur *Rule, seen []flagUse, operands []arg) *Decision {
	kind := cur.Operands
	if len(operands) > 0 && (kind == "" || kind == "none") {
		return ptr(confirm("operand.none", "`%s` takes no operands on the read-only table", label))
	}
	if cur.MaxOperands > 0 && len(operands) > cur.MaxOperands {
		return ptr(confirm("operand.count", "`%s` with more than %d operands can write a file", label, cur.MaxOperands))
	}
	for _, f := range seen {
		if (slices.Contains(cur.FileFlags, f.name) || slices.Contains(r.FileFlags, f.name)) && f.value != "-" {
			if d := k.readable(r, cur, seen, f.value); d != nil {
				return d
			}
		}
	}
	recursive := cur.Recursive || r.Recursive || slices.ContainsFunc(seen, func(f flagUse) bool {
		return slices.Contains(cur.RecursiveFlags, f.name) || slices.Contains(r.RecursiveFlags, f.name)
	})
	re := k.c.operandRE[cur.OperandPattern]
	for _, a := range operands {
		if cur.OperandPattern != "" && (re == nil || !re.MatchString(a.s)) {
			return ptr(confirm("operand.unsafe", "`%s %s`: only operands matching %s are read-only", label, a.s, cur.OperandPattern))
		}
		for _, part := range strings.FieldsFunc(a.s, func(r rune) bool { return r == ',' || r == '/' }) {
			if reason, ok := cur.UnsafeOperands[part]; ok {
				return ptr(confirm("operand.unsafe", "`%s %s` %s", label, a.s, reason))
			}
			if cur.ResourceNames || r.ResourceNames {
				kind, _, _ := strings.Cut(strings.ToLower(part), ".")
				if reason, ok := cur.UnsafeOperands[kind]; ok {
					return ptr(confirm("operand.unsafe", "`%s %s` %s (kubectl reads resource names case-insensitively, with or without .VERSION.GROUP)", label, a.s, reason))
				}
			}
		}
		if a.glob && !cur.Globs {
			return ptr(confirm("word.glob", "the glob %q could match a sensitive file", a.s))
		}
		if kind != "files" || a.s == "-" {
			continue
		}
		if d := k.readable(r, cur, seen, a.s); d != nil {
			return d
		}
		if recursive {
			if d := k.recursive(label, a.s); d != nil {
				return d
			}
		}
	}
	if recursive && kind == "files" && len(operands) == 0 {
		return k.recursive(label, ".")
	}
	return nil
}

// readable judges a file the command reads as content: a sensitive path
// (less the rule's ignore_sensitive patterns) is confirm, and so is an
// endless device unless a bounded_read flag limits the read.
func (k *checker) readable(r, cur *Rule, seen []flagUse, file string) *Decision {
	ignore := cur.IgnoreSensitive
	if cur != r {
		ignore = append(slices.Clone(ignore), r.IgnoreSensitive...)
	}
	pat := k.sensitive(file, ignore)
	if pat == endlessPath && (k.bounded(cur, seen) || k.bounded(r, seen)) {
		return nil
	}
	if pat != "" {
		return ptr(readsSensitive(file, pat))
	}
	return nil
}

// bounded reports whether a bounded_read flag of r bounds the read: the
// last flag that sets a value (or a count, as -5 does) must be one of them
// with a matching value, since the last one wins (`head -c 16 -n 1` reads
// lines, and /dev/zero has none).
func (k *checker) bounded(r *Rule, seen []flagUse) bool {
	ok := false
	for _, f := range seen {
		if pat, isBound := r.BoundedRead[f.name]; isBound {
			re := k.c.operandRE[pat]
			ok = re != nil && re.MatchString(f.value)
			continue
		}
		if f.value != "" || isNumber(strings.TrimLeft(f.name, "-")) || lookupValueFlag(r, f.name) {
			ok = false
		}
	}
	return ok
}

// lookupValueFlag reports whether flag takes a value in r.
func lookupValueFlag(r *Rule, flag string) bool {
	return slices.Contains(r.ValueFlags, flag) || slices.Contains(r.OptionalValueFlags, flag)
}

// recursive passes a recursive read of dir only under a recursive read
// root, and only when no sensitive path that starts at / lies inside it.
func (k *checker) recursive(label, dir string) *Decision {
	for _, wd := range k.dirs {
		if d := k.recursiveIn(label, dir, wd); d != nil {
			return d
		}
	}
	return nil
}

func (k *checker) recursiveIn(label, dir, wd string) *Decision {
	w := resolvePath(dir, wd, k.c.home)
	if w.absolute {
		for _, root := range k.p.RecursiveReadRoots {
			rw := resolvePath(root, "", "")
			if len(w.segs) >= len(rw.segs) && slices.Equal(w.segs[:len(rw.segs)], rw.segs) {
				for _, pp := range k.c.anchored {
					if matchUnder(pp.segs, w.segs) {
						return ptr(confirm("secret.recursive", "a recursive read of %s could read %s", dir, pp.raw))
					}
				}
				return nil
			}
		}
	}
	return ptr(confirm("secret.recursive", "`%s` reading %s recursively could read secret files; only %s may be read recursively",
		label, dir, strings.Join(k.p.RecursiveReadRoots, ", ")))
}

// gitRepo passes git only inside a trusted repository: a repository's own
// config can run programs (core.fsmonitor, diff.external, textconv).
func (k *checker) gitRepo(seen []flagUse) *Decision {
	if k.p.TrustAllRepos {
		return nil
	}
	for _, wd := range k.dirs {
		if d := k.gitRepoIn(seen, wd); d != nil {
			return d
		}
	}
	return nil
}

func (k *checker) gitRepoIn(seen []flagUse, dir string) *Decision {
	for _, f := range seen {
		if f.name == "-C" {
			switch {
			case strings.HasPrefix(f.value, "/"):
				dir = f.value
			case dir != "":
				dir = dir + "/" + f.value
			}
		}
	}
	if dir == "" {
		return ptr(confirm("git.untrusted", "git runs programs named in a repository's config (core.fsmonitor, diff.external) and the repository is unknown"))
	}
	w := resolvePath(dir, "", "")
	for _, repo := range k.p.TrustedRepos {
		rw := resolvePath(repo, "", "")
		if len(w.segs) >= len(rw.segs) && slices.Equal(w.segs[:len(rw.segs)], rw.segs) {
			return nil
		}
	}
	return ptr(confirm("git.untrusted", "git runs programs named in a repository's config (core.fsmonitor, diff.external); %s is not a trusted repository", "/"+strings.Join(w.segs, "/")))
}

// psOperands rejects BSD-style ps options that print environments.
func psOperands(operands []arg) *Decision {
	for _, a := range operands {
		if isNumber(a.s) {
			continue
		}
		if strings.Contains(a.s, "e") {
			return ptr(confirm("secret.env", "`ps %s` prints every process's environment, which holds secrets", a.s))
		}
		for _, r := range a.s {
			if !strings.ContainsRune("auxwfjlrTgHhmSv", r) {
				return ptr(confirm("operand.unknown", "`ps %s` is not a read-only ps option", a.s))
			}
		}
	}
	return nil
}

// find judges find's expression grammar: start paths, then tests and
// actions from the rule's tables.
func (k *checker) find(name string, r *Rule, args []arg) *Decision {
	i := 0
	for i < len(args) && (args[i].s == "-H" || args[i].s == "-L" || args[i].s == "-P") {
		i++
	}
	for i < len(args) && !strings.HasPrefix(args[i].s, "-") && args[i].s != "(" && args[i].s != "!" {
		i++ // start paths: find prints names, not contents
	}
	for ; i < len(args); i++ {
		a := args[i].s
		if reason, ok := r.UnsafeFlags[a]; ok {
			return ptr(confirm("flag.unsafe", "`%s %s` %s", name, a, reason))
		}
		switch {
		case a == "(" || a == ")" || a == "!" || a == ",":
		case slices.Contains(r.Flags, a):
		case slices.Contains(r.ValueFlags, a):
			if i+1 >= len(args) {
				return ptr(confirm("flag.unknown", "`%s %s` is missing its value", name, a))
			}
			i++
		default:
			return ptr(confirm("flag.unknown", "`%s` expression %s is not on the read-only table", name, a))
		}
	}
	return nil
}

// maxSeqLines is the most lines `seq` may print and pass: enough for any
// loop a diagnosis needs, far below what fills memory or a disk.
const maxSeqLines = 1_000_000

var seqNumber = regexp.MustCompile(`^[+-]?[0-9]{1,18}(\.[0-9]{1,18})?$`)

// seqOperands passes `seq [FIRST [INCREMENT]] LAST` only for plain decimal
// numbers that print at most maxSeqLines lines: `seq inf`, `seq 1 1e18`,
// hexadecimal and a zero increment (which older seq repeats forever) are
// confirm.
func seqOperands(operands []arg) *Decision {
	if len(operands) == 0 || len(operands) > 3 {
		return ptr(confirm("operand.count", "`seq` takes one to three numbers"))
	}
	nums := make([]float64, len(operands))
	for i, a := range operands {
		if !seqNumber.MatchString(a.s) {
			return ptr(confirm("operand.endless", "`seq %s`: only plain decimal numbers are read-only (inf, exponents and hexadecimal can run without end)", a.s))
		}
		n, err := strconv.ParseFloat(a.s, 64)
		if err != nil {
			return ptr(confirm("operand.endless", "`seq %s` is not a number the gate can read", a.s))
		}
		nums[i] = n
	}
	first, inc, last := 1.0, 1.0, nums[len(nums)-1]
	switch len(nums) {
	case 2:
		first = nums[0]
	case 3:
		first, inc = nums[0], nums[1]
	}
	if inc == 0 {
		return ptr(confirm("operand.endless", "`seq` with a zero increment prints without end"))
	}
	if lines := (last-first)/inc + 1; lines > maxSeqLines {
		return ptr(confirm("operand.endless", "`seq` would print %.0f lines, more than the %d a read-only command may", lines, maxSeqLines))
	}
	return nil
}

// globMayStartDash reports whether a glob word could expand to a name
// starting with -: it starts with a pattern character rather than text.
func globMayStartDash(s string) bool {
	return s != "" && (s[0] == '*' || s[0] == '?' || s[0] == '[' || s[0] == '-')
}
