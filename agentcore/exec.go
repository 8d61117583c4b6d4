package agentcore

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// ExecConfig says how commands run.
type ExecConfig struct {
	// Shell runs each command as Shell -c COMMAND. "" means /bin/bash (or
	// /bin/sh where bash is missing).
	Shell string
	// Timeout per command; 0 means 120s.
	Timeout time.Duration
	// CaptureLimit is how many bytes of output are kept in memory (head and
	// tail halves); 0 means 1 MiB. The full size and SHA-256 are always known.
	CaptureLimit int
	// OutputLimit is how many bytes of output are read at most: at the
	// limit thinbot stops reading, kills the command's process group and
	// says so in the result (OutputCut); 0 means 8 MiB. An endless
	// producer (seq inf, yes) then costs milliseconds, not the timeout.
	OutputLimit int64
	// ViewLimit is how many bytes of output the model sees (head and tail,
	// with an "N bytes omitted" marker); 0 means 16 KiB.
	ViewLimit int
	// Environ is the environment to choose from (cmd passes os.Environ()).
	// Only allowlisted names reach a command: see ChildEnv.
	Environ []string
	// AllowEnv names more variables to pass through (exact names, or a
	// prefix ending in "*"). Secrets (AGENT_API_KEY, THINBOT_*) never pass.
	AllowEnv []string
	// Path is the PATH every command gets, whatever the environment says;
	// "" means DefaultPath. Every entry must be an absolute path.
	Path string
	// Sandbox runs commands confined by the kernel: pass verdicts read-only,
	// approved ones with the bot's secrets hidden. Nil runs them directly.
	Sandbox *sandbox.Sandbox
	// NoSandbox, when not empty, says why commands run without a sandbox
	// although one was wanted (the kernel refused it): every command then
	// needs an approval, pass verdicts included (fail closed).
	NoSandbox string
	// Starting, when not nil, is a sandbox start still under way (cmd
	// starts the kernel sandbox beside a run's first model call, which
	// runs nothing): it blocks until the start has ended, or ctx has, and
	// returns the Sandbox and NoSandbox to use instead of the two fields
	// above; with a done ctx it still returns the outcome of a start that
	// has ended. Every command, local or remote, and the check that lets
	// a pass verdict stand without an approval (fail closed) wait for it:
	// nothing runs, and no pass verdict stands, while the sandbox's state
	// is unknown.
	Starting func(ctx context.Context) (sb *sandbox.Sandbox, noSandbox string, err error)
}

// started returns c with the outcome of a sandbox start under way in
// Sandbox and NoSandbox, once the start has ended. Its error (ctx ended
// first) leaves the sandbox unknown: the caller fails closed.
func (c ExecConfig) started(ctx context.Context) (ExecConfig, error) {
	if c.Starting == nil {
		return c, nil
	}
	sb, no, err := c.Starting(ctx)
	if err != nil {
		return c, fmt.Errorf("the kernel sandbox is still starting: %w", err)
	}
	c.Sandbox, c.NoSandbox, c.Starting = sb, no, nil
	return c, nil
}

// DefaultPath is the PATH of every command unless configured otherwise.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// CheckPath returns an error unless every entry of path is absolute: an
// empty or relative entry would let a command in the working directory
// shadow a system one.
func CheckPath(path string) error {
	for _, e := range strings.Split(path, ":") {
		if !strings.HasPrefix(e, "/") {
			return fmt.Errorf("PATH entry %q is not an absolute path", e)
		}
	}
	return nil
}

func (c ExecConfig) withDefaults() ExecConfig {
	if c.Shell == "" {
		c.Shell = "/bin/bash"
		if _, err := exec.LookPath(c.Shell); err != nil {
			c.Shell = "/bin/sh"
		}
	}
	if c.Timeout <= 0 {
		c.Timeout = 120 * time.Second
	}
	if c.CaptureLimit <= 0 {
		c.CaptureLimit = 1 << 20
	}
	if c.OutputLimit <= 0 {
		c.OutputLimit = 8 << 20
	}
	if c.ViewLimit <= 0 {
		c.ViewLimit = 16 << 10
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	return c
}

// baseEnv are the variables a command always receives when set.
var baseEnv = []string{"HOME", "USER", "LOGNAME", "LANG", "LC_*", "TZ", "TERM"}

// ChildEnv returns the allowlisted part of environ: HOME, USER, LOGNAME,
// LANG, LC_*, TZ, TERM and the names in allow, and PATH set to path (the
// environment's PATH never passes: it may hold empty or relative entries).
// AGENT_API_KEY, anything starting with THINBOT_ or AGENT_ and names that
// look like secrets (containing TOKEN, SECRET, PASSWORD or API_KEY) never
// pass, even if allowed explicitly; nor do the variables that change what
// the gate's read-only tools do (toolEnv).
func ChildEnv(environ, allow []string, path string) []string {
	pats := append(append([]string(nil), baseEnv...), allow...)
	out := []string{"PATH=" + path}
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "PATH" || SecretName(name) || changesTools(name) {
			continue
		}
		for _, p := range pats {
			if p == name || (strings.HasSuffix(p, "*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*"))) {
				out = append(out, kv)
				break
			}
		}
	}
	return out
}

// toolEnv are variables that change what a command the gate passes does:
// the gate models bash and the read-only tools as they behave without them
// (CDPATH moves cd, BASH_ENV and ENV run a file at shell start, LD_* load
// code, OPENSSL_CONF, TAR_OPTIONS and GIT_* change what openssl, tar and
// git read, write or run). They never reach a command, even when allowed
// by name or pattern.
var toolEnv = []string{"CDPATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "IFS", "PROMPT_COMMAND",
	"OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES", "TAR_OPTIONS", "GREP_OPTIONS", "LESSOPEN", "LESSCLOSE",
	"JQ_LIBRARY_PATH", "LD_*", "GIT_*", "BASH_FUNC_*"}

// changesTools reports whether name is one of toolEnv.
func changesTools(name string) bool {
	for _, p := range toolEnv {
		if p == name || (strings.HasSuffix(p, "*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*"))) {
			return true
		}
	}
	return false
}

// SecretName reports whether an environment variable's name marks a
// secret: AGENT_* and THINBOT_*, or a name containing TOKEN, SECRET,
// PASSWORD or API_KEY.
func SecretName(name string) bool {
	u := strings.ToUpper(name)
	if strings.HasPrefix(u, "AGENT_") || strings.HasPrefix(u, "THINBOT_") {
		return true
	}
	for _, s := range []string{"TOKEN", "SECRET", "PASSWORD", "API_KEY", "APIKEY"} {
		if strings.Contains(u, s) {
			return true
		}
	}
	return false
}

// ExecResult is the outcome of one command.
type ExecResult struct {
	ExitCode int
	// Output is stdout and stderr interleaved, head and tail kept within
	// the capture limit.
	Output   []byte
	Size     int64  // bytes the command wrote in all
	SHA256   string // of all the bytes it wrote
	Duration time.Duration
	TimedOut bool
	// OutputCut reports that the command wrote more than OutputLimit
	// bytes: Size bytes were read, the rest was not, and the process group
	// was killed.
	OutputCut bool
	// Cancelled reports that ctx ended the command; Cause says why, when
	// ctx's end had a StopCause.
	Cancelled bool
	Cause     *StopCause
	// Limit says which limit of the command's cgroup it hit ("killed:
	// memory limit 1 GiB", "process limit 256 reached: a fork failed"),
	// "" for none or without cgroups.
	Limit string
	// Targets and Remote are set for a command run on remote hosts: the
	// hosts, and each one's result; Output is then the summary.
	Targets []string
	Remote  []fleet.Result
}

// Exec runs command with the shell in dir, in its own process group, with
// the allowlisted environment; with a sandbox configured, in the sandbox
// of mode m. When ctx is done or the timeout passes, the whole process
// group is killed. The error is non-nil only when the command could not be
// started; a non-zero exit is reported in ExitCode.
func Exec(ctx context.Context, cfg ExecConfig, m sandbox.Mode, dir, command string) (ExecResult, error) {
	cfg, serr := cfg.started(ctx)
	if serr != nil {
		return ExecResult{}, serr
	}
	cfg = cfg.withDefaults()
	ctxT, cancelT := context.WithTimeout(ctx, cfg.Timeout)
	defer cancelT()
	ctx2, cancel := context.WithCancelCause(ctxT)
	defer cancel(nil)
	out := &limitWriter{w: fleet.NewCapture(cfg.CaptureLimit), left: cfg.OutputLimit, stop: func() { cancel(errOutputLimit) }}
	env := ChildEnv(cfg.Environ, cfg.AllowEnv, cfg.Path)
	if cfg.Sandbox != nil {
		return execSandboxed(ctx, ctx2, cfg, m, dir, command, env, out)
	}
	cmd := exec.CommandContext(ctx2, cfg.Shell, "-c", command)
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Negative pid: the whole group, so pipelines and background
		// children die with the shell.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// Children that keep the output pipe open must not hold Wait forever.
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	err := cmd.Start()
	if err != nil {
		return ExecResult{}, fmt.Errorf("start %s: %w", cfg.Shell, err)
	}
	err = cmd.Wait()
	// Kill what is left of the group even after a normal exit: a command
	// must not leave background processes behind.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res := execResult(ctx, ctx2, out, start, cmd.ProcessState.ExitCode())
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) && ctx2.Err() == nil {
		return res, fmt.Errorf("wait: %w", err)
	}
	return res, nil
}

func execSandboxed(ctx, ctx2 context.Context, cfg ExecConfig, m sandbox.Mode, dir, command string, env []string, out *limitWriter) (ExecResult, error) {
	shell := cfg.Shell
	if !strings.HasPrefix(shell, "/") {
		p, err := exec.LookPath(shell)
		if err != nil {
			return ExecResult{}, fmt.Errorf("shell %s: %w", shell, err)
		}
		shell = p
	}
	start := time.Now()
	r, err := cfg.Sandbox.Run(ctx2, m, sandbox.Cmd{Args: []string{shell, "-c", command}, Dir: dir, Env: env}, out)
	if err != nil {
		return ExecResult{}, fmt.Errorf("start %s: %w", shell, err)
	}
	res := execResult(ctx, ctx2, out, start, r.ExitCode)
	res.Limit = r.Limit
	return res, nil
}

// errOutputLimit ends a command that wrote more than OutputLimit bytes.
var errOutputLimit = errors.New("output limit reached")

// limitWriter passes at most left bytes to w; at the limit it calls stop
// (which kills the command) and fails every later write, so the copy from
// the command's pipe stops reading.
type limitWriter struct {
	w    *fleet.Capture
	left int64
	cut  bool
	stop func()
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.cut {
		return 0, errOutputLimit
	}
	if int64(len(p)) > l.left {
		n, _ := l.w.Write(p[:l.left])
		l.left, l.cut = 0, true
		l.stop()
		return n, errOutputLimit
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// execResult is how a command ended: what it wrote, and whether ctx (the
// caller's), the output limit or ctx2 (with the timeout) ended it.
func execResult(ctx, ctx2 context.Context, lw *limitWriter, start time.Time, code int) ExecResult {
	out := lw.w
	res := ExecResult{
		Output:    out.Bytes(),
		Size:      out.Size(),
		SHA256:    out.SHA256(),
		Duration:  time.Since(start),
		ExitCode:  code,
		OutputCut: lw.cut,
	}
	if ctx2.Err() != nil && !lw.cut {
		res.Cancelled = ctx.Err() != nil
		res.TimedOut = !res.Cancelled
		if res.Cancelled {
			res.Cause = CauseOf(ctx)
		}
	}
	return res
}
