package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/openai"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/web"
	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// defaultConsoleListen is where `thinbot serve` without a config serves the
// web console.
const defaultConsoleListen = "127.0.0.1:8080"

// webConfig is the config file's web section: the audit viewer for
// reviewers beside the chat platform and, with users, the chat console too.
type webConfig struct {
	// Listen is the console's address; "" means none.
	Listen string `yaml:"listen"`
	// TrustedProxies are CIDRs of reverse proxies whose X-Forwarded-User /
	// X-Auth-Request-Email header names the user.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// TokensFile holds login tokens, one "user token" pair a line (mode 0600).
	TokensFile string `yaml:"tokens_file" secret:"file"`
	// PublicOrigin is the console's origin as browsers see it, when a proxy
	// rewrites the Host header.
	PublicOrigin string `yaml:"public_origin"`
	// Auditors may read the audit viewer; Users may start threads in the
	// console; Approvers may decide its approval requests. Names are as the
	// proxy or the tokens file give them.
	Auditors  []string `yaml:"auditors"`
	Users     []string `yaml:"users"`
	Approvers []string `yaml:"approvers"`
	// Workspace is the console threads' workspace: one of the channels'
	// workspaces (required with users).
	Workspace string `yaml:"workspace"`
	// TwoPerson forbids a requester approving their own request.
	TwoPerson bool `yaml:"two_person_rule"`
	// Tokens bounds the console threads' model tokens as a channel's
	// tokens: bound its threads (the console is one channel, its day
	// its own); unset means those of the first channel whose workspace
	// is Workspace.
	Tokens tokensConfig `yaml:"tokens"`
}

// budgets are the console's token budgets: the section's, or those of the
// first of channels whose workspace is the console's.
func (w *webConfig) budgets(channels []channelConfig) bot.TokenBudgets {
	if w.Tokens != (tokensConfig{}) {
		return w.Tokens.budgets()
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	for _, ch := range channels {
		if w.Workspace != "" && abs(ch.Workspace) == abs(w.Workspace) {
			return ch.Tokens.budgets()
		}
	}
	return bot.TokenBudgets{}
}

// check reports the web section's problems; workspaces are the channels'.
func (w *webConfig) check(bad func(string, ...any), channels []channelConfig, who daemonUser) {
	if w.Listen == "" {
		if len(w.TrustedProxies)+len(w.Auditors)+len(w.Users)+len(w.Approvers) > 0 || w.TokensFile != "" {
			bad("web.listen is empty: set it to serve the web console")
		}
		return
	}
	if _, _, err := net.SplitHostPort(w.Listen); err != nil {
		bad("web.listen %q: %v", w.Listen, err)
	}
	auth, err := w.authAs(who)
	if err != nil {
		bad("%v", err)
		return
	}
	if err := auth.Check(w.Listen); err != nil {
		bad("%v", err)
	}
	if len(w.Auditors)+len(w.Users) == 0 {
		bad("web has no auditors and no users: nobody could use the console")
	}
	if w.Tokens.negative() {
		bad("web.tokens: budgets must not be negative (0 means none)")
	}
	if len(w.Users) > 0 {
		if len(w.Approvers) == 0 {
			bad("web.approvers is empty: every write asked for in the console would wait until it expires")
		}
		abs := func(p string) string { a, _ := filepath.Abs(p); return a }
		found := false
		for _, ch := range channels {
			found = found || (w.Workspace != "" && abs(ch.Workspace) == abs(w.Workspace))
		}
		if !found {
			bad("web.workspace %q is not the workspace of a channel: console threads run in one of them", w.Workspace)
		}
	}
}

// auth builds the console's authentication and roles from the section.
func (w *webConfig) auth() (web.Auth, error) { return w.authAs(currentUser()) }

// authAs is auth with the tokens file checked for a daemon running as who.
func (w *webConfig) authAs(who daemonUser) (web.Auth, error) {
	var a web.Auth
	for _, c := range w.TrustedProxies {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			ip, err2 := netip.ParseAddr(c)
			if err2 != nil {
				return a, fmt.Errorf("web.trusted_proxies: %q is not a CIDR or an address", c)
			}
			p = netip.PrefixFrom(ip, ip.BitLen())
		}
		a.TrustedProxies = append(a.TrustedProxies, p)
	}
	if w.TokensFile != "" {
		var err error
		if a.Tokens, err = readTokensAs(w.TokensFile, who); err != nil {
			return a, err
		}
	}
	a.Roles = map[string][]string{}
	for role, names := range map[string][]string{web.RoleAuditor: w.Auditors, web.RoleUser: w.Users, web.RoleApprover: w.Approvers} {
		for _, u := range names {
			u = strings.TrimPrefix(u, "@")
			a.Roles[u] = append(a.Roles[u], role)
		}
	}
	return a, nil
}

// readTokens reads web.tokens_file: one "user token" pair a line.
func readTokens(path string) (map[string]string, error) { return readTokensAs(path, currentUser()) }

func readTokensAs(path string, who daemonUser) (map[string]string, error) {
	return readTokenFile("web.tokens_file", path, who)
}

// readTokenFile reads the "user token" lines of the file of config key,
// by token.
func readTokenFile(key, path string, who daemonUser) (map[string]string, error) {
	if err := checkSecretFileAs(path, who); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	raw := strings.TrimSpace(string(b))
	tokens := map[string]string{}
	for i, line := range strings.Split(raw, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 || len(f[1]) < 16 {
			return nil, fmt.Errorf("%s line %d: want \"user token\" with a token of 16 characters or more", key, i+1)
		}
		tokens[f[1]] = f[0]
	}
	return tokens, nil
}

// tokensReload is how often serve looks whether web.tokens_file changed.
const tokensReload = 10 * time.Second

// watchTokens reloads the tokens file into srv whenever it changes (its
// size, time or inode), until ctx is done: a user removed from it, or whose
// token changed, is logged out within tokensReload. A file that cannot be
// read or parsed at two looks in a row leaves nobody able to log in (fail
// closed) and says why on the log.
func watchTokens(ctx context.Context, path string, srv *web.Server, every time.Duration, logger *slog.Logger) {
	stamp := func() string {
		st, err := os.Stat(path)
		if err != nil {
			return err.Error()
		}
		ino := uint64(0)
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
		return fmt.Sprint(st.Size(), st.ModTime().UnixNano(), ino)
	}
	last := "" // the first tick reloads: the file may have changed since serve read it
	failures := 0
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := stamp()
		if now == last {
			continue
		}
		first := last == ""
		tokens, err := readTokens(path)
		if err != nil {
			// An editor may be half-way through writing it: only a file
			// still bad at the next look signs everyone out.
			failures++
			if failures == 2 {
				logger.Error("web tokens file unreadable: nobody can log in until it is fixed", "file", path, "err", err,
					"sessions_ended", srv.SetTokens(nil))
			}
			continue
		}
		last, failures = now, 0
		if ended := srv.SetTokens(tokens); ended > 0 || !first {
			logger.Info("web tokens reloaded", "file", path, "tokens", len(tokens), "sessions_ended", ended)
		}
	}
}

// sessionStore keeps the console's login sessions in the state dir, so
// that logins survive a restart (and logouts do too).
func sessionStore(stateDir string) (saved []byte, save func([]byte) error) {
	path := filepath.Join(stateDir, "web-sessions.json")
	saved, _ = os.ReadFile(path)
	return saved, func(b []byte) error {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}
}

// serveWeb serves the web section beside the chat platform until ctx is
// done: the audit viewer, and with users the console, whose threads run in
// the workspace's Agent under a bot of their own. It returns what of u the
// chat platform's bot still has to recover, and a function that waits until
// everything it started has stopped. The console's bot, if any, is put in
// *webBot (alert routes to the console open threads through it). The
// audit viewer's timelines take their zone from zoneOf; the console's
// texts are in UTC (bc.Location is not used), which its pages show in the
// viewer's zone. loginKey is a cluster's console login key
// (consoleLoginKey): the console then records its logins in the chain and
// starts with those it holds; nil is a lone daemon's console, whose key
// and logins stay in stateDir.
func serveWeb(ctx context.Context, w webConfig, tokens bot.TokenBudgets, agents func() map[string]*agentcore.Agent, u agentcore.Unfinished, zoneOf func(string) *time.Location, bc bot.Config,
	db *store.DB, stateDir string, loginKey []byte, logger *slog.Logger, webBot **bot.Bot) (agentcore.Unfinished, func(), error) {
	if w.Listen == "" {
		return u, func() {}, nil
	}
	auth, err := w.auth()
	if err != nil {
		return u, nil, err
	}
	secret := loginKey
	if secret == nil {
		if secret, err = actionSecret(filepath.Join(stateDir, "web.key")); err != nil {
			return u, nil, err
		}
	}
	logger = logger.With("component", "web")
	// The console's texts (cards, approvals) are written in UTC, and the
	// page shows every time in the viewer's own zone, named, with UTC on
	// hover: one rule for the console and the audit pages. The daemon's
	// timezone is the chat platforms' (their readers' zones are unknown).
	bc.Location = nil
	chat := len(w.Users) > 0
	var saved []byte
	var save func([]byte) error
	if loginKey == nil {
		saved, save = sessionStore(stateDir)
	}
	srv, err := web.New(web.Config{Listen: w.Listen, Auth: auth, Chain: db, Timeline: chainTimeline(db, zoneOf, w.PublicOrigin), Chat: chat, PublicOrigin: w.PublicOrigin,
		Secret: secret, Sessions: saved, SaveSessions: save, ChainLogins: loginKey != nil, Logger: logger, Location: bc.Location})
	if err != nil {
		return u, nil, err
	}
	var wg sync.WaitGroup
	if chat {
		ws, _ := filepath.Abs(w.Workspace)
		if agents()[ws] == nil {
			return u, nil, fmt.Errorf("web.workspace %s is not the workspace of a channel", w.Workspace)
		}
		bc.Adapter, bc.Console = srv, w.PublicOrigin
		// The workspace's agent is the one in force: a config reload
		// replaces it (and keeps web.workspace a channel's workspace).
		bc.Channel = func(id string) (bot.Channel, bool) {
			return bot.Channel{Agent: agents()[ws], Workspace: ws, Approvers: w.Approvers, TwoPerson: w.TwoPerson, Tokens: tokens}, id == "console"
		}
		// Roles decide who writes; bc.Metrics are the chat bot's, so
		// the console's runs and tokens count beside its channels'.
		bc.Users, bc.Logger = nil, logger
		b, err := bot.New(bc)
		if err != nil {
			return u, nil, err
		}
		*webBot = b
		var mine agentcore.Unfinished
		mine, u = splitUnfinished(u, web.Platform+"/")
		b.Recover(ctx, mine)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.Run(ctx); err != nil {
				logger.Error("web console", "err", err)
			}
		}()
	}
	addr, wait, err := listenAndServe(ctx, w.Listen, srv.Handler(), logger)
	if err != nil {
		return u, nil, fmt.Errorf("web listen: %w", err) // the console's bot stops with ctx
	}
	if w.TokensFile != "" {
		wg.Go(func() { watchTokens(ctx, w.TokensFile, srv, tokensReload, logger) })
	}
	logger.Info("web console serving", "listen", addr.String())
	return u, func() { wait(); wg.Wait() }, nil
}

// splitUnfinished splits u into the sessions whose ids start with prefix
// and the others.
func splitUnfinished(u agentcore.Unfinished, prefix string) (with, without agentcore.Unfinished) {
	for _, a := range u.Approvals {
		if strings.HasPrefix(a.Session, prefix) {
			with.Approvals = append(with.Approvals, a)
		} else {
			without.Approvals = append(without.Approvals, a)
		}
	}
	for _, r := range u.Runs {
		if strings.HasPrefix(r, prefix) {
			with.Runs = append(with.Runs, r)
		} else {
			without.Runs = append(without.Runs, r)
		}
	}
	for _, q := range u.Queued {
		if strings.HasPrefix(q.Session, prefix) {
			with.Queued = append(with.Queued, q)
		} else {
			without.Queued = append(without.Queued, q)
		}
	}
	return with, without
}

// listenAndServe serves h on addr until ctx is done, then shuts the server
// down (5 s for requests in flight). It returns the address it listens on
// and a function that waits until the server has stopped.
func listenAndServe(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) (net.Addr, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http listener", "err", err)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	})
	return ln.Addr(), wg.Wait, nil
}

// healthz mounts GET /healthz, which answers "ok" while the process serves.
func healthz(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
}

// modelProblem tells a console user how to configure the model.
const modelProblem = "Set AGENT_BASE_URL and AGENT_MODEL (and AGENT_API_KEY if the endpoint needs one) and restart, e.g. " +
	"`AGENT_BASE_URL=http://127.0.0.1:8000/v1 AGENT_MODEL=Qwen3-32B thinbot serve`. " +
	"Any OpenAI-compatible endpoint works: vLLM, SGLang, Ollama, llama.cpp."

// unconfiguredModel is the model of a console started without one: every
// call fails, and the console says why before it is ever called.
type unconfiguredModel struct{}

func (unconfiguredModel) Complete(context.Context, agentcore.Request) (agentcore.Response, error) {
	return agentcore.Response{}, errors.New("no model configured: set AGENT_BASE_URL and AGENT_MODEL")
}

// serveConsole is `thinbot serve` without a config: the web console on a
// loopback address, state in ./.thinbot, this directory as the workspace,
// the model from the environment.
func serveConsole(ctx context.Context, e *env, listen, stateDir string, hup <-chan os.Signal) error {
	// JSON lines, as the daemon's: one log format for every serve.
	e.logJSON = true
	logger := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	defer tuneGC(e.getenv)()
	ws, err := os.Getwd()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	db, err := store.Open(filepath.Join(stateDir, "events.db"), &store.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer db.Close()
	var model agentcore.Model = unconfiguredModel{}
	var client *openai.Client // nil: no model configured
	problem := ""
	var secrets []string
	if mc, err := modelConfig(e); err != nil {
		problem = modelProblem
		logger.Warn("no model configured: the console shows how to set one", "why", err)
	} else {
		mc.Logger = logger
		c, err := openai.New(mc)
		if err != nil {
			return err
		}
		model, client, secrets = c, c, []string{mc.APIKey}
	}
	policy, err := loadPolicy("")
	if err != nil {
		return err
	}
	absState, _ := filepath.Abs(stateDir)
	if why := workspaceProblem(ws, []string{absState}); why != "" {
		return fmt.Errorf("workspace %s", why)
	}
	policy = policy.WithProtected(absState)
	// The helpers start while the console gets ready; commands wait for
	// them, and so does /readyz.
	sbx := beginSandbox(ctx, e.getenv("THINBOT_SANDBOX"), []string{absState}, visibleFolders(e, ws), logger)
	defer sbx.close()
	lock, err := readSkillsLock(e.getenv("AGENT_SKILLS_LOCK"))
	if err != nil {
		return err
	}
	probe := skillProbe(e)
	probe.Python = sbx.afterStart((&skills.PythonProbe{}).Version)
	set := skills.Load(skillDirs(e, ws), skills.Options{Probe: probe, Lock: lock, Logger: logger})
	agent, err := agentcore.New(agentcore.Config{
		Store: db, Model: model, Policy: policy, Skills: set, Secrets: secrets,
		GlobalInstructions: readText(filepath.Join(configDir(e), "AGENT.md")),
		Exec:               sbx.exec(agentcore.ExecConfig{Environ: os.Environ()}),
		Logger:             logger,
	})
	if err != nil {
		return err
	}
	for _, fl := range set.Filtered {
		if _, err := agent.Note("system:skills", agentcore.EvSkillFiltered, "system", fl); err != nil {
			return err
		}
	}
	unfinished, sessions, seen, err := recoverChain(db)
	if err != nil {
		return err
	}
	user := userName(e)
	secret, err := actionSecret(filepath.Join(stateDir, "web.key"))
	if err != nil {
		return err
	}
	srv, err := web.New(web.Config{Listen: listen, LocalUser: user, Chain: db, Timeline: chainTimeline(db, func(string) *time.Location { return nil }, ""), Chat: true, ModelProblem: problem,
		Secret: secret, Logger: logger})
	if err != nil {
		return fmt.Errorf("%w\n(thinbot serve without --config is the local operator's console; a shared console goes behind a login: see the web section of deploy/thinbot.example.yaml)", err)
	}
	ch := bot.Channel{Agent: agent, Workspace: ws, Approvers: []string{user}}
	reg := newRegistry(db, srv)
	b, err := bot.New(bot.Config{
		Adapter:  srv,
		Channel:  func(id string) (bot.Channel, bool) { return ch, id == "console" },
		Sessions: sessions, Seen: seen, Known: agentcore.KnownSession(db), Metrics: bot.NewMetrics(reg), Logger: logger,
	})
	if err != nil {
		return err
	}
	b.Recover(ctx, unfinished)
	srvCtx, stop := context.WithCancel(ctx)
	defer stop()
	mux := http.NewServeMux()
	healthz(mux)
	// Readiness and metrics as the daemon's (on loopback, as the console).
	ready := &readiness{adapter: srv, db: db, model: client, stateDir: stateDir, sandbox: sbx}
	mux.HandleFunc("GET /readyz", ready.serve)
	reg.MustRegister(modelUpGauge(ready))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", srv.Handler())
	addr, wait, err := listenAndServe(srvCtx, listen, mux, logger)
	if err != nil {
		return fmt.Errorf("web listen: %w", err)
	}
	logger.Info("web console serving", "listen", addr.String())
	logger.Info(fmt.Sprintf("thinbot console: open http://%s in your browser", addr), "workspace", ws, "state_dir", stateDir)
	if problem != "" {
		logger.Warn("No model is configured yet: set AGENT_BASE_URL and AGENT_MODEL and restart; the page says the same.")
	}
	// The chain head goes to the log every 10 minutes and at the end, as
	// the daemon's does: a log kept elsewhere anchors the chain.
	waitHead := logChainHead(srvCtx, db, logger)
	waitHup := ignoreHangup(srvCtx, hup, logger)
	runErr := b.Run(ctx)
	stop()
	waitHead()
	waitHup()
	wait()
	seq, hash := chainHead(db)
	logger.Info("thinbot stopped", "last_seq", seq, "head_hash", hash)
	return runErr
}

// ignoreHangup logs each SIGHUP that hup delivers until ctx is done: the
// console without --config has no config file to reload (its settings are
// flags and the environment, read once at start), and a SIGHUP must not
// kill it either, as Go's default would: `kill -HUP` is the operator's
// reload everywhere else. It stops on SIGTERM and Ctrl+C. The returned
// function waits for it to stop.
func ignoreHangup(ctx context.Context, hup <-chan os.Signal, logger *slog.Logger) func() {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				logger.Warn("SIGHUP: no config file to reload (thinbot serve without --config): restart the console to change its flags, environment, skills or AGENT.md")
			}
		}
	})
	return wg.Wait
}
