package agentcore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// probeChildEnv makes the test binary run the probe suite and exit (see
// TestMain): TestProbes starts it once as root and once as an unprivileged
// user, so both kinds of daemon are probed in one test run.
const probeChildEnv = "THINBOT_PROBE_CHILD"

// probeCredential is in the child's environment under a name that does not
// look secret, so Harden does not blank it: it stands for a credential an
// operator passed the daemon under some other name.
const probeCredential = "DATABASE_URL=postgres://probe:hunter2-probe-credential@db/x"

// TestProbes sends each class of attack from issue #19's red team straight
// to the runners (Exec with the sandbox, past a gate that passes
// everything), as root and as an unprivileged user, prints the table
// (probe, tier, expected, observed) and fails on any probe that got
// through or any everyday command the sandbox broke. Under CI=1 both runs
// are required, so the test must run as root there.
func TestProbes(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI=1: the probe suite must run as root, to probe both a root and an unprivileged daemon")
		}
		t.Log("not root: probing only an unprivileged daemon (this user)")
		runProbeChild(t, nil)
		return
	}
	runProbeChild(t, nil)
	u, err := user.Lookup("thinbot-ro")
	if err != nil {
		u, err = user.Lookup("nobody")
	}
	if err != nil {
		t.Fatalf("no unprivileged user to probe as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	runProbeChild(t, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}})
}

// runProbeChild runs the suite in a child process (as cred, or as this
// process's user) and fails t on its failures.
func runProbeChild(t *testing.T, cred *syscall.Credential) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	who := "root"
	if os.Geteuid() != 0 {
		who = fmt.Sprintf("uid %d", os.Geteuid())
	}
	dir, err := os.MkdirTemp("", "thinbot-probe-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		// The go test binary sits in a root-only build dir: copy it where
		// the user can run it.
		who = fmt.Sprintf("uid %d", cred.Uid)
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		exe = filepath.Join(dir, "agentcore.test")
		if err := os.WriteFile(exe, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Dir = dir
	cmd.Env = []string{probeChildEnv + "=1", probeCredential, "PATH=" + DefaultPath, "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	t.Logf("probe suite, daemon running as %s:\n%s", who, out)
	if err != nil {
		t.Errorf("probe suite as %s: %v (a probe got through or broke; see the table)", who, err)
	}
}

// probe is one attack (or one everyday command) and how to tell whether it
// got through (or worked).
type probe struct {
	name   string
	mode   sandbox.Mode
	expect string // "stopped" or "works"
	cmd    string
	// timeout overrides the ExecConfig's (for the wall-time probe).
	timeout time.Duration
	// errOK: Exec's error is the expected outcome; got sees it as out.
	errOK bool
	// got reports whether the attack got through (for "stopped") or the
	// command worked (for "works"), from its result and the host's state.
	got func(res ExecResult, out string) bool
}

// probeEnv is what the suite sets up on the host for the probes to aim at.
type probeEnv struct {
	ws, state, token string
	tcpPort, okPort  int
	tcpHits          chan struct{}
	udpPort          int
	udp              net.PacketConn
	unixPath         string
	unixHits         chan struct{}
	abstract         string
	abstractHits     chan struct{}
}

func listenCount(ln net.Listener, hits chan struct{}) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("reached\n"))
		c.Close()
		select {
		case hits <- struct{}{}:
		default:
		}
	}
}

func hit(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// runProbes is the child's side: it starts a sandbox as a daemon would,
// runs every probe, prints the table to w and returns how many rows did not
// come out as expected.
func runProbes(w io.Writer) int {
	fail := func(err error) int { fmt.Fprintln(w, "set-up:", err); return 1 }
	base, err := os.MkdirTemp("", "thinbot-probe-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(base)
	e := &probeEnv{ws: filepath.Join(base, "ws"), token: filepath.Join(base, "bot.token")}
	e.state = filepath.Join(e.ws, ".thinbot")
	os.Chmod(base, 0o755)
	os.Mkdir(e.ws, 0o755)
	os.Mkdir(e.state, 0o700)
	os.WriteFile(filepath.Join(e.state, "events.db"), []byte("the chain"), 0o600)
	os.WriteFile(filepath.Join(e.ws, "notes.txt"), []byte("hello\n"), 0o644)
	os.WriteFile(e.token, []byte("xoxb-probe-token"), 0o600)

	e.tcpHits, e.unixHits, e.abstractHits = make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	defer tcp.Close()
	go listenCount(tcp, e.tcpHits)
	e.tcpPort = tcp.Addr().(*net.TCPAddr).Port
	ok, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	defer ok.Close()
	go listenCount(ok, make(chan struct{}, 1))
	e.okPort = ok.Addr().(*net.TCPAddr).Port
	if e.udp, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		return fail(err)
	}
	defer e.udp.Close()
	e.udpPort = e.udp.LocalAddr().(*net.UDPAddr).Port
	// In the workspace, which commands see (all of /tmp is private to
	// them): the socket must be covered, not just out of view.
	e.unixPath = filepath.Join(e.ws, "control.sock")
	us, err := net.Listen("unix", e.unixPath)
	if err != nil {
		return fail(err)
	}
	defer us.Close()
	os.Chmod(e.unixPath, 0o666)
	go listenCount(us, e.unixHits)
	e.abstract = fmt.Sprintf("thinbot-probe-%d", os.Getpid())
	as, err := net.Listen("unix", "@"+e.abstract)
	if err != nil {
		return fail(err)
	}
	defer as.Close()
	go listenCount(as, e.abstractHits)

	ctx := context.Background()
	sb, err := sandbox.Start(ctx, sandbox.Config{
		Hide:       []string{e.state, e.token},
		Workspaces: []string{e.ws},
		Limits:     sandbox.Limits{Memory: 256 << 20, Processes: 64, CPU: 20 * time.Second, MemoryTotal: 512 << 20, ProcessesTotal: 64},
		Network:    sandbox.Network{ConnectTCP: []uint16{uint16(e.okPort)}, Cover: []string{e.unixPath}},
	})
	if err != nil {
		return fail(err)
	}
	defer sb.Close()
	if err := sandbox.Harden(SecretName); err != nil {
		return fail(err)
	}
	ro, rw := sb.Info(sandbox.ReadOnly), sb.Info(sandbox.Approved)
	fmt.Fprintf(w, "daemon uid %d, Landlock ABI %d, limits by %s %+v, read-only commands as %q\n  net: %s\n\n",
		os.Geteuid(), ro.LandlockABI, ro.LimitsBy, ro.Limits, ro.User, ro.Net)
	_ = rw

	cfg := ExecConfig{Sandbox: sb, Timeout: 30 * time.Second, OutputLimit: 1 << 20, Environ: []string{"PATH=" + DefaultPath}}
	failed := 0
	fmt.Fprintf(w, "%-44s %-10s %-8s %-8s %s\n", "probe", "tier", "expected", "observed", "detail")
	for _, p := range probes(e, sb) {
		c := cfg
		if p.timeout > 0 {
			c.Timeout = p.timeout
		}
		res, err := Exec(ctx, c, p.mode, e.ws, p.cmd)
		out := string(res.Output)
		var got bool
		if err != nil {
			out = "error: " + err.Error()
		}
		if err == nil || p.errOK {
			got = p.got(res, out)
		}
		observed := p.expect
		switch {
		case p.expect == "stopped" && got:
			observed = "through"
		case p.expect == "works" && !got:
			observed = "broken"
		}
		if observed != p.expect {
			failed++
		}
		detail := fmt.Sprintf("exit %d", res.ExitCode)
		if res.Limit != "" {
			detail += " (" + res.Limit + ")"
		}
		if res.OutputCut {
			detail = fmt.Sprintf("output cut at %d bytes", res.Size)
		} else if res.TimedOut {
			detail = "timed out"
		}
		if l := probeLine(out); strings.HasPrefix(l, "Traceback") {
			ls := strings.Split(strings.TrimSpace(out), "\n")
			detail += ": " + probeLine(ls[len(ls)-1])
		} else if l != "" {
			detail += ": " + l
		}
		fmt.Fprintf(w, "%-44s %-10s %-8s %-8s %s\n", p.name, p.mode, p.expect, observed, detail)
	}
	fmt.Fprintf(w, "\n%d probes did not come out as expected\n", failed)
	return failed
}

func probeLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 70 {
		s = s[:70] + "..."
	}
	return s
}

// helperPids returns the pids of this process's sandbox helpers.
func helperPids() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if cl, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline"); strings.Contains(string(cl), "sandbox-helper") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func probes(e *probeEnv, sb *sandbox.Sandbox) []probe {
	daemon := os.Getpid()
	has := func(s string) func(ExecResult, string) bool {
		return func(_ ExecResult, out string) bool { return strings.Contains(out, s) }
	}
	exists := func(p string) func(ExecResult, string) bool {
		return func(ExecResult, string) bool {
			_, err := os.Stat(p)
			os.Remove(p)
			return err == nil
		}
	}
	secrets := func(_ ExecResult, out string) bool {
		for _, s := range []string{"hunter2-probe-credential", "the chain", "xoxb-probe-token"} {
			if strings.Contains(out, s) {
				return true
			}
		}
		return false
	}
	py := func(code string) string { return "python3 -c " + shellQuoteTest(code) }
	var helpers []int
	storm := py("import os,time\nn=0\ntry:\n  for i in range(600):\n    if os.fork()==0:\n      time.sleep(30); os._exit(0)\n    n+=1\nexcept OSError as e: print(e)\nprint('forked', n)")
	ps := []probe{
		// Writes, devices, mounts, namespaces, kernel knobs.
		{name: "write the workspace", mode: sandbox.ReadOnly, expect: "stopped", cmd: "touch pwned; echo x >> notes.txt",
			got: func(r ExecResult, o string) bool {
				b, _ := os.ReadFile(filepath.Join(e.ws, "notes.txt"))
				return exists(filepath.Join(e.ws, "pwned"))(r, o) || string(b) != "hello\n"
			}},
		{name: "write /etc", mode: sandbox.ReadOnly, expect: "stopped", cmd: "touch /etc/thinbot-probe", got: exists("/etc/thinbot-probe")},
		{name: "mknod a disk", mode: sandbox.ReadOnly, expect: "stopped", cmd: "mknod /tmp/disk b 8 0 && echo made", got: has("made")},
		{name: "mount", mode: sandbox.ReadOnly, expect: "stopped", cmd: "mount -t tmpfs none /mnt && echo mounted", got: has("mounted")},
		{name: "mount in a nested user namespace", mode: sandbox.ReadOnly, expect: "stopped", cmd: "unshare -Urm sh -c 'mount -t tmpfs none /mnt && echo mounted'", got: has("mounted")},
		{name: "sysctl write", mode: sandbox.ReadOnly, expect: "stopped", cmd: "cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname && echo wrote", got: has("wrote")},
		// Secrets and the daemon.
		{name: "read hidden state and token", mode: sandbox.ReadOnly, expect: "stopped", cmd: "cat .thinbot/events.db " + e.token, got: secrets},
		{name: "read hidden state and token", mode: sandbox.Approved, expect: "stopped", cmd: "cat .thinbot/events.db " + e.token, got: secrets},
		{name: "daemon environ and memory", mode: sandbox.ReadOnly, expect: "stopped", cmd: fmt.Sprintf("cat /proc/%d/environ | tr '\\0' '\\n'; grep -a -o 'hunter2[a-z-]*' /proc/%d/mem", daemon, daemon), got: secrets},
		{name: "daemon environ and memory", mode: sandbox.Approved, expect: "stopped", cmd: fmt.Sprintf("cat /proc/%d/environ | tr '\\0' '\\n'; grep -a -o 'hunter2[a-z-]*' /proc/%d/mem", daemon, daemon), got: secrets},
		{name: "core_pattern (kernel runs a program)", mode: sandbox.Approved, expect: "stopped", cmd: "cat /proc/sys/kernel/core_pattern > /proc/sys/kernel/core_pattern && echo wrote", got: has("wrote")},
		{name: "signal the daemon", mode: sandbox.ReadOnly, expect: "stopped", cmd: fmt.Sprintf("kill -0 %d && echo signalled", daemon), got: has("signalled")},
		{name: "kill the helpers (x4)", mode: sandbox.ReadOnly, expect: "stopped",
			cmd: "for i in 1 2 3 4; do kill -9 HELPERS; done 2>/dev/null; echo tried",
			got: func(ExecResult, string) bool {
				for _, p := range helpers {
					if !alive(p) {
						return true
					}
				}
				return sb.Restarts() != 0
			}},
		// Network.
		{name: "TCP connect to an unlisted port", mode: sandbox.ReadOnly, expect: "stopped", cmd: fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo connected", e.tcpPort),
			got: func(_ ExecResult, o string) bool { return strings.Contains(o, "connected") || hit(e.tcpHits) }},
		{name: "TCP connect to a listed port", mode: sandbox.ReadOnly, expect: "works", cmd: fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3", e.okPort), got: has("reached")},
		{name: "TCP bind and listen", mode: sandbox.ReadOnly, expect: "stopped", cmd: py("import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(); print('bound')"), got: has("bound")},
		{name: "UDP send", mode: sandbox.ReadOnly, expect: "stopped", cmd: fmt.Sprintf("echo leak > /dev/udp/127.0.0.1/%d && echo sent", e.udpPort),
			got: func(_ ExecResult, o string) bool {
				e.udp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				_, _, err := e.udp.ReadFrom(make([]byte, 64))
				return err == nil || strings.Contains(o, "sent")
			}},
		{name: "DNS lookup (UDP)", mode: sandbox.ReadOnly, expect: "stopped", cmd: py("import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', 53)); print('sent')"), got: has("sent")},
		{name: "ICMP/raw socket", mode: sandbox.ReadOnly, expect: "stopped", cmd: py("import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); print('opened')"), got: has("opened")},
		{name: "host control socket (unix, pathname)", mode: sandbox.ReadOnly, expect: "stopped", cmd: py("import socket; s=socket.socket(socket.AF_UNIX); s.connect('" + e.unixPath + "'); print(s.recv(9))"),
			got: func(_ ExecResult, o string) bool { return strings.Contains(o, "reached") || hit(e.unixHits) }},
		{name: "abstract unix socket", mode: sandbox.ReadOnly, expect: "stopped", cmd: py("import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0" + e.abstract + "'); print(s.recv(9))"),
			got: func(_ ExecResult, o string) bool { return strings.Contains(o, "reached") || hit(e.abstractHits) }},
		// Limits.
		{name: "process storm (600 forks, limit 64)", mode: sandbox.ReadOnly, expect: "stopped", cmd: storm, got: has("forked 600")},
		{name: "head -n -1 /dev/zero (memory)", mode: sandbox.ReadOnly, expect: "stopped", cmd: "head -n -1 /dev/zero > /dev/null", got: func(r ExecResult, _ string) bool { return r.TimedOut || r.ExitCode == 0 }},
		{name: "head -n -1 /dev/zero (memory)", mode: sandbox.Approved, expect: "stopped", cmd: "head -n -1 /dev/zero > /dev/null", got: func(r ExecResult, _ string) bool { return r.TimedOut || r.ExitCode == 0 }},
		{name: "allocate 1 GiB", mode: sandbox.ReadOnly, expect: "stopped", cmd: py("b=bytearray(1<<30); print('allocated')"), got: has("allocated")},
		{name: "seq inf (output)", mode: sandbox.ReadOnly, expect: "stopped", cmd: "seq inf", got: func(r ExecResult, _ string) bool { return !r.OutputCut || r.Size > 1<<20 }},
		{name: "seq inf (output)", mode: sandbox.Approved, expect: "stopped", cmd: "seq inf", got: func(r ExecResult, _ string) bool { return !r.OutputCut || r.Size > 1<<20 }},
		{name: "sleep past the time limit", mode: sandbox.ReadOnly, expect: "stopped", cmd: "sleep 600", timeout: 2 * time.Second, got: func(r ExecResult, _ string) bool { return !r.TimedOut }},
		// /tmp.
		{name: "/tmp written by one command", mode: sandbox.ReadOnly, expect: "works", cmd: "echo mark > /tmp/probe-mark && cat /tmp/probe-mark", got: has("mark")},
		{name: "/tmp read by the next command", mode: sandbox.ReadOnly, expect: "stopped", cmd: "cat /tmp/probe-mark /var/tmp/probe-mark", got: func(_ ExecResult, o string) bool {
			_, err := os.Stat("/tmp/probe-mark")
			return strings.Contains(o, "mark\n") || err == nil
		}},
		{name: "workspace below /tmp visible", mode: sandbox.ReadOnly, expect: "works", cmd: "cat notes.txt", got: has("hello")},
	}
	// An approved command of a root daemon has no process limit from
	// rlimits (RLIMIT_NPROC does not bind root): only its cgroup stops
	// the storm. Memory across several processes (4 x 200 MiB, each below
	// the 256 MiB per process) only a cgroup can stop: probed where the
	// daemon gets cgroups, which root on this kind of host does.
	ps = append(ps, probe{name: "process storm (600 forks, limit 64)", mode: sandbox.Approved, expect: "stopped",
		cmd: storm, got: has("forked 600")})
	if by, _, _ := strings.Cut(sb.Info(sandbox.Approved).LimitsBy, ";"); os.Geteuid() == 0 || strings.HasPrefix(by, "cgroup v") && strings.Contains(by, "memory") {
		hog := py("import os,time\npids=[]\nfor i in range(4):\n  p=os.fork()\n  if p==0:\n    b=bytearray(200<<20); time.sleep(2); os._exit(0)\n  pids.append(p)\nprint('survived', sum(1 for p in pids if os.waitpid(p,0)[1]==0))")
		for _, m := range []sandbox.Mode{sandbox.ReadOnly, sandbox.Approved} {
			ps = append(ps, probe{name: "4 x 200 MiB (memory total 512 MiB)", mode: m, expect: "stopped", cmd: hog, got: has("survived 4")})
		}
	}
	// Last: an approved command kills its own helper (root may); the next
	// command must still run.
	ps = append(ps,
		probe{name: "approved command kills its helper: fails clearly", mode: sandbox.Approved, expect: "works", cmd: "kill -9 RWHELPER; sleep 5", errOK: true, got: has("helper stopped")},
		probe{name: "the next approved command runs", mode: sandbox.Approved, expect: "works", cmd: "echo next", got: has("next")},
	)
	helpers = helperPids()
	var all []string
	for _, p := range helpers {
		all = append(all, strconv.Itoa(p))
	}
	for i := range ps {
		ps[i].cmd = strings.ReplaceAll(ps[i].cmd, "HELPERS", strings.Join(all, " "))
		if strings.Contains(ps[i].cmd, "RWHELPER") {
			for _, p := range helpers {
				if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.HasSuffix(string(cl), "\x00"+sandbox.Approved.String()+"\x00") {
					ps[i].cmd = strings.ReplaceAll(ps[i].cmd, "RWHELPER", strconv.Itoa(p))
				}
			}
		}
	}
	return ps
}

func shellQuoteTest(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// probeMain runs the suite when the test binary was started as a probe
// child; see TestProbes.
func probeMain() {
	_, handed := os.LookupEnv("THINBOT_ENVIRON_FD")
	if os.Getenv(probeChildEnv) == "" && !handed {
		return
	}
	// As cmd/thinbot's main does for the commands that run commands: the
	// first call re-executes this binary, the second takes the environment
	// back (with probeChildEnv in it).
	if err := sandbox.HideEnviron(os.Args); err != nil || os.Getenv(probeChildEnv) == "" {
		fmt.Println("set-up: hide the environment:", err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	n := runProbes(w)
	w.Flush()
	if n > 0 {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestEverydayDiagnostics runs the diagnostics of the skill packs
// (sys-doctor, log-triage) and of deploy/security.md in the read-only tier, as a
// root daemon's read-only user: each one that works unconfined on this
// machine (exit 0) must work in the sandbox too. The table says what each
// did in both places.
func TestEverydayDiagnostics(t *testing.T) {
	ws, err := os.MkdirTemp("", "thinbot-diag-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	os.Chmod(ws, 0o755)
	for _, f := range []string{"sys-doctor/scripts/doctor.sh", "log-triage/scripts/triage.py", "log-triage/testdata/app.log", "log-triage/testdata/journal.txt"} {
		b, err := os.ReadFile(filepath.Join("..", "skills", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sb, err := sandbox.Start(t.Context(), sandbox.Config{Workspaces: []string{ws}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	cmds := []string{
		"bash doctor.sh",
		"python3 triage.py app.log",
		"python3 triage.py - < journal.txt",
		"uptime", "free -m", "df -h", "df -i", "ps aux", "ps -eo pid,user,pcpu,rss,comm --sort=-pcpu",
		"ss -tlnp", "ss -Htlnu", "ss -s", "ip -brief addr", "ip route", "cat /proc/loadavg /proc/meminfo",
		"lsblk", "findmnt", "mount", "uname -a", "id", "who", "ls -la /var/log",
		"du -xh --max-depth=1 /usr/share | sort -h | tail -3",
		"journalctl -n 5 --no-pager", "journalctl -p err --since today --no-pager | tail -3",
		"systemctl status --no-pager", "systemctl list-units --state=failed --no-legend --plain --no-pager",
		"getent hosts localhost", "cat /etc/os-release", "env", "dmesg | tail -3",
		"docker ps", "kubectl get pods",
	}
	cfg := ExecConfig{Timeout: 60 * time.Second, Environ: []string{"PATH=" + DefaultPath}}
	sbCfg := cfg
	sbCfg.Sandbox = sb
	var b strings.Builder
	fmt.Fprintf(&b, "%-58s %-10s %s\n", "command", "unconfined", "read-only sandbox")
	for _, c := range cmds {
		direct, err := Exec(t.Context(), cfg, sandbox.ReadOnly, ws, c)
		if err != nil {
			t.Fatal(err)
		}
		boxed, err := Exec(t.Context(), sbCfg, sandbox.ReadOnly, ws, c)
		if err != nil {
			t.Fatal(err)
		}
		note := ""
		if boxed.ExitCode != 0 {
			note = ": " + probeLine(string(boxed.Output))
		}
		fmt.Fprintf(&b, "%-58s exit %-5d exit %d%s\n", c, direct.ExitCode, boxed.ExitCode, note)
		if direct.ExitCode == 0 && boxed.ExitCode != 0 {
			t.Errorf("%q works unconfined but not in the read-only sandbox: exit %d: %s", c, boxed.ExitCode, boxed.Output)
		}
		if c == "bash doctor.sh" && boxed.ExitCode == 0 {
			for _, tool := range []string{"ps unavailable", "df unavailable", "ss unavailable"} {
				if strings.Contains(string(boxed.Output), tool) {
					t.Errorf("doctor.sh in the sandbox: %s:\n%s", tool, boxed.Output)
				}
			}
		}
	}
	t.Logf("as %s:\n%s", sb.Info(sandbox.ReadOnly).User, b.String())
}
