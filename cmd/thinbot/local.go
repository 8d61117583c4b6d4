package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/openai"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// localDir is where the terminal front end keeps a directory's sessions.
const localDir = ".thinbot"

// localSession is the id of a directory's continuing session.
const localSession = "cli"

// localFlags are the flags of ask, chat and goal.
type localFlags struct {
	allowAll    bool
	withSession bool
	text        bool
	policy      string
	timeout     time.Duration
	maxSteps    int
	dir         string
	verbose     bool
	window      int
}

func (f *localFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.allowAll, "a", false, "run commands that need confirmation without asking (deny still applies)")
	fs.BoolVar(&f.allowAll, "allow-all", false, "same as -a")
	fs.BoolVar(&f.withSession, "s", false, "load and save this directory's session")
	fs.BoolVar(&f.withSession, "with-session", false, "same as -s")
	fs.BoolVar(&f.text, "text", false, "use the text protocol instead of tool calling")
	fs.StringVar(&f.policy, "policy", "", "gate policy `file` (YAML) replacing or extending the defaults")
	fs.DurationVar(&f.timeout, "timeout", 0, "per-command timeout (default 120s)")
	fs.IntVar(&f.maxSteps, "max-steps", 0, "maximum tool-using steps per run (default 30, goal mode 100)")
	fs.StringVar(&f.dir, "C", "", "work in `dir` instead of the current directory")
	fs.BoolVar(&f.verbose, "v", false, "log details to stderr")
	fs.IntVar(&f.window, "context-window", 0, "the model's context window in tokens (default AGENT_CONTEXT_WINDOW, else 32768); compaction starts at 75% of it")
}

// local is the wiring of a terminal run.
type local struct {
	agent *agentcore.Agent
	db    *store.DB
	dir   string
	set   skills.Set
	sbx   *sandboxSetup
	fleet *fleet.Fleet
	log   *slog.Logger
}

// Close stops the sandbox and closes the store, logging the chain head
// first: a log kept elsewhere then anchors the chain, as serve's does.
func (l *local) Close() error {
	seq, hash := chainHead(l.db)
	l.log.Info("chain head", "seq", seq, "hash", hash)
	l.sbx.close()
	if l.fleet != nil {
		_ = l.fleet.Close()
	}
	return l.db.Close()
}

// modelConfig reads the model endpoint from the environment.
func modelConfig(e *env) (openai.Config, error) {
	cfg := openai.Config{
		BaseURL: e.getenv("AGENT_BASE_URL"),
		Model:   e.getenv("AGENT_MODEL"),
		APIKey:  e.getenv("AGENT_API_KEY"),
	}
	if cfg.BaseURL == "" {
		return cfg, errors.New("AGENT_BASE_URL is not set (e.g. export AGENT_BASE_URL=http://10.0.0.8:8000/v1)")
	}
	if cfg.Model == "" {
		return cfg, errors.New("AGENT_MODEL is not set (e.g. export AGENT_MODEL=Qwen3-32B)")
	}
	return cfg, nil
}

// loadPolicy returns the default policy, or the file's.
func loadPolicy(path string) (*gate.Policy, error) {
	p := gate.DefaultPolicy()
	if path == "" {
		return p, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	p, err = gate.ParsePolicy(data, p)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	return p, nil
}

// skillDirs is the skill search path: AGENT_SKILLS_DIR, then ./skills of dir.
func skillDirs(e *env, dir string) []string {
	var dirs []string
	for _, d := range strings.Split(e.getenv("AGENT_SKILLS_DIR"), ":") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	return append(dirs, filepath.Join(dir, "skills"))
}

// visibleFolders are the folders commands must see when run from dir: dir
// itself and the existing AGENT_SKILLS_DIR folders (./skills is inside
// dir). The sandbox binds those below /tmp into each read-only command's
// private /tmp, so a skill's script found there also runs there.
func visibleFolders(e *env, dir string) []string {
	out := []string{dir}
	for _, d := range skillDirs(e, dir) {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			if a, err := filepath.Abs(d); err == nil && !strings.HasPrefix(a+"/", dir+"/") {
				out = append(out, a)
			}
		}
	}
	return out
}

// configDir is the terminal front end's config folder: $THINBOT_CONFIG_DIR,
// else $XDG_CONFIG_HOME/thinbot, else ~/.config/thinbot. Its AGENT.md is the
// global instruction layer and its COMPACT.md replaces the compaction prompt.
func configDir(e *env) string {
	if d := e.getenv("THINBOT_CONFIG_DIR"); d != "" {
		return d
	}
	if d := e.getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "thinbot")
	}
	return filepath.Join(e.getenv("HOME"), ".config", "thinbot")
}

func skillProbe(e *env) skills.Probe {
	return skills.Probe{Getenv: e.getenv, UID: -1}
}

func openLocal(e *env, f *localFlags) (*local, error) {
	dir := f.dir
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	mc, err := modelConfig(e)
	if err != nil {
		return nil, err
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	mc.Logger = logger
	model, err := openai.New(mc)
	if err != nil {
		return nil, err
	}
	policy, err := loadPolicy(f.policy)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, localDir)
	fl, keys, err := localFleet(e)
	if err != nil {
		return nil, err
	}
	hidden := append([]string{state}, keys...)
	if why := workspaceProblem(dir, hidden); why != "" {
		return nil, fmt.Errorf("workspace %s", why)
	}
	// The state dir exists before the sandbox starts: it hides only paths
	// that exist, so a first run would otherwise leave it readable.
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	policy = policy.WithProtected(hidden...)
	// The helpers start while the store opens and the first model call is
	// made; commands wait for them (beginSandbox).
	sbx := beginSandbox(context.Background(), e.getenv("THINBOT_SANDBOX"), hidden, visibleFolders(e, dir), logger)
	db, err := store.Open(filepath.Join(state, "events.db"), &store.Options{Logger: logger})
	if err != nil {
		sbx.close()
		return nil, err
	}
	window := f.window
	if window == 0 {
		if v := e.getenv("AGENT_CONTEXT_WINDOW"); v != "" {
			if window, err = strconv.Atoi(v); err != nil || window < 0 {
				db.Close()
				sbx.close()
				return nil, fmt.Errorf("AGENT_CONTEXT_WINDOW=%q: want a number of tokens", v)
			}
		}
	}
	lock, err := readSkillsLock(e.getenv("AGENT_SKILLS_LOCK"))
	if err != nil {
		db.Close()
		sbx.close()
		return nil, err
	}
	probe := skillProbe(e)
	probe.Python = sbx.afterStart((&skills.PythonProbe{}).Version)
	set := skills.Load(skillDirs(e, dir), skills.Options{Probe: probe, Lock: lock, Logger: logger})
	agent, err := agentcore.New(agentcore.Config{
		Store: db, Model: model, Policy: policy, Skills: set, TextProtocol: f.text, ContextWindow: window,
		GlobalInstructions: readText(filepath.Join(configDir(e), "AGENT.md")),
		Secrets:            []string{mc.APIKey},
		CompactPrompt:      readText(filepath.Join(configDir(e), "COMPACT.md")),
		Exec:               sbx.exec(agentcore.ExecConfig{Timeout: f.timeout, Environ: os.Environ()}),
		Budgets:            agentcore.Budgets{MaxSteps: f.maxSteps},
		Fleet:              fl,
		Logger:             logger,
	})
	if err != nil {
		db.Close()
		sbx.close()
		return nil, err
	}
	// Hidden skills are recorded, with the reason, like every decision.
	for _, fl := range set.Filtered {
		if _, err := agent.Note("system:skills", agentcore.EvSkillFiltered, "system", fl); err != nil {
			db.Close()
			sbx.close()
			return nil, err
		}
	}
	// The chain head goes to stderr at exit, whatever the log level.
	headLog := slog.New(slog.NewTextHandler(e.stderr, nil))
	return &local{agent: agent, db: db, dir: dir, set: set, sbx: sbx, fleet: fl, log: headLog}, nil
}

// progress prints each command with its verdict, and a short view of its
// result, to w (stderr in one-shot mode, so stdout carries only the answer).
func progress(w io.Writer) agentcore.Hooks {
	return agentcore.Hooks{
		Command: func(c agentcore.CommandInfo) {
			what := c.Command
			if c.Tool != agentcore.ToolRun {
				what = c.Tool + " " + what
			}
			if len(c.Targets) > 0 {
				what += "  (on " + agentcore.TargetSummary(c.Targets) + ")"
			}
			fmt.Fprintf(w, "[%s] %s\n", c.Verdict, what)
			if c.Action == "refuse" {
				fmt.Fprintf(w, "  refused: %s\n", c.Reason)
			}
		},
		Result: func(c agentcore.CommandInfo, content string, isErr bool) {
			if c.Tool == agentcore.ToolSkill {
				fmt.Fprintf(w, "[skill] %s\n", c.Command)
				return
			}
			lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
			if len(c.Targets) > 0 {
				lines = remoteView(lines)
			} else if len(lines) > 4 {
				lines = append(lines[:4], fmt.Sprintf("... (%d more lines)", len(lines)-4))
			}
			for _, l := range lines {
				fmt.Fprintf(w, "  | %s\n", l)
			}
		},
	}
}

// remoteView is the terminal's short view of a fan-out summary: the count
// line and every "== hosts (status)" line (which hosts failed, timed out,
// were stopped, not started or unreachable, and why), without the outputs
// under them, which the model and the chain have in full. A view cut to
// its first lines hid the unreachable list.
func remoteView(lines []string) []string {
	const max = 40
	var out []string
	hidden := 0
	for i, l := range lines {
		if (i == 0 || strings.HasPrefix(l, "== ")) && len(out) < max {
			out = append(out, l)
		} else if l != "" {
			hidden++
		}
	}
	if hidden > 0 {
		out = append(out, fmt.Sprintf("... (%d output lines not shown)", hidden))
	}
	return out
}

// runError turns an unsuccessful result into the one-line error of a
// non-interactive run.
func runError(res agentcore.Result, err error) error {
	if res.Status == agentcore.StatusCancelled && res.Cause != nil {
		return fmt.Errorf("run stopped: %w", res.Cause)
	}
	if err != nil {
		return err
	}
	switch res.Status {
	case agentcore.StatusAnswered, agentcore.StatusDone:
		return nil
	}
	return fmt.Errorf("run ended: %s", res.Status)
}

func cmdAsk(ctx context.Context, e *env, args []string) error {
	return oneShot(ctx, e, "ask", args, false)
}

func cmdGoal(ctx context.Context, e *env, args []string) error {
	return oneShot(ctx, e, "goal", args, true)
}

// oneShot runs ask and goal: one turn, the answer on stdout, progress on
// stderr, non-zero exit on failure.
func oneShot(ctx context.Context, e *env, name string, args []string, goal bool) error {
	fs := newFlags(e, name)
	var f localFlags
	f.register(fs.FlagSet)
	if err := fs.parse(args); err != nil {
		return err
	}
	text := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if text == "" {
		return fmt.Errorf("%w: thinbot %s [flags] 'TEXT'", errUsage, name)
	}
	defer tuneGC(e.getenv)()
	l, err := openLocal(e, &f)
	if err != nil {
		return err
	}
	defer l.Close()
	session := localSession
	if !f.withSession {
		// Recorded in the chain like every run, but not continued later.
		session = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	}
	ctx, stop := interruptible(ctx, e)
	defer stop()
	res, err := l.agent.Run(ctx, agentcore.Turn{
		Session: session, Actor: "user:" + userName(e), Text: text, Dir: l.dir,
		Goal: goal, AllowAll: f.allowAll, Hooks: progress(e.stderr),
	})
	if res.Answer != "" {
		fmt.Fprintln(e.stdout, strings.TrimSpace(res.Answer))
	}
	return runError(res, err)
}

func userName(e *env) string {
	if u := e.getenv("USER"); u != "" {
		return u
	}
	return "local"
}

// interruptible returns a context that the first Ctrl+C cancels, its
// cause the user's interrupt (which the run records).
func interruptible(ctx context.Context, e *env) (context.Context, func()) {
	ctx, cancelCause := context.WithCancelCause(ctx)
	if e.interrupts == nil {
		return ctx, func() { cancelCause(nil) }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-e.interrupts:
			fmt.Fprintln(e.stderr, "\n(interrupted)")
			cancelCause(&agentcore.StopCause{Kind: agentcore.StopUser, By: "user:" + userName(e), Via: "Ctrl+C"})
		case <-done:
		case <-ctx.Done():
		}
	}()
	return ctx, func() { close(done); wg.Wait(); cancelCause(nil) }
}

// lineReader reads stdin lines in one goroutine so that a prompt can also
// wait for Ctrl+C. Its goroutine ends when stdin does.
type lineReader struct {
	lines chan string
	err   error
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
		lr.err = sc.Err()
		close(lr.lines)
	}()
	return lr
}

// terminalApprover asks on the terminal: y/N showing command and reason.
type terminalApprover struct {
	e     *env
	lines *lineReader
}

var _ agentcore.Approver = (*terminalApprover)(nil)

// Ask shows the request on the terminal; there is nothing to update later,
// so it is shown nowhere the run records.
func (t *terminalApprover) Ask(_ context.Context, a agentcore.Approval) (string, error) {
	fmt.Fprintf(t.e.stderr, "\nThe model wants to run (%s):\n    %s\n", a.Rule, a.Command)
	if len(a.Targets) > 0 {
		fmt.Fprintf(t.e.stderr, "  on %s (%s)\n", agentcore.TargetSummary(a.Targets), agentcore.LoginSummary(a.Logins))
	}
	if a.Reason != "" {
		fmt.Fprintf(t.e.stderr, "  reason: %s\n", a.Reason)
	}
	fmt.Fprint(t.e.stderr, "Run it? [y/N] ")
	return "", nil
}

// Await reads the answer: y or yes approves, anything else denies.
func (t *terminalApprover) Await(ctx context.Context, _ agentcore.Approval, _ string) (agentcore.ApprovalDecision, error) {
	select {
	case line, ok := <-t.lines.lines:
		if !ok {
			return agentcore.ApprovalDecision{By: "terminal", Why: "end of input"}, nil
		}
		ans := strings.ToLower(strings.TrimSpace(line))
		if ans == "y" || ans == "yes" {
			return agentcore.ApprovalDecision{Approved: true, By: "user:" + userName(t.e)}, nil
		}
		return agentcore.ApprovalDecision{By: "user:" + userName(t.e), Why: "denied at the terminal"}, nil
	case <-ctx.Done():
		return agentcore.ApprovalDecision{}, ctx.Err()
	}
}

// Decided does nothing: the answer was typed on this terminal, so it is
// already shown.
func (t *terminalApprover) Decided(context.Context, agentcore.Approval, string, agentcore.ApprovalDecision, error) {
}
