package agentcore

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"hash/maphash"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Every string the kernel lets out passes through one scrubber, so that a
// new output path cannot forget it: write scrubs every string of every
// event payload before the chain takes it (the chain, the projection the
// model sees, the audit export, /timeline), and outwardTurn, the answer's
// return and SessionStatus scrub what a run shows while it runs (streamed
// text, Hooks, the Approver's request, /status).
//
// Scrubbing replaces the bot's own secrets (Config.Secrets) and the
// secrets the Masker found earlier (learned) in the forms a command or a
// model turns them into (derive) with [REDACTED], then masks well-known
// secret shapes (Masker) with [MASKED:RULE].
type scrubber struct {
	mask *Masker // nil with Config.NoMask
	seed maphash.Seed
	// conf finds the configured secrets' forms, learned those of the
	// Masker's findings (at most maxLearned, the oldest goes first); mu
	// guards learnedV and the replacement of learned.
	conf     *matcher
	mu       sync.Mutex
	learnedV []string
	learned  atomic.Pointer[matcher]
	// done holds the hashes of the last large texts scrub returned, so
	// that the same text passed on (the output shown in chat after it was
	// scrubbed for the model) is not scanned again: scrubbing is
	// idempotent. Guarded by mu.
	done [4]uint64
	next int
}

const (
	// maxLearned bounds the secrets learned from the Masker's findings;
	// the oldest goes first.
	maxLearned = 256
	// learnMin and learnMax bound a learned secret's length: shorter
	// findings are too common to hunt for in every form, longer ones (a
	// private key) would make the stream hold back too much.
	learnMin, learnMax = 16, 128
	// memoMin is the size from which a scrubbed text is remembered.
	memoMin = 64 << 10
)

func newScrubber(secrets []string, m *Masker) *scrubber {
	x := &scrubber{mask: m, seed: maphash.MakeSeed(), conf: newMatcher(secrets)}
	x.learned.Store(newMatcher(nil))
	return x
}

// scrub returns s with the secrets' forms redacted and secret shapes masked.
func (x *scrubber) scrub(s string) string {
	out, _ := x.scrubCount(s)
	return out
}

// scrubCount is scrub that also returns how many spans each Masker rule
// masked (nil if none).
func (x *scrubber) scrubCount(s string) (string, map[string]int) {
	if x == nil || len(s) < 8 {
		return s, nil
	}
	var h uint64
	if len(s) >= memoMin {
		h = maphash.String(x.seed, s)
		x.mu.Lock()
		seen := slices.Contains(x.done[:], h)
		x.mu.Unlock()
		if seen {
			return s, nil
		}
	}
	// The configured secrets go first (whole, before a shape could mask
	// a part of one), the learned ones last (so that the Masker names
	// what it finds again).
	out, counts, found := x.mask.mask(x.conf.redact(s))
	x.learn(found)
	out = x.learned.Load().redact(out)
	if len(out) >= memoMin {
		x.mu.Lock()
		x.done[x.next] = maphash.String(x.seed, out)
		x.next = (x.next + 1) % len(x.done)
		x.mu.Unlock()
	}
	return out, counts
}

// learn adds the Masker's findings to the secrets whose forms are
// redacted: a token a command printed is then caught in base64 in the
// model's answer too.
func (x *scrubber) learn(found []string) {
	if len(found) == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	added := false
	for _, v := range found {
		if len(v) < learnMin || len(v) > learnMax || slices.Contains(x.learnedV, v) {
			continue
		}
		if len(x.learnedV) >= maxLearned {
			x.learnedV = slices.Delete(x.learnedV, 0, 1)
		}
		x.learnedV = append(x.learnedV, v)
		added = true
	}
	if added {
		x.learned.Store(newMatcher(x.learnedV))
		x.done = [4]uint64{}
	}
}

// payload returns the JSON text p with every string in it scrubbed (and
// re-encoded as json.Marshal writes it); every other byte is kept.
func (x *scrubber) payload(p []byte) []byte {
	if x == nil {
		return p
	}
	var out []byte // nil until a string changes
	last := 0
	for i := 0; i < len(p); i++ {
		if p[i] != '"' {
			continue
		}
		j, esc := i+1, false
		for ; j < len(p) && p[j] != '"'; j++ {
			if p[j] == '\\' {
				esc = true
				j++
			}
		}
		if j >= len(p) {
			break
		}
		var s string
		if !esc {
			s = string(p[i+1 : j])
		} else if json.Unmarshal(p[i:j+1], &s) != nil {
			i = j
			continue
		}
		if t := x.scrub(s); t != s {
			b, _ := json.Marshal(t)
			out = append(append(out, p[last:i]...), b...)
			last = j + 1
		}
		i = j
	}
	if out == nil {
		return p
	}
	return append(out, p[last:]...)
}

// keep is how many bytes a stream holds back: the longest form a secret
// can take, with room for line breaks inside it (64 bytes of them).
func (x *scrubber) keep() int {
	n := 0
	if x != nil {
		n = max(x.conf.longest, x.learned.Load().longest)
	}
	if n == 0 {
		return 0
	}
	return n + 64
}

// matcher finds the forms of a set of secrets in a text, in one pass.
type matcher struct {
	forms []form
	// first marks the bytes a form starts with; pairIndex indexes the
	// forms by their first two bytes (1 + index into pairs, 0 for none).
	first     [256]bool
	pairIndex []uint16
	pairs     [][]int32
	longest   int
}

type form struct {
	text string
	b64  bool // a piece of base64: the characters around it are masked too
}

func newMatcher(secrets []string) *matcher {
	m := &matcher{}
	seen := map[string]bool{}
	for _, v := range secrets {
		for _, f := range derive(v) {
			if !seen[f.text] {
				seen[f.text] = true
				m.forms = append(m.forms, f)
			}
		}
	}
	if len(m.forms) == 0 {
		return m
	}
	m.pairIndex = make([]uint16, 1<<16)
	for i, f := range m.forms {
		m.first[f.text[0]] = true
		m.longest = max(m.longest, len(f.text))
		p := uint16(f.text[0])<<8 | uint16(f.text[1])
		if m.pairIndex[p] == 0 {
			m.pairs = append(m.pairs, nil)
			m.pairIndex[p] = uint16(len(m.pairs))
		}
		m.pairs[m.pairIndex[p]-1] = append(m.pairs[m.pairIndex[p]-1], int32(i))
	}
	return m
}

// derive returns the forms of secret v that are redacted: v itself,
// reversed, hex (lower and upper case), URL-encoded (query, path, every
// byte), JSON-escaped (as json.Marshal writes it, and without its HTML
// escapes), and base64 (standard and URL alphabets) of v at each of the
// three byte offsets it can have in the encoded data: the part of the
// encoding that depends on v alone (padding and the characters next to
// it are masked with it, see redact). Each form is found with line breaks
// inserted anywhere inside (see match).
func derive(v string) []form {
	var out []form
	add := func(s string, b64 bool) {
		if len(s) >= 8 && !slices.ContainsFunc(out, func(f form) bool { return f.text == s }) {
			out = append(out, form{s, b64})
		}
	}
	add(v, false)
	r := []byte(v)
	slices.Reverse(r)
	add(string(r), false)
	h := hex.EncodeToString([]byte(v))
	add(h, false)
	add(strings.ToUpper(h), false)
	q := url.QueryEscape(v)
	add(q, false)
	add(strings.ReplaceAll(q, "+", "%20"), false)
	add(url.PathEscape(v), false)
	var lo, up strings.Builder
	for i := 0; i < len(v); i++ {
		lo.WriteString("%" + h[2*i:2*i+2])
		up.WriteString("%" + strings.ToUpper(h[2*i:2*i+2]))
	}
	add(lo.String(), false)
	add(up.String(), false)
	j, _ := json.Marshal(v)
	add(string(j[1:len(j)-1]), false)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	plain := strings.TrimSuffix(b.String(), "\n")
	add(plain[1:len(plain)-1], false)
	for off := 0; off < 3; off++ {
		n := (len(v) - off) / 3 * 3
		core := []byte(v[off : off+n])
		add(base64.RawStdEncoding.EncodeToString(core), true)
		add(base64.RawURLEncoding.EncodeToString(core), true)
	}
	return out
}

// redact replaces the forms found in s with [REDACTED].
func (m *matcher) redact(s string) string {
	if len(m.forms) == 0 {
		return s
	}
	var spans [][2]int
	for i := 0; i+1 < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		next := []int{i + 1}
		if g := skipGaps(s, i+1); g != i+1 {
			next = append(next, g)
		}
		for _, j := range next {
			if j >= len(s) {
				continue
			}
			x := m.pairIndex[uint16(s[i])<<8|uint16(s[j])]
			if x == 0 {
				continue
			}
			for _, id := range m.pairs[x-1] {
				f := m.forms[id]
				end := match(s, j+1, f.text[2:])
				if end < 0 {
					continue
				}
				start := i
				if f.b64 {
					start, end = widenB64(s, start, end)
				}
				spans = append(spans, [2]int{start, end})
			}
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		if sp[0] < last {
			last = max(last, sp[1])
			continue
		}
		b.WriteString(s[last:sp[0]])
		b.WriteString("[REDACTED]")
		last = sp[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// match reports where rest ends if it is found at s[j:], line breaks (a
// newline, CR, or their JSON escapes \n and \r) allowed before each of
// its bytes; -1 if it is not.
func match(s string, j int, rest string) int {
	for k := 0; k < len(rest); {
		g := skipGaps(s, j)
		switch {
		case j < len(s) && s[j] == rest[k] && g != j:
			// A backslash of the secret, or the start of an escaped line
			// break: try both.
			if end := match(s, j+1, rest[k+1:]); end >= 0 {
				return end
			}
			j = g
		case j < len(s) && s[j] == rest[k]:
			j++
			k++
		case g != j:
			j = g
		default:
			return -1
		}
	}
	return j
}

// skipGaps returns the index after the line breaks at s[j:].
func skipGaps(s string, j int) int {
	for j < len(s) {
		switch {
		case s[j] == '\n' || s[j] == '\r':
			j++
		case s[j] == '\\' && j+1 < len(s) && (s[j+1] == 'n' || s[j+1] == 'r'):
			j += 2
		default:
			return j
		}
	}
	return j
}

// widenB64 widens a base64 form's span over the characters that encode v
// together with its neighbours (up to three each side, line breaks
// between them allowed) and the padding.
func widenB64(s string, start, end int) (int, int) {
	isB64 := func(c byte) bool {
		return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
	}
	for n := 0; n < 3 && start > 0; {
		switch {
		case isB64(s[start-1]) && !(start > 1 && s[start-2] == '\\' && (s[start-1] == 'n' || s[start-1] == 'r')):
			start--
			n++
		case s[start-1] == '\n' || s[start-1] == '\r':
			start--
		case start > 1 && s[start-2] == '\\' && (s[start-1] == 'n' || s[start-1] == 'r'):
			start -= 2
		default:
			n = 3
		}
	}
	for n := 0; n < 5; n++ {
		j := skipGaps(s, end)
		if j >= len(s) || !(n < 3 && isB64(s[j]) || s[j] == '=') {
			break
		}
		end = j + 1
	}
	return start, end
}

// redactStream passes streamed text on scrubbed. It holds back the last
// keep bytes and the word under way (up to streamLine bytes), raw, until
// more text, or flush, shows what they belong to: a secret's form is
// redacted whole, and a shape (whose characters are not blanks) is masked
// whole. It scrubs the text it lets out together with the part of its line
// already shown (line), so that a rule that needs a keyword before the
// secret ("password = ...") still sees it.
type redactStream struct {
	scrub func(string) string
	keep  int
	out   func(string)
	buf   string
	line  string
}

const streamLine = 2 << 10

func (r *redactStream) write(delta string) {
	r.buf += delta
	cut := len(r.buf) - r.keep
	if cut <= 0 {
		return
	}
	if i := strings.LastIndexAny(r.buf[:cut], " \t\n"); i >= 0 {
		cut = i + 1
	} else if len(r.buf) < streamLine {
		return
	}
	for cut > 0 && cut < len(r.buf) && !utf8.RuneStart(r.buf[cut]) {
		cut--
	}
	if cut > 0 {
		r.show(r.buf[:cut])
		r.buf = r.buf[cut:]
	}
}

// show lets raw out scrubbed, with its line's shown part as context.
func (r *redactStream) show(raw string) {
	shown := r.scrub(raw)
	if r.line != "" {
		if full := r.scrub(r.line + raw); strings.HasPrefix(full, r.line) {
			shown = full[len(r.line):]
		}
	}
	r.out(shown)
	r.line += shown
	if i := strings.LastIndexByte(r.line, '\n'); i >= 0 {
		r.line = r.line[i+1:]
	}
	if n := len(r.line); n > 256 {
		r.line = r.line[n-256:]
	}
}

func (r *redactStream) flush() {
	if r == nil || r.buf == "" {
		return
	}
	r.show(r.buf)
	r.buf = ""
}

// outward returns t with its ways out wrapped so that whatever a run hands
// them is scrubbed: Hooks.Text (a backstop behind the run's redactStream,
// which does the holding back), Hooks.Command, Hooks.Result and the
// Approver. Every run takes its Turn through it.
func (a *Agent) outward(t Turn) Turn {
	x := a.scrub
	if h := t.Hooks.Text; h != nil {
		t.Hooks.Text = func(delta string) { h(x.scrub(delta)) }
	}
	if h := t.Hooks.Command; h != nil {
		t.Hooks.Command = func(c CommandInfo) { h(x.info(c)) }
	}
	if h := t.Hooks.Result; h != nil {
		t.Hooks.Result = func(c CommandInfo, content string, isErr bool) { h(x.info(c), x.scrub(content), isErr) }
	}
	if t.Approver != nil {
		t.Approver = scrubApprover{t.Approver, x}
	}
	return t
}

func (x *scrubber) info(c CommandInfo) CommandInfo {
	c.Command, c.Requested, c.Reason = x.scrub(c.Command), x.scrub(c.Requested), x.scrub(c.Reason)
	if c.Output != nil {
		c.Output = []byte(x.scrub(string(c.Output)))
	}
	return c
}

// scrubApprover shows an Approver the request scrubbed; the request stays
// bound (SHA256) to the exact command.
type scrubApprover struct {
	Approver
	x *scrubber
}

func (s scrubApprover) approval(a Approval) Approval {
	a.Command, a.Reason, a.Why = s.x.scrub(a.Command), s.x.scrub(a.Reason), s.x.scrub(a.Why)
	return a
}

func (s scrubApprover) Ask(ctx context.Context, a Approval) (string, error) {
	return s.Approver.Ask(ctx, s.approval(a))
}

func (s scrubApprover) Await(ctx context.Context, a Approval, where string) (ApprovalDecision, error) {
	return s.Approver.Await(ctx, s.approval(a), where)
}

func (s scrubApprover) Decided(ctx context.Context, a Approval, where string, d ApprovalDecision, err error) {
	s.Approver.Decided(ctx, s.approval(a), where, d, err)
}
