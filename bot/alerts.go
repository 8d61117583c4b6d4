package bot

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// Webhook is the body of an Alertmanager webhook notification (version
// "4"), which Grafana's webhook contact point also sends. Every string in
// it is untrusted: anyone who can create an alert can write it.
type Webhook struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []WebhookAlert    `json:"alerts"`
}

// WebhookAlert is one alert of a Webhook.
type WebhookAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// maxAlertsPerDelivery bounds the alerts one delivery may carry; a notifier
// sending more is misconfigured (Alertmanager's max_alerts truncates).
const maxAlertsPerDelivery = 1000

// ParseWebhook reads and checks a webhook body.
func ParseWebhook(body []byte) (Webhook, error) {
	var w Webhook
	if err := json.Unmarshal(body, &w); err != nil {
		return Webhook{}, fmt.Errorf("alert webhook: %w", err)
	}
	switch {
	case w.GroupKey == "":
		return Webhook{}, errors.New("alert webhook: groupKey is empty")
	case len(w.GroupKey) > 4096:
		return Webhook{}, errors.New("alert webhook: groupKey is longer than 4096 bytes")
	case w.Status != "firing" && w.Status != "resolved":
		return Webhook{}, fmt.Errorf("alert webhook: status %q: want firing or resolved", w.Status)
	case len(w.Alerts) == 0:
		return Webhook{}, errors.New("alert webhook: no alerts")
	case len(w.Alerts) > maxAlertsPerDelivery:
		return Webhook{}, fmt.Errorf("alert webhook: %d alerts, more than %d", len(w.Alerts), maxAlertsPerDelivery)
	}
	return w, nil
}

// Matcher is one label matcher of an alert route, written as Alertmanager
// writes them: name=value, name!=value, name=~regex, name!~regex. The value
// may be double-quoted; a regex must match the whole value. A label the
// alert lacks has the value "".
type Matcher struct {
	Name, Op, Value string
	re              *regexp.Regexp
}

var matcherRe = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$`)

// ParseMatcher reads a matcher such as `severity=~"critical|page"`.
func ParseMatcher(s string) (Matcher, error) {
	m := matcherRe.FindStringSubmatch(s)
	if m == nil {
		return Matcher{}, fmt.Errorf("matcher %q: want name=value, name!=value, name=~regex or name!~regex", s)
	}
	v := m[3]
	if strings.HasPrefix(v, `"`) {
		u, err := strconv.Unquote(v)
		if err != nil {
			return Matcher{}, fmt.Errorf("matcher %q: bad quoted value: %w", s, err)
		}
		v = u
	}
	mt := Matcher{Name: m[1], Op: m[2], Value: v}
	if mt.Op == "=~" || mt.Op == "!~" {
		re, err := regexp.Compile("^(?:" + v + ")$")
		if err != nil {
			return Matcher{}, fmt.Errorf("matcher %q: %w", s, err)
		}
		mt.re = re
	}
	return mt, nil
}

// Matches reports whether labels satisfy m.
func (m Matcher) Matches(labels map[string]string) bool {
	v := labels[m.Name]
	switch m.Op {
	case "=":
		return v == m.Value
	case "!=":
		return v != m.Value
	case "=~":
		return m.re.MatchString(v)
	case "!~":
		return !m.re.MatchString(v)
	}
	return false
}

func (m Matcher) String() string { return m.Name + m.Op + strconv.Quote(m.Value) }

// AlertRoute sends the alert groups its matchers select to a channel.
type AlertRoute struct {
	Name     string
	Matchers []Matcher
	// Channel is the channel id the group's thread opens in; it must be a
	// configured channel.
	Channel string
	// Platform is the bot whose channel it is ("web" for the web console);
	// "" means AlertsConfig.Platform.
	Platform string
	// Investigate starts a read-only first look when a group fires.
	Investigate bool
	// MaxSteps and MaxWall bound the first look; 0 means 8 and 5 minutes.
	MaxSteps int
	MaxWall  time.Duration
	// MaxInvestigations bounds the route's concurrent first looks; 0 means 2.
	MaxInvestigations int
	// Acknowledgers are user ids who may acknowledge the route's alerts
	// besides whoever may approve in its channel.
	Acknowledgers []string
}

// AlertsConfig configures the alert receiver.
type AlertsConfig struct {
	// Token is the bearer token notifiers send; required.
	Token []byte
	// Platform is the Thread.Platform of the adapter ("mattermost", "slack").
	Platform string
	// Routes are tried in order; the first whose matchers all match the
	// group's labels takes it.
	Routes []AlertRoute
	// MaxBody bounds a delivery's size; 0 means 1 MiB.
	MaxBody int64
	// Rate and Burst bound deliveries per second (a token bucket); 0 means
	// 10 and 100. A delivery over the rate is answered 429 and the
	// notifier retries it.
	Rate  float64
	Burst int
	// AuthRate and AuthBurst bound the requests with a wrong or missing
	// token (a token bucket of their own, so that they cannot use up the
	// notifier's); 0 means 1 per second and 10. One over it is answered 429
	// and not logged one by one: the next refusal that is logged says how
	// many were not.
	AuthRate  float64
	AuthBurst int
	// ReadTimeout bounds the time to read a delivery's body once its
	// headers are in; 0 means 10 seconds. A slower body is answered 408.
	ReadTimeout time.Duration
	// MaxPerChannel bounds concurrent first looks per channel; 0 means 2.
	MaxPerChannel int
	// MaxQueued bounds the first looks that wait, per channel, for one
	// under way to end; 0 means 20, negative none. A group beyond it is
	// skipped: its thread offers a Run first look button instead.
	MaxQueued int
	// DedupeWindow is how long a handled delivery is remembered (by its
	// content: DeliveryDigest), so that a retried delivery is handled once;
	// 0 means 10 minutes. A repeat notification after it lands in the
	// group's thread again. A delivery that failed is not remembered.
	DedupeWindow time.Duration
	// Groups are the alert groups the chain knows (agentcore.AlertGroups),
	// Deliveries the delivery digests recorded within DedupeWindow.
	Groups     map[string]agentcore.AlertGroup
	Deliveries []string
	// Cards are the cards the chain says were about to be posted
	// (agentcore.AlertCards); those of groups not in Groups are looked for
	// in the chat by the group's next delivery (PostFinder).
	Cards map[string]agentcore.AlertCard
	// Registerer, if set, gets thinbot_alerts_total{outcome}.
	Registerer prometheus.Registerer
	// Alertmanager is where /silence creates silences (silence.go); the
	// zero value creates none.
	Alertmanager Alertmanager
}

// AlertReceiver is the alert webhook receiver: an http.Handler (POST, JSON
// body, "Authorization: Bearer TOKEN"). Reconfigure changes its token,
// routes and limits while it serves. Safe for concurrent use.
type AlertReceiver struct{ *alerts }

// alerts is the receiver's state.
type alerts struct {
	bots map[string]*Bot // by platform
	log  *slog.Logger
	now  func() time.Time
	// cfg is the configuration in force (Reconfigure replaces it); each
	// delivery reads it once, so that one delivery is handled under one.
	cfg atomic.Pointer[AlertsConfig]

	mu     sync.Mutex
	groups map[string]agentcore.AlertGroup
	locks  map[string]*groupLock
	seen   map[string]*delivery // by DeliveryDigest
	// deliveries and refusals are the token buckets of authorized
	// deliveries and of requests with a bad token; suppressed counts the
	// refusals not logged since the last one that was.
	deliveries, refusals bucket
	suppressed           int
	perChan              map[string]int
	perRoute             map[string]int
	lastSweep            time.Time
	counter              *prometheus.CounterVec

	// ackKeys maps an Acknowledge button's value to its group's key, set
	// before the card is posted (alertack.go).
	ackKeys map[string]string
	// waiting are the first looks queued per channel (AlertRoute.Channel),
	// oldest first; looks is each group's first-look state (look*);
	// storms are the channels' storm summaries (alertstorm.go).
	waiting map[string][]pendingLook
	looks   map[string]string
	storms  map[string]*storm
	// cards are the EvAlertCard records of groups whose alert event
	// "opened" is not committed: their card may be in the chat already.
	cards map[string]agentcore.AlertCard
}

// count counts a delivery's or a first look's outcome.
func (a *alerts) count(outcome string) {
	if a.counter != nil {
		a.counter.WithLabelValues(outcome).Inc()
	}
}

// delivery is a delivery being handled (done open) or handled (at set).
// A delivery whose handling failed is removed from alerts.seen before done
// is closed, so that its retry, or a copy waiting for it, handles it again.
type delivery struct {
	done    chan struct{}
	ok      bool
	at      time.Time
	waiting int // copies waiting for it (tests look)
}

// bucket is a token bucket; the caller holds alerts.mu.
type bucket struct {
	rate     float64
	burst    int
	tokens   float64
	refilled time.Time
}

// resize gives the bucket a new rate and burst; the tokens it holds stay,
// up to the new burst.
func (k *bucket) resize(rate float64, burst int) {
	k.rate, k.burst = rate, burst
	k.tokens = min(k.tokens, float64(burst))
}

// take takes a token, or says how long until there is one.
func (k *bucket) take(now time.Time) (time.Duration, bool) {
	k.tokens = min(float64(k.burst), k.tokens+now.Sub(k.refilled).Seconds()*k.rate)
	k.refilled = now
	if k.tokens < 1 {
		return time.Duration((1 - k.tokens) / k.rate * float64(time.Second)), false
	}
	k.tokens--
	return 0, true
}

type groupLock struct {
	mu   sync.Mutex
	refs int
}

// AlertHandler returns the HTTP handler that receives alert webhooks
// (POST, JSON body, "Authorization: Bearer TOKEN"). It refuses to exist
// without a token: an open receiver would let anyone open threads and start
// investigations.
func (b *Bot) AlertHandler(cfg AlertsConfig) (http.Handler, error) {
	r, err := NewAlertReceiver(cfg, map[string]*Bot{cfg.Platform: b})
	if err != nil {
		return nil, err // not a nil *AlertReceiver in a non-nil Handler
	}
	return r, nil
}

// NewAlertReceiver is AlertHandler for several bots, one per platform (the
// chat platform's and the web console's): a route's Platform picks the bot
// that opens its threads; "" means cfg.Platform. It checks cfg as
// CheckAlerts does, against the bots' channels.
func NewAlertReceiver(cfg AlertsConfig, bots map[string]*Bot) (*AlertReceiver, error) {
	if err := CheckAlerts(cfg, botChannels(bots)); err != nil {
		return nil, err
	}
	b := bots[cfg.Platform]
	cfg = alertDefaults(cfg)
	a := &alerts{bots: bots, log: b.log, now: b.cfg.Now, groups: map[string]agentcore.AlertGroup{}, locks: map[string]*groupLock{},
		seen:       map[string]*delivery{},
		deliveries: bucket{rate: cfg.Rate, burst: cfg.Burst, tokens: float64(cfg.Burst), refilled: b.cfg.Now()},
		refusals:   bucket{rate: cfg.AuthRate, burst: cfg.AuthBurst, tokens: float64(cfg.AuthBurst), refilled: b.cfg.Now()},
		perChan:    map[string]int{}, perRoute: map[string]int{},
		waiting: map[string][]pendingLook{}, looks: map[string]string{}, storms: map[string]*storm{},
		cards: map[string]agentcore.AlertCard{}}
	a.cfg.Store(&cfg)
	a.ackKeys = map[string]string{}
	for _, ab := range bots {
		ab.mu.Lock()
		ab.alerts = a
		ab.mu.Unlock()
	}
	for k, g := range cfg.Groups {
		a.groups[k] = g
		a.ackKeys[ackValue(k)] = k
		t, _ := ThreadOf(g.Session)
		if gb := bots[t.Platform]; gb != nil {
			gb.mu.Lock()
			gb.known[g.Session] = true
			gb.mu.Unlock()
		}
	}
	for k, c := range cfg.Cards {
		if _, ok := cfg.Groups[k]; !ok {
			a.cards[k] = c
		}
	}
	if cfg.Registerer != nil {
		a.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "thinbot_alerts_total",
			Help: "Alert deliveries and first looks by outcome (opened, update, duplicate, unauthorized, rate_limited, rejected, no_route, failed, investigation_started, investigation_queued, investigation_skipped)."},
			[]string{"outcome"})
		if err := cfg.Registerer.Register(a.counter); err != nil {
			return nil, fmt.Errorf("alerts: metrics: %w", err)
		}
	}
	now := b.cfg.Now()
	for _, d := range cfg.Deliveries {
		a.seen[d] = handled(now)
	}
	return &AlertReceiver{a}, nil
}

// CheckAlerts is NewAlertReceiver's check of cfg: a token of at least 16
// bytes, and every route's channel a configured channel of its platform
// (channel looks it up as Config.Channel does, by platform): a config
// reload checks its alert routes against its new channels before it puts
// either in force.
func CheckAlerts(cfg AlertsConfig, channel func(platform, id string) (Channel, bool)) error {
	if len(cfg.Token) < 16 {
		return errors.New("alerts: a bearer token of at least 16 bytes is required")
	}
	if _, ok := channel(cfg.Platform, ""); !ok {
		return fmt.Errorf("alerts: no bot for platform %q", cfg.Platform)
	}
	for _, r := range cfg.Routes {
		p := cmp.Or(r.Platform, cfg.Platform)
		if _, ok := channel(p, ""); !ok {
			return fmt.Errorf("alerts: route %q: no bot for platform %q", r.Name, p)
		}
		if _, ok := channel(p, r.Channel); !ok || r.Channel == "" || r.Channel == "*" {
			return fmt.Errorf("alerts: route %q: channel %q is not a configured channel", r.Name, r.Channel)
		}
	}
	return nil
}

// botChannels is CheckAlerts' lookup over bots' channels; an id ""
// asks whether the platform has a bot.
func botChannels(bots map[string]*Bot) func(platform, id string) (Channel, bool) {
	return func(platform, id string) (Channel, bool) {
		b := bots[platform]
		if b == nil {
			return Channel{}, false
		}
		if id == "" {
			return Channel{}, true
		}
		return b.cfg.Channel(id)
	}
}

// Reconfigure puts cfg's token, routes and limits (MaxBody, Rate, Burst,
// AuthRate, AuthBurst, ReadTimeout, MaxPerChannel, MaxQueued, DedupeWindow) in force
// for the deliveries that arrive after it; a delivery being handled
// finishes under the configuration it began with, and first looks under
// way keep their route's budgets (they still count against the limits).
// The alert groups and deliveries it knows stay known. cfg.Platform must
// be the receiver's; Groups, Deliveries, Cards and Registerer are ignored. It
// checks cfg as NewAlertReceiver does, against the bots' channels as they
// are now, and changes nothing when that fails. Safe to call while the
// receiver serves.
func (r *AlertReceiver) Reconfigure(cfg AlertsConfig) error {
	a := r.alerts
	if p := a.cfg.Load().Platform; cfg.Platform != p {
		return fmt.Errorf("alerts: platform %q: the receiver's is %q", cfg.Platform, p)
	}
	if err := CheckAlerts(cfg, botChannels(a.bots)); err != nil {
		return err
	}
	cfg = alertDefaults(cfg)
	cfg.Groups, cfg.Deliveries, cfg.Cards, cfg.Registerer = nil, nil, nil, nil
	a.mu.Lock()
	defer a.mu.Unlock()
	a.deliveries.resize(cfg.Rate, cfg.Burst)
	a.refusals.resize(cfg.AuthRate, cfg.AuthBurst)
	a.cfg.Store(&cfg)
	return nil
}

// alertDefaults is cfg with each route's platform and each zero limit
// filled in.
func alertDefaults(cfg AlertsConfig) AlertsConfig {
	routes := make([]AlertRoute, len(cfg.Routes))
	for i, r := range cfg.Routes {
		r.Platform = cmp.Or(r.Platform, cfg.Platform)
		routes[i] = r
	}
	cfg.Routes = routes
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 10
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 100
	}
	if cfg.AuthRate <= 0 {
		cfg.AuthRate = 1
	}
	if cfg.AuthBurst <= 0 {
		cfg.AuthBurst = 10
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	if cfg.MaxPerChannel <= 0 {
		cfg.MaxPerChannel = 2
	}
	switch {
	case cfg.MaxQueued == 0:
		cfg.MaxQueued = 20
	case cfg.MaxQueued < 0:
		cfg.MaxQueued = 0
	}
	if cfg.DedupeWindow <= 0 {
		cfg.DedupeWindow = 10 * time.Minute
	}
	return cfg
}

// ServeHTTP implements http.Handler.
func (a *alerts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cfg := a.cfg.Load()
	// The body must arrive within ReadTimeout: a trickled body would hold
	// a connection and a goroutine for as long as the sender likes. A
	// ResponseWriter that cannot (a test recorder) has no connection to
	// hold.
	_ = http.NewResponseController(w).SetReadDeadline(a.now().Add(cfg.ReadTimeout))
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !authorized(cfg, r.Header.Get("Authorization")) {
		a.refuse(w, r)
		return
	}
	a.mu.Lock()
	wait, ok := a.deliveries.take(a.now())
	a.mu.Unlock()
	if !ok {
		a.count("rate_limited")
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		http.Error(w, "too many alert deliveries", http.StatusTooManyRequests)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.MaxBody))
	if err != nil {
		a.count("rejected")
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			http.Error(w, "delivery too large", http.StatusRequestEntityTooLarge)
			return
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			http.Error(w, "the delivery's body did not arrive in time", http.StatusRequestTimeout)
			return
		}
		http.Error(w, "read error", http.StatusBadRequest)
		return
	}
	wh, err := ParseWebhook(body)
	if err != nil {
		a.count("rejected")
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	digest := DeliveryDigest(wh)
	for {
		d, mine := a.claim(cfg, digest)
		if mine {
			break
		}
		// The same delivery is being handled (a retry that overtook its
		// first try): its outcome decides. Answering "duplicate" before it
		// is handled would lose the alert if it then fails.
		a.mu.Lock()
		d.waiting++
		a.mu.Unlock()
		select {
		case <-d.done:
		case <-r.Context().Done():
			a.count("failed")
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the same delivery is being handled; retry later", http.StatusServiceUnavailable)
			return
		}
		if d.ok {
			a.count("duplicate")
			fmt.Fprintln(w, "duplicate delivery: already handled")
			return
		}
	}
	status, msg := a.deliver(r.Context(), cfg, wh, digest)
	a.settle(digest, status < 300)
	if status >= 300 {
		a.count("failed")
		http.Error(w, msg, status)
		return
	}
	fmt.Fprintln(w, msg)
}

// refuse answers a request with a bad or missing token: 401, or 429 once
// such requests come faster than AuthRate. Refusals are logged at most at
// that rate too.
func (a *alerts) refuse(w http.ResponseWriter, r *http.Request) {
	a.count("unauthorized")
	a.mu.Lock()
	wait, ok := a.refusals.take(a.now())
	suppressed := a.suppressed
	if ok {
		a.suppressed = 0
	} else {
		a.suppressed++
	}
	a.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		http.Error(w, "too many unauthorized requests", http.StatusTooManyRequests)
		return
	}
	a.log.Warn("alert delivery refused: bad or missing bearer token", "remote", r.RemoteAddr, "not_logged", suppressed)
	w.Header().Set("WWW-Authenticate", `Bearer realm="thinbot alerts"`)
	http.Error(w, "unauthorized", http.StatusUnauthorized)
}

// DeliveryDigest identifies a delivery by its content: the group key, the
// status and each alert's fingerprint, status, start and end, in
// fingerprint order. A retry of a delivery has the same digest however its
// JSON is spaced or ordered; a notification with any alert changed has
// another.
func DeliveryDigest(wh Webhook) string {
	type alert struct {
		Fingerprint, Status string
		StartsAt, EndsAt    time.Time
	}
	als := make([]alert, 0, len(wh.Alerts))
	for _, al := range wh.Alerts {
		als = append(als, alert{Fingerprint: al.Fingerprint, Status: al.Status, StartsAt: al.StartsAt.UTC(), EndsAt: al.EndsAt.UTC()})
	}
	slices.SortFunc(als, func(x, y alert) int {
		return cmp.Or(strings.Compare(x.Fingerprint, y.Fingerprint), strings.Compare(x.Status, y.Status),
			x.StartsAt.Compare(y.StartsAt), x.EndsAt.Compare(y.EndsAt))
	})
	js, _ := json.Marshal(struct {
		GroupKey, Status string
		Alerts           []alert
	}{wh.GroupKey, wh.Status, als}) // cannot fail: strings and times
	sum := sha256.Sum256(js)
	return hex.EncodeToString(sum[:])
}

// authorized compares the bearer token in constant time (over digests, so
// that the token's length does not leak either).
func authorized(cfg *AlertsConfig, h string) bool {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	want := sha256.Sum256(cfg.Token)
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// handled is a delivery handled at t.
func handled(t time.Time) *delivery {
	d := &delivery{done: make(chan struct{}), ok: true, at: t}
	close(d.done)
	return d
}

// claim marks a delivery as in flight and reports true, or returns the
// same delivery in flight or handled within the dedupe window.
func (a *alerts) claim(cfg *AlertsConfig, digest string) (*delivery, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if now.Sub(a.lastSweep) > time.Minute {
		for k, d := range a.seen {
			if d.ok && now.Sub(d.at) > cfg.DedupeWindow {
				delete(a.seen, k)
			}
		}
		a.lastSweep = now
	}
	if d, ok := a.seen[digest]; ok && (!d.ok || now.Sub(d.at) <= cfg.DedupeWindow) {
		return d, false
	}
	a.seen[digest] = &delivery{done: make(chan struct{})}
	return nil, true
}

// settle ends a claim: a handled delivery is remembered, a failed one is
// forgotten so that the notifier's retry is handled; either way, copies
// waiting for it go on.
func (a *alerts) settle(digest string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.seen[digest]
	if ok {
		d.ok, d.at = true, a.now()
	} else {
		delete(a.seen, digest)
	}
	close(d.done)
}

// lock serialises the deliveries of one group.
func (a *alerts) lock(key string) func() {
	a.mu.Lock()
	l := a.locks[key]
	if l == nil {
		l = &groupLock{}
		a.locks[key] = l
	}
	l.refs++
	a.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		a.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(a.locks, key)
		}
		a.mu.Unlock()
	}
}

// route returns the first route matching the group's labels (the common
// labels with the group labels, or the first alert's labels when there are
// no common ones).
func route(cfg *AlertsConfig, wh Webhook) (AlertRoute, bool) {
	labels := map[string]string{}
	if len(wh.CommonLabels) == 0 && len(wh.Alerts) > 0 {
		for k, v := range wh.Alerts[0].Labels {
			labels[k] = v
		}
	}
	for k, v := range wh.CommonLabels {
		labels[k] = v
	}
	for k, v := range wh.GroupLabels {
		labels[k] = v
	}
	for _, r := range cfg.Routes {
		ok := true
		for _, m := range r.Matchers {
			if !m.Matches(labels) {
				ok = false
				break
			}
		}
		if ok {
			return r, true
		}
	}
	return AlertRoute{}, false
}

// deliver handles one delivery and returns the HTTP status and message.
func (a *alerts) deliver(ctx context.Context, cfg *AlertsConfig, wh Webhook, digest string) (int, string) {
	rt, ok := route(cfg, wh)
	if !ok {
		a.count("no_route")
		a.log.Warn("alert group matches no route", "group", wh.GroupKey, "receiver", wh.Receiver)
		return http.StatusOK, "no route matches this alert group; nothing posted"
	}
	b := a.bots[rt.Platform]
	ch, ok := b.cfg.Channel(rt.Channel)
	if !ok || ch.Agent == nil {
		// A config reload took the route's channel away and has not put
		// the receiver's new routes in force yet: the retry finds them.
		a.log.Warn("alert route's channel is not configured", "group", wh.GroupKey, "route", rt.Name, "channel", rt.Channel)
		return http.StatusServiceUnavailable, "the route's channel is not configured; retry later"
	}
	unlock := a.lock(wh.GroupKey)
	defer unlock()
	a.mu.Lock()
	g, known := a.groups[wh.GroupKey]
	a.mu.Unlock()
	p := agentcore.AlertPayload{GroupKey: wh.GroupKey, Status: wh.Status, Receiver: wh.Receiver, Route: rt.Name,
		Delivery: digest, Truncated: wh.TruncatedAlerts, Alerts: records(wh), GroupLabels: wh.GroupLabels}
	now, loc := b.cfg.Now(), b.zone(ch)
	if !known {
		a.mu.Lock()
		a.ackKeys[ackValue(wh.GroupKey)] = wh.GroupKey // a press that races the record waits for it
		a.mu.Unlock()
		card := cardPost(agentcore.AlertGroup{}, wh, p, now, time.Time{}, loc)
		id, adopted, status, msg := a.postCard(ctx, b, ch, rt, wh, digest, card)
		if status != 0 {
			return status, msg
		}
		t := Thread{Platform: rt.Platform, Channel: rt.Channel, Root: id}
		p.PostID, p.Kind = id, "opened"
		ev, err := ch.Agent.NoteUnlocked(t.Key(), agentcore.EvAlert, "alert:"+rt.Name, p)
		if err != nil {
			b.log.Error("record alert", "group", wh.GroupKey, "conv", t.Key(), "err", err)
			b.post(ctx, t, Post{Text: "This alert could not be recorded in the audit chain, so I will not investigate it; operators can see the details in the log."})
			return http.StatusInternalServerError, "could not record the alert"
		}
		g = agentcore.AlertGroup{Session: t.Key(), PostID: id, Route: rt.Name, Status: wh.Status, Opened: ev.Time, StartsAt: earliest(p.Alerts), Last: p}
		a.mu.Lock()
		a.groups[wh.GroupKey] = g
		delete(a.cards, wh.GroupKey)
		a.mu.Unlock()
		if adopted {
			// The card shows the delivery that posted it; this one may
			// differ (a retry of it does not).
			b.update(ctx, t, id, card)
		}
		b.mu.Lock()
		b.known[t.Key()] = true
		b.mu.Unlock()
		b.showAlert(t, wh.Status)
		a.count("opened")
		b.log.Info("alert group opened a thread", "group", wh.GroupKey, "conv", t.Key(), "route", rt.Name, "status", wh.Status)
		if wh.Status == "firing" && rt.Investigate {
			a.investigate(ctx, cfg, t, ch, rt, wh)
		}
		a.stormChanged(ctx, rt, wh.GroupKey, true, false)
		return http.StatusOK, "opened a thread"
	}
	t, ok := ThreadOf(g.Session)
	if !ok {
		return http.StatusInternalServerError, "bad thread record"
	}
	p.PostID = g.PostID
	p.Kind = "update"
	if wh.Status == "resolved" {
		p.Kind = "resolved"
	}
	if _, err := ch.Agent.NoteUnlocked(t.Key(), agentcore.EvAlert, "alert:"+rt.Name, p); err != nil {
		b.log.Error("record alert", "group", wh.GroupKey, "conv", t.Key(), "err", err)
		return http.StatusInternalServerError, "could not record the alert"
	}
	starts := g.StartsAt
	if e := earliest(p.Alerts); !e.IsZero() && (starts.IsZero() || e.Before(starts)) {
		starts = e
	}
	if g.Status == "resolved" && wh.Status == "firing" {
		g.LookOffered = false // it fires again: investigate decides anew
	}
	b.update(ctx, t, g.PostID, cardPost(g, wh, p, now, starts, loc))
	b.post(ctx, t, Post{Text: alertLine(g, wh, p, now, starts, loc)})
	b.showAlert(t, wh.Status)
	a.count("update")
	refired := g.Status == "resolved" && wh.Status == "firing"
	g.Status, g.Last, g.StartsAt = wh.Status, p, starts
	a.mu.Lock()
	a.groups[wh.GroupKey] = g
	a.mu.Unlock()
	if refired && rt.Investigate {
		a.investigate(ctx, cfg, t, ch, rt, wh)
	}
	a.stormChanged(ctx, rt, wh.GroupKey, false, false)
	return http.StatusOK, "posted to the group's thread"
}

// cardSkew is how long before its EvAlertCard a card is looked for: the
// chat server's clock may be behind thinbot's (Mattermost stamps a post
// with its own clock, Slack's ts is Slack's).
const cardSkew = 2 * time.Minute

// postCard puts a new group's card into the chat and returns its post id.
// When the chain holds an EvAlertCard of the group (a delivery before this
// one was about to post it and its alert event "opened" was never
// committed) and the adapter is a PostFinder, the card is looked for by
// its mark and adopted if it is there. Otherwise a new card is posted: an
// adapter that can find it later gets its EvAlertCard committed first and
// the mark with it, so that nothing the chain did not know of reaches the
// chat and a card whose thread is not recorded is found again. status is
// 0, or the HTTP status to answer (with msg) when there is no card: a
// finder that fails is not taken for "not there", which would post a
// second card.
func (a *alerts) postCard(ctx context.Context, b *Bot, ch Channel, rt AlertRoute, wh Webhook, digest string, card Post) (id string, adopted bool, status int, msg string) {
	pf, _ := b.cfg.Adapter.(PostFinder)
	a.mu.Lock()
	prev, pending := a.cards[wh.GroupKey]
	a.mu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if pf != nil && pending && prev.Platform == rt.Platform && prev.Channel == rt.Channel {
		id, err := pf.FindPost(pctx, rt.Channel, prev.Mark, prev.At.Add(-cardSkew))
		if err != nil {
			b.cfg.Metrics.error("chat")
			b.log.Error("look for the alert card posted before", "group", wh.GroupKey, "channel", rt.Channel, "err", err)
			return "", false, http.StatusServiceUnavailable, "could not look for the group's card in the chat; retry later"
		}
		if id != "" {
			b.log.Info("alert card found in the chat and adopted", "group", wh.GroupKey, "channel", rt.Channel, "post", id)
			return id, true, 0, ""
		}
	}
	if pf != nil {
		cp := agentcore.AlertCardPayload{GroupKey: wh.GroupKey, Route: rt.Name, Platform: rt.Platform, Channel: rt.Channel,
			Mark: rand.Text(), Delivery: digest}
		ev, err := ch.Agent.NoteUnlocked(agentcore.AlertCardSession, agentcore.EvAlertCard, "alert:"+rt.Name, cp)
		if err != nil {
			b.log.Error("record alert card", "group", wh.GroupKey, "err", err)
			return "", false, http.StatusInternalServerError, "could not record the alert"
		}
		a.mu.Lock()
		a.cards[wh.GroupKey] = agentcore.AlertCard{AlertCardPayload: cp, At: ev.Time}
		a.mu.Unlock()
		card.Mark = cp.Mark
	}
	id, err := b.cfg.Adapter.Post(pctx, Thread{Platform: rt.Platform, Channel: rt.Channel}, card)
	if err != nil || id == "" {
		b.cfg.Metrics.error("chat")
		b.log.Error("post alert card", "group", wh.GroupKey, "channel", rt.Channel, "err", err)
		return "", false, http.StatusServiceUnavailable, "could not post to the chat; retry later"
	}
	return id, false, 0, ""
}

func records(wh Webhook) []agentcore.AlertRecord {
	out := make([]agentcore.AlertRecord, 0, len(wh.Alerts))
	for _, al := range wh.Alerts {
		r := agentcore.AlertRecord{Status: al.Status, Labels: al.Labels, Annotations: al.Annotations, StartsAt: al.StartsAt,
			GeneratorURL: al.GeneratorURL, Fingerprint: al.Fingerprint}
		if al.EndsAt.After(al.StartsAt) {
			r.EndsAt = al.EndsAt
		}
		out = append(out, r)
	}
	return out
}

func earliest(rs []agentcore.AlertRecord) time.Time {
	var t time.Time
	for _, r := range rs {
		if !r.StartsAt.IsZero() && r.StartsAt.Year() > 1 && (t.IsZero() || r.StartsAt.Before(t)) {
			t = r.StartsAt
		}
	}
	return t
}

func latest(rs []agentcore.AlertRecord) time.Time {
	var t time.Time
	for _, r := range rs {
		if r.EndsAt.After(t) {
			t = r.EndsAt
		}
	}
	return t
}

// alertLine is the short message a later notification posts in the thread;
// times are in loc.
func alertLine(g agentcore.AlertGroup, wh Webhook, p agentcore.AlertPayload, now, starts time.Time, loc *time.Location) string {
	firing := 0
	for _, r := range p.Alerts {
		if r.Status == "firing" {
			firing++
		}
	}
	switch {
	case wh.Status == "resolved":
		end := latest(p.Alerts)
		if end.IsZero() {
			end = now
		}
		return fmt.Sprintf("✅ **Resolved** at %s: fired for %s.", textfmt.Clock(end, loc, "2006-01-02 15:04:05"), roundDur(end.Sub(starts)))
	case g.Status == "resolved":
		if c := alertChanges(g.Last.Alerts, p.Alerts); c != "" {
			return fmt.Sprintf("🔥 **Firing again**: %d alert(s): %s.", firing, c)
		}
		return fmt.Sprintf("🔥 **Firing again**: %d alert(s).", firing)
	}
	changes := alertChanges(g.Last.Alerts, p.Alerts)
	if changes == "" {
		return fmt.Sprintf("🔁 Still firing (repeat notification): %d alert(s), for %s so far.", firing, roundDur(now.Sub(starts)))
	}
	return fmt.Sprintf("🔥 Update: %s; %d alert(s) firing.", changes, firing)
}

func roundDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// alertCard is the thread's root post: status, severity, summary, labels,
// links and start. Every alert field is quoted in a code span (backticks
// replaced, one line, bounded), so it cannot format, link or mention;
// links are shown only for http(s) URLs, percent-encoded. Times are in loc.
func alertCard(wh Webhook, p agentcore.AlertPayload, now, starts time.Time, loc *time.Location) string {
	labels := map[string]string{}
	for k, v := range wh.CommonLabels {
		labels[k] = v
	}
	if len(labels) == 0 && len(wh.Alerts) > 0 {
		labels = wh.Alerts[0].Labels
	}
	ann := wh.CommonAnnotations
	if len(ann) == 0 && len(wh.Alerts) > 0 {
		ann = wh.Alerts[0].Annotations
	}
	if starts.IsZero() {
		starts = earliest(p.Alerts)
	}
	var b strings.Builder
	icon, state := "🔥", "FIRING"
	if wh.Status == "resolved" {
		icon, state = "✅", "RESOLVED"
	}
	fmt.Fprintf(&b, "%s **%s** %s", icon, state, textfmt.CodeSpan(labels["alertname"], 80))
	if s := labels["severity"]; s != "" {
		fmt.Fprintf(&b, " · severity %s", textfmt.CodeSpan(s, 40))
	}
	firing := 0
	for _, r := range p.Alerts {
		if r.Status == "firing" {
			firing++
		}
	}
	fmt.Fprintf(&b, " · %d of %d alert(s) firing", firing, len(p.Alerts))
	if p.Truncated > 0 {
		fmt.Fprintf(&b, " (+%d not sent)", p.Truncated)
	}
	b.WriteString("\n")
	if s := ann["summary"]; s != "" {
		fmt.Fprintf(&b, "**Summary:** %s\n", textfmt.CodeSpan(s, 300))
	} else if s := ann["description"]; s != "" {
		fmt.Fprintf(&b, "**Description:** %s\n", textfmt.CodeSpan(s, 300))
	}
	var ls []string
	for _, k := range sortedKeys(labels) {
		if k == "alertname" || k == "severity" {
			continue
		}
		ls = append(ls, textfmt.CodeSpan(k+"="+labels[k], 100))
		if len(ls) == 12 {
			ls = append(ls, "…")
			break
		}
	}
	if len(ls) > 0 {
		fmt.Fprintf(&b, "**Labels:** %s\n", strings.Join(ls, " "))
	}
	b.WriteString(alertList(p.Alerts, wh.CommonAnnotations["summary"]))
	if !starts.IsZero() {
		fmt.Fprintf(&b, "**Started:** %s", textfmt.Clock(starts, loc, "2006-01-02 15:04:05"))
		if wh.Status == "resolved" {
			end := latest(p.Alerts)
			if end.IsZero() {
				end = now
			}
			fmt.Fprintf(&b, " · **Resolved:** %s after %s", textfmt.Clock(end, loc, "2006-01-02 15:04:05"), roundDur(end.Sub(starts)))
		}
		b.WriteString("\n")
	}
	var links []string
	source := ""
	if len(wh.Alerts) > 0 {
		source = wh.Alerts[0].GeneratorURL
	}
	for _, l := range []struct{ name, url string }{{"runbook", ann["runbook_url"]}, {"source", source}, {"dashboard", ann["dashboard_url"]}} {
		if s := cardLink(l.name, l.url); s != "" {
			links = append(links, s)
		}
	}
	if len(links) > 0 {
		fmt.Fprintf(&b, "**Links:** %s\n", strings.Join(links, " · "))
	}
	b.WriteString("_Alert text is shown as sent by the alerting system; this thread is the incident's session._")
	return b.String()
}

// cardLink is a link of the alert card: "[name](url)" for an http(s) URL
// (textfmt.LinkURL), any other text shown as text in a code span, so that it
// neither links nor formats ("" when empty).
func cardLink(name, raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	if u := textfmt.LinkURL(raw); u != "" {
		return "[" + name + "](" + u + ")"
	}
	return name + " " + textfmt.CodeSpan(raw, 200)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
