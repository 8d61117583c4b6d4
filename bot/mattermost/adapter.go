package mattermost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mattermost/mattermost/server/public/model"

	"github.com/thinbot/thinbot/bot"
)

var _ bot.Adapter = (*Adapter)(nil)

// Platform is the bot.Thread.Platform value of Mattermost threads.
const Platform = "mattermost"

// Config configures an Adapter. URL, Token, CallbackURL and ActionSecret
// are required; every other field has a usable zero value.
type Config struct {
	// URL is the server's base URL, e.g. https://mm.example.com.
	URL string
	// Token is the bot account's access token. It is never logged.
	Token string
	// CallbackURL is the URL Mattermost calls for button clicks, served by
	// thinbot's own listener through CallbackHandler, e.g.
	// http://10.0.0.5:8065/hooks/mattermost/actions.
	CallbackURL string
	// ActionSecret is the HMAC key that authenticates button contexts
	// (at least 16 bytes; cmd generates and persists 32 random bytes).
	ActionSecret []byte
	// Since, if not zero, makes the first connection catch up on posts
	// created after it (cmd passes the time of the last handled message).
	Since time.Time
	// Logger receives connection and error logs; nil discards them.
	Logger *slog.Logger
	// Backoff bounds reconnect delays; the zero value means 1s..60s, at
	// most 5s for the first 2 minutes of an outage.
	Backoff bot.Backoff
	// HTTPClient, if set, is used for the REST API (for a custom CA, say);
	// its transport is wrapped to retry rate-limited requests. Nil means a
	// client with a 30s timeout.
	HTTPClient *http.Client
}

// Adapter is a bot.Adapter for one Mattermost bot account. Create it with
// New. All methods may be called concurrently; Run may be active only once
// at a time.
type Adapter struct {
	cfg    Config
	log    *slog.Logger
	client *apiClient
	wsURL  string // the event WebSocket's URL
	wsBase string // wsURL without model.APIURLSuffix + "/websocket"

	running   atomic.Bool
	connected atomic.Bool
	handler   atomic.Pointer[handlerBox]

	// lookups are the user lookups deliver started; Run waits for them.
	lookups sync.WaitGroup

	mu       sync.Mutex
	botID    string
	botName  string
	users    map[string]string    // user id -> username
	inflight map[string]*lookup   // user id -> its lookup in flight
	failed   map[string]time.Time // user id -> when its lookup failed
}

type handlerBox struct{ h bot.Handler }

const (
	// userCacheMax bounds the id -> username cache; it is cleared when full.
	userCacheMax = 4096
	// nameWait is how long delivery waits for a user lookup; the post then
	// goes on with the id alone (names are cosmetic: matching is by id).
	nameWait = 2 * time.Second
	// nameRetry is how long a failed lookup is not tried again.
	nameRetry = 5 * time.Minute
)

// New checks cfg and returns an Adapter. It does not contact the server;
// Run does.
func New(cfg Config) (*Adapter, error) {
	// The URL is never echoed whole: it could hold a secret.
	base, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil {
		return nil, errors.New("mattermost: url is not a URL: want http(s)://host")
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("mattermost: url %s://%s: want http(s)://host", base.Scheme, base.Host)
	}
	if base.User != nil || base.RawQuery != "" || base.ForceQuery || base.Fragment != "" {
		// A password or an access_token there would reach error messages
		// (net/http's *url.Error names the URL) and every proxy log.
		return nil, fmt.Errorf("mattermost: url %s://%s: give scheme, host and path only, without user:password@, ?query or #fragment (the bot token goes in token_file)", base.Scheme, base.Host)
	}
	if cfg.Token == "" {
		return nil, errors.New("mattermost: token is empty")
	}
	cb, err := url.Parse(cfg.CallbackURL)
	if err != nil || (cb.Scheme != "http" && cb.Scheme != "https") || cb.Host == "" {
		return nil, fmt.Errorf("mattermost: callback url %q: want http(s)://host/path", cfg.CallbackURL)
	}
	if len(cfg.ActionSecret) < 16 {
		return nil, errors.New("mattermost: action secret must be at least 16 bytes")
	}
	cfg.Backoff = cfg.Backoff.WithDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("platform", Platform)

	hc := &http.Client{Timeout: 30 * time.Second}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	if hc.CheckRedirect == nil {
		// API v4 does not redirect. Following one would send the token
		// wherever it points on the same host name (another port, or
		// plain http: net/http compares host names only) and turn a POST
		// into a GET; a 3xx answer becomes an *APIError instead.
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	inner := hc.Transport
	if inner == nil {
		inner = http.DefaultTransport
	}
	hc.Transport = &limitTransport{
		base:    &retryTransport{base: inner, log: log, maxRetries: 3, maxWait: time.Minute},
		apiPath: strings.TrimRight(base.Path, "/") + model.APIURLSuffix,
		token:   cfg.Token,
	}
	client := newAPIClient(base.String(), cfg.Token, hc)

	ws := *base
	if ws.Scheme == "https" {
		ws.Scheme = "wss"
	} else {
		ws.Scheme = "ws"
	}
	ws.Path = strings.TrimRight(ws.Path, "/")
	wsBase := ws.String()
	ws.Path += model.APIURLSuffix + "/websocket"

	cfg.ActionSecret = append([]byte(nil), cfg.ActionSecret...)
	return &Adapter{
		cfg:      cfg,
		log:      log,
		client:   client,
		wsURL:    ws.String(),
		wsBase:   wsBase,
		users:    make(map[string]string),
		inflight: make(map[string]*lookup),
		failed:   make(map[string]time.Time),
	}, nil
}

// Connected reports whether the event WebSocket is connected and
// authenticated (for /readyz).
func (a *Adapter) Connected() bool { return a.connected.Load() }

// errAuth marks errors that retrying cannot fix (a bad or revoked token).
var errAuth = errors.New("authentication failed")

// Run logs in, connects the WebSocket and calls h for every new post until
// ctx is done, reconnecting with backoff and catching up on missed posts by
// itself. Button callbacks reach h through CallbackHandler while Run is
// active. Run returns ctx.Err() on shutdown, or an error when the token is
// refused.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	if h == nil {
		return errors.New("mattermost: run: nil handler")
	}
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("mattermost: run: already running")
	}
	defer a.running.Store(false)
	a.handler.Store(&handlerBox{h: h})
	defer a.handler.Store(nil)
	defer a.lookups.Wait()

	st := &runState{seen: bot.NewDedupe(10000)}
	if !a.cfg.Since.IsZero() {
		st.catchupFrom = a.cfg.Since.UnixMilli()
		st.floor = st.catchupFrom
		st.strict = true
	}
	attempt := 0
	lostAt := time.Now()
	for {
		connected, err := a.session(ctx, h, st)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errAuth) {
			return err
		}
		if connected {
			attempt = 0
			lostAt = time.Now()
		}
		d := a.cfg.Backoff.Delay(attempt, time.Since(lostAt))
		attempt++
		a.log.Warn("mattermost connection lost; reconnecting", "err", err, "in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// me returns the bot's user id and name, fetching them once.
func (a *Adapter) me(ctx context.Context) (id, name string, err error) {
	a.mu.Lock()
	id, name = a.botID, a.botName
	a.mu.Unlock()
	if id != "" {
		return id, name, nil
	}
	u, version, err := a.client.getMe(ctx)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			err = fmt.Errorf("%w: %w", errAuth, err)
		}
		return "", "", err
	}
	a.mu.Lock()
	a.botID, a.botName = u.Id, u.Username
	a.mu.Unlock()
	a.log.Info("mattermost login", "user_id", u.Id, "username", u.Username, "server_version", version)
	return u.Id, u.Username, nil
}

// userName resolves a user id to a username through a small cache. It
// returns "" if the lookup fails (the failure is logged).
func (a *Adapter) userName(ctx context.Context, id string) string {
	if id == "" {
		return ""
	}
	a.mu.Lock()
	name, ok := a.users[id]
	a.mu.Unlock()
	if ok {
		return name
	}
	u, err := a.client.getUser(ctx, id)
	if err != nil {
		a.log.Warn("mattermost user lookup failed", "user_id", id, "err", err)
		return ""
	}
	a.rememberUser(id, u.Username)
	return u.Username
}

// lookup is a user lookup in flight: done is closed when it ends.
type lookup struct {
	done    chan struct{}
	started time.Time
}

// userNameSoon is userName for the event loop: the lookup runs on its own
// goroutine (owned by Run) and the caller waits for it at most wait, so a
// slow or hung GET /users/{id} never stops delivery. A failed lookup is
// not retried for nameRetry. ctx is Run's.
func (a *Adapter) userNameSoon(ctx context.Context, id string, wait time.Duration) string {
	if id == "" {
		return ""
	}
	a.mu.Lock()
	if name, ok := a.users[id]; ok {
		a.mu.Unlock()
		return name
	}
	if at, ok := a.failed[id]; ok && time.Since(at) < nameRetry {
		a.mu.Unlock()
		return ""
	}
	l := a.inflight[id]
	if l != nil && time.Since(l.started) >= wait {
		a.mu.Unlock()
		return "" // an earlier post already waited for this one
	}
	if l == nil {
		l = &lookup{done: make(chan struct{}), started: time.Now()}
		a.inflight[id] = l
		a.lookups.Go(func() {
			name := a.userName(ctx, id)
			a.mu.Lock()
			defer a.mu.Unlock()
			if name == "" {
				if len(a.failed) >= userCacheMax {
					clear(a.failed)
				}
				a.failed[id] = time.Now()
			}
			delete(a.inflight, id)
			close(l.done)
		})
	}
	a.mu.Unlock()
	t := time.NewTimer(wait - time.Since(l.started))
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		a.log.Debug("mattermost user lookup is slow; going on without the name", "user_id", id)
		return ""
	case <-ctx.Done():
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.users[id]
}

func (a *Adapter) rememberUser(id, name string) {
	if id == "" || name == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.users) >= userCacheMax {
		clear(a.users)
	}
	a.users[id] = name
}

// APIError is a failed Mattermost API call. It carries the HTTP status and
// the id and message of the server's AppError JSON (or the start of a body
// that is not one), never the token.
type APIError struct {
	Op        string // what was attempted, e.g. "create post"
	Status    int    // HTTP status, 0 if no response arrived
	ID        string // AppError id, e.g. "api.context.permissions.app_error"
	Message   string // AppError message
	RequestID string // X-Request-ID of the response (or the AppError's request_id)
	Err       error  // underlying error: the transport's, or the text of a body that is not an AppError
}

// Error formats the failure for logs.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("mattermost: ")
	b.WriteString(e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.ID != "" || e.Message != "" {
		fmt.Fprintf(&b, ": %s (%s)", e.Message, e.ID)
	} else if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request %s]", e.RequestID)
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *APIError) Unwrap() error { return e.Err }

var _ bot.ChannelResolver = (*Adapter)(nil)
var _ bot.ThreadLinker = (*Adapter)(nil)

// CheckChannel implements bot.ChannelResolver: it returns an error unless
// the bot is a member of the channel id, so that a channel configured by
// id but never joined stops the start instead of ignoring mentions.
func (a *Adapter) CheckChannel(ctx context.Context, id string) error {
	botID, botName, err := a.me(ctx)
	if err != nil {
		return err
	}
	ok, err := a.IsMember(ctx, id, botID)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
			// Mattermost answers 403 when the bot is not in the channel,
			// public or private, and when there is no such channel: it
			// may read the members of its own channels only.
			return fmt.Errorf("mattermost: the bot is not a member of channel %s (or of its team), or there is no such channel: add @%s to the team (Main Menu > Add Members to Team), then to the channel (/invite @%s in it)", id, botName, botName)
		}
		return err
	}
	if !ok {
		return fmt.Errorf("mattermost: the bot is not a member of channel %s, or there is no such channel: add @%s to the team (Main Menu > Add Members to Team), then to the channel (/invite @%s in it)", id, botName, botName)
	}
	return nil
}

// ChannelID implements bot.ChannelResolver: name is a channel's name (as in
// its URL; a leading "~" or "#" is ignored) or its display name, among the channels the bot
// is a member of.
func (a *Adapter) ChannelID(ctx context.Context, name string) (string, error) {
	name = strings.TrimLeft(strings.TrimSpace(name), "~#")
	botID, _, err := a.me(ctx)
	if err != nil {
		return "", err
	}
	channels, err := a.memberChannels(ctx, botID)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, c := range channels {
		if c.Name == name || strings.EqualFold(c.DisplayName, name) {
			ids = append(ids, c.Id)
		}
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("mattermost: the bot is a member of no channel named %q (add the bot to it, or give the channel id)", name)
	case 1:
		return ids[0], nil
	}
	return "", fmt.Errorf("mattermost: %d channels are named %q (ids %s); give the channel id", len(ids), name, strings.Join(ids, ", "))
}

// ThreadLink implements bot.ThreadLinker: the thread's permalink, which
// Mattermost redirects to the team the channel is in.
func (a *Adapter) ThreadLink(t bot.Thread) string {
	if t.Root == "" {
		return ""
	}
	return strings.TrimRight(a.cfg.URL, "/") + "/_redirect/pl/" + url.PathEscape(t.Root)
}
