package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Main runs the helper when args (os.Args) ask for it, and then exits the
// process; otherwise it returns at once. Call it first thing in main (and in
// TestMain of tests that start a Sandbox).
func Main(args []string) {
	if !IsHelper(args) {
		return
	}
	os.Exit(helperMain(args))
}

func helperMain(args []string) int {
	// One P: a helper only hands messages between the daemon and the
	// kernel, and starts one command at a time (the reaper's lock), so
	// more Ps buy no throughput, only threads waking each other (a second
	// P cost about 6 more context switches and 7% more of the helper's CPU
	// per read-only command in BenchmarkSpawn). Blocking system calls
	// still give the P up.
	runtime.GOMAXPROCS(1)
	f := os.NewFile(3, "sandbox")
	fc, err := net.FileConn(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "thinbot sandbox helper: not started by thinbot:", err)
		return 2
	}
	f.Close()
	conn := fc.(*net.UnixConn)
	hc, err := readConfig()
	if err == nil {
		if hc.Cgroup == nil {
			hc.Cgroup = &cgroupPlan{Why: "not planned"}
		}
		err = hc.Cgroup.adopt(hc.Limits)
	}
	if err == nil {
		var info Info
		var keeps []string
		info, keeps, err = setUp(hc)
		if err == nil {
			if hc.Mode == ReadOnly {
				hc.private = privateDirs(hc.Limits)
			}
			if err := send(conn, message{Op: "ready", Info: &info}); err != nil {
				return 2
			}
			serve(conn, hc, keeps)
			return 0
		}
	}
	_ = send(conn, message{Op: "error", Err: err.Error()})
	return 1
}

// setUp builds the helper's view of the system; see the package doc. It
// returns the workspaces below a tmp dir, which each read-only command gets
// bound into its private tmp dirs.
func setUp(hc helperConfig) (Info, []string, error) {
	info := Info{Mode: hc.Mode.String(), UserNS: hc.Mode == ReadOnly || !hc.Root, Root: hc.Root, Limits: hc.Limits,
		LimitsBy: hc.Cgroup.summary(), NotInForce: hc.Cgroup.notInForce(hc.Limits), Cgroups: hc.Cgroup.patterns()}
	if hc.User != nil {
		info.User = fmt.Sprintf("%s (%d)", hc.User.Name, hc.User.UID)
	}
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return info, nil, errors.New("the kernel has no Landlock (needs Linux 5.13+ with landlock in the lsm= list)")
	}
	info.LandlockABI = abi
	var keeps []string
	if hc.Mode == ReadOnly {
		keeps, err = setUpReadOnly(hc)
		info.Net = netSummary(hc.Net, abi)
		info.Covered = coveredSockets(hc)
	} else {
		err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, "")
		if err != nil {
			err = fmt.Errorf("make mounts private: %w", err)
		} else if hc.Root {
			err = protectKernelHelpers()
		}
		if err == nil {
			err = protectCgroups(hc.Cgroup)
		}
	}
	if err != nil {
		return info, nil, err
	}
	hidden, err := hide(hc.Hide)
	if err != nil {
		return info, nil, err
	}
	info.Hidden = hidden
	if err := dropPrivileges(hc); err != nil {
		return info, nil, err
	}
	if hc.Mode == ReadOnly && !hc.Net.UDP {
		// The whole read-only helper takes the socket filter once, and
		// every thread it confines for a command (and so the command)
		// inherits it; the helper itself needs no inet socket.
		if err := denyNonTCPAllThreads(); err != nil {
			return info, nil, fmt.Errorf("seccomp: %w", err)
		}
	}
	if hc.Cgroup.Version == 2 {
		if err := denyClone3AllThreads(); err != nil {
			return info, nil, fmt.Errorf("seccomp: %w", err)
		}
	}
	if hc.Mode == Approved {
		// The approved helper is confined as a whole. The read-only helper
		// is not: each command gets its own mount namespace and Landlock
		// domain from the thread that starts it (startReadOnly), so the
		// helper is outside every command's domain.
		if err := restrictApproved(); err != nil {
			return info, nil, fmt.Errorf("landlock: %w", err)
		}
	}
	return info, keeps, nil
}

// startLimited starts cmd with the limits l, from the calling thread,
// which must be locked to its goroutine. The command is started traced:
// the kernel stops it right after its exec, before it runs one instruction
// of the new program, and this thread (its tracer) sets its limits with
// prlimit and lets it go. So the limits bind the command and all it starts
// from its first instruction, while the helper itself stays unlimited (a
// helper that lived under them would count its own threads against the
// process limit, and its own CPU time over its life). With a cgroup g
// (nil for none), the command is started in it (see cgroup.enter). The
// caller holds the reaper's lock, so no one else waits for the stopped
// child.
func startLimited(cmd *exec.Cmd, l Limits, g *cgroup) error {
	cmd.SysProcAttr.Ptrace = true
	if err := g.enter(cmd); err != nil {
		return err
	}
	err := cmd.Start()
	if err := errors.Join(err, g.leave()); err != nil {
		if cmd.Process != nil {
			_ = unix.Kill(cmd.Process.Pid, unix.SIGKILL)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(cmd.Process.Pid, &ws, unix.WALL, nil)
		}
		return err
	}
	pid := cmd.Process.Pid
	fail := func(err error) error {
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		_ = cmd.Process.Release()
		return err
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil {
		return fail(fmt.Errorf("wait for the exec stop: %w", err))
	}
	if !ws.Stopped() {
		return fail(fmt.Errorf("the command did not stop at its exec (status %#x)", ws))
	}
	if err := g.join(pid); err != nil {
		return fail(err)
	}
	set := func(name string, res int, v int64) error {
		if v < 0 {
			return nil
		}
		lim := unix.Rlimit{Cur: uint64(v), Max: uint64(v)}
		if res == unix.RLIMIT_CPU {
			lim.Max++ // SIGXCPU at the soft limit, SIGKILL a second later
		}
		if err := unix.Prlimit(pid, res, &lim, nil); err != nil {
			return fmt.Errorf("set the %s limit: %w", name, err)
		}
		return nil
	}
	cpu := int64(-1)
	if l.CPU > 0 {
		cpu = int64((l.CPU + time.Second - 1) / time.Second)
	}
	if err := errors.Join(
		set("memory", unix.RLIMIT_DATA, l.Memory),
		set("process", unix.RLIMIT_NPROC, l.Processes),
		set("CPU", unix.RLIMIT_CPU, cpu),
		set("file size", unix.RLIMIT_FSIZE, l.FileSize),
		set("core file", unix.RLIMIT_CORE, 0),
	); err != nil {
		return fail(err)
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return fail(fmt.Errorf("let the command run: %w", err))
	}
	return nil
}

// kernelHelpers are the knobs that make the kernel start a program of the
// writer's choice outside every sandbox (core dumps piped to a program,
// module loading, hotplug, power-off, binfmt interpreters): approved
// commands of a root daemon see them read-only, which Landlock then keeps
// (a sandboxed process cannot unmount).
var kernelHelpers = []string{
	"/proc/sys/kernel/core_pattern",
	"/proc/sys/kernel/modprobe",
	"/proc/sys/kernel/hotplug",
	"/proc/sys/kernel/poweroff_cmd",
	"/sys/kernel/uevent_helper",
	"/proc/sys/fs/binfmt_misc",
}

func protectKernelHelpers() error {
	for _, p := range kernelHelpers {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := bindReadOnly(p, p, unix.MS_REC); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
	}
	return nil
}

var tmpDirs = []string{"/tmp", "/var/tmp"}

func setUpReadOnly(hc helperConfig) ([]string, error) {
	// Keep receiving the host's new mounts (a disk mounted later shows in
	// df), never send ours back, and make every mount read-only at once.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY, Propagation: unix.MS_SLAVE}
	if err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &attr); err != nil {
		return nil, fmt.Errorf("remount / read-only (mount_setattr, Linux 5.12+): %w", err)
	}
	// Workspaces below a tmp dir would vanish under the private tmpfs: hold
	// them open and bind them back. One that is missing is refused: it
	// could not be seen by any command.
	type keep struct {
		path string
		fd   int
	}
	var keeps []keep
	var paths []string
	for _, ws := range hc.Workspaces {
		ws = filepath.Clean(ws)
		for _, t := range tmpDirs {
			if ws == t || strings.HasPrefix(ws, t+"/") {
				fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return nil, fmt.Errorf("%s is below %s, which each read-only command gets a private copy of; it is bound into that copy, so it must exist when thinbot starts: %w", ws, t, err)
				}
				keeps = append(keeps, keep{ws, fd})
				paths = append(paths, ws)
			}
		}
	}
	for _, t := range tmpDirs {
		if !isDir(t) {
			continue
		}
		if err := unix.Mount("tmpfs", t, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=4m"); err != nil {
			return nil, fmt.Errorf("private %s: %w", t, err)
		}
	}
	for _, k := range keeps {
		if err := os.MkdirAll(k.path, 0o755); err != nil {
			return nil, fmt.Errorf("workspace %s: %w", k.path, err)
		}
		if err := bindReadOnly(fmt.Sprintf("/proc/self/fd/%d", k.fd), k.path, unix.MS_REC); err != nil {
			return nil, fmt.Errorf("workspace %s: %w", k.path, err)
		}
		unix.Close(k.fd)
	}
	return paths, minimalDev()
}

// devNodes are the device files a read-only command keeps.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// minimalDev replaces /dev with a tmpfs holding only harmless devices, so
// raw disks, /dev/mem and friends cannot be opened at all.
func minimalDev() error {
	fds := map[string]int{}
	for _, n := range append(devNodes, "pts") {
		fd, err := unix.Open("/dev/"+n, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err == nil {
			fds[n] = fd
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("minimal /dev: %w", err)
	}
	for _, n := range devNodes {
		fd, ok := fds[n]
		if !ok {
			continue
		}
		p := "/dev/" + n
		if err := os.WriteFile(p, nil, 0o666); err != nil {
			return fmt.Errorf("minimal /dev: %w", err)
		}
		if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("minimal /dev: bind %s: %w", p, err)
		}
	}
	if fd, ok := fds["pts"]; ok {
		if err := os.Mkdir("/dev/pts", 0o755); err == nil {
			if err := bindReadOnly(fmt.Sprintf("/proc/self/fd/%d", fd), "/dev/pts", 0); err != nil {
				return fmt.Errorf("minimal /dev: pts: %w", err)
			}
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, "/dev/"+name); err != nil {
			return fmt.Errorf("minimal /dev: %w", err)
		}
	}
	if err := os.Mkdir("/dev/shm", 0o1777); err != nil {
		return fmt.Errorf("minimal /dev: %w", err)
	}
	if err := unix.Mount("tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("minimal /dev: shm: %w", err)
	}
	if err := unix.Mount("", "/dev", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("minimal /dev: read-only: %w", err)
	}
	return nil
}

func bindReadOnly(src, dst string, extra uintptr) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|extra, ""); err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	flags := 0
	if extra&unix.MS_REC != 0 {
		flags = unix.AT_RECURSIVE
	}
	return unix.MountSetattr(-1, dst, uint(flags), &attr)
}

// hide covers each existing path: a directory with an empty read-only
// tmpfs, anything else with /dev/null. Deeper paths go last so that a file
// inside a hidden directory needs nothing more.
func hide(paths []string) ([]string, error) {
	ps := append([]string(nil), paths...)
	sort.Strings(ps)
	var done []string
	for _, p := range ps {
		p = filepath.Clean(p)
		if under(p, done) {
			continue
		}
		st, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			// Missing, or out of this user's reach (and so of its
			// commands' too): nothing to cover.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hide %s: %w", p, err)
		}
		if st.IsDir() {
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=4k")
		} else {
			err = bindReadOnly("/dev/null", p, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("hide %s: %w", p, err)
		}
		done = append(done, p)
	}
	return done, nil
}

func under(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// dropPrivileges empties the bounding set of a root daemon's read-only
// helper (its commands run as an unprivileged user and could not regain
// a capability through a set-user-ID program either), takes CAP_SYS_PTRACE
// from its approved commands, and clears the ambient CAP_SYS_ADMIN an
// ordinary user's helper was started with. The helper keeps its own
// capabilities in its namespace: it mounts each command's private tmp dirs
// and switches to the read-only user.
func dropPrivileges(hc helperConfig) error {
	if !hc.Root {
		if err := llsys.AllThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fmt.Errorf("clear ambient capabilities: %w", err)
		}
		return nil
	}
	if hc.Mode != ReadOnly {
		// Root passes ptrace's checks on a non-dumpable process only with
		// CAP_SYS_PTRACE: without it, /proc/<daemon>/environ and mem stay
		// closed to approved commands too.
		if err := llsys.AllThreadsPrctl(unix.PR_CAPBSET_DROP, unix.CAP_SYS_PTRACE, 0, 0, 0); err != nil {
			return fmt.Errorf("drop CAP_SYS_PTRACE: %w", err)
		}
		return nil
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := llsys.AllThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// restrictApproved puts the approved helper and its commands into a
// Landlock domain that grants every file right: its only effect is that a
// command cannot ptrace the daemon or open its /proc/<pid>/environ or mem.
// It also sets no_new_privs.
func restrictApproved() error {
	cfg := landlock.V7.BestEffort()
	cfg.HandledAccessNet = 0
	cfg.Scoped = 0
	return cfg.Restrict(landlock.PathAccess(cfg.HandledAccessFS, "/"))
}

// command is the exec.Cmd for m reading in (/dev/null, opened once by
// serve rather than by exec.Cmd for each command, unless the daemon passed
// a standard input) and writing to out (standard error to errOut), in its
// own process group.
func command(m message, in, out, errOut *os.File) *exec.Cmd {
	cmd := exec.Command(m.Args[0], m.Args[1:]...)
	cmd.Dir, cmd.Env = m.Dir, m.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stdin = in
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// spare is a thread confined ahead for the next read-only command (see
// startReadOnly): setting up a mount namespace, tmpfs mounts and a Landlock
// domain takes about half a millisecond, which a command then does not
// wait for.
type spare chan spareJob

type spareJob struct {
	m      message
	in     *os.File
	out    *os.File
	errOut *os.File
	grp    *cgroup
	done   chan<- startResult
}

type startResult struct {
	cmd *exec.Cmd
	err error
	// ns holds the command's mount namespace (a descriptor, -1 for
	// none): closed after the exit is reported, so that tearing the
	// namespace down (unmounting its tmpfs, waiting for RCU) is not on the
	// command's exit path.
	ns int
}

// newSpare starts a goroutine that locks a thread, confines it and waits
// for one command; closing the channel instead lets it exit.
func newSpare(hc helperConfig, keeps []string) spare {
	ch := make(spare)
	go func() {
		runtime.LockOSThread() // never unlocked: see startReadOnly
		err := confineThread(hc, keeps)
		ns := -1
		if err == nil {
			// A bare descriptor: an os.File would also register with the
			// poller and set a finalizer, for each command.
			if fd, err := unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				ns = fd
			}
		}
		j, ok := <-ch
		if !ok {
			if ns >= 0 {
				unix.Close(ns)
			}
			return
		}
		cmd := command(j.m, j.in, j.out, j.errOut)
		if err == nil {
			err = enter(hc, cmd)
		}
		if err == nil {
			err = startLimited(cmd, hc.Limits, j.grp)
		}
		j.done <- startResult{cmd, err, ns}
	}()
	return ch
}

// startReadOnly starts a read-only command from a thread of its own (the
// spare s), which first gave itself (and so the command) a mount namespace
// with empty private /tmp, /var/tmp and /dev/shm (the workspaces below
// them bound back, the host's control sockets covered), then a seccomp
// filter and a Landlock domain of the command's own. The thread is never
// handed back to the Go scheduler: it exits with the goroutine, and its
// namespace and tmpfs mounts go with the command's last process.
//
// A domain of its own is what keeps the helper safe: Landlock lets a
// process signal or ptrace only processes in its own domain or one nested
// below it, and every command's domain is nested below none of the
// helper's threads.
func startReadOnly(s spare, m message, in, out, errOut *os.File, g *cgroup) (*exec.Cmd, int, error) {
	done := make(chan startResult, 1)
	s <- spareJob{m: m, in: in, out: out, errOut: errOut, grp: g, done: done}
	r := <-done
	return r.cmd, r.ns, r.err
}

// enter makes the command start in its working directory as the
// read-only user (a root daemon's).
func enter(hc helperConfig, cmd *exec.Cmd) error {
	if hc.User == nil {
		return nil
	}
	// Enter the working directory as the helper, so that a workspace whose
	// parents the read-only user cannot search still works; what the user
	// may read in it is up to the files' modes. The thread has a working
	// directory of its own (CLONE_FS was unshared).
	if cmd.Dir != "" {
		if err := unix.Chdir(cmd.Dir); err != nil {
			return fmt.Errorf("chdir %s: %w", cmd.Dir, err)
		}
		cmd.Dir = ""
	}
	u := hc.User
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	return nil
}

// confineThread sets up the calling (locked) thread for one read-only
// command; see startReadOnly.
func confineThread(hc helperConfig, keeps []string) error {
	// Raw, as rawMount: copying the mount tree takes tens of microseconds.
	if _, _, e := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_FS|unix.CLONE_NEWNS, 0, 0); e != 0 {
		return fmt.Errorf("mount namespace: %w", e)
	}
	// Clone the workspaces below the tmp dirs before covering them.
	trees := make([]int, 0, len(keeps))
	defer func() { closeAll(trees) }()
	for _, k := range keeps {
		fd, err := unix.OpenTree(unix.AT_FDCWD, k, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("workspace %s: %w", k, err)
		}
		trees = append(trees, fd)
	}
	for _, t := range hc.private.dirs {
		if err := rawMount("tmpfs", t, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, hc.private.opts); err != nil {
			return fmt.Errorf("private %s: %w", t, err)
		}
	}
	for i, k := range keeps {
		if err := os.MkdirAll(k, 0o755); err != nil {
			return fmt.Errorf("workspace %s: %w", k, err)
		}
		if err := unix.MoveMount(trees[i], "", unix.AT_FDCWD, k, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fmt.Errorf("workspace %s: %w", k, err)
		}
	}
	for _, p := range coveredSockets(hc) {
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("cover %s: %w", p, err)
		}
	}
	rules := []landlock.Rule{
		landlock.RODirs("/"),
		landlock.RWDirs(hc.private.dirs...).IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing(),
	}
	for _, p := range hc.Net.ConnectTCP {
		rules = append(rules, landlock.ConnectTCP(p))
	}
	fd, flags, err := landlock.V7.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("landlock ruleset: %w", err)
	}
	if fd < 0 {
		return errors.New("landlock: nothing to enforce")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// The socket filter is the helper's already (setUp): this thread and
	// the command inherit it.
	if err := llsys.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// private are the dirs each read-only command gets an empty tmpfs of its
// own over, and the tmpfs's mount options.
type private struct {
	dirs []string
	opts string
}

// privateDirs finds the private dirs once, in the read-only helper's set-up
// namespace, where they cannot come or go: its root is read-only, /tmp and
// /var/tmp are its own tmpfs mounts where they exist, and /dev/shm is made
// by minimalDev (three stat calls fewer for each command). One that appeared on the host
// later would be read-only to commands: Landlock grants writes only below
// the dirs listed here.
func privateDirs(l Limits) private {
	var p private
	for _, t := range append(append([]string(nil), tmpDirs...), "/dev/shm") {
		if isDir(t) {
			p.dirs = append(p.dirs, t)
		}
	}
	p.opts = fmt.Sprintf("mode=1777,size=%d", l.Tmp)
	return p
}

// rawMount is mount(2) without telling the Go scheduler: the call takes
// tens of microseconds, long enough for the runtime to hand the thread's P
// to another thread and wake one for it, for each tmpfs of each command.
func rawMount(source, target, fstype string, flags uintptr, data string) error {
	src, err1 := unix.BytePtrFromString(source)
	tgt, err2 := unix.BytePtrFromString(target)
	typ, err3 := unix.BytePtrFromString(fstype)
	dat, err4 := unix.BytePtrFromString(data)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	_, _, e := unix.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(src)), uintptr(unsafe.Pointer(tgt)), uintptr(unsafe.Pointer(typ)), flags, uintptr(unsafe.Pointer(dat)), 0)
	runtime.KeepAlive(src)
	runtime.KeepAlive(tgt)
	runtime.KeepAlive(typ)
	runtime.KeepAlive(dat)
	if e != 0 {
		return e
	}
	return nil
}

// coveredSockets are the control sockets that exist and are not listed.
// It runs for every read-only command (a daemon started later still gets
// its socket covered), so it first stats each candidate, one system call
// that follows symbolic links as EvalSymlinks does: most are absent, and
// only a socket that exists is resolved and checked against the list.
func coveredSockets(hc helperConfig) []string {
	var (
		out     []string
		seen    map[string]bool
		allowed map[string]bool
	)
	for _, p := range append(controlSockets(), hc.Net.Cover...) {
		var st unix.Stat_t // not os.Stat: no FileInfo to allocate
		if err := unix.Stat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			continue
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if allowed == nil {
			allowed, seen = allowedSockets(hc), map[string]bool{}
		}
		if allowed[p] || allowed[r] || seen[r] {
			continue
		}
		if st, err := os.Stat(r); err != nil || st.Mode().Type() != os.ModeSocket {
			continue
		}
		seen[r] = true
		out = append(out, r)
	}
	return out
}

// allowedSockets are the sockets read-only commands may reach: those
// listed, and where they lead.
func allowedSockets(hc helperConfig) map[string]bool {
	allowed := map[string]bool{}
	for _, p := range hc.Net.Sockets {
		allowed[p] = true
		if r, err := filepath.EvalSymlinks(p); err == nil {
			allowed[r] = true
		}
	}
	if hc.User != nil {
		// An unprivileged user may ask the system bus only what any user
		// may (systemctl status); see controlSockets.
		for _, p := range []string{"/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket"} {
			allowed[p] = true
		}
	}
	return allowed
}

// netSummary says in words what read-only commands may reach.
func netSummary(n Network, abi int) string {
	var b strings.Builder
	if abi >= 4 {
		b.WriteString("TCP: no bind; connect only to ports ")
		if len(n.ConnectTCP) == 0 {
			b.WriteString("(none)")
		}
		for i, p := range n.ConnectTCP {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprint(&b, p)
		}
		b.WriteString(" (Landlock filters ports, not hosts)")
	} else {
		b.WriteString("TCP: open (Landlock ABI < 4 has no network rules)")
	}
	if n.UDP {
		b.WriteString("; UDP, ICMP and raw sockets: open (udp: true)")
	} else {
		b.WriteString("; UDP, ICMP, raw and non-TCP stream sockets: refused (seccomp), so no DNS lookups")
	}
	return b.String()
}

// serve starts commands until the socket closes; then it kills what still
// runs and returns.
func serve(conn *net.UnixConn, hc helperConfig, keeps []string) {
	var (
		wmu   sync.Mutex
		mu    sync.Mutex
		procs = map[uint64]*os.Process{}
		wg    sync.WaitGroup
	)
	rp := newReaper()
	// Every command reads /dev/null; without it (nil) exec.Cmd opens one
	// for each command.
	null, err := os.Open(os.DevNull)
	if err != nil {
		null = nil
	} else {
		defer null.Close()
	}
	var (
		spareMu sync.Mutex
		next    spare
	)
	if hc.Mode == ReadOnly {
		next = newSpare(hc, keeps)
	}
	stopReaper := make(chan struct{})
	reaperDone := make(chan struct{})
	go func() { defer close(reaperDone); rp.loop(stopReaper) }()
	reply := func(m message) {
		wmu.Lock()
		defer wmu.Unlock()
		_ = send(conn, m)
	}
	buf := newRecvBuf()
	for {
		m, fds, err := recv(conn, buf)
		if err != nil {
			closeAll(fds)
			break
		}
		switch m.Op {
		case "kill":
			mu.Lock()
			if p := procs[m.ID]; p != nil {
				_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
			}
			mu.Unlock()
			closeAll(fds)
		case "run":
			if len(fds) != ioFiles(m) || len(m.Args) == 0 {
				closeAll(fds)
				reply(message{ID: m.ID, Op: "error", Err: "run needs a program and one output descriptor (and one each for stdin and stderr when asked)"})
				continue
			}
			// Each command starts on its own goroutine: a slow fork must
			// not hold the next command or a kill.
			wg.Add(1)
			go func(m message, fds []int) {
				defer wg.Done()
				out, in, errOut := os.NewFile(uintptr(fds[0]), "output"), null, (*os.File)(nil)
				if m.Stdin {
					in = os.NewFile(uintptr(fds[1]), "stdin")
				}
				if m.Stderr {
					errOut = os.NewFile(uintptr(fds[len(fds)-1]), "stderr")
				}
				// The command holds its own copies once started.
				closeIO := func() {
					out.Close()
					if m.Stdin {
						in.Close()
					}
					if m.Stderr {
						errOut.Close()
					}
				}
				if errOut == nil {
					errOut = out
				}
				var cmd *exec.Cmd
				var err error
				var exited <-chan unix.WaitStatus
				ns := -1
				defer func() {
					if ns >= 0 {
						unix.Close(ns)
					}
				}()
				// The command's cgroup, made here, on a thread in no
				// Landlock domain (see cgroup_linux.go).
				grp, err := newCommandGroup(hc)
				if err != nil {
					closeIO()
					reply(message{ID: m.ID, Op: "error", Err: "start: " + err.Error()})
					return
				}
				rp.mu.Lock() // the reaper must not take the command's status before it is registered
				if hc.Mode == ReadOnly {
					spareMu.Lock()
					s := next
					next = newSpare(hc, keeps)
					spareMu.Unlock()
					cmd, ns, err = startReadOnly(s, m, in, out, errOut, grp)
				} else {
					cmd = command(m, in, out, errOut)
					// The tracer is this thread: it must stay the same
					// from the start to the detach.
					runtime.LockOSThread()
					err = startLimited(cmd, hc.Limits, grp)
					if !errors.Is(err, errStranded) {
						// A stranded thread is never handed back: no
						// other command may start from it (the helper
						// exits below).
						runtime.UnlockOSThread()
					}
				}
				if err == nil {
					exited = rp.registerLocked(cmd.Process.Pid)
				}
				rp.mu.Unlock()
				closeIO()
				if errors.Is(err, errStranded) {
					// Fail closed: this command fails, the helper exits,
					// and the daemon sweeps its groups and starts a new
					// one; what other commands still run dies with it.
					reply(message{ID: m.ID, Op: "error", Err: "start: " + err.Error(), Stop: true})
					os.Exit(3)
				}
				if err != nil {
					grp.end(hc.Limits)
					reply(message{ID: m.ID, Op: "error", Err: "start: " + err.Error()})
					return
				}
				mu.Lock()
				procs[m.ID] = cmd.Process
				mu.Unlock()
				reply(message{ID: m.ID, Op: "started", Pid: cmd.Process.Pid})
				ws := <-exited
				mu.Lock()
				// Whatever the command left in its group dies with it.
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				delete(procs, m.ID)
				mu.Unlock()
				_ = cmd.Process.Release()
				r := message{ID: m.ID, Op: "exited", Code: ws.ExitStatus(), Limit: grp.stop(hc.Limits)}
				if ws.Signaled() {
					r.Sig = int(ws.Signal())
				}
				reply(r)
				// The command's private tmp dirs go with its namespace:
				// their files must not stay charged to the group.
				if ns >= 0 {
					unix.Close(ns)
					ns = -1
				}
				// Emptied above; keeping or removing it need not hold
				// the reply.
				grp.release()
			}(m, fds)
		default:
			closeAll(fds)
		}
	}
	mu.Lock()
	for _, p := range procs {
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
	mu.Unlock()
	wg.Wait()
	if next != nil {
		close(next)
	}
	hc.Cgroup.drain()
	close(stopReaper)
	<-reaperDone
}

// reaper reaps every child of the helper, which is a child subreaper: a
// command's own exit status goes to the goroutine waiting for it, and
// orphans (what a command left behind, reparented to the helper) are
// reaped at once. Left to an init that does not reap (as in many
// containers), their zombies would count against the read-only user's
// process limit and stop every later command from starting.
type reaper struct {
	mu      sync.Mutex // held while a command starts and registers, and while a status is taken
	waiting map[int]chan unix.WaitStatus
}

func newReaper() *reaper {
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	return &reaper{waiting: map[int]chan unix.WaitStatus{}}
}

// registerLocked returns the channel that gets pid's exit status; the
// caller holds mu.
func (r *reaper) registerLocked(pid int) <-chan unix.WaitStatus {
	ch := make(chan unix.WaitStatus, 1)
	r.waiting[pid] = ch
	return ch
}

func (r *reaper) loop(stop <-chan struct{}) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.reap()
		select {
		case <-sigs:
		case <-tick.C:
		case <-stop:
			r.reap()
			return
		}
	}
}

// reap takes every exited child's status.
func (r *reaper) reap() {
	for {
		r.mu.Lock()
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
		if err != nil || pid <= 0 {
			r.mu.Unlock()
			return
		}
		ch := r.waiting[pid]
		delete(r.waiting, pid)
		r.mu.Unlock()
		if ch != nil {
			ch <- ws
		}
	}
}
