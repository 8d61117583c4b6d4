package web

import (
	"testing"
	"time"
)

// FuzzLoginCookie: a cookie value the server did not make never names a
// user, and one it made names its user until it expires.
func FuzzLoginCookie(f *testing.F) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := &Server{cfg: Config{Secret: []byte("0123456789abcdef0123456789abcdef"), Now: func() time.Time { return now }}}
	good := s.makeCookie("alice", now.Add(time.Hour), "sid1")
	if name, sid, ok := s.checkCookie(good); !ok || name != "alice" || sid != "sid1" {
		f.Fatalf("a good cookie: %q %v", name, ok)
	}
	later := &Server{cfg: s.cfg}
	later.cfg.Now = func() time.Time { return now.Add(2 * time.Hour) }
	if _, _, ok := later.checkCookie(good); ok {
		f.Fatal("an expired cookie was accepted")
	}
	f.Add(good)
	f.Add("YWxpY2U|9999999999|sid1|")
	f.Add("||")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		name, sid, ok := s.checkCookie(v)
		if ok && v != good && name != "" {
			// Only a MAC made with the secret passes; the fuzzer cannot
			// find one, so anything else accepted is a bug.
			if s.makeCookie(name, now.Add(time.Hour), sid) != v {
				t.Fatalf("checkCookie(%q) accepted %q", v, name)
			}
		}
	})
}
