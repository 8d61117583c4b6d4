package fleetbench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
	"github.com/thinbot/thinbot/tests/sshd"
)

// BenchmarkWholeProcess times whole processes, as an operator at a
// terminal waits for them: `thinbot ask` (a scripted model that asks for
// one `uptime` on all 20 hosts, then answers; store, gate and sandbox
// included) with cold connections and with the read-only masters kept warm
// from the previous run (XDG_RUNTIME_DIR), against `ansible all -m command
// -a uptime -f 20` (pipelining, its ControlPersist warm from the previous
// run) and `parallel-ssh -p 20 -i uptime` (fresh connections). Run as root:
//
//	go test -run '^$' -bench BenchmarkWholeProcess -benchtime 5x ./tests/fleetbench/
func BenchmarkWholeProcess(b *testing.B) {
	rig := sshd.Start(b, "web", hosts, 0)
	invPath := filepath.Join(rig.Dir, "inventory.ini")
	if err := os.WriteFile(invPath, []byte(rig.Inventory("web", false)), 0o644); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(rig.Dir, "thinbot")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/thinbot").CombinedOutput(); err != nil {
		b.Fatalf("build thinbot: %v\n%s", err, out)
	}
	fleetFile := filepath.Join(rig.Dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte(fmt.Sprintf(`inventory: inventory.ini
known_hosts: %s
ssh_config: /dev/null
concurrency: 20
groups:
  - name: all
    read_only: {user: %s, key: %s}
    privileged: {user: %s, key: %s}
`, rig.KnownHosts, sshd.UserRO, rig.KeyRO, sshd.UserRW, rig.KeyRW)), 0o644); err != nil {
		b.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"command": "uptime", "reason": "bench", "target": "all"})
	m := fakemodel.NewFunc(func(r fakemodel.Request) fakemodel.Reply {
		if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
			if !strings.Contains(last.Content, fmt.Sprintf("%d host(s): %d exit 0", hosts, hosts)) {
				return fakemodel.Reply{Content: "FAILED: " + last.Content}
			}
			return fakemodel.Reply{Content: "ok"}
		}
		return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: string(args)}}}
	})
	b.Cleanup(m.Close)
	work := b.TempDir()
	ask := func(b *testing.B, xdg string) {
		cmd := exec.Command(bin, "ask", "uptime everywhere")
		cmd.Dir = work
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + rig.Dir, "AGENT_BASE_URL=" + m.URL, "AGENT_MODEL=m",
			"AGENT_API_KEY=k", "THINBOT_FLEET=" + fleetFile}
		if xdg != "" {
			cmd.Env = append(cmd.Env, "XDG_RUNTIME_DIR="+xdg)
		}
		out, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			b.Fatalf("thinbot ask: %v: %s", err, out)
		}
	}
	xdg, err := os.MkdirTemp("", "tbx")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		socks := filepath.Join(xdg, "thinbot-ssh")
		ents, _ := os.ReadDir(socks)
		for _, e := range ents {
			_ = exec.Command("ssh", "-o", "ControlPath="+filepath.Join(socks, e.Name()), "-O", "exit", "x").Run()
		}
		os.RemoveAll(xdg)
	})
	var hl strings.Builder
	for _, s := range rig.Servers {
		fmt.Fprintf(&hl, "%s@127.0.0.1:%d\n", sshd.UserRO, s.Port)
	}
	hf := filepath.Join(rig.Dir, "pssh-hosts")
	if err := os.WriteFile(hf, []byte(hl.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	pssh := func(b *testing.B) {
		cmd := exec.Command("parallel-ssh", "-h", hf, "-p", "20", "-i", "-x",
			"-F /dev/null -i "+rig.KeyRO+" -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="+rig.KnownHosts, "uptime")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + rig.Dir}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Count(string(out), "[SUCCESS]") != hosts {
			b.Fatalf("parallel-ssh: %v\n%s", err, out)
		}
	}
	ansible := ansibleRunner(b, rig, invPath, 20)
	tools := []struct {
		name string
		run  func(b *testing.B)
	}{
		{"thinbot-ask-cold", func(b *testing.B) { ask(b, "") }},
		{"thinbot-ask-warm", func(b *testing.B) { ask(b, xdg) }},
		{"ansible-f20-warm", func(b *testing.B) { ansible() }},
		{"parallel-ssh-p20", pssh},
	}
	if _, err := exec.LookPath("parallel-ssh"); err != nil {
		b.Log("no parallel-ssh (apt-get install pssh): left out")
		tools = tools[:3]
	}
	// Interleaved (A B C D A B C D …) after one warm-up round, so that a
	// busy machine slows every tool alike; each tool's median is reported.
	times := make([][]time.Duration, len(tools))
	for _, tl := range tools {
		tl.run(b)
	}
	b.ResetTimer()
	for b.Loop() {
		for i, tl := range tools {
			start := time.Now()
			tl.run(b)
			times[i] = append(times[i], time.Since(start))
		}
	}
	for i, tl := range tools {
		slices.Sort(times[i])
		b.ReportMetric(float64(times[i][len(times[i])/2].Milliseconds()), tl.name+"-median-ms")
	}
}
