package agentcore

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// redactJSON redacts secrets inside a JSON text (tool arguments), also
// where JSON escaping changed their bytes; the result stays valid JSON
// because the replacement has no character JSON escapes.
func (a *Agent) redactJSON(s string) string {
	s = a.redact(s)
	for _, v := range a.cfg.Secrets {
		b, _ := json.Marshal(v)
		if esc := string(b[1 : len(b)-1]); esc != v && strings.Contains(s, esc) {
			s = strings.ReplaceAll(s, esc, "[REDACTED]")
		}
	}
	return s
}

// redactStream passes streamed text on with the secrets redacted, holding
// back the last keep bytes until more text (or flush) shows whether they
// start a secret.
type redactStream struct {
	redact func(string) string
	keep   int
	out    func(string)
	buf    string
}

func (r *redactStream) write(delta string) {
	r.buf = r.redact(r.buf + delta)
	cut := len(r.buf) - r.keep
	if r.keep <= 0 {
		cut = len(r.buf)
	}
	for cut > 0 && cut < len(r.buf) && !utf8.RuneStart(r.buf[cut]) {
		cut--
	}
	if cut > 0 {
		r.out(r.buf[:cut])
		r.buf = r.buf[cut:]
	}
}

func (r *redactStream) flush() {
	if r == nil || r.buf == "" {
		return
	}
	r.out(r.redact(r.buf))
	r.buf = ""
}

// redact replaces the configured secret values in s.
func (a *Agent) redact(s string) string {
	for _, v := range a.cfg.Secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}
