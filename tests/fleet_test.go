package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
	"github.com/thinbot/thinbot/tests/sshd"
)

func runOn(cmd, target string) fakemodel.Reply {
	b, _ := json.Marshal(map[string]string{"command": cmd, "reason": "test", "target": target})
	return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: string(b)}}}
}

// writeFleet writes a fleet file for the rig: its inventory, the two test
// identities for group web, and the rig's known_hosts.
func writeFleet(t *testing.T, rig *sshd.Rig, withDown bool) string {
	t.Helper()
	inv := filepath.Join(rig.Dir, "inventory.ini")
	if err := os.WriteFile(inv, []byte(rig.Inventory("web", withDown)), 0o644); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(rig.Dir, "fleet.yaml")
	y := fmt.Sprintf(`inventory: inventory.ini
known_hosts: %s
ssh_config: /dev/null
concurrency: 4
timeout: 30s
groups:
  - name: web
    read_only: {user: %s, key: %s}
    privileged: {user: %s, key: %s}
`, rig.KnownHosts, sshd.UserRO, rig.KeyRO, sshd.UserRW, rig.KeyRW)
	if err := os.WriteFile(f, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestFleetHostsCommand: thinbot hosts lists the inventory, as a table and
// as JSON, and selects with a pattern; no server is contacted.
func TestFleetHostsCommand(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "inv.yml"), []byte(`all:
  children:
    web:
      hosts:
        web-[01:03]:
          ansible_host: 127.0.0.1
          ansible_port: 2201
    db:
      hosts:
        db-1:
`), 0o644)
	os.WriteFile(filepath.Join(dir, "ro"), []byte("k"), 0o600)
	os.WriteFile(filepath.Join(dir, "rw"), []byte("k2"), 0o600)
	os.WriteFile(filepath.Join(dir, "kh"), []byte("10.9.9.9 ssh-ed25519 AAAA\n"), 0o644)
	fleetFile := filepath.Join(dir, "fleet.yaml")
	os.WriteFile(fleetFile, []byte(`inventory: inv.yml
known_hosts: kh
hosts:
  - {name: bastion, address: 10.9.9.9, user: ops}
groups:
  - name: web
    read_only: {user: viewer, key: ro}
    privileged: {user: deploy, key: rw}
`), 0o644)
	r := thinbot(t, dir, []string{"THINBOT_FLEET=" + fleetFile}, "hosts")
	if r.code != 0 {
		t.Fatalf("hosts: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"127.0.0.1:2201", "viewer key " + filepath.Join(dir, "ro"), "bastion", "- (unreachable: no identity)", "5 host(s) · 2 group(s) · concurrency 10"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("hosts output lacks %q:\n%s", want, r.stdout)
		}
	}
	r = thinbot(t, dir, nil, "hosts", "--json", "--fleet", fleetFile, "web:!web-02")
	var out struct {
		Hosts []struct {
			Name     string `json:"name"`
			Port     int    `json:"port"`
			ReadOnly *struct {
				User string `json:"user"`
			} `json:"read_only"`
		} `json:"hosts"`
		Groups map[string][]string `json:"groups"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("hosts --json: %v: %s %s", err, r.stdout, r.stderr)
	}
	if len(out.Hosts) != 2 || out.Hosts[0].Name != "web-01" || out.Hosts[1].Name != "web-03" || out.Hosts[0].Port != 2201 || out.Hosts[0].ReadOnly.User != "viewer" {
		t.Errorf("hosts --json: %+v", out)
	}
	if strings.Join(out.Groups["web"], ",") != "web-01,web-02,web-03" {
		t.Errorf("groups: %v", out.Groups)
	}
	// The same identity twice is no privilege separation: refused.
	os.WriteFile(fleetFile, []byte("inventory: inv.yml\ngroups:\n  - {name: web, read_only: {user: a}, privileged: {user: a}}\n"), 0o644)
	if r := thinbot(t, dir, nil, "hosts", "--fleet", fleetFile); r.code == 0 || !strings.Contains(r.stderr, "same identity") {
		t.Errorf("same identities accepted: exit %d %s", r.code, r.stderr)
	}
}

// TestFleetAsk: thinbot ask with THINBOT_FLEET runs a read-only command on
// a group with the read-only login (a down host reported, the others
// answering), and with -a an approved write with the privileged login;
// the chain verifies.
func TestFleetAsk(t *testing.T) {
	rig := sshd.Start(t, "web", 3, 0)
	fleetFile := writeFleet(t, rig, true)
	m := fakemodel.Start(t, runOn("id -un", "web"), fakemodel.Reply{Content: "checked"})
	dir := t.TempDir()
	env := append(modelEnv(m), "THINBOT_FLEET="+fleetFile)
	r := thinbot(t, dir, env, "ask", "who runs there?")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "checked" {
		t.Fatalf("ask: exit %d\nstdout %q\nstderr %s", r.code, r.stdout, r.stderr)
	}
	out := lastToolResult(m.Requests()[1])
	for _, want := range []string{"4 host(s): 3 exit 0, 0 failed, 1 unreachable", "== web-[01-03] (3 hosts, exit 0):\nthinbot-ro\n", "unreachable, nothing ran: web-down"} {
		if !strings.Contains(out, want) {
			t.Errorf("the model got no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sk-e2e-secret-key") {
		t.Error("the API key reached the model")
	}
	// The terminal shows every host's status, not the summary's first lines.
	for _, want := range []string{"| 4 host(s): 3 exit 0, 0 failed, 1 unreachable", "| == unreachable, nothing ran: web-down (1 host): ssh: connect to host 127.0.0.1 port", "| == web-[01-03] (3 hosts, exit 0):"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the terminal shows no %q:\n%s", want, r.stderr)
		}
	}
	verifyChain(t, dbOf(dir))

	// Without -a a write is refused (no approver in ask mode)...
	m2 := fakemodel.Start(t, runOn("id -un && touch /tmp/never-"+filepath.Base(dir), "web"), fakemodel.Reply{Content: "refused"})
	if r := thinbot(t, dir, append(modelEnv(m2), "THINBOT_FLEET="+fleetFile), "ask", "write"); r.code != 0 {
		t.Fatalf("ask: exit %d: %s", r.code, r.stderr)
	}
	if out := lastToolResult(m2.Requests()[1]); !strings.Contains(out, "approval") {
		t.Errorf("write without approval: the model got %q", out)
	}
	// ...with -a it runs with the privileged login on every target.
	m3 := fakemodel.Start(t, runOn("id -un; env | grep -c AGENT_ || true", "web-0*"), fakemodel.Reply{Content: "written"})
	if r := thinbot(t, dir, append(modelEnv(m3), "THINBOT_FLEET="+fleetFile), "ask", "-a", "write"); r.code != 0 {
		t.Fatalf("ask -a: exit %d: %s", r.code, r.stderr)
	}
	if out := lastToolResult(m3.Requests()[1]); !strings.Contains(out, "== web-[01-03] (3 hosts, exit 0):\nthinbot-rw\n0\n") {
		t.Errorf("approved write: the model got:\n%s", out)
	}
	verifyChain(t, dbOf(dir))
}

// TestFleetCheckAsDaemonUser: the fleet checks (config check, thinbot
// hosts) run as the daemon's user refuse a key file that user cannot read
// and one whose mode makes ssh refuse it, and accept it once it is right.
func TestFleetCheckAsDaemonUser(t *testing.T) {
	sshd.EnsureUsers(t)
	uid := sshd.UID(t, sshd.UserRO)
	dir, err := os.MkdirTemp("", "tbfleetcheck")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	// The daemon's user runs a copy of the binary (the build's directory is private).
	bin := filepath.Join(dir, "thinbot")
	data, err := os.ReadFile(thinbotBin)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin, data, 0o755)
	os.WriteFile(filepath.Join(dir, "inv.ini"), []byte("[web]\nweb-1 ansible_host=127.0.0.1\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "kh"), []byte("127.0.0.1 ssh-ed25519 AAAA\n"), 0o644)
	key := filepath.Join(dir, "ro")
	os.WriteFile(key, []byte("k"), 0o600) // root:root 0600
	fleetFile := filepath.Join(dir, "fleet.yaml")
	os.WriteFile(fleetFile, []byte("inventory: inv.ini\nknown_hosts: kh\ngroups:\n  - {name: web, read_only: {user: a, key: ro}, privileged: {user: b}}\n"), 0o644)
	asDaemon := func() (string, error) {
		cmd := exec.CommandContext(t.Context(), bin, "hosts", "--fleet", fleetFile)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := asDaemon(); err == nil || !strings.Contains(out, "permission denied (the daemon's user must be able to read it)") {
		t.Errorf("a key the daemon cannot read: %v\n%s", err, out)
	}
	os.Chown(key, uid, uid)
	os.Chmod(key, 0o640)
	if out, err := asDaemon(); err == nil || !strings.Contains(out, "ssh refuses such a key") {
		t.Errorf("a key ssh refuses: %v\n%s", err, out)
	}
	os.Chmod(key, 0o600)
	if out, err := asDaemon(); err != nil || !strings.Contains(out, "web-1") {
		t.Errorf("a good key: %v\n%s", err, out)
	}
}

// TestFleetTrustFilesHidden: an approved local command cannot read the
// fleet's known_hosts or keys (nor rewrite known_hosts, the trust anchor an
// ssh-keygen -R after a changed host key would remove): they are hidden
// like the bot's other secrets.
func TestFleetTrustFilesHidden(t *testing.T) {
	rig := sshd.Start(t, "web", 1, 0)
	fleetFile := writeFleet(t, rig, false)
	b, _ := json.Marshal(map[string]string{"command": "cat " + rig.KnownHosts + " " + rig.KeyRW + "; ssh-keygen -f " + rig.KnownHosts + " -R '[127.0.0.1]:" + fmt.Sprint(rig.Servers[0].Port) + "'", "reason": "test"})
	m := fakemodel.Start(t, fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: string(b)}}}, fakemodel.Reply{Content: "done"})
	dir := t.TempDir()
	before, err := os.ReadFile(rig.KnownHosts)
	if err != nil {
		t.Fatal(err)
	}
	r := thinbot(t, dir, append(modelEnv(m), "THINBOT_FLEET="+fleetFile), "ask", "-a", "read them")
	if r.code != 0 {
		t.Fatalf("ask: exit %d: %s", r.code, r.stderr)
	}
	out := lastToolResult(m.Requests()[1])
	for _, leak := range []string{"ssh-ed25519", "PRIVATE KEY"} {
		if strings.Contains(out, leak) {
			t.Errorf("an approved command read the fleet's trust files (%q):\n%s", leak, out)
		}
	}
	if after, _ := os.ReadFile(rig.KnownHosts); string(after) != string(before) {
		t.Errorf("an approved command changed known_hosts:\n%s", out)
	}
}

// TestFleetForcedSandbox: the read-only key restricted in authorized_keys
// to `thinbot sandbox exec --read-only` runs each read-only command inside
// thinbot's read-only sandbox on the target: it runs as the read-only
// login, cannot write even where that login may (its home), reads an empty
// stdin, gets its exit code back, and /stop still kills it; the privileged
// key is unaffected.
func TestFleetForcedSandbox(t *testing.T) {
	rig := sshd.Start(t, "web", 1, 0)
	// The target's thinbot: a copy the test logins can execute.
	bin := filepath.Join(rig.Dir, "thinbot")
	data, err := os.ReadFile(thinbotBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	key := rig.NewKey(t, "ro-sandboxed")
	rig.Authorize(t, sshd.UserRO, `restrict,command="`+bin+` sandbox exec --read-only --hide /etc/ssh"`, key)
	inv, err := fleet.ParseINI(strings.NewReader(rig.Inventory("web", false)))
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Build(); err != nil {
		t.Fatal(err)
	}
	f, err := fleet.New(fleet.Config{Inventory: inv, KnownHosts: rig.KnownHosts, SSHConfig: "/dev/null",
		Env: []string{"PATH=/usr/bin:/bin", "HOME=" + rig.Dir}, Timeout: 60 * time.Second,
		Access: []fleet.Access{{Group: "all",
			ReadOnly:   fleet.Identity{User: sshd.UserRO, Key: key},
			Privileged: fleet.Identity{User: sshd.UserRW, Key: rig.KeyRW}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	hosts, _ := inv.Select("web")
	home := "/home/" + sshd.UserRO
	probe := filepath.Join(home, fmt.Sprintf("tb-probe-%d", time.Now().UnixNano()))
	t.Cleanup(func() { os.Remove(probe) })
	for _, tc := range []struct {
		cmd, out string
		code     int
	}{
		{"id -un; echo err >&2", sshd.UserRO + "\nerr\n", 0},
		{"touch " + probe + " 2>/dev/null || echo refused; exit 3", "refused\n", 3},
		{"cat; grep x; echo stdin-empty", "stdin-empty\n", 0},
		{"ls -A /etc/ssh | wc -l", "0\n", 0}, // --hide /etc/ssh
	} {
		r := f.Run(t.Context(), hosts, sandbox.ReadOnly, tc.cmd, fleet.Limits{})[0]
		if r.Err != "" || r.ExitCode != tc.code || (string(r.Output) != tc.out && !(tc.code == 0 && strings.Contains(tc.cmd, "err >&2") && len(r.Output) == len(tc.out))) {
			t.Errorf("%q: %+v output %q, want exit %d %q", tc.cmd, r, r.Output, tc.code, tc.out)
		}
	}
	if _, err := os.Stat(probe); err == nil {
		t.Errorf("a read-only command wrote %s through the sandboxed key", probe)
	}
	rw := filepath.Join(os.TempDir(), filepath.Base(probe)+".rw")
	if r := f.Run(t.Context(), hosts, sandbox.Approved, "touch "+rw+" && id -un && rm "+rw, fleet.Limits{})[0]; !r.OK() || string(r.Output) != sshd.UserRW+"\n" {
		t.Errorf("privileged: %+v %q", r, r.Output)
	}
	// /stop: the sandboxed sleep dies with the session.
	marker := fmt.Sprintf("302.%d%d", os.Getpid(), time.Now().UnixNano()%100000)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan []fleet.Result, 1)
	go func() { done <- f.Run(ctx, hosts, sandbox.ReadOnly, "sleep "+marker, fleet.Limits{}) }()
	running := func() int {
		n := 0
		for _, p := range sshd.FindCmdline("sleep " + marker) {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", p)); err == nil && strings.TrimSpace(string(b)) == "sleep" {
				n++
			}
		}
		return n
	}
	deadline := startDeadline(t) // a login and a sandbox start, on a loaded machine
	for running() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if running() == 0 {
		t.Fatal("the sandboxed sleep never started")
	}
	// Only the read-only helper runs: the approved one (the host writable)
	// would never be used.
	var helpers []string
	for _, p := range sshd.Descendants(rig.Servers[0].Pid()) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); err == nil && strings.Contains(string(b), "__thinbot-sandbox-helper") {
			helpers = append(helpers, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	if len(helpers) != 1 || !strings.HasSuffix(helpers[0], "__thinbot-sandbox-helper read-only ") {
		t.Errorf("sandbox helpers under the forced command: %q, want the read-only one alone", helpers)
	}
	cancel()
	if rs := <-done; !rs[0].Cancelled {
		t.Errorf("stopped: %+v", rs[0])
	}
	deadline = time.Now().Add(20 * time.Second)
	for running() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := running(); n > 0 {
		t.Errorf("%d sandboxed sleeps still run after the stop", n)
	}

	// A client with no input (ssh -n, or stdin from /dev/null) closes
	// the session's stdin at once: the command still runs to its end.
	for _, noInput := range []string{"-n", "</dev/null"} {
		args := []string{"-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + rig.KnownHosts,
			"-o", "IdentitiesOnly=yes", "-i", key, "-l", sshd.UserRO, "-p", fmt.Sprint(rig.Servers[0].Port), "-T", "127.0.0.1", "echo hi; sleep 1; echo there"}
		if noInput == "-n" {
			args = append([]string{"-n"}, args...)
		}
		cmd := exec.CommandContext(t.Context(), "ssh", args...) // a nil Stdin is /dev/null
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil || stdout.String() != "hi\nthere\n" {
			t.Errorf("ssh %s 'echo hi; sleep 1; echo there' through the forced command: %v, stdout %q, stderr %q", noInput, err, stdout.String(), stderr.String())
		}
	}
}

// TestFleetWarmAcrossRuns: with XDG_RUNTIME_DIR set, thinbot ask leaves the
// read-only masters running for the next run (which logs in no more), ends
// the privileged ones at exit, and hides the socket dir from commands.
func TestFleetWarmAcrossRuns(t *testing.T) {
	rig := sshd.Start(t, "web", 2, 0)
	fleetFile := writeFleet(t, rig, false)
	xdg, err := os.MkdirTemp("", "tbxdg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	socks := filepath.Join(xdg, "thinbot-ssh")
	t.Cleanup(func() {
		ents, _ := os.ReadDir(socks)
		for _, e := range ents {
			exec.Command("ssh", "-o", "ControlPath="+filepath.Join(socks, e.Name()), "-O", "exit", "x").Run()
		}
	})
	logins := func() int {
		b, _ := os.ReadFile(filepath.Join(rig.Dir, rig.Servers[0].Name+".log"))
		return strings.Count(string(b), "Accepted publickey for "+sshd.UserRO)
	}
	list := func(prefix string) []string { return controlSockets(socks, prefix) }
	dir := t.TempDir()
	env := func(m *fakemodel.Server) []string {
		return append(modelEnv(m), "THINBOT_FLEET="+fleetFile, "XDG_RUNTIME_DIR="+xdg)
	}
	m := fakemodel.Start(t, runOn("id -un", "web"), fakemodel.Reply{Content: "ok"})
	if r := thinbot(t, dir, env(m), "ask", "who"); r.code != 0 {
		t.Fatalf("ask: exit %d: %s", r.code, r.stderr)
	}
	if ro := list("r-"); len(ro) != 2 {
		t.Fatalf("read-only masters after the run: %v", ro)
	}
	before := logins()
	hidden, _ := json.Marshal(map[string]string{"command": "echo n=$(ls -A " + socks + " | wc -l)", "reason": "test"})
	m2 := fakemodel.Start(t, runOn("id -un", "web-01"), runOn("touch /tmp/tb-warm-$$ && rm /tmp/tb-warm-$$ && id -un", "web-01"),
		fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: string(hidden)}}}, fakemodel.Reply{Content: "ok"})
	if r := thinbot(t, dir, env(m2), "ask", "-a", "again"); r.code != 0 {
		t.Fatalf("ask: exit %d: %s", r.code, r.stderr)
	}
	reqs := m2.Requests()
	if out := lastToolResult(reqs[1]); !strings.Contains(out, "== web-01 (1 host, exit 0):\n"+sshd.UserRO) {
		t.Errorf("read-only: %s", out)
	}
	if out := lastToolResult(reqs[2]); !strings.Contains(out, "== web-01 (1 host, exit 0):\n"+sshd.UserRW) {
		t.Errorf("privileged: %s", out)
	}
	if out := lastToolResult(reqs[3]); !strings.Contains(out, "n=0\n") {
		t.Errorf("a command saw the socket dir: %s", out)
	}
	if after := logins(); after != before {
		t.Errorf("the second run logged in again as %s (%d logins, %d before): the master was not reused", sshd.UserRO, after, before)
	}
	if rw := list("w-"); len(rw) != 0 {
		t.Errorf("privileged masters outlive the run: %v", rw)
	}
	if ro := list("r-"); len(ro) != 2 {
		t.Errorf("read-only masters after the second run: %v", ro)
	}
}

// TestFleetGuideKeys: deploy/fleet.md's key block, pasted as root with the
// daemon's user being the test's read-only login and /etc/thinbot a temp
// dir, makes a key directory and two keys the daemon's user can use and
// nobody else can read, which thinbot's own checks (hosts, as config check
// runs them) accept, and the two authorized_keys lines, the read-only one
// restricted.
func TestFleetGuideKeys(t *testing.T) {
	sshd.EnsureUsers(t)
	user := sshd.UserRO
	u, err := osuser.Lookup(user)
	if err != nil {
		t.Fatal(err)
	}
	var uid, gid int
	fmt.Sscan(u.Uid, &uid)
	fmt.Sscan(u.Gid, &gid)
	data, err := os.ReadFile("../deploy/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "<!-- guide-test: fleet-keys -->\n```sh\n")
	if !ok {
		t.Fatal("deploy/fleet.md has no fleet-keys block")
	}
	block, _, _ = strings.Cut(block, "```")
	root, err := os.MkdirTemp("", "tbkeys")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	etc := filepath.Join(root, "etc", "thinbot")
	if err := os.MkdirAll(etc, 0o750); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(etc), 0o755)
	os.Chown(etc, 0, gid) // as the package makes it: 0750 root:thinbot
	script := strings.NewReplacer("/etc/thinbot", etc, "-g thinbot ", "-g "+user+" ", "chown thinbot:thinbot ", "chown "+user+":"+user+" ", "sudo ", "").Replace(block)
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the guide's key block: %v\n%s\n%s", err, script, out)
	}
	ssh := filepath.Join(etc, "ssh")
	for path, want := range map[string]string{ssh: "drwxr-x--- 0 " + user, ssh + "/ro": "-rw------- " + user + " " + user, ssh + "/rw": "-rw------- " + user + " " + user} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		owner := func(id uint32, named int) string {
			if id == uint32(named) {
				return user
			}
			return fmt.Sprint(id)
		}
		if got := fmt.Sprintf("%s %s %s", st.Mode().String(), owner(sys.Uid, uid), owner(sys.Gid, gid)); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
	ro, _ := os.ReadFile(filepath.Join(root, "thinbot-ro.keys"))
	rw, _ := os.ReadFile(filepath.Join(root, "thinbot-rw.keys"))
	if !strings.HasPrefix(string(ro), "restrict ssh-ed25519 ") || !strings.HasPrefix(string(rw), "ssh-ed25519 ") || string(ro) == "restrict "+string(rw) {
		t.Errorf("authorized_keys lines:\n%s%s", ro, rw)
	}
	// As the daemon's user: ssh reads each key, and thinbot's checks pass.
	bin := filepath.Join(root, "thinbot")
	exe, err := os.ReadFile(thinbotBin)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bin, exe, 0o755)
	os.WriteFile(filepath.Join(ssh, "known_hosts"), []byte("127.0.0.1 ssh-ed25519 AAAA\n"), 0o644)
	fleetFile := filepath.Join(root, "fleet.yaml")
	os.WriteFile(fleetFile, []byte("hosts: [{name: web-1, address: 127.0.0.1, groups: [web]}]\nknown_hosts: "+ssh+"/known_hosts\ngroups:\n"+
		"  - {name: web, read_only: {user: a, key: "+ssh+"/ro}, privileged: {user: b, key: "+ssh+"/rw}}\n"), 0o644)
	asDaemon := func(name string, args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), name, args...)
		cmd.Dir = root
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + root}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s %v as %s: %v\n%s", name, args, user, err, out)
		}
	}
	for _, k := range []string{"ro", "rw"} {
		asDaemon("ssh-keygen", "-y", "-f", filepath.Join(ssh, k))
	}
	asDaemon(bin, "hosts", "--fleet", fleetFile)
}

// controlSockets lists the ControlMaster sockets in dir whose names start
// with prefix ("r-" read-only, "w-" privileged).
func controlSockets(dir, prefix string) []string {
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) && e.Type()&os.ModeSocket != 0 {
			out = append(out, e.Name())
		}
	}
	return out
}
