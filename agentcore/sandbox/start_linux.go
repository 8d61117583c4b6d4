package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// helperArg is the first argument that turns the binary into a helper.
const helperArg = "__thinbot-sandbox-helper"

// helperConfig is what the daemon tells a helper: JSON in a sealed memfd
// on the helper's descriptor configFD, read and closed at its start. Not
// on its command line, which every process of the host can read
// (/proc/<pid>/cmdline, ps), read-only commands included: it names every
// hidden path.
type helperConfig struct {
	Mode       Mode     `json:"mode"`
	Hide       []string `json:"hide,omitempty"`
	Workspaces []string `json:"workspaces,omitempty"`
	Root       bool     `json:"root"`
	Limits     Limits   `json:"limits"`
	Net        Network  `json:"net"`
	// User is who read-only commands of a root daemon run as.
	User *credential `json:"user,omitempty"`
	// Cgroup is where command groups go; its directories are the
	// helper's descriptors 5 and up.
	Cgroup *cgroupPlan `json:"cgroup,omitempty"`
	// private is set by the read-only helper after its set-up, not sent.
	private private
}

// credential is a user to run commands as.
type credential struct {
	Name   string   `json:"name"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// readOnlyUser resolves who a root daemon's read-only commands run as.
func readOnlyUser(name string, groups []string) (*credential, error) {
	if name == "" {
		name = "thinbot-ro"
		if _, err := user.Lookup(name); err != nil {
			name = "nobody"
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("sandbox: read-only user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("sandbox: read-only user %s: %w", name, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("sandbox: read-only user %s is root", name)
	}
	c := &credential{Name: name, UID: uint32(uid), GID: uint32(gid)}
	optional := groups == nil
	if optional {
		groups = []string{"adm", "systemd-journal"}
	}
	for _, g := range groups {
		gr, err := user.LookupGroup(g)
		if err != nil {
			if optional {
				continue
			}
			return nil, fmt.Errorf("sandbox: read-only group: %w", err)
		}
		id, err := strconv.ParseUint(gr.Gid, 10, 32)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("sandbox: read-only group %s: gid %s", g, gr.Gid)
		}
		c.Groups = append(c.Groups, uint32(id))
	}
	return c, nil
}

// restartHelper starts a helper to replace one that died. A daemon that is
// not root and already non-dumpable could not write the new helper's
// uid_map (its /proc files belong to root then): it is dumpable for the
// few milliseconds of the start, during which every command still runs in
// a user namespace and Landlock domain that cannot reach it.
func restartHelper(ctx context.Context, cfg Config, m Mode) (*helper, error) {
	if os.Geteuid() != 0 {
		if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err == nil && d == 0 {
			if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err == nil {
				defer unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
			}
		}
	}
	return startHelper(ctx, cfg, m)
}

func startHelper(ctx context.Context, cfg Config, m Mode) (*helper, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(pair[0]), "sandbox")
	theirs := os.NewFile(uintptr(pair[1]), "sandbox-helper")
	defer theirs.Close()
	fc, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, fmt.Errorf("sandbox: socket: %w", err)
	}
	conn := fc.(*net.UnixConn)

	root := os.Geteuid() == 0
	hcfg := helperConfig{Mode: m, Hide: cfg.Hide, Workspaces: cfg.Workspaces, Root: root, Limits: cfg.Limits.WithDefaults(), Net: cfg.Network}
	if root && m == ReadOnly {
		u, err := readOnlyUser(cfg.ReadOnlyUser, cfg.ReadOnlyGroups)
		if err != nil {
			conn.Close()
			return nil, err
		}
		hcfg.User = u
	}
	plan := cfg.cgroups
	if plan == nil {
		plan = &cgroupPlan{Why: "not planned"}
	}
	dirs, cp, err := plan.open(configFD + 1)
	if err != nil {
		conn.Close()
		return nil, err
	}
	defer func() {
		for _, f := range dirs {
			f.Close()
		}
	}()
	hcfg.Cgroup = cp
	hc, _ := json.Marshal(hcfg)
	cf, err := sealedFile("thinbot-sandbox-config", hc)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("sandbox: %s helper: %w", m, err)
	}
	defer cf.Close()
	// The mode on the command line tells the two helpers apart in ps; it
	// is all the command line says.
	cmd := exec.Command(cfg.Exe, helperArg, m.String())
	// The helper and everything it starts get no environment of ours:
	// each command brings its own, built from the allowlist.
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = append([]*os.File{theirs, cf}, dirs...) // 3, configFD, the cgroup dirs
	cmd.SysProcAttr = procAttr(m, root)
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sandbox: start %s helper: %w", m, explainClone(err))
	}
	theirs.Close()
	h := newHelper(m, conn, cmd.Process)

	// The first message is "ready" (with what was set up) or "error".
	type first struct {
		m   message
		err error
	}
	got := make(chan first, 1)
	go func() {
		m, fds, err := recv(conn, newRecvBuf())
		closeAll(fds)
		got <- first{m, err}
	}()
	var f first
	select {
	case f = <-got:
	case <-ctx.Done():
		conn.Close()
		<-got
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("sandbox: %s helper did not get ready: %w", m, ctx.Err())
	}
	if f.err != nil || f.m.Op != "ready" || f.m.Info == nil {
		conn.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		why := "it exited during set-up"
		switch {
		case f.err == nil && f.m.Err != "":
			why = f.m.Err
		case f.err != nil && !errors.Is(f.err, os.ErrClosed):
			why = f.err.Error()
		}
		return nil, fmt.Errorf("sandbox: %s helper: %s", m, why)
	}
	h.info = *f.m.Info
	go h.readLoop()
	return h, nil
}

// procAttr returns the namespaces the helper starts in. A root daemon keeps
// the host's ids in the user namespace (all of them, so ownership and ps
// read as on the host); an ordinary user maps only itself, and keeps
// CAP_SYS_ADMIN in the new namespace across exec (ambient) to set up mounts.
func procAttr(m Mode, root bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if m == Approved && root {
		a.Cloneflags = syscall.CLONE_NEWNS
		return a
	}
	a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	if root {
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		a.GidMappingsEnableSetgroups = true
		return a
	}
	uid, gid := os.Getuid(), os.Getgid()
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	return a
}

func explainClone(err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("the kernel refused new namespaces (%w); check kernel.unprivileged_userns_clone, user.max_user_namespaces, AppArmor's userns restriction, and systemd's RestrictNamespaces=", err)
	}
	return err
}

func rights(fds ...int) []byte { return unix.UnixRights(fds...) }

// outputPipe returns a pipe for a command's output: the read end as a
// file in the runtime's poller (Close unblocks a Read), the write end as a
// bare descriptor in blocking mode, which is only passed to the helper
// and closed (os.Pipe would register it with the poller too, and Fd would
// take it out again).
func outputPipe() (*os.File, int, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, -1, err
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		closeAll(p[:])
		return nil, -1, err
	}
	return os.NewFile(uintptr(p[0]), "output"), p[1], nil
}

func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("helper message: %w", err)
	}
	var fds []int
	for _, cm := range msgs {
		f, err := unix.ParseUnixRights(&cm)
		if err != nil {
			continue
		}
		for _, fd := range f {
			unix.CloseOnExec(fd)
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}

// Harden marks this process non-dumpable, so that no other process of the
// same user (a command among them) can read /proc/<pid>/environ or mem or
// attach to it, and no core file carries its secrets. It also blanks the
// values of the variables secret names in the environment block the
// kernel shows as /proc/<pid>/environ (Go keeps its own copy, so Getenv
// is unaffected): root, even without CAP_SYS_PTRACE, can still read that
// file of a non-dumpable root process. Call it after Start.
func Harden(secret func(name string) bool) error {
	var errs []error
	// Blank first: a non-dumpable process of an ordinary user can no longer
	// open its own /proc/self/mem.
	if secret != nil {
		if err := blankEnviron(secret); err != nil {
			errs = append(errs, fmt.Errorf("blank secrets in /proc/self/environ: %w", err))
		}
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		errs = append(errs, fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err))
	}
	return errors.Join(errs...)
}

// blankEnviron overwrites, in place, the values of secret variables in the
// process's initial environment block (env_start..env_end in
// /proc/self/stat) with NUL bytes.
func blankEnviron(secret func(string) bool) error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// Fields after the command name (which may hold spaces); env_start and
	// env_end are the third and second last (before exit_code).
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 50 {
		return errors.New("short /proc/self/stat")
	}
	var start, end int64
	if _, err := fmt.Sscan(f[len(f)-3], &start); err != nil {
		return err
	}
	if _, err := fmt.Sscan(f[len(f)-2], &end); err != nil {
		return err
	}
	if end <= start || end-start > 1<<22 {
		return fmt.Errorf("odd environment block %d..%d", start, end)
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, start); err != nil {
		return err
	}
	changed := false
	off := 0
	for _, kv := range strings.Split(string(block), "\x00") {
		name, val, ok := strings.Cut(kv, "=")
		if ok && val != "" && secret(name) {
			v := off + len(name) + 1
			for j := v; j < v+len(val); j++ {
				block[j] = 0
			}
			changed = true
		}
		off += len(kv) + 1
	}
	if !changed {
		return nil
	}
	_, err = mem.WriteAt(block, start)
	return err
}

// IsHelper reports whether args (os.Args) ask for a helper.
func IsHelper(args []string) bool { return len(args) > 1 && args[1] == helperArg }

// configFD is the helper's descriptor that holds its helperConfig.
const configFD = 4

// sealedFile returns a memfd holding b, sealed against any change.
func sealedFile(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd: %w", err)
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK)
	return f, nil
}

// readConfig reads the helper config from configFD and closes it; used
// by Main.
func readConfig() (helperConfig, error) {
	var hc helperConfig
	f := os.NewFile(configFD, "config")
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<24))
	if err != nil {
		return hc, fmt.Errorf("helper config: %w", err)
	}
	if err := json.Unmarshal(b, &hc); err != nil {
		return hc, fmt.Errorf("helper config: %w", err)
	}
	for _, p := range append(append([]string(nil), hc.Hide...), hc.Workspaces...) {
		if !strings.HasPrefix(p, "/") {
			return hc, fmt.Errorf("helper config: %q is not absolute", p)
		}
	}
	return hc, nil
}
