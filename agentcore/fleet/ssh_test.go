package fleet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/fleet"
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
		mode fleet.Mode
		want string
	}{{fleet.ReadOnly, sshd.UserRO}, {fleet.Privileged, sshd.UserRW}, {fleet.ReadOnly, sshd.UserRO}} {
		rs := f.Run(context.Background(), hostsOf(t, f, "web"), tc.mode, "id -un")
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
	rs := f.Run(context.Background(), hostsOf(t, f, "web"), fleet.ReadOnly,
		`printf 'a\nb\n'; echo err >&2; test "$(hostname)" = nothing || exit 7`)
	for _, r := range rs {
		if r.ExitCode != 7 || r.Err != "" {
			t.Errorf("%s: %+v", r.Host, r)
		}
		if got := string(r.Output); got != "a\nb\nerr\n" {
			t.Errorf("%s output %q (CRLF must become LF)", r.Host, got)
		}
		if len(r.SHA256) != 64 || r.Size != int64(len(r.Output)) {
			t.Errorf("%s: size %d sha %q", r.Host, r.Size, r.SHA256)
		}
	}
}

// TestSSHUnreachable: an unknown host key is refused and a down host is
// reported, while the others answer.
func TestSSHUnreachable(t *testing.T) {
	f, _ := newFleet(t, 2, 1, true, fleet.Config{ConnectTimeout: 5 * time.Second})
	hosts := append(hostsOf(t, f, "web"), hostsOf(t, f, "strangers")...)
	rs := f.Run(context.Background(), hosts, fleet.ReadOnly, "echo hello")
	byHost := map[string]fleet.Result{}
	for _, r := range rs {
		byHost[r.Host] = r
	}
	for _, h := range []string{"web-01", "web-02"} {
		if r := byHost[h]; !r.OK() || string(r.Output) != "hello\n" {
			t.Errorf("%s: %+v %q", h, r, r.Output)
		}
	}
	if r := byHost["web-down"]; !r.Unreachable() || !strings.Contains(r.Err, "refused") {
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
	rs := f.Run(context.Background(), hostsOf(t, f, "web"), fleet.ReadOnly, "id -un")
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
			f.Run(context.Background(), hosts, fleet.ReadOnly, "true")
			marker := fmt.Sprintf("300.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan []fleet.Result)
			go func() { done <- f.Run(ctx, hosts, fleet.Privileged, "sleep "+marker) }()
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
			stopped := 0
			for _, r := range rs {
				if !r.Cancelled {
					t.Errorf("%s: %+v", r.Host, r)
				}
				if r.Err == "" {
					stopped++
				}
			}
			if stopped != 2 {
				t.Errorf("%d hosts were running when stopped, want 2: %+v", stopped, rs)
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

// remote returns the processes running the marked sleep as uid.
func remote(marker string, uid int) []int {
	var out []int
	for _, p := range sshd.FindCmdline("sleep " + marker) {
		if owner(p) == uid {
			out = append(out, p)
		}
	}
	return out
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
		for _, order := range [][]fleet.Mode{{fleet.ReadOnly, fleet.Privileged}, {fleet.Privileged, fleet.ReadOnly}} {
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
					r := f.Run(context.Background(), hosts, m, "id -un")[0]
					want := "RO-FORCED"
					if m == fleet.Privileged {
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
