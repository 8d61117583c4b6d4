package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

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
	f := os.NewFile(3, "sandbox")
	fc, err := net.FileConn(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "thinbot sandbox helper: not started by thinbot:", err)
		return 2
	}
	f.Close()
	conn := fc.(*net.UnixConn)
	hc, err := configArg(args)
	if err == nil {
		var info Info
		info, err = setUp(hc)
		if err == nil {
			if err := send(conn, message{Op: "ready", Info: &info}); err != nil {
				return 2
			}
			serve(conn)
			return 0
		}
	}
	_ = send(conn, message{Op: "error", Err: err.Error()})
	return 1
}

// setUp builds the helper's view of the system; see the package doc.
func setUp(hc helperConfig) (Info, error) {
	info := Info{Mode: hc.Mode.String(), UserNS: hc.Mode == ReadOnly || !hc.Root, Root: hc.Root}
	abi, err := llsys.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		return info, errors.New("the kernel has no Landlock (needs Linux 5.13+ with landlock in the lsm= list)")
	}
	info.LandlockABI = abi
	if hc.Mode == ReadOnly {
		err = setUpReadOnly(hc)
	} else {
		err = unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, "")
		if err != nil {
			err = fmt.Errorf("make mounts private: %w", err)
		}
	}
	if err != nil {
		return info, err
	}
	hidden, err := hide(hc.Hide)
	if err != nil {
		return info, err
	}
	info.Hidden = hidden
	if err := dropPrivileges(hc); err != nil {
		return info, err
	}
	if err := restrict(hc.Mode); err != nil {
		return info, fmt.Errorf("landlock: %w", err)
	}
	return info, nil
}

var tmpDirs = []string{"/tmp", "/var/tmp"}

func setUpReadOnly(hc helperConfig) error {
	// Keep receiving the host's new mounts (a disk mounted later shows in
	// df), never send ours back, and make every mount read-only at once.
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY, Propagation: unix.MS_SLAVE}
	if err := unix.MountSetattr(-1, "/", unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("remount / read-only (mount_setattr, Linux 5.12+): %w", err)
	}
	// Workspaces below a tmp dir would vanish under the private tmpfs: hold
	// them open and bind them back.
	type keep struct {
		path string
		fd   int
	}
	var keeps []keep
	for _, ws := range hc.Workspaces {
		for _, t := range tmpDirs {
			if ws == t || strings.HasPrefix(ws, t+"/") {
				fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err == nil {
					keeps = append(keeps, keep{ws, fd})
				}
			}
		}
	}
	for _, t := range tmpDirs {
		if !isDir(t) {
			continue
		}
		if err := unix.Mount("tmpfs", t, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=256m"); err != nil {
			return fmt.Errorf("private %s: %w", t, err)
		}
	}
	for _, k := range keeps {
		if err := os.MkdirAll(k.path, 0o755); err != nil {
			return fmt.Errorf("workspace %s: %w", k.path, err)
		}
		if err := bindReadOnly(fmt.Sprintf("/proc/self/fd/%d", k.fd), k.path, unix.MS_REC); err != nil {
			return fmt.Errorf("workspace %s: %w", k.path, err)
		}
		unix.Close(k.fd)
	}
	return minimalDev()
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

// dropPrivileges leaves a read-only command of a root daemon only
// CAP_DAC_READ_SEARCH (root-only logs stay readable; in the user namespace
// nothing else would apply to the host anyway), takes CAP_SYS_PTRACE from
// its approved commands, and clears the ambient CAP_SYS_ADMIN an ordinary
// user's helper was started with.
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
		if c == unix.CAP_DAC_READ_SEARCH {
			continue
		}
		if err := llsys.AllThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// restrict enters the Landlock domain; it also sets no_new_privs.
func restrict(m Mode) error {
	cfg := landlock.V7.BestEffort()
	cfg.HandledAccessNet = 0
	if m == Approved {
		cfg.Scoped = 0
		return cfg.Restrict(landlock.PathAccess(cfg.HandledAccessFS, "/"))
	}
	rw := landlock.RWDirs(append(append([]string(nil), tmpDirs...), "/dev/shm")...).IgnoreIfMissing()
	return cfg.Restrict(
		landlock.RODirs("/"),
		rw,
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full").IgnoreIfMissing(),
	)
}

// serve starts commands until the socket closes; then it kills what still
// runs and returns.
func serve(conn *net.UnixConn) {
	var (
		wmu   sync.Mutex
		mu    sync.Mutex
		procs = map[uint64]*os.Process{}
		wg    sync.WaitGroup
	)
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
			if len(fds) != 1 || len(m.Args) == 0 {
				closeAll(fds)
				reply(message{ID: m.ID, Op: "error", Err: "run needs a program and one output descriptor"})
				continue
			}
			// Each command starts on its own goroutine: a slow fork must
			// not hold the next command or a kill.
			wg.Add(1)
			go func(m message, out *os.File) {
				defer wg.Done()
				cmd := exec.Command(m.Args[0], m.Args[1:]...)
				cmd.Dir, cmd.Env = m.Dir, m.Env
				if cmd.Env == nil {
					cmd.Env = []string{}
				}
				cmd.Stdout, cmd.Stderr = out, out
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				err := cmd.Start()
				out.Close()
				if err != nil {
					reply(message{ID: m.ID, Op: "error", Err: "start: " + err.Error()})
					return
				}
				mu.Lock()
				procs[m.ID] = cmd.Process
				mu.Unlock()
				reply(message{ID: m.ID, Op: "started", Pid: cmd.Process.Pid})
				_ = cmd.Wait()
				mu.Lock()
				// Whatever the command left in its group dies with it.
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				delete(procs, m.ID)
				mu.Unlock()
				st := cmd.ProcessState
				r := message{ID: m.ID, Op: "exited", Code: st.ExitCode()}
				if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					r.Sig = int(ws.Signal())
				}
				reply(r)
			}(m, os.NewFile(uintptr(fds[0]), "output"))
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
}
