package web

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/store"
)

//go:embed assets
var assets embed.FS

// Roles a user may hold.
const (
	RoleUser     = "user"     // starts and continues threads
	RoleApprover = "approver" // sees threads and may decide approvals (as the bot's channel approvers allow)
	RoleAuditor  = "auditor"  // reads the audit viewer
)

// Platform is the Thread.Platform of console threads.
const Platform = "web"

// Auth says who may use the console. The zero Auth is the local operator
// alone: loopback addresses only, no login.
type Auth struct {
	// TrustedProxies are the addresses of reverse proxies (oauth2-proxy
	// and the like) whose X-Forwarded-User or X-Auth-Request-Email header
	// names the user. The headers are ignored on requests from any other
	// address.
	TrustedProxies []netip.Prefix
	// Tokens maps a login token to the user it logs in.
	Tokens map[string]string
	// Roles maps user names to their roles (RoleUser, RoleApprover,
	// RoleAuditor). A user without an entry has no role and sees nothing.
	Roles map[string][]string
}

// open reports whether a is the zero Auth (the local operator alone).
func (a Auth) open() bool { return len(a.TrustedProxies) == 0 && len(a.Tokens) == 0 }

// Config configures a Server. Chain is required.
type Config struct {
	// Listen is the address the console is served on. New refuses a
	// non-loopback address when Auth is the zero Auth.
	Listen string
	Auth   Auth
	// LocalUser is the name of the local operator (open Auth); "" means
	// "local".
	LocalUser string
	// Chain is the event store the audit viewer reads (and the console
	// rebuilds old threads from). The Server writes to it the checkpoint
	// of a good full verification (CheckpointMin) and, with ChainLogins,
	// the console's logins and logouts.
	Chain *store.DB
	// Timeline, if set, writes a session's timeline in Markdown: part is
	// agentcore.PartBoth, PartPostmortem or PartAppendix (the audit
	// viewer's Timeline button, /audit/timeline?part=).
	Timeline func(ctx context.Context, session, part string) (string, error)
	// Chat serves the console's chat pages; without it the Server is the
	// audit viewer alone (beside a chat platform) and Run is never called.
	Chat bool
	// Channel is the channel id of console threads; "" means "console".
	Channel string
	// ModelProblem, if set, is shown on the console page: no model is
	// configured, and how to configure one.
	ModelProblem string
	// PublicOrigin is the console's origin as browsers see it
	// ("https://thinbot.example.com") when a proxy rewrites the Host
	// header; "" means the request's Host.
	PublicOrigin string
	// Secret signs login cookies; nil means a random key (logins then end
	// when the process does). The consoles of a cluster share one (derived
	// from its action key), so that each checks the others' cookies.
	Secret []byte
	// Sessions is the login session table SaveSessions saved last (nil:
	// none), so that logins survive a restart; sessions whose token is no
	// longer in Auth.Tokens are dropped.
	Sessions []byte
	// SaveSessions, if set, is called with the session table each time it
	// changes (a login, a logout, SetTokens ending sessions), under the
	// Server's lock: it must not call the Server.
	SaveSessions func([]byte) error
	// ChainLogins records every login and its end in Chain
	// (agentcore.EvConsoleLogin, EvConsoleLogout) and starts with the
	// session table those events leave (Sessions and SaveSessions are
	// then not used): a
	// cluster's consoles, which share Secret, so that a login made at one
	// leader works at the next, and a logout at one holds at the next. A
	// login that cannot be recorded is refused.
	ChainLogins bool
	// CheckpointMin is the chain length from which a good full
	// verification is recorded in the chain as the checkpoint the next
	// start verifies from (agentcore.RecordChainVerified); 0 means 10,000.
	// Below it a full verification costs less than the record (about
	// 60 ms), and the chain gets no checkpoint events.
	CheckpointMin int
	// PageSize is how many events a timeline page shows; 0 means 200.
	PageSize int
	Logger   *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Location is the time zone of times in the bot's texts that the
	// console rebuilds from the chain (an approval card's "Approved by
	// @x at 03:12:05 CET"), as the console's bot.Config.Location writes
	// them live; nil means UTC. The page's own times are the browser's.
	Location *time.Location
}

// Server is the web console and audit viewer. Its methods may be called
// concurrently.
type Server struct {
	cfg   Config
	log   *slog.Logger
	pages *template.Template
	mux   *http.ServeMux

	handler atomic.Pointer[handlerBox]
	inbox   chan bot.Message

	// open is the local operator's console (the zero Auth), decided once
	// at New: reloading an emptied tokens file never opens it.
	open     bool
	authMu   sync.Mutex
	tokens   map[string]string       // login token -> user (SetTokens replaces it)
	sessions map[string]loginSession // by sessionKey
	backoff  loginBackoff

	mu      sync.Mutex
	threads map[string]*wthread
	order   []string            // thread ids, oldest first
	pending map[*wpost]*wthread // the posts with an open approval request (the inbox)
	nextID  uint64
	// idPrefix starts every post id of this process ("p" and 6 random hex
	// digits and "-").
	idPrefix string

	verifyMu  sync.Mutex
	verified  verifyCache
	verifying bool          // a request is verifying the chain
	verifyNow chan struct{} // an auditor asked for a full verification (cap 1)

	approvalWindow uint64 // events per approvals page; approvalWindow, tests change it
}

type handlerBox struct{ h bot.Handler }

var (
	_ bot.Adapter  = (*Server)(nil)
	_ bot.Streamer = (*Server)(nil)
)

// New checks cfg and returns a Server. It returns an error for a
// non-loopback Listen address without authentication: the console would
// otherwise give anyone who reaches it the local operator's rights.
func New(cfg Config) (*Server, error) {
	if cfg.Chain == nil {
		return nil, errors.New("web: Chain is required")
	}
	if err := cfg.Auth.Check(cfg.Listen); err != nil {
		return nil, err
	}
	if cfg.LocalUser == "" {
		cfg.LocalUser = "local"
	}
	if cfg.Channel == "" {
		cfg.Channel = "console"
	}
	if cfg.CheckpointMin <= 0 {
		cfg.CheckpointMin = defaultCheckpointMin
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 200
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Secret) == 0 {
		cfg.Secret = make([]byte, 32)
		if _, err := rand.Read(cfg.Secret); err != nil {
			return nil, fmt.Errorf("web: secret: %w", err)
		}
	}
	pages, err := template.New("").Funcs(funcs).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: templates: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, pages: pages, inbox: make(chan bot.Message, 64),
		threads: map[string]*wthread{}, pending: map[*wpost]*wthread{}, approvalWindow: approvalWindow, verifyNow: make(chan struct{}, 1),
		open: cfg.Auth.open(), tokens: maps.Clone(cfg.Auth.Tokens)}
	var rb [3]byte
	_, _ = rand.Read(rb[:])
	s.idPrefix = "p" + hex.EncodeToString(rb[:]) + "-"
	if cfg.ChainLogins {
		s.cfg.SaveSessions = nil
		if err := s.chainSessions(); err != nil {
			return nil, fmt.Errorf("web: login sessions: %w", err)
		}
	} else {
		s.loadSessions(cfg.Sessions)
	}
	if cfg.Chat {
		if err := s.restore(); err != nil {
			return nil, fmt.Errorf("web: restore threads: %w", err)
		}
	}
	s.routes()
	s.startVerifier() // the audit viewer's chain verification (audit.go)
	return s, nil
}

// Check reports whether a console with this Auth may listen on listen: a
// non-loopback address needs trusted proxies or login tokens, and roles
// must be known ones.
func (a Auth) Check(listen string) error {
	if a.open() && !loopbackListen(listen) {
		return fmt.Errorf("web: refusing to serve %s without authentication: listen on 127.0.0.1, or configure trusted proxies or login tokens", listen)
	}
	for user, roles := range a.Roles {
		for _, r := range roles {
			if r != RoleUser && r != RoleApprover && r != RoleAuditor {
				return fmt.Errorf("web: user %q: unknown role %q (want user, approver or auditor)", user, r)
			}
		}
	}
	return nil
}

// loopbackListen reports whether addr ("host:port") listens on loopback
// only. An empty host listens everywhere.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Handler returns the console's HTTP handler (pages, API, assets), with the
// security headers, the origin check and authentication applied.
func (s *Server) Handler() http.Handler { return s.secure(s.mux) }

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.logout)
	m.HandleFunc("GET /{$}", s.need(s.home, RoleUser, RoleApprover, RoleAuditor))
	if s.cfg.Chat {
		m.HandleFunc("GET /api/threads", s.need(s.listThreads, RoleUser, RoleApprover))
		m.HandleFunc("POST /api/threads", s.need(s.newThread, RoleUser))
		m.HandleFunc("GET /api/threads/{id}/events", s.need(s.threadEvents, RoleUser, RoleApprover))
		m.HandleFunc("POST /api/threads/{id}/messages", s.need(s.postMessage, RoleUser))
		m.HandleFunc("POST /api/threads/{id}/posts/{post}/click", s.need(s.click, RoleUser, RoleApprover))
		m.HandleFunc("GET /api/threads/{id}/posts/{post}/file", s.need(s.file, RoleUser, RoleApprover))
		m.HandleFunc("GET /api/inbox", s.need(s.approvalInbox, RoleUser, RoleApprover))
		m.HandleFunc("GET /api/threads/{id}/output", s.need(s.output, RoleUser, RoleApprover))
	}
	m.HandleFunc("GET /audit", s.need(s.auditSessions, RoleAuditor))
	m.HandleFunc("GET /audit/session", s.need(s.auditSession, RoleAuditor))
	m.HandleFunc("GET /audit/approvals", s.need(s.auditApprovals, RoleAuditor))
	m.HandleFunc("GET /audit/verify", s.need(s.auditVerify, RoleAuditor))
	m.HandleFunc("POST /audit/verify", s.need(s.auditVerifyNow, RoleAuditor))
	m.HandleFunc("GET /audit/export", s.need(s.auditExport, RoleAuditor))
	m.HandleFunc("GET /audit/timeline", s.need(s.auditTimeline, RoleAuditor))
	s.mux = m
}

// csp is the Content-Security-Policy of every response: nothing inline,
// nothing from elsewhere.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// secure wraps h with the security headers, the loopback Host check of an
// open console and the origin check of state-changing requests.
func (s *Server) secure(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			jw := jsonErrors(w)
			defer jw.finish()
			w = jw
		}
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		// Not no-referrer: with it Chromium sends "Origin: null" on form posts,
		// which the origin check refuses.
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		hd.Set("Cross-Origin-Resource-Policy", "same-origin")
		if s.open && !loopbackHost(r.Host) {
			// A DNS-rebinding page would reach a loopback console under
			// its own host name.
			http.Error(w, "this console only answers to a loopback host name (127.0.0.1, localhost, [::1])", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if why := s.crossOrigin(r); why != "" {
				s.log.Warn("cross-origin request refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "why", why)
				http.Error(w, "cross-origin request refused: "+why, http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// crossOrigin returns why r is not a same-origin request, or "". Browsers
// send Origin with every POST; a request without one is refused too.
func (s *Server) crossOrigin(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return "no Origin header"
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return "Sec-Fetch-Site is " + site
	}
	if s.cfg.PublicOrigin != "" {
		if !strings.EqualFold(origin, strings.TrimRight(s.cfg.PublicOrigin, "/")) {
			return "origin " + origin + " is not " + s.cfg.PublicOrigin
		}
		return ""
	}
	// The scheme counts too: an https page of the same host is another
	// origin than this http console, and the other way round.
	self := "http://" + r.Host
	if s.https(r) {
		self = "https://" + r.Host
	}
	if !strings.EqualFold(origin, self) {
		return "origin " + origin + " is not this console (" + self + ")"
	}
	return ""
}

// loopbackHost reports whether a Host header names a loopback host.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// page renders a template with the common page data.
func (s *Server) page(w http.ResponseWriter, r *http.Request, name string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	if id, ok := s.identify(r); ok {
		data["Me"] = id
	}
	data["Chat"] = s.cfg.Chat
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.pages.ExecuteTemplate(w, name, data); err != nil {
		s.log.Warn("render page", "page", name, "err", err)
	}
}

var funcs = template.FuncMap{
	"dict": func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			m[k] = kv[i+1]
		}
		return m
	},
	// time writes t in UTC, named, as a <time> element that time.js shows
	// in the viewer's zone (UTC on hover): the console's rule for times.
	"time": func(t time.Time) template.HTML {
		if t.IsZero() {
			return ""
		}
		u := t.UTC()
		return template.HTML(`<time class="utc" datetime="` + u.Format(time.RFC3339) + `">` + u.Format("2006-01-02 15:04:05") + ` UTC</time>`)
	},
	// code renders `spans` of s as code, escaping everything.
	"code": func(s string) template.HTML {
		var b strings.Builder
		for i, part := range strings.Split(s, "`") {
			if i%2 == 1 {
				b.WriteString("<code>" + template.HTMLEscapeString(part) + "</code>")
			} else {
				b.WriteString(template.HTMLEscapeString(part))
			}
		}
		return template.HTML(b.String())
	},
	"short": shorten,
}

// titleLen is how much of its first message a thread's title keeps, live
// and when the thread is rebuilt from the chain alike.
const titleLen = 80

// plainTitle is a thread's title in plain text: the first line of md
// without Markdown's marks (**bold**, `code`, _italic_) and without the
// state an alert card's first line starts with ("🔥 **FIRING**"), which
// the thread's badge shows live; cut to titleLen.
func plainTitle(md string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(md), "\n")
	line = cardState.ReplaceAllString(line, "")
	line = strings.ReplaceAll(line, "`", "")
	for strings.Contains(line, "**") { // "*`*" is "**" once the ` is gone
		line = strings.ReplaceAll(line, "**", "")
	}
	line = italic.ReplaceAllString(line, "$1$2$3")
	line = strings.Join(strings.Fields(line), " ")
	if line == "" {
		return "Thread"
	}
	return shorten(line, titleLen)
}

var (
	cardState = regexp.MustCompile(`^[^*\s]*\s*\*\*(FIRING|RESOLVED)\*\*\s*`)
	italic    = regexp.MustCompile(`(^|\s)_([^_\s][^_]*)_($|[\s.,;:!?)])`)
)

// shorten cuts s to n bytes (dropping a split UTF-8 sequence) and marks the
// cut with "…".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func (s *Server) home(w http.ResponseWriter, r *http.Request, id identity) {
	if !s.cfg.Chat || (!id.has(RoleUser) && !id.has(RoleApprover)) {
		http.Redirect(w, r, "/audit", http.StatusSeeOther)
		return
	}
	s.page(w, r, "console.html", map[string]any{"ModelProblem": s.cfg.ModelProblem, "Channel": s.cfg.Channel})
}
