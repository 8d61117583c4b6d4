package tests

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// The shipped systemd unit's hardening is inherited by every command the
// agent runs. This machine (like CI's) has no systemd as PID 1, so the unit
// cannot be started; instead these tests measure what the commands the
// skill packs and deploy/security.md rely on ask of the kernel (socket families;
// writable-and-executable memory), with strace, and check that no directive
// of deploy/thinbot.service refuses it. Directives the tests have not
// reviewed fail the test, so a new one is weighed the same way.

// unitService returns the [Service] section of a unit file: each
// directive's values in order (a directive may be given more than once).
func unitService(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not a directive: %q", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// reviewedDirectives are the [Service] directives whose effect on commands
// was weighed: what each costs the packs' commands is written in the unit.
// The two measured below are RestrictAddressFamilies and
// MemoryDenyWriteExecute.
var reviewedDirectives = []string{
	"Type", "User", "Group", "ExecStartPre", "ExecStart", "ExecReload", "KillSignal", "TimeoutStopSec",
	"Restart", "RestartSec", "StateDirectory", "StateDirectoryMode", "UMask", "Environment",
	"LimitNOFILE", "SupplementaryGroups",
	"NoNewPrivileges", "ProtectSystem", "ProtectHome", "ReadWritePaths", "PrivateTmp",
	"PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs",
	"ProtectControlGroups", "Delegate", "ProtectClock", "ProtectHostname", "RestrictSUIDSGID",
	"RestrictRealtime", "RestrictNamespaces", "LockPersonality", "MemoryDenyWriteExecute",
	"RestrictAddressFamilies", "SystemCallArchitectures", "CapabilityBoundingSet",
	"AmbientCapabilities",
}

// needs is what one command asked of the kernel while it ran.
type needs struct {
	families map[string]bool // socket(2) address families, e.g. AF_NETLINK
	wx       []string        // calls systemd's MemoryDenyWriteExecute refuses
}

var (
	straceSocket = regexp.MustCompile(`\bsocket\((AF_[A-Z0-9]+)`)
	// systemd's MemoryDenyWriteExecute (a seccomp filter) refuses mmap with
	// PROT_WRITE and PROT_EXEC together, mprotect and pkey_mprotect with
	// PROT_EXEC, and shmat with SHM_EXEC.
	straceMmap     = regexp.MustCompile(`\bmmap2?\([^,]*, [^,]*, ([A-Z_|]+)`)
	straceMprotect = regexp.MustCompile(`\b(?:pkey_)?mprotect\([^,]*, [^,]*, ([A-Z_|]+)`)
	straceShmat    = regexp.MustCompile(`\bshmat\(.*SHM_EXEC`)
)

// parseStrace reads `strace -f -o FILE` output.
func parseStrace(text string) needs {
	n := needs{families: map[string]bool{}}
	for _, line := range strings.Split(text, "\n") {
		if m := straceSocket.FindStringSubmatch(line); m != nil {
			n.families[m[1]] = true
		}
		if m := straceMmap.FindStringSubmatch(line); m != nil {
			if p := strings.Split(m[1], "|"); slices.Contains(p, "PROT_WRITE") && slices.Contains(p, "PROT_EXEC") {
				n.wx = append(n.wx, strings.TrimSpace(line))
			}
		}
		if m := straceMprotect.FindStringSubmatch(line); m != nil && slices.Contains(strings.Split(m[1], "|"), "PROT_EXEC") {
			n.wx = append(n.wx, strings.TrimSpace(line))
		}
		if straceShmat.MatchString(line) {
			n.wx = append(n.wx, strings.TrimSpace(line))
		}
	}
	return n
}

func TestParseStrace(t *testing.T) {
	n := parseStrace(`101 socket(AF_NETLINK, SOCK_RAW|SOCK_CLOEXEC, NETLINK_SOCK_DIAG) = 3
101 mmap(NULL, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0) = 0x7f
102 mmap(0x7f9a98938000, 2555904, PROT_READ|PROT_WRITE|PROT_EXEC, MAP_PRIVATE|MAP_FIXED|MAP_ANONYMOUS, -1, 0) = 0x7f
102 mprotect(0x7ff7bb7c3000, 245760, PROT_READ|PROT_EXEC <unfinished ...>
102 mprotect(0x7ff7bb7c3000, 245760, PROT_READ) = 0
103 socket(AF_UNIX, SOCK_STREAM, 0 <unfinished ...>`)
	if !n.families["AF_NETLINK"] || !n.families["AF_UNIX"] || len(n.families) != 2 {
		t.Errorf("families %v", n.families)
	}
	if len(n.wx) != 2 {
		t.Errorf("wx %q, want the mmap W+X and the mprotect X", n.wx)
	}
}

// packCommand is one command the skill packs or deploy/security.md's promises run.
type packCommand struct {
	why      string
	args     []string // run with bash -c when one element
	optional bool     // measured when installed; otherwise required (in CI)
}

func packCommands(t *testing.T) []packCommand {
	packs, err := filepath.Abs(filepath.Join("..", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	return []packCommand{
		{why: "sys-doctor (doctor.sh, every section: awk, ps, df, ss, journalctl, dmesg, systemctl)",
			args: []string{"bash", filepath.Join(packs, "sys-doctor/scripts/doctor.sh")}},
		{why: "deploy/security.md: ss works as before; the listening sockets an on-call engineer asks for", args: []string{"ss", "-tlnp"}},
		{why: "ip: addresses and routes (gate: read-only)", args: []string{"ip", "addr"}},
		{why: "ip route", args: []string{"ip", "route"}},
		{why: "deploy/security.md: ps works as before", args: []string{"ps", "-e", "-o", "pid,comm"}},
		{why: "deploy/security.md: df works as before", args: []string{"df", "-h"}},
		{why: "deploy/security.md: journalctl works as before", args: []string{"journalctl", "-n", "1", "--no-pager"}},
		{why: "csv-stats pack", args: []string{"python3", filepath.Join(packs, "csv-stats/scripts/csv_stats.py"), filepath.Join(packs, "csv-stats/testdata/orders.csv")}},
		{why: "log-triage pack", args: []string{"python3", filepath.Join(packs, "log-triage/scripts/triage.py"), filepath.Join(packs, "log-triage/testdata/app.log")}},
		{why: "a JIT runtime: node (and node-based CLIs)", args: []string{"node", "-e", "1"}},
		{why: "a JIT runtime: java (jcmd, jstack, jmap: a Java service's diagnostics)", args: []string{"java", "-Xshare:auto", "-version"}, optional: true},
	}
}

// measure runs a command under strace and returns what it asked for.
func measure(t *testing.T, args []string) needs {
	t.Helper()
	out := filepath.Join(t.TempDir(), "strace.txt")
	sargs := append([]string{"-f", "-qq", "-o", out, "-e", "trace=socket,mmap,mprotect,pkey_mprotect,shmat", "--"}, args...)
	cmd := exec.CommandContext(t.Context(), "strace", sargs...)
	cmd.Dir = t.TempDir()
	// The command's own exit status is not the point (journalctl may find
	// no journal here); what it asked the kernel for is.
	if b, err := cmd.CombinedOutput(); err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("strace %v: %v\n%s", args, err, b)
		}
	}
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return parseStrace(string(text))
}

// TestUnitAllowsPackCommands checks every [Service] directive of the
// shipped unit against what the packs' commands were measured to need.
func TestUnitAllowsPackCommands(t *testing.T) {
	needTool(t, "strace")
	unit := unitService(t, filepath.Join("..", "deploy", "thinbot.service"))
	var unknown []string
	for k := range unit {
		if !slices.Contains(reviewedDirectives, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("deploy/thinbot.service has directives this test has not weighed against the packs' commands: %v", unknown)
	}
	var allowed []string
	for _, v := range unit["RestrictAddressFamilies"] {
		if strings.HasPrefix(v, "~") {
			t.Fatalf("RestrictAddressFamilies=%s: a deny list; this test reads allow lists", v)
		}
		allowed = append(allowed, strings.Fields(v)...)
	}
	mdwe := slices.Contains(unit["MemoryDenyWriteExecute"], "yes") || slices.Contains(unit["MemoryDenyWriteExecute"], "true")

	measured := map[string]needs{}
	for _, c := range packCommands(t) {
		name := strings.Join(c.args, " ")
		if _, err := exec.LookPath(c.args[0]); err != nil {
			if c.optional {
				t.Logf("%s: not installed here, not measured", c.args[0])
				continue
			}
			needTool(t, c.args[0])
		}
		n := measure(t, c.args)
		measured[c.args[0]+" "+c.args[len(c.args)-1]] = n
		for f := range n.families {
			if len(allowed) > 0 && !slices.Contains(allowed, f) {
				t.Errorf("RestrictAddressFamilies=%s refuses %s, which `%s` opens (%s)", strings.Join(allowed, " "), f, name, c.why)
			}
		}
		if mdwe && len(n.wx) > 0 {
			t.Errorf("MemoryDenyWriteExecute=yes refuses `%s` (%s): %s", name, c.why, n.wx[0])
		}
	}
	// The measurement itself must see what is known to be there, or a
	// broken strace parse would pass every unit.
	if !measured["ss -tlnp"].families["AF_NETLINK"] || !measured["ip addr"].families["AF_NETLINK"] {
		t.Errorf("ss and ip were not seen opening netlink sockets: %v, %v", measured["ss -tlnp"].families, measured["ip addr"].families)
	}
	if len(measured["node 1"].wx) == 0 {
		t.Error("node was not seen mapping writable and executable memory")
	}
}

// TestUnitVerifies runs systemd-analyze verify on the shipped unit (with
// its binary path pointed at the test's binary): systemd ignores a
// directive or value it cannot parse with only a warning, so a misspelt
// hardening line would silently protect nothing.
func TestUnitVerifies(t *testing.T) {
	needTool(t, "systemd-analyze")
	unit, err := os.ReadFile(filepath.Join("..", "deploy", "thinbot.service"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "thinbot.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/thinbot", thinbotBin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), "systemd-analyze", "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify deploy/thinbot.service: %v\n%s", err, out)
	}
}

// TestNetworkDiagnosticsInSandbox runs ss and ip as the agent does (a
// pass verdict, in the kernel sandbox) and checks their answers are the
// host's; then it runs thinbot's own daemon side and the same ss and ip
// under strace -f and checks every socket family they open is in the
// unit's RestrictAddressFamilies. The sandboxed run is not traced: a root
// daemon's read-only commands switch to an unprivileged user, which a
// ptraced process may not do (fork/exec fails with EPERM under strace).
func TestNetworkDiagnosticsInSandbox(t *testing.T) {
	needTool(t, "strace")
	needTool(t, "ss")
	needTool(t, "ip")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	m := fakemodel.Start(t, run("ss -tln"), run("ip addr"), fakemodel.Reply{Content: "done"})
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), thinbotBin, "ask", "-v", "--max-steps", "5", "show sockets and addresses")
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), modelEnv(m)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("thinbot ask: %v\n%s", err, out)
	}
	for _, want := range []string{"[pass] ss -tln", "[pass] ip addr"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q: the commands did not run as read-only ones:\n%s", want, out)
		}
	}
	if !strings.Contains(string(out), "kernel sandbox enforced") {
		t.Errorf("the commands did not run in the kernel sandbox:\n%s", out)
	}
	reqs := m.Requests()
	if len(reqs) < 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	if ss := lastToolResult(reqs[1]); !strings.Contains(ss, fmt.Sprintf("127.0.0.1:%d", port)) {
		t.Errorf("ss -tln in the sandbox does not show the test's listener on port %d:\n%s", port, ss)
	}
	if ip := lastToolResult(reqs[2]); !strings.Contains(ip, "inet 127.0.0.1/8") {
		t.Errorf("ip addr in the sandbox does not show lo:\n%s", ip)
	}
	// The same commands and thinbot's own side (a model call over TCP,
	// THINBOT_SANDBOX=off so the trace follows it whole), under strace -f.
	m2 := fakemodel.Start(t, run("ss -tln"), run("ip addr"), fakemodel.Reply{Content: "done"})
	trace := filepath.Join(t.TempDir(), "strace.txt")
	args := []string{"-f", "-qq", "-o", trace, "-e", "trace=socket", "--", thinbotBin, "ask", "--max-steps", "5", "show sockets and addresses"}
	traced := exec.CommandContext(t.Context(), "strace", args...)
	traced.Dir = dir
	traced.Env = append(append(baseEnv(), modelEnv(m2)...), "THINBOT_SANDBOX=off")
	if out, err := traced.CombinedOutput(); err != nil {
		t.Fatalf("thinbot ask under strace: %v\n%s", err, out)
	}
	text, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	n := parseStrace(string(text))
	if !n.families["AF_NETLINK"] {
		t.Errorf("no netlink socket seen under strace -f: was the sandboxed command traced? %v", n.families)
	}
	unit := unitService(t, filepath.Join("..", "deploy", "thinbot.service"))
	var allowed []string
	for _, v := range unit["RestrictAddressFamilies"] {
		allowed = append(allowed, strings.Fields(v)...)
	}
	for f := range n.families {
		if !slices.Contains(allowed, f) {
			t.Errorf("thinbot and its sandboxed ss and ip opened %s, which RestrictAddressFamilies=%s refuses", f, strings.Join(allowed, " "))
		}
	}
}
