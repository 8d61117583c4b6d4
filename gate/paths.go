package gate

import (
	"path"
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
}

// resolvePath cleans p (.., //, ~) against the working directory dir ("" =
// unknown) and the home directory home ("" = unknown).
func resolvePath(p, dir, home string) where {
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		if home != "" {
			p = home + p[1:]
		} else {
			return relative(p[1:])
		}
	case strings.HasPrefix(p, "~"):
		// ~user: another user's home, wherever that is.
		if i := strings.IndexByte(p, '/'); i >= 0 {
			return relative(p[i:])
		}
		return where{}
	}
	if !strings.HasPrefix(p, "/") {
		if dir == "" || !strings.HasPrefix(dir, "/") {
			return relative(p)
		}
		p = dir + "/" + p
	}
	p = path.Clean(p)
	if p == "/" {
		return where{absolute: true}
	}
	return where{segs: strings.Split(p[1:], "/"), absolute: true}
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

// sensitive returns the first sensitive pattern matching p, or "".
func (c *compiled) sensitive(p, dir string) string {
	w := resolvePath(p, dir, c.home)
	for _, pp := range c.sensitivePaths {
		if pp.matches(w) {
			return pp.raw
		}
	}
	return ""
}

// ClassifyPath judges a path the read_file tool wants to read: a NUL byte
// is deny; control, zero-width and bidi characters, empty paths and
// sensitive paths are confirm; anything else is pass. A relative path is
// matched as if it could sit under any directory.
func (p *Policy) ClassifyPath(name string) Decision {
	if d, ok := checkText(name, 4096); !ok {
		return d
	}
	if name == "" {
		return confirm("path.empty", "an empty path")
	}
	c := p.comp()
	if pat := c.sensitive(name, ""); pat != "" {
		return confirm("secret.path", "%s is a sensitive path (matches %s)", name, pat)
	}
	return Decision{Verdict: Pass, Rule: "read-path", Reason: "not a sensitive path"}
}
