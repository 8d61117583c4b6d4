package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/web"
)

// A config reload (SIGHUP, or an authenticated POST /-/reload, as
// Prometheus and Alertmanager do it) reads the config file again and puts
// in force what can change while the daemon runs: the channels and their
// workspaces, approvers and token budgets (the routes), users, allow_bots,
// mention_in_thread, approval_timeout, approval_reminders, the policy file, the instruction
// files, the skills (dirs, lock and the skill folders themselves), the
// run budgets, env_allow, command_path, the schedules and the alert
// routes with the receiver's token and limits. Everything else
// needs a restart (reloadable says why); a reload that changes any of it
// is refused as a whole, naming the keys, and the running config stays in
// force. So does a reload that fails: a file that does not parse or check,
// a policy that does not load, a channel the chat server does not know.
//
// An applied reload is an EvConfigReloaded event in the chain (who, what
// changed, the file's SHA-256), recorded before the new config takes
// effect: a reload the chain cannot record is not applied. A reload asked
// for and not applied (refused or failed) is an EvConfigReloadRefused
// event, with the error: the chain then says who tried to change the
// config and when, not only who did. A POST /-/reload without a right
// token is not recorded, only logged: anyone who reaches the listener can
// send one, as often as they like, and the chain must not grow at their
// pace (the log line names the remote address). Runs under way,
// and the approval requests they opened, keep the configuration they
// started with; the messages that arrive after the reload get the new one.

// reloadable reports whether a change of the config file's top-level key
// can take effect while the daemon runs. The others are built once at
// start:
//   - model: the client and its connections, and /readyz's ping;
//   - platform, mattermost, slack: the chat connection and its credentials;
//   - listen, state_dir: the listener and the open store;
//   - sandbox, limits, readonly, secret_files, systemd_unit,
//     reload_token_file: the kernel sandbox is started with the paths it
//     hides (every secret file) and its limits;
//   - max_concurrent_runs: the run slots; timezone: every bot's clock;
//   - log_level: the logger; web: the console's listener, logins and bot;
//   - fleet: its SSH connections;
//   - mcp_servers: the servers' processes and the tools they offer, fixed
//     at start so that the model's tool list (a stable prompt prefix) does
//     not change under running sessions, and their env_file and
//     headers_file, which the kernel sandbox hides from the start on;
//   - mcp: the MCP endpoint's route on the listener and its channel, and
//     its tokens_file, hidden by the sandbox (the file itself is read
//     again whenever it changes).
//
// Within alerts (reloadable), these changes need a restart (alertsKey),
// and so does any change of alerts.alertmanager but its url and
// basic_auth.username (its files are secrets, like the token file):
// the section added or removed (the receiver is mounted on the listener at
// start, or not), alerts.path (the listener's route) and alerts.token_file
// (the kernel sandbox hides the secret files it was started with; one
// named later would be open to every command). The token file itself is
// read again at every reload: a rotated token takes effect then.
//
// The datasources section reloads whole (the sources are built anew),
// except that a credentials file the daemon did not start with needs a
// restart (newSecretFiles): the sandbox hides only the files it was
// started with.
//
// A key not listed here needs a restart, so that a key added later is
// never half applied by accident.
func reloadable(key string) bool { return slices.Contains(reloadableKeys(), key) }

// reloadableKeys are the top-level keys reloadable accepts.
func reloadableKeys() []string {
	return []string{"channels", "users", "allow_bots", "mention_in_thread", "approval_timeout", "approval_reminders",
		"policy_file", "instructions_file", "skills_dirs", "skills_lock",
		"budgets", "env_allow", "command_path", "schedules", "alerts", "datasources"}
}

// alertsKey reports whether a changed key of the alerts section (a path
// of changedKeys) can take effect while the daemon runs; see reloadable.
func alertsKey(key string) bool {
	if strings.HasPrefix(key, "alerts.alertmanager") {
		// Its url and user name may change; its files are secrets the
		// sandbox hides from the start, as alerts.token_file.
		return key == "alerts.alertmanager.url" || key == "alerts.alertmanager.basic_auth.username"
	}
	return key != "alerts" && key != "alerts.path" && key != "alerts.token_file"
}

// reloadState is the daemon's record of its config: the file's bytes and
// hash in force, and the outcome of the last reload.
type reloadState struct {
	e    *env
	path string

	// mu makes reloads one at a time and guards what follows.
	mu  sync.Mutex
	c   *daemonConfig
	raw map[string]any // the file as YAML values, to compare keys
	sum string         // SHA-256 of the file's bytes, hex
	fp  map[string]string
	// took is how long the last reload took, for its log line.
	took time.Duration

	// The metrics: whether the last reload succeeded, and when the config
	// in force was loaded (start or reload), as Prometheus has them.
	ok, at prometheus.Gauge

	sched scheduleRunner
}

// start reads the config file's bytes as the daemon starts with it.
func (r *reloadState) start(e *env, path string) error {
	r.e, r.path = e, path
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if r.raw, err = rawConfig(data); err != nil {
		return err
	}
	r.sum = sha256Hex(data)
	r.sched = scheduleRunner{next: make(chan *bot.Scheduler), done: make(chan struct{})}
	r.ok = prometheus.NewGauge(prometheus.GaugeOpts{Name: "thinbot_config_last_reload_successful",
		Help: "1 when the last config reload (SIGHUP, POST /-/reload) succeeded or none was tried, 0 when it failed or was refused."})
	r.at = prometheus.NewGauge(prometheus.GaugeOpts{Name: "thinbot_config_last_reload_success_timestamp_seconds",
		Help: "When the config in force was loaded (start or last successful reload), in seconds since the epoch."})
	r.ok.Set(1)
	r.at.SetToCurrentTime()
	return nil
}

// running records the config and routes the daemon runs with.
func (r *reloadState) running(c *daemonConfig, rt *routes) {
	r.c, r.fp = c, fingerprints(c, rt)
}

func (r *reloadState) register(reg prometheus.Registerer) { reg.MustRegister(r.ok, r.at) }

// errNeedsRestart is the error of a reload refused because it changes keys
// that need a restart.
type errNeedsRestart struct{ keys []string }

func (e *errNeedsRestart) Error() string {
	return "these keys cannot change without a restart: " + strings.Join(e.keys, ", ") + "; nothing was reloaded"
}

// reloadConfig reads the config file again and puts it in force, or
// returns why not (the running config then stays in force). by is who
// asked ("SIGHUP", or a token's name), actor how the chain names them.
func (d *daemon) reloadConfig(ctx context.Context, by, actor string) (agentcore.ConfigReload, error) {
	r := &d.reload
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	rec, err := d.tryReload(ctx, by, actor)
	r.took = time.Since(start)
	if err != nil {
		r.ok.Set(0)
		rec.Error = err.Error()
		if _, rerr := agentcore.RecordConfigReloadRefused(d.db, actor, rec); rerr != nil {
			d.logger.Error("record the refused config reload", "by", by, "err", rerr)
		}
		return rec, err
	}
	r.ok.Set(1)
	r.at.SetToCurrentTime()
	return rec, nil
}

// tryReload is reloadConfig with r.mu held.
func (d *daemon) tryReload(ctx context.Context, by, actor string) (agentcore.ConfigReload, error) {
	r, logger := &d.reload, d.logger
	rec := agentcore.ConfigReload{By: by, File: r.path, Previous: r.sum}
	data, err := os.ReadFile(r.path)
	if err != nil {
		return rec, fmt.Errorf("config: %w", err)
	}
	rec.SHA256 = sha256Hex(data)
	raw, err := rawConfig(data)
	if err != nil {
		return rec, err
	}
	c, err := loadConfig(r.path, r.e.getenv)
	if err != nil {
		return rec, err
	}
	if again, err := os.ReadFile(r.path); err != nil || !bytes.Equal(again, data) {
		return rec, errors.New("the config file changed while it was read: reload again")
	}
	keys := changedKeys(r.raw, raw, "")
	var restart []string
	for _, k := range keys {
		top, _, _ := strings.Cut(k, ".")
		top, _, _ = strings.Cut(top, "[")
		rec.Changed = append(rec.Changed, top)
		if !reloadable(top) || (top == "alerts" && !alertsKey(k)) {
			restart = append(restart, k)
		}
	}
	rec.Changed = slices.Compact(rec.Changed) // keys are sorted
	restart = append(restart, d.sandboxBinds(c)...)
	restart = append(restart, newSecretFiles(r.c, c, r.path)...)
	if len(restart) > 0 {
		return rec, &errNeedsRestart{keys: restart}
	}

	// Build everything the new config needs before anything changes.
	base, _, err := agentBase(r.e, c, r.path, d.db, d.model, logger)
	if err != nil {
		return rec, err
	}
	base.cfg.Exec = d.sbx.exec(base.cfg.Exec)
	base.cfg.Fleet = d.fleet
	base.cfg.MCP = d.mcp
	rt, err := buildAgents(r.e, c, base, logger)
	if err != nil {
		return rec, err
	}
	if err := resolveChannels(ctx, d.adapter, rt.named, rt.channels); err != nil {
		return rec, err
	}
	rt.zones(c)
	if c.Web.Listen != "" && len(c.Web.Users) > 0 && rt.agents[base.abs(c.Web.Workspace)] == nil {
		return rec, fmt.Errorf("web.workspace %s is not the workspace of a channel", c.Web.Workspace)
	}
	if err := bot.CheckSchedules(scheduleList(c), rt.channel); err != nil {
		return rec, err
	}
	alerts, err := d.nextAlerts(ctx, c, rt)
	if err != nil {
		return rec, err
	}
	fp := fingerprints(c, rt)
	rec.Changed = append(rec.Changed, changedSections(r.fp, fp)...)
	slices.Sort(rec.Changed)
	rec.Changed = slices.Compact(rec.Changed)

	// Recorded, then in force.
	if _, err := agentcore.RecordConfigReload(d.db, actor, rec); err != nil {
		return rec, err
	}
	d.routes.Store(rt)
	if d.bot != nil {
		d.bot.SetAccess(bot.Access{Users: c.Users, AllowBots: c.AllowBots, MentionInThread: c.MentionInThread, ApprovalTimeout: c.ApprovalTimeout.Duration,
			Reminders: c.ApprovalReminders.reminders(true)})
	}
	if d.webBot != nil {
		d.webBot.SetAccess(bot.Access{ApprovalTimeout: c.ApprovalTimeout.Duration, Reminders: c.ApprovalReminders.reminders(c.Platform == web.Platform)}) // the console's users are web's roles
	}
	if d.alerts != nil {
		// Checked above against the new channels, now in force: this
		// cannot fail.
		if err := d.alerts.Reconfigure(alerts); err != nil {
			logger.Error("alert routes after a reload", "err", err)
		}
	}
	if !reflect.DeepEqual(r.raw["schedules"], raw["schedules"]) {
		// Checked above against the new channels: this cannot fail. A
		// schedule's channel is looked up at each of its runs, so only
		// a change of the schedules replaces them.
		if sched, err := newScheduler(c, d.chat()); err != nil {
			logger.Error("schedules after a reload", "err", err)
		} else {
			r.sched.replace(sched)
		}
	}
	r.c, r.raw, r.sum, r.fp = c, raw, rec.SHA256, fp
	if err := rt.noteHidden(logger); err != nil {
		logger.Error("record hidden skills after a reload", "err", err)
	}
	return rec, nil
}

// nextAlerts builds the alert receiver's configuration from c (its token
// file read again, its routes' channel names resolved) and checks it
// against the channels of rt, before either is in force. Without a
// receiver it returns nothing (adding one needs a restart: alertsKey).
func (d *daemon) nextAlerts(ctx context.Context, c *daemonConfig, rt *routes) (bot.AlertsConfig, error) {
	if d.alerts == nil {
		return bot.AlertsConfig{}, nil
	}
	cfg, err := receiverConfig(ctx, c, d.webBot != nil, d.adapter)
	if err != nil {
		return cfg, err
	}
	channel := func(platform, id string) (bot.Channel, bool) {
		switch {
		case platform == c.Platform && id == "":
			return bot.Channel{}, true
		case platform == c.Platform:
			return rt.channel(id)
		}
		// The web console's one channel (receiverConfig names it).
		return bot.Channel{}, platform == web.Platform && d.webBot != nil && (id == "" || id == "console")
	}
	return cfg, bot.CheckAlerts(cfg, channel)
}

// sandboxBinds names the workspaces and skill dirs of c that an enforced
// sandbox cannot show to read-only commands without a restart: those below
// /tmp or /var/tmp are bound into each command's private tmp at start.
func (d *daemon) sandboxBinds(c *daemonConfig) []string {
	if d.sbx == nil || d.sbx.sb == nil {
		return nil
	}
	before := d.sandboxDirs(d.reload.c)
	var out []string
	for i, dir := range d.sandboxDirs(c) {
		if slices.Contains(before, dir) {
			continue
		}
		for _, t := range []string{"/tmp", "/var/tmp"} {
			if dir == t || strings.HasPrefix(dir, t+"/") {
				what := fmt.Sprintf("skills_dirs (%s)", dir)
				if i < len(c.Channels) {
					what = fmt.Sprintf("channels[%d].workspace (%s, below %s: the sandbox binds such folders at start)", i, dir, t)
				}
				out = append(out, what)
			}
		}
	}
	return out
}

// sandboxDirs are the folders startSandboxFor gives the sandbox: the
// channels' workspaces (in order), then the skill dirs, absolute.
func (d *daemon) sandboxDirs(c *daemonConfig) []string {
	var ws []string
	for _, cc := range c.Channels {
		a, _ := filepath.Abs(cc.Workspace)
		ws = append(ws, a)
	}
	return c.sandboxConfig(nil, ws).Workspaces
}

// reloadOnHangup reloads the config on every SIGHUP until ctx is done; the
// returned function waits for it to stop.
func (d *daemon) reloadOnHangup(ctx context.Context) func() {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.hup:
				d.logReload(d.reloadConfig(ctx, "SIGHUP", "system"))
			}
		}
	})
	return wg.Wait
}

// logReload logs a reload's outcome and returns the line an HTTP caller
// reads.
func (d *daemon) logReload(rec agentcore.ConfigReload, err error) string {
	if err != nil {
		d.logger.Error("config reload failed: the running config stays in force", "by", rec.By, "file", rec.File, "err", err, "took_ms", d.reload.tookMS())
		return "config reload failed, the running config stays in force: " + err.Error()
	}
	changed := "nothing"
	if len(rec.Changed) > 0 {
		changed = strings.Join(rec.Changed, ", ")
	}
	d.logger.Info("config reloaded", "by", rec.By, "file", rec.File, "sha256", rec.SHA256, "changed", rec.Changed, "took_ms", d.reload.tookMS())
	return fmt.Sprintf("config reloaded: sha256 %s; changed: %s; runs under way keep the config they started with", rec.SHA256, changed)
}

// serveReload is POST /-/reload: with a bearer token of reload_token_file
// ("name token" lines, read at every request), it reloads the config and
// answers 200 with what changed, 409 when keys need a restart, 500 when the
// reload failed; without reload_token_file 403, with no or a wrong token
// 401. Nothing changes on any answer but 200.
func (d *daemon) serveReload(w http.ResponseWriter, req *http.Request) {
	file := d.reload.tokenFile()
	if file == "" {
		http.Error(w, "reload over HTTP is off: set reload_token_file in the config (or send the daemon SIGHUP)", http.StatusForbidden)
		return
	}
	name, err := reloadCaller(file, req.Header.Get("Authorization"))
	if err != nil {
		d.logger.Warn("config reload refused", "remote", req.RemoteAddr, "why", err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="thinbot reload"`)
		http.Error(w, "unauthorised: "+err.Error(), http.StatusUnauthorized)
		return
	}
	rec, err := d.reloadConfig(req.Context(), name, "user:"+name)
	line := d.logReload(rec, err)
	var nr *errNeedsRestart
	switch {
	case errors.As(err, &nr):
		http.Error(w, line, http.StatusConflict)
	case err != nil:
		http.Error(w, line, http.StatusInternalServerError)
	default:
		fmt.Fprintln(w, line)
	}
}

// tookMS is how long the last reload took, in milliseconds.
func (r *reloadState) tookMS() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.took.Milliseconds()
}

// tokenFile is the running config's reload_token_file.
func (r *reloadState) tokenFile() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.ReloadTokenFile
}

// reloadCaller returns the name whose token the Authorization header
// carries, or why it carries none of file's.
func reloadCaller(file, header string) (string, error) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" {
		return "", errors.New("send Authorization: Bearer TOKEN, a token of reload_token_file")
	}
	tokens, err := readTokenFile("reload_token_file", file, currentUser())
	if err != nil {
		return "", err
	}
	name := ""
	for t, n := range tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(tok)) == 1 {
			name = n
		}
	}
	if name == "" {
		return "", errors.New("the token is not one of reload_token_file")
	}
	return name, nil
}

// checkReload checks reload_token_file for a daemon running as who.
func (c *daemonConfig) checkReload(bad func(string, ...any), who daemonUser) {
	if c.ReloadTokenFile != "" {
		if _, err := readTokenFile("reload_token_file", c.ReloadTokenFile, who); err != nil {
			bad("%v", err)
		}
	}
}

// scheduleRunner runs the daemon's schedules; a reload replaces them.
type scheduleRunner struct {
	next chan *bot.Scheduler // taken by run's loop
	done chan struct{}       // closed when run's loop has ended
}

// runSchedules runs sched until ctx is done, and in its place each
// scheduler replace hands over (whose checks under way run to their end
// under ctx). The returned function waits until every one has stopped.
func (d *daemon) runSchedules(ctx context.Context, sched *bot.Scheduler) func() {
	s := &d.reload.sched
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(s.done)
		var running sync.WaitGroup
		defer running.Wait()
		stop := make(chan struct{})
		start := func(sched *bot.Scheduler) {
			stop = make(chan struct{})
			st := stop
			running.Go(func() { sched.RunUntil(ctx, st) })
		}
		start(sched)
		for {
			select {
			case <-ctx.Done():
				return
			case next := <-s.next:
				close(stop)
				start(next)
			}
		}
	})
	return wg.Wait
}

// stopped says that runSchedules will not run (the daemon failed to
// start them).
func (s *scheduleRunner) stopped() { close(s.done) }

// replace puts sched in place of the running schedules, once they run;
// after they stopped (or never ran) it does nothing.
func (s *scheduleRunner) replace(sched *bot.Scheduler) {
	select {
	case s.next <- sched:
	case <-s.done:
	}
}

// scheduleList is c's schedules as bot.Schedule values.
func scheduleList(c *daemonConfig) []bot.Schedule {
	var list []bot.Schedule
	for _, s := range c.Schedules {
		list = append(list, bot.Schedule{Name: s.Name, Spec: s.Cron, Channel: s.Channel, Platform: c.Platform,
			Command: s.Command, Question: s.Question, MaxSteps: s.MaxSteps, MaxWall: s.MaxWall.Duration})
	}
	return list
}

// rawConfig decodes a config file's bytes as plain YAML values, comments
// and formatting gone, to compare one version's keys with another's.
func rawConfig(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&m); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %w", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, nil
}

// changedKeys lists the keys that differ between two decoded configs,
// as paths ("listen", "mattermost.url", "channels[2]", "channels"
// when the list's length changed), sorted.
func changedKeys(old, cur any, where string) []string {
	if reflect.DeepEqual(old, cur) {
		return nil
	}
	om, ok1 := old.(map[string]any)
	cm, ok2 := cur.(map[string]any)
	if ok1 && ok2 {
		var out []string
		keys := slices.Sorted(maps.Keys(om))
		for k := range cm {
			if _, ok := om[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub := k
			if where != "" {
				sub = where + "." + k
			}
			out = append(out, changedKeys(om[k], cm[k], sub)...)
		}
		return out
	}
	ol, ok1 := old.([]any)
	cl, ok2 := cur.([]any)
	if ok1 && ok2 && len(ol) == len(cl) {
		var out []string
		for i := range ol {
			out = append(out, changedKeys(ol[i], cl[i], fmt.Sprintf("%s[%d]", where, i))...)
		}
		return out
	}
	return []string{where}
}

// fingerprints hash what the config's files say, by section and file:
// the policy file's rules, the instruction files' text, and the skills
// each workspace loaded (their files) or hid. A reload names a section
// ("policy", "instructions", "skills") when a file or workspace it had
// before says something else now; one added or removed shows as the key
// that names it (policy_file, channels, skills_dirs).
func fingerprints(c *daemonConfig, rt *routes) map[string]string {
	fp := map[string]string{}
	file := func(section, path string) {
		if path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				b = []byte(err.Error())
			}
			fp[section+"\x00"+path] = sha256Hex(b)
		}
	}
	file("policy", c.PolicyFile)
	// The token's hash, kept in memory only: a rotated token shows as a
	// change of the section.
	file("alerts", c.Alerts.TokenFile)
	file("instructions", c.InstructionsFile)
	for _, cc := range c.Channels {
		file("instructions", cc.InstructionsFile)
	}
	for ws, set := range rt.sets {
		h := sha256.New()
		for _, s := range set.Skills {
			sum, err := s.Digest()
			if err != nil {
				sum = err.Error()
			}
			fmt.Fprintf(h, "%s\x00%s\x00%s\x00", s.Name, s.Dir, sum)
		}
		for _, f := range set.Filtered {
			fmt.Fprintf(h, "hidden\x00%s\x00%s\x00", f.Dir, f.Reason)
		}
		fp["skills\x00"+ws] = hex.EncodeToString(h.Sum(nil))
	}
	return fp
}

// changedSections names the sections whose fingerprints differ between
// old and cur, for the keys both have.
func changedSections(old, cur map[string]string) []string {
	var out []string
	for k, v := range cur {
		if w, ok := old[k]; ok && w != v {
			section, _, _ := strings.Cut(k, "\x00")
			out = append(out, section)
		}
	}
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
