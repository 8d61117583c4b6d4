package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/web"
)

// daemonConfig is the YAML config file of thinbot serve. deploy/thinbot.example.yaml
// explains every key.
type daemonConfig struct {
	Model struct {
		BaseURL       string  `yaml:"base_url"`
		Model         string  `yaml:"model"`
		APIKeyFile    string  `yaml:"api_key_file" secret:"file"`
		ContextWindow int     `yaml:"context_window"`
		TextProtocol  bool    `yaml:"text_protocol"`
		FeedReasoning bool    `yaml:"feed_reasoning"`
		CompactAt     float64 `yaml:"compact_at"`
		// CompactPromptFile replaces the built-in compaction prompt.
		CompactPromptFile string   `yaml:"compact_prompt_file" secret:"no"`
		Timeout           duration `yaml:"timeout"`
		// MaxRetries is how often a failed model call is retried (429,
		// 5xx, connection loss); unset means the client's default (4),
		// 0 means no retry.
		MaxRetries *int `yaml:"max_retries"`
	} `yaml:"model"`
	Platform   string `yaml:"platform"`
	Mattermost struct {
		URL         string `yaml:"url"`
		TokenFile   string `yaml:"token_file" secret:"file"`
		CallbackURL string `yaml:"callback_url"`
	} `yaml:"mattermost"`
	Slack struct {
		Mode              string `yaml:"mode"`
		BotTokenFile      string `yaml:"bot_token_file" secret:"file"`
		AppTokenFile      string `yaml:"app_token_file" secret:"file"`
		SigningSecretFile string `yaml:"signing_secret_file" secret:"file"`
		APIURL            string `yaml:"api_url"`
	} `yaml:"slack"`
	Listen           string   `yaml:"listen"`
	StateDir         string   `yaml:"state_dir"`
	PolicyFile       string   `yaml:"policy_file" secret:"no"`
	InstructionsFile string   `yaml:"instructions_file" secret:"no"`
	SkillsDirs       []string `yaml:"skills_dirs"`
	// SkillsLock is a skills.lock (thinbot skills lock): skills whose files
	// differ from it are hidden. "" pins nothing.
	SkillsLock      string   `yaml:"skills_lock"`
	Users           []string `yaml:"users"`
	AllowBots       bool     `yaml:"allow_bots"`
	MentionInThread bool     `yaml:"mention_in_thread"`
	MaxConcurrent   int      `yaml:"max_concurrent_runs"`
	ApprovalTimeout duration `yaml:"approval_timeout"`
	// ApprovalReminders remind and escalate a request nobody decides.
	ApprovalReminders approvalReminders `yaml:"approval_reminders"`
	// Timezone is the zone of the times thinbot writes into chat and
	// timelines; unset is UTC. channels[].timezone overrides it.
	Timezone zone     `yaml:"timezone"`
	EnvAllow []string `yaml:"env_allow"`
	// Sandbox is "on" (the default: the kernel sandbox confines every
	// command, or, where the kernel refuses it, every command needs an
	// approval) or "off" (commands run unconfined).
	Sandbox string `yaml:"sandbox"`
	// Limits bound every command, and ReadOnly says what read-only
	// commands may reach (sandbox.go).
	Limits   limitsConfig   `yaml:"limits"`
	ReadOnly readOnlyConfig `yaml:"readonly"`
	// CommandPath is the PATH of every command; "" means agentcore.DefaultPath.
	CommandPath string `yaml:"command_path"`
	LogLevel    string `yaml:"log_level"`
	Budgets     struct {
		MaxSteps       int      `yaml:"max_steps"`
		MaxModelCalls  int      `yaml:"max_model_calls"`
		MaxWall        duration `yaml:"max_wall"`
		MaxToolErrors  int      `yaml:"max_tool_errors"`
		CommandTimeout duration `yaml:"command_timeout"`
	} `yaml:"budgets"`
	Channels []channelConfig `yaml:"channels"`
	Web      webConfig       `yaml:"web"`
	// Fleet: remote hosts over OpenSSH (hosts.go, deploy/fleet.md).
	Fleet fleetConfig `yaml:"fleet"`
	// Alerts: the Alertmanager/Grafana webhook receiver (alerts.go).
	Alerts alertsConfig `yaml:"alerts"`
	// MCP: thinbot as an MCP server on the listener (mcp.go).
	MCP mcpConfig `yaml:"mcp"`
	// Schedules: checks on a cron spec (schedules.go).
	Schedules []scheduleConfig `yaml:"schedules"`
	// MCPServers: MCP servers whose tools the model may call
	// (mcpservers.go, deploy/mcp.md).
	MCPServers []mcpServerConfig `yaml:"mcp_servers"`
	// Datasources: Prometheus, Loki and Alertmanager for the model's
	// read-only query tools (datasources.go).
	Datasources []datasourceConfig `yaml:"datasources"`
	// SecretFiles are more files holding secrets the daemon uses (an
	// EnvironmentFile thinbot cannot find on its own, say): hidden from
	// every command like the *_file keys.
	SecretFiles []string `yaml:"secret_files" secret:"file"`
	// SystemdUnit is the daemon's unit, whose files and EnvironmentFiles
	// are hidden from commands; "" means the unit thinbot runs in (from
	// its cgroup), else thinbot.service.
	SystemdUnit string `yaml:"systemd_unit"`
	// ReloadTokenFile holds the bearer tokens of POST /-/reload, one
	// "name token" pair a line (reload.go); "" turns the endpoint off.
	ReloadTokenFile string `yaml:"reload_token_file" secret:"file"`
	// Cluster: the chain replicated among several nodes (cluster.go).
	Cluster clusterConfig `yaml:"cluster"`

	// systemd is what the unit's files say (secrets.go), found at load.
	systemd systemdSources
}

type channelConfig struct {
	// ID is the channel id, or "*" for every channel not listed.
	ID string `yaml:"id"`
	// Name is the channel's name instead of its id ("ops", "#ops"),
	// resolved at start among the channels the bot is a member of.
	Name             string   `yaml:"name"`
	Workspace        string   `yaml:"workspace"`
	InstructionsFile string   `yaml:"instructions_file" secret:"no"`
	Approvers        []string `yaml:"approvers"`
	AnyMember        bool     `yaml:"any_member_approves"`
	TwoPerson        bool     `yaml:"two_person_rule"`
	AllowAll         bool     `yaml:"allow_all"`
	// FleetGroups limits the channel's remote targets to these fleet
	// groups; empty means every host of the fleet.
	FleetGroups []string `yaml:"fleet_groups"`
	// Timezone is the zone of the times in the channel's threads; unset
	// is the top-level timezone.
	Timezone zone `yaml:"timezone"`
	// Tokens bounds the channel's model tokens (bot.TokenBudgets).
	Tokens tokensConfig `yaml:"tokens"`
}

// tokensConfig is a tokens: section, a channel's or the web console's
// (bot.TokenBudgets); 0 means no bound.
type tokensConfig struct {
	PerRun    int `yaml:"per_run"`
	PerThread int `yaml:"per_thread"`
	PerDay    int `yaml:"per_day"`
}

// budgets is the section as bot.TokenBudgets.
func (t tokensConfig) budgets() bot.TokenBudgets {
	return bot.TokenBudgets{PerRun: t.PerRun, PerThread: t.PerThread, PerDay: t.PerDay}
}

// negative reports whether a budget is negative.
func (t tokensConfig) negative() bool { return t.PerRun < 0 || t.PerThread < 0 || t.PerDay < 0 }

// loadConfig reads and checks a config file. It returns every problem found,
// joined, so that `thinbot config check` reports them all at once; the
// config comes back with them unless the file could not be read or decoded.
func loadConfig(path string, getenv func(string) string) (*daemonConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// Unknown keys are found on the node tree first: yaml.v3's KnownFields
	// error names the Go struct type, which means nothing to an operator.
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if unknown := unknownKeys(&root, reflect.TypeFor[daemonConfig](), ""); len(unknown) > 0 {
		return nil, fmt.Errorf("config %s: %w", path, errors.Join(unknown...))
	}
	var c daemonConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.resolvePaths(base)
	c.systemd = discoverSystemd(systemdUnit(c.SystemdUnit, getenv), systemdDirs)
	c.defaults(getenv)
	return &c, c.check(path)
}

// resolvePaths makes the config's relative paths absolute against base,
// the config file's directory, as the fleet section's always were: serve
// (which systemd starts in /) and config check (run from anywhere) must
// read the same files. Every reader of a daemonConfig gets them resolved.
func (c *daemonConfig) resolvePaths(base string) {
	paths := []*string{&c.Model.APIKeyFile, &c.Model.CompactPromptFile, &c.Mattermost.TokenFile,
		&c.Slack.BotTokenFile, &c.Slack.AppTokenFile, &c.Slack.SigningSecretFile,
		&c.StateDir, &c.PolicyFile, &c.InstructionsFile, &c.SkillsLock,
		&c.Web.TokensFile, &c.Web.Workspace, &c.Alerts.TokenFile, &c.MCP.TokensFile}
	for i := range c.SkillsDirs {
		paths = append(paths, &c.SkillsDirs[i])
	}
	for i := range c.SecretFiles {
		paths = append(paths, &c.SecretFiles[i])
	}
	for i := range c.Channels {
		paths = append(paths, &c.Channels[i].Workspace, &c.Channels[i].InstructionsFile)
	}
	for i := range c.MCPServers {
		paths = append(paths, &c.MCPServers[i].EnvFile, &c.MCPServers[i].HeadersFile)
	}
	for _, p := range paths {
		*p = rel(base, *p)
	}
	c.Cluster.resolvePaths(base)
	c.resolveDatasourcePaths(base)
}

// defaults fills what the file leaves out: the model from the environment
// (AGENT_BASE_URL, AGENT_MODEL, as the terminal modes read it), the listen
// address, the sandbox, the approval timeout.
func (c *daemonConfig) defaults(getenv func(string) string) {
	if c.Model.BaseURL == "" {
		c.Model.BaseURL = getenv("AGENT_BASE_URL")
	}
	if c.Model.Model == "" {
		c.Model.Model = getenv("AGENT_MODEL")
	}
	if c.Listen == "" {
		c.Listen = defaultListen
	}
	if c.Platform == web.Platform && len(c.Channels) == 0 && c.Web.Workspace != "" {
		// The web console is the only chat: its one channel, "console",
		// is the web section's (its workspace, approvers and budgets).
		c.Channels = []channelConfig{{ID: "console", Workspace: c.Web.Workspace, Approvers: c.Web.Approvers,
			TwoPerson: c.Web.TwoPerson, Tokens: c.Web.Tokens}}
	}
	if c.Sandbox == "" {
		c.Sandbox = "on"
	}
	if c.ApprovalTimeout.Duration == 0 {
		c.ApprovalTimeout.Duration = 15 * time.Minute
	}
}

// check runs one check per section of the config file at path, in the
// file's order, and joins what they find.
func (c *daemonConfig) check(path string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	// config check often runs as root for a daemon that runs as the unit's
	// User=: the secret files are checked for the daemon's user.
	who := c.systemd.daemonUser()
	c.checkModel(bad, who)
	c.checkPlatform(bad, who)
	c.checkDaemon(bad)
	c.checkReload(bad, who)
	c.Web.check(bad, c.Channels, who)
	c.Alerts.check(bad, c.Channels, c.Platform, c.Web)
	c.Alerts.Alertmanager.checkSource(bad, c.Datasources)
	c.MCP.check(bad, c.Channels, c.Platform, c.Web, who)
	checkSchedules(bad, c.Schedules, c.Channels)
	c.checkMCP(bad, who)
	c.Cluster.check(bad, who, c.Web.Listen)
	c.checkDatasources(bad, who)
	c.checkChannels(bad)
	if c.Fleet.configured() {
		errs = append(errs, c.Fleet.check(filepath.Dir(path))...)
	}
	c.checkWorkspacesVisible(bad, path)
	errs = append(errs, c.checkSandbox()...)
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o002 != 0 {
		bad("config file %s is writable by every user; chmod o-w it", path)
	}
	return errors.Join(errs...)
}

// checkModel checks the model section.
func (c *daemonConfig) checkModel(bad func(string, ...any), who daemonUser) {
	m := &c.Model
	if m.BaseURL == "" {
		bad("model.base_url is empty (or set AGENT_BASE_URL)")
	} else if u, err := url.Parse(m.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		bad("model.base_url %q is not an http(s) URL", m.BaseURL)
	}
	if m.Model == "" {
		bad("model.model is empty (or set AGENT_MODEL)")
	}
	if m.MaxRetries != nil && *m.MaxRetries < 0 {
		bad("model.max_retries %d: want 0 or more", *m.MaxRetries)
	}
	if m.APIKeyFile != "" {
		if err := checkSecretFileAs(m.APIKeyFile, who); err != nil {
			bad("model.api_key_file: %v", err)
		}
	}
	if m.CompactPromptFile != "" {
		if _, err := os.Stat(m.CompactPromptFile); err != nil {
			bad("model.compact_prompt_file: %v", err)
		}
	}
	m.Timeout.check(bad, "model.timeout", "15m")
}

// checkPlatform checks the platform key and its section (mattermost or
// slack).
func (c *daemonConfig) checkPlatform(bad func(string, ...any), who daemonUser) {
	switch c.Platform {
	case "mattermost":
		mm := c.Mattermost
		if mm.URL == "" {
			bad("mattermost.url is empty")
		} else if u, err := url.Parse(mm.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("mattermost.url %q is not an http(s) URL: write it with its scheme, like https://%s", mm.URL, strings.TrimPrefix(mm.URL, "//"))
		}
		if mm.TokenFile == "" {
			bad("mattermost.token_file is empty (the bot account's access token)")
		} else if err := checkSecretFileAs(mm.TokenFile, who); err != nil {
			bad("mattermost.token_file: %v", err)
		}
		if mm.CallbackURL == "" {
			bad("mattermost.callback_url is empty (the URL Mattermost calls for buttons, served on listen)")
		} else if _, err := url.Parse(mm.CallbackURL); err != nil {
			bad("mattermost.callback_url: %v", err)
		}
	case "slack":
		sl := c.Slack
		mode := sl.Mode
		if mode == "" {
			mode = "socket"
		}
		if mode != "socket" && mode != "http" {
			bad("slack.mode %q: want socket or http", mode)
		}
		need := map[string]string{"slack.bot_token_file": sl.BotTokenFile}
		if mode == "socket" {
			need["slack.app_token_file"] = sl.AppTokenFile
		} else {
			need["slack.signing_secret_file"] = sl.SigningSecretFile
		}
		for key, f := range need {
			if f == "" {
				bad("%s is empty", key)
			} else if err := checkSecretFileAs(f, who); err != nil {
				bad("%s: %v", key, err)
			}
		}
		if sl.SigningSecretFile != "" && mode == "socket" {
			if err := checkSecretFileAs(sl.SigningSecretFile, who); err != nil {
				bad("slack.signing_secret_file: %v", err)
			}
		}
	case web.Platform:
		// No chat platform: the web console is the chat (and alerts'
		// threads open there).
		if c.Web.Listen == "" || len(c.Web.Users) == 0 {
			bad("platform web: the web console is the only chat, so set web.listen and web.users (and web.approvers, web.workspace)")
		}
	case "":
		bad("platform is empty: want mattermost, slack or web (the web console alone)")
	default:
		bad("platform %q: want mattermost, slack or web", c.Platform)
	}
}

// checkDaemon checks the top-level keys of the daemon itself: where it
// listens and keeps its state, how commands run, the files it reads at
// start, approvals and budgets.
func (c *daemonConfig) checkDaemon(bad func(string, ...any)) {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen %q: %v", c.Listen, err)
	}
	if c.Sandbox != "on" && c.Sandbox != "off" {
		bad("sandbox %q: want on or off", c.Sandbox)
	}
	if _, err := logLevel(c.LogLevel); err != nil {
		bad("%v", err)
	}
	if c.CommandPath != "" {
		if err := agentcore.CheckPath(c.CommandPath); err != nil {
			bad("command_path: %v", err)
		}
	}
	if c.StateDir == "" {
		bad("state_dir is empty (where the event chain and audit.jsonl live)")
	}
	if c.PolicyFile != "" {
		if _, err := loadPolicy(c.PolicyFile); err != nil {
			bad("policy_file: %v", err)
		}
	}
	if _, err := readSkillsLock(c.SkillsLock); err != nil {
		bad("skills_lock: %v", err)
	}
	if c.InstructionsFile != "" {
		if _, err := os.Stat(c.InstructionsFile); err != nil {
			bad("instructions_file: %v", err)
		}
	}
	c.ApprovalTimeout.check(bad, "approval_timeout", "15m")
	c.ApprovalReminders.check(bad, c.Platform, c.ApprovalTimeout.Duration)
	c.Timezone.check(bad, "timezone")
	c.Budgets.MaxWall.check(bad, "budgets.max_wall", "15m")
	c.Budgets.CommandTimeout.check(bad, "budgets.command_timeout", "15m")
}

// checkChannels checks the users and channels keys.
func (c *daemonConfig) checkChannels(bad func(string, ...any)) {
	for _, u := range c.Users {
		if why := notUserID(c.Platform, u); why != "" {
			bad("users: %q is not %s; users are matched by id, so that an account renamed to an allowed user's name gets no access", u, why)
		}
	}
	if len(c.Channels) == 0 {
		bad("channels is empty: list the channels the bot works in (id, workspace, approvers)")
	}
	seen := map[string]bool{}
	for i, ch := range c.Channels {
		where := fmt.Sprintf("channels[%d]", i)
		switch {
		case ch.ID == "" && ch.Name == "":
			bad("%s has neither id nor name (a channel id, \"*\" for all others, or the channel's name)", where)
		case ch.ID != "" && ch.Name != "":
			bad("%s has both id and name; give one", where)
		}
		key := ch.ID
		if ch.Name != "" {
			key = "name:" + strings.TrimLeft(ch.Name, "#~")
		}
		if seen[key] {
			bad("%s (%s) is listed twice", where, strings.TrimPrefix(key, "name:"))
		}
		seen[key] = true
		if ch.Workspace == "" {
			bad("%s.workspace is empty", where)
		} else if st, err := os.Stat(ch.Workspace); err != nil || !st.IsDir() {
			bad("%s.workspace %q is not a directory", where, ch.Workspace)
		}
		for _, a := range ch.Approvers {
			if why := notUserID(c.Platform, a); why != "" {
				bad("%s.approvers: %q is not %s; approvers are matched by id, so that an account renamed to an approver's name cannot approve", where, a, why)
			}
		}
		ch.Timezone.check(bad, where+".timezone")
		if ch.Tokens.negative() {
			bad("%s.tokens: budgets must not be negative (0 means none)", where)
		}
		if len(ch.Approvers) == 0 && !ch.AnyMember && !ch.AllowAll {
			bad("%s has no approvers (list approvers or set any_member_approves): every write would wait until it expires", where)
		}
		if ch.InstructionsFile != "" {
			if _, err := os.Stat(ch.InstructionsFile); err != nil {
				bad("%s.instructions_file: %v", where, err)
			}
		}
	}
}

// checkWorkspacesVisible refuses a workspace the sandbox hides (inside the
// state dir, say): it would be an empty directory to every command.
func (c *daemonConfig) checkWorkspacesVisible(bad func(string, ...any), path string) {
	if c.StateDir == "" {
		return
	}
	hidden := c.protectedPaths(path)
	for i, ch := range c.Channels {
		if ch.Workspace != "" {
			if why := workspaceProblem(ch.Workspace, hidden); why != "" {
				bad("channels[%d].workspace %s", i, why)
			}
		}
	}
	if c.Web.Workspace != "" {
		if why := workspaceProblem(c.Web.Workspace, hidden); why != "" {
			bad("web.workspace %s", why)
		}
	}
}

// duration is a config value written as a Go duration ("90s", "15m",
// "1h30m"), positive; unset (or "") is zero. A value that does not parse
// does not fail the decoding, which would hide every other problem: it
// is kept with its text for check to report.
type duration struct {
	time.Duration
	text string
	err  error
}

// errDuration is parseDuration's error; check words it for the key.
var errDuration = errors.New("want a positive duration")

// errNotPositive is errDuration for a Go duration of zero or below, which
// some keys take as unset (checkOrUnset).
var errNotPositive = fmt.Errorf("%w", errDuration)

// parseDuration parses a config duration: what time.ParseDuration
// accepts, above zero.
func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errDuration
	case v <= 0:
		return 0, errNotPositive
	}
	return v, nil
}

// UnmarshalYAML takes any scalar, as a string field does.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if err := n.Decode(&d.text); err != nil {
		return err
	}
	d.Duration, d.err = 0, nil
	if d.text != "" {
		d.Duration, d.err = parseDuration(d.text)
	}
	return nil
}

// check reports a value that did not parse, as "KEY "TEXT": want a positive
// duration like EXAMPLE".
func (d duration) check(bad func(string, ...any), key, example string) {
	if d.err != nil {
		bad("%s %q: %v like %s", key, d.text, d.err, example)
	}
}

// checkOrUnset is check for a key that has always taken a Go duration of
// zero or below as unset (the fleet's timeouts): only text that is no
// duration is a problem.
func (d duration) checkOrUnset(bad func(string, ...any), key, example string) {
	if d.err != errNotPositive {
		d.check(bad, key, example)
	}
}

// or is the duration, or def when it is unset.
func (d duration) or(def time.Duration) time.Duration {
	if d.Duration <= 0 {
		return def
	}
	return d.Duration
}

// zone is a config time zone, written as an IANA name ("Europe/Berlin",
// "America/New_York", "UTC") and loaded once when decoded: from the
// system's zone database, else the copy compiled into thinbot (main.go
// imports time/tzdata), so that a container without /usr/share/zoneinfo
// works too. Unset (or "") is nil, the caller's default. A name that does
// not load does not fail the decoding, which would hide every other
// problem: it is kept with its text for check to report.
type zone struct {
	loc  *time.Location
	text string
	err  error
}

// errZone is loadZone's error; check words it for the key.
var errZone = errors.New("not a time zone name; want an IANA name like Europe/Berlin, America/New_York or UTC")

// loadZone loads an IANA zone name. "Local" is refused: it would be
// whatever zone the host is set to, and the config should say the zone
// its readers get.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, errZone
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, errZone
	}
	return loc, nil
}

// UnmarshalYAML takes any scalar, as a string field does.
func (z *zone) UnmarshalYAML(n *yaml.Node) error {
	if err := n.Decode(&z.text); err != nil {
		return err
	}
	z.loc, z.err = nil, nil
	if z.text != "" {
		z.loc, z.err = loadZone(z.text)
	}
	return nil
}

// check reports a name that did not load, as "KEY "TEXT": not a time
// zone name; want ...".
func (z zone) check(bad func(string, ...any), key string) {
	if z.err != nil {
		bad("%s %q: %v", key, z.text, z.err)
	}
}

// logLevel parses log_level: debug, info (the default, also for ""),
// warn or error, in any case.
func logLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("log_level %q: want debug, info, warn or error", s)
}

// listenWarning says why a listen address other hosts can reach deserves
// a look ("" for a loopback one): /metrics and /readyz answer whoever
// connects. It is no error: Mattermost's button callbacks must reach the
// listener, often from another host.
func listenWarning(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("listen %s is reachable from other hosts: /metrics and /readyz answer anyone who connects (callbacks and /alerts check their own secrets); "+
		"bind 127.0.0.1 behind a reverse proxy, or firewall the port", addr)
}

// defaultListen is thinbot's listener when the config names none. Not
// 8065 (Mattermost's own port, so the default failed on the Mattermost
// host) and not 8080 (the web console's default, and half the world's
// development servers): 8079 is registered to nothing common.
const defaultListen = "127.0.0.1:8079"

// checkSecretFile refuses a credentials file that anyone but root and the
// daemon's user and groups can read (secretModeProblem), and one that cannot
// hold a credential: a directory, or an empty file.
func checkSecretFile(path string) error { return checkSecretFileAs(path, currentUser()) }

// checkSecretFileAs is checkSecretFile for a daemon running as who.
func checkSecretFileAs(path string, who daemonUser) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%s is a directory, not a file holding the secret", path)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if why := secretModeProblem(path, st.Mode(), sys.Uid, sys.Gid, who.uid, who.gids); why != "" {
			return errors.New(why)
		}
	} else if st.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s is readable or writable by other users (mode %s); chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "" {
		return fmt.Errorf("%s is empty", path)
	}
	return nil
}

// unknownKeys walks a decoded YAML document alongside the struct type t and
// returns one error per mapping key that t has no field for, naming the
// section and the keys it knows.
func unknownKeys(n *yaml.Node, t reflect.Type, where string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil // a value of its own (duration), not a section
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return unknownKeys(n.Content[0], t, where)
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice {
			return nil
		}
		var errs []error
		for i, c := range n.Content {
			errs = append(errs, unknownKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", where, i))...)
		}
		return errs
	case yaml.MappingNode:
		if t.Kind() != reflect.Struct {
			return nil
		}
		fields := map[string]reflect.Type{}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				fields[name] = f.Type
			}
		}
		var errs []error
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sub := k.Value
			if where != "" {
				sub = where + "." + k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				section := "at the top level"
				if where != "" {
					section = "in " + where
				}
				known := slices.Sorted(maps.Keys(fields))
				errs = append(errs, fmt.Errorf("line %d: unknown key %q %s (known: %s)", k.Line, k.Value, section, strings.Join(known, ", ")))
				continue
			}
			errs = append(errs, unknownKeys(v, ft, sub)...)
		}
		return errs
	}
	return nil
}

var (
	mattermostID = regexp.MustCompile(`^[a-z0-9]{26}$`)
	slackUserID  = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
)

// notUserID says why s is not a user id of the platform ("" if it is one).
func notUserID(platform, s string) string {
	switch platform {
	case "mattermost":
		if !mattermostID.MatchString(s) {
			return "a Mattermost user id (26 lowercase letters and digits: System Console > Users, or mmctl user search NAME)"
		}
	case "slack":
		if !slackUserID.MatchString(s) {
			return "a Slack user id (like U012AB3CDE: the user's profile > ⋮ > Copy member ID)"
		}
	}
	return ""
}

// checkListen tries to bind addr (and lets go at once), so that `config
// check` finds a port already taken before `serve` does. A port held by a
// running thinbot (its /healthz and /metrics answer as thinbot's do) is no
// problem but a note: that is most likely this config's own daemon, and
// `config check` is often run beside it.
func checkListen(addr string) (note string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			if thinbotListens(addr) {
				return fmt.Sprintf("listen %s is in use by a running thinbot (this config's daemon?); a second serve would fail", addr), nil
			}
			return "", fmt.Errorf("listen %s: address already in use: another program listens there (pick another listen address)", addr)
		}
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	return "", ln.Close()
}

// readSecret reads a credentials file, trimmed.
func readSecret(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	if err := checkSecretFile(path); err != nil {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// thinbotListens reports whether a thinbot answers on addr.
func thinbotListens(addr string) bool {
	hc := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) string {
		resp, err := hc.Get("http://" + addr + path)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if resp.StatusCode != http.StatusOK {
			return ""
		}
		return string(b)
	}
	return get("/healthz") == "ok\n" && strings.Contains(get("/metrics"), "thinbot_chain_events")
}

func cmdConfig(_ context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: thinbot config check --config FILE", errUsage)
	}
	fs := newFlags(e, "config check")
	path := fs.String("config", "", "config `file`")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if *path == "" && fs.NArg() > 0 {
		*path = fs.Arg(0)
	}
	if *path == "" {
		return fmt.Errorf("%w: thinbot config check --config FILE", errUsage)
	}
	c, err := loadConfig(*path, e.getenv)
	if c != nil {
		if _, _, perr := net.SplitHostPort(c.Listen); perr == nil {
			note, lerr := checkListen(c.Listen)
			err = errors.Join(err, lerr)
			if note != "" {
				fmt.Fprintf(e.stdout, "note: %s\n", note)
			}
		}
	}
	if c != nil {
		for _, w := range c.secretWarnings(e.getenv) {
			fmt.Fprintf(e.stdout, "warning: %s\n", w)
		}
		if w := listenWarning(c.Listen); w != "" {
			fmt.Fprintf(e.stdout, "warning: %s\n", w)
		}
	}
	if err != nil {
		var n int
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(e.stdout, "problem: %s\n", line)
			n++
		}
		return fmt.Errorf("config %s: %d problem(s)", *path, n)
	}
	abs, _ := filepath.Abs(c.StateDir)
	fmt.Fprintf(e.stdout, "config %s is fine: platform %s, %d channel(s), state in %s, listening on %s\n", *path, c.Platform, len(c.Channels), abs, c.Listen)
	return nil
}

// approvalReminders is the approval_reminders: section: after remind_after
// an open request's thread mentions its approvers again, after
// escalate_after it mentions escalate_to; the request still expires at
// approval_timeout, as a deny.
type approvalReminders struct {
	RemindAfter   duration `yaml:"remind_after"`
	EscalateAfter duration `yaml:"escalate_after"`
	// EscalateTo are the chat platform's user ids an escalation mentions.
	EscalateTo []string `yaml:"escalate_to"`
}

func (r approvalReminders) check(bad func(string, ...any), platform string, timeout time.Duration) {
	r.RemindAfter.check(bad, "approval_reminders.remind_after", "5m")
	r.EscalateAfter.check(bad, "approval_reminders.escalate_after", "10m")
	for _, d := range []struct {
		key string
		d   time.Duration
	}{{"remind_after", r.RemindAfter.Duration}, {"escalate_after", r.EscalateAfter.Duration}} {
		if d.d > 0 && d.d >= timeout {
			bad("approval_reminders.%s %s is not before approval_timeout %s: the request would expire first", d.key, d.d, timeout)
		}
	}
	if (r.EscalateAfter.Duration > 0) != (len(r.EscalateTo) > 0) {
		bad("approval_reminders: escalate_after and escalate_to go together (when, and whom to mention)")
	}
	if r.RemindAfter.Duration > 0 && r.EscalateAfter.Duration > 0 && r.EscalateAfter.Duration <= r.RemindAfter.Duration {
		bad("approval_reminders.escalate_after %s: want it after remind_after %s", r.EscalateAfter.Duration, r.RemindAfter.Duration)
	}
	for _, u := range r.EscalateTo {
		if why := notUserID(platform, u); why != "" {
			bad("approval_reminders.escalate_to: %q is not %s; mentions are by id", u, why)
		}
	}
}
