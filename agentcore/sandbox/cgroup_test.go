package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRig is a sandbox with small group limits, started once for the
// cgroup tests: 32 processes, 128 MiB, half a CPU.
type cgroupRig struct {
	sb *Sandbox
	ws string
}

var (
	cgroupOnce   sync.Once
	cgroupShared *cgroupRig
	cgroupErr    error
)

// cgroupLimits are the rig's limits: per process (rlimits) far above the
// group's, so only the group can stop the probes below.
var cgroupLimits = Limits{Memory: 512 << 20, Processes: 10000, MemoryTotal: 128 << 20, ProcessesTotal: 32, CPUs: 0.5}

// newCgroupRig returns the rig, or skips the test where this machine gives
// no cgroups: not root on a v1 or hybrid host, or no delegated v2 group.
// Under CI=1 that fails instead: CI runs as root, which gives groups on a
// hybrid host; on a pure v2 host its process must be in a group delegated
// to it (a unit with Delegate=yes). The v2 path of a pure v2 host is
// tested on either layout by TestCgroupV2PureHostAuto.
func newCgroupRig(t *testing.T) *cgroupRig {
	t.Helper()
	cgroupOnce.Do(func() {
		ws, err := os.MkdirTemp("", "thinbot-cgroup-test-")
		if err != nil {
			cgroupErr = err
			return
		}
		os.Chmod(ws, 0o755)
		sb, err := Start(context.Background(), Config{Workspaces: []string{ws}, Limits: cgroupLimits})
		cgroupShared, cgroupErr = &cgroupRig{sb: sb, ws: ws}, err
	})
	if cgroupErr != nil {
		t.Fatalf("start: %v", cgroupErr)
	}
	for _, m := range []Mode{ReadOnly, Approved} {
		if by := cgroupShared.sb.Info(m).LimitsBy; !strings.HasPrefix(by, "cgroup v") || strings.Contains(by, "not available") {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI=1: %s commands get no cgroup with its memory, pids and cpu limits: %s", m, by)
			}
			t.Skipf("%s commands get no cgroup here: %s", m, by)
		}
	}
	return cgroupShared
}

func (r *cgroupRig) run(t *testing.T, m Mode, script string) (string, Result) {
	t.Helper()
	var out syncBuf
	res, err := r.sb.Run(t.Context(), m, Cmd{Args: []string{"/bin/sh", "-c", script}, Dir: r.ws, Env: []string{testPath}}, &out)
	if err != nil {
		t.Fatalf("run %q: %v", script, err)
	}
	return out.String(), res
}

// TestCgroupForkStorm: an approved command of a root daemon has no
// process limit from rlimits (RLIMIT_NPROC does not bind root); its group
// stops the storm at pids.max and the result says so.
func TestCgroupForkStorm(t *testing.T) {
	r := newCgroupRig(t)
	for _, m := range []Mode{Approved, ReadOnly} {
		out, res := r.run(t, m, `n=0; while [ $n -lt 100 ]; do sleep 30 & n=$((n+1)); done; echo forked $n`)
		if strings.Contains(out, "forked 100") {
			t.Errorf("%s: 100 background processes started under a limit of %d: %q", m, cgroupLimits.ProcessesTotal, firstLine(out))
		}
		if !strings.Contains(res.Limit, "process limit 32 reached") {
			t.Errorf("%s: Result.Limit = %q, want the process limit reported", m, res.Limit)
		}
	}
}

// TestCgroupMemoryAcrossProcesses: four processes of 48 MiB each stay far
// below the per-process rlimit, and together pass the group's 128 MiB:
// the kernel kills in the group, and the result says so.
func TestCgroupMemoryAcrossProcesses(t *testing.T) {
	r := newCgroupRig(t)
	hog := `python3 -c 'import time; b=bytearray(48<<20); time.sleep(1)'`
	script := fmt.Sprintf("for i in 1 2 3 4; do %s & done; wait; echo done", hog)
	for _, m := range []Mode{Approved, ReadOnly} {
		_, res := r.run(t, m, script)
		if !strings.Contains(res.Limit, "killed: memory limit 128 MiB") {
			t.Errorf("%s: Result.Limit = %q, want the memory limit's kill reported", m, res.Limit)
		}
	}
}

// TestCgroupNothingOutlivesTheCommand: a background child that left the
// command's process group and session (setsid) is gone once the command
// has returned.
func TestCgroupNothingOutlivesTheCommand(t *testing.T) {
	r := newCgroupRig(t)
	for _, m := range []Mode{Approved, ReadOnly} {
		out, _ := r.run(t, m, `setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!`)
		pid, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("%s: no pid: %q", m, out)
		}
		if b, alive := outlives(pid); alive {
			t.Errorf("%s: the background child %d outlived its command: %s", m, pid, b)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// outlives reports whether pid is still a live process (its stat line if
// so). A killed process leaves cgroup.procs (cgroup_exit) a moment before
// it becomes a zombie (exit_notify), so one still shown running right after
// its group was found empty is given up to 5 s to finish dying: a process
// past cgroup_exit never returns to user space, while one the kill missed
// is still there after the 5 s.
func outlives(pid int) ([]byte, bool) {
	var b []byte
	for deadline := time.Now().Add(5 * time.Second); ; {
		var err error
		b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || bytes.Contains(b, []byte(") Z ")) || bytes.Contains(b, []byte(") X ")) {
			return nil, false
		}
		if time.Now().After(deadline) {
			return b, true
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCgroupNoLeak: commands leave no process in any group, a helper
// keeps about as many groups as commands ran at once (not one per
// command: emptied groups are reused), and none is left once the sandbox
// is closed. The rig's own sandbox would keep the groups of the other
// tests, so this one starts its own.
func TestCgroupNoLeak(t *testing.T) {
	r := newCgroupRig(t) // skips where no cgroups are given
	sb, err := Start(t.Context(), Config{Workspaces: []string{r.ws}, Limits: cgroupLimits})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			sb.Close()
		}
	}()
	var patterns []string
	for _, m := range []Mode{ReadOnly, Approved} {
		patterns = append(patterns, sb.Info(m).Cgroups...)
	}
	groups := func() (all []string, busy []string) {
		for _, p := range patterns {
			g, err := filepath.Glob(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range g {
				all = append(all, d)
				if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && len(b) != 0 {
					busy = append(busy, d)
				}
			}
		}
		return all, busy
	}
	const commands = 40
	for i := range commands {
		m := Mode(i % 2)
		var out syncBuf
		res, err := sb.Run(t.Context(), m, Cmd{Args: []string{"/bin/sh", "-c", "true"}, Dir: r.ws, Env: []string{testPath}}, &out)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: exit %d, %v", m, res.ExitCode, err)
		}
	}
	all, busy := groups()
	if len(busy) != 0 {
		t.Errorf("groups still holding a process after %d commands ended: %v", commands, busy)
	}
	// One at a time, a helper needs a group for the running command and,
	// while the last one's is being emptied, a second (a third or so on a
	// loaded machine): a few per hierarchy, never one per command.
	if per := len(all) / len(patterns); per > 6 {
		t.Errorf("%d groups per hierarchy and helper after %d commands one at a time, want at most 6: %v", per, commands, all)
	}
	sb.Close()
	closed = true
	if all, _ := groups(); len(all) != 0 {
		t.Errorf("groups left after Close: %v", all)
	}
}

// TestCgroupCPUShare: the group's CPU quota is the configured share.
func TestCgroupCPUShare(t *testing.T) {
	r := newCgroupRig(t)
	out, _ := r.run(t, Approved, `g=$(awk -F: '$2=="cpu" || $2=="cpu,cpuacct" {print $3}' /proc/self/cgroup); cat /sys/fs/cgroup/cpu$g/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup$g/cpu.max`)
	if got := strings.TrimSpace(out); got != "50000" && !strings.HasPrefix(got, "50000 ") {
		t.Errorf("cpu quota = %q, want half a CPU (50000 of 100000)", got)
	}
}

// TestCgroupCreateFailsClosed: a command whose group is gone, or cannot be
// made, does not run (it would run without its caps); it fails with the
// reason, and the next command runs. Both are done from outside. A group
// a command used is removed: the helper keeps it for the next command
// unless it saw it gone first (it reads its memory.stat when it releases
// it, just after the exit is reported), so the next command either fails
// or runs in another group, never without one; tried until it fails once.
// Then, in a new sandbox, the names of its first groups are taken.
func TestCgroupCreateFailsClosed(t *testing.T) {
	r := newCgroupRig(t)
	var dirs []string
	for _, p := range r.sb.Info(Approved).Cgroups {
		dirs = append(dirs, filepath.Dir(p))
	}
	const ownGroup = `awk -F: '$2 ~ /pids/ {print $3}' /proc/self/cgroup`
	try := func(sb *Sandbox) (group string, err error) {
		var buf syncBuf
		_, err = sb.Run(t.Context(), Approved, Cmd{Args: []string{"/bin/sh", "-c", "echo ran; " + ownGroup}, Dir: "/", Env: []string{testPath}}, &buf)
		out := buf.String()
		if err == nil && !strings.Contains(out, "ran") || err != nil && (!strings.Contains(err.Error(), "cgroup") || strings.Contains(out, "ran")) {
			t.Fatalf("Run = %v, output %q; want a run or a cgroup error and no run", err, out)
		}
		return filepath.Base(strings.TrimSpace(strings.TrimPrefix(out, "ran\n"))), err
	}
	failed := false
	for i := 0; i < 20 && !failed; i++ {
		out, _ := r.run(t, Approved, ownGroup)
		name := filepath.Base(strings.TrimSpace(out))
		if !strings.HasPrefix(name, "thinbot-") {
			t.Fatalf("own group %q", out)
		}
		for _, d := range dirs {
			if err := os.Remove(filepath.Join(d, name)); err != nil {
				t.Fatal(err)
			}
		}
		g, err := try(r.sb)
		if err == nil && g == name {
			t.Fatalf("a command ran in the removed group %s", name)
		}
		failed = err != nil
	}
	if !failed {
		t.Error("in 20 tries no command found its kept group removed")
	}
	if out, _ := r.run(t, Approved, "echo next"); !strings.Contains(out, "next") {
		t.Errorf("the next command: %q", out)
	}

	sb, err := Start(t.Context(), Config{Limits: cgroupLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	h := sb.helperLocked(Approved)
	var taken []string
	for n := 1; n <= maxFree+2; n++ {
		for _, d := range dirs {
			p := filepath.Join(d, fmt.Sprintf("thinbot-%d-%d", h.proc.Pid, n))
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			taken = append(taken, p)
		}
	}
	if _, err := try(sb); err == nil {
		t.Error("a command ran although its group's name was taken")
	}
	for _, p := range taken {
		os.Remove(p)
	}
	if _, err := try(sb); err != nil {
		t.Errorf("the next command: %v", err)
	}
}

// TestCgroupV2Unified runs commands with cgroup v2 forced: on this kind of
// host (v1 hybrid) the unified hierarchy has no controllers, so the
// groups carry no limits (and LimitsBy says so), but each command is still
// moved into its own group, what it leaves behind is killed, and the
// group is removed.
func TestCgroupV2Unified(t *testing.T) {
	unified := v2Hierarchy(t)
	ws := t.TempDir()
	os.Chmod(ws, 0o755)
	sb, err := Start(t.Context(), Config{Workspaces: []string{ws}, Cgroup: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	by := sb.Info(Approved).LimitsBy
	if !strings.HasPrefix(by, "cgroup v2") {
		t.Fatalf("LimitsBy = %q", by)
	}
	t.Logf("LimitsBy: %s", by)
	// Controllers the hierarchy does not offer are said, not faked.
	if b, _ := os.ReadFile(unified + "/cgroup.controllers"); !strings.Contains(string(b), "memory") && !strings.Contains(by, "not in force: memory") {
		t.Errorf("LimitsBy = %q, but %s offers no memory controller (%q)", by, unified, b)
	} else if !strings.Contains(string(b), "memory") && !slices.Contains(sb.Info(Approved).NotInForce, "memory_total_mib") {
		t.Errorf("NotInForce = %q, but %s offers no memory controller (%q)", sb.Info(Approved).NotInForce, unified, b)
	}
	r := &cgroupRig{sb: sb, ws: ws}
	for _, m := range []Mode{Approved, ReadOnly} {
		out, _ := r.run(t, m, `grep '^0::' /proc/self/cgroup; setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "/thinbot-") {
			t.Fatalf("%s: not in a command group: %q", m, out)
		}
		pid, _ := strconv.Atoi(lines[1])
		if b, alive := outlives(pid); alive {
			t.Errorf("%s: the background child %d outlived its command: %s", m, pid, b)
		}
		// Commands after one whose group was killed, and after one whose
		// group was reused, start and run (a group killed through
		// cgroup.kill kills what is later forked into it: it is not
		// reused).
		for i := 0; i < 3; i++ {
			if out, res := r.run(t, m, "echo after"); !strings.Contains(out, "after") {
				t.Errorf("%s: command %d after the kill: %q, %+v", m, i, out, res)
			}
		}
	}
	pats := append(sb.Info(ReadOnly).Cgroups, sb.Info(Approved).Cgroups...)
	sb.Close()
	for _, p := range pats {
		if g, _ := filepath.Glob(p); len(g) != 0 {
			t.Errorf("groups left after Close: %v", g)
		}
	}
}

// FuzzCgroupFiles feeds the /proc parsers arbitrary input: they must not
// panic, and what they return must hold absolute paths.
func FuzzCgroupFiles(f *testing.F) {
	f.Add("12:pids:/user.slice\n0::/system.slice/thinbot.service\n", "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
	f.Add("0::/", "1 2 3:4 /a\\040b /m\\04 - cgroup2 x y")
	f.Fuzz(func(t *testing.T, self, mountinfo string) {
		for _, l := range parseProcCgroup([]byte(self)) {
			if !strings.HasPrefix(l.Path, "/") {
				t.Errorf("relative path %q", l.Path)
			}
		}
		for _, m := range parseMountinfo([]byte(mountinfo)) {
			within(m, "/x")
		}
		flatKey([]byte(self), "max")
	})
}

// BenchmarkCgroupCost is what a command's cgroup costs: `true` through two
// sandboxes alike but for Config.Cgroup (auto, and off: rlimits only),
// interleaved so that both see the same load; it reports each one's time
// per command and their ratio, and the CPU each command cost its helper
// (clock ticks: use a -benchtime of some hundreds).
func BenchmarkCgroupCost(b *testing.B) {
	ws := b.TempDir()
	os.Chmod(ws, 0o755)
	on, err := Start(b.Context(), Config{Workspaces: []string{ws}})
	if err != nil {
		b.Fatal(err)
	}
	defer on.Close()
	off, err := Start(b.Context(), Config{Workspaces: []string{ws}, Cgroup: "off"})
	if err != nil {
		b.Fatal(err)
	}
	defer off.Close()
	b.Logf("limits by: %s", on.Info(ReadOnly).LimitsBy)
	for _, m := range []Mode{ReadOnly, Approved} {
		b.Run(m.String(), func(b *testing.B) {
			var out bytes.Buffer
			run := func(sb *Sandbox) time.Duration {
				t0 := time.Now()
				res, err := sb.Run(context.Background(), m, Cmd{Args: []string{"/bin/true"}, Dir: ws, Env: []string{testPath}}, &out)
				if err != nil || res.ExitCode != 0 {
					b.Fatal(err, res)
				}
				return time.Since(t0)
			}
			var tOn, tOff time.Duration
			n := 0
			hOn, hOff := fmt.Sprint(on.helperLocked(m).proc.Pid), fmt.Sprint(off.helperLocked(m).proc.Pid)
			cOn0, err1 := readCPU(hOn)
			cOff0, err2 := readCPU(hOff)
			if err1 != nil || err2 != nil {
				b.Fatal(err1, err2)
			}
			for b.Loop() {
				tOn += run(on)
				tOff += run(off)
				n++
			}
			b.ReportMetric(float64(tOn.Nanoseconds())/float64(n), "ns/cgroup")
			b.ReportMetric(float64(tOff.Nanoseconds())/float64(n), "ns/rlimit")
			b.ReportMetric(float64(tOn)/float64(tOff), "ratio")
			cOn, err1 := readCPU(hOn)
			cOff, err2 := readCPU(hOff)
			if err1 != nil || err2 != nil {
				b.Fatal(err1, err2)
			}
			const tick = 1e7 // ns per clock tick (USER_HZ 100)
			b.ReportMetric(float64(cOn.self-cOn0.self)*tick/float64(n), "helper-cpu-ns/cgroup")
			b.ReportMetric(float64(cOff.self-cOff0.self)*tick/float64(n), "helper-cpu-ns/rlimit")
		})
	}
}

// TestCgroupApprovedCannotLeave: root may write any group's cgroup.procs;
// an approved command sees the cgroup file systems read-only, so it cannot
// move itself out of its group and its limits.
func TestCgroupApprovedCannotLeave(t *testing.T) {
	r := newCgroupRig(t)
	out, _ := r.run(t, Approved, `for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/*/*/cgroup.procs; do [ -e $f ] && echo $$ > $f 2>/dev/null && echo moved $f; done; grep -c thinbot- /proc/self/cgroup`)
	if strings.Contains(out, "moved") || strings.HasPrefix(strings.TrimSpace(out), "0") {
		t.Errorf("an approved command left its group: %q", out)
	}
}

// TestCgroupModes: "off" gives rlimits only and says so; an unknown mode is
// refused at Start.
func TestCgroupModes(t *testing.T) {
	p, err := planCgroups("off", Limits{})
	if err != nil || p.Version != 0 || !strings.Contains(p.summary(), "rlimit per process, no cgroup: turned off") {
		t.Errorf("off: %+v, %v, %q", p, err, p.summary())
	}
	if _, err := Start(t.Context(), Config{Cgroup: "v3"}); err == nil || !strings.Contains(err.Error(), "v3") {
		t.Errorf("Start with cgroup v3 = %v", err)
	}
}

// TestCgroupV2Leaf: on v2 the daemon moves every process of its delegated
// group into the leaf "daemon" (so the group may hand controllers to
// command groups), and a daemon already in that leaf plans with its
// parent. Tried on the unified hierarchy with a sleeping child.
func TestCgroupV2Leaf(t *testing.T) {
	unified, name, g, child := unifiedTestGroup(t, "thinbot-leaftest")
	if err := intoLeaf(g); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", child))
	if !strings.Contains(string(b), "0::/"+name+"/"+v2Leaf+"\n") {
		t.Errorf("after intoLeaf the child is in %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(g, "cgroup.procs")); len(b) != 0 {
		t.Errorf("%s still holds %q", g, b)
	}
	p, err := planV2([]cgroupLine{{Path: "/" + name + "/" + v2Leaf}}, []cgroupMount{{Root: "/", Point: unified, V2: true}}, false)
	if err != nil || len(p.Dirs) != 1 || p.Dirs[0].Path != g {
		t.Errorf("planV2 from the leaf = %+v, %v; want %s", p, err, g)
	}
}

// TestCgroupStrandedHelperStops: a helper thread that cannot move back
// out of a command's group (v1; the write to its own tasks file fails,
// here by the FailLeave fault) would stay in it, so the group could never
// be emptied and later commands would start from inside it. The command
// fails with the reason, the helper exits, its groups are swept, and the
// next command runs in a new helper.
func TestCgroupStrandedHelperStops(t *testing.T) {
	if !hostHasV1() {
		t.Skip("threads move between groups on v1 only, and this host has no v1 controllers (pure v2)")
	}
	newCgroupRig(t)
	sb, err := Start(t.Context(), Config{Limits: cgroupLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.cfg.cgroups.Version != 1 {
		t.Skipf("threads move between groups on v1 only; here %s", sb.Info(Approved).LimitsBy)
	}
	run := func(m Mode) (string, error) {
		var out syncBuf
		_, err := sb.Run(t.Context(), m, Cmd{Args: []string{"/bin/sh", "-c", "echo ran"}, Dir: "/", Env: []string{testPath}}, &out)
		return out.String(), err
	}
	for i, m := range []Mode{Approved, ReadOnly} {
		// A helper with the fault: the running one is killed, the next
		// command starts one from the plan.
		sb.mu.Lock()
		sb.cfg.cgroups.FailLeave = true
		old := sb.helperLocked(m)
		sb.mu.Unlock()
		_ = old.proc.Kill()
		<-old.done
		out, err := run(m)
		if err == nil || !strings.Contains(err.Error(), "back to") || !strings.Contains(err.Error(), "helper stopped") || strings.Contains(out, "ran") {
			t.Errorf("%s: a command whose helper thread is stranded in its group: %v, output %q; want its error and no run", m, err, out)
		}
		sb.mu.Lock()
		sb.cfg.cgroups.FailLeave = false
		faulty := sb.helperLocked(m)
		sb.mu.Unlock()
		if out, err := run(m); err != nil || !strings.Contains(out, "ran") {
			t.Errorf("%s: the next command: %v, %q", m, err, out)
		}
		if n := sb.Restarts(); n != 2*(i+1) {
			t.Errorf("%s: Restarts = %d, want %d (the stranded helper started again)", m, n, 2*(i+1))
		}
		for _, d := range sb.cfg.cgroups.Dirs {
			if g, _ := filepath.Glob(filepath.Join(d.Path, fmt.Sprintf("thinbot-%d-*", faulty.proc.Pid))); len(g) != 0 {
				t.Errorf("%s: groups of the stopped helper left: %v", m, g)
			}
		}
	}
}

// TestCgroupReuseCarriesNoCharge: memory a command leaves charged to its
// group after it is gone (a file it wrote to a tmpfs of the host, which
// no reclaim can free without swap) must not count against the next
// command that gets the group: that one would be killed at the limit
// for memory it never used. Run in this process, on the daemon's plan:
// a command in a group writes 64 MiB to /dev/shm, its group is emptied
// and released, and the next group taken must carry far less; a group
// holding page cache only is reused.
func TestCgroupReuseCarriesNoCharge(t *testing.T) {
	newCgroupRig(t)
	p, err := planCgroups("", cgroupLimits)
	if err != nil || p.Version == 0 {
		t.Fatalf("plan: %+v, %v", p, err)
	}
	if !slices.ContainsFunc(p.Dirs, func(d cgroupDir) bool { return slices.Contains(d.Controllers, "memory") }) {
		t.Skipf("no memory controller: %s", p.summary())
	}
	files, hp, err := p.open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i := range hp.Dirs {
		hp.Dirs[i].FD = int(files[i].Fd())
	}
	if hp.Version == 1 {
		for _, d := range hp.Dirs {
			f, err := os.OpenFile(filepath.Join(d.Path, "tasks"), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			hp.home = append(hp.home, int(f.Fd()))
		}
	}
	defer hp.drain()
	shm := fmt.Sprintf("/dev/shm/thinbot-carry-%d", os.Getpid())
	defer os.Remove(shm)
	runIn := func(g *cgroup, script string) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		runtime.LockOSThread()
		err := g.enter(cmd)
		if err == nil {
			err = cmd.Start()
			err = errors.Join(err, g.leave())
		}
		runtime.UnlockOSThread()
		if err == nil {
			err = cmd.Wait()
		}
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
	}
	usage := func(g *cgroup) int64 {
		for _, d := range hp.Dirs {
			if slices.Contains(d.Controllers, "memory") {
				f := "memory.usage_in_bytes"
				if hp.Version == 2 {
					f = "memory.current"
				}
				b, err := readAt(d.FD, g.name+"/"+f)
				n, err2 := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				if err != nil || err2 != nil {
					t.Fatalf("%s/%s: %v %v", g.name, f, err, err2)
				}
				return n
			}
		}
		return 0
	}
	g, err := hp.take(cgroupLimits)
	if err != nil {
		t.Fatal(err)
	}
	runIn(g, "head -c 64m /dev/zero > "+shm)
	if n := usage(g); n < 60<<20 {
		t.Fatalf("the writer's group holds %d bytes; the probe does not charge what it should", n)
	}
	g.stop(cgroupLimits)
	g.release()
	g2, err := hp.take(cgroupLimits)
	if err != nil {
		t.Fatal(err)
	}
	if n := usage(g2); n > 16<<20 {
		t.Errorf("the next command's group (%s, the writer's was %s) starts with %d MiB charged", g2.name, g.name, n>>20)
	}
	// Page cache alone (a file written to disk) is freed by reclaim at
	// the next command's limit: that group is still reused.
	disk, err := os.CreateTemp("", "thinbot-carry-")
	if err != nil {
		t.Fatal(err)
	}
	disk.Close()
	defer os.Remove(disk.Name())
	runIn(g2, "head -c 32m /dev/zero > "+disk.Name())
	g2.stop(cgroupLimits)
	g2.release()
	g3, err := hp.take(cgroupLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer g3.end(cgroupLimits)
	if g3.name != g2.name {
		t.Errorf("a group holding page cache only was not reused: %s after %s", g3.name, g2.name)
	}
}

// intoCgroupArg makes the test binary, run as a command, start a child in
// the cgroup v2 group at a path (CLONE_INTO_CGROUP, by an O_PATH
// descriptor, which a read-only mount does not refuse) and print its pid.
const intoCgroupArg = "__test-into-cgroup"

func intoCgroup(dir string, args []string) int {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	p, err := os.StartProcess(args[0], args, &os.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: fd}})
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	fmt.Println(p.Pid)
	return 0
}

// TestCgroupV2NoCloneOut: the kernel lets a process start a child in any
// v2 group whose cgroup.procs it may write (clone3 with
// CLONE_INTO_CGROUP), by a descriptor of the group's directory, even of a
// read-only mount: an approved command of a root daemon could put a child
// outside its group, past its limits and the kill. Commands get no
// clone3: the child is not started, and nothing outlives the command.
func TestCgroupV2NoCloneOut(t *testing.T) {
	newRig(t)
	unified := v2Hierarchy(t)
	ws := t.TempDir()
	os.Chmod(ws, 0o755)
	sb, err := Start(t.Context(), Config{Workspaces: []string{ws}, Cgroup: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := &cgroupRig{sb: sb, ws: ws}
	out, _ := r.run(t, Approved, fmt.Sprintf("grep '^0::' /proc/self/cgroup; %s %s %s /bin/sleep 300", exe, intoCgroupArg, unified))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.Contains(lines[0], "/thinbot-") {
		t.Fatalf("not in a command group: %q", out)
	}
	if pid, err := strconv.Atoi(lines[len(lines)-1]); err == nil {
		b, alive := outlives(pid)
		if alive {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Errorf("an approved command started a child in %s (alive after the command: %v): %q %s", unified, alive, out, b)
	} else if !strings.Contains(out, "function not implemented") {
		t.Errorf("clone3 refused otherwise than as absent (ENOSYS): %q", out)
	}
	if by := sb.Info(Approved).LimitsBy; !strings.Contains(by, "clone3 refused") {
		t.Errorf("LimitsBy = %q does not say that clone3 is refused", by)
	}
	// Commands still start (each moved into its group) and fork.
	if out, _ := r.run(t, Approved, "grep '^0::' /proc/self/cgroup; sh -c 'echo child'"); !strings.Contains(out, "/thinbot-") || !strings.Contains(out, "child") {
		t.Errorf("a command after: %q", out)
	}
}

// TestCheckSaysNoLimit: -1 turns a group limit off (Limits), and sandbox
// check says so, in its limits line and in what root costs, rather than
// "-1 processes".
func TestCheckSaysNoLimit(t *testing.T) {
	newCgroupRig(t)
	r := CheckSandbox(t.Context(), Config{Limits: Limits{MemoryTotal: -1, ProcessesTotal: -1, CPUs: -1}}, false, nil)
	if !strings.Contains(r.Cgroup, "cgroup v") {
		t.Fatalf("no groups: %s", r.Cgroup)
	}
	for _, s := range []string{r.Limits, r.RootCost} {
		if strings.Contains(s, "-1") {
			t.Errorf("says -1 for no limit: %q", s)
		}
	}
	if !strings.Contains(r.Limits, "processes: unlimited") {
		t.Errorf("limits = %q, want the group's processes said unlimited", r.Limits)
	}
	if r.Root && !strings.Contains(r.RootCost, "no process limit") {
		t.Errorf("root cost = %q, want no process limit said", r.RootCost)
	}
}

// TestCgroupTwoDaemons: two daemons on one host (two configs) put their
// groups in the same parent directories. A daemon that starts sweeps the
// groups of helpers that are gone, never those of the other daemon's
// running helpers: the other's running command and its kept groups stay.
func TestCgroupTwoDaemons(t *testing.T) {
	newCgroupRig(t)
	a, err := Start(t.Context(), Config{Limits: cgroupLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.cfg.cgroups.Version == 0 {
		t.Skip(a.Info(Approved).LimitsBy)
	}
	var out syncBuf
	done := make(chan error, 1)
	go func() {
		res, err := a.Run(t.Context(), Approved, Cmd{Args: []string{"/bin/sh", "-c", "echo started; sleep 1; echo still; exit 3"}, Dir: "/", Env: []string{testPath}}, &out)
		if err == nil && res.ExitCode != 3 {
			err = fmt.Errorf("exit %d, signal %d", res.ExitCode, res.Signal)
		}
		done <- err
	}()
	for i := 0; i < 2000 && !strings.Contains(out.String(), "started"); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	// A group of a helper that is gone, in every parent directory.
	stale := fmt.Sprintf("thinbot-%d-1", 1<<22+7)
	for _, d := range a.cfg.cgroups.Dirs {
		if err := os.Mkdir(filepath.Join(d.Path, stale), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := Start(t.Context(), Config{Limits: cgroupLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := <-done; err != nil || !strings.Contains(out.String(), "still") {
		t.Errorf("the first daemon's command, running while the second started: %v, %q", err, out.String())
	}
	for _, d := range a.cfg.cgroups.Dirs {
		if _, err := os.Stat(filepath.Join(d.Path, stale)); err == nil {
			os.Remove(filepath.Join(d.Path, stale))
			t.Errorf("the stale group %s/%s was not swept", d.Path, stale)
		}
	}
	if _, res := (&cgroupRig{sb: a}).run(t, Approved, "true"); res.ExitCode != 0 {
		t.Errorf("the first daemon after the second started: %+v", res)
	}
}

// TestCgroupFDsUnreachable: the helper holds descriptors of the daemon's
// writable cgroup mounts (the parent directories, each group's tasks or
// cgroup.procs, its own tasks files). None reaches a command: none is
// inherited, and the helper's /proc/<pid>/fd/N cannot be followed (a
// descriptor reopened there would write through the daemon's mount).
func TestCgroupFDsUnreachable(t *testing.T) {
	r := newCgroupRig(t)
	for _, m := range []Mode{ReadOnly, Approved} {
		out, _ := r.run(t, m, `for f in /proc/self/fd/*; do readlink $f; done; h=$PPID; grep -q sandbox-helper /proc/$h/cmdline && echo helper-is-parent; for f in /proc/$h/fd/*; do readlink $f && cat $f >/dev/null 2>&1 && echo opened $f; done 2>/dev/null; exit 0`)
		if !strings.Contains(out, "helper-is-parent") {
			t.Fatalf("%s: the command's parent is not its helper: %q", m, out)
		}
		if strings.Contains(out, "/sys/fs/cgroup") || strings.Contains(out, "opened") {
			t.Errorf("%s: a command reaches the helper's cgroup descriptors: %q", m, out)
		}
	}
}

// TestCgroupHelperDeathKillsAtOnce: when a helper dies, what its running
// command left in its group (here a child in a session of its own) is
// killed when the command fails, not only when a later command of that
// mode starts a new helper, which may be hours later: until then it would
// run on past its time limit, with no one to kill it.
func TestCgroupHelperDeathKillsAtOnce(t *testing.T) {
	newCgroupRig(t)
	sb, err := Start(t.Context(), Config{Limits: cgroupLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	for _, m := range []Mode{Approved, ReadOnly} {
		h, _ := sb.helper(t.Context(), m)
		var out syncBuf
		done := make(chan error, 1)
		go func() {
			_, err := sb.Run(t.Context(), m, Cmd{Args: []string{"/bin/sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; exec sleep 300"}, Dir: "/", Env: []string{testPath}}, &out)
			done <- err
		}()
		pid := 0
		for i := 0; i < 2000 && pid == 0; i++ {
			pid, _ = strconv.Atoi(strings.TrimSpace(out.String()))
			time.Sleep(5 * time.Millisecond)
		}
		if pid == 0 {
			t.Fatalf("%s: no child started: %q", m, out.String())
		}
		if err := h.proc.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: the running command: %v, want ErrUnavailable", m, err)
		}
		if b, alive := outlives(pid); alive {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s: the child %d left by a command whose helper died runs on: %s", m, pid, b)
		}
	}
}

// TestCgroupV2Delegated: in auto mode a v2 group is used only where it is
// delegated to the daemon (the xattr systemd sets with Delegate=yes), not
// merely because root may write there: a group without the mark is left
// as it is (its processes not moved into a leaf) and the reason says
// Delegate=yes; with trusted.delegate "1" it is used, also from the leaf
// a restarted daemon is already in (the mark is on the parent); "v2" by
// name does not ask. Tried on a group of the unified hierarchy with a
// sleeping child. (A user other than root is judged by the group's owner,
// which this root test does not reach.)
func TestCgroupV2Delegated(t *testing.T) {
	unified, name, g, child := unifiedTestGroup(t, "thinbot-delegtest")
	mounts := []cgroupMount{{Root: "/", Point: unified, V2: true}}
	own := []cgroupLine{{Path: "/" + name}}
	leaf := []cgroupLine{{Path: "/" + name + "/" + v2Leaf}}
	plan := func(lines []cgroupLine, auto bool) error {
		t.Helper()
		p, err := planV2(lines, mounts, auto)
		if err == nil && (len(p.Dirs) != 1 || p.Dirs[0].Path != g) {
			t.Errorf("planV2 = %+v; want %s", p, g)
		}
		return err
	}
	mark := func(v string) {
		t.Helper()
		if err := unix.Setxattr(g, "trusted.delegate", []byte(v), 0); err != nil {
			t.Fatalf("set trusted.delegate on %s: %v", g, err)
		}
	}

	if err := plan(own, true); err == nil || !strings.Contains(err.Error(), "Delegate=yes") || !strings.Contains(err.Error(), "not delegated") {
		t.Errorf("auto, unmarked group: %v; want not delegated (Delegate=yes)", err)
	}
	if err := plan(leaf, true); err == nil {
		t.Error("auto, restarted in the leaf of an unmarked group: used")
	}
	if _, err := os.Stat(filepath.Join(g, v2Leaf)); err == nil {
		t.Errorf("auto moved the processes of an undelegated group into %s", v2Leaf)
	}
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", child)); !strings.Contains(string(b), "0::/"+name+"\n") {
		t.Errorf("the group's process moved: %q", b)
	}
	if err := plan(own, false); err != nil {
		t.Errorf("v2 by name, unmarked group: %v", err)
	}
	mark("0")
	if err := plan(own, true); err == nil {
		t.Error(`auto, trusted.delegate "0": used`)
	}
	mark("1")
	if err := plan(own, true); err != nil {
		t.Errorf(`auto, trusted.delegate "1": %v`, err)
	}
	if err := plan(leaf, true); err != nil {
		t.Errorf(`auto, restarted in the leaf of a group marked "1": %v`, err)
	}
	if err := unix.Removexattr(g, "trusted.delegate"); err != nil {
		t.Fatal(err)
	}
	if err := plan(own, true); err == nil {
		t.Error("auto, mark removed: used")
	}
}

// TestCheckV2SaysNotInForce: "cgroup: v2" on a group whose parent hands
// it no memory controller still starts (commands get a group each, killed
// and removed with them), and sandbox check's limits line says which group
// limits are NOT in force, by their config names. The daemon's group, as
// the plan reads it (Config.procSelf), is a child of a new test group,
// which enables no controller for its children: on a hybrid host and a
// pure v2 host alike.
func TestCheckV2SaysNotInForce(t *testing.T) {
	mount, name, g, _ := unifiedTestGroup(t, "thinbot-notinforce")
	own := filepath.Join(g, "bare")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(own) })
	if b, _ := os.ReadFile(filepath.Join(own, "cgroup.controllers")); strings.Contains(string(b), "memory") {
		t.Fatalf("%s offers memory (%q) under a parent that enabled none", own, b)
	}
	r := CheckSandbox(t.Context(), Config{Cgroup: "v2", procSelf: v2View(t, mount, "/"+name+"/bare")}, false, nil)
	if !strings.Contains(r.Cgroup, "cgroup v2") {
		t.Fatalf("cgroup: %s", r.Cgroup)
	}
	if !strings.Contains(r.Limits, "NOT in force") || !strings.Contains(r.Limits, "memory_total_mib") {
		t.Errorf("limits = %q, want memory_total_mib said NOT in force", r.Limits)
	}
	if left, _ := filepath.Glob(filepath.Join(own, "thinbot-*")); len(left) != 0 {
		t.Errorf("command groups left after the check: %v", left)
	}
}

// v2View writes, for Config.procSelf, the cgroup and mountinfo files of a
// process on a pure v2 host (Debian's default): one cgroup2 file system,
// mounted at mount, and the process in group own (a path from the
// hierarchy's top, such as "/test-group"). It returns their directory.
func v2View(t *testing.T, mount, own string) string {
	t.Helper()
	dir := t.TempDir()
	mi := fmt.Sprintf("30 23 0:26 / %s rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", mount)
	if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(mi), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte("0::"+own+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCgroupV2PureHostAuto: in auto mode on a pure v2 host (here its view,
// v2View, with a test group as the daemon's own) the daemon uses v2 where
// its group is delegated to it, which systemd marks (trusted.delegate),
// and falls back to rlimits with the reason where it is not. With v2,
// each command runs in a group of its own below the daemon's, what it
// leaves behind is killed when it ends, and the groups are gone once the
// sandbox is closed. The v1 path is the one a hybrid host takes; this is
// the v2 one, on either.
func TestCgroupV2PureHostAuto(t *testing.T) {
	mount, name, g, _ := unifiedTestGroup(t, "thinbot-purev2")
	view := v2View(t, mount, "/"+name)
	ws := t.TempDir()
	os.Chmod(ws, 0o755)

	sb, err := Start(t.Context(), Config{Workspaces: []string{ws}, Limits: cgroupLimits, procSelf: view})
	if err != nil {
		t.Fatal(err)
	}
	by := sb.Info(Approved).LimitsBy
	sb.Close()
	if !strings.HasPrefix(by, "rlimit per process, no cgroup: ") || !strings.Contains(by, "Delegate=yes") {
		t.Errorf("auto, a group not delegated: LimitsBy %q; want rlimits and why (Delegate=yes)", by)
	}

	if err := unix.Setxattr(g, "trusted.delegate", []byte("1"), 0); err != nil {
		t.Fatalf("set trusted.delegate on %s: %v", g, err)
	}
	sb, err = Start(t.Context(), Config{Workspaces: []string{ws}, Limits: cgroupLimits, procSelf: view})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	r := &cgroupRig{sb: sb, ws: ws}
	for _, m := range []Mode{Approved, ReadOnly} {
		if by := sb.Info(m).LimitsBy; !strings.HasPrefix(by, "cgroup v2") {
			t.Fatalf("%s: auto, a delegated group on a pure v2 host: LimitsBy %q", m, by)
		}
		out, _ := r.run(t, m, `grep '^0::' /proc/self/cgroup; setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "0::/"+name+"/thinbot-") {
			t.Fatalf("%s: not in a command group below %s: %q", m, name, out)
		}
		pid, _ := strconv.Atoi(lines[1])
		if b, alive := outlives(pid); alive {
			t.Errorf("%s: the background child %d outlived its command: %s", m, pid, b)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	sb.Close()
	if left, _ := filepath.Glob(filepath.Join(g, "thinbot-*")); len(left) != 0 {
		t.Errorf("command groups left after Close: %v", left)
	}
}

// unifiedTestGroup makes the group prefix-PID at the top of the v2
// hierarchy (v2Hierarchy: the unified tree of a hybrid host, or a pure v2
// host's /sys/fs/cgroup) with a sleeping child in it (a populated group,
// as a daemon's is), removed with its leaf when the test ends; child is
// the sleeper's pid. It needs root; under CI=1 a missing root or v2
// hierarchy fails the test.
func unifiedTestGroup(t *testing.T, prefix string) (unified, name, g string, child int) {
	t.Helper()
	unified = v2Hierarchy(t)
	name = fmt.Sprintf("%s-%d", prefix, os.Getpid())
	g = filepath.Join(unified, name)
	if err := os.Mkdir(g, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(g)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	cmd := exec.Command("/bin/sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.Remove(filepath.Join(g, v2Leaf))
		os.Remove(g)
	})
	return unified, name, g, cmd.Process.Pid
}

// hostHasV1 reports whether this process is in a v1 hierarchy of a
// controller command groups use (a v1 or hybrid host).
func hostHasV1() bool {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, l := range parseProcCgroup(b) {
		for _, c := range l.Controllers {
			if slices.Contains(wantControllers(), c) {
				return true
			}
		}
	}
	return false
}

// v2Hierarchy returns the cgroup v2 mount the v2 tests run on: the
// unified tree beside v1 on a hybrid host, else /sys/fs/cgroup. The tests
// need root; under CI=1 a missing hierarchy or root fails them.
func v2Hierarchy(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI=1: must run as root")
		}
		t.Skip("needs root")
	}
	for _, dir := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if _, err := os.Stat(dir + "/cgroup.procs"); err == nil {
			return dir
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI=1: no cgroup v2 hierarchy")
	}
	t.Skip("no cgroup v2 hierarchy")
	return ""
}

// TestCgroupLimitRefusedFailsClosed: a group limit the kernel refuses (a
// value out of its range) with the cgroup version asked for by name stops
// Start with the reason: no command runs without the cap the operator
// asked for (a root command's process cap is its group's: RLIMIT_NPROC
// does not bind root). In auto mode the sandbox falls back to rlimits and
// says so, in LimitsBy and NotInForce, which the daemon logs at start.
func TestCgroupLimitRefusedFailsClosed(t *testing.T) {
	r := newCgroupRig(t)
	by := r.sb.Info(Approved).LimitsBy
	mode := "v1"
	if strings.HasPrefix(by, "cgroup v2") {
		mode = "v2"
	}
	for _, tc := range []struct {
		name   string
		limits Limits
		file   string // the limit file the kernel refuses
		missed string // its name in NotInForce
	}{
		{"processes", Limits{ProcessesTotal: 1 << 30}, "pids.max", "processes_total"},
		{"cpus", Limits{CPUs: 0.001}, map[string]string{"v1": "cpu.cfs_quota_us", "v2": "cpu.max"}[mode], "cpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb, err := Start(t.Context(), Config{Cgroup: mode, Limits: tc.limits})
			if err == nil {
				var out syncBuf
				_, rerr := sb.Run(t.Context(), Approved, Cmd{Args: []string{"/bin/sh", "-c", "echo ran"}, Dir: "/", Env: []string{testPath}}, &out)
				sb.Close()
				t.Fatalf("cgroup %s with %s refused by the kernel: Start succeeded (%s); a command: %v, %q", mode, tc.file, sb.Info(Approved).LimitsBy, rerr, out.String())
			}
			if !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), "asked for by name") {
				t.Errorf("Start with cgroup %s: %v; want the refused %s and why it stops", mode, err, tc.file)
			}

			sb, err = Start(t.Context(), Config{Cgroup: "auto", Limits: tc.limits})
			if err != nil {
				t.Fatalf("Start with cgroup auto: %v", err)
			}
			defer sb.Close()
			for _, m := range []Mode{ReadOnly, Approved} {
				info := sb.Info(m)
				if !strings.HasPrefix(info.LimitsBy, "rlimit per process, no cgroup: ") || !strings.Contains(info.LimitsBy, tc.file) || !slices.Contains(info.NotInForce, tc.missed) {
					t.Errorf("auto, %s: LimitsBy %q, NotInForce %v; want the fallback to rlimits, the refused %s and %s not in force", m, info.LimitsBy, info.NotInForce, tc.file, tc.missed)
				}
				var out syncBuf
				if _, err := sb.Run(t.Context(), m, Cmd{Args: []string{"/bin/sh", "-c", "echo ran"}, Dir: "/", Env: []string{testPath}}, &out); err != nil || !strings.Contains(out.String(), "ran") {
					t.Errorf("auto, %s: a command after the fallback: %v, %q", m, err, out.String())
				}
			}
		})
	}
}
