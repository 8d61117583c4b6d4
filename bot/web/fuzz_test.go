package web

import (
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

// FuzzClientAddr: the client a login's backoff counts against is the peer
// itself unless the peer is a trusted proxy; then it is the peer or an
// address of X-Forwarded-For that is not a trusted proxy, never a trusted
// proxy named in the header.
func FuzzClientAddr(f *testing.F) {
	s := &Server{cfg: Config{Auth: Auth{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}}}
	f.Add("10.0.0.5:5000", "198.51.100.9, 10.0.0.7")
	f.Add("192.0.2.7:4000", "10.0.0.1")
	f.Add("10.0.0.5:5000", "garbage,,::1, 2001:db8::1")
	// An untrusted peer's header names another client: not read.
	f.Add("192.0.2.7:4000", "198.51.100.9")
	f.Add("[2001:db8::7]:4000", "2001:db8:1::9")
	// A dual-stack proxy writes IPv4 clients as IPv4-mapped IPv6.
	f.Add("10.0.0.5:5000", "::ffff:198.51.100.9")
	f.Fuzz(func(t *testing.T, remote, xff string) {
		req := httptest.NewRequest("POST", "/login", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-For", xff)
		got := s.clientAddr(req)
		peer := remoteAddr(req)
		if !s.trustedProxy(peer) {
			if got != peer {
				t.Fatalf("untrusted peer %s: client %s", peer, got)
			}
			return
		}
		named := false
		for _, hop := range strings.Split(xff, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(hop)); err == nil && a.Unmap() == got {
				named = true
			}
		}
		if got != peer && (s.trustedProxy(got) || !named) {
			t.Fatalf("peer %s, X-Forwarded-For %q: client %s", peer, xff, got)
		}
	})
}

// FuzzClientKey: the back-off counts an IPv4 client by its address and an
// IPv6 client by its /64, whatever address of it the client picks; an
// IPv4-mapped peer or hop (a dual-stack socket or proxy) is its IPv4
// address, never the /64 that all of them share.
func FuzzClientKey(f *testing.F) {
	f.Add("192.0.2.7:4000", uint64(1))
	f.Add("[2001:db8:1:2::1]:4000", uint64(0xdead_beef))
	f.Add("[2001:db8:1:2:ffff:ffff:ffff:ffff]:4000", uint64(1)<<63)
	f.Add("[::ffff:192.0.2.7]:4000", uint64(2))
	f.Fuzz(func(t *testing.T, remote string, low uint64) {
		req := httptest.NewRequest("POST", "/login", nil)
		req.RemoteAddr = remote
		ip := remoteAddr(req)
		if !ip.IsValid() {
			return
		}
		k := clientKey(ip)
		if !k.Contains(ip.WithZone("")) { // a zone never matches a prefix
			t.Fatalf("%s: key %s does not hold the address", ip, k)
		}
		if ip.Is4() || ip.Is4In6() {
			if k.Bits() != 32 || !k.Addr().Is4() {
				t.Fatalf("IPv4 client %s (%s): key %s, want its own address", ip, remote, k)
			}
			return
		}
		b := ip.As16()
		for i := range 8 {
			b[8+i] = byte(low >> (8 * i))
		}
		other := netip.AddrFrom16(b)
		if clientKey(other) != k {
			t.Fatalf("%s and %s, of one /64: keys %s and %s", ip, other, k, clientKey(other))
		}
		b[7] ^= 1
		if clientKey(netip.AddrFrom16(b)) == k {
			t.Fatalf("%s and %s, of two /64s: one key %s", ip, netip.AddrFrom16(b), k)
		}
	})
}

// FuzzLocalPath: where a sign-in sends the browser is a path on the
// console, whatever next says: one slash first, no host, no scheme, no
// byte a browser would read as a way elsewhere.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/", "/audit?x=1", "//evil.example", "/\\evil.example", "https://evil.example", "javascript:alert(1)",
		"/%2F%2Fevil", "\t//x", "/ok\r\nLocation: //x", "/#frag", "/audit/session?id=web/console/x&after=5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, next string) {
		got := localPath(next)
		if got == "/" {
			return
		}
		if got != next {
			t.Fatalf("localPath(%q) = %q: neither next nor /", next, got)
		}
		u, err := url.Parse(got)
		if err != nil || !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || u.Host != "" || u.Scheme != "" ||
			strings.ContainsAny(got, "\\\r\n\t") {
			t.Fatalf("localPath(%q) lets through %q", next, got)
		}
		// What a browser does with it: resolved against the console, it
		// stays on the console.
		base, _ := url.Parse("https://console.example/login")
		if r := base.ResolveReference(u); r.Host != "console.example" || r.Scheme != "https" {
			t.Fatalf("localPath(%q) = %q leads to %s", next, got, r)
		}
	})
}

// FuzzPlainTitle: a thread's title is one line of valid UTF-8, bounded,
// without Markdown's bold and code marks.
func FuzzPlainTitle(f *testing.F) {
	for _, s := range []string{"🔥 **FIRING** `NginxDown` · severity `critical`", "please check the `disk` **now**", "", "\n\n", "_a_ b_c_", strings.Repeat("é", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		got := plainTitle(md)
		if got == "" || strings.ContainsAny(got, "\n\r`") || strings.Contains(got, "**") || len(got) > titleLen+len("…") {
			t.Fatalf("plainTitle(%q) = %q", md, got)
		}
		if utf8.ValidString(md) && !utf8.ValidString(got) {
			t.Fatalf("plainTitle(%q) = %q: not valid UTF-8", md, got)
		}
	})
}
