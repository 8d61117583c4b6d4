package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// Check is one finding of Report.
type Check struct {
	What   string `json:"what"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Report is what `thinbot sandbox check` prints: what the kernel offers,
// what the sandbox enforced when started as the daemon would start it, and
// what each probe found.
type Report struct {
	Kernel   string  `json:"kernel"`
	Root     bool    `json:"root"`
	UserNS   string  `json:"user_namespaces"`
	Landlock string  `json:"landlock"`
	Limits   string  `json:"limits,omitempty"`
	Cgroup   string  `json:"cgroup,omitempty"`
	User     string  `json:"readonly_user,omitempty"`
	Net      string  `json:"readonly_net,omitempty"`
	Covered  string  `json:"covered_sockets,omitempty"`
	RootCost string  `json:"root_costs,omitempty"`
	Checks   []Check `json:"checks"`
	Will     string  `json:"will"`
}

// Failed returns how many checks failed.
func (r Report) Failed() int {
	n := 0
	for _, c := range r.Checks {
		if !c.OK {
			n++
		}
	}
	return n
}

// Print writes the report as text.
func (r Report) Print(w io.Writer) {
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-19s%s\n", k+":", v)
		}
	}
	line("kernel", r.Kernel)
	line("running as root", fmt.Sprint(r.Root))
	line("user namespaces", r.UserNS)
	line("landlock", r.Landlock)
	line("limits", r.Limits)
	line("cgroup", r.Cgroup)
	line("read-only user", r.User)
	line("read-only network", r.Net)
	line("covered sockets", r.Covered)
	line("what root costs", r.RootCost)
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
}

// CheckSandbox starts the sandbox as the daemon would with cfg (off: the
// operator turned it off) and probes it: writes fail, /tmp is private to
// each command, the network and the daemon are out of reach, hidden paths
// cannot be read. A hidden path may still be seen by name (ls of its
// directory lists it): hidden means its content cannot be read, so the
// probe reads content. secret names the environment variables Harden
// blanks, as the daemon's does. Call it in a process that has not yet
// started its own sandbox.
func CheckSandbox(ctx context.Context, cfg Config, off bool, secret func(string) bool) Report {
	r := Report{Root: os.Geteuid() == 0}
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
	r.Cgroup = cgroupSummary()
	if off {
		r.Landlock = "not checked"
		r.Will = "run every command unconfined (sandbox: off); the gate's verdicts apply as they are"
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sb, err := Start(ctx, cfg)
	if err != nil {
		r.Landlock = "unknown"
		r.Checks = append(r.Checks, Check{What: "start the sandbox helpers", Detail: err.Error()})
		r.Will = "FAIL CLOSED: every command, read-only ones included, waits for an approval (set sandbox: off, or THINBOT_SANDBOX=off in a terminal, to run read-only commands unconfined)"
		return r
	}
	defer sb.Close()
	if err := Harden(secret); err != nil { // as serve does
		r.Checks = append(r.Checks, Check{What: "harden the daemon process", Detail: err.Error()})
	}
	ro, rw := sb.Info(ReadOnly), sb.Info(Approved)
	r.Landlock = fmt.Sprintf("ABI %d", ro.LandlockABI)
	l := ro.Limits
	r.Limits = fmt.Sprintf("rlimits per process: memory %s (RLIMIT_DATA), CPU %s; per user: %d processes; files up to %s; private /tmp %s",
		size(l.Memory), l.CPU, l.Processes, size(l.FileSize), size(l.Tmp))
	grouped := strings.HasPrefix(ro.LimitsBy, "cgroup") && strings.HasPrefix(rw.LimitsBy, "cgroup")
	if grouped {
		// Only what the group's controllers put in force.
		inForce, _, _ := strings.Cut(rw.LimitsBy, ";")
		var parts []string
		if strings.Contains(inForce, "memory") {
			parts = append(parts, "memory "+size(l.MemoryTotal))
		}
		if strings.Contains(inForce, "pids") && l.ProcessesTotal > 0 {
			parts = append(parts, fmt.Sprintf("%d processes", l.ProcessesTotal))
		} else if strings.Contains(inForce, "pids") {
			parts = append(parts, "processes: unlimited")
		}
		if strings.Contains(inForce, "cpu") && !strings.Contains(inForce, "no controllers") {
			parts = append(parts, cpus(l.CPUs)+" CPU")
		}
		if len(parts) == 0 {
			parts = append(parts, "no limit (no controllers), killed and emptied when it ends")
		}
		r.Limits += "; per command, all its processes together (cgroup): " + strings.Join(parts, ", ")
	}
	if len(rw.NotInForce) > 0 {
		r.Limits += "; NOT in force (see cgroup): " + strings.Join(rw.NotInForce, ", ")
	}
	r.Cgroup = "read-only commands: " + ro.LimitsBy
	if rw.LimitsBy != ro.LimitsBy {
		r.Cgroup += "; approved commands: " + rw.LimitsBy
	} else {
		r.Cgroup = "both tiers: " + ro.LimitsBy
	}
	r.User = ro.User
	if r.User == "" {
		r.User = "the daemon's own user"
	}
	r.Net = ro.Net
	r.Covered = strings.Join(ro.Covered, " ")
	if r.Covered == "" {
		r.Covered = "(none present)"
	}
	if r.Root {
		r.RootCost = "read-only commands run as " + ro.User + " with no capabilities: they read what that user and its groups may (not /etc/shadow, /root, 0600 files; ss -p and lsof show only its own processes); " +
			"approved commands run as root without CAP_SYS_PTRACE, with the kernel's usermode-helper knobs read-only; "
		switch {
		case grouped && strings.Contains(rw.LimitsBy, "pids") && l.ProcessesTotal <= 0:
			r.RootCost += "RLIMIT_NPROC does not bind root and processes_total turns their cgroup's off, so approved commands have no process limit"
		case grouped && strings.Contains(rw.LimitsBy, "pids"):
			r.RootCost += fmt.Sprintf("RLIMIT_NPROC does not bind root, so their process limit is their cgroup's (%d), and /sys/fs/cgroup is read-only to them so that they cannot leave it", l.ProcessesTotal)
		default:
			r.RootCost += "RLIMIT_NPROC does not bind root and no cgroup caps them (" + rw.LimitsBy + "), so approved commands have no process limit"
		}
	}
	r.Checks = append(r.Checks, Check{What: "start the sandbox helpers", OK: true})
	dir := "/"
	if len(cfg.Workspaces) > 0 {
		dir = cfg.Workspaces[0]
	}
	try := func(what string, m Mode, script string, okIf func(out string, code int) bool) {
		var out strings.Builder
		res, err := sb.Run(ctx, m, Cmd{Args: []string{"/bin/sh", "-c", script}, Dir: dir, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}, &out)
		c := Check{What: what}
		if err != nil {
			c.Detail = err.Error()
		} else {
			c.OK = okIf(out.String(), res.ExitCode)
			if !c.OK {
				c.Detail = fmt.Sprintf("exit %d: %s", res.ExitCode, firstLines(out.String(), 3))
			}
		}
		r.Checks = append(r.Checks, c)
	}
	if len(cfg.Workspaces) > 0 {
		// A root daemon's read-only commands run as an unprivileged user:
		// a workspace only root can read leaves them nothing to work on.
		try("read-only: "+r.User+" can list the workspace "+dir, ReadOnly, "ls -A . >/dev/null",
			func(out string, code int) bool { return code == 0 })
	}
	probe := fmt.Sprintf("thinbot-sandbox-probe-%d", os.Getpid())
	try("read-only: cannot create a file in the workspace", ReadOnly, "touch "+probe,
		func(out string, code int) bool {
			_, err := os.Stat(filepath.Join(dir, probe))
			return code != 0 && err != nil
		})
	tmp := "/tmp"
	if dir == "/tmp" {
		tmp = "/var/tmp"
	}
	try("read-only: "+tmp+" is private and writable", ReadOnly, "echo x > "+tmp+"/"+probe+" && cat "+tmp+"/"+probe,
		func(out string, code int) bool {
			_, err := os.Stat(tmp + "/" + probe)
			return code == 0 && err != nil
		})
	try("read-only: the next command gets an empty "+tmp, ReadOnly, "cat "+tmp+"/"+probe,
		func(out string, code int) bool { return code != 0 })
	try("read-only: no raw block devices", ReadOnly, "ls /dev",
		func(out string, code int) bool {
			return code == 0 && !strings.Contains(out, "vda") && !strings.Contains(out, "sda")
		})
	try("read-only: host processes visible (ps)", ReadOnly, "ps -e | wc -l",
		func(out string, code int) bool { var n int; fmt.Sscan(out, &n); return code == 0 && n > 1 })
	if ro.LandlockABI >= 4 {
		try("read-only: TCP connects refused (Landlock)", ReadOnly, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/1'",
			func(out string, code int) bool { return code != 0 && strings.Contains(out, "ermission denied") })
	}
	if !cfg.Network.UDP {
		try("read-only: UDP refused (seccomp)", ReadOnly, "command -v bash >/dev/null && bash -c 'echo x > /dev/udp/127.0.0.1/9'",
			func(out string, code int) bool { return code != 0 && strings.Contains(out, "ermission denied") })
	}
	try("read-only: cannot signal the daemon", ReadOnly, fmt.Sprintf("kill -0 %d", os.Getpid()),
		func(out string, code int) bool { return code != 0 })
	try("read-only: cannot read the daemon's environment", ReadOnly, fmt.Sprintf("cat /proc/%d/environ", os.Getpid()),
		func(out string, code int) bool { return code != 0 })
	try("approved: the daemon's environment is empty", Approved, fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ", os.Getpid()),
		func(out string, code int) bool {
			for _, l := range strings.Split(out, "\n") {
				if name, val, ok := strings.Cut(l, "="); ok && val != "" && name != "" {
					return false
				}
			}
			return true
		})
	if grouped {
		for _, m := range []Mode{ReadOnly, Approved} {
			try(m.String()+": the command runs in a cgroup of its own", m, "cat /proc/self/cgroup",
				func(out string, code int) bool { return code == 0 && strings.Contains(out, "/thinbot-") })
			var left string
			try(m.String()+": what a command leaves behind (setsid) is killed with its group", m, "setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!",
				func(out string, code int) bool { left = strings.TrimSpace(out); return code == 0 && left != "" })
			if left != "" && outlived(left) {
				c := &r.Checks[len(r.Checks)-1]
				c.OK, c.Detail = false, "pid "+left+" outlived its command"
			}
		}
	}
	if grouped {
		// Every cgroup file system, and the command's own groups and
		// their parents found through /proc/self/cgroup (at any depth).
		const leave = `for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/*/*/cgroup.procs; do [ -e $f ] && echo $$ > $f 2>/dev/null && echo moved $f; done
while IFS=: read -r id ctl g; do for m in /sys/fs/cgroup/$ctl /sys/fs/cgroup/${ctl#name=} /sys/fs/cgroup/unified /sys/fs/cgroup; do [ -d "$m$g" ] || continue
  for f in "$m$g/../cgroup.procs" "$m$g/../tasks"; do [ -e "$f" ] && echo $$ > "$f" 2>/dev/null && echo moved "$f"; done
  for f in memory.limit_in_bytes memory.max pids.max cpu.cfs_quota_us cpu.max; do [ -e "$m$g/$f" ] && echo max > "$m$g/$f" 2>/dev/null && echo raised "$m$g/$f"; [ -e "$m$g/$f" ] && echo -1 > "$m$g/$f" 2>/dev/null && echo raised "$m$g/$f"; done
done; done < /proc/self/cgroup; exit 0`
		for _, m := range []Mode{ReadOnly, Approved} {
			try(m.String()+": cannot move itself out of its cgroup or raise its limits", m, leave,
				func(out string, code int) bool {
					return code == 0 && !strings.Contains(out, "moved") && !strings.Contains(out, "raised")
				})
		}
	}
	if r.Root {
		try("approved: kernel.core_pattern is read-only", Approved, "cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern",
			func(out string, code int) bool { return code != 0 })
	}
	hidden := append([]string(nil), rw.Hidden...)
	sort.Strings(hidden)
	for _, h := range hidden {
		probeHidden(try, h)
	}
	r.Will = "run read-only commands at once in the read-only sandbox, approved commands in the approved sandbox, the bot's secrets hidden from both"
	if r.Failed() > 0 {
		r.Will = "start, but a check above failed: review it before relying on the sandbox"
	}
	return r
}

// probeHidden checks that commands of both modes cannot read the content of
// hidden path h: a directory lists as empty, a file reads as empty. Its
// name may still show in its parent's listing.
func probeHidden(try func(string, Mode, string, func(string, int) bool), h string) {
	st, err := os.Stat(h)
	if err != nil {
		return
	}
	q := textfmt.ShellQuote(h)
	var want func(out string, code int) bool
	var script string
	if st.IsDir() {
		script = "ls -A " + q
		want = func(out string, _ int) bool { return strings.TrimSpace(out) == "" }
	} else {
		// A hidden file reads as /dev/null: no byte comes out.
		script = "head -c 64 " + q + " 2>/dev/null | od -An -c"
		want = func(out string, _ int) bool { return strings.TrimSpace(out) == "" }
	}
	for _, m := range []Mode{ReadOnly, Approved} {
		try(fmt.Sprintf("%s: cannot read hidden %s", m, h), m, script+" 2>/dev/null", want)
	}
}

func size(n int64) string {
	switch {
	case n < 0:
		return "unlimited"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// cpus says a share of CPU in words.
func cpus(v float64) string {
	if v < 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g", v)
}

// cgroupSummary says which cgroup hierarchy this process is in; once the
// sandbox started, the report says what its helpers put in force instead.
func cgroupSummary() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "unknown"
	}
	unified := ""
	hybrid := false
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			unified = p
		} else {
			hybrid = true
		}
	}
	switch {
	case hybrid:
		return "v1 or hybrid hierarchy: commands get a v1 group each where the daemon may write the memory, pids and cpu hierarchies (root)"
	case unified == "":
		return "none"
	}
	return "v2 (" + unified + "): commands get a group each where this group is delegated to the daemon (systemd: Delegate=yes)"
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// outlived reports whether pid still runs (and is not a zombie) after up
// to 5 s: a killed process leaves its group's cgroup.procs before it has
// finished exiting, so a look right after the command ended can still
// find it running.
func outlived(pid string) bool {
	for deadline := time.Now().Add(5 * time.Second); ; {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(b), ") Z ") || strings.Contains(string(b), ") X ") {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func firstLines(s string, n int) string {
	ls := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, " | ")
}

// Summary says in one line what s enforces, for the daemon's start-up log:
// who read-only commands run as, the Landlock ABI, their network, how the
// limits are set and how many secret paths approved commands cannot see.
func (s *Sandbox) Summary() string {
	ro, rw := s.Info(ReadOnly), s.Info(Approved)
	user := ro.User
	if user == "" {
		user = "the daemon's user"
	}
	return fmt.Sprintf("enforced: read-only commands as %s in a user+mount namespace with Landlock ABI %d, a private /tmp each; %s; limits by %s; %d secret paths hidden from approved commands",
		user, ro.LandlockABI, ro.Net, ro.LimitsBy, len(rw.Hidden))
}

// Unreadable is a workspace that read-only commands cannot enter, and
// what the probe said.
type Unreadable struct {
	Dir, Why string
}

// UnreadableWorkspaces probes, as a read-only command, each directory of
// dirs that exists and returns those it cannot read and enter. A root
// daemon's read-only commands run as an unprivileged user (Info's User), so
// a workspace under a private home such as /root would make each of them
// fail with "Permission denied" with nothing on the log to say why. It
// blocks for one command per directory; ctx bounds them.
func (s *Sandbox) UnreadableWorkspaces(ctx context.Context, dirs []string) []Unreadable {
	var bad []Unreadable
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		var out strings.Builder
		res, err := s.Run(ctx, ReadOnly, Cmd{Args: []string{"/bin/sh", "-c", "test -r . && test -x ."}, Dir: dir,
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}, &out)
		if err == nil && res.ExitCode == 0 {
			continue
		}
		why := strings.TrimSpace(out.String())
		if err != nil {
			why = err.Error()
		}
		bad = append(bad, Unreadable{Dir: dir, Why: why})
	}
	return bad
}
