// Package fleetbench compares thinbot's fleet fan-out with Debian's
// ansible ad-hoc mode and with a bare ssh, on the same real sshd hosts
// (tests/sshd). It only benchmarks; run it as root:
//
//	go test -run '^$' -bench BenchmarkFanout -benchtime 5x ./tests/fleetbench/
//
// Each sub-benchmark is one configuration; ms/op is one whole fan-out
// (or one single-host command), ms/host that divided by the host count.
package fleetbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/tests/sshd"
)

const hosts = 20

func BenchmarkFanout(b *testing.B) {
	rig := sshd.Start(b, "web", hosts, 0)
	invPath := filepath.Join(rig.Dir, "inventory.ini")
	if err := os.WriteFile(invPath, []byte(rig.Inventory("web", false)), 0o644); err != nil {
		b.Fatal(err)
	}
	inv, err := fleet.LoadFile(invPath)
	if err != nil {
		b.Fatal(err)
	}
	if err := inv.Build(); err != nil {
		b.Fatal(err)
	}
	all, _ := inv.Select("all")
	newFleet := func(persist time.Duration) *fleet.Fleet {
		f, err := fleet.New(fleet.Config{Inventory: inv, KnownHosts: rig.KnownHosts, SSHConfig: "/dev/null",
			Env: []string{"PATH=/usr/bin:/bin", "HOME=" + rig.Dir}, ControlPersist: persist, Concurrency: 10,
			Access: []fleet.Access{{Group: "all",
				ReadOnly:   fleet.Identity{User: sshd.UserRO, Key: rig.KeyRO},
				Privileged: fleet.Identity{User: sshd.UserRW, Key: rig.KeyRW}}}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
		return f
	}
	runFleet := func(b *testing.B, f *fleet.Fleet, hs []fleet.Host) {
		// One warm-up outside the clock: masters up, caches hot.
		check(b, f.Run(context.Background(), hs, sandbox.ReadOnly, "uptime", fleet.Limits{}))
		b.ResetTimer()
		for b.Loop() {
			check(b, f.Run(context.Background(), hs, sandbox.ReadOnly, "uptime", fleet.Limits{}))
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(len(hs)), "ms/host")
	}
	warm, cold := newFleet(0), newFleet(-1)
	b.Run("fanout20/thinbot-controlmaster", func(b *testing.B) { runFleet(b, warm, all) })
	b.Run("fanout20/thinbot-no-multiplexing", func(b *testing.B) { runFleet(b, cold, all) })
	b.Run("fanout20/ansible-f10", func(b *testing.B) { runAnsible(b, rig, invPath) })
	b.Run("host1/thinbot-controlmaster", func(b *testing.B) { runFleet(b, warm, all[:1]) })
	b.Run("host1/bare-ssh-controlmaster", func(b *testing.B) { runBare(b, rig, all[0], true) })
	b.Run("host1/thinbot-no-multiplexing", func(b *testing.B) { runFleet(b, cold, all[:1]) })
	b.Run("host1/bare-ssh-no-multiplexing", func(b *testing.B) { runBare(b, rig, all[0], false) })
}

func check(b *testing.B, rs []fleet.Result) {
	for _, r := range rs {
		if !r.OK() || !strings.Contains(string(r.Output), "load average") {
			b.Fatalf("%s: %+v %q", r.Host, r, r.Output)
		}
	}
}

// runAnsible runs `ansible all -i inv -m command -a uptime -f 10` with the
// same login, key and known_hosts, ansible's own ControlPersist and
// pipelining on (its fastest settings).
func runAnsible(b *testing.B, rig *sshd.Rig, inv string) { runAnsibleForks(b, rig, inv, 10) }

func runAnsibleForks(b *testing.B, rig *sshd.Rig, inv string, forks int) {
	run := ansibleRunner(b, rig, inv, forks)
	run()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/hosts, "ms/host")
}

// ansibleRunner returns a func that runs the ansible ad-hoc command once
// (its ControlPersist connections kept between calls).
func ansibleRunner(b *testing.B, rig *sshd.Rig, inv string, forks int) func() {
	if _, err := exec.LookPath("ansible"); err != nil {
		if os.Getenv("CI") != "" {
			b.Fatal("no ansible; .ci/run installs it")
		}
		b.Skip("no ansible (apt-get install ansible)")
	}
	cp, err := os.MkdirTemp("", "tbans")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ents, _ := os.ReadDir(cp)
		for _, e := range ents {
			_ = exec.Command("ssh", "-o", "ControlPath="+filepath.Join(cp, e.Name()), "-O", "exit", "x").Run()
		}
		os.RemoveAll(cp)
	})
	cfg := filepath.Join(rig.Dir, fmt.Sprintf("ansible-%d.cfg", forks))
	conf := fmt.Sprintf(`[defaults]
host_key_checking = True
interpreter_python = /usr/bin/python3
forks = %d
local_tmp = %s/ansible-local
[ssh_connection]
ssh_args = -F /dev/null -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes
control_path_dir = %s
pipelining = True
`, forks, rig.Dir, rig.KnownHosts, cp)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		b.Fatal(err)
	}
	return func() {
		cmd := exec.Command("ansible", "all", "-i", inv, "-m", "command", "-a", "uptime", "-f", fmt.Sprint(forks),
			"-u", sshd.UserRO, "--private-key", rig.KeyRO)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + rig.Dir, "ANSIBLE_CONFIG=" + cfg, "LANG=C.UTF-8"}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Count(string(out), "rc=0") != hosts {
			b.Fatalf("ansible: %v\n%s", err, out)
		}
	}
}

// runBare runs `ssh host uptime` with the same login, key and known_hosts
// as thinbot and none of its options.
func runBare(b *testing.B, rig *sshd.Rig, h fleet.Host, multiplex bool) {
	cp, err := os.MkdirTemp("", "tbbare")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = exec.Command("ssh", "-o", "ControlPath="+filepath.Join(cp, "m"), "-O", "exit", "x").Run()
		os.RemoveAll(cp)
	})
	args := []string{"-F", "/dev/null", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=" + rig.KnownHosts,
		"-i", rig.KeyRO, "-l", sshd.UserRO, "-p", fmt.Sprint(h.Port)}
	if multiplex {
		args = append(args, "-o", "ControlMaster=auto", "-o", "ControlPersist=60", "-o", "ControlPath="+filepath.Join(cp, "m"))
	}
	args = append(args, h.Addr, "uptime")
	run := func() {
		out, err := exec.Command("ssh", args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "load average") {
			b.Fatalf("ssh: %v %s", err, out)
		}
	}
	run()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}
