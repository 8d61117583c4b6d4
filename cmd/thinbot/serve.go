package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/mcp"
	"github.com/thinbot/thinbot/agentcore/openai"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/mattermost"
	"github.com/thinbot/thinbot/bot/slack"
	"github.com/thinbot/thinbot/bot/web"
	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/replica"
)

// chatAdapter is what serve needs of an adapter beyond bot.Adapter.
type chatAdapter interface {
	bot.Adapter
	Connected() bool
}

func cmdServe(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "serve")
	path := fs.String("config", "", "config `file` (YAML); see deploy/thinbot.example.yaml. Without one, serve the web console")
	listen := fs.String("listen", defaultConsoleListen, "web console `address` (without --config)")
	stateDir := fs.String("state-dir", localDir, "web console state `dir` (without --config)")
	if err := fs.parse(args); err != nil {
		return err
	}
	// SIGHUP reloads the config (reload.go); caught from here on, so that
	// one sent while the daemon starts waits for it instead of killing it.
	// The console without a config has none to reload: it says so
	// (serveConsole), and goes on.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if *path == "" {
		return serveConsole(ctx, e, *listen, *stateDir, hup)
	}
	e.logJSON = true // the daemon's log lines are JSON, its final error too
	c, err := loadConfig(*path, e.getenv)
	if err != nil {
		return fmt.Errorf("%w\n(run 'thinbot config check --config %s' for the full list)", err, *path)
	}
	level, _ := logLevel(c.LogLevel) // checked by loadConfig
	logger := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	if w := listenWarning(c.Listen); w != "" {
		logger.Warn(w)
	}
	defer tuneGC(e.getenv)()
	if dir := e.getenv(profileEnv); dir != "" {
		stop, err := startProfiles(dir, e.getenv(traceEnv) == "1")
		if err != nil {
			return err
		}
		logger.Info("profiling the daemon", "dir", dir)
		defer func() {
			if err := stop(); err != nil {
				logger.Error("write profiles", "dir", dir, "err", err)
			}
		}()
	}
	d := &daemon{c: c, logger: logger, hup: hup}
	err = d.open(ctx, e, *path)
	if err == nil {
		runCtx, stopLeading := d.leading(ctx)
		err = errors.Join(d.run(runCtx), stopLeading())
	}
	if errors.Is(err, errStopped) {
		err = nil
	}
	if cerr := d.close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return err
}

// daemon is thinbot serve --config: open builds it from the config (the
// store, the sandbox, the fleet, the agents, the chat adapter and its bot),
// run serves until ctx is done, close releases what open acquired, also
// after a failed open.
type daemon struct {
	c      *daemonConfig
	logger *slog.Logger

	db      *store.DB
	sbx     *sandboxSetup
	fleet   *fleet.Fleet
	mcp     *mcp.Set
	model   *openai.Client
	adapter chatAdapter
	mux     *http.ServeMux
	reg     *prometheus.Registry
	metrics *bot.Metrics // the chat bot's and the console's
	bot     *bot.Bot
	webBot  *bot.Bot // the web console's, if it serves one
	// alerts is the alert receiver, if the config has an alerts section;
	// a config reload reconfigures it.
	alerts *bot.AlertReceiver
	// What the chain left open, and the sessions and message ids the bots
	// start with (recoverChain).
	unfinished     agentcore.Unfinished
	sessions, seen []string
	// routes are the channels and their agents in force; a config reload
	// swaps them (reload.go).
	routes atomic.Pointer[routes]
	// hup delivers SIGHUP; reload is the state of config reloads.
	hup    <-chan os.Signal
	reload reloadState

	// node is the cluster's raft node (cluster.go); nil alone.
	node *replica.Node
	// leaderSince is when this node became the cluster's leader;
	// catchUpFrom the time of the chain's last event then.
	leaderSince, catchUpFrom time.Time
}

// open builds the daemon from d.c; configPath is the config file's path.
// It contacts the chat server (resolveChannels) within ctx.
func (d *daemon) open(ctx context.Context, e *env, configPath string) error {
	c, logger := d.c, d.logger
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	// python3's version, for skills that need one: asked once for every
	// workspace, while the store opens (which may rebuild its index).
	py := &skills.PythonProbe{}
	var pyWG sync.WaitGroup
	pyWG.Go(func() { py.Version() })
	defer pyWG.Wait()
	var err error
	if d.db, err = d.openStore(); err != nil {
		return err
	}
	if err := d.reload.start(e, configPath); err != nil {
		return err
	}

	// Agents: one per workspace, and the channels that use them.
	base, model, err := agentBase(e, c, configPath, d.db, nil, logger)
	if err != nil {
		return err
	}
	base.python = py.Version
	d.model = model
	// No child of the daemon may start while the sandbox moves the
	// daemon's processes into a leaf group (cgroup v2): one left behind
	// would keep the group from handing controllers to command groups.
	pyWG.Wait()
	d.sbx = startSandboxFor(ctx, c, base.protected, base.workspaces, logger)
	base.cfg.Exec = d.sbx.exec(base.cfg.Exec)
	if d.fleet, err = serveFleet(c, base.abs(configPath)); err != nil {
		return err
	}
	base.cfg.Fleet = d.fleet
	// MCP servers: started now, in the sandbox, so that the model's tool
	// list is fixed before the first run.
	if d.mcp, err = c.mcpServers(logger); err != nil {
		return err
	}
	startMCP(ctx, d.mcp, d.sbx)
	base.cfg.MCP = d.mcp
	rt, err := buildAgents(e, c, base, logger)
	if err != nil {
		return err
	}
	if err := rt.noteHidden(logger); err != nil {
		return err
	}
	// A cluster's node goes on only once it leads (cluster.go).
	if err := d.follow(ctx); err != nil {
		return err
	}
	if d.unfinished, d.sessions, d.seen, err = d.recoverChain(); err != nil {
		return err
	}
	if err := d.recordLeader(); err != nil {
		return err
	}

	// The chat adapter and its bot; with platform web, none: the web
	// console's bot (run) is the only one.
	d.mux = http.NewServeMux()
	if c.Platform != web.Platform {
		if d.adapter, err = newAdapter(c, d.db, d.mux, logger, d.clusterChat()); err != nil {
			return err
		}
		if err := resolveChannels(ctx, d.adapter, rt.named, rt.channels); err != nil {
			return err
		}
	}
	rt.zones(c)
	d.routes.Store(rt)
	d.reload.running(c, rt)
	d.reg = newRegistry(d.db, d.adapter)
	d.metrics = bot.NewMetrics(d.reg)
	if d.adapter == nil {
		return nil
	}
	d.bot, err = bot.New(bot.Config{
		Adapter: d.adapter,
		Channel: func(id string) (bot.Channel, bool) { return d.routes.Load().channel(id) },
		Users:   c.Users, AllowBots: c.AllowBots, MentionInThread: c.MentionInThread,
		MaxConcurrent: c.MaxConcurrent, ApprovalTimeout: c.ApprovalTimeout.Duration, Reminders: c.ApprovalReminders.reminders(true), Location: c.Timezone.loc,
		Sessions: d.sessions, Seen: d.seen, Known: agentcore.KnownSession(d.db), Metrics: d.metrics, Logger: logger,
		Console: c.Web.PublicOrigin,
	})
	return err
}

// run serves until ctx is done: the web section's console, restart
// recovery in the threads, the alert receiver, the HTTP listener (the
// adapter's callbacks, health, readiness, metrics), the schedules and the
// bot. It returns once everything it started has stopped.
func (d *daemon) run(ctx context.Context) error {
	c, logger, b := d.c, d.logger, d.bot
	// The web section's console and audit viewer; they stop with ctx.
	webCtx, stopWeb := context.WithCancel(ctx)
	defer stopWeb()
	agents := func() map[string]*agentcore.Agent { return d.routes.Load().agents }
	zoneOf := func(session string) *time.Location { return d.routes.Load().zoneOf(session) }
	loginKey, err := d.consoleLoginKey()
	if err != nil {
		return err
	}
	unfinished, waitWeb, err := serveWeb(webCtx, c.Web, c.Web.budgets(c.Channels), agents, d.unfinished, zoneOf, bot.Config{MaxConcurrent: c.MaxConcurrent,
		ApprovalTimeout: c.ApprovalTimeout.Duration, Reminders: c.ApprovalReminders.reminders(c.Platform == web.Platform), Location: c.Timezone.loc, Sessions: d.sessions, Seen: d.seen, Known: agentcore.KnownSession(d.db),
		Metrics: d.metrics},
		d.db, c.StateDir, loginKey, logger, &d.webBot)
	if err != nil {
		return err
	}
	defer func() { stopWeb(); waitWeb() }()
	bots := map[string]*bot.Bot{web.Platform: d.webBot}
	if b != nil {
		b.Recover(ctx, unfinished)
		bots[c.Platform] = b
	}
	if d.alerts, err = serveAlerts(ctx, c, d.db, bots, d.adapter, d.mux, d.reg, logger); err != nil {
		return err
	}

	if err := serveMCP(ctx, c, map[string]*bot.Bot{c.Platform: b, web.Platform: d.webBot}, d.adapter, d.mux, logger); err != nil {
		return err
	}

	// The HTTP server: the adapter's callbacks, health, readiness, metrics.
	healthz(d.mux)
	ready := &readiness{adapter: d.adapter, db: d.db, model: d.model, stateDir: c.StateDir, sandbox: d.sbx}
	d.mux.HandleFunc("GET /readyz", ready.serve)
	d.reg.MustRegister(modelUpGauge(ready))
	d.mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	d.mux.HandleFunc("POST /-/reload", d.serveReload)
	d.mountCluster(d.mux)
	d.reload.register(d.reg)
	// It stays up until the bot has stopped.
	httpCtx, stopHTTP := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHTTP()
	addr, waitHTTP, err := listenAndServe(httpCtx, c.Listen, d.mux, logger)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logger.Info("thinbot serving", "sandbox", d.sbx.summary, "platform", c.Platform, "listen", addr.String(), "channels", len(c.Channels),
		"recovered_approvals", len(unfinished.Approvals), "interrupted_runs", len(unfinished.Runs))
	waitHead := logChainHead(httpCtx, d.db, logger)
	sched, err := newScheduler(c, d.chat())
	if err != nil {
		d.reload.sched.stopped()
		stopHTTP()
		waitHead()
		waitHTTP()
		return err
	}
	waitSched := d.runSchedules(ctx, sched)
	waitReloads := d.reloadOnHangup(ctx)
	var runErr error
	if b != nil {
		runErr = b.Run(ctx)
	} else {
		<-ctx.Done() // the console's bot stops with it (serveWeb)
	}
	waitReloads()
	waitSched()
	stopHTTP()
	waitHead()
	waitHTTP()
	seq, hash := chainHead(d.db)
	logger.Info("thinbot stopped", "last_seq", seq, "head_hash", hash)
	return runErr
}

// chat is the bot of the config's platform: the chat platform's, or with
// platform web the console's.
func (d *daemon) chat() *bot.Bot {
	if d.bot != nil {
		return d.bot
	}
	return d.webBot
}

// close releases what open acquired, in reverse order: the fleet's
// connections, the sandbox's helpers, the store.
func (d *daemon) close() error {
	var errs []error
	if d.fleet != nil {
		errs = append(errs, d.fleet.Close())
	}
	if d.mcp != nil {
		errs = append(errs, d.mcp.Close())
	}
	if d.sbx != nil {
		d.sbx.close()
	}
	errs = append(errs, d.closeNode())
	if d.db != nil {
		errs = append(errs, d.db.Close())
	}
	return errors.Join(errs...)
}

// recoverChain closes what a previous process left open in the chain
// (agentcore.Recover) and lists the handled message ids a bot starts with.
// The sessions it knows are looked up as threads speak
// (agentcore.KnownSession), not listed: sessions is nil.
func recoverChain(db *store.DB) (u agentcore.Unfinished, sessions, seen []string, err error) {
	if u, err = agentcore.Recover(db); err != nil {
		return u, nil, nil, err
	}
	seen, err = agentcore.SeenMessages(db)
	return u, nil, seen, err
}

// daemonBase is what every Agent of the daemon shares, and what the
// sandbox must hide and bind.
type daemonBase struct {
	cfg agentcore.Config // without Skills
	// protected are the bot's own files: the state dir, the config and
	// key files, the fleet's SSH keys.
	protected  []string
	workspaces []string
	abs        func(string) string
	lock       skills.Lock
	// python is python3's version for every workspace's skills (one
	// skills.PythonProbe); nil means each Load probes on its own.
	python func() (major, minor int, err error)
}

// agentBase builds the model client (unless model is one already, as on a
// config reload) and the Agent configuration the daemon's agents share
// (all but the skills and the sandbox's exec).
func agentBase(e *env, c *daemonConfig, configPath string, db *store.DB, model *openai.Client, logger *slog.Logger) (daemonBase, *openai.Client, error) {
	apiKey := e.getenv("AGENT_API_KEY")
	if c.Model.APIKeyFile != "" {
		var err error
		if apiKey, err = readSecret(c.Model.APIKeyFile); err != nil {
			return daemonBase{}, nil, fmt.Errorf("model api key: %w", err)
		}
	}
	retries := 0 // the client's default
	if c.Model.MaxRetries != nil {
		retries = *c.Model.MaxRetries
		if retries == 0 {
			retries = -1 // openai.Config: negative means none
		}
	}
	if model == nil {
		var err error
		model, err = openai.New(openai.Config{BaseURL: c.Model.BaseURL, Model: c.Model.Model, APIKey: apiKey,
			Timeout: c.Model.Timeout.Duration, MaxRetries: retries, IdleConns: max(c.MaxConcurrent, 16), FeedReasoning: c.Model.FeedReasoning, Logger: logger})
		if err != nil {
			return daemonBase{}, nil, err
		}
	}
	policy, err := loadPolicy(c.PolicyFile)
	if err != nil {
		return daemonBase{}, nil, err
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	protected := c.protectedPaths(configPath)
	policy = policy.WithProtected(protected...)
	var workspaces []string
	for _, cc := range c.Channels {
		workspaces = append(workspaces, abs(cc.Workspace))
	}
	// Every credential thinbot holds is scrubbed from command output.
	secrets := append([]string{apiKey}, c.secretValues()...)
	global := ""
	if c.InstructionsFile != "" {
		global = readText(c.InstructionsFile)
	}
	compactPrompt := ""
	if c.Model.CompactPromptFile != "" {
		compactPrompt = readText(c.Model.CompactPromptFile)
	}
	lock, err := readSkillsLock(c.SkillsLock)
	if err != nil {
		return daemonBase{}, nil, err
	}
	sources, err := c.datasources()
	if err != nil {
		return daemonBase{}, nil, err
	}
	return daemonBase{
		cfg: agentcore.Config{
			Store: db, Model: model, Policy: policy, GlobalInstructions: global, CompactPrompt: compactPrompt,
			Secrets: secrets, Datasources: sources,
			TextProtocol: c.Model.TextProtocol, ContextWindow: c.Model.ContextWindow, CompactAt: c.Model.CompactAt,
			Exec: agentcore.ExecConfig{Timeout: c.Budgets.CommandTimeout.Duration, Environ: os.Environ(), AllowEnv: c.EnvAllow, Path: c.CommandPath,
				// Chat attaches long outputs whole, up to its limit.
				CaptureLimit: bot.MaxAttachment},
			Budgets: agentcore.Budgets{MaxSteps: c.Budgets.MaxSteps, MaxModelCalls: c.Budgets.MaxModelCalls,
				MaxWall: c.Budgets.MaxWall.Duration, MaxToolErrors: c.Budgets.MaxToolErrors},
			Logger: logger,
		},
		protected: protected, workspaces: workspaces, abs: abs, lock: lock,
	}, model, nil
}

// routes are the daemon's channels and the agents that serve them, as
// built from one config: what a config reload replaces as a whole.
type routes struct {
	// channels are by id ("*" for every channel not listed) once
	// resolveChannels added those in named.
	channels map[string]bot.Channel
	named    []namedChannel
	// agents and their skill sets are by workspace.
	agents map[string]*agentcore.Agent
	sets   map[string]skills.Set
	// zoneOf is the time zone of a session's timeline (sessionZones); set
	// by zones.
	zoneOf func(session string) *time.Location
}

// channel is bot.Config.Channel over rt.
func (rt *routes) channel(id string) (bot.Channel, bool) {
	if ch, ok := rt.channels[id]; ok {
		return ch, true
	}
	ch, ok := rt.channels["*"]
	return ch, ok
}

// zones sets rt.zoneOf from the channels' time zones, once resolveChannels
// has run.
func (rt *routes) zones(c *daemonConfig) {
	zones := map[string]*time.Location{}
	for id, ch := range rt.channels {
		zones[id] = ch.Location
	}
	rt.zoneOf = sessionZones(c.Platform, zones, c.Timezone.loc)
}

// noteHidden logs and records (in system:skills) the skills each agent
// hides and why.
func (rt *routes) noteHidden(logger *slog.Logger) error {
	for _, ws := range slices.Sorted(maps.Keys(rt.agents)) {
		for _, f := range rt.sets[ws].Filtered {
			logger.Warn("skill hidden", "skill", f.Name, "dir", f.Dir, "reason", f.Reason)
			if _, err := rt.agents[ws].Note("system:skills", agentcore.EvSkillFiltered, "system", f); err != nil {
				return err
			}
		}
	}
	return nil
}

// buildAgents makes one Agent per workspace (its skills are the configured
// dirs, then the workspace's ./skills) and the channels that use them:
// by id in channels, by name in named (resolved once the adapter exists).
// It records nothing: noteHidden does, once the routes are in force.
func buildAgents(e *env, c *daemonConfig, base daemonBase, logger *slog.Logger) (*routes, error) {
	rt := &routes{channels: map[string]bot.Channel{}, agents: map[string]*agentcore.Agent{}, sets: map[string]skills.Set{}}
	for _, cc := range c.Channels {
		ws := base.abs(cc.Workspace)
		ag := rt.agents[ws]
		if ag == nil {
			dirs := append(append([]string(nil), c.SkillsDirs...), filepath.Join(ws, "skills"))
			set := skills.Load(dirs, skills.Options{Probe: skills.Probe{Getenv: e.getenv, Python: base.python, UID: -1}, Lock: base.lock, Logger: logger})
			cfg := base.cfg
			cfg.Skills = set
			var err error
			if ag, err = agentcore.New(cfg); err != nil {
				return nil, err
			}
			rt.agents[ws], rt.sets[ws] = ag, set
		}
		ch := bot.Channel{Agent: ag, Workspace: ws, Approvers: cc.Approvers, AnyMember: cc.AnyMember,
			TwoPerson: cc.TwoPerson, AllowAll: cc.AllowAll, FleetGroups: cc.FleetGroups, Location: cc.Timezone.loc,
			Tokens: cc.Tokens.budgets()}
		if cc.InstructionsFile != "" {
			ch.Instructions = readText(cc.InstructionsFile)
		}
		if cc.Name != "" {
			rt.named = append(rt.named, namedChannel{name: cc.Name, ch: ch})
			continue
		}
		rt.channels[cc.ID] = ch
	}
	return rt, nil
}

// newRegistry is the daemon's Prometheus registry: Go and process
// collectors, the chain's length, the store's syncs and commits and the chat
// connection.
func newRegistry(db *store.DB, adapter chatAdapter) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "thinbot_chain_events",
			Help: "Events in the chain (its head's sequence number)."}, func() float64 { return float64(db.LastSeq()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "thinbot_store_syncs_total",
			Help: "Durable commits (syncs of the audit journal) since start; about one per command run."}, func() float64 { return float64(db.Syncs()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "thinbot_store_commits_total",
			Help: "Batches of events committed since start, synced or not (each one bbolt transaction)."}, func() float64 { return float64(db.Commits()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "thinbot_build_info",
			Help:        "Always 1; its labels say which thinbot runs.",
			ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}}, func() float64 { return 1 }))
	if adapter == nil { // platform web: no chat connection
		return reg
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "thinbot_chat_connected",
		Help: "1 while the chat connection (WebSocket, Socket Mode) is up, else 0."}, func() float64 {
		if adapter.Connected() {
			return 1
		}
		return 0
	}))
	return reg
}

// logChainHead writes the chain head to the operator log every 10 minutes
// until ctx is done: a log shipped elsewhere then anchors the chain, so
// that even a rewrite of the whole chain (which verifies on its own) is
// caught. The returned function waits for it to stop.
func logChainHead(ctx context.Context, db *store.DB, logger *slog.Logger) func() {
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				seq, hash := chainHead(db)
				logger.Info("chain head", "seq", seq, "hash", hash)
			case <-ctx.Done():
				return
			}
		}
	})
	return wg.Wait
}

func readText(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// chatConns bounds the connections to the chat server's REST API: more
// concurrent posts wait for a free one instead of each dialling its own.
// The server takes a channel's posts one at a time anyway, and every extra
// connection costs both sides a handshake, goroutines and buffers at the
// worst moment: when a burst of runs answers at once. In the 200-thread
// load test (max_concurrent_runs 256, 2 cores) 32 instead of no bound took
// the p99 of model→answer from 29-63 to 20-38 ms and the p99 added latency
// from 63-91 to 56-79 ms (8 runs each, interleaved).
const chatConns = 32

// chatHTTPClient is the client of a chat adapter's REST API (30 s per
// request, as the adapter's own default). http.DefaultTransport keeps only
// two idle connections per host, so the posts of concurrent runs closed
// their connections after use and dialled new ones; this one keeps up to
// chatConns open.
func chatHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxConnsPerHost = chatConns
	t.MaxIdleConnsPerHost = chatConns
	t.MaxIdleConns = max(t.MaxIdleConns, chatConns)
	return &http.Client{Timeout: 30 * time.Second, Transport: t}
}

// newAdapter builds the configured chat adapter and mounts its HTTP
// handlers on mux.
func newAdapter(c *daemonConfig, db *store.DB, mux *http.ServeMux, logger *slog.Logger, cl clusterChat) (chatAdapter, error) {
	switch c.Platform {
	case "mattermost":
		token, err := readSecret(c.Mattermost.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("mattermost token: %w", err)
		}
		secret, err := actionSecret(filepath.Join(c.StateDir, "action.key"))
		if c.Cluster.configured() {
			secret, err = clusterActionKey(c.Cluster.ActionKeyFile)
		}
		if err != nil {
			return nil, err
		}
		since := cl.since
		if n := db.LastSeq(); n > 0 && since.IsZero() {
			for ev, err := range db.All(n) {
				if err == nil {
					since = ev.Time
				}
			}
		}
		a, err := mattermost.New(mattermost.Config{URL: c.Mattermost.URL, Token: token, CallbackURL: c.Mattermost.CallbackURL,
			ActionSecret: secret, Since: since, Logger: logger, HTTPClient: cl.client(chatHTTPClient())})
		if err != nil {
			return nil, err
		}
		u, _ := url.Parse(c.Mattermost.CallbackURL)
		p := u.Path
		if p == "" {
			p = "/"
		}
		mux.Handle("POST "+p, a.CallbackHandler())
		return a, nil
	case "slack":
		botToken, err := readSecret(c.Slack.BotTokenFile)
		if err != nil {
			return nil, fmt.Errorf("slack bot token: %w", err)
		}
		appToken, err := readSecret(c.Slack.AppTokenFile)
		if err != nil {
			return nil, fmt.Errorf("slack app token: %w", err)
		}
		signing, err := readSecret(c.Slack.SigningSecretFile)
		if err != nil {
			return nil, fmt.Errorf("slack signing secret: %w", err)
		}
		a, err := slack.New(slack.Config{BotToken: botToken, AppToken: appToken, SigningSecret: signing,
			Mode: c.Slack.Mode, APIURL: c.Slack.APIURL, Logger: logger, HTTPClient: cl.slackClient()})
		if err != nil {
			return nil, err
		}
		if c.Slack.Mode == "http" {
			mux.Handle("/slack/", a.HTTPHandler())
		}
		return a, nil
	}
	return nil, fmt.Errorf("platform %q: want mattermost or slack", c.Platform)
}

// actionSecret reads the HMAC key for button callbacks, creating it (32
// random bytes, mode 0600) on first start so that buttons survive restarts.
func actionSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("action key: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("action key: %w", err)
	}
	return b, nil
}

// Linux constants the syscall package does not name: statfs's read-only
// mount flag and access(2)'s write check.
const (
	stRdonly    = 0x1
	accessWrite = 0x2
)

// readiness answers /readyz: chat connected, store writable (and its
// journal in place), sandbox working; the model's state is a detail.
type readiness struct {
	adapter  chatAdapter
	db       *store.DB
	model    *openai.Client
	stateDir string
	sandbox  *sandboxSetup

	mu       sync.Mutex
	checked  time.Time
	modelErr error
}

func (r *readiness) serve(w http.ResponseWriter, req *http.Request) {
	var problems []string
	if r.adapter != nil && !r.adapter.Connected() {
		problems = append(problems, "chat: not connected")
	}
	if p := r.sandbox.problem(req.Context()); p != "" {
		problems = append(problems, p)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(r.stateDir, &st); err != nil {
		problems = append(problems, "store: "+err.Error())
	} else if st.Bavail*uint64(st.Bsize) < 16<<20 {
		problems = append(problems, "store: less than 16 MiB free on the state disk")
	} else if st.Flags&stRdonly != 0 {
		problems = append(problems, "store: the state disk is mounted read-only")
	}
	if err := syscall.Access(r.db.Path(), accessWrite); err != nil {
		problems = append(problems, "store: "+r.db.Path()+" is not writable: "+err.Error())
	}
	if err := r.db.Check(); err != nil {
		problems = append(problems, err.Error())
	}
	// The model is not a readiness condition: skill commands, approvals,
	// alerts' cards and the audit tools work without it. Its state is a
	// detail here and the thinbot_model_up metric.
	modelErr := r.modelState(req.Context())
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, p := range problems {
			fmt.Fprintln(w, p)
		}
	} else {
		fmt.Fprintln(w, "ready")
	}
	if modelErr != nil {
		fmt.Fprintln(w, "model: unreachable (approvals, commands and alert cards still work): "+modelErr.Error())
	}
}

// modelState pings the model at most every 30 s and returns the last
// answer's error.
func (r *readiness) modelState(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.model == nil {
		return errors.New("not configured: set AGENT_BASE_URL and AGENT_MODEL") // the console without a model
	}
	if time.Since(r.checked) > 30*time.Second {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r.modelErr = r.model.Ping(ctx)
		cancel()
		r.checked = time.Now()
	}
	return r.modelErr
}

// modelUpGauge is thinbot_model_up, read from r.
func modelUpGauge(r *readiness) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "thinbot_model_up",
		Help: "1 when the model endpoint answered the last ping (at most one every 30 s), else 0; the model is not a readiness condition."}, r.modelUp)
}

// modelUp is thinbot_model_up: 1 when the last ping (by /readyz, or by
// this scrape when none is recent) reached the model.
func (r *readiness) modelUp() float64 {
	if r.modelState(context.Background()) != nil {
		return 0
	}
	return 1
}

// chainHead returns the sequence number and hash of the chain's last
// durable event: one AppendBuffered has not synced yet could be lost by a
// machine restart and its seq reused, and a logged anchor must never be
// contradicted by an honest recovery.
func chainHead(db *store.DB) (uint64, string) {
	seq := db.DurableSeq()
	if seq == 0 {
		return 0, store.ZeroHash
	}
	for ev, err := range db.All(seq) {
		if err == nil {
			return ev.Seq, ev.Hash
		}
	}
	return seq, ""
}

type namedChannel struct {
	name string
	ch   bot.Channel
}

// resolveChannels finds the ids of channels configured by name and adds
// them to channels, and checks that the bot is a member of every channel
// configured by id. A name that does not resolve, or a channel the bot is
// not in, stops the start: running without it would silently ignore it.
func resolveChannels(ctx context.Context, adapter bot.Adapter, named []namedChannel, channels map[string]bot.Channel) error {
	r, ok := adapter.(bot.ChannelResolver)
	if !ok {
		if len(named) > 0 {
			return errors.New("this chat platform cannot resolve channel names: give channel ids")
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var errs []error
	for id := range channels {
		if id == "*" {
			continue
		}
		if err := r.CheckChannel(ctx, id); err != nil {
			errs = append(errs, err) // it names the channel
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, n := range named {
		id, err := r.ChannelID(ctx, n.name)
		if err != nil {
			return fmt.Errorf("channel %q: %w", n.name, err)
		}
		if _, dup := channels[id]; dup {
			return fmt.Errorf("channel %q is also configured by its id %s", n.name, id)
		}
		channels[id] = n.ch
	}
	return nil
}

// reminders is the section for a bot; escalate is false for the web
// console beside a chat platform, which reminds its approvers but has
// none of the platform's users to escalate to.
func (r approvalReminders) reminders(escalate bool) bot.Reminders {
	if !escalate {
		return bot.Reminders{RemindAfter: r.RemindAfter.Duration}
	}
	return bot.Reminders{RemindAfter: r.RemindAfter.Duration, EscalateAfter: r.EscalateAfter.Duration, EscalateTo: r.EscalateTo}
}
