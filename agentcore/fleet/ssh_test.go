package fleet_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/tests/sshd"
)

// newFleet starts n sshd hosts (plus untrusted ones) and returns a Fleet
// over them: group "web" holds the trusted hosts (and a down host when
// withDown), with the read-only and privileged test identities.
func newFleet(t *testing.T, n, untrusted int, withDown bool, cfg fleet.Config) (*fleet.Fleet, *sshd.Rig) {
	t.Helper()
	rig := sshd.Start(t, "web", n, untrusted)
	path := filepath.Join(rig.Dir, "inventory.ini")
	if err := os.WriteFile(path, []byte(rig.Inventory("web", withDown)), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := fleet.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Build(); err != nil {
		t.Fatal(err)
	}
	cfg.Inventory = inv
	cfg.KnownHosts = rig.KnownHosts
	cfg.SSHConfig = "/dev/null" // the machine's ssh_config stays out of the tests
	cfg.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + rig.Dir}
	cfg.Access = []fleet.Access{{Group: "all",
		ReadOnly:   fleet.Identity{User: sshd.UserRO, Key: rig.KeyRO},
		Privileged: fleet.Identity{User: sshd.UserRW, Key: rig.KeyRW}}}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	f, err := fleet.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f, rig
}

func hostsOf(t *testing.T, f *fleet.Fleet, pattern string) []fleet.Host {
	t.Helper()
	hs, err := f.Inventory().Select(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

func TestSSHIdentities(t *testing.T) {
	f, _ := newFleet(t, 3, 0, false, fleet.Config{})
	for _, tc := range []struct {
		mode sandbox.Mode
		want string
	}{{sandbox.ReadOnly, sshd.UserRO}, {sandbox.Approved, sshd.UserRW}, {sandbox.ReadOnly, sshd.UserRO}} {
		rs := f.Run(context.Background(), hostsOf(t, f, "web"), tc.mode, "id -un", fleet.Limits{})
		if len(rs) != 3 {
			t.Fatalf("%d results", len(rs))
		}
		for _, r := range rs {
			if !r.OK() || strings.TrimSpace(string(r.Output)) != tc.want {
				t.Errorf("%s %s: %+v output %q, want %s", tc.mode, r.Host, r, r.Output, tc.want)
			}
		}
		s := fleet.Summary(rs, 4096)
		if !strings.Contains(s, "== web-[01-03] (3 hosts, exit 0):\n"+tc.want+"\n") {
			t.Errorf("summary:\n%s", s)
		}
	}
}

func TestSSHExitCodesAndOutput(t *testing.T) {
	f, _ := newFleet(t, 2, 0, false, fleet.Config{})
	rs := f.Run(context.Background(), hostsOf(t, f, "web"), sandbox.ReadOnly,
		`printf 'a\r\nb\n'; echo err >&2; echo out2; test "$(hostname)" = nothing || exit 7`, fleet.Limits{})
	for _, r := range rs {
		if r.ExitCode != 7 || r.Err != "" {
			t.Errorf("%s: %+v", r.Host, r)
		}
		// stdout and stderr as they came (two streams: their order is
		// not kept), bytes unchanged (no terminal: no CRLF added).
		if got := string(r.Output); !strings.Contains(got, "err\n") || strings.Replace(got, "err\n", "", 1) != "a\r\nb\nout2\n" {
			t.Errorf("%s output %q", r.Host, got)
		}
		if len(r.SHA256) != 64 || r.Size != int64(len(r.Output)) {
			t.Errorf("%s: size %d sha %q", r.Host, r.Size, r.SHA256)
		}
	}
	// A command that exits 255 ran: it is not an ssh failure.
	rs = f.Run(context.Background(), hostsOf(t, f, "web-01"), sandbox.ReadOnly, "echo bye >&2; exit 255", fleet.Limits{})
	if r := rs[0]; r.ExitCode != 255 || r.Err != "" || string(r.Output) != "bye\n" {
		t.Errorf("exit 255: %+v %q", r, r.Output)
	}
}

// TestSSHUnreachable: an unknown host key is refused and a down host is
// reported, while the others answer.
func TestSSHUnreachable(t *testing.T) {
	f, _ := newFleet(t, 2, 1, true, fleet.Config{ConnectTimeout: 5 * time.Second})
	hosts := append(hostsOf(t, f, "web"), hostsOf(t, f, "strangers")...)
	rs := f.Run(context.Background(), hosts, sandbox.ReadOnly, "echo hello", fleet.Limits{})
	byHost := map[string]fleet.Result{}
	for _, r := range rs {
		byHost[r.Host] = r
	}
	for _, h := range []string{"web-01", "web-02"} {
		if r := byHost[h]; !r.OK() || string(r.Output) != "hello\n" {
			t.Errorf("%s: %+v %q", h, r, r.Output)
		}
	}
	// Refused, usually; the port was free when the rig picked it, and
	// another test's listener may have taken it since (then it fails the
	// key exchange): unreachable either way.
	if r := byHost["web-down"]; !r.Unreachable() || !strings.Contains(r.Err, "refused") && !strings.Contains(r.Err, "kex_exchange_identification") {
		t.Errorf("down host: %+v", r)
	}
	if r := byHost["web-stranger-01"]; !r.Unreachable() || !strings.Contains(r.Err, "Host key verification failed") || r.Size != 0 {
		t.Errorf("unknown host key: %+v", r)
	}
	s := fleet.Summary(rs, 4096)
	for _, want := range []string{"== web-[01-02] (2 hosts, exit 0):\nhello", "unreachable, nothing ran: web-down", "unreachable, nothing ran: web-stranger-01"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// TestSSHNoIdentity: a host no Access covers runs nothing (fail closed).
func TestSSHNoIdentity(t *testing.T) {
	rig := sshd.Start(t, "web", 1, 0)
	inv, err := fleet.ParseINI(strings.NewReader(rig.Inventory("web", false)))
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Build(); err != nil {
		t.Fatal(err)
	}
	f, err := fleet.New(fleet.Config{Inventory: inv, KnownHosts: rig.KnownHosts, SSHConfig: "/dev/null",
		Access: []fleet.Access{{Group: "strangers", ReadOnly: fleet.Identity{User: sshd.UserRO, Key: rig.KeyRO}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs := f.Run(context.Background(), hostsOf(t, f, "web"), sandbox.ReadOnly, "id -un", fleet.Limits{})
	if !strings.Contains(rs[0].Err, "no read_only identity") {
		t.Errorf("%+v", rs[0])
	}
}

// TestSSHStop: cancelling mid fan-out kills the ssh clients and, through
// the remote terminal's hangup, the remote commands; with ControlMaster
// multiplexing and without.
func TestSSHStop(t *testing.T) {
	for _, tc := range []struct {
		name    string
		persist time.Duration
	}{{"controlmaster", 0}, {"direct", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			f, rig := newFleet(t, 3, 0, false, fleet.Config{Concurrency: 2, ControlPersist: tc.persist})
			hosts := hostsOf(t, f, "web")
			// Warm the masters up, so the stop hits multiplexed sessions.
			f.Run(context.Background(), hosts, sandbox.ReadOnly, "true", fleet.Limits{})
			marker := fmt.Sprintf("300.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan []fleet.Result)
			go func() { done <- f.Run(ctx, hosts, sandbox.Approved, "sleep "+marker, fleet.Limits{}) }()
			// Wait until the first two hosts run it (concurrency 2).
			uid := sshd.UID(t, sshd.UserRW)
			waitFor(t, 15*time.Second, func() bool { return len(remote(marker, uid)) == 2 })
			cancel()
			var rs []fleet.Result
			select {
			case rs = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			// Hosts start in inventory order: web-01 and web-02 ran and
			// were stopped, web-03 was never tried (not "unreachable").
			for i, r := range rs {
				if !r.Cancelled || r.Err != "" || r.NotStarted != (i == 2) || r.Unreachable() {
					t.Errorf("%s: %+v", r.Host, r)
				}
			}
			if s := fleet.Summary(rs, 4096); !strings.HasPrefix(s, "3 host(s): 0 exit 0, 0 failed, 2 stopped, 1 not started, 0 unreachable\n") ||
				!strings.Contains(s, "== not started (the run was stopped first; nothing was tried there): web-03\n") {
				t.Errorf("summary:\n%s", s)
			}
			// The remote sleeps die of the hangup, not of the test's
			// cleanup (which has not run yet).
			waitFor(t, 15*time.Second, func() bool { return len(remote(marker, uid)) == 0 })
			// A sleep that just died may still be listed until its sshd
			// session reaps it: wait for that too, then check.
			waitFor(t, 15*time.Second, func() bool {
				for _, s := range rig.Servers {
					for _, p := range s.Processes() {
						if p.Comm == "sleep" {
							return false
						}
					}
				}
				return true
			})
			for _, s := range rig.Servers {
				for _, p := range s.Processes() {
					if p.Comm == "sleep" {
						t.Errorf("%s still runs %+v", s.Name, p)
					}
				}
			}
		})
	}
}

// remote returns the sleep processes running the marked sleep as uid (not
// the shells whose command line holds it too).
func remote(marker string, uid int) []int {
	var out []int
	for _, p := range sshd.FindCmdline("sleep " + marker) {
		if owner(p) == uid && comm(p) == "sleep" {
			out = append(out, p)
		}
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

func owner(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Uid:") {
			f := strings.Fields(l)
			if len(f) > 1 {
				n, _ := strconv.Atoi(f[1])
				return n
			}
		}
	}
	return -1
}

func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSSHIdentitiesNeverShareAConnection: two identities with one login and
// two keys (the read-only key restricted to a forced command), or with the
// login from ansible_user, get a ControlMaster connection each, in both
// orders: a read-only command never runs over the privileged key's
// connection, an approved one never through the read-only key's forced
// command. With the master keyed by host, port and login only, whichever
// ran first owned the connection the other then reused.
func TestSSHIdentitiesNeverShareAConnection(t *testing.T) {
	rig := sshd.Start(t, "web", 1, 0)
	roKey := rig.NewKey(t, "forced-ro")
	rig.Authorize(t, sshd.UserRW, `restrict,pty,command="echo RO-FORCED"`, roKey)
	s := rig.Servers[0]
	for _, tc := range []struct {
		name    string
		hostVar string
		ro, rw  fleet.Identity
	}{
		{"same login", "", fleet.Identity{User: sshd.UserRW, Key: roKey}, fleet.Identity{User: sshd.UserRW, Key: rig.KeyRW}},
		{"ansible_user", " ansible_user=" + sshd.UserRW, fleet.Identity{Key: roKey}, fleet.Identity{Key: rig.KeyRW}},
	} {
		for _, order := range [][]sandbox.Mode{{sandbox.ReadOnly, sandbox.Approved}, {sandbox.Approved, sandbox.ReadOnly}} {
			t.Run(fmt.Sprintf("%s/%s-first", tc.name, order[0]), func(t *testing.T) {
				inv, err := fleet.ParseINI(strings.NewReader(fmt.Sprintf("[web]\n%s ansible_host=127.0.0.1 ansible_port=%d%s\n", s.Name, s.Port, tc.hostVar)))
				if err != nil {
					t.Fatal(err)
				}
				if err := inv.Build(); err != nil {
					t.Fatal(err)
				}
				f, err := fleet.New(fleet.Config{Inventory: inv, KnownHosts: rig.KnownHosts, SSHConfig: "/dev/null",
					Env: []string{"PATH=/usr/bin:/bin", "HOME=" + rig.Dir}, Timeout: 30 * time.Second,
					Access: []fleet.Access{{Group: "all", ReadOnly: tc.ro, Privileged: tc.rw}}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = f.Close() })
				hosts := hostsOf(t, f, "web")
				for _, m := range order {
					r := f.Run(context.Background(), hosts, m, "id -un", fleet.Limits{})[0]
					want := "RO-FORCED"
					if m == sandbox.Approved {
						want = sshd.UserRW
					}
					if got := strings.TrimSpace(string(r.Output)); !r.OK() || got != want {
						t.Errorf("%s after %s: %+v output %q, want %q", m, order[0], r, got, want)
					}
				}
			})
		}
	}
}

// TestSSHRemoteCommandEnvironment: a remote command reads an empty stdin
// (cat, grep, sort and wc with no file end at once instead of waiting
// for the timeout), has no terminal, and finds the pagers set to cat.
func TestSSHRemoteCommandEnvironment(t *testing.T) {
	f, _ := newFleet(t, 1, 0, false, fleet.Config{})
	hosts := hostsOf(t, f, "web")
	lim := fleet.Limits{Timeout: 20 * time.Second}
	for _, tc := range []struct {
		cmd, out string
		code     int
	}{
		{"cat", "", 0},
		{"grep x", "", 1},
		{"sort | wc -l", "0\n", 0},
		{"head -n 1; echo read-done", "read-done\n", 0},
		{"test -t 0 || test -t 1 || test -t 2 || echo no-terminal", "no-terminal\n", 0},
		{`echo "pager=$PAGER systemd=[$SYSTEMD_PAGER] git=$GIT_PAGER"`, "pager=cat systemd=[] git=cat\n", 0},
	} {
		for _, m := range []sandbox.Mode{sandbox.ReadOnly, sandbox.Approved} {
			r := f.Run(context.Background(), hosts, m, tc.cmd, lim)[0]
			if r.TimedOut || r.Err != "" || r.ExitCode != tc.code || string(r.Output) != tc.out {
				t.Errorf("%s %q: %+v output %q, want exit %d %q", m, tc.cmd, r, r.Output, tc.code, tc.out)
			}
		}
	}
}

// TestSSHLimits: the caller's timeout ends a remote command (and kills it
// on the host), and the caller's capture limit bounds the output kept
// while size and hash cover all of it.
func TestSSHLimits(t *testing.T) {
	f, _ := newFleet(t, 1, 0, false, fleet.Config{Timeout: -1})
	hosts := hostsOf(t, f, "web")
	marker := fmt.Sprintf("301.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
	r := f.Run(context.Background(), hosts, sandbox.ReadOnly, "sleep "+marker, fleet.Limits{Timeout: 2 * time.Second})[0]
	if !r.TimedOut || r.Err != "" {
		t.Errorf("timeout: %+v", r)
	}
	uid := sshd.UID(t, sshd.UserRO)
	waitFor(t, 15*time.Second, func() bool { return len(remote(marker, uid)) == 0 })
	r = f.Run(context.Background(), hosts, sandbox.ReadOnly, "seq 1 100000", fleet.Limits{CaptureLimit: 1000})[0]
	if !r.OK() || r.Size != 588895 || len(r.Output) > 1100 || !strings.Contains(string(r.Output), "bytes omitted") || !strings.HasSuffix(string(r.Output), "100000\n") {
		t.Errorf("capture: %+v, %d bytes kept", r, len(r.Output))
	}
}

// TestSSHHostKeyChanged: a host whose key is not the one known_hosts holds
// is reported plainly (host key changed, the expected and the presented
// fingerprints, nothing ran), without ssh's removal recipe, and the
// command does not run there.
func TestSSHHostKeyChanged(t *testing.T) {
	f, rig := newFleet(t, 2, 0, false, fleet.Config{})
	s := rig.Servers[1]
	// known_hosts now holds another key for web-02: as if its key changed.
	other := rig.NewKey(t, "impostor")
	pub, err := os.ReadFile(other + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	kh, err := os.ReadFile(rig.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(kh)), "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("[127.0.0.1]:%d ", s.Port)) {
			fl := strings.Fields(string(pub))
			l = fmt.Sprintf("[127.0.0.1]:%d %s %s", s.Port, fl[0], fl[1])
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(rig.KnownHosts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fp := func(key string) string {
		out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", key).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Fields(string(out))[1]
	}
	expected, seen := fp(other+".pub"), fp(s.HostKey+".pub")
	file := filepath.Join(os.TempDir(), fmt.Sprintf("tb-hostkey-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(file) })
	rs := f.Run(context.Background(), hostsOf(t, f, "web"), sandbox.Approved, "touch "+file+".$(hostname -s).$$ && echo wrote", fleet.Limits{})
	if !rs[0].OK() {
		t.Errorf("web-01: %+v", rs[0])
	}
	r := rs[1]
	want := fmt.Sprintf("host key changed for [127.0.0.1]:%d: known_hosts expects ED25519 %s (%s line 2), the host presented ED25519 %s. This may be a man-in-the-middle attack; nothing ran on this host.", s.Port, expected, rig.KnownHosts, seen)
	if !r.Unreachable() || !strings.HasPrefix(r.Err, want) || r.Size != 0 {
		t.Errorf("web-02: %+v\nwant an error starting %q", r, want)
	}
	for _, bad := range []string{"ssh-keygen -f", " -R ", "remove with"} {
		if strings.Contains(r.Err, bad) {
			t.Errorf("the error holds a removal recipe (%q): %s", bad, r.Err)
		}
	}
	if sum := fleet.Summary(rs, 4096); !strings.Contains(sum, "== unreachable, nothing ran: web-02 (1 host): host key changed") {
		t.Errorf("summary:\n%s", sum)
	}
}
