package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// limitsConfig is the config file's limits section: what every command,
// read-only or approved, may use. Zero means the default.
type limitsConfig struct {
	// MemoryMiB is the data one process may use (RLIMIT_DATA); default
	// 512, -1 none.
	MemoryMiB int64 `yaml:"memory_mib"`
	// Processes is how many processes the command's user may have at once
	// (RLIMIT_NPROC; root is exempt); default 256, -1 none.
	Processes int64 `yaml:"processes"`
	// CPUSeconds is the CPU time of one process (RLIMIT_CPU); default 60,
	// -1 none. The wall time is budgets.command_timeout.
	CPUSeconds int64 `yaml:"cpu_seconds"`
	// FileSizeMiB is the largest file a command may write; default 1024,
	// -1 none.
	FileSizeMiB int64 `yaml:"file_size_mib"`
	// OutputMiB is how much output thinbot reads from a command before it
	// kills it and says so; default 8.
	OutputMiB int64 `yaml:"output_mib"`
	// TmpMiB is the size of a read-only command's private /tmp; default 64.
	TmpMiB int64 `yaml:"tmp_mib"`
	// MemoryTotalMiB is the memory all of a command's processes may use
	// together (its cgroup); default 1024, -1 none.
	MemoryTotalMiB int64 `yaml:"memory_total_mib"`
	// ProcessesTotal is how many processes and threads a command may have
	// at once, all together (its cgroup; binds root too); default 256, -1
	// none.
	ProcessesTotal int64 `yaml:"processes_total"`
	// CPUs is the share of one CPU a command's processes may use
	// together (its cgroup): 0.5 is half a CPU; default 1, -1 none.
	CPUs float64 `yaml:"cpus"`
	// Cgroup is how commands get their cgroup: auto (default: v2 where the
	// daemon's group is delegated to it, else v1 where it may write the
	// hierarchies, i.e. as root, else rlimits only, said at start), v1 or
	// v2 (required: without it the sandbox does not start and every
	// command needs an approval), off (rlimits only).
	Cgroup string `yaml:"cgroup"`
}

// readOnlyConfig is the config file's readonly section: who read-only
// commands run as and what they may reach.
type readOnlyConfig struct {
	// User read-only commands of a root daemon run as; "" means
	// thinbot-ro, or nobody where it does not exist.
	User string `yaml:"user"`
	// Groups of User; unset means adm and systemd-journal where they exist.
	Groups []string `yaml:"groups"`
	// ConnectPorts are TCP ports read-only commands may connect to (a
	// metrics port); on any host: Landlock filters ports, not addresses.
	ConnectPorts []int `yaml:"connect_ports"`
	// UDP lets read-only commands use UDP (DNS lookups, dig), ICMP (ping)
	// and raw sockets; off by default.
	UDP bool `yaml:"udp"`
	// Sockets are host control sockets read-only commands may reach
	// (/run/docker.sock for docker ps); the others are covered.
	Sockets []string `yaml:"sockets"`
}

// checkSandbox checks the limits and readonly sections.
func (c *daemonConfig) checkSandbox() []error {
	var errs []error
	l := c.Limits
	for name, v := range map[string]int64{"memory_mib": l.MemoryMiB, "processes": l.Processes, "cpu_seconds": l.CPUSeconds, "file_size_mib": l.FileSizeMiB} {
		if v < -1 {
			errs = append(errs, fmt.Errorf("limits.%s %d: want a positive number, or -1 for no limit", name, v))
		}
	}
	if l.OutputMiB < 0 || l.TmpMiB < 0 {
		errs = append(errs, fmt.Errorf("limits.output_mib and limits.tmp_mib must be positive"))
	}
	switch l.Cgroup {
	case "", "auto", "v1", "v2", "off":
	default:
		errs = append(errs, fmt.Errorf("limits.cgroup %q: want auto, v1, v2 or off", l.Cgroup))
	}
	if v := l.MemoryTotalMiB; v < -1 || v > 0 && v < 64 {
		errs = append(errs, fmt.Errorf("limits.memory_total_mib %d: want 64 or more, or -1 for no limit", v))
	}
	if v := l.ProcessesTotal; v < -1 || v > 0 && v < 8 {
		errs = append(errs, fmt.Errorf("limits.processes_total %d: want 8 or more (a pipeline is several processes), or -1 for no limit", v))
	}
	if v := l.CPUs; v != -1 && (v < 0 || v > 0 && v < 0.01) {
		errs = append(errs, fmt.Errorf("limits.cpus %g: want a share of one CPU of 0.01 or more, or -1 for no limit", v))
	}
	if l.MemoryMiB > 0 && l.MemoryMiB < 64 {
		errs = append(errs, fmt.Errorf("limits.memory_mib %d: below 64 MiB most commands (and every Go or Java tool) fail to start", l.MemoryMiB))
	}
	for _, p := range c.ReadOnly.ConnectPorts {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("readonly.connect_ports: %d is not a TCP port", p))
		}
	}
	for _, p := range c.ReadOnly.Sockets {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("readonly.sockets: %q is not an absolute path", p))
		}
	}
	if c.ReadOnly.User == "root" || c.ReadOnly.User == "0" {
		errs = append(errs, fmt.Errorf("readonly.user: read-only commands never run as root"))
	}
	return errs
}

// sandboxConfig is the sandbox.Config that c asks for, hiding hide;
// workspaces and skill folders stay visible (below /tmp, they are bound
// into each read-only command's private /tmp).
func (c *daemonConfig) sandboxConfig(hide, workspaces []string) sandbox.Config {
	ws := append([]string(nil), workspaces...)
	for _, d := range c.SkillsDirs {
		if a, err := filepath.Abs(d); err == nil {
			ws = append(ws, a)
		}
	}
	mib := func(v int64) int64 {
		if v <= 0 {
			return v
		}
		return v << 20
	}
	l := c.Limits
	cfg := sandbox.Config{
		Hide: hide, Workspaces: ws,
		Limits: sandbox.Limits{Memory: mib(l.MemoryMiB), Processes: l.Processes, FileSize: mib(l.FileSizeMiB), Tmp: mib(l.TmpMiB),
			MemoryTotal: mib(l.MemoryTotalMiB), ProcessesTotal: l.ProcessesTotal, CPUs: l.CPUs},
		Cgroup:       l.Cgroup,
		Network:      sandbox.Network{UDP: c.ReadOnly.UDP, Sockets: c.ReadOnly.Sockets},
		ReadOnlyUser: c.ReadOnly.User, ReadOnlyGroups: c.ReadOnly.Groups,
	}
	switch {
	case l.CPUSeconds > 0:
		cfg.Limits.CPU = time.Duration(l.CPUSeconds) * time.Second
	case l.CPUSeconds < 0:
		cfg.Limits.CPU = -1
	}
	for _, p := range c.ReadOnly.ConnectPorts {
		cfg.Network.ConnectTCP = append(cfg.Network.ConnectTCP, uint16(p))
	}
	return cfg
}

// sandboxSetup is the kernel sandbox as a run uses it.
type sandboxSetup struct {
	sb *sandbox.Sandbox
	// noSandbox says why commands run unconfined although the sandbox is
	// wanted: every command then needs an approval (fail closed).
	noSandbox   string
	off         bool // the operator turned the sandbox off
	summary     string
	outputLimit int64
	// started, for a start under way (beginSandbox), is closed once it
	// has ended: sb, noSandbox and summary are set then, not before.
	// done is closed when the goroutine that runs it has ended.
	started chan struct{}
	done    chan struct{}
}

// startSandbox starts the kernel sandbox with the default limits unless
// want is "off".
func startSandbox(ctx context.Context, want string, hide, workspaces []string, logger *slog.Logger) *sandboxSetup {
	return startSandboxWith(ctx, want, sandbox.Config{Hide: hide, Workspaces: workspaces}, 0, logger)
}

// beginSandbox is startSandbox without the wait, for ask, chat, goal and
// the web console without a config: it returns at once, while the helpers
// start beside the caller's store, agent and first model call, none of
// which runs a command. A command waits for the start's outcome
// (agentcore.ExecConfig.Starting, which exec sets), and so does the check
// that lets a pass verdict stand (fail closed): nothing runs while the
// sandbox's state is unknown. The process is made non-dumpable (Harden)
// as the start ends, before that outcome is published, as startSandboxWith
// does right after Start: the helpers' start needs it dumpable, and it is
// so for no longer than in a start that blocks.
func beginSandbox(ctx context.Context, want string, hide, workspaces []string, logger *slog.Logger) *sandboxSetup {
	if want == "off" {
		return startSandbox(ctx, want, hide, workspaces, logger)
	}
	s := &sandboxSetup{started: make(chan struct{}), done: make(chan struct{})}
	// Not cut short when ctx ends (shutdown during the start): the start
	// is bounded by its own timeout, and a cut one would log the sandbox
	// as refused.
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(s.done)
		after := s.start(ctx, want, sandbox.Config{Hide: hide, Workspaces: workspaces}, logger)
		close(s.started)
		after()
	}()
	return s
}

// startSandboxFor starts the kernel sandbox as config c asks.
func startSandboxFor(ctx context.Context, c *daemonConfig, hide, workspaces []string, logger *slog.Logger) *sandboxSetup {
	return startSandboxWith(ctx, c.Sandbox, c.sandboxConfig(hide, workspaces), c.Limits.OutputMiB<<20, logger)
}

// startSandboxWith starts the kernel sandbox unless want is "off", and
// marks this process non-dumpable either way. It never fails: a kernel
// that refuses the sandbox makes every command need an approval instead,
// and says so on the log.
func startSandboxWith(ctx context.Context, want string, cfg sandbox.Config, outputLimit int64, logger *slog.Logger) *sandboxSetup {
	s := &sandboxSetup{outputLimit: outputLimit}
	s.start(ctx, want, cfg, logger)()
	return s
}

// start starts the sandbox into s and then marks this process
// non-dumpable: sandbox.Start must come first, since the helpers' start
// writes their uid_map, which an ordinary user's non-dumpable process
// cannot (their /proc files then belong to root). It returns what is left
// to do that no command needs to wait for: the check of the workspaces.
func (s *sandboxSetup) start(ctx context.Context, want string, cfg sandbox.Config, logger *slog.Logger) (after func()) {
	after = func() {}
	switch want {
	case "off":
		s.off = true
		s.summary = "off (sandbox: off): commands run unconfined; only the gate stands between the model and the host"
		logger.Warn("kernel sandbox turned off by the operator: commands run unconfined", "sandbox", "off")
	default:
		sb, err := sandbox.Start(ctx, cfg)
		if err != nil {
			s.noSandbox = err.Error()
			s.summary = "unavailable (" + err.Error() + "): every command needs an approval; set sandbox: off to run read-only commands unconfined"
			logger.Error("kernel sandbox unavailable: every command needs an approval (fail closed)", "err", err)
		} else {
			s.sb = sb
			s.summary = sb.Summary()
			ro, rw := sb.Info(sandbox.ReadOnly), sb.Info(sandbox.Approved)
			logger.Info("kernel sandbox enforced", "landlock_abi", ro.LandlockABI, "root", ro.Root, "hidden", rw.Hidden,
				"readonly_user", ro.User, "limits", ro.Limits, "limits_by", ro.LimitsBy, "net", ro.Net, "covered", ro.Covered)
			if len(rw.NotInForce) > 0 && cfg.Cgroup != "off" { // off: the operator chose rlimits alone
				logger.Warn("sandbox group limits not in force (limits_by says why)", "not_in_force", rw.NotInForce, "limits_by", rw.LimitsBy)
			}
			if ro.User != "" {
				after = func() { warnUnreadableWorkspaces(ctx, sb, ro.User, cfg.Workspaces, logger) }
			}
		}
	}
	if err := sandbox.Harden(agentcore.SecretName); err != nil {
		logger.Warn("could not mark the process non-dumpable", "err", err)
	}
	return after
}

// warnUnreadableWorkspaces says at start which workspaces a root daemon's
// read-only commands cannot enter: they run as user (thinbot-ro), not as
// root, and a workspace under a private home such as /root would make every
// read-only command there fail with "Permission denied", with nothing on
// the log to say why.
func warnUnreadableWorkspaces(ctx context.Context, sb *sandbox.Sandbox, user string, dirs []string, logger *slog.Logger) {
	for _, u := range sb.UnreadableWorkspaces(ctx, dirs) {
		name, _, _ := strings.Cut(user, " ")
		logger.Warn("read-only commands cannot read this workspace: they run as "+user+", not as root, and will fail there with 'Permission denied'; "+
			"give that user read access (chmod o+rx on the folder and its parents, or setfacl -m u:"+name+":rX), or run thinbot as an ordinary user",
			"workspace", u.Dir, "readonly_user", user, "why", u.Why)
	}
}

// exec fills the sandbox fields of an ExecConfig; for a start under way,
// Starting, which waits for it.
func (s *sandboxSetup) exec(c agentcore.ExecConfig) agentcore.ExecConfig {
	if s.started != nil {
		c.Starting = s.wait
	} else {
		c.Sandbox, c.NoSandbox = s.sb, s.noSandbox
	}
	if s.outputLimit > 0 {
		c.OutputLimit = s.outputLimit
	}
	return c
}

// wait is agentcore.ExecConfig.Starting for a start under way: the
// sandbox and why it is missing, once the start has ended; ctx's error if
// ctx ends first (a start that has ended wins over a done ctx).
func (s *sandboxSetup) wait(ctx context.Context) (*sandbox.Sandbox, string, error) {
	select {
	case <-s.started:
		return s.sb, s.noSandbox, nil
	default:
	}
	select {
	case <-s.started:
		return s.sb, s.noSandbox, nil
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
}

// afterStart returns f made to wait until a start under way has ended.
// It is for python3's version probe (skills.Probe.Python), the one child
// process the start-up of ask, chat, goal and the console may run: no
// child may start while sandbox.Start moves this process into a leaf
// cgroup (v2), where one left behind would keep the group from handing
// its controllers to command groups.
func (s *sandboxSetup) afterStart(f func() (int, int, error)) func() (int, int, error) {
	return func() (int, int, error) {
		if s.started != nil {
			<-s.started
		}
		return f()
	}
}

// problem is what /readyz reports, "" when the sandbox works or is off;
// a start under way is waited for, within ctx.
func (s *sandboxSetup) problem(ctx context.Context) string {
	if s.started != nil {
		if _, _, err := s.wait(ctx); err != nil {
			return "sandbox: starting"
		}
	}
	if s.off {
		return ""
	}
	if s.noSandbox != "" {
		return "sandbox: unavailable, every command needs an approval: " + s.noSandbox
	}
	if err := s.sb.Err(); err != nil {
		return "sandbox: " + err.Error()
	}
	return ""
}

func (s *sandboxSetup) close() {
	if s.done != nil {
		// The start ends, with its check of the workspaces, whose warning
		// a run that needed no command would otherwise never show.
		<-s.done
	}
	if s.sb != nil {
		s.sb.Close()
	}
}

// cmdSandbox: thinbot sandbox check [--config FILE] [--json]. It exits
// non-zero when a check fails.
func cmdSandbox(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "exec" {
		return cmdSandboxExec(ctx, e, args[1:])
	}
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: thinbot sandbox check [--config FILE] [--json] | thinbot sandbox exec --read-only [--hide PATH]...", errUsage)
	}
	fs := newFlags(e, "sandbox check")
	path := fs.String("config", "", "daemon config `file`: check with its secrets, state dir, workspaces, limits and network rules")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	want := e.getenv("THINBOT_SANDBOX")
	var cfg sandbox.Config
	if *path != "" {
		c, err := loadConfig(*path, e.getenv)
		if err != nil {
			return err
		}
		want = c.Sandbox
		var workspaces []string
		for _, cc := range c.Channels {
			if ws, err := filepath.Abs(cc.Workspace); err == nil {
				workspaces = append(workspaces, ws)
			}
		}
		cfg = c.sandboxConfig(c.protectedPaths(*path), workspaces)
	} else if wd, err := os.Getwd(); err == nil {
		cfg = sandbox.Config{Hide: []string{filepath.Join(wd, localDir)}, Workspaces: []string{wd}}
	}
	r := sandbox.CheckSandbox(ctx, cfg, want == "off", agentcore.SecretName)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		r.Print(e.stdout)
	}
	if n := r.Failed(); n > 0 {
		return fmt.Errorf("sandbox check: %d of %d checks failed", n, len(r.Checks))
	}
	return nil
}
