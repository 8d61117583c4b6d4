package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Mode is the tier a command runs with, from the gate's verdict: ReadOnly
// for a pass, Approved for a confirm a human approved. Here it says which
// helper runs a command; agentcore/fleet takes the same Mode to pick a
// remote host's identity (read_only or privileged). Its String is what the
// helpers report (Info.Mode).
type Mode int

const (
	// ReadOnly is for commands the gate passed: nothing on the host can be
	// written.
	ReadOnly Mode = iota
	// Approved is for commands a human approved: the host is writable, the
	// bot's secrets and state are not visible.
	Approved
)

func (m Mode) String() string {
	if m == Approved {
		return "approved"
	}
	return "read-only"
}

// ErrUnavailable is returned (wrapped) when a command cannot be started
// because the sandbox is not running.
var ErrUnavailable = errors.New("sandbox unavailable")

// Config configures Start.
type Config struct {
	// Hide are paths every command must see as empty: the state dir, the
	// config file, token and key files. Missing paths are skipped.
	Hide []string
	// Workspaces are the folders commands run in; those below /tmp or
	// /var/tmp are bound read-only into the private tmp of read-only
	// commands so they stay visible.
	Workspaces []string
	// Exe is the binary to re-execute; "" means this process's executable.
	// It must call Main early (cmd/thinbot's main does; tests use TestMain).
	Exe string
	// Limits bound every command of both modes; the zero value means the
	// defaults documented on each field.
	Limits Limits
	// Network is what read-only commands may reach.
	Network Network
	// ReadOnlyUser is the user read-only commands of a root daemon run as;
	// "" means thinbot-ro where that user exists, else nobody. An ordinary
	// daemon's commands run as the daemon's own user.
	ReadOnlyUser string
	// ReadOnlyGroups are supplementary groups of ReadOnlyUser; nil means
	// adm and systemd-journal where they exist, so that logs stay
	// readable.
	ReadOnlyGroups []string
	// Cgroup says whether each command gets a cgroup of its own (see
	// Limits): "" or "auto" means v2 where the daemon's own group is
	// delegated to it (marked by systemd's Delegate=yes, or owned by a
	// daemon that is not root: writable to root is not enough), else v1 where the memory, pids and cpu hierarchies
	// are writable (root), else rlimits only, with the reason in
	// Info.LimitsBy; "v1" or "v2" requires that version (Start fails
	// without it, or when the kernel refuses a limit written to a
	// group); "off" means rlimits only. A required version whose
	// hierarchy lacks controllers still starts, with groups for kill and
	// clean-up only, and Info.NotInForce names the limits it leaves out
	// (sandbox check says them, the daemon warns at start): refusing would
	// leave every command needing an approval for want of limits the
	// rlimits partly cover, while the groups still guarantee that nothing
	// outlives a command.
	Cgroup string
	// NoApproved starts the read-only helper alone, for a process that
	// never runs an approved command (thinbot sandbox exec, a fleet's
	// read-only forced command): no helper with the host writable runs
	// for nothing. Run in Approved mode then fails with ErrUnavailable.
	NoApproved bool

	// cgroups is where command groups go, found by Start.
	cgroups *cgroupPlan
	// procSelf, when set, is where Start reads the daemon's cgroup and
	// mountinfo files instead of /proc/self: a test's view of a layout.
	procSelf string
}

// Limits bound each command. Memory, Processes, CPU and FileSize are
// rlimits, set on the command between its exec and its first instruction
// and inherited by everything it starts: per process, except the process
// count, which is per user (so a root daemon's read-only commands run as a
// user of their own; root is exempt). MemoryTotal, ProcessesTotal and CPUs
// bind the command's processes together, through a cgroup of its own,
// where the daemon may create cgroups (Config.Cgroup); whatever is left in
// that group is killed when the command ends, so nothing the command
// started outlives it. Info.LimitsBy says which are in force.
type Limits struct {
	// Memory is the data (heap and private writable mappings) one process
	// may use, RLIMIT_DATA; 0 means 512 MiB, -1 no limit.
	Memory int64 `json:"memory"`
	// Processes is how many processes and threads the command's user may
	// have in the helper's user namespace, RLIMIT_NPROC; 0 means 256, -1
	// no limit. Root (approved commands of a root daemon) is exempt.
	Processes int64 `json:"processes"`
	// CPU is the CPU time one process may use, RLIMIT_CPU; 0 means 60s,
	// -1 no limit. The wall-clock limit is the caller's context.
	CPU time.Duration `json:"cpu"`
	// FileSize is the largest file a command may write, RLIMIT_FSIZE; 0
	// means 1 GiB, -1 no limit.
	FileSize int64 `json:"file_size"`
	// Tmp is the size of a read-only command's private /tmp, /var/tmp and
	// /dev/shm each; 0 means 64 MiB.
	Tmp int64 `json:"tmp"`
	// MemoryTotal is the memory (and swap) all the command's processes
	// together may use, its cgroup's memory.max (v2) or
	// memory.limit_in_bytes and memory.memsw.limit_in_bytes (v1); at the
	// limit the kernel kills one of them and the Result says so. 0 means
	// 1 GiB, -1 no limit.
	MemoryTotal int64 `json:"memory_total"`
	// ProcessesTotal is how many processes and threads the command may
	// have at once, all together, its cgroup's pids.max (root is not
	// exempt); a fork beyond it fails. 0 means 256, -1 no limit.
	ProcessesTotal int64 `json:"processes_total"`
	// CPUs is the share of one CPU the command's processes together may
	// use (cpu.max, or cfs_quota_us on v1): 1 is one CPU's time, 0.5 half
	// of one. 0 means 1, -1 no limit. CPU above is CPU time, per process.
	CPUs float64 `json:"cpus"`
}

// WithDefaults returns l with its zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	if l.Memory == 0 {
		l.Memory = 512 << 20
	}
	if l.Processes == 0 {
		l.Processes = 256
	}
	if l.CPU == 0 {
		l.CPU = 60 * time.Second
	}
	if l.FileSize == 0 {
		l.FileSize = 1 << 30
	}
	if l.Tmp <= 0 {
		l.Tmp = 64 << 20
	}
	if l.MemoryTotal == 0 {
		l.MemoryTotal = 1 << 30
	}
	if l.ProcessesTotal == 0 {
		l.ProcessesTotal = 256
	}
	if l.CPUs == 0 {
		l.CPUs = 1
	}
	return l
}

// Network says what read-only commands may reach. Approved commands reach
// everything.
type Network struct {
	// ConnectTCP are the TCP ports read-only commands may connect to, on
	// any host: Landlock filters by port only, not by address. Every other
	// TCP connect, and every TCP bind, is refused.
	ConnectTCP []uint16 `json:"connect_tcp,omitempty"`
	// UDP lets read-only commands open UDP, ICMP and raw inet sockets (DNS
	// lookups, dig, ping). Off by default: Landlock cannot filter UDP on
	// most kernels, so a seccomp filter refuses every inet socket that is
	// not TCP, and a command cannot send data out over DNS.
	UDP bool `json:"udp,omitempty"`
	// Sockets are host control sockets left reachable (for example
	// /run/docker.sock for docker ps); every control socket thinbot knows
	// of (docker, containerd, podman, cri-o, kubelet, systemd, D-Bus) not
	// listed is covered in read-only commands.
	Sockets []string `json:"sockets,omitempty"`
	// Cover are more unix sockets to cover for read-only commands (a
	// daemon's own control socket), as the built-in ones are.
	Cover []string `json:"cover,omitempty"`
}

// controlSockets are the unix sockets of host daemons that read-only
// commands cannot reach unless Network.Sockets lists them. A root daemon's
// read-only commands run as an unprivileged user, to whom the system bus
// answers only what any user may ask (systemctl status), so it stays
// reachable there; an ordinary daemon's commands run as the daemon's own
// user, whom polkit may trust to manage units, so it is covered.
func controlSockets() []string {
	return []string{
		"/run/docker.sock",
		"/var/run/docker.sock",
		"/run/containerd/containerd.sock",
		"/run/containerd/containerd.sock.ttrpc",
		"/run/podman/podman.sock",
		"/run/crio/crio.sock",
		"/run/k3s/containerd/containerd.sock",
		"/var/lib/kubelet/pod-resources/kubelet.sock",
		"/run/systemd/private",
		"/run/systemd/journal/socket",
		"/run/systemd/journal/stdout",
		"/run/systemd/notify",
		"/run/snapd.socket",
		"/run/dbus/system_bus_socket",
		"/var/run/dbus/system_bus_socket",
	}
}

// Info is what a running helper reported about its set-up.
type Info struct {
	Mode        string `json:"mode"`
	UserNS      bool   `json:"userns"`
	LandlockABI int    `json:"landlock_abi"`
	Root        bool   `json:"root"`
	// Hidden are the paths actually covered.
	Hidden []string `json:"hidden,omitempty"`
	// Limits are the limits asked for, and LimitsBy which are in force
	// and how: "cgroup v1 (memory, pids, cpu) per command; rlimits per
	// process as well", or "rlimit per process, no cgroup: why".
	Limits   Limits `json:"limits"`
	LimitsBy string `json:"limits_by"`
	// NotInForce are the group limits asked for (by their config names,
	// memory_total_mib, processes_total, cpus) that no cgroup puts in
	// force: no group at all, or a hierarchy without the controller.
	NotInForce []string `json:"not_in_force,omitempty"`
	// Cgroups are where this helper's command groups appear (glob
	// patterns), none without cgroups.
	Cgroups []string `json:"cgroups,omitempty"`
	// User is who commands run as ("nobody (65534)"), "" for the daemon's
	// own user.
	User string `json:"user,omitempty"`
	// Net says what read-only commands may reach over the network.
	Net string `json:"net,omitempty"`
	// Covered are the control sockets covered for read-only commands.
	Covered []string `json:"covered,omitempty"`
}

// Sandbox runs commands through the two helpers. It is safe for concurrent
// use.
type Sandbox struct {
	cfg Config

	mu     sync.Mutex // guards the helpers and closed
	ro, rw *helper
	closed bool
	// restarts counts helpers started again after one died.
	restarts int
}

// Start starts both helpers (the read-only one alone with
// Config.NoApproved) and waits until they have set up their
// namespaces. An error means the kernel (or the unit's hardening) refused
// something; the caller must then fail closed. Start must run before the
// process marks itself non-dumpable (see Harden).
func Start(ctx context.Context, cfg Config) (*Sandbox, error) {
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: find own executable: %w", err)
		}
		cfg.Exe = exe
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	// Before the helpers start: on v2 this moves the daemon into a leaf
	// group, and the helpers start there.
	proc := cfg.procSelf
	if proc == "" {
		proc = "/proc/self"
	}
	plan, err := planCgroupsIn(proc, cfg.Cgroup, cfg.Limits)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cfg.cgroups = plan
	plan.sweep(0)
	var (
		wg             sync.WaitGroup
		ro, rw         *helper
		roErr, rwErr   error
		startCtx, stop = context.WithTimeout(ctx, 15*time.Second)
	)
	defer stop()
	wg.Go(func() { ro, roErr = startHelper(startCtx, cfg, ReadOnly) })
	if !cfg.NoApproved {
		wg.Go(func() { rw, rwErr = startHelper(startCtx, cfg, Approved) })
	}
	wg.Wait()
	if err := errors.Join(roErr, rwErr); err != nil {
		if ro != nil {
			ro.close()
		}
		if rw != nil {
			rw.close()
		}
		return nil, err
	}
	return &Sandbox{cfg: cfg, ro: ro, rw: rw}, nil
}

// Info returns what the helper of mode m reported at start (the zero Info
// for a helper Config.NoApproved did not start).
func (s *Sandbox) Info(m Mode) Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h := s.helperLocked(m); h != nil {
		return h.info
	}
	return Info{}
}

// Err returns why the sandbox stopped working, or nil. A helper that died
// is started again by the next command of its mode, so Err reports only a
// helper that died and could not be started again, or a closed sandbox.
func (s *Sandbox) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	for _, h := range []*helper{s.ro, s.rw} {
		if h == nil {
			continue
		}
		if err := h.failed(); err != nil && h.restartErr != nil {
			return fmt.Errorf("%w (started again: %v)", err, h.restartErr)
		}
	}
	return nil
}

// Restarts reports how many helpers were started again after one died.
func (s *Sandbox) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// errClosed is Err's answer after Close: no command can run any more.
var errClosed = errors.New("sandbox closed")

// Close stops both helpers; their running commands are killed.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	ro, rw := s.ro, s.rw
	s.mu.Unlock()
	hs := []*helper{ro}
	if rw != nil { // nil with Config.NoApproved
		hs = append(hs, rw)
	}
	for _, h := range hs {
		h.close()
	}
	for _, h := range hs {
		s.cfg.cgroups.sweep(h.proc.Pid)
	}
	return nil
}

func (s *Sandbox) helperLocked(m Mode) *helper {
	if m == Approved {
		return s.rw
	}
	return s.ro
}

// helper returns the running helper of mode m, starting a new one when the
// last one died: one dead helper fails the commands it was running, never
// every later one. It fails only when the new helper cannot start.
func (s *Sandbox) helper(ctx context.Context, m Mode) (*helper, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.helperLocked(m)
	if h == nil {
		return nil, fmt.Errorf("%w: no %s helper (this sandbox runs read-only commands only)", ErrUnavailable, m)
	}
	if h.failed() == nil || s.closed {
		return h, nil
	}
	<-h.done
	_ = h.conn.Close()
	_ = h.proc.Kill()
	_, _ = h.proc.Wait()
	// What its commands left, in their groups, dies with it.
	s.cfg.cgroups.sweep(h.proc.Pid)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	nh, err := restartHelper(ctx, s.cfg, m)
	if err != nil {
		h.restartErr = err
		return nil, fmt.Errorf("%w: the %s helper died and could not be started again: %v", ErrUnavailable, m, err)
	}
	s.restarts++
	if m == Approved {
		s.rw = nh
	} else {
		s.ro = nh
	}
	return nh, nil
}

// Cmd is one command to start: Args[0] must be an absolute path.
type Cmd struct {
	Args []string
	Dir  string
	Env  []string
	// Stdin, when set, is the command's standard input (the helper gets
	// a duplicate; the caller keeps and closes its own); nil means
	// /dev/null. A server that speaks over stdio (an MCP server) reads
	// its requests from it.
	Stdin *os.File
	// Stderr, when set, takes the command's standard error apart from
	// what Run writes to out (the caller keeps and closes it); nil sends
	// it to out with standard output.
	Stderr *os.File
}

// Result is how a command ended.
type Result struct {
	ExitCode int // -1 when killed by a signal
	Signal   int
	// Killed reports that ctx ended the command and its group was killed.
	Killed bool
	// Limit says which limit of the command's cgroup it hit, "" for none:
	// "killed: memory limit 1 GiB", "process limit 256 reached: a fork
	// failed", or both joined by "; ".
	Limit string
}

// Run starts c in mode m with stdout and stderr written to out (which must
// be safe to write from one goroutine), waits for it and returns how it
// ended. When ctx is done, the command's whole process group is killed. The
// error is non-nil only when the command could not be started or the helper
// died; a non-zero exit is in Result.
func (s *Sandbox) Run(ctx context.Context, m Mode, c Cmd, out io.Writer) (Result, error) {
	h, err := s.helper(ctx, m)
	if err != nil {
		return Result{}, err
	}
	res, err := h.run(ctx, c, out)
	if err != nil && h.failed() != nil {
		// The helper is gone: what its commands left in their groups
		// dies now, not when a later command of this mode starts a new
		// helper, which may be hours later (until then it would run on
		// past its time limit).
		s.cfg.cgroups.sweep(h.proc.Pid)
	}
	return res, err
}

// message is one datagram on the helper's socket, in both directions.
type message struct {
	ID   uint64   `json:"id,omitempty"`
	Op   string   `json:"op"` // run, kill | ready, started, exited, error
	Args []string `json:"args,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	Env  []string `json:"env,omitempty"`
	Pid  int      `json:"pid,omitempty"`
	Code int      `json:"code,omitempty"`
	Sig  int      `json:"sig,omitempty"`
	Err  string   `json:"err,omitempty"`
	Info *Info    `json:"info,omitempty"`
	// Limit is Result.Limit, on exited.
	Limit string `json:"limit,omitempty"`
	// Stop, on error: the helper exits after this reply (it could not
	// go on safely), and the next command starts a new one.
	Stop bool `json:"stop,omitempty"`
	// Stdin and Stderr, on run, say that descriptors for them follow the
	// output's, in that order (Cmd.Stdin, Cmd.Stderr).
	Stdin  bool `json:"stdin,omitempty"`
	Stderr bool `json:"stderr,omitempty"`
	// lost marks the error reply readLoop gives a command whose helper
	// went away (never on the wire): a reply the helper sent itself, even
	// one read just before the helper exited, keeps its own error.
	lost bool
}

// ioFiles is how many descriptors a run message m carries: the output's,
// and one each for stdin and stderr when it says so.
func ioFiles(m message) int {
	n := 1
	if m.Stdin {
		n++
	}
	if m.Stderr {
		n++
	}
	return n
}

// maxMessage bounds one datagram; a command line plus environment beyond it
// is refused rather than cut.
const maxMessage = 256 << 10

func send(conn *net.UnixConn, m message, fds ...int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > maxMessage {
		return fmt.Errorf("command and environment too large (%d bytes, at most %d)", len(b), maxMessage)
	}
	var oob []byte
	if len(fds) > 0 {
		oob = rights(fds...)
	}
	_, _, err = conn.WriteMsgUnix(b, oob, nil)
	return err
}

// newRecvBuf returns a buffer for recv; a reader loop keeps one for all its
// messages instead of allocating maxMessage bytes for each.
func newRecvBuf() []byte { return make([]byte, maxMessage+64) }

// recv reads one message into buf (from newRecvBuf), which it may reuse
// once recv returns: the message holds no references into it.
func recv(conn *net.UnixConn, buf []byte) (message, []int, error) {
	buf, oob := buf[:maxMessage], buf[maxMessage:]
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return message{}, nil, err
	}
	if n == 0 {
		return message{}, nil, io.EOF
	}
	fds, err := parseRights(oob[:oobn])
	if err != nil {
		return message{}, nil, err
	}
	var m message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		closeAll(fds)
		return message{}, nil, fmt.Errorf("malformed helper message: %w", err)
	}
	return m, fds, nil
}

// helper is the daemon's side of one helper process.
type helper struct {
	mode Mode
	conn *net.UnixConn
	proc *os.Process
	info Info
	wmu  sync.Mutex // one writer at a time

	mu      sync.Mutex
	nextID  uint64
	waiting map[uint64]chan message
	err     error // set once the helper is gone
	done    chan struct{}
	// restartErr is why a new helper could not replace this one (guarded
	// by the Sandbox's mu).
	restartErr error
	// bufs are copy buffers for commands' output (*[]byte of copyBuf
	// bytes): one each per command was a sixth of what a busy daemon
	// allocated.
	bufs sync.Pool
}

// copyBuf is the size of the buffer a command's output is copied through.
const copyBuf = 32 << 10

func newHelper(m Mode, conn *net.UnixConn, proc *os.Process) *helper {
	h := &helper{mode: m, conn: conn, proc: proc, waiting: map[uint64]chan message{}, done: make(chan struct{})}
	h.bufs.New = func() any { b := make([]byte, copyBuf); return &b }
	return h
}

func (h *helper) failed() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// readLoop hands each reply to the command waiting for it; when the helper
// goes away every waiting command gets an error reply.
func (h *helper) readLoop() {
	defer close(h.done)
	buf := newRecvBuf()
	for {
		m, fds, err := recv(h.conn, buf)
		closeAll(fds)
		if err != nil {
			h.mu.Lock()
			if h.err == nil {
				h.err = fmt.Errorf("%w: %s helper stopped: %v", ErrUnavailable, h.mode, err)
				if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "use of closed") {
					h.err = fmt.Errorf("%w: %s helper stopped", ErrUnavailable, h.mode)
				}
			}
			for id, ch := range h.waiting {
				ch <- message{ID: id, Op: "error", Err: h.err.Error(), lost: true}
				delete(h.waiting, id)
			}
			h.mu.Unlock()
			return
		}
		h.mu.Lock()
		ch := h.waiting[m.ID]
		if m.Op == "exited" || m.Op == "error" {
			delete(h.waiting, m.ID)
		}
		h.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

func (h *helper) close() {
	h.mu.Lock()
	if h.err == nil {
		h.err = fmt.Errorf("%w: closed", ErrUnavailable)
	}
	h.mu.Unlock()
	_ = h.conn.Close()
	// The helper kills its commands and exits when its socket closes.
	exited := make(chan struct{})
	go func() { _, _ = h.proc.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(3 * time.Second):
		_ = h.proc.Kill()
		<-exited
	}
	<-h.done
}

func (h *helper) run(ctx context.Context, c Cmd, out io.Writer) (Result, error) {
	if len(c.Args) == 0 || !strings.HasPrefix(c.Args[0], "/") {
		return Result{}, errors.New("sandbox: the program must be an absolute path")
	}
	r, w, err := outputPipe()
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: pipe: %w", err)
	}
	defer r.Close()
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		closeAll([]int{w})
		return Result{}, h.err
	}
	h.nextID++
	id := h.nextID
	replies := make(chan message, 4)
	h.waiting[id] = replies
	h.mu.Unlock()

	fds := []int{w}
	if c.Stdin != nil {
		fds = append(fds, int(c.Stdin.Fd()))
	}
	if c.Stderr != nil {
		fds = append(fds, int(c.Stderr.Fd()))
	}
	h.wmu.Lock()
	err = send(h.conn, message{ID: id, Op: "run", Args: c.Args, Dir: c.Dir, Env: c.Env, Stdin: c.Stdin != nil, Stderr: c.Stderr != nil}, fds...)
	h.wmu.Unlock()
	runtime.KeepAlive(c.Stdin)
	runtime.KeepAlive(c.Stderr)
	closeAll([]int{w})
	if err != nil {
		h.mu.Lock()
		delete(h.waiting, id)
		h.mu.Unlock()
		return Result{}, fmt.Errorf("sandbox: send to %s helper: %w", h.mode, err)
	}

	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := h.bufs.Get().(*[]byte)
		// Without WriteTo, which would allocate a buffer of its own.
		_, _ = io.CopyBuffer(out, struct{ io.Reader }{r}, *buf)
		h.bufs.Put(buf)
	}()

	var res Result
	killed := false
	pid := 0
	// The daemon kills the group itself: it is outside every Landlock
	// domain, while the helper's threads may each hold a domain of their
	// own (Landlock ABI < 8 enforces thread by thread), and a domain that
	// scopes signals cannot signal a sibling's commands.
	kill := func() {
		if pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	for {
		var m message
		select {
		case m = <-replies:
		case <-ctx.Done():
			if !killed {
				killed = true
				kill()
				h.wmu.Lock()
				_ = send(h.conn, message{ID: id, Op: "kill"})
				h.wmu.Unlock()
			}
			m = <-replies
		}
		switch m.Op {
		case "started":
			pid = m.Pid
			if killed {
				kill()
			}
			continue
		case "error":
			// Unblock the copy: nothing more will be written.
			r.Close()
			<-copied
			if m.lost {
				return Result{}, fmt.Errorf("sandbox: %w; the command was cut off with it (the next command starts a new helper)", h.failed())
			}
			if m.Stop {
				// Wait until it is gone, so that the next command
				// starts a new helper rather than finding this one
				// still there and failing too.
				select {
				case <-h.done:
				case <-time.After(5 * time.Second):
					_ = h.proc.Kill()
					<-h.done
				}
				return Result{}, fmt.Errorf("sandbox: %s; the %s helper stopped (the next command starts a new one)", m.Err, h.mode)
			}
			return Result{}, fmt.Errorf("sandbox: %s", m.Err)
		case "exited":
			// Whatever the command left in its group dies with it.
			kill()
			res = Result{ExitCode: m.Code, Signal: m.Sig, Killed: killed || ctx.Err() != nil, Limit: m.Limit}
		default:
			continue
		}
		break
	}
	// Background children that keep the pipe open must not hold us: the
	// helper killed the group, so this is only a safety net.
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
		r.Close()
		<-copied
	}
	return res, nil
}
