package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A command's cgroup. Each command runs in a group of its own, which
// caps its processes together (memory, processes, a share of the CPU) and
// from which none outlives it: when the command exits, whatever is left in
// the group is killed, and the emptied group is kept for a later command of
// the same helper (take, release) or removed. rlimits (startLimited) stay
// in force either way, per process.
//
// The daemon finds where groups may go (planCgroups, at Start) and hands
// each helper a directory descriptor per hierarchy: the read-only helper's
// mounts are read-only, and the descriptors are of the daemon's mount
// namespace, where they are not. Every file of a group is reached through
// them, from a thread in no Landlock domain.

// wantControllers are the controllers a command group uses.
func wantControllers() []string { return []string{"memory", "pids", "cpu"} }

// cgroupPlan is where command groups go: the daemon's answer, passed to
// each helper in helperConfig.
type cgroupPlan struct {
	// Version is 1 or 2; 0 means no cgroups (rlimits only), Why says why.
	Version int    `json:"version,omitempty"`
	Why     string `json:"why,omitempty"`
	// Required: a helper that cannot create a group fails to start
	// (Config.Cgroup named a version) instead of falling back.
	Required bool        `json:"required,omitempty"`
	Dirs     []cgroupDir `json:"dirs,omitempty"`
	// Missing are the wanted controllers this hierarchy does not offer;
	// their limits are not in force (said, not faked).
	Missing []string `json:"missing,omitempty"`
	// FailLeave makes every leave fail, as a failed write to the
	// helper's own tasks file would: a fault for tests, never set by
	// planCgroups.
	FailLeave bool `json:"fail_leave,omitempty"`

	seq atomic.Uint64 // names groups, in the helper
	// home are the helper's own groups' tasks files (v1), open for
	// writing: a thread that started a command in its group goes back.
	home     []int
	mu       sync.Mutex
	free     []*cgroup // emptied groups for later commands (take)
	draining bool      // the helper stops: keep no more
}

// cgroupDir is one parent directory of command groups: per controller on
// v1, one on v2.
type cgroupDir struct {
	Path        string   `json:"path"`
	Controllers []string `json:"controllers,omitempty"`
	// FD is the directory's descriptor in the helper.
	FD int `json:"fd,omitempty"`
}

// cgroupLine is one line of /proc/self/cgroup.
type cgroupLine struct {
	Controllers []string // "" (v2) or the v1 hierarchy's controllers
	Path        string
}

// parseProcCgroup parses /proc/<pid>/cgroup: "id:controllers:path" lines.
func parseProcCgroup(b []byte) []cgroupLine {
	var out []cgroupLine
	for _, l := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		ctl, p, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(p, "/") {
			continue
		}
		var cs []string
		if ctl != "" {
			cs = strings.Split(ctl, ",")
		}
		out = append(out, cgroupLine{Controllers: cs, Path: p})
	}
	return out
}

// cgroupMount is a cgroup file system from /proc/self/mountinfo.
type cgroupMount struct {
	Root, Point string
	V2          bool
	Controllers []string // v1: from the super options
}

// parseMountinfo returns the cgroup and cgroup2 mounts of a
// /proc/<pid>/mountinfo.
func parseMountinfo(b []byte) []cgroupMount {
	var out []cgroupMount
	for _, l := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := cgroupMount{Root: unescapeMount(f[3]), Point: unescapeMount(f[4])}
		switch g[0] {
		case "cgroup2":
			m.V2 = true
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") {
					m.Controllers = append(m.Controllers, o)
				}
			}
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within joins a mount point and a cgroup path seen through that mount's
// root; ok is false when the path is not below the root.
func within(m cgroupMount, p string) (string, bool) {
	rel := p
	if m.Root != "/" {
		if p != m.Root && !strings.HasPrefix(p, m.Root+"/") {
			return "", false
		}
		rel = strings.TrimPrefix(p, m.Root)
	}
	return filepath.Join(m.Point, rel), true
}

// planCgroups finds where this process may create command groups. want is
// Config.Cgroup: "" (auto), "v1", "v2" or "off". In auto mode a host that
// offers none gives a plan of Version 0 with the reason; a version asked
// for by name that is not available is an error (fail closed).
func planCgroups(want string, l Limits) (*cgroupPlan, error) {
	return planCgroupsIn("/proc/self", want, l)
}

// planCgroupsIn is planCgroups with this process's cgroup and mountinfo
// files read from dir: tests present another host's layout there (a pure
// v2 host on a hybrid one), with groups they made as the process's own.
func planCgroupsIn(dir, want string, l Limits) (*cgroupPlan, error) {
	switch want {
	case "off":
		return &cgroupPlan{Why: "turned off (cgroup: off)"}, nil
	case "", "auto", "v1", "v2":
	default:
		return nil, fmt.Errorf("cgroup: %q is none of auto, v1, v2, off", want)
	}
	self, err1 := os.ReadFile(filepath.Join(dir, "cgroup"))
	mi, err2 := os.ReadFile(filepath.Join(dir, "mountinfo"))
	if err := errors.Join(err1, err2); err != nil {
		if want == "v1" || want == "v2" {
			return nil, fmt.Errorf("cgroup %s: %w", want, err)
		}
		return &cgroupPlan{Why: err.Error()}, nil
	}
	lines, mounts := parseProcCgroup(self), parseMountinfo(mi)
	v1 := false
	for _, l := range lines {
		for _, c := range l.Controllers {
			v1 = v1 || slices.Contains(wantControllers(), c)
		}
	}
	var p *cgroupPlan
	var err error
	switch {
	case want == "v2" || (want != "v1" && !v1):
		p, err = planV2(lines, mounts, want != "v2")
	default:
		p, err = planV1(lines, mounts, l)
		if err != nil && want != "v1" {
			// A hybrid host whose v1 hierarchies are root's: a delegated
			// unified group still gives each command a group that is
			// killed and removed with it.
			if p2, err2 := planV2(lines, mounts, true); err2 == nil {
				p, err = p2, nil
			} else {
				err = fmt.Errorf("%w; %w", err, err2)
			}
		}
	}
	if err != nil {
		if want == "v1" || want == "v2" {
			return nil, err
		}
		return &cgroupPlan{Why: err.Error()}, nil
	}
	p.Required = want == "v1" || want == "v2"
	return p, nil
}

// planV1 takes, for each wanted controller mounted on its own v1
// hierarchy, the directory of this process's group there.
func planV1(lines []cgroupLine, mounts []cgroupMount, l Limits) (*cgroupPlan, error) {
	p := &cgroupPlan{Version: 1}
	for _, c := range wantControllers() {
		// A hierarchy per controller: one whose limit is off (-1) costs
		// a group per command for nothing. pids stays: it is how the
		// group is killed.
		if c == "memory" && l.MemoryTotal < 0 || c == "cpu" && l.CPUs < 0 {
			continue
		}
		var dir string
		for _, l := range lines {
			if !slices.Contains(l.Controllers, c) {
				continue
			}
			for _, m := range mounts {
				if !m.V2 && slices.Contains(m.Controllers, c) {
					if d, ok := within(m, l.Path); ok {
						dir = d
					}
				}
			}
		}
		if dir == "" {
			p.Missing = append(p.Missing, c)
			continue
		}
		if err := probeGroup(dir); err != nil {
			return nil, fmt.Errorf("cgroup v1 %s hierarchy: %w", c, err)
		}
		p.Dirs = append(p.Dirs, cgroupDir{Path: dir, Controllers: []string{c}})
	}
	if len(p.Dirs) == 0 {
		return nil, errors.New("cgroup v1: none of the memory, pids and cpu controllers is mounted")
	}
	return p, nil
}

// v2Leaf is the group a daemon moves itself into on v2, so that its own
// group can hand controllers to command groups ("no internal processes":
// a group that enables controllers for its children holds no process).
const v2Leaf = "daemon"

// planV2 uses the daemon's own v2 group: under systemd, the unit's group
// with Delegate=yes. It moves every process of that group into a leaf
// (v2Leaf) and enables the wanted controllers the group offers for its
// children; command groups are the leaf's siblings. With auto (Config.Cgroup
// "" or "auto") it does so only where the group is delegated to this
// process (delegated); "v2" by name takes the operator's word for it.
func planV2(lines []cgroupLine, mounts []cgroupMount, auto bool) (*cgroupPlan, error) {
	own := ""
	for _, l := range lines {
		if len(l.Controllers) == 0 {
			own = l.Path
		}
	}
	var mnt *cgroupMount
	for i := range mounts {
		if mounts[i].V2 {
			mnt = &mounts[i]
		}
	}
	if own == "" || mnt == nil {
		return nil, errors.New("cgroup v2: no unified hierarchy")
	}
	dir, ok := within(*mnt, own)
	if !ok {
		return nil, fmt.Errorf("cgroup v2: own group %s is outside the mount", own)
	}
	if path.Base(own) == v2Leaf {
		dir = filepath.Dir(dir)
	}
	if auto {
		if err := delegated(dir); err != nil {
			return nil, fmt.Errorf("cgroup v2 %s: not delegated to this process (systemd: Delegate=yes): %w", dir, err)
		}
	}
	p := &cgroupPlan{Version: 2}
	offered := strings.Fields(readTrim(filepath.Join(dir, "cgroup.controllers")))
	var add []string
	enabled := strings.Fields(readTrim(filepath.Join(dir, "cgroup.subtree_control")))
	var ctl []string
	for _, c := range wantControllers() {
		switch {
		case !slices.Contains(offered, c):
			p.Missing = append(p.Missing, c)
		case !slices.Contains(enabled, c):
			add = append(add, "+"+c)
			ctl = append(ctl, c)
		default:
			ctl = append(ctl, c)
		}
	}
	if len(add) > 0 && dir != mnt.Point {
		if err := intoLeaf(dir); err != nil {
			return nil, fmt.Errorf("cgroup v2 %s (delegated to this process? systemd: Delegate=yes): %w", dir, err)
		}
	}
	if len(add) > 0 {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(add, " ")), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2 %s: enable %s: %w", dir, strings.Join(add, " "), err)
		}
	}
	if err := probeGroup(dir); err != nil {
		return nil, fmt.Errorf("cgroup v2 %s (delegated to this process? systemd: Delegate=yes): %w", dir, err)
	}
	p.Dirs = []cgroupDir{{Path: dir, Controllers: ctl}}
	return p, nil
}

// delegated says whether v2 group dir (the daemon's own, or the parent of
// its leaf v2Leaf after a restart) is delegated to this process, or why
// not. Writable is not enough: root may write anywhere, and a root process
// in a session scope, or in a unit without Delegate=yes, that moved its
// group into a leaf and enabled controllers would rearrange a tree whose
// single writer is systemd (which may undo it). Delegated means: systemd
// (251 and later) marked the group with the xattr trusted.delegate (the
// system manager) or user.delegate (a user manager) "1", as it does for a
// unit with Delegate=yes; or, for a process other than root, the group is
// its user's (systemd chowns a delegated group to the unit's User=, and an
// ordinary user may write nowhere else anyway). Only dir itself counts,
// not a delegated ancestor: that one is delegated to the manager running
// there (a user manager, a container's init), the single writer of its
// subtree, which would have marked dir had it delegated it further.
func delegated(dir string) error {
	for _, name := range []string{"trusted.delegate", "user.delegate"} {
		buf := make([]byte, 16)
		n, err := unix.Getxattr(dir, name, buf)
		if err == nil && strings.TrimSpace(string(buf[:n])) == "1" {
			return nil
		}
	}
	if uid := os.Geteuid(); uid != 0 {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return err
		}
		if int(st.Uid) == uid {
			return nil
		}
		return fmt.Errorf("owned by uid %d, not %d, and not marked trusted.delegate or user.delegate", st.Uid, uid)
	}
	return errors.New("not marked trusted.delegate (root may write there, but the group is systemd's)")
}

// intoLeaf moves every process of group dir into its child v2Leaf.
func intoLeaf(dir string) error {
	leaf := filepath.Join(dir, v2Leaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return err
	}
	for _, pid := range strings.Fields(string(b)) {
		err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(pid), 0)
		if err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("move %s into %s: %w", pid, leaf, err)
		}
	}
	return nil
}

// probeGroup creates and removes a group below dir: the daemon may, or
// the error says why not.
func probeGroup(dir string) error {
	p := filepath.Join(dir, fmt.Sprintf("thinbot-probe-%d", os.Getpid()))
	if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return unix.Rmdir(p)
}

// open returns the directories of p for a helper, whose descriptors are
// numbered from first on, and the plan that names them.
func (p *cgroupPlan) open(first int) ([]*os.File, *cgroupPlan, error) {
	out := &cgroupPlan{Version: p.Version, Why: p.Why, Required: p.Required, Missing: p.Missing, FailLeave: p.FailLeave}
	var files []*os.File
	for i, d := range p.Dirs {
		f, err := os.OpenFile(d.Path, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, nil, fmt.Errorf("sandbox: cgroup %s: %w", d.Path, err)
		}
		files = append(files, f)
		d.FD = first + i
		out.Dirs = append(out.Dirs, d)
	}
	return files, out, nil
}

// adopt is the helper's first step with its plan: the directories are
// kept from commands (close-on-exec), and one group is created with the
// commands' limits l and removed, so that a limit the kernel refuses (a
// value out of its range) is found before any command runs, not by each
// command failing. Where that fails, an optional plan (auto) turns into
// rlimits only, with the reason (Info.LimitsBy, Info.NotInForce); a
// required one (a version named in Config.Cgroup) fails the helper, and
// so Start.
func (p *cgroupPlan) adopt(l Limits) error {
	for _, d := range p.Dirs {
		unix.CloseOnExec(d.FD)
	}
	if p.Version == 0 {
		return nil
	}
	var err error
	if p.Version == 1 {
		for _, d := range p.Dirs {
			fd, e := unix.Openat(d.FD, "tasks", unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if e != nil {
				err = fmt.Errorf("cgroup: %s/tasks: %w", d.Path, e)
				break
			}
			p.home = append(p.home, fd)
		}
	}
	if err == nil {
		var g *cgroup
		g, err = p.create(l, fmt.Sprintf("thinbot-%d-probe", os.Getpid()))
		if err == nil {
			g.end(Limits{})
			return nil
		}
	}
	if p.Required {
		return fmt.Errorf("%w (cgroup v%d was asked for by name, so commands do not run without it)", err, p.Version)
	}
	for _, d := range p.Dirs {
		unix.Close(d.FD)
	}
	closeAll(p.home)
	p.Version, p.Dirs, p.Missing, p.home, p.Why = 0, nil, nil, nil, err.Error()
	return nil
}

// summary says how commands are limited, for Info.LimitsBy.
func (p *cgroupPlan) summary() string {
	if p.Version == 0 {
		why := p.Why
		if why == "" {
			why = "no cgroup hierarchy"
		}
		return "rlimit per process, no cgroup: " + why
	}
	var cs []string
	for _, d := range p.Dirs {
		cs = append(cs, d.Controllers...)
	}
	s := fmt.Sprintf("cgroup v%d (%s) per command", p.Version, strings.Join(cs, ", "))
	if len(cs) == 0 {
		s = fmt.Sprintf("cgroup v%d per command (no controllers: kill and clean-up only)", p.Version)
	}
	if len(p.Missing) > 0 {
		s += "; not available, so not in force: " + strings.Join(p.Missing, ", ")
	}
	if p.Version == 2 {
		s += "; clone3 refused (ENOSYS) so that no command forks outside its group"
	}
	return s + "; rlimits per process as well"
}

// notInForce are the group limits of l, by their config names, that p puts
// in no force (Info.NotInForce): all of them without groups, else those
// whose controller the hierarchy lacks. A limit turned off (-1) is not
// missed.
func (p *cgroupPlan) notInForce(l Limits) []string {
	var out []string
	for _, c := range wantControllers() {
		if p.Version != 0 && !slices.Contains(p.Missing, c) {
			continue
		}
		switch {
		case c == "memory" && l.MemoryTotal >= 0:
			out = append(out, "memory_total_mib")
		case c == "pids" && l.ProcessesTotal >= 0:
			out = append(out, "processes_total")
		case c == "cpu" && l.CPUs >= 0:
			out = append(out, "cpus")
		}
	}
	return out
}

// patterns are where command groups of this helper appear, for Info.
func (p *cgroupPlan) patterns() []string {
	var out []string
	for _, d := range p.Dirs {
		out = append(out, filepath.Join(d.Path, fmt.Sprintf("thinbot-%d-*", os.Getpid())))
	}
	return out
}

// cgroup is one command's group.
type cgroup struct {
	plan *cgroupPlan
	name string
	made int // directories created, in plan order
	// fds are, on v1, each directory's tasks file, open for writing; on
	// v2, the group's cgroup.procs.
	fds []int
	// seen are the event counters (OOM kills, forks refused) already
	// reported: a group is reused, its counters are not reset.
	seen struct{ oom, fork int64 }
	// dirty: stop could not empty the group; it is not reused.
	dirty bool
}

// newGroup creates the group for the next command of this helper.
func (p *cgroupPlan) newGroup(l Limits) (*cgroup, error) {
	return p.create(l, fmt.Sprintf("thinbot-%d-%d", os.Getpid(), p.seq.Add(1)))
}

// maxFree is how many emptied groups a helper keeps for later commands.
// A helper keeps no more than it once needed at the same time (groups are
// kept as commands end), so the pool follows the load the daemon really
// sees: four kept groups left a burst of 200 concurrent commands (the load
// test) making and removing a group per command per hierarchy, about a
// third of the helper's CPU. An empty group costs the kernel a few KiB
// per CPU (a v1 memory cgroup); the helper removes them all when it stops.
const maxFree = 256

// take returns a group for the next command: one an earlier command
// used, emptied, or else a new one. Reusing groups spares each command a
// mkdir and an rmdir per hierarchy (a v1 memory cgroup takes about half a
// millisecond to make), and a host the pile of removed memory cgroups
// that the kernel keeps while pages are still charged to them.
func (p *cgroupPlan) take(l Limits) (*cgroup, error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		g := p.free[n-1]
		p.free = p.free[:n-1]
		p.mu.Unlock()
		return g, nil
	}
	p.mu.Unlock()
	return p.newGroup(l)
}

// release keeps g, emptied by stop, for a later command, or removes it.
func (g *cgroup) release() {
	if g == nil {
		return
	}
	p := g.plan
	keep := !g.dirty && g.uncharged()
	p.mu.Lock()
	if keep && len(p.free) < maxFree && !p.draining {
		p.free = append(p.free, g)
		g = nil
	}
	p.mu.Unlock()
	g.remove()
}

// carryMax is how much memory that no reclaim frees an emptied group may
// still have charged and serve another command.
const carryMax = 8 << 20

// uncharged reports whether the emptied group holds at most carryMax of
// memory that reclaim cannot free. What a command leaves charged stays
// with its group: page cache, which the next command's reclaim frees at
// its limit (and which stays cached for it), but also files it wrote to a
// tmpfs of the host and locked pages, which no reclaim frees without swap.
// Counted against the next command's limit, those could get a command
// killed for memory it never used; such a group is removed instead (its
// charges then limit no one).
func (g *cgroup) uncharged() bool {
	for _, d := range g.plan.Dirs[:g.made] {
		if !slices.Contains(d.Controllers, "memory") {
			continue
		}
		// Usually the whole charge is below carryMax: one short read
		// instead of memory.stat's forty lines, formatted per read.
		usage := "memory.usage_in_bytes"
		if g.plan.Version == 2 {
			usage = "memory.current"
		}
		if b, err := readAt(d.FD, g.name+"/"+usage); err == nil {
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && n <= carryMax {
				return true
			}
		}
		b, err := readAt(d.FD, g.name+"/memory.stat")
		if err != nil {
			return false
		}
		anon := "rss" // v1; its "shmem" is counted in "cache"
		if g.plan.Version == 2 {
			anon = "anon"
		}
		return flatKey(b, anon)+flatKey(b, "shmem")+flatKey(b, "unevictable") <= carryMax
	}
	return true
}

// drain removes the groups kept for later commands; the helper calls it
// when it stops.
func (p *cgroupPlan) drain() {
	p.mu.Lock()
	free := p.free
	p.free, p.draining = nil, true
	p.mu.Unlock()
	for _, g := range free {
		g.remove()
	}
}

// create makes group name in every directory of p with the limits l, and
// opens its cgroup.procs for join: a few system calls per hierarchy.
func (p *cgroupPlan) create(l Limits, name string) (*cgroup, error) {
	g := &cgroup{plan: p, name: name}
	for _, d := range p.Dirs {
		if err := unix.Mkdirat(d.FD, name, 0o755); err != nil {
			g.remove()
			return nil, fmt.Errorf("cgroup: create %s/%s: %w", d.Path, name, err)
		}
		g.made++
		for _, w := range limitFiles(p.Version, d.Controllers, l) {
			err := writeAt(d.FD, name+"/"+w.file, w.value)
			if err != nil && !(w.optional && errors.Is(err, unix.ENOENT)) {
				g.remove()
				return nil, fmt.Errorf("cgroup: %s/%s/%s: %w", d.Path, name, w.file, err)
			}
		}
		// Opened here, by a thread in no Landlock domain: a read-only
		// command's thread writes it later, and the kernel checks the
		// opener's rights.
		f := name + "/tasks"
		if p.Version == 2 {
			f = name + "/cgroup.procs"
		}
		fd, err := unix.Openat(d.FD, f, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			g.remove()
			return nil, fmt.Errorf("cgroup: %s/%s: %w", d.Path, f, err)
		}
		g.fds = append(g.fds, fd)
	}
	return g, nil
}

type limitFile struct {
	file, value string
	optional    bool
}

// cpuPeriod is the CFS period command groups use, the kernel's default.
const cpuPeriod = 100000

// limitFiles are the files that set l in a group with controllers cs.
func limitFiles(version int, cs []string, l Limits) []limitFile {
	var out []limitFile
	for _, c := range cs {
		switch {
		case c == "memory" && l.MemoryTotal > 0 && version == 1:
			v := strconv.FormatInt(l.MemoryTotal, 10)
			// memsw (memory and swap together) only where swap is
			// accounted; it must not be below limit_in_bytes.
			out = append(out, limitFile{"memory.limit_in_bytes", v, false}, limitFile{"memory.memsw.limit_in_bytes", v, true})
		case c == "memory" && l.MemoryTotal > 0:
			// No swap: a hog is killed at the limit instead of pushing
			// the host into swap; and an OOM kill takes the whole group.
			out = append(out, limitFile{"memory.max", strconv.FormatInt(l.MemoryTotal, 10), false},
				limitFile{"memory.swap.max", "0", true}, limitFile{"memory.oom.group", "1", true})
		case c == "pids" && l.ProcessesTotal > 0:
			out = append(out, limitFile{"pids.max", strconv.FormatInt(l.ProcessesTotal, 10), false})
		case c == "cpu" && l.CPUs > 0:
			q := strconv.FormatInt(int64(l.CPUs*cpuPeriod), 10)
			if version == 1 {
				out = append(out, limitFile{"cpu.cfs_quota_us", q, false})
			} else {
				out = append(out, limitFile{"cpu.max", q + " " + strconv.Itoa(cpuPeriod), false})
			}
		}
	}
	return out
}

func writeAt(dir int, name, value string) error {
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Write(fd, []byte(value))
	unix.Close(fd)
	return err
}

func readAt(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	var out []byte
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

// enter makes cmd start in the group (v1), so that the command and all
// it starts are in it from their first instruction: the calling thread,
// which must be locked to its goroutine and start cmd, moves itself into
// the group (writing "0" to tasks moves the writing thread alone, which
// the kernel does without the global lock that moving a whole process
// takes: that costs a grace period of RCU, about a millisecond); the fork
// then starts cmd there, and leave moves the thread back. On v2 a thread
// cannot join a group alone, and the helper does not fork into it
// (CLONE_INTO_CGROUP): commands get no clone3 (denyClone3AllThreads),
// which would let them fork out of it too; join moves the command, still
// stopped at its exec, before its first instruction.
func (g *cgroup) enter(cmd *exec.Cmd) error {
	if g == nil || g.plan.Version == 2 {
		return nil
	}
	return g.enterThread()
}

// join moves the process pid, stopped before its first instruction, into
// the group (v2).
func (g *cgroup) join(pid int) error {
	if g == nil || g.plan.Version != 2 {
		return nil
	}
	if _, err := unix.Write(g.fds[0], []byte(strconv.Itoa(pid))); err != nil {
		return fmt.Errorf("cgroup: join %s/%s: %w", g.plan.Dirs[0].Path, g.name, err)
	}
	return nil
}

func (g *cgroup) enterThread() error {
	for i, fd := range g.fds {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return errors.Join(fmt.Errorf("cgroup: enter %s/%s: %w", g.plan.Dirs[i].Path, g.name, err), g.leave())
		}
	}
	return nil
}

// errStranded: a thread of the helper could not leave a command's group.
// It is not safe to go on: the group kill skips the helper's pid, so the
// group can never be emptied and removed, and the thread would start
// later commands from inside it (their forks counted against it). The
// helper exits instead, after failing the one command, and the daemon
// starts a new one (serve).
var errStranded = errors.New("a helper thread is stranded in a command's group")

// leave moves the calling thread back into the helper's own groups after
// enter (v1). An error wraps errStranded.
func (g *cgroup) leave() error {
	if g == nil || g.plan.Version == 2 {
		return nil
	}
	for i, fd := range g.plan.home {
		_, err := unix.Write(fd, []byte("0"))
		if g.plan.FailLeave {
			err = unix.EIO
		}
		if err != nil {
			return fmt.Errorf("cgroup: back to %s: %w (%w)", g.plan.Dirs[i].Path, err, errStranded)
		}
	}
	return nil
}

// end kills what is left in the group, says which limit the command hit
// ("" for none), and removes the group.
func (g *cgroup) end(l Limits) string {
	hit := g.stop(l)
	g.remove()
	return hit
}

// stop kills what is left in the group and says which limit the command
// hit since it took the group ("" for none); release, after the exit is
// reported, keeps the group for a later command or removes it.
func (g *cgroup) stop(l Limits) string {
	if g == nil {
		return ""
	}
	g.dirty = !g.kill()
	return g.hits(l)
}

// kill kills every process in the group and waits until none is left:
// by reading cgroup.procs and killing each, until a read finds none (a
// process that gets SIGKILL cannot complete a fork, so each round leaves
// fewer); on v2 with cgroup.kill. Usually the first read is empty. It
// reports whether the group is empty and may serve another command: on
// Linux 6.18 a process forked into a v2 group (CLONE_INTO_CGROUP) after a
// write to its cgroup.kill is killed at birth, so such a group is not
// reused (kept although commands now join by a move).
func (g *cgroup) kill() (reusable bool) {
	if g.made == 0 {
		return true
	}
	d := g.plan.Dirs[0]
	v2kill := false
	wait := 50 * time.Microsecond
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		b, err := readAt(d.FD, g.name+"/cgroup.procs")
		pids := strings.Fields(string(b))
		if err != nil {
			return false
		}
		if len(pids) == 0 {
			return !v2kill
		}
		if g.plan.Version == 2 && !v2kill {
			v2kill = writeAt(d.FD, g.name+"/cgroup.kill", "1") == nil
		}
		if !v2kill {
			for _, p := range pids {
				// The helper is listed while one of its threads is in the
				// group (enter without leave): never kill it.
				if pid, err := strconv.Atoi(p); err == nil && pid > 0 && pid != os.Getpid() {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		time.Sleep(wait)
		wait = min(2*wait, 20*time.Millisecond)
	}
	return false
}

// hits reads the group's event counters: an OOM kill, a fork refused at
// pids.max.
func (g *cgroup) hits(l Limits) string {
	var out []string
	for _, d := range g.plan.Dirs[:g.made] {
		for _, c := range d.Controllers {
			switch c {
			case "memory":
				f := "memory.events"
				if g.plan.Version == 1 {
					f = "memory.oom_control"
				}
				if b, err := readAt(d.FD, g.name+"/"+f); err == nil {
					if n := flatKey(b, "oom_kill"); n > g.seen.oom {
						g.seen.oom = n
						out = append(out, "killed: memory limit "+size(l.MemoryTotal))
					}
				}
			case "pids":
				if b, err := readAt(d.FD, g.name+"/pids.events"); err == nil {
					if n := flatKey(b, "max"); n > g.seen.fork {
						g.seen.fork = n
						out = append(out, fmt.Sprintf("process limit %d reached: a fork failed", l.ProcessesTotal))
					}
				}
			}
		}
	}
	return strings.Join(out, "; ")
}

// flatKey returns the value of key in a cgroup flat-keyed file ("key N"
// lines), 0 when absent.
func flatKey(b []byte, key string) int64 {
	for _, l := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(bytes.TrimSpace(l), []byte(" "))
		if ok && string(k) == key {
			n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n
		}
	}
	return 0
}

// remove removes the group's directories. A directory still busy (a
// process that was killed but has not finished exiting) is tried again
// for a short while.
func (g *cgroup) remove() {
	if g == nil {
		return
	}
	wait := 50 * time.Microsecond
	for i := g.made - 1; i >= 0; i-- {
		d := g.plan.Dirs[i]
		for deadline := time.Now().Add(2 * time.Second); ; {
			err := unix.Unlinkat(d.FD, g.name, unix.AT_REMOVEDIR)
			if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				break
			}
			time.Sleep(wait)
			wait = min(2*wait, 20*time.Millisecond)
		}
	}
	g.made = 0
	closeAll(g.fds)
	g.fds = nil
}

// newCommandGroup creates the cgroup of the next command, nil without
// cgroups. Failing to create one fails the command (closed): Info told the
// operator that commands are capped by cgroups, and a root command without
// its cap (RLIMIT_NPROC does not bind root) is what the cap is for. The
// next command tries again.
func newCommandGroup(hc helperConfig) (*cgroup, error) {
	if hc.Cgroup == nil || hc.Cgroup.Version == 0 {
		return nil, nil
	}
	return hc.Cgroup.take(hc.Limits)
}

// protectCgroups makes the cgroup file systems read-only to approved
// commands where commands get groups: root (or the owner of a delegated
// v2 group) could otherwise write its own pid into another group's
// cgroup.procs and leave its limits behind. The helper reaches its groups
// through descriptors of the daemon's mount namespace, which this does
// not touch.
func protectCgroups(p *cgroupPlan) error {
	if p == nil || p.Version == 0 {
		return nil
	}
	const top = "/sys/fs/cgroup"
	paths := []string{}
	if isDir(top) {
		paths = append(paths, top)
	}
	for _, d := range p.Dirs {
		if d.Path != top && !strings.HasPrefix(d.Path, top+"/") {
			paths = append(paths, d.Path)
		}
	}
	for _, q := range paths {
		if err := bindReadOnly(q, q, unix.MS_REC); err != nil {
			return fmt.Errorf("read-only %s: %w", q, err)
		}
	}
	return nil
}

// sweep removes the command groups of helpers that are gone, killing what
// is left in them: a helper killed outright cannot clean up after its
// commands. pid > 0 sweeps that helper's groups (the daemon calls it when
// one of its helpers died or was closed); pid 0 sweeps the groups of every
// helper no longer running (at Start, after a daemon was killed). It
// reads the parent directories only then, never per command.
func (p *cgroupPlan) sweep(pid int) {
	if p == nil {
		return
	}
	pat := "thinbot-*-*"
	if pid > 0 {
		pat = fmt.Sprintf("thinbot-%d-*", pid)
	}
	for _, d := range p.Dirs {
		gs, _ := filepath.Glob(filepath.Join(d.Path, pat))
		for _, g := range gs {
			var owner int
			if _, err := fmt.Sscanf(filepath.Base(g), "thinbot-%d-", &owner); err != nil {
				continue
			}
			if pid == 0 && helperRunning(owner) {
				continue
			}
			killGroup(g)
			_ = unix.Rmdir(g)
		}
	}
}

// helperRunning reports whether pid is a running sandbox helper.
func helperRunning(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(b, []byte(helperArg))
}

// killGroup kills the processes of the group at path g, a few rounds.
func killGroup(g string) {
	for i := 0; i < 100; i++ {
		b, err := os.ReadFile(filepath.Join(g, "cgroup.procs"))
		pids := strings.Fields(string(b))
		if err != nil || len(pids) == 0 {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
}
