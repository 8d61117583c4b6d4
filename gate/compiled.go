package gate

import (
	"path"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// compiled holds lookups derived from a Policy's tables. It is built once
// by ParsePolicy and the With methods and never changed afterwards.
type compiled struct {
	home           string
	maxBytes       int
	sensitivePaths []pathPattern // the sensitive paths, then the protected ones
	nSensitive     int           // how many of sensitivePaths are sensitive_paths entries
	protected      []pathPattern // the protected paths and everything under them
	devices        map[string]bool
	endless        map[string]bool
	anchored       []pathPattern // the sensitive patterns that start at /
	blockDevices   []pathPattern
	writeTargets   []pathPattern
	readTargets    []pathPattern
	recTargets     []pathPattern
	recCommands    map[string]bool
	deleters       map[string]bool
	deviceWriters  map[string]bool
	shells         map[string]bool
	assignments    map[string]bool
	scripts        map[string]bool
	operandRE      map[string]*regexp.Regexp // operand_pattern text to its regexp
	denyPats       []string                  // glob keys of Deny.Commands, sorted
	neverPats      []string                  // glob keys of NeverPass, sorted
	protectedNames []string                  // last elements of the protected paths; nil: match every word
	printers       printers
}

// comp returns the compiled tables, compiling them now for a Policy that
// was built by hand rather than by ParsePolicy.
func (p *Policy) comp() *compiled {
	if p == nil {
		return (&Policy{}).compile()
	}
	if p.c != nil {
		return p.c
	}
	return p.compile()
}

func (p *Policy) compile() *compiled {
	c := &compiled{
		home:          strings.TrimSuffix(p.Home, "/"),
		maxBytes:      p.MaxCommandBytes,
		recCommands:   set(p.Deny.RecursiveCommands),
		deleters:      set(p.Deny.Deleters),
		deviceWriters: set(p.Deny.DeviceWriters),
		shells:        set(p.Deny.Shells),
		assignments:   set(p.Assignments),
		scripts:       set(p.ReadOnlyScripts),
	}
	c.operandRE = map[string]*regexp.Regexp{}
	var addRE func(r *Rule)
	addRE = func(r *Rule) {
		if r == nil {
			return
		}
		pats := []string{r.OperandPattern}
		for _, v := range r.FlagValues {
			pats = append(pats, v)
		}
		for _, v := range r.BoundedRead {
			pats = append(pats, v)
		}
		for _, pat := range pats {
			if pat != "" && c.operandRE[pat] == nil {
				// Anchored, so the pattern must match the whole word. A bad
				// pattern (hand-built policy) matches nothing: confirm.
				if re, err := regexp.Compile(`^(?:` + pat + `)$`); err == nil {
					c.operandRE[pat] = re
				}
			}
		}
		for _, v := range r.Verbs {
			addRE(v)
		}
	}
	for _, r := range p.Commands {
		addRE(r)
	}
	for _, w := range p.Wrappers {
		if w != nil {
			addRE(&Rule{FlagValues: w.FlagValues})
		}
	}
	if c.maxBytes == 0 {
		c.maxBytes = 4096
	}
	for _, s := range p.SensitivePaths {
		for _, e := range expandBraces(s) {
			pp := compilePattern(e, c.home)
			pp.raw = s
			c.sensitivePaths = append(c.sensitivePaths, pp)
		}
	}
	c.nSensitive = len(c.sensitivePaths)
	for _, s := range p.ProtectedPaths {
		c.protected = append(c.protected, compilePattern(s, c.home), compilePattern(path.Join(s, "**"), c.home))
	}
	c.sensitivePaths = append(c.sensitivePaths, c.protected...)
	c.denyPats = globKeys(p.Deny.Commands)
	c.neverPats = globKeys(p.NeverPass)
	for _, s := range p.ProtectedPaths {
		name := path.Base(s)
		if strings.ContainsAny(name, `*?[\`) || name == "/" || name == "." || name == "~" {
			c.protectedNames = nil
			break
		}
		c.protectedNames = append(c.protectedNames, name)
	}
	c.devices = map[string]bool{}
	for _, s := range p.ReadableDevices {
		c.devices[path.Clean(s)] = true
	}
	c.endless = map[string]bool{}
	for _, s := range p.EndlessDevices {
		c.endless[path.Clean(s)] = true
	}
	for _, pp := range c.sensitivePaths {
		if pp.anchored {
			c.anchored = append(c.anchored, pp)
		}
	}
	for _, s := range p.Deny.BlockDevices {
		c.blockDevices = append(c.blockDevices, compilePattern(s, ""))
	}
	for _, s := range p.Deny.WriteTargets {
		c.writeTargets = append(c.writeTargets, compilePattern(s, ""))
	}
	for _, s := range p.Deny.ReadTargets {
		c.readTargets = append(c.readTargets, compilePattern(s, ""))
	}
	for _, s := range p.Deny.RecursiveTargets {
		if s == "~" || strings.HasPrefix(s, "~/") {
			// Matched literally: the deny scan resolves $HOME and ~ to "~".
			c.recTargets = append(c.recTargets, pathPattern{raw: s, segs: strings.Split(path.Clean(s), "/")})
			if c.home != "" {
				// And as the home directory, reached by cd ~ or a path.
				c.recTargets = append(c.recTargets, compilePattern(c.home+s[1:], ""))
			}
			continue
		}
		c.recTargets = append(c.recTargets, compilePattern(s, ""))
	}
	return c
}

func set(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}

// checkText applies the checks made before parsing: a NUL byte is deny;
// other control characters (except newline and tab), zero-width and
// bidirectional formatting characters, invalid UTF-8 and text over max
// bytes are confirm, because what a reviewer sees would not be what runs.
func checkText(s string, max int) (Decision, bool) {
	if strings.IndexByte(s, 0) >= 0 {
		return deny("input.nul", "a NUL byte makes the shell and the reviewer see different commands"), false
	}
	if len(s) > max {
		return confirm("input.too-long", "the command is %d bytes, over the %d-byte limit a reviewer can read", len(s), max), false
	}
	if !utf8.ValidString(s) {
		return confirm("input.invalid-utf8", "the text is not valid UTF-8"), false
	}
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			return confirm("input.control", "control character %U hides part of the command", r), false
		case isInvisible(r):
			return confirm("input.invisible", "invisible or direction-changing character %U can make the command read differently than it runs", r), false
		}
	}
	return Decision{}, true
}

// isInvisible reports zero-width, bidirectional-override and other format
// characters.
func isInvisible(r rune) bool {
	switch {
	case r >= 0x200b && r <= 0x200f, // zero-width space, joiners, LRM, RLM
		r >= 0x202a && r <= 0x202e, // bidi embeddings and overrides
		r >= 0x2060 && r <= 0x206f, // word joiner, invisible operators, bidi isolates
		r == 0xfeff, r == 0x00ad, r == 0x061c, r == 0x180e:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}
