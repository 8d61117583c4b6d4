package gate

import (
	"path"
	"slices"
	"strings"
)

// pathPattern is a compiled sensitive-path pattern: path elements, where
// "**" matches any number of elements and other elements use path.Match.
type pathPattern struct {
	raw      string
	segs     []string
	anchored bool // starts at / (not with **)
}

func compilePattern(raw, home string) pathPattern {
	p := raw
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home != "" {
			p = home + p[1:]
		} else {
			p = "**" + p[1:]
		}
	}
	pp := pathPattern{raw: raw}
	if strings.HasPrefix(p, "/") {
		pp.anchored = true
		p = path.Clean(p)
		if p != "/" {
			pp.segs = strings.Split(p[1:], "/")
		}
		return pp
	}
	p = path.Clean(p)
	pp.segs = strings.Split(p, "/")
	if pp.segs[0] != "**" {
		pp.segs = append([]string{"**"}, pp.segs...)
	}
	return pp
}

// maxBraceExpansions bounds what one sensitive_paths pattern expands to;
// a policy whose pattern expands further is refused.
const maxBraceExpansions = 256

// expandBraces expands the {a,b,c} groups of a sensitive_paths pattern as
// bash expands braces, left to right, each group once (no nesting); an
// alternative may hold / or be empty, so /proc/*/{,task/*/}maps is
// /proc/*/maps and /proc/*/task/*/maps. A { without a closing } is
// literal, and so is a pattern of more than maxBraceExpansions.
func expandBraces(p string) []string {
	if braceCount(p) > maxBraceExpansions {
		return []string{p}
	}
	return expand(p)
}

// braceCount is how many patterns expandBraces(p) makes, without making
// them (capped just above maxBraceExpansions).
func braceCount(p string) int {
	n := 1
	for {
		open := strings.IndexByte(p, '{')
		if open < 0 {
			return n
		}
		end := strings.IndexByte(p[open:], '}')
		if end < 0 {
			return n
		}
		n *= strings.Count(p[open:open+end], ",") + 1
		if n > maxBraceExpansions {
			return maxBraceExpansions + 1
		}
		p = p[open+end+1:]
	}
}

func expand(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	end := strings.IndexByte(p[open:], '}')
	if end < 0 {
		return []string{p}
	}
	end += open
	var out []string
	for _, tail := range expand(p[end+1:]) {
		for _, alt := range strings.Split(p[open+1:end], ",") {
			out = append(out, p[:open]+alt+tail)
		}
	}
	return out
}

// matchSegs matches path elements against pattern elements.
func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			pat = pat[1:]
			if len(pat) == 0 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// matchUnder reports whether pattern can match some path at or under
// segs: whether the pattern could name something inside that directory.
func matchUnder(pat, segs []string) bool {
	for len(segs) > 0 {
		if len(pat) == 0 {
			return false
		}
		if pat[0] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return true
}

// where is a resolved path: absolute elements, or (when the directory it
// is relative to is unknown) relative elements that could sit anywhere.
type where struct {
	segs     []string
	absolute bool
	// magic is set when the path goes through a /proc magic link (a
	// process's cwd, root, exe, fd/N or map_files entry, also reached as
	// /dev/fd/N): what it names cannot be known without I/O.
	magic bool
	// linked is set when a link was replaced by its target (/dev/fd is
	// /proc/self/fd) before a later `..`.
	linked bool
	// rootTail, for a path through /proc/PID/root, is the rest of the path
	// read from that process's root: /proc/1/root/etc/shadow is
	// /etc/shadow for every process that shares our root.
	rootTail []string
	// lost is set when the path is relative to a directory the gate cannot
	// name: another user's home (~alice), the previous directory (~-), or
	// anything relative after `cd -` or `cd ~alice`.
	lost bool
}

// lostDir is the working directory after a cd the gate cannot follow (`cd
// -`, `cd ~alice`, `cd -P` through ..). Unlike "" (the unknown directory
// a command starts in, where a relative path is matched as the tail of
// every sensitive pattern), a relative path in lostDir cannot be judged at
// all: `cd ~root/.aws && cat credentials` must not pass because
// "credentials" alone names nothing sensitive. The NUL byte keeps it apart
// from every real path (the input never holds one).
const lostDir = "\x00lost"

// isLost reports whether dir is lostDir or a directory under it.
func isLost(dir string) bool { return strings.HasPrefix(dir, "\x00") }

// expandTilde applies bash's tilde expansion to the tilde-prefix of p (up
// to the first /): ~ and ~/ are the home ("" = unknown: the path is then
// relative to some directory), ~+ is dir, ~root is /root, and ~- (the
// previous directory), ~+N and ~-N (the directory stack) and every other
// ~user are lostDir. ok is false when p has no tilde-prefix.
func expandTilde(p, dir, home string) (string, bool) {
	if !strings.HasPrefix(p, "~") {
		return p, false
	}
	prefix, rest := p, ""
	if i := strings.IndexByte(p, '/'); i >= 0 {
		prefix, rest = p[:i], p[i:]
	}
	switch prefix {
	case "~":
		if home == "" {
			return strings.TrimPrefix(rest, "/"), true
		}
		return home + rest, true
	case "~+":
		if dir == "" {
			return strings.TrimPrefix(rest, "/"), true
		}
		return dir + rest, true
	case "~root":
		return "/root" + rest, true
	}
	return lostDir + rest, true
}

// resolvePath cleans p (.., //, ~) against the working directory dir ("" =
// unknown) and the home directory home ("" = unknown). It applies `..` the
// way the kernel does where the gate can know it without I/O: /dev/fd,
// /dev/stdin, /proc/self, /proc/thread-self and /proc/net are links, so
// /dev/fd/../../1/environ is /proc/1/environ, not /dev/1/environ; after a
// magic link (/proc/PID/root, cwd, fd/N…) the path is marked magic.
func resolvePath(p, dir, home string) where {
	if e, ok := expandTilde(p, dir, home); ok {
		if isLost(e) {
			return where{lost: true}
		}
		if !strings.HasPrefix(e, "/") {
			return relative(e) // under a home or directory the gate does not know
		}
		p = e
	}
	if !strings.HasPrefix(p, "/") && isLost(dir) {
		return where{lost: true}
	}
	if !strings.HasPrefix(p, "/") {
		if dir == "" || !strings.HasPrefix(dir, "/") {
			return relative(p)
		}
		p = dir + "/" + p
	}
	if !strings.Contains(p, "/dev/") && !strings.Contains(p, "/proc/") && !strings.HasSuffix(p, "/proc") && !strings.HasSuffix(p, "/dev") {
		// The common case: no link the gate knows of.
		p = path.Clean(p)
		if p == "/" {
			return where{absolute: true}
		}
		return where{segs: strings.Split(p[1:], "/"), absolute: true}
	}
	w := where{absolute: true, segs: make([]string, 0, 8)}
	rest := strings.Split(p[1:], "/")
	for i, seg := range rest {
		switch seg {
		case "", ".":
			continue
		case "..":
			if w.magic || magicLink(w.segs) {
				// .. from a link's target: the target is unknown.
				w.magic = true
				continue
			}
			if len(w.segs) > 0 {
				w.segs = w.segs[:len(w.segs)-1]
			}
			continue
		}
		if magicLink(w.segs) {
			if isProcRoot(w.segs) && !w.magic && w.rootTail == nil {
				w.rootTail = cleanSegs(rest[i:])
			}
			w.magic = true
		}
		w.segs = append(w.segs, seg)
		if len(w.segs) == 2 {
			before := w.segs[1]
			w.segs = rewriteLink(w.segs)
			w.linked = w.linked || len(w.segs) != 2 || w.segs[1] != before
		}
	}
	if magicLink(w.segs) && !stdio(w.segs) {
		w.magic = true // reading the link itself reads its target
	}
	return w
}

// rewriteLink replaces a path that just became a known symbolic link by its
// target, so that a later `..` leaves the target, as the kernel does.
func rewriteLink(segs []string) []string {
	n := len(segs)
	switch {
	case n == 2 && segs[0] == "dev":
		switch segs[1] {
		case "fd":
			return []string{"proc", "self", "fd"}
		case "stdin":
			return []string{"proc", "self", "fd", "0"}
		case "stdout":
			return []string{"proc", "self", "fd", "1"}
		case "stderr":
			return []string{"proc", "self", "fd", "2"}
		case "core":
			return []string{"proc", "kcore"}
		}
	case n == 2 && segs[0] == "proc":
		switch segs[1] {
		case "thread-self":
			return []string{"proc", "self", "task", "self"}
		case "net", "mounts":
			return []string{"proc", "self", segs[1]}
		}
	}
	return segs
}

// magicLink reports whether segs names a /proc link whose target the gate
// cannot know: /proc/PID/{cwd,root,exe}, /proc/PID/fd/N,
// /proc/PID/map_files/X, and the same under /proc/PID/task/TID.
func magicLink(segs []string) bool {
	if len(segs) < 3 || segs[0] != "proc" {
		return false
	}
	s := segs[2:]
	if len(s) >= 3 && s[0] == "task" {
		s = s[2:]
	}
	switch {
	case len(s) == 1:
		return s[0] == "cwd" || s[0] == "root" || s[0] == "exe"
	case len(s) == 2:
		return s[0] == "fd" || s[0] == "map_files"
	}
	return false
}

func isProcRoot(segs []string) bool {
	return len(segs) >= 3 && segs[0] == "proc" && segs[len(segs)-1] == "root"
}

// stdio reports the command's own standard streams (/dev/stdin), which
// the gate controls through redirections.
func stdio(segs []string) bool {
	return len(segs) == 4 && segs[1] == "self" && segs[2] == "fd" && (segs[3] == "0" || segs[3] == "1" || segs[3] == "2")
}

// cleanSegs cleans path elements lexically, as if they started at /.
func cleanSegs(rest []string) []string {
	p := path.Clean("/" + strings.Join(rest, "/"))
	if p == "/" {
		return []string{}
	}
	return strings.Split(p[1:], "/")
}

func relative(p string) where {
	p = path.Clean(strings.TrimPrefix(p, "/"))
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s == ".." || s == "." || s == "" {
			continue // above an unknown directory: still unknown
		}
		segs = append(segs, s)
	}
	return where{segs: segs}
}

// matches reports whether the pattern matches w. A relative w matches when
// the pattern matches it under some directory.
func (pp pathPattern) matches(w where) bool {
	if w.absolute {
		return matchSegs(pp.segs, w.segs)
	}
	// Under an unknown directory, the path could be the tail of a
	// sensitive path (shadow could be /etc/shadow), but a bare ** tail
	// would make every relative path sensitive, so a suffix must start at
	// a named element.
	for i := 0; i < len(pp.segs); i++ {
		if i > 0 && pp.segs[i] == "**" {
			continue
		}
		if matchSegs(pp.segs[i:], w.segs) {
			return true
		}
	}
	return false
}

// What sensitive returns for paths no pattern names.
const (
	magicPath   = "/proc/PID/{cwd,root,exe,fd/N} (a link the gate cannot follow)"
	devicePath  = "/dev/* (a device or link not in readable_devices)"
	endlessPath = "/dev/* (a device that never ends: endless_devices)"
	lostPath    = "a directory the gate cannot follow (~user, ~-, or after cd -, cd ~user)"
)

// sensitive returns the first sensitive pattern matching p, or "". A path
// through a /proc magic link and a device not in readable_devices are
// sensitive too.
func (c *compiled) sensitive(p, dir string, ignore []string) string {
	w := resolvePath(p, dir, c.home)
	if w.magic {
		return magicPath
	}
	if w.lost {
		return lostPath
	}
	if stdio(w.segs) {
		return "" // /dev/stdin: the gate checks what the command reads through redirections
	}
	for i, pp := range c.sensitivePaths {
		if pp.matches(w) && !c.ignored(i, ignore) {
			return pp.raw
		}
	}
	if w.absolute && len(w.segs) >= 2 && w.segs[0] == "dev" && !c.devices["/"+strings.Join(w.segs, "/")] {
		if c.endless["/"+strings.Join(w.segs, "/")] {
			return endlessPath
		}
		return devicePath
	}
	if w.linked {
		// The path went through a link the gate followed; the plain
		// lexical reading must be clean too, in case a kernel resolves
		// the link differently than modelled.
		if lex := lexical(p, dir, c.home); lex.absolute {
			for i, pp := range c.sensitivePaths {
				if pp.matches(lex) && !c.ignored(i, ignore) {
					return pp.raw
				}
			}
			if len(lex.segs) >= 2 && lex.segs[0] == "dev" && !c.devices["/"+strings.Join(lex.segs, "/")] {
				return devicePath
			}
		}
	}
	return ""
}

// ignored reports whether sensitive pattern i is one of ignore; the
// protected paths (after the sensitive ones) are never ignored.
func (c *compiled) ignored(i int, ignore []string) bool {
	return i < c.nSensitive && slices.Contains(ignore, c.sensitivePaths[i].raw)
}

// lexical cleans an absolute (or dir-joined) path as text only.
func lexical(p, dir, home string) where {
	if e, ok := expandTilde(p, dir, home); ok {
		if !strings.HasPrefix(e, "/") {
			return where{}
		}
		p = e
	}
	if !strings.HasPrefix(p, "/") {
		if dir == "" || !strings.HasPrefix(dir, "/") {
			return where{}
		}
		p = dir + "/" + p
	}
	p = path.Clean(p)
	if p == "/" {
		return where{absolute: true}
	}
	return where{segs: strings.Split(p[1:], "/"), absolute: true}
}

// protected returns the protected pattern p matches, or "".
func (c *compiled) protectedPath(w where) string {
	for _, pp := range c.protected {
		if pp.matches(w) {
			return pp.raw
		}
		if w.rootTail != nil && pp.matches(where{segs: w.rootTail, absolute: true}) {
			return pp.raw
		}
	}
	return ""
}

// ClassifyPath judges a path the read_file tool wants to read: a NUL byte
// and the deny rules' read targets (other processes' environ and mem,
// also through /dev/fd/.. and /proc/PID/root) are deny; control,
// zero-width and bidi characters, empty paths, sensitive and protected
// paths, devices not in readable_devices and paths through /proc magic
// links are confirm; anything else is pass. A relative path is matched as
// if it could sit under any directory. The check is lexical: the caller
// opens the path and checks what it opened (a symbolic link can still
// lead elsewhere).
func (p *Policy) ClassifyPath(name string) Decision {
	if d, ok := checkText(name, 4096); !ok {
		return d
	}
	if name == "" {
		return confirm("path.empty", "an empty path")
	}
	c := p.comp()
	w := resolvePath(name, "", c.home)
	for _, pp := range c.readTargets {
		if pp.matches(w) || w.rootTail != nil && pp.matches(where{segs: w.rootTail, absolute: true}) {
			return deny("deny.read-target", "%s is another process's memory or environment (matches %s)", name, pp.raw)
		}
	}
	if pat := c.sensitive(name, "", nil); pat == endlessPath {
		return confirm("input.endless", "%s never ends", name)
	} else if pat != "" {
		return confirm("secret.path", "%s is a sensitive path (matches %s)", name, pat)
	}
	return Decision{Verdict: Pass, Rule: "read-path", Reason: "not a sensitive path"}
}
