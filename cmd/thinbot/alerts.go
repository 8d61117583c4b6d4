package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/web"
	"github.com/thinbot/thinbot/store"
)

// alertsConfig is the alerts: section: the Alertmanager/Grafana webhook
// receiver on the daemon's listener (deploy/alerts.md).
type alertsConfig struct {
	// TokenFile holds the bearer token notifiers send; required.
	TokenFile string `yaml:"token_file" secret:"file"`
	// Path is the receiver's URL path; "" means /alerts.
	Path string `yaml:"path"`
	// MaxBodyBytes bounds a delivery; 0 means 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Rate and Burst bound deliveries per second; 0 means 10 and 100.
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
	// MaxPerChannel bounds concurrent first looks per channel; 0 means 2.
	MaxPerChannel int `yaml:"max_investigations_per_channel"`
	// MaxQueued bounds the first looks waiting per channel for one to
	// end; 0 means 20, -1 none (a look beyond the limits is skipped).
	MaxQueued int `yaml:"max_queued_first_looks"`
	// DedupeWindow is how long a delivery is remembered; "" means 10m.
	DedupeWindow duration           `yaml:"dedupe_window"`
	Routes       []alertRouteConfig `yaml:"routes"`
	// Alertmanager is where /silence creates silences; unset, there is
	// no /silence.
	Alertmanager alertmanagerConfig `yaml:"alertmanager"`
}

// alertmanagerConfig is alerts.alertmanager: Alertmanager's API and the
// credentials thinbot sends it, from files the commands never see.
type alertmanagerConfig struct {
	// Datasource, instead of url and the credentials, names an entry of
	// type alertmanager of the datasources: section whose URL and
	// credentials files to use (not its read-only transport: a silence
	// is a write).
	Datasource      string `yaml:"datasource"`
	URL             string `yaml:"url"`
	BearerTokenFile string `yaml:"bearer_token_file" secret:"file"`
	BasicAuth       struct {
		Username     string `yaml:"username"`
		PasswordFile string `yaml:"password_file" secret:"file"`
	} `yaml:"basic_auth"`
}

// source applies a Datasource reference: am with the entry's URL and
// credentials files; ok is false when there is no such entry of type
// alertmanager.
func (am alertmanagerConfig) source(sources []datasourceConfig) (alertmanagerConfig, bool) {
	if am.Datasource == "" {
		return am, true
	}
	for _, ds := range sources {
		if ds.Name == am.Datasource && ds.Type == "alertmanager" {
			am.URL, am.BearerTokenFile = ds.URL, ds.BearerTokenFile
			am.BasicAuth.Username, am.BasicAuth.PasswordFile = ds.Username, ds.PasswordFile
			return am, true
		}
	}
	return am, false
}

// checkSource reports a Datasource reference's problems through bad.
func (am alertmanagerConfig) checkSource(bad func(string, ...any), sources []datasourceConfig) {
	if am.Datasource == "" {
		return
	}
	if am.URL != "" || am.BearerTokenFile != "" || am.BasicAuth.Username != "" || am.BasicAuth.PasswordFile != "" {
		bad("alerts.alertmanager: datasource or url and credentials, not both")
	}
	if _, ok := am.source(sources); !ok {
		bad("alerts.alertmanager.datasource %q: no datasources entry of type alertmanager has that name", am.Datasource)
	}
	for _, ds := range sources {
		if ds.Name == am.Datasource && (ds.TLS.CAFile != "" || ds.TLS.CertFile != "" || ds.TLS.InsecureSkipVerify) {
			bad("alerts.alertmanager.datasource %q: its TLS settings are not used for silences; give alerts.alertmanager a url instead", am.Datasource)
		}
	}
}

// check reports the section's problems through bad.
func (am alertmanagerConfig) check(bad func(string, ...any)) {
	if am.Datasource != "" {
		return // checkSource, and the datasources section's own check
	}
	if am.URL == "" {
		if am.BearerTokenFile != "" || am.BasicAuth.PasswordFile != "" {
			bad("alerts.alertmanager: credentials without a url")
		}
		return
	}
	if u, err := url.Parse(am.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("alerts.alertmanager.url %q: want Alertmanager's base URL, like http://127.0.0.1:9093", am.URL)
	}
	if am.BearerTokenFile != "" && am.BasicAuth.PasswordFile != "" {
		bad("alerts.alertmanager: bearer_token_file or basic_auth, not both")
	}
	if (am.BasicAuth.Username == "") != (am.BasicAuth.PasswordFile == "") {
		bad("alerts.alertmanager.basic_auth: username and password_file go together")
	}
	for key, f := range map[string]string{"bearer_token_file": am.BearerTokenFile, "basic_auth.password_file": am.BasicAuth.PasswordFile} {
		if f == "" {
			continue
		}
		if err := checkSecretFile(f); err != nil {
			bad("alerts.alertmanager.%s: %v", key, err)
		}
	}
}

// client is the bot's Alertmanager of the section, its secrets read.
func (am alertmanagerConfig) client() (bot.Alertmanager, error) {
	out := bot.Alertmanager{URL: am.URL, BasicUser: am.BasicAuth.Username}
	tok, err := readSecret(am.BearerTokenFile)
	if err != nil {
		return out, fmt.Errorf("alerts.alertmanager.bearer_token_file: %w", err)
	}
	pw, err := readSecret(am.BasicAuth.PasswordFile)
	if err != nil {
		return out, fmt.Errorf("alerts.alertmanager.basic_auth.password_file: %w", err)
	}
	if tok != "" {
		out.BearerToken = []byte(tok)
	}
	if pw != "" {
		out.BasicPassword = []byte(pw)
	}
	return out, nil
}

type alertRouteConfig struct {
	Name string `yaml:"name"`
	// Matchers are Alertmanager-style: severity="critical", team=~"db|ops".
	Matchers []string `yaml:"matchers"`
	// Channel is a configured channel's id or its name on the chat
	// platform (resolved at start, so a channel configured by id may be
	// routed to by name); with platform web, "" (the console).
	Channel string `yaml:"channel"`
	// Platform "web" opens the route's threads in the web console
	// instead of the chat platform (it needs web.users).
	Platform string `yaml:"platform"`
	// Investigate starts a read-only first look; unset means true.
	Investigate       *bool    `yaml:"investigate"`
	MaxSteps          int      `yaml:"max_steps"`
	MaxWall           duration `yaml:"max_wall"`
	MaxInvestigations int      `yaml:"max_investigations"`
	// Acknowledgers are user ids who may press the card's Acknowledge
	// besides whoever may approve in the route's channel.
	Acknowledgers []string `yaml:"acknowledgers"`
}

func (a *alertsConfig) configured() bool { return a.TokenFile != "" || len(a.Routes) > 0 }

// check reports the section's problems through bad.
func (a *alertsConfig) check(bad func(string, ...any), channels []channelConfig, platform string, w webConfig) {
	if !a.configured() {
		return
	}
	if a.TokenFile == "" {
		bad("alerts.token_file is empty: the receiver is not served without a bearer token")
	} else if err := checkSecretFile(a.TokenFile); err != nil {
		bad("alerts.token_file: %v", err)
	} else if tok, err := readSecret(a.TokenFile); err == nil && len(tok) < 16 {
		bad("alerts.token_file: the token is %d bytes; use at least 16 random bytes (openssl rand -hex 32)", len(tok))
	}
	if a.Path != "" && !strings.HasPrefix(a.Path, "/") {
		bad("alerts.path %q: want a path starting with /", a.Path)
	}
	if a.MaxBodyBytes < 0 || a.Rate < 0 || a.Burst < 0 || a.MaxPerChannel < 0 {
		bad("alerts: max_body_bytes, rate, burst and max_investigations_per_channel must not be negative")
	}
	if a.MaxQueued < -1 {
		bad("alerts.max_queued_first_looks %d: want a number of first looks, 0 for the default (20) or -1 for no queue", a.MaxQueued)
	}
	a.DedupeWindow.check(bad, "alerts.dedupe_window", "10m")
	a.Alertmanager.check(bad)
	if len(a.Routes) == 0 {
		bad("alerts.routes is empty: say which channel alerts go to")
	}
	names := map[string]bool{}
	for i, r := range a.Routes {
		where := fmt.Sprintf("alerts.routes[%d]", i)
		if r.Name == "" {
			bad("%s.name is empty", where)
		} else if names[r.Name] {
			bad("%s.name %q is used twice", where, r.Name)
		}
		names[r.Name] = true
		for _, m := range r.Matchers {
			if _, err := bot.ParseMatcher(m); err != nil {
				bad("%s.matchers: %v", where, err)
			}
		}
		for _, u := range r.Acknowledgers {
			p := platform
			if r.Platform == "web" {
				p = "web"
			}
			if why := notUserID(p, u); why != "" {
				bad("%s.acknowledgers: %q is not %s; acknowledgers are matched by id", where, u, why)
			}
		}
		switch cmp.Or(r.Platform, platform) {
		case platform:
			if platform == web.Platform {
				if r.Channel != "" && r.Channel != "console" {
					bad("%s.channel %q: with platform web a route has no channel (its threads open in the console)", where, r.Channel)
				}
				continue
			}
		case web.Platform:
			if w.Listen == "" || len(w.Users) == 0 {
				bad("%s.platform web: the web console is not served (web.listen and web.users)", where)
			}
			if r.Channel != "" && r.Channel != "console" {
				bad("%s.channel %q: a web route has no channel (its threads open in the console)", where, r.Channel)
			}
			continue
		default:
			bad("%s.platform %q: want %s or web", where, r.Platform, platform)
			continue
		}
		// A channel's id, or a name: a name is resolved on the chat
		// platform at start (receiverConfig), and the id it names must
		// then be a configured channel's, however that channel is
		// configured (by id or by name). Only the platform knows which id
		// a name has, so a name no channel is configured by is checked
		// there.
		if r.Channel == "" || r.Channel == "*" {
			bad("%s.channel %q: give a configured channel's id or name", where, r.Channel)
		}
		r.MaxWall.check(bad, where+".max_wall", "5m")
		if r.MaxSteps < 0 || r.MaxInvestigations < 0 {
			bad("%s: max_steps and max_investigations must not be negative", where)
		}
	}
}

// serveAlerts mounts the alert receiver on mux when the config has an
// alerts section, and returns it (nil without one): a config reload
// reconfigures it (reloadAlerts).
func serveAlerts(ctx context.Context, c *daemonConfig, db *store.DB, bots map[string]*bot.Bot, adapter bot.Adapter, mux *http.ServeMux,
	reg prometheus.Registerer, logger *slog.Logger) (*bot.AlertReceiver, error) {
	a := c.Alerts
	if !a.configured() {
		return nil, nil
	}
	cfg, err := receiverConfig(ctx, c, bots[web.Platform] != nil, adapter)
	if err != nil {
		return nil, err
	}
	cfg.Groups, cfg.Deliveries, err = agentcore.AlertGroups(db, time.Now().Add(-cfg.DedupeWindow))
	if err != nil {
		return nil, err
	}
	if cfg.Cards, err = agentcore.AlertCards(db); err != nil {
		return nil, err
	}
	cfg.Registerer = reg
	for p, b := range bots {
		if b == nil {
			delete(bots, p)
		}
	}
	h, err := bot.NewAlertReceiver(cfg, bots)
	if err != nil {
		return nil, err
	}
	path := a.Path
	if path == "" {
		path = "/alerts"
	}
	mux.Handle(path, h)
	logger.Info("alert receiver enabled", "path", path, "routes", len(cfg.Routes), "known_groups", len(cfg.Groups))
	return h, nil
}

// receiverConfig is the receiver's configuration from c's alerts section:
// the token read from its file (again at each config reload: that is how
// a rotated token takes effect), and each route's channel resolved, a
// channel id of c's channels as it is, any other through the adapter (a
// channel's name). webServed says whether the web console serves threads.
func receiverConfig(ctx context.Context, c *daemonConfig, webServed bool, adapter bot.Adapter) (bot.AlertsConfig, error) {
	a := c.Alerts
	token, err := readSecret(a.TokenFile)
	if err != nil {
		return bot.AlertsConfig{}, fmt.Errorf("alerts token: %w", err)
	}
	ids := map[string]string{}
	for _, ch := range c.Channels {
		if ch.ID != "" {
			ids[ch.ID] = ch.ID
		}
	}
	cfg := bot.AlertsConfig{Token: []byte(token), Platform: c.Platform, MaxBody: a.MaxBodyBytes, Rate: a.Rate, Burst: a.Burst,
		MaxPerChannel: a.MaxPerChannel, MaxQueued: a.MaxQueued, DedupeWindow: a.DedupeWindow.or(10 * time.Minute)}
	am, _ := a.Alertmanager.source(c.Datasources) // config check refused a missing entry
	if cfg.Alertmanager, err = am.client(); err != nil {
		return bot.AlertsConfig{}, err
	}
	for _, r := range a.Routes {
		rt := bot.AlertRoute{Name: r.Name, Channel: ids[r.Channel], Investigate: r.Investigate == nil || *r.Investigate,
			MaxSteps: r.MaxSteps, MaxInvestigations: r.MaxInvestigations, Acknowledgers: r.Acknowledgers}
		if cmp.Or(r.Platform, c.Platform) == web.Platform {
			rt.Platform, rt.Channel = web.Platform, "console"
			if !webServed {
				return bot.AlertsConfig{}, fmt.Errorf("alerts route %q: the web console is not served", r.Name)
			}
		}
		if rt.Channel == "" {
			res, ok := adapter.(bot.ChannelResolver)
			if !ok {
				return bot.AlertsConfig{}, fmt.Errorf("alerts route %q: this chat platform cannot resolve channel names: give the channel's id", r.Name)
			}
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			rt.Channel, err = res.ChannelID(rctx, r.Channel)
			cancel()
			if err != nil {
				return bot.AlertsConfig{}, fmt.Errorf("alerts route %q: channel %q: %w", r.Name, r.Channel, err)
			}
		}
		rt.MaxWall = r.MaxWall.Duration
		for _, m := range r.Matchers {
			mt, err := bot.ParseMatcher(m)
			if err != nil {
				return bot.AlertsConfig{}, fmt.Errorf("alerts route %q: %w", r.Name, err)
			}
			rt.Matchers = append(rt.Matchers, mt)
		}
		cfg.Routes = append(cfg.Routes, rt)
	}
	return cfg, nil
}
