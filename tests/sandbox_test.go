package tests

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// brokenPolicy is a deliberately wrong gate policy: it declares writers and
// readers of secrets read-only, as a gate with holes would. Everything it
// passes must still be stopped by the kernel sandbox.
const brokenPolicy = `
commands:
  touch: {operands: any, flags: [-a, -m]}
  tee: {operands: any}
  cp: {operands: any}
  dd: {operands: any}
  sed: {operands: any, flags: [-n, -i], value_flags: [-e]}
  base64: {operands: any, flags: [-w], value_flags: [-w]}
  rev: {operands: any}
  od: {operands: any, flags: [-c]}
  ls: {operands: any, flags: [-la, -A]}
  cat: {operands: any}
  mkdir: {operands: any, flags: [-p]}
  ln: {operands: any, flags: [-s]}
  rm: {operands: any, flags: [-f, -rf]}
  printf: {operands: any}
sensitive_paths: []
`

// TestSandboxStopsWhatABrokenGatePasses runs `thinbot ask` (no -a: only pass
// verdicts run) with the broken policy and a scripted model that tries to
// write into the workspace, /tmp and the state dir, truncate the chain with
// sed's w command, and read the API key in several encodings. Afterwards
// nothing was written, the key is nowhere, the chain verifies, and df and
// ps still tell the truth.
func TestSandboxStopsWhatABrokenGatePasses(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(policy, []byte(brokenPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	tmpMark := "thinbot-e2e-pwned-" + filepath.Base(dir)
	attacks := []string{
		"touch pwned",
		"mkdir -p newdir",
		"cp /etc/hostname copied",
		"printf x | tee /tmp/" + tmpMark,
		"dd if=/etc/hostname of=/tmp/" + tmpMark + "-dd",
		// (sed's w into the state dir is denied by the gate's protected
		// paths even under this policy; the executor tests in
		// agentcore/sandbox run it past the gate.)
		"sed -i -e 's/^/x/' .thinbot/events.db",
		"rm -f .thinbot/events.db",
		"ln -s /etc/passwd link",
		"touch /etc/thinbot-pwned",
		"ls -la .thinbot",
		"cat .thinbot/events.db",
		"base64 /proc/self/environ",
		"rev /proc/self/environ",
		"od -c /proc/self/environ",
		"cat /dev/fd/../../self/environ",
	}
	replies := make([]fakemodel.Reply, 0, len(attacks)+3)
	for _, a := range attacks {
		replies = append(replies, run(a))
	}
	replies = append(replies, run("df -h"), run("ps -e -o pid,comm"), fakemodel.Reply{Content: "done"})
	m := fakemodel.Start(t, replies...)

	// The state dir exists before the run, as on a second run.
	r0 := thinbot(t, dir, modelEnv(fakemodel.Start(t, fakemodel.Reply{Content: "hi"})), "ask", "hello")
	if r0.code != 0 {
		t.Fatalf("first ask: %d %s", r0.code, r0.stderr)
	}
	before := snapshot(t, dir)

	r := thinbot(t, dir, modelEnv(m), "ask", "--max-steps", "40", "--policy", policy, "try everything")
	if r.code != 0 {
		t.Fatalf("ask: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, a := range attacks {
		if !strings.Contains(r.stderr, "[pass] "+a) {
			t.Errorf("the broken policy did not pass %q, so the test proves nothing:\n%s", a, r.stderr)
		}
	}
	// Nothing in the workspace changed except the chain's own appends.
	after := snapshot(t, dir)
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s was created by a passing command", p)
		}
	}
	for p, h := range before {
		if strings.HasPrefix(p, ".thinbot/") {
			if _, ok := after[p]; !ok {
				t.Errorf("%s was removed", p)
			}
			continue
		}
		if after[p] != h {
			t.Errorf("%s was changed", p)
		}
	}
	for _, p := range []string{"/tmp/" + tmpMark, "/tmp/" + tmpMark + "-dd", "/etc/thinbot-pwned"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written on the host", p)
		}
	}
	verifyChain(t, dbOf(dir))

	// The key, in no encoding, in the chain's audit file, stdout, stderr or
	// anything the model was sent.
	key := "sk-e2e-secret-key"
	rev := []rune(key)
	slices.Reverse(rev)
	encodings := []string{key, base64.StdEncoding.EncodeToString([]byte("AGENT_API_KEY=" + key))[:16],
		base64.StdEncoding.EncodeToString([]byte(key))[:12], string(rev), hex.EncodeToString([]byte(key)), `s   k   -   e   2   e`}
	audit, err := os.ReadFile(filepath.Join(dir, ".thinbot", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var sent strings.Builder
	for _, req := range m.Requests() {
		for _, msg := range req.Messages {
			sent.WriteString(msg.Content)
		}
	}
	for _, enc := range encodings {
		for name, text := range map[string]string{"audit.jsonl": string(audit), "stdout": r.stdout, "stderr": r.stderr, "model": sent.String()} {
			if strings.Contains(text, enc) {
				t.Errorf("%s holds the key (as %q)", name, enc)
			}
		}
	}

	// Read-only work still sees the host as it is.
	reqs := m.Requests()
	df := lastToolResult(reqs[len(attacks)+1])
	if !strings.Contains(df, "Filesystem") || !strings.Contains(df, " /\n") {
		t.Errorf("df -h in the sandbox:\n%s", df)
	}
	ps := lastToolResult(reqs[len(attacks)+2])
	if !strings.Contains(ps, "    1 ") || !strings.Contains(ps, "thinbot") {
		t.Errorf("ps in the sandbox does not show the host's processes:\n%s", ps)
	}
}

// snapshot maps every file below dir (relative path) to its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.HasPrefix(rel, ".thinbot/") {
			b = nil // the chain grows; that it is intact is what verify checks
		}
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSandboxCheck runs `thinbot sandbox check --json` as root and, as the
// shipped unit does, as an ordinary user (the helpers then map only that
// user and set up mounts with an ambient CAP_SYS_ADMIN in their own user
// namespace): every check passes, and the API key in the environment
// cannot be read back.
func TestSandboxCheck(t *testing.T) {
	type report struct {
		Root   bool   `json:"root"`
		Cgroup string `json:"cgroup"`
		Checks []struct {
			What   string `json:"what"`
			OK     bool   `json:"ok"`
			Detail string `json:"detail"`
		} `json:"checks"`
		Will string `json:"will"`
	}
	check := func(t *testing.T, wrap []string, dir string, attr ...*syscall.SysProcAttr) report {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		args := append(wrap, thinbotBin, "sandbox", "check", "--json")
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		if len(attr) > 0 {
			cmd.SysProcAttr = attr[0]
		}
		cmd.Dir = dir
		cmd.Env = append(baseEnv(), "AGENT_API_KEY=sk-check-secret-key")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sandbox check: %v\n%s", err, out)
		}
		var r report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("sandbox check --json: %v\n%s", err, out)
		}
		if len(r.Checks) < 6 {
			t.Errorf("only %d checks ran: %s", len(r.Checks), out)
		}
		for _, c := range r.Checks {
			if !c.OK {
				t.Errorf("check failed: %s: %s", c.What, c.Detail)
			}
		}
		return r
	}
	t.Run("root", func(t *testing.T) {
		if os.Geteuid() != 0 {
			if os.Getenv("CI") != "" {
				t.Fatal("CI=1: this test must run as root")
			}
			t.Skip("not root")
		}
		if r := check(t, nil, t.TempDir()); !r.Root {
			t.Error("report says not root")
		}
	})
	t.Run("ordinary user", func(t *testing.T) {
		setpriv, err := exec.LookPath("setpriv")
		if os.Geteuid() != 0 || err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI must run this as root with setpriv: euid %d, %v", os.Geteuid(), err)
			}
			t.Skip("needs root and setpriv to become an ordinary user")
		}
		// The binary's folder must be reachable by the user.
		if err := os.Chmod(filepath.Dir(thinbotBin), 0o755); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		os.Chmod(filepath.Dir(dir), 0o755)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if r := check(t, []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, dir); r.Root {
			t.Error("report says root")
		}
	})
	// The packaged unit on a cgroup v2 host: an ordinary user whose group
	// systemd delegated to it (Delegate=yes chowns the group, its
	// cgroup.procs, cgroup.subtree_control and cgroup.threads). Here the
	// delegation is made by hand on the unified hierarchy: each command
	// must get a group of its own there, killed with what it left.
	t.Run("ordinary user, delegated cgroup v2", func(t *testing.T) {
		setpriv, err := exec.LookPath("setpriv")
		unified := "/sys/fs/cgroup/unified"
		if _, e := os.Stat(unified + "/cgroup.procs"); e != nil {
			unified = "/sys/fs/cgroup"
		}
		if _, e := os.Stat(unified + "/cgroup.procs"); os.Geteuid() != 0 || err != nil || e != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI must run this as root with setpriv and a cgroup v2 hierarchy: euid %d, %v, %v", os.Geteuid(), err, e)
			}
			t.Skip("needs root, setpriv and a cgroup v2 hierarchy")
		}
		if err := os.Chmod(filepath.Dir(thinbotBin), 0o755); err != nil {
			t.Fatal(err)
		}
		group := filepath.Join(unified, fmt.Sprintf("thinbot-e2e-delegated-%d", os.Getpid()))
		if err := os.Mkdir(group, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(filepath.Join(group, "daemon")); os.Remove(group) })
		for _, f := range []string{"", "cgroup.procs", "cgroup.subtree_control", "cgroup.threads"} {
			if err := os.Chown(filepath.Join(group, f), 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		fd, err := os.Open(group)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		dir := t.TempDir()
		os.Chmod(filepath.Dir(dir), 0o755)
		os.Chown(dir, 65534, 65534)
		r := check(t, []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, dir,
			&syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())})
		if !strings.HasPrefix(r.Cgroup, "both tiers: cgroup v2") {
			t.Errorf("cgroup = %q, want v2 groups for both tiers", r.Cgroup)
		}
		n := 0
		for _, c := range r.Checks {
			if strings.Contains(c.What, "cgroup") {
				n++
			}
		}
		if n < 3 {
			t.Errorf("only %d cgroup checks ran: %+v", n, r.Checks)
		}
	})
}

// TestSandboxCheckConfig runs `thinbot sandbox check --config` on a correct
// install: the state dir, the config and the token file are hidden, every
// check passes (a hidden file's name may be listed, its content is what
// must not be read) and it exits 0.
// A check that fails makes it exit non-zero.
func TestSandboxCheckConfig(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI=1: this test must run as root")
		}
		t.Skip("not root: the sandbox's user namespaces are checked by TestSandboxCheck")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o755)
	state := filepath.Join(dir, "state")
	os.Mkdir(state, 0o700)
	os.WriteFile(filepath.Join(state, "events.db"), []byte("the chain"), 0o600)
	tok := writeSecret(t, dir, "mm.token", "mm-token-value")
	write := func(workspace, extra string) string {
		cfg := `platform: mattermost
mattermost: {url: "http://127.0.0.1:1", token_file: ` + tok + `, callback_url: "http://127.0.0.1:1/cb"}
model: {base_url: "http://127.0.0.1:1/v1", model: m}
state_dir: ` + state + `
channels: [{id: c1, workspace: ` + workspace + `, approvers: [4xp9fdt4e3rpcqa8cwyb3ou3yw]}]
limits: {memory_mib: 256, processes: 128, processes_total: 100, cpus: 0.5}
` + extra
		p := filepath.Join(dir, "thinbot.yaml")
		os.WriteFile(p, []byte(cfg), 0o600)
		return p
	}
	p := write(ws, "readonly: {connect_ports: [9100]}\n")
	r := thinbot(t, dir, nil, "sandbox", "check", "--config", p)
	if r.code != 0 || strings.Contains(r.stdout, "FAIL") {
		t.Errorf("sandbox check --config on a correct install: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"cannot read hidden " + tok, "cannot read hidden " + state, "cannot read hidden " + p, "connect only to ports 9100", "memory 256 MiB",
		// This kind of host (CI's too) is v1, and root may make groups.
		"(cgroup): memory 1 GiB, 100 processes, 0.5 CPU", "both tiers: cgroup v1 (memory, pids, cpu) per command", "approved: cannot move itself out of its cgroup"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sandbox check --config: %q missing in\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "mm-token-value") || strings.Contains(r.stdout, "the chain") {
		t.Errorf("a secret in the report:\n%s", r.stdout)
	}

	// A check that fails makes the command fail: here the sandbox cannot
	// start, for want of its read-only user.
	r = thinbot(t, dir, nil, "sandbox", "check", "--config", write(ws, "readonly: {user: thinbot-no-such-user}\n"))
	if r.code == 0 || !strings.Contains(r.stdout, "FAIL start the sandbox helpers") || !strings.Contains(r.stdout, "thinbot-no-such-user") {
		t.Errorf("sandbox check with a failing check: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestAskSkillFolderBelowTmp: a skill folder below /tmp (AGENT_SKILLS_DIR)
// stays visible inside each read-only command's private /tmp in `thinbot
// ask`, so its files read the same in the sandbox as the model was told.
// It ran only from serve's skills_dirs; ask gave the sandbox the workspace
// alone and the read-only `cat` found nothing.
func TestAskSkillFolderBelowTmp(t *testing.T) {
	skillsDir, err := os.MkdirTemp("/tmp", "thinbot-skills-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(skillsDir) })
	// A root daemon's read-only commands run as thinbot-ro: the folder must
	// be readable by others, as a shared skill folder is.
	if err := os.Chmod(skillsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeSkillFile(t, filepath.Join(skillsDir, "probe"), "---\nname: probe\ndescription: A probe.\n---\nskill-body-visible\n")
	skillMD := filepath.Join(skillsDir, "probe", "SKILL.md")
	m := fakemodel.Start(t, run("cat "+skillMD), fakemodel.Reply{Content: "done"})
	res := thinbot(t, t.TempDir(), append(modelEnv(m), "AGENT_SKILLS_DIR="+skillsDir), "ask", "-v", "read the skill")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "kernel sandbox enforced") {
		t.Fatalf("the command did not run in the kernel sandbox:\n%s", res.stderr)
	}
	reqs := m.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	if out := lastToolResult(reqs[1]); !strings.Contains(out, "skill-body-visible") {
		t.Errorf("the read-only cat of %s in the sandbox gave:\n%s", skillMD, out)
	}
}

// TestRootWarnsOfAnUnreadableWorkspace: a root daemon's read-only commands
// run as thinbot-ro; a workspace that user cannot enter (a 0700 folder,
// anything under /root) is named on the log at start, with the fix,
// instead of every read-only command failing there without a word.
func TestRootWarnsOfAnUnreadableWorkspace(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs this as root: a root daemon's read-only user is what it checks")
		}
		t.Skip("needs root (a root daemon's read-only user)")
	}
	const warning = "read-only commands cannot read this workspace"
	for _, mode := range []os.FileMode{0o700, 0o755} {
		dir := filepath.Join(t.TempDir(), "ws")
		if err := os.Mkdir(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755); err != nil {
			t.Fatal(err)
		}
		m := fakemodel.Start(t, fakemodel.Reply{Content: "done"})
		res := thinbot(t, dir, modelEnv(m), "ask", "-v", "hello")
		if res.code != 0 {
			t.Fatalf("mode %v: exit %d: %s", mode, res.code, res.stderr)
		}
		if warned := strings.Contains(res.stderr, warning); warned != (mode == 0o700) {
			t.Errorf("workspace mode %v: warned %v:\n%s", mode, warned, res.stderr)
		}
	}
}
