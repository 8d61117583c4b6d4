package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// sandboxSetup is the kernel sandbox as a run uses it.
type sandboxSetup struct {
	sb *sandbox.Sandbox
	// noSandbox says why commands run unconfined although the sandbox is
	// wanted: every command then needs an approval (fail closed).
	noSandbox string
	off       bool // the operator turned the sandbox off
	summary   string
}

// startSandbox starts the kernel sandbox unless want is "off", and marks
// this process non-dumpable either way. It never fails: a kernel that
// refuses the sandbox makes every command need an approval instead, and
// says so on the log.
func startSandbox(ctx context.Context, want string, hide, workspaces []string, logger *slog.Logger) *sandboxSetup {
	s := &sandboxSetup{}
	switch want {
	case "off":
		s.off = true
		s.summary = "off (sandbox: off): commands run unconfined; only the gate stands between the model and the host"
		logger.Warn("kernel sandbox turned off by the operator: commands run unconfined", "sandbox", "off")
	default:
		sb, err := sandbox.Start(ctx, sandbox.Config{Hide: hide, Workspaces: workspaces})
		if err != nil {
			s.noSandbox = err.Error()
			s.summary = "unavailable (" + err.Error() + "): every command needs an approval; set sandbox: off to run read-only commands unconfined"
			logger.Error("kernel sandbox unavailable: every command needs an approval (fail closed)", "err", err)
		} else {
			s.sb = sb
			ro, rw := sb.Info(sandbox.ReadOnly), sb.Info(sandbox.Approved)
			s.summary = fmt.Sprintf("enforced: read-only commands in a user+mount namespace with Landlock ABI %d; %d secret paths hidden from approved commands", ro.LandlockABI, len(rw.Hidden))
			logger.Info("kernel sandbox enforced", "landlock_abi", ro.LandlockABI, "root", ro.Root, "hidden", rw.Hidden)
		}
	}
	if err := sandbox.Harden(agentcore.SecretName); err != nil {
		logger.Warn("could not mark the process non-dumpable", "err", err)
	}
	return s
}

// exec fills the sandbox fields of an ExecConfig.
func (s *sandboxSetup) exec(c agentcore.ExecConfig) agentcore.ExecConfig {
	c.Sandbox, c.NoSandbox = s.sb, s.noSandbox
	return c
}

// problem is what /readyz reports, "" when the sandbox works or is off.
func (s *sandboxSetup) problem() string {
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
	if s.sb != nil {
		s.sb.Close()
	}
}

// cmdSandbox: thinbot sandbox check [--config FILE] [--json]
func cmdSandbox(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && args[0] == "exec" {
		return cmdSandboxExec(ctx, e, args[1:])
	}
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("%w: thinbot sandbox check [--config FILE] [--json] | thinbot sandbox exec --read-only [--hide PATH]...", errUsage)
	}
	fs := flag.NewFlagSet("sandbox check", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	path := fs.String("config", "", "daemon config `file`: check with its secrets, state dir and workspaces")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	want := e.getenv("THINBOT_SANDBOX")
	var hide, workspaces []string
	if *path != "" {
		c, _, err := loadConfig(*path, e.getenv)
		if err != nil {
			return err
		}
		want = c.Sandbox
		hide = c.protectedPaths(*path)
		for _, cc := range c.Channels {
			if ws, err := filepath.Abs(cc.Workspace); err == nil {
				workspaces = append(workspaces, ws)
			}
		}
	} else if wd, err := os.Getwd(); err == nil {
		hide = []string{filepath.Join(wd, localDir)}
		workspaces = []string{wd}
	}
	r := sandboxReport(ctx, want, hide, workspaces)
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	w := e.stdout
	fmt.Fprintf(w, "kernel:            %s\n", r.Kernel)
	fmt.Fprintf(w, "running as root:   %v\n", r.Root)
	fmt.Fprintf(w, "user namespaces:   %s\n", r.UserNS)
	fmt.Fprintf(w, "landlock:          %s\n", r.Landlock)
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %s\n", mark, c.What)
		if c.Detail != "" {
			fmt.Fprintf(w, "     %s\n", c.Detail)
		}
	}
	fmt.Fprintf(w, "\nthinbot will: %s\n", r.Will)
	return nil
}

type sandboxCheck struct {
	What   string `json:"what"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

type sandboxReportT struct {
	Kernel   string         `json:"kernel"`
	Root     bool           `json:"root"`
	UserNS   string         `json:"user_namespaces"`
	Landlock string         `json:"landlock"`
	Checks   []sandboxCheck `json:"checks"`
	Will     string         `json:"will"`
}

// sandboxReport starts the sandbox as serve would and tries it: a write
// must fail, /tmp must be private, hidden paths must read as empty.
func sandboxReport(ctx context.Context, want string, hide, workspaces []string) sandboxReportT {
	r := sandboxReportT{Root: os.Geteuid() == 0}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		r.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	r.UserNS = "max_user_namespaces=" + readTrim("/proc/sys/user/max_user_namespaces")
	if v := readTrim("/proc/sys/kernel/unprivileged_userns_clone"); v != "?" {
		r.UserNS += ", unprivileged_userns_clone=" + v
	}
	if v := readTrim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); v != "?" {
		r.UserNS += ", apparmor_restrict_unprivileged_userns=" + v
	}
	if want == "off" {
		r.Landlock = "not checked"
		r.Will = "run every command unconfined (sandbox: off); the gate's verdicts apply as they are"
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	sb, err := sandbox.Start(ctx, sandbox.Config{Hide: hide, Workspaces: workspaces})
	if err != nil {
		r.Landlock = "unknown"
		r.Checks = append(r.Checks, sandboxCheck{What: "start the sandbox helpers", Detail: err.Error()})
		r.Will = "FAIL CLOSED: every command, read-only ones included, waits for an approval (set sandbox: off, or THINBOT_SANDBOX=off in a terminal, to run read-only commands unconfined)"
		return r
	}
	defer sb.Close()
	if err := sandbox.Harden(agentcore.SecretName); err != nil { // as serve does
		r.Checks = append(r.Checks, sandboxCheck{What: "harden the daemon process", Detail: err.Error()})
	}
	ro := sb.Info(sandbox.ReadOnly)
	r.Landlock = fmt.Sprintf("ABI %d", ro.LandlockABI)
	r.Checks = append(r.Checks, sandboxCheck{What: "start the sandbox helpers", OK: true})
	dir := "/"
	if len(workspaces) > 0 {
		dir = workspaces[0]
	}
	try := func(what string, m sandbox.Mode, script string, okIf func(out string, code int) bool) {
		var out strings.Builder
		res, err := sb.Run(ctx, m, sandbox.Cmd{Args: []string{"/bin/sh", "-c", script}, Dir: dir, Env: []string{"PATH=" + agentcore.DefaultPath}}, &out)
		c := sandboxCheck{What: what}
		if err != nil {
			c.Detail = err.Error()
		} else {
			c.OK = okIf(out.String(), res.ExitCode)
			if !c.OK {
				c.Detail = fmt.Sprintf("exit %d: %s", res.ExitCode, strings.TrimSpace(out.String()))
			}
		}
		r.Checks = append(r.Checks, c)
	}
	probe := fmt.Sprintf("thinbot-sandbox-probe-%d", os.Getpid())
	try("read-only: cannot create a file in the workspace", sandbox.ReadOnly, "touch "+probe,
		func(out string, code int) bool {
			_, err := os.Stat(filepath.Join(dir, probe))
			return code != 0 && err != nil
		})
	tmp := "/tmp"
	if dir == "/tmp" {
		tmp = "/var/tmp"
	}
	try("read-only: "+tmp+" is private and writable", sandbox.ReadOnly, "echo x > "+tmp+"/"+probe+" && cat "+tmp+"/"+probe,
		func(out string, code int) bool {
			_, err := os.Stat(tmp + "/" + probe)
			return code == 0 && err != nil
		})
	try("read-only: no raw block devices", sandbox.ReadOnly, "ls /dev",
		func(out string, code int) bool {
			return code == 0 && !strings.Contains(out, "vda") && !strings.Contains(out, "sda")
		})
	try("read-only: host processes visible (ps)", sandbox.ReadOnly, "ps -e | wc -l",
		func(out string, code int) bool { var n int; fmt.Sscan(out, &n); return code == 0 && n > 1 })
	try("approved: the daemon's environment holds no secret", sandbox.Approved, fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ", os.Getpid()),
		func(out string, code int) bool {
			for _, l := range strings.Split(out, "\n") {
				if name, val, ok := strings.Cut(l, "="); ok && val != "" && agentcore.SecretName(name) {
					return false
				}
			}
			return true
		})
	try("read-only: cannot read the daemon's environment", sandbox.ReadOnly, fmt.Sprintf("cat /proc/%d/environ", os.Getpid()),
		func(out string, code int) bool { return code != 0 })
	hidden := sb.Info(sandbox.Approved).Hidden
	sort.Strings(hidden)
	for _, h := range hidden {
		try("hidden: "+h, sandbox.Approved, "cat "+shellQuote(h)+" 2>/dev/null; ls -A "+shellQuote(h)+" 2>/dev/null",
			func(out string, code int) bool { return strings.TrimSpace(out) == "" })
	}
	r.Will = "run read-only commands at once in the read-only sandbox, approved commands in the approved sandbox, the bot's secrets hidden from both"
	for _, c := range r.Checks {
		if !c.OK {
			r.Will = "start, but a check above failed: review it before relying on the sandbox"
		}
	}
	return r
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
