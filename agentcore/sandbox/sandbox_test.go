package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary serve as its own helper, as thinbot does.
func TestMain(m *testing.M) {
	Main(os.Args)
	procViewMain()
	if len(os.Args) > 2 && os.Args[1] == intoCgroupArg {
		os.Exit(intoCgroup(os.Args[2], os.Args[3:]))
	}
	os.Exit(m.Run())
}

const testPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// rig is a workspace with a state dir and a token file, and a sandbox that
// hides both, as serve sets it up.
type rig struct {
	ws, state, token string
	sb               *Sandbox
}

var (
	sharedOnce sync.Once
	shared     *rig
	sharedErr  error
)

// newRig starts one sandbox for the package's tests (starting one costs a
// Go start-up per helper). The secret environment variable is set before
// Harden, as a daemon's would be.
func newRig(t testing.TB) *rig {
	t.Helper()
	sharedOnce.Do(func() {
		base, err := os.MkdirTemp("", "thinbot-sandbox-test-")
		if err != nil {
			sharedErr = err
			return
		}
		r := &rig{ws: filepath.Join(base, "ws"), state: filepath.Join(base, "ws", ".thinbot"), token: filepath.Join(base, "slack.token")}
		// A root daemon's read-only commands run as an unprivileged user:
		// the workspace is readable by others, as a deployment's must be.
		os.Mkdir(r.ws, 0o755)
		os.MkdirAll(r.state, 0o700)
		os.WriteFile(filepath.Join(r.state, "events.db"), []byte("the chain"), 0o600)
		os.WriteFile(filepath.Join(r.ws, "notes.txt"), []byte("hello\n"), 0o644)
		os.WriteFile(r.token, []byte("xoxb-secret-token-value"), 0o600)
		os.Setenv("SANDBOX_TEST_API_KEY", "sk-sandbox-test-key-0123456789")
		r.sb, sharedErr = Start(context.Background(), Config{Hide: []string{r.state, r.token}, Workspaces: []string{r.ws}})
		if sharedErr == nil {
			sharedErr = Harden(func(name string) bool { return strings.HasSuffix(name, "_API_KEY") })
		}
		shared = r
	})
	if sharedErr != nil {
		if os.Getenv("CI") == "" && errors.Is(sharedErr, syscall.EPERM) {
			t.Skipf("this host refuses the sandbox: %v", sharedErr)
		}
		t.Fatalf("start sandbox: %v", sharedErr)
	}
	return shared
}

func (r *rig) run(t testing.TB, m Mode, script string) (string, Result) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.sb.Run(ctx, m, Cmd{Args: []string{"/bin/bash", "-c", script}, Dir: r.ws, Env: []string{testPath}}, &out)
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return out.String(), res
}

// TestReadOnlyStopsWrites feeds the read-only helper commands a broken gate
// would pass and checks on the host that nothing was written, whatever the
// command printed.
func TestReadOnlyStopsWrites(t *testing.T) {
	r := newRig(t)
	tmpMark := fmt.Sprintf("/tmp/thinbot-sandbox-mark-%d", os.Getpid())
	t.Cleanup(func() { os.Remove(tmpMark) })
	cases := []string{
		"touch new",
		"echo x > new",
		"echo x >> notes.txt",
		": > notes.txt",
		"truncate -s0 notes.txt",
		"rm -f notes.txt",
		"mv notes.txt moved",
		"mkdir newdir",
		"ln -s /etc/passwd link",
		"chmod 777 notes.txt",
		"sed -i s/hello/bye/ notes.txt",
		"sed -n 'w new' notes.txt",
		"sed -n ':a w new' notes.txt",
		"sed -n 'w .thinbot/events.db' notes.txt",
		"sed -n '1w .thinbot/audit.jsonl' notes.txt",
		"sed -n 's/[/]/x/;s|h|/bin/touch new|e' notes.txt",
		"xxd -p notes.txt new",
		"dd if=notes.txt of=new",
		"tee new < notes.txt",
		"cp notes.txt new",
		"python3 -c 'open(\"new\",\"w\").write(\"x\")'",
		"echo x > " + tmpMark, // lands in the private tmp, not the host's
		"echo x > /var/tmp/" + filepath.Base(tmpMark),
		"echo x > /dev/shm/" + filepath.Base(tmpMark),
		"touch /etc/thinbot-sandbox-test",
		"echo 1 > /proc/sys/vm/drop_caches",
		"echo 1 > /proc/sysrq-trigger",
		"mount -o remount,rw /",
		"umount " + r.state,
		"mount -t tmpfs none " + r.ws,
	}
	before := tree(t, filepath.Dir(r.ws))
	for _, c := range cases {
		out, res := r.run(t, ReadOnly, c)
		t.Logf("%-50s exit %d: %s", c, res.ExitCode, firstLine(out))
	}
	after := tree(t, filepath.Dir(r.ws))
	if before != after {
		t.Errorf("the workspace changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	for _, p := range []string{tmpMark, "/var/tmp/" + filepath.Base(tmpMark), "/etc/thinbot-sandbox-test"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written on the host", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(r.state, "events.db")); string(b) != "the chain" {
		t.Errorf("the state dir's store was changed: %q", b)
	}
}

// TestSecretsUnreadable: in both modes the state dir and token file read
// as empty, and the daemon's environment and memory are closed, by every
// path a gate's text-based path check missed.
func TestSecretsUnreadable(t *testing.T) {
	r := newRig(t)
	pid := os.Getpid()
	reads := []string{
		"cat .thinbot/events.db",
		"ls -A .thinbot",
		"cat " + r.token,
		"cat /proc/" + fmt.Sprint(pid) + "/environ",
		"cat /dev/fd/../../" + fmt.Sprint(pid) + "/environ",
		"cat /proc/self/task/../../" + fmt.Sprint(pid) + "/environ",
		"cat /proc/" + fmt.Sprint(pid) + "/task/" + fmt.Sprint(pid) + "/environ",
		"strings /proc/" + fmt.Sprint(pid) + "/environ",
		"head -c 100 /proc/" + fmt.Sprint(pid) + "/mem",
		"cat /proc/" + fmt.Sprint(pid) + "/root" + r.state + "/events.db",
		"cat /proc/1/root" + r.state + "/events.db",
		"cat /proc/" + fmt.Sprint(pid) + "/cwd/" + r.token,
		"cat /proc/self/environ; env",
	}
	for _, m := range []Mode{ReadOnly, Approved} {
		for _, c := range reads {
			out, _ := r.run(t, m, c+" 2>/dev/null")
			for _, secret := range []string{"the chain", "xoxb-secret-token-value", "sk-sandbox-test-key", "events.db"} {
				if strings.Contains(out, secret) {
					t.Errorf("%s: %q read %q", m, c, secret)
				}
			}
		}
	}
	// Approved commands can write the workspace (and undo it), but not the
	// hidden state.
	if out, res := r.run(t, Approved, "touch approved-file && rm approved-file && echo ok"); res.ExitCode != 0 || !strings.Contains(out, "ok") {
		t.Errorf("approved write: exit %d %s", res.ExitCode, out)
	}
	r.run(t, Approved, "echo x > .thinbot/events.db; rm -rf .thinbot/*")
	if b, _ := os.ReadFile(filepath.Join(r.state, "events.db")); string(b) != "the chain" {
		t.Errorf("an approved command changed the hidden store: %q", b)
	}
}

// TestReadOnlyKeepsTheHostVisible: ps, df, the network and the workspace's
// files stay as they are; only raw devices are gone from /dev.
func TestReadOnlyKeepsTheHostVisible(t *testing.T) {
	r := newRig(t)
	out, res := r.run(t, ReadOnly, "cat notes.txt; ps -e -o pid= | wc -l; df -P / | tail -1; ls /dev; cat /proc/net/tcp | head -1; echo scratch > /tmp/x && cat /tmp/x")
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, out)
	}
	lines := strings.Split(out, "\n")
	var hostProcs int
	fmt.Sscan(lines[1], &hostProcs)
	if lines[0] != "hello" || hostProcs < 3 || !strings.HasSuffix(strings.TrimSpace(lines[2]), " /") {
		t.Errorf("the host is not visible as it is:\n%s", out)
	}
	for _, dev := range []string{"vda", "sda", "nvme", "mem", "kmsg", "mapper", "block", "disk"} {
		for _, l := range lines {
			if l == dev || strings.HasPrefix(l, dev) {
				t.Errorf("/dev/%s is visible in the read-only sandbox", l)
			}
		}
	}
	if !strings.Contains(out, "local_address") || !strings.Contains(out, "scratch") {
		t.Errorf("network table or private tmp missing:\n%s", out)
	}
}

// TestReadOnlySignalsStayInside: a read-only command can signal neither
// the daemon nor its own helper, however often it tries (each command is
// started by whichever helper thread is free: the domain must not depend on
// which one), and cannot ptrace the helper. Signal scoping needs Landlock
// ABI 6: under CI=1 an older kernel fails the test rather than skipping it.
func TestReadOnlySignalsStayInside(t *testing.T) {
	r := newRig(t)
	if abi := r.sb.Info(ReadOnly).LandlockABI; abi < 6 {
		if os.Getenv("CI") != "" {
			t.Fatalf("Landlock ABI %d < 6: no signal scoping on this kernel (CI=1 requires it)", abi)
		}
		t.Skip("Landlock ABI < 6: no signal scoping on this kernel")
	}
	helper := r.sb.ro.proc.Pid
	for i := range 8 {
		for _, pid := range []int{os.Getpid(), helper} {
			out, res := r.run(t, ReadOnly, fmt.Sprintf("kill -0 %d", pid))
			if res.ExitCode == 0 {
				t.Errorf("run %d: a read-only command could signal pid %d (daemon %d, helper %d): %s", i, pid, os.Getpid(), helper, out)
			}
		}
		out, _ := r.run(t, ReadOnly, fmt.Sprintf("cat /proc/%d/environ /proc/%d/maps 2>&1 | head -c 300", helper, helper))
		if strings.Contains(out, "[stack]") || strings.Contains(out, "/") && !strings.Contains(out, "ermission") {
			t.Errorf("run %d: a read-only command read the helper's /proc files: %s", i, out)
		}
	}
	if r.sb.ro.failed() != nil || r.sb.Restarts() != 0 {
		t.Errorf("the helper died: %v", r.sb.ro.failed())
	}
}

// TestCancelKillsTheGroup: ctx's end kills the command and what it left in
// the background.
func TestCancelKillsTheGroup(t *testing.T) {
	r := newRig(t)
	for _, m := range []Mode{ReadOnly, Approved} {
		ctx, cancel := context.WithCancel(context.Background())
		var out syncBuf
		done := make(chan Result, 1)
		go func() {
			res, err := r.sb.Run(ctx, m, Cmd{Args: []string{"/bin/bash", "-c", "sleep 300 & echo $!; wait"}, Dir: r.ws, Env: []string{testPath}}, &out)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		var pid int
		for range 500 {
			if _, err := fmt.Sscan(out.String(), &pid); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		var res Result
		select {
		case res = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the command outlived its cancellation", m)
		}
		if !res.Killed {
			t.Errorf("%s: result %+v, want Killed", m, res)
		}
		if pid == 0 {
			t.Fatalf("%s: no pid printed", m)
		}
		for range 200 {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || strings.Contains(string(b), ") Z ") {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), "sleep") {
			t.Errorf("%s: the background sleep %d survived", m, pid)
		}
	}
}

// TestHelperDeathIsOneCommand: when a helper dies, the command it was
// running fails with ErrUnavailable and a clear message, and the next
// command of that mode runs in a new helper, as confined as before.
func TestHelperDeathIsOneCommand(t *testing.T) {
	newRig(t) // the package's helper is the test binary: make sure it works
	sb, err := Start(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, m := range []Mode{ReadOnly, Approved} {
		h, _ := sb.helper(context.Background(), m)
		var out syncBuf
		done := make(chan error, 1)
		go func() {
			_, err := sb.Run(context.Background(), m, Cmd{Args: []string{"/bin/sh", "-c", "echo started; exec sleep 300"}, Dir: "/", Env: []string{testPath}}, &out)
			done <- err
		}()
		for range 1000 {
			if strings.Contains(out.String(), "started") {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := h.proc.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the running command did not fail when its helper died", m)
		}
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "helper stopped") {
			t.Errorf("%s: running command: %v; want ErrUnavailable, helper stopped", m, err)
		}
		var out2 bytes.Buffer
		res, err := sb.Run(context.Background(), m, Cmd{Args: []string{"/bin/sh", "-c", "echo x > /etc/thinbot-restart-probe 2>/dev/null; echo next"}, Dir: "/", Env: []string{testPath}}, &out2)
		if err != nil || res.ExitCode != 0 || !strings.Contains(out2.String(), "next") {
			t.Errorf("%s: the next command: %v %+v %q", m, err, res, out2.String())
		}
		if m == ReadOnly {
			if _, err := os.Stat("/etc/thinbot-restart-probe"); err == nil {
				os.Remove("/etc/thinbot-restart-probe")
				t.Errorf("the restarted read-only helper let a command write /etc")
			}
		} else {
			os.Remove("/etc/thinbot-restart-probe")
		}
		if sb.Err() != nil {
			t.Errorf("%s: Err = %v after a restart", m, sb.Err())
		}
	}
	if n := sb.Restarts(); n != 2 {
		t.Errorf("Restarts = %d, want 2", n)
	}
}

// TestStartRefusedFailsCleanly: a helper whose set-up fails reports why.
func TestStartRefusedFailsCleanly(t *testing.T) {
	_, err := Start(context.Background(), Config{Exe: "/bin/false"})
	if err == nil || !strings.Contains(err.Error(), "helper") {
		t.Errorf("Start with a non-helper binary = %v", err)
	}
	// A workspace below /tmp is bound into each read-only command's
	// private /tmp: one that does not exist is refused, with the reason.
	_, err = Start(context.Background(), Config{Workspaces: []string{fmt.Sprintf("/tmp/thinbot-no-such-ws-%d", os.Getpid())}})
	if err == nil || !strings.Contains(err.Error(), "must exist when thinbot starts") {
		t.Errorf("Start with a missing workspace below /tmp = %v", err)
	}
	_, err = Start(context.Background(), Config{Hide: []string{"relative/path"}})
	if err == nil || !strings.Contains(err.Error(), "not absolute") {
		t.Errorf("Start with a relative hidden path = %v", err)
	}
}

// BenchmarkSpawn compares one `true` started directly (fork+exec from the
// daemon, as without a sandbox) with the same through each helper: the
// difference is the sandbox's cost per command. Through a helper it also
// reports the CPU each command cost the daemon, the helper and the command
// itself (clock ticks: use a -benchtime of some hundreds).
func BenchmarkSpawn(b *testing.B) {
	r := newRig(b)
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("/bin/true")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, m := range []Mode{ReadOnly, Approved} {
		b.Run(m.String(), func(b *testing.B) {
			var out bytes.Buffer
			cpu := startCPU(b, r.sb.helperLocked(m))
			for b.Loop() {
				res, err := r.sb.Run(context.Background(), m, Cmd{Args: []string{"/bin/true"}, Dir: r.ws, Env: []string{testPath}}, &out)
				if err != nil || res.ExitCode != 0 {
					b.Fatal(err, res)
				}
			}
			cpu.report(b)
		})
	}
}

func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, _ := d.Info()
		fmt.Fprintf(&b, "%s %v %d", p, info.Mode(), info.Size())
		if !d.IsDir() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestManyAtOnce: read-only commands started together each get their own
// thread, /tmp and domain, and all of them run.
func TestManyAtOnce(t *testing.T) {
	r := newRig(t)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, res := r.run(t, ReadOnly, fmt.Sprintf("ls /tmp | grep -v thinbot-sandbox-test | wc -l; echo %d > /tmp/mine && cat /tmp/mine notes.txt", i))
			if want := fmt.Sprintf("0\n%d\nhello\n", i); res.ExitCode != 0 || out != want {
				t.Errorf("command %d: exit %d, output %q, want %q", i, res.ExitCode, out, want)
			}
		}()
	}
	wg.Wait()
}

// TestNoApprovedStartsTheReadOnlyHelperAlone: with Config.NoApproved the
// approved helper is never started: a read-only command runs, an approved
// one fails as unavailable, and the sandbox reports no error for it.
func TestNoApprovedStartsTheReadOnlyHelperAlone(t *testing.T) {
	newRig(t) // skips where the host refuses the sandbox
	sb, err := Start(t.Context(), Config{NoApproved: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var out bytes.Buffer
	if res, err := sb.Run(t.Context(), ReadOnly, Cmd{Args: []string{"/bin/echo", "hi"}, Dir: "/", Env: []string{testPath}}, &out); err != nil || res.ExitCode != 0 || out.String() != "hi\n" {
		t.Errorf("read-only: %+v %v %q", res, err, out.String())
	}
	if _, err := sb.Run(t.Context(), Approved, Cmd{Args: []string{"/bin/true"}, Dir: "/"}, &out); !errors.Is(err, ErrUnavailable) {
		t.Errorf("approved without its helper: %v, want ErrUnavailable", err)
	}
	if sb.Info(Approved).Mode != "" || sb.Info(ReadOnly).Mode == "" || sb.Err() != nil {
		t.Errorf("info %+v / %+v, err %v", sb.Info(Approved), sb.Info(ReadOnly), sb.Err())
	}
}
