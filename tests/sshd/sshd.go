// Package sshd starts real OpenSSH servers (Debian's openssh-server) on
// loopback ports for tests: one sshd per "host", with generated host keys,
// two test users (a read-only and a privileged login), their client keys,
// and a known_hosts file. Every server and every process it started is
// killed in t.Cleanup.
//
// The servers run as root (sshd must switch users); without root the tests
// skip, unless CI is set, where they fail instead.
package sshd

import (
	"bufio"
	"bytes"
	"fmt"
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
)

// The test logins: a read-only one and a privileged one.
const (
	UserRO = "thinbot-ro"
	UserRW = "thinbot-rw"
)

// Server is one sshd.
type Server struct {
	Name string
	Port int
	cmd  *exec.Cmd
	// Trusted is whether its host key is in the rig's known_hosts.
	Trusted bool
	// HostKey is its private host key file (HostKey+".pub" the public).
	HostKey string
}

// Rig is a set of servers sharing users, client keys and known_hosts.
type Rig struct {
	Dir        string
	KnownHosts string
	KeyRO      string // private key of UserRO
	KeyRW      string // private key of UserRW
	Servers    []*Server
	// DownPort is a loopback port nothing listens on.
	DownPort int
}

// Require skips the test when real sshd servers cannot run here (not root,
// or no sshd), unless CI is set: then it fails.
func Require(t testing.TB) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "the sshd tests need root (sshd switches to the test users)"
	} else if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		why = "no /usr/sbin/sshd (apt-get install openssh-server)"
	} else if _, err := exec.LookPath("ssh-keygen"); err != nil {
		why = "no ssh-keygen (apt-get install openssh-client)"
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// Start starts n servers named name-01..name-NN (their host keys trusted)
// and untrusted more whose host keys are not in known_hosts.
func Start(t testing.TB, name string, n, untrusted int) *Rig {
	t.Helper()
	EnsureUsers(t)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("privilege separation dir: %v", err)
	}
	// Not t.TempDir: its parent is private, and sshd reads the
	// authorized keys as the test users.
	dir, err := os.MkdirTemp("", "tbsshd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Rig{Dir: dir, KnownHosts: filepath.Join(dir, "known_hosts")}
	ak := filepath.Join(dir, "authorized_keys")
	if err := os.Mkdir(ak, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{UserRO, UserRW} {
		key := filepath.Join(dir, "id_"+u)
		keygen(t, key)
		pub, err := os.ReadFile(key + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ak, u), pub, 0o644); err != nil {
			t.Fatal(err)
		}
		if u == UserRO {
			r.KeyRO = key
		} else {
			r.KeyRW = key
		}
	}
	var known strings.Builder
	for i := 0; i < n+untrusted; i++ {
		s := &Server{Name: fmt.Sprintf("%s-%02d", name, i+1), Port: freePort(t), Trusted: i < n}
		if !s.Trusted {
			s.Name = fmt.Sprintf("%s-stranger-%02d", name, i-n+1)
		}
		hk := filepath.Join(dir, "host_"+s.Name)
		keygen(t, hk)
		s.HostKey = hk
		if s.Trusted {
			pub, err := os.ReadFile(hk + ".pub")
			if err != nil {
				t.Fatal(err)
			}
			f := strings.Fields(string(pub))
			fmt.Fprintf(&known, "[127.0.0.1]:%d %s %s\n", s.Port, f[0], f[1])
		}
		r.start(t, s, hk, ak)
		r.Servers = append(r.Servers, s)
	}
	if err := os.WriteFile(r.KnownHosts, []byte(known.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r.DownPort = freePort(t)
	for _, s := range r.Servers {
		waitReady(t, s)
	}
	return r
}

func (r *Rig) start(t testing.TB, s *Server, hostKey, ak string) {
	t.Helper()
	cfg := filepath.Join(r.Dir, "sshd_config_"+s.Name)
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile %s
AuthorizedKeysFile %s/%%u
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin no
AllowUsers %s %s
AllowAgentForwarding no
AllowTcpForwarding no
X11Forwarding no
PermitTTY yes
PrintMotd no
PrintLastLog no
MaxStartups 200
MaxSessions 50
LogLevel INFO
`, s.Port, hostKey, filepath.Join(r.Dir, s.Name+".pid"), ak, UserRO, UserRW)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(r.Dir, s.Name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	s.cmd = cmd
	t.Cleanup(func() {
		// The listener, then every process it started (connections and
		// the commands they run), wherever they moved their groups to.
		pids := Descendants(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil && len(b) > 0 {
				t.Logf("%s sshd log:\n%s", s.Name, tail(string(b), 2000))
			}
		}
	})
}

// NewKey makes another client key pair in the rig's directory and returns
// the private key's path (not yet authorized for any login: see Authorize).
func (r *Rig) NewKey(t testing.TB, name string) string {
	t.Helper()
	key := filepath.Join(r.Dir, "id_"+name)
	keygen(t, key)
	return key
}

// Authorize adds a line to login's authorized keys: options (may be "",
// e.g. `restrict,command="echo forced"`) and the public half of key.
func (r *Rig) Authorize(t testing.TB, login, options, key string) {
	t.Helper()
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(pub))
	if options != "" {
		line = options + " " + line
	}
	f, err := os.OpenFile(filepath.Join(r.Dir, "authorized_keys", login), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		t.Fatal(err)
	}
}

// Pid returns the server's listener pid.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Processes returns the command names (comm) of every process below the
// server, with their users' uids.
func (s *Server) Processes() []Proc {
	var out []Proc
	for _, p := range Descendants(s.Pid()) {
		comm, uid := procInfo(p)
		if comm != "" {
			out = append(out, Proc{Pid: p, Comm: comm, UID: uid})
		}
	}
	return out
}

// Proc is a process below a server.
type Proc struct {
	Pid  int
	Comm string
	UID  int
}

// Inventory returns an INI inventory of the rig's servers (all trusted
// ones in group "name", strangers in "strangers") plus one down host.
func (r *Rig) Inventory(group string, withDown bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]\n", group)
	for _, s := range r.Servers {
		if s.Trusted {
			fmt.Fprintf(&b, "%s ansible_host=127.0.0.1 ansible_port=%d\n", s.Name, s.Port)
		}
	}
	if withDown {
		fmt.Fprintf(&b, "%s-down ansible_host=127.0.0.1 ansible_port=%d\n", group, r.DownPort)
	}
	b.WriteString("\n[strangers]\n")
	for _, s := range r.Servers {
		if !s.Trusted {
			fmt.Fprintf(&b, "%s ansible_host=127.0.0.1 ansible_port=%d\n", s.Name, s.Port)
		}
	}
	return b.String()
}

// EnsureUsers makes the two test logins (UserRO, UserRW) if they are
// missing; like Require, it skips (or under CI fails) without root.
func EnsureUsers(t testing.TB) {
	t.Helper()
	Require(t)
	for _, u := range []string{UserRO, UserRW} {
		ensureUser(t, u)
	}
}

func ensureUser(t testing.TB, name string) {
	t.Helper()
	// Tests of several packages may get here at once: useradd and usermod
	// lock /etc/passwd and fail while another holds it, so retry a little.
	var out []byte
	var err error
	for try := 0; try < 20; try++ {
		if _, lerr := user.Lookup(name); lerr != nil {
			out, err = exec.Command("useradd", "--create-home", "--shell", "/bin/bash", name).CombinedOutput()
		} else if locked(name) {
			// useradd leaves the password "!", which sshd without PAM
			// reads as a locked account; "*" is no password but open.
			out, err = exec.Command("usermod", "-p", "*", name).CombinedOutput()
		} else {
			return
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Fatalf("test user %s: %v: %s", name, err, out)
}

// locked reports whether name's shadow password starts with '!'.
func locked(name string) bool {
	b, err := os.ReadFile("/etc/shadow")
	if err != nil {
		return true
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) > 1 && f[0] == name {
			return strings.HasPrefix(f[1], "!")
		}
	}
	return true
}

func keygen(t testing.TB, path string) {
	t.Helper()
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "thinbot-test", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	// Client keys are read by ssh as the test's user: keep them private.
	_ = os.Chmod(path, 0o600)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitReady waits for s's banner until sshd exits or the test's deadline
// passes (less a share of what is left, for the failure to be reported):
// on a loaded machine a start takes what it takes, and a fixed bound
// would fail a test that would have passed.
func waitReady(t testing.TB, s *Server) {
	t.Helper()
	port := s.Port
	deadline := time.Now().Add(10 * time.Minute)
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok {
			deadline = d.Add(-min(time.Minute, time.Until(d)/10))
		}
	}
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "SSH-2.0") {
				return
			}
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid)); err != nil || bytes.Contains(st, []byte(") Z ")) {
			t.Fatalf("sshd %s exited before it answered on port %d", s.Name, port)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("sshd on port %d did not answer by the test's deadline", port)
}

// Descendants returns every process below pid (children, grandchildren...).
func Descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndex(s, ")")
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p] = pp
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if pp == p {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

func procInfo(pid int) (string, int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "", -1
	}
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st); err != nil {
		return "", -1
	}
	return strings.TrimSpace(string(b)), int(st.Uid)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// FindCmdline returns the pids of every process on the machine whose
// command line (arguments joined by spaces) contains s: a remote command
// that escaped its sshd (reparented to init) is still found.
func FindCmdline(s string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil || p == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			out = append(out, p)
		}
	}
	return out
}

// UID returns the uid of the local user name (the test users UserRO and
// UserRW), failing the test if there is none.
func UID(t testing.TB, name string) int {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Uid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
