package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
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

// sessionCookie holds a token login: "name|expiry|mac".
const sessionCookie = "thinbot_session"

// loginFor is how long a token login lasts.
const loginFor = 12 * time.Hour

// identify names the user of r. The proxy headers count only from a
// trusted proxy's address; a login cookie counts only with a valid MAC.
func (s *Server) identify(r *http.Request) (identity, bool) {
	remote := remoteAddr(r)
	a := s.cfg.Auth
	if a.open() {
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
		if name, ok := s.checkCookie(c.Value); ok {
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

// need wraps a handler that requires one of roles.
func (s *Server) need(h func(http.ResponseWriter, *http.Request, identity), roles ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := s.identify(r)
		if !ok {
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") && !s.cfg.Auth.open() {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
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
	s.page(w, r, "login.html", map[string]any{"Open": s.cfg.Auth.open(), "Tokens": len(s.cfg.Auth.Tokens) > 0})
}

// login checks a token (in constant time against every configured token)
// and sets the login cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	sum := sha256.Sum256([]byte(token))
	name := ""
	for t, user := range s.cfg.Auth.Tokens {
		ts := sha256.Sum256([]byte(t))
		if subtle.ConstantTimeCompare(sum[:], ts[:]) == 1 && token != "" {
			name = user
		}
	}
	if name == "" {
		s.log.Warn("console login refused", "remote", r.RemoteAddr)
		w.WriteHeader(http.StatusUnauthorized)
		s.page(w, r, "login.html", map[string]any{"Tokens": len(s.cfg.Auth.Tokens) > 0, "Failed": true})
		return
	}
	s.log.Info("console login", "user", name)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: s.makeCookie(name, s.cfg.Now().Add(loginFor)),
		Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(loginFor.Seconds())})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (s *Server) makeCookie(name string, until time.Time) string {
	body := base64.RawURLEncoding.EncodeToString([]byte(name)) + "|" + strconv.FormatInt(until.Unix(), 10)
	return body + "|" + s.mac(body)
}

func (s *Server) checkCookie(v string) (string, bool) {
	i := strings.LastIndexByte(v, '|')
	if i < 0 {
		return "", false
	}
	body, mac := v[:i], v[i+1:]
	if !hmac.Equal([]byte(mac), []byte(s.mac(body))) {
		return "", false
	}
	enc, exp, ok := strings.Cut(body, "|")
	if !ok {
		return "", false
	}
	until, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || s.cfg.Now().Unix() > until {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(name), true
}

func (s *Server) mac(body string) string {
	m := hmac.New(sha256.New, s.cfg.Secret)
	m.Write([]byte("thinbot web login\x00" + body))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
