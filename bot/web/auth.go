package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// identity is who made a request and what they may do.
type identity struct {
	Name  string
	Roles []string
	// Via is how they were identified: "loopback", "proxy" or "token".
	Via string
}

func (id identity) has(role string) bool { return slices.Contains(id.Roles, role) }

// Can reports whether the identity has a role (for templates).
func (id identity) Can(role string) bool { return id.has(role) }

// sessionCookie holds a token login: "name|expiry|session id|mac". The MAC
// makes a forged cookie fail without a look-up; the session id must also be
// in the server's session table, so that a logout, or the removal of the
// user's token, ends the login for good (a copy of the cookie included).
const sessionCookie = "thinbot_session"

// loginFor is how long a token login lasts.
const loginFor = 12 * time.Hour

// maxSessions bounds the session table; the login that finds it full
// forgets the session closest to its expiry.
const maxSessions = 10000

// loginSession is one token login in the session table.
type loginSession struct {
	User string `json:"user"`
	// Token is an HMAC of the token that logged in (never the token): a
	// reload of the tokens file without that token ends the session.
	Token string    `json:"token"`
	Until time.Time `json:"until"`
}

// identify names the user of r. The proxy headers count only from a
// trusted proxy's address; a login cookie counts only with a valid MAC and
// a live session.
func (s *Server) identify(r *http.Request) (identity, bool) {
	remote := remoteAddr(r)
	a := s.cfg.Auth
	if s.open {
		if !remote.IsLoopback() {
			return identity{}, false
		}
		roles := []string{RoleAuditor}
		if s.cfg.Chat {
			roles = []string{RoleUser, RoleApprover, RoleAuditor}
		}
		return identity{Name: s.cfg.LocalUser, Roles: roles, Via: "loopback"}, true
	}
	if s.trustedProxy(remote) {
		name := strings.TrimSpace(r.Header.Get("X-Forwarded-User"))
		if name == "" {
			name = strings.TrimSpace(r.Header.Get("X-Auth-Request-Email"))
		}
		if name != "" {
			return identity{Name: name, Roles: a.Roles[name], Via: "proxy"}, true
		}
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if name, sid, ok := s.checkCookie(c.Value); ok && s.liveSession(sid, name) {
			return identity{Name: name, Roles: a.Roles[name], Via: "token"}, true
		}
	}
	return identity{}, false
}

func (s *Server) trustedProxy(ip netip.Addr) bool {
	for _, p := range s.cfg.Auth.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// remoteAddr is the peer's address; an unparsable one is the zero Addr,
// which is neither loopback nor in any prefix.
func remoteAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// clientAddr is the address of the browser behind r: the peer, or, when
// the peer is a trusted proxy, the last address of X-Forwarded-For that is
// not a trusted proxy (the earlier ones are the client's to forge).
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	ip := remoteAddr(r)
	if !s.trustedProxy(ip) {
		return ip
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		hop = hop.Unmap()
		if !s.trustedProxy(hop) {
			return hop
		}
	}
	return ip
}

// https reports whether the browser reached the console over TLS: its own
// TLS, an https public origin, or X-Forwarded-Proto from a trusted proxy.
func (s *Server) https(r *http.Request) bool {
	if r.TLS != nil || strings.HasPrefix(strings.ToLower(s.cfg.PublicOrigin), "https://") {
		return true
	}
	return s.trustedProxy(remoteAddr(r)) && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// need wraps a handler that requires one of roles.
func (s *Server) need(h func(http.ResponseWriter, *http.Request, identity), roles ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.identify(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") && !s.open {
				// Back here after the sign-in: the page asked for (the
				// browser keeps a thread's #fragment through the
				// redirects, login.js through the form).
				to := "/login"
				if u := r.URL.RequestURI(); u != "/" {
					to += "?next=" + url.QueryEscape(u)
				}
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			}
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		for _, role := range roles {
			if id.has(role) {
				h(w, r, id)
				return
			}
		}
		w.WriteHeader(http.StatusForbidden)
		s.page(w, r, "forbidden.html", map[string]any{"Need": strings.Join(roles, " or ")})
	}
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.page(w, r, "login.html", map[string]any{"Open": s.open, "Tokens": s.hasTokens(), "Next": localPath(r.URL.Query().Get("next"))})
}

// localPath is next if it is a path on this console ("/audit?x=1"), else
// "/": a sign-in must never send the browser to another site (an open
// redirect through a crafted link).
func localPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") ||
		u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

func (s *Server) hasTokens() bool {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	return len(s.tokens) > 0
}

// login checks a token (in constant time against every configured token)
// and sets the login cookie. A client that keeps sending wrong tokens waits
// (loginBackoff) before its next try is even looked at.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	client := s.clientAddr(r)
	if wait := s.backoff.wait(client, s.cfg.Now()); wait > 0 {
		secs := int(wait.Round(time.Second) / time.Second)
		secs = max(secs, 1)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.WriteHeader(http.StatusTooManyRequests)
		s.page(w, r, "login.html", map[string]any{"Tokens": s.hasTokens(), "Wait": secs, "Next": localPath(r.PostFormValue("next"))})
		return
	}
	token := r.PostFormValue("token")
	sum := sha256.Sum256([]byte(token))
	name := ""
	s.authMu.Lock()
	for t, user := range s.tokens {
		ts := sha256.Sum256([]byte(t))
		if subtle.ConstantTimeCompare(sum[:], ts[:]) == 1 && token != "" {
			name = user
		}
	}
	s.authMu.Unlock()
	if name == "" {
		n := s.backoff.failed(client, s.cfg.Now())
		s.log.Warn("console login refused", "remote", r.RemoteAddr, "client", client.String(), "failures", n)
		w.WriteHeader(http.StatusUnauthorized)
		s.page(w, r, "login.html", map[string]any{"Tokens": s.hasTokens(), "Failed": true, "Next": localPath(r.PostFormValue("next"))})
		return
	}
	s.backoff.succeeded(client)
	until := s.cfg.Now().Add(loginFor)
	sid, err := s.startSession(name, token, until)
	if err != nil {
		s.log.Error("console login not recorded; refused", "user", name, "err", err)
		http.Error(w, "the login could not be recorded; try again", http.StatusServiceUnavailable)
		return
	}
	s.log.Info("console login", "user", name)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.makeCookie(name, until, sid),
		Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.https(r), MaxAge: int(loginFor.Seconds())})
	http.Redirect(w, r, localPath(r.PostFormValue("next")), http.StatusSeeOther)
}

// logout ends the login server-side (the session leaves the table, so a
// saved copy of the cookie stops working) and clears the cookie.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if name, sid, ok := s.checkCookie(c.Value); ok && s.endSession(sid) {
			s.log.Info("console logout", "user", name)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.https(r), MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) makeCookie(name string, until time.Time, sid string) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(name)) + "|" + strconv.FormatInt(until.Unix(), 10) + "|" + sid
	return body + "|" + s.mac(body)
}

// checkCookie checks a cookie's MAC and expiry and returns the user and
// session id it names; the session table is not consulted.
func (s *Server) checkCookie(v string) (name, sid string, ok bool) {
	i := strings.LastIndexByte(v, '|')
	if i < 0 {
		return "", "", false
	}
	body, mac := v[:i], v[i+1:]
	if !hmac.Equal([]byte(mac), []byte(s.mac(body))) {
		return "", "", false
	}
	parts := strings.Split(body, "|")
	if len(parts) != 3 || parts[2] == "" {
		return "", "", false
	}
	until, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || s.cfg.Now().Unix() > until {
		return "", "", false
	}
	n, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return "", "", false
	}
	return string(n), parts[2], true
}

func (s *Server) mac(body string) string {
	return s.keyed("thinbot web login\x00" + body)
}

// keyed is an HMAC of v under the server's secret, base64.
func (s *Server) keyed(v string) string {
	m := hmac.New(sha256.New, s.cfg.Secret)
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// tokenHash is what the session table keeps of a login token.
func (s *Server) tokenHash(token string) string { return s.keyed("thinbot web token\x00" + token) }

// sessionKey is the table's key of a session id: a copy of the table (it
// is saved to the state dir) holds no cookie that would log anyone in.
func (s *Server) sessionKey(sid string) string { return s.keyed("thinbot web session\x00" + sid) }

// startSession adds a session for user and returns its id. With
// Config.ChainLogins the login is recorded in the chain first; a failure
// to record it is an error, and no session is added.
func (s *Server) startSession(user, token string, until time.Time) (string, error) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	sid := base64.RawURLEncoding.EncodeToString(b[:])
	se := loginSession{User: user, Token: s.tokenHash(token), Until: until}
	if s.cfg.ChainLogins {
		p := agentcore.ConsoleLoginPayload{User: user, Key: s.sessionKey(sid), Token: se.Token, Until: until}
		if err := agentcore.RecordConsoleLogin(s.cfg.Chain, p); err != nil {
			return "", err
		}
	}
	now := s.cfg.Now()
	s.authMu.Lock()
	for k, se := range s.sessions {
		if now.After(se.Until) {
			delete(s.sessions, k)
		}
	}
	if len(s.sessions) >= maxSessions {
		var oldest string
		for k, se := range s.sessions {
			if oldest == "" || se.Until.Before(s.sessions[oldest].Until) {
				oldest = k
			}
		}
		delete(s.sessions, oldest)
	}
	s.sessions[s.sessionKey(sid)] = se
	s.saveSessionsLocked()
	s.authMu.Unlock()
	return sid, nil
}

// liveSession reports whether sid is a session of user in the table.
func (s *Server) liveSession(sid, user string) bool {
	s.authMu.Lock()
	defer s.authMu.Unlock()
	se, ok := s.sessions[s.sessionKey(sid)]
	return ok && se.User == user && !s.cfg.Now().After(se.Until)
}

// endSession removes sid from the table, reporting whether it was there.
// With Config.ChainLogins the logout is recorded in the chain, so that the
// next leader's console does not take the session back; a failure to
// record it is logged (the session still ends here).
func (s *Server) endSession(sid string) bool {
	s.authMu.Lock()
	k := s.sessionKey(sid)
	se, ok := s.sessions[k]
	if ok {
		delete(s.sessions, k)
		s.saveSessionsLocked()
	}
	s.authMu.Unlock()
	if ok {
		s.recordLogout(se.User, k, agentcore.LogoutByUser)
	}
	return ok
}

// recordLogout records the end of the session key k (Config.ChainLogins).
func (s *Server) recordLogout(user, k, why string) {
	if !s.cfg.ChainLogins {
		return
	}
	if err := agentcore.RecordConsoleLogout(s.cfg.Chain, agentcore.ConsoleLogoutPayload{User: user, Key: k, Why: why}); err != nil {
		s.log.Error("console logout not recorded: the next leader may take the login back", "user", user, "why", why, "err", err)
	}
}

// chainSessions starts the session table with the logins the chain holds
// (Config.ChainLogins): those live now, not ended, and whose token is
// still among the tokens.
func (s *Server) chainSessions() error {
	live, err := agentcore.ConsoleLogins(s.cfg.Chain, s.cfg.Now(), loginFor)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for t := range s.tokens {
		keep[s.tokenHash(t)] = true
	}
	s.sessions = map[string]loginSession{}
	for k, p := range live {
		if keep[p.Token] && len(s.sessions) < maxSessions {
			s.sessions[k] = loginSession{User: p.User, Token: p.Token, Until: p.Until}
		}
	}
	return nil
}

// SetTokens replaces the login tokens (a reload of the tokens file) and
// ends every session whose token is no longer among them: a user removed
// from the file, or whose token was changed, is logged out at once. It
// returns how many sessions it ended. It never turns a console with logins
// into the open one: with no tokens left, nobody can log in. It may be
// called concurrently with requests.
func (s *Server) SetTokens(tokens map[string]string) int {
	keep := map[string]bool{}
	for t := range tokens {
		keep[s.tokenHash(t)] = true
	}
	s.authMu.Lock()
	s.tokens = maps.Clone(tokens)
	ended := map[string]string{} // key -> user
	for k, se := range s.sessions {
		if !keep[se.Token] {
			delete(s.sessions, k)
			ended[k] = se.User
		}
	}
	if len(ended) > 0 {
		s.saveSessionsLocked()
	}
	s.authMu.Unlock()
	for k, user := range ended {
		s.recordLogout(user, k, agentcore.LogoutTokenRemoved)
	}
	return len(ended)
}

// saveSessionsLocked hands the session table to Config.SaveSessions; the
// caller holds s.authMu. A failure is logged: the login still works until
// the process ends.
func (s *Server) saveSessionsLocked() {
	if s.cfg.SaveSessions == nil {
		return
	}
	b, err := json.Marshal(s.sessions)
	if err == nil {
		err = s.cfg.SaveSessions(b)
	}
	if err != nil {
		s.log.Warn("save login sessions", "err", err)
	}
}

// loadSessions reads a table saved by saveSessionsLocked, dropping expired
// sessions and those whose token is gone.
func (s *Server) loadSessions(b []byte) {
	s.sessions = map[string]loginSession{}
	if len(b) == 0 {
		return
	}
	var saved map[string]loginSession
	if err := json.Unmarshal(b, &saved); err != nil {
		s.log.Warn("saved login sessions unreadable; everyone logs in again", "err", err)
		return
	}
	keep := map[string]bool{}
	for t := range s.tokens {
		keep[s.tokenHash(t)] = true
	}
	now := s.cfg.Now()
	for k, se := range saved {
		if keep[se.Token] && now.Before(se.Until) && len(s.sessions) < maxSessions {
			s.sessions[k] = se
		}
	}
}

// loginBackoff slows down guessing: from the freeTries-th wrong token in a
// row from one client (an address; an IPv6 /64), the next try must wait, 1 s
// doubling with each further wrong token up to maxWait, and is refused
// unread (429, Retry-After) before then. A right
// token resets the count. It remembers at most maxClients clients,
// forgetting the one seen longest ago.
type loginBackoff struct {
	mu      sync.Mutex
	clients map[netip.Prefix]*tries
}

type tries struct {
	failures int
	next     time.Time // no try is read before it
	seen     time.Time
}

const (
	freeTries  = 5
	maxWait    = 5 * time.Minute
	maxClients = 4096
)

func clientKey(ip netip.Addr) netip.Prefix {
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// wait is how long the client must still wait before a try, 0 for none.
func (b *loginBackoff) wait(ip netip.Addr, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.clients[clientKey(ip)]
	if t == nil || !now.Before(t.next) {
		return 0
	}
	return t.next.Sub(now)
}

// failed counts a wrong token and returns the failures in a row.
func (b *loginBackoff) failed(ip netip.Addr, now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.clients == nil {
		b.clients = map[netip.Prefix]*tries{}
	}
	k := clientKey(ip)
	t := b.clients[k]
	if t == nil {
		if len(b.clients) >= maxClients {
			var oldest netip.Prefix
			var at time.Time
			for ck, ct := range b.clients {
				if at.IsZero() || ct.seen.Before(at) {
					oldest, at = ck, ct.seen
				}
			}
			delete(b.clients, oldest)
		}
		t = &tries{}
		b.clients[k] = t
	}
	t.failures++
	t.seen = now
	if over := t.failures - freeTries + 1; over > 0 {
		wait := maxWait
		if over < 20 {
			wait = min(time.Second<<(over-1), maxWait)
		}
		t.next = now.Add(wait)
	}
	return t.failures
}

func (b *loginBackoff) succeeded(ip netip.Addr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.clients, clientKey(ip))
}
