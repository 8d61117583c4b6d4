package agentcore

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// gitleaksRules is gitleaks' default rule set (gitleaks/rules.json, made
// from gitleaks' config/gitleaks.toml by gitleaks/update.py; MIT, see
// gitleaks/LICENSE): a reviewed, maintained list of secret shapes (cloud
// keys, PEM private keys, JWTs, Slack, GitHub and GitLab tokens, ...).
//
//go:embed gitleaks/rules.json
var gitleaksRules []byte

// Masker masks well-known secret shapes in command output and file reads
// before they reach the model, the chat or the chain: each secret becomes
// [MASKED:RULE]. It is safe for concurrent use.
type Masker struct {
	rules  []maskRule
	global maskAllow
	// byPair indexes the rules' keywords (lower case, 2+ bytes) by their
	// first two bytes, for one pass over the text (pairIndex: 1 + index
	// into pairs, 0 for none).
	pairIndex []uint16
	pairs     [][]string
	// Source is where the rules come from (a gitleaks commit).
	Source string
}

type maskRule struct {
	id string
	// re is the rule's regexp, compiled the first time a text holds one
	// of the rule's keywords (every rule has some): a start compiled all
	// 221 for about 15 ms of CPU and 10 MB of garbage, while a run's texts
	// meet a handful. The rules are embedded at build time, and
	// TestMaskRulesCompile compiles each, so the compile cannot fail here.
	re       func() *regexp.Regexp
	group    int
	entropy  float64
	keywords []string
	allow    []maskAllow
	// multiline: the regex can match across lines (it names \n, [\s\S]
	// or the s flag), so it runs over the whole text.
	multiline bool
}

type maskAllow struct {
	regexes   []*regexp.Regexp
	stopwords []string
	target    string // "", "secret", "match" or "line"
	and       bool
	paths     bool // a path criterion, never met by output
}

type rulesFile struct {
	Source    string     `json:"source"`
	Allowlist allowJSON  `json:"allowlist"`
	Rules     []ruleJSON `json:"rules"`
}

type allowJSON struct {
	Regexes     []string `json:"regexes"`
	Stopwords   []string `json:"stopwords"`
	RegexTarget string   `json:"regexTarget"`
	Condition   string   `json:"condition"`
	Paths       bool     `json:"paths"`
}

type ruleJSON struct {
	ID          string      `json:"id"`
	Regex       string      `json:"regex"`
	SecretGroup int         `json:"secretGroup"`
	Entropy     float64     `json:"entropy"`
	Keywords    []string    `json:"keywords"`
	Allowlists  []allowJSON `json:"allowlists"`
}

// NewMasker reads the embedded gitleaks rules; each rule's regexp is
// compiled when a text first holds one of its keywords.
func NewMasker() (*Masker, error) {
	var f rulesFile
	if err := json.Unmarshal(gitleaksRules, &f); err != nil {
		return nil, fmt.Errorf("secret rules: %w", err)
	}
	m := &Masker{Source: f.Source}
	var err error
	if m.global, err = compileAllow(f.Allowlist); err != nil {
		return nil, err
	}
	for _, r := range f.Rules {
		src := r.Regex
		mr := maskRule{id: r.ID, re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(src) }), group: r.SecretGroup, entropy: r.Entropy, keywords: r.Keywords,
			multiline: strings.Contains(r.Regex, `\n`) || strings.Contains(r.Regex, `[\s\S`) || strings.Contains(r.Regex, `(?s`)}
		for _, a := range r.Allowlists {
			ca, err := compileAllow(a)
			if err != nil {
				return nil, fmt.Errorf("secret rule %s: %w", r.ID, err)
			}
			mr.allow = append(mr.allow, ca)
		}
		m.rules = append(m.rules, mr)
	}
	m.pairIndex = make([]uint16, 1<<16)
	seen := map[string]bool{}
	for _, r := range m.rules {
		for _, k := range r.keywords {
			if len(k) < 2 || seen[k] {
				continue
			}
			seen[k] = true
			p := uint16(k[0])<<8 | uint16(k[1])
			if m.pairIndex[p] == 0 {
				m.pairs = append(m.pairs, nil)
				m.pairIndex[p] = uint16(len(m.pairs))
			}
			i := m.pairIndex[p] - 1
			m.pairs[i] = append(m.pairs[i], k)
		}
	}
	return m, nil
}

// keywords returns which of the rules' keywords occur in lower, in one
// pass over it.
func (m *Masker) keywords(lower string) map[string]bool {
	found := map[string]bool{}
	for i := 0; i+1 < len(lower); i++ {
		x := m.pairIndex[uint16(lower[i])<<8|uint16(lower[i+1])]
		if x == 0 {
			continue
		}
		for _, k := range m.pairs[x-1] {
			if !found[k] && strings.HasPrefix(lower[i:], k) {
				found[k] = true
			}
		}
	}
	return found
}

func compileAllow(a allowJSON) (maskAllow, error) {
	out := maskAllow{target: a.RegexTarget, and: strings.EqualFold(a.Condition, "AND"), paths: a.Paths}
	for _, s := range a.Regexes {
		re, err := regexp.Compile(s)
		if err != nil {
			return out, fmt.Errorf("allowlist regex %q: %w", s, err)
		}
		out.regexes = append(out.regexes, re)
	}
	for _, w := range a.Stopwords {
		out.stopwords = append(out.stopwords, strings.ToLower(w))
	}
	return out, nil
}

// allows reports whether the allowlist lets a finding through (not a
// secret): any of its criteria, or all of them under condition AND.
func (a maskAllow) allows(secret, match, line string) bool {
	var results []bool
	if a.paths {
		results = append(results, false)
	}
	if len(a.regexes) > 0 {
		target := secret
		switch a.target {
		case "match":
			target = match
		case "line":
			target = line
		}
		results = append(results, slices.ContainsFunc(a.regexes, func(re *regexp.Regexp) bool { return re.MatchString(target) }))
	}
	if len(a.stopwords) > 0 {
		ls := strings.ToLower(secret)
		results = append(results, slices.ContainsFunc(a.stopwords, func(w string) bool { return strings.Contains(ls, w) }))
	}
	if len(results) == 0 {
		return false
	}
	if a.and {
		return !slices.Contains(results, false)
	}
	return slices.Contains(results, true)
}

// genericSpan is how much of the head and of the tail of a long output
// the generic rules look at.
const genericSpan = 256 << 10

type span struct {
	start, end int
	rule       string
}

// Mask returns s with every secret the rules find replaced by
// [MASKED:RULE], and how many spans each rule masked (nil if none).
func (m *Masker) Mask(s string) (string, map[string]int) {
	out, counts, _ := m.mask(s)
	return out, counts
}

// mask is Mask that also returns the secrets it masked.
func (m *Masker) mask(s string) (string, map[string]int, []string) {
	if m == nil || s == "" {
		return s, nil, nil
	}
	lower := textfmt.LowerASCII(s)
	present := m.keywords(lower)
	var spans []span
	for _, r := range m.rules {
		if len(r.keywords) > 0 && !slices.ContainsFunc(r.keywords, func(k string) bool { return present[k] || (len(k) < 2 && strings.Contains(lower, k)) }) {
			continue
		}
		for _, w := range r.windows(s, lower) {
			// Most windows hold no secret: a pass that tracks no groups
			// and stops at the first match says so at a fraction of the
			// cost; only a window that matches is searched again for the
			// groups (the same regex on the same text finds the same
			// matches).
			re := r.re()
			if !re.MatchString(s[w[0]:w[1]]) {
				continue
			}
			for _, loc := range re.FindAllStringSubmatchIndex(s[w[0]:w[1]], -1) {
				for i := range loc {
					if loc[i] >= 0 {
						loc[i] += w[0]
					}
				}
				if sp, ok := m.finding(r, s, loc); ok {
					spans = append(spans, sp)
				}
			}
		}
	}
	if len(spans) == 0 {
		return s, nil, nil
	}
	// A generic rule's span that overlaps a specific rule's is the same
	// secret: the specific rule names it, over both spans (a token longer
	// than its rule's pattern keeps no tail).
	generic := func(sp span) bool { return strings.HasPrefix(sp.rule, "generic-") }
	merged := make([]bool, len(spans))
	for gi, g := range spans {
		for i, sp := range spans {
			if generic(g) && !generic(sp) && sp.start < g.end && g.start < sp.end {
				spans[i].start, spans[i].end = min(sp.start, g.start), max(sp.end, g.end)
				merged[gi] = true
			}
		}
	}
	var kept []span
	for i, sp := range spans {
		if !merged[i] {
			kept = append(kept, sp)
		}
	}
	spans = kept
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	counts := map[string]int{}
	var found []string
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		found = append(found, s[sp.start:sp.end])
		if sp.start < last {
			// Inside (or overlapping) a span already masked: extend it.
			if sp.end > last {
				last = sp.end
			}
			continue
		}
		b.WriteString(s[last:sp.start])
		b.WriteString("[MASKED:" + sp.rule + "]")
		counts[sp.rule]++
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String(), counts, found
}

// finding checks one match of rule r in s: its secret (the secret group,
// else the first non-empty group, else the match), entropy and
// allowlists.
func (m *Masker) finding(r maskRule, s string, loc []int) (span, bool) {
	start, end := loc[0], loc[1]
	if g := r.group; g > 0 && 2*g+1 < len(loc) && loc[2*g] >= 0 {
		start, end = loc[2*g], loc[2*g+1]
	} else if g == 0 {
		for i := 2; i+1 < len(loc); i += 2 {
			if loc[i] >= 0 && loc[i+1] > loc[i] {
				start, end = loc[i], loc[i+1]
				break
			}
		}
	}
	secret, match := s[start:end], s[loc[0]:loc[1]]
	if secret == "" || (r.entropy > 0 && shannon(secret) < r.entropy) {
		return span{}, false
	}
	ls := strings.LastIndexByte(s[:loc[0]], '\n') + 1
	le := strings.IndexByte(s[loc[1]:], '\n')
	if le < 0 {
		le = len(s)
	} else {
		le += loc[1]
	}
	line := s[ls:le]
	if m.global.allows(secret, match, line) || slices.ContainsFunc(r.allow, func(a maskAllow) bool { return a.allows(secret, match, line) }) {
		return span{}, false
	}
	return span{start, end, r.id}, true
}

// windows are the parts of s the rule's regex runs on: all of s for a
// rule that can match across lines (or has no keywords), else each line
// that holds one of its keywords (merged where they touch), so that a long
// output costs a regex pass only over the lines that might hold a secret.
func (r maskRule) windows(s, lower string) [][2]int {
	if r.multiline || len(r.keywords) == 0 {
		return [][2]int{{0, len(s)}}
	}
	var ws [][2]int
	for _, k := range r.keywords {
		for off := 0; off < len(lower); {
			i := strings.Index(lower[off:], k)
			if i < 0 {
				break
			}
			i += off
			ls := strings.LastIndexByte(s[:i], '\n') + 1
			le := strings.IndexByte(s[i:], '\n')
			if le < 0 {
				le = len(s)
			} else {
				le += i
			}
			ws = append(ws, [2]int{ls, le})
			off = le + 1
		}
	}
	if strings.HasPrefix(r.id, "generic-") && len(s) > 2*genericSpan {
		// The generic rule's regex costs about 0.7 s per MiB of lines with
		// its keywords: on a long output it runs over the head and the
		// tail, which hold everything the model and the chain see (the
		// model's view is a head and a tail of at most 16 KiB); the rest
		// is only in the chat's attachment, masked by the specific rules.
		ws = slices.DeleteFunc(ws, func(w [2]int) bool { return w[0] >= genericSpan && w[1] <= len(s)-genericSpan })
	}
	slices.SortFunc(ws, func(a, b [2]int) int { return a[0] - b[0] })
	out := ws[:0]
	for _, w := range ws {
		if n := len(out); n > 0 && w[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], w[1])
			continue
		}
		out = append(out, w)
	}
	return out
}

// shannon is the Shannon entropy of s in bits per byte, as gitleaks
// computes it.
func shannon(s string) float64 {
	var freq [256]int
	for i := 0; i < len(s); i++ {
		freq[s[i]]++
	}
	h := 0.0
	n := float64(len(s))
	for _, c := range freq {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// maskOutput scrubs a tool's whole output (before it is cut to the
// model's view, so that no secret is cut in two) and adds the Masker's
// counts to the run's tally for the tool's result.
func (r *run) maskOutput(s string) string {
	out, counts := r.scrub.scrubCount(s)
	for id, n := range counts {
		if r.masked == nil {
			r.masked = map[string]int{}
		}
		r.masked[id] += n
	}
	return out
}
