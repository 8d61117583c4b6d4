package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// authServer is a console with login tokens for alice (user, approver) and
// carol (user) behind a trusted proxy at 10.0.0.5, on a clock the test
// moves.
type authServer struct {
	*Server
	mu    sync.Mutex
	now   time.Time
	saved []byte
}

func newAuthServer(t *testing.T, cfg Config) *authServer {
	t.Helper()
	a := &authServer{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	if cfg.Auth.Tokens == nil {
		cfg.Auth = Auth{
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")},
			Tokens:         map[string]string{"alice-token-0123456789": "alice", "carol-token-0123456789": "carol"},
			Roles:          map[string][]string{"alice": {RoleUser, RoleApprover}, "carol": {RoleUser}},
		}
	}
	cfg.Listen, cfg.Chat = "0.0.0.0:8080", true
	if cfg.Chain == nil {
		cfg.Chain = openStore(t)
	}
	if cfg.Secret == nil {
		cfg.Secret = []byte("0123456789abcdef0123456789abcdef")
	}
	cfg.Now = a.clock
	cfg.SaveSessions = func(b []byte) error { a.saved = append([]byte(nil), b...); return nil }
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.Server = s
	return a
}

func (a *authServer) clock() time.Time { a.mu.Lock(); defer a.mu.Unlock(); return a.now }
func (a *authServer) advance(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.now = a.now.Add(d)
}

// request runs one request from remote with the given headers.
func (a *authServer) request(method, path, remote, body string, hdr map[string]string, cookie *http.Cookie) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://thinbot.example.com"+path, strings.NewReader(body))
	req.RemoteAddr = remote
	if method == http.MethodPost {
		req.Header.Set("Origin", "http://thinbot.example.com")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	w := httptest.NewRecorder()
	a.Handler().ServeHTTP(w, req)
	return w
}

// login signs in with token from remote and returns the login cookie (nil
// if none was set) and the response.
func (a *authServer) login(token, remote string, hdr map[string]string) (*http.Cookie, *httptest.ResponseRecorder) {
	w := a.request("POST", "/login", remote, "token="+token, hdr, nil)
	for _, c := range w.Result().Cookies() {
		if c.Name == sessionCookie && c.Value != "" {
			return c, w
		}
	}
	return nil, w
}

func (a *authServer) threads(c *http.Cookie) int {
	return a.request("GET", "/api/threads", "192.0.2.7:4000", "", nil, c).Code
}

func TestLogoutEndsTheLoginServerSide(t *testing.T) {
	a := newAuthServer(t, Config{})
	c, w := a.login("carol-token-0123456789", "192.0.2.7:4000", nil)
	if c == nil {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	if code := a.threads(c); code != http.StatusOK {
		t.Fatalf("with the cookie: %d", code)
	}
	w = a.request("POST", "/logout", "192.0.2.7:4000", "", nil, c)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d", w.Code)
	}
	// The browser forgets the cookie; a saved copy must not work either.
	if code := a.threads(c); code != http.StatusUnauthorized {
		t.Errorf("the saved cookie after logout: %d, want 401", code)
	}
	// Another login of the same user is a session of its own.
	c2, _ := a.login("carol-token-0123456789", "192.0.2.7:4000", nil)
	c3, _ := a.login("carol-token-0123456789", "192.0.2.8:4000", nil)
	a.request("POST", "/logout", "192.0.2.7:4000", "", nil, c2)
	if a.threads(c2) != http.StatusUnauthorized || a.threads(c3) != http.StatusOK {
		t.Errorf("logging out one session: the other %d, the ended one %d", a.threads(c3), a.threads(c2))
	}
}

// TestChainLoginsOutliveTheLeader: a cluster's consoles share the login
// key and record logins in the chain, so the console of the next leader (a
// Server built over the same chain later) takes a login made at the one
// before, and a logout at one holds at the next; the chain holds neither
// the token nor the cookie's session id; a cookie of another key fails.
func TestChainLoginsOutliveTheLeader(t *testing.T) {
	db := openStore(t)
	key := []byte("cluster-console-login-key-0123456789")
	leader := func() *authServer { return newAuthServer(t, Config{Chain: db, Secret: key, ChainLogins: true}) }
	first := leader()
	carol, w := first.login("carol-token-0123456789", "192.0.2.7:4000", nil)
	alice, _ := first.login("alice-token-0123456789", "192.0.2.7:4000", nil)
	if carol == nil || alice == nil {
		t.Fatalf("login: %d %s", w.Code, w.Body)
	}
	if first.saved != nil {
		t.Errorf("a chain-logins console saved its table to a file too: %s", first.saved)
	}
	second := leader()
	if code := second.threads(carol); code != http.StatusOK {
		t.Fatalf("the first leader's login at the second: %d, want 200", code)
	}
	if w := second.request("POST", "/logout", "192.0.2.7:4000", "", nil, carol); w.Code != http.StatusSeeOther {
		t.Fatalf("logout: %d", w.Code)
	}
	if code := second.threads(carol); code != http.StatusUnauthorized {
		t.Errorf("the cookie after its logout: %d, want 401", code)
	}
	// The tokens file reloaded without alice's token ends her login for
	// the leaders after, even those whose file still has it.
	if n := second.SetTokens(map[string]string{"carol-token-0123456789": "carol"}); n != 1 {
		t.Errorf("SetTokens ended %d sessions, want 1", n)
	}
	third := leader()
	if code := third.threads(carol); code != http.StatusUnauthorized {
		t.Errorf("the logged-out cookie at the third leader: %d, want 401", code)
	}
	if code := third.threads(alice); code != http.StatusUnauthorized {
		t.Errorf("the removed token's login at the third leader: %d, want 401", code)
	}
	again, _ := third.login("carol-token-0123456789", "192.0.2.7:4000", nil)
	if code := leader().threads(again); code != http.StatusOK {
		t.Errorf("a new login at the fourth leader: %d, want 200", code)
	}
	// A leader whose tokens file no longer has carol's token (changed
	// while another node led) does not take her login.
	noCarol := newAuthServer(t, Config{Chain: db, Secret: key, ChainLogins: true, Auth: Auth{
		Tokens: map[string]string{"alice-token-0123456789": "alice"}, Roles: map[string][]string{"alice": {RoleUser}, "carol": {RoleUser}}}})
	if code := noCarol.threads(again); code != http.StatusUnauthorized {
		t.Errorf("a login whose token the new leader's file lacks: %d, want 401", code)
	}
	other := newAuthServer(t, Config{Chain: db, Secret: []byte("another-key-0123456789abcdef012345"), ChainLogins: true})
	if code := other.threads(again); code != http.StatusUnauthorized {
		t.Errorf("the cookie at a console of another key: %d, want 401", code)
	}
	var types []string
	for ev, err := range db.Events(agentcore.ConsoleSession, 1) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type+"/"+ev.Actor)
		for _, c := range []*http.Cookie{carol, alice, again} {
			sid := strings.Split(c.Value, "|")[2]
			if strings.Contains(string(ev.Payload), sid) || strings.Contains(string(ev.Payload), "token-0123456789") {
				t.Errorf("event %d holds a session id or a token: %s", ev.Seq, ev.Payload)
			}
		}
	}
	want := "console_login/user:carol console_login/user:alice console_logout/user:carol console_logout/system console_login/user:carol"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("the chain's console events:\n got %s\nwant %s", got, want)
	}
}

func TestRemovedTokenEndsItsSessions(t *testing.T) {
	a := newAuthServer(t, Config{})
	carol, _ := a.login("carol-token-0123456789", "192.0.2.7:4000", nil)
	alice, _ := a.login("alice-token-0123456789", "192.0.2.7:4000", nil)
	if carol == nil || alice == nil {
		t.Fatal("logins failed")
	}
	// The tokens file is reloaded without carol, and alice's token changed.
	if n := a.SetTokens(map[string]string{"alice-token-0123456789": "alice"}); n != 1 {
		t.Errorf("SetTokens ended %d sessions, want 1", n)
	}
	if code := a.threads(carol); code != http.StatusUnauthorized {
		t.Errorf("carol after her removal: %d, want 401", code)
	}
	if code := a.threads(alice); code != http.StatusOK {
		t.Errorf("alice, still in the file: %d", code)
	}
	if c, _ := a.login("carol-token-0123456789", "192.0.2.7:4000", nil); c != nil {
		t.Error("carol's removed token still logs in")
	}
	a.SetTokens(map[string]string{"alice-new-token-0123456789": "alice"})
	if code := a.threads(alice); code != http.StatusUnauthorized {
		t.Errorf("alice after her token changed: %d, want 401", code)
	}
	// An emptied file never opens the console to loopback.
	a.SetTokens(nil)
	if code := a.request("GET", "/api/threads", "127.0.0.1:4000", "", nil, nil).Code; code != http.StatusUnauthorized {
		t.Errorf("loopback without a login after the tokens went: %d, want 401", code)
	}
}

func TestSessionsSurviveARestartButNotTheirRemoval(t *testing.T) {
	a := newAuthServer(t, Config{})
	c, _ := a.login("carol-token-0123456789", "192.0.2.7:4000", nil)
	if c == nil || len(a.saved) == 0 {
		t.Fatalf("login: cookie %v, saved %q", c, a.saved)
	}
	if strings.Contains(string(a.saved), "carol-token") || strings.Contains(string(a.saved), strings.Split(c.Value, "|")[2]) {
		t.Errorf("the saved table holds a token or a session id: %s", a.saved)
	}
	b := newAuthServer(t, Config{Sessions: a.saved})
	if code := b.threads(c); code != http.StatusOK {
		t.Errorf("after a restart: %d, want 200", code)
	}
	gone := newAuthServer(t, Config{Sessions: a.saved, Auth: Auth{
		Tokens: map[string]string{"alice-token-0123456789": "alice"}, Roles: map[string][]string{"carol": {RoleUser}}}})
	if code := gone.threads(c); code != http.StatusUnauthorized {
		t.Errorf("after a restart without carol's token: %d, want 401", code)
	}
}

// TestCookieExpiry: a login ends loginFor after it began, and the server
// enforces it: its session's end in the table refuses the cookie even
// when the cookie says it is good for a year (one a leaked key could
// make), and the cookie's own end refuses it while its session would
// still be live. Each check is tried alone: the test makes the cookies
// with the server's key so that the other check passes.
func TestCookieExpiry(t *testing.T) {
	a := newAuthServer(t, Config{})
	c, _ := a.login("carol-token-0123456789", "192.0.2.7:4000", nil)
	if c == nil || c.MaxAge != int(loginFor.Seconds()) {
		t.Fatalf("cookie %+v", c)
	}
	name, sid, ok := a.checkCookie(c.Value)
	if !ok || name != "carol" {
		t.Fatalf("the login's cookie: %q %v", name, ok)
	}
	long := &http.Cookie{Name: sessionCookie, Value: a.makeCookie("carol", a.clock().Add(365*24*time.Hour), sid)}
	short := &http.Cookie{Name: sessionCookie, Value: a.makeCookie("carol", a.clock().Add(time.Minute), sid)}
	a.advance(2 * time.Minute)
	if code := a.threads(short); code != http.StatusUnauthorized {
		t.Errorf("a cookie past its own end, its session live: %d, want 401", code)
	}
	a.advance(loginFor - 3*time.Minute)
	for what, c := range map[string]*http.Cookie{"the login's cookie": c, "a cookie for a year": long} {
		if code := a.threads(c); code != http.StatusOK {
			t.Errorf("%s a minute before the login ends: %d", what, code)
		}
	}
	a.advance(2 * time.Minute)
	for what, c := range map[string]*http.Cookie{"the login's cookie": c, "a cookie for a year": long} {
		if code := a.threads(c); code != http.StatusUnauthorized {
			t.Errorf("%s a minute after the login ended: %d, want 401", what, code)
		}
	}
}

func TestSecureCookieBehindATLSProxy(t *testing.T) {
	proxy := "10.0.0.5:5000"
	for _, tc := range []struct {
		name   string
		origin string // public_origin
		remote string
		hdr    map[string]string
		secure bool
	}{
		{"plain http", "", "192.0.2.7:4000", nil, false},
		{"https public origin", "https://thinbot.example.com", "192.0.2.7:4000", map[string]string{"Origin": "https://thinbot.example.com"}, true},
		{"X-Forwarded-Proto from the trusted proxy", "", proxy,
			map[string]string{"X-Forwarded-Proto": "https", "Origin": "https://thinbot.example.com"}, true},
		{"X-Forwarded-Proto from anyone else", "", "192.0.2.7:4000",
			map[string]string{"X-Forwarded-Proto": "https"}, false},
	} {
		a := newAuthServer(t, Config{PublicOrigin: tc.origin})
		c, w := a.login("carol-token-0123456789", tc.remote, tc.hdr)
		if c == nil {
			t.Errorf("%s: login %d %s", tc.name, w.Code, w.Body)
			continue
		}
		if c.Secure != tc.secure {
			t.Errorf("%s: Secure %v, want %v", tc.name, c.Secure, tc.secure)
		}
	}
}

// TestPublicOriginIsEnforced: with public_origin set, only that origin
// (scheme, host and port) may post.
func TestPublicOriginIsEnforced(t *testing.T) {
	a := newAuthServer(t, Config{PublicOrigin: "https://thinbot.example.com"})
	for origin, want := range map[string]bool{
		"https://thinbot.example.com":      true,
		"http://thinbot.example.com":       false,
		"https://thinbot.example.com:8443": false,
		"https://evil.example":             false,
		"https://thinbot.example.com.evil": false,
	} {
		w := a.request("POST", "/login", "192.0.2.7:4000", "token=carol-token-0123456789", map[string]string{"Origin": origin}, nil)
		if got := w.Code != http.StatusForbidden; got != want {
			t.Errorf("Origin %s: status %d, accepted %v, want %v", origin, w.Code, got, want)
		}
	}
}

// TestOriginSchemeIsCompared: without public_origin the origin must be
// this console's own, scheme included.
func TestOriginSchemeIsCompared(t *testing.T) {
	a := newAuthServer(t, Config{})
	for _, tc := range []struct {
		remote, origin, proto string
		ok                    bool
	}{
		{"192.0.2.7:4000", "http://thinbot.example.com", "", true},
		{"192.0.2.7:4000", "https://thinbot.example.com", "", false},
		{"10.0.0.5:5000", "https://thinbot.example.com", "https", true},
		{"10.0.0.5:5000", "http://thinbot.example.com", "https", false},
		{"192.0.2.7:4000", "https://thinbot.example.com", "https", false}, // the header counts from the proxy only
	} {
		hdr := map[string]string{"Origin": tc.origin}
		if tc.proto != "" {
			hdr["X-Forwarded-Proto"] = tc.proto
		}
		w := a.request("POST", "/login", tc.remote, "token=carol-token-0123456789", hdr, nil)
		if got := w.Code != http.StatusForbidden; got != tc.ok {
			t.Errorf("Origin %s from %s (proto %q): status %d, want accepted %v", tc.origin, tc.remote, tc.proto, w.Code, tc.ok)
		}
	}
}

// TestWrongTokensAreSlowedDown: after a few wrong tokens in a row a client
// must wait, doubling, before a try is even read; other clients are not
// affected, and the wait ends.
func TestWrongTokensAreSlowedDown(t *testing.T) {
	a := newAuthServer(t, Config{})
	attacker := "192.0.2.66:4000"
	var limited int
	var retry string
	for range 30 {
		_, w := a.login("wrong-token-0123456789", attacker, nil)
		switch w.Code {
		case http.StatusTooManyRequests:
			limited++
			retry = w.Header().Get("Retry-After")
		case http.StatusUnauthorized:
		default:
			t.Fatalf("status %d", w.Code)
		}
	}
	if limited < 30-freeTries || retry == "" {
		t.Errorf("%d of 30 wrong tokens were slowed down (Retry-After %q), want %d", limited, retry, 30-freeTries)
	}
	// Even the right token waits its turn from that client...
	if c, w := a.login("carol-token-0123456789", attacker, nil); c != nil || w.Code != http.StatusTooManyRequests {
		t.Errorf("the right token during the wait: %d", w.Code)
	}
	// ...but not from another client, nor from the same one once it ends.
	if c, _ := a.login("carol-token-0123456789", "192.0.2.7:4000", nil); c == nil {
		t.Error("another client is locked out too")
	}
	a.advance(time.Second)
	_, w := a.login("wrong-token-0123456789", attacker, nil)
	if w.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong token after a second: %d, want 401 (the wait is 1 s)", w.Code)
	}
	if _, w := a.login("carol-token-0123456789", attacker, nil); w.Code != http.StatusTooManyRequests {
		t.Errorf("the try right after the sixth wrong token: %d, want 429", w.Code)
	}
	a.advance(2 * time.Second)
	if c, w := a.login("carol-token-0123456789", attacker, nil); c == nil {
		t.Errorf("the right token after the wait: %d", w.Code)
	}
	// Clients behind the trusted proxy are told apart by X-Forwarded-For.
	for range freeTries + 1 {
		a.login("wrong-token-0123456789", "10.0.0.5:5000", map[string]string{"X-Forwarded-For": "198.51.100.9"})
	}
	if c, _ := a.login("carol-token-0123456789", "10.0.0.5:5000", map[string]string{"X-Forwarded-For": "198.51.100.10"}); c == nil {
		t.Error("a client behind the proxy is locked out by another")
	}
}

// TestLoginBackoffClients: the wrong tokens a login's back-off counts are
// counted against the client as the console can know it: the peer, an
// IPv6 peer's /64 (one host picks any address of its network), and behind
// a trusted proxy the address the proxy names. An attacker who rotates
// what it controls (its IPv6 address, an X-Forwarded-For header the
// console must not trust, the hops before the proxy's) is slowed down all
// the same, and cannot name its victim's address to lock the victim out.
func TestLoginBackoffClients(t *testing.T) {
	const proxy = "10.0.0.5:5000"
	type try struct{ remote, xff string }
	for _, tc := range []struct {
		name     string
		attacker func(i int) try // its i-th wrong token
		victim   try             // logs in right after
	}{
		{"X-Forwarded-For from an untrusted peer is not read",
			func(i int) try { return try{"192.0.2.66:4000", fmt.Sprintf("198.51.100.%d", i)} },
			try{"192.0.2.7:4000", ""}},
		{"an untrusted peer naming its victim in X-Forwarded-For",
			func(int) try { return try{"192.0.2.66:4000", "192.0.2.7"} },
			try{"192.0.2.7:4000", ""}},
		{"an IPv6 client is its /64",
			func(i int) try { return try{fmt.Sprintf("[2001:db8:1:2::%x]:4000", i+1), ""} },
			try{"[2001:db8:1:3::66]:4000", ""}},
		{"IPv4 clients of a dual-stack socket are one each",
			func(int) try { return try{"[::ffff:192.0.2.66]:4000", ""} },
			try{"[::ffff:192.0.2.7]:4000", ""}},
		{"behind the proxy, the address it names",
			func(int) try { return try{proxy, "198.51.100.9"} },
			try{proxy, "198.51.100.10"}},
		{"behind the proxy, hops before the proxy's are the client's to forge",
			func(i int) try { return try{proxy, fmt.Sprintf("203.0.113.%d, 198.51.100.9", i)} },
			try{proxy, "198.51.100.10"}},
		{"behind the proxy, an IPv6 client is its /64",
			func(i int) try { return try{proxy, fmt.Sprintf("2001:db8:5:6::%x", i+1)} },
			try{proxy, "2001:db8:5:7::1"}},
		{"behind a dual-stack proxy, IPv4 clients are one each",
			func(int) try { return try{proxy, "::ffff:198.51.100.9"} },
			try{proxy, "::ffff:198.51.100.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuthServer(t, Config{})
			hdr := func(p try) map[string]string {
				if p.xff == "" {
					return nil
				}
				return map[string]string{"X-Forwarded-For": p.xff}
			}
			for i := range freeTries {
				p := tc.attacker(i)
				if _, w := a.login("wrong-token-0123456789", p.remote, hdr(p)); w.Code != http.StatusUnauthorized {
					t.Fatalf("wrong token %d from %+v: %d, want 401", i+1, p, w.Code)
				}
			}
			p := tc.attacker(freeTries)
			if _, w := a.login("carol-token-0123456789", p.remote, hdr(p)); w.Code != http.StatusTooManyRequests {
				t.Errorf("the attacker's next try, from %+v: %d, want 429", p, w.Code)
			}
			if c, w := a.login("carol-token-0123456789", tc.victim.remote, hdr(tc.victim)); c == nil {
				t.Errorf("the victim %+v: %d, want a login", tc.victim, w.Code)
			}
		})
	}
}

func TestLoginBackoffMemoryIsBounded(t *testing.T) {
	var b loginBackoff
	now := time.Now()
	for i := range maxClients + 100 {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		b.failed(ip, now.Add(time.Duration(i)))
	}
	if len(b.clients) > maxClients {
		t.Errorf("%d clients remembered, want at most %d", len(b.clients), maxClients)
	}
}
