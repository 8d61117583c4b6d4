package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// accessKey names the identity a mode picks by its key in the fleet
// configuration: sandbox.ReadOnly (pass verdicts) the group's read_only
// identity, sandbox.Approved (approved commands) its privileged one. The
// mode is the sandbox's: the same choice a local command makes between
// its helpers.
func accessKey(m sandbox.Mode) string {
	if m == sandbox.Approved {
		return "privileged"
	}
	return "read_only"
}

// Identity is who ssh logs in as: a user and, optionally, a private key
// file (then only that key is offered: IdentitiesOnly=yes). An empty User
// falls back to the host's ansible_user, then to ssh_config.
type Identity struct {
	User string `json:"user,omitempty" yaml:"user"`
	Key  string `json:"key,omitempty" yaml:"key"`
}

func (id Identity) empty() bool { return id.User == "" && id.Key == "" }

// Access gives the hosts of a group their two identities. The first Access
// (in configuration order) whose group holds a host applies to it; group
// "all" holds every host.
type Access struct {
	Group      string   `json:"group"`
	ReadOnly   Identity `json:"read_only"`
	Privileged Identity `json:"privileged"`
}

// Config configures a Fleet. Inventory is required.
type Config struct {
	Inventory *Inventory
	Access    []Access
	// SSH is the ssh client; "" means "ssh" found in Env's PATH or /usr/bin.
	SSH string
	// SSHConfig is passed as -F; "" lets ssh read ~/.ssh/config and
	// /etc/ssh/ssh_config as usual.
	SSHConfig string
	// KnownHosts is UserKnownHostsFile; "" keeps ssh's default. Host keys
	// are always checked strictly (StrictHostKeyChecking=yes).
	KnownHosts string
	// Concurrency is how many hosts run at once; 0 means 10.
	Concurrency int
	// Timeout per host, connection included; 0 means the caller's
	// (Limits.Timeout: agentcore gives local commands' timeout), then 120s.
	Timeout time.Duration
	// ConnectTimeout is ssh's ConnectTimeout; 0 means 10s.
	ConnectTimeout time.Duration
	// ControlPersist is how long an idle ControlMaster connection stays;
	// 0 means 60s; negative disables multiplexing.
	ControlPersist time.Duration
	// ControlDir holds the ControlMaster sockets; "" means a private
	// directory made by New and removed by Close. A given directory must
	// be the caller's alone (mode 0700): whoever can reach a socket runs
	// commands over its authenticated connection, past the gate.
	ControlDir string
	// KeepReadOnly leaves the read-only identities' masters in ControlDir
	// running at Close (until ControlPersist expires), so that the next
	// process with the same ControlDir starts warm. The privileged ones
	// are always ended at Close: an idle privileged master would be a
	// write channel no approval guards.
	KeepReadOnly bool
	// Env is the ssh client's whole environment (the caller allowlists it;
	// SSH_AUTH_SOCK belongs in it when an agent holds the keys).
	Env []string
	// CaptureLimit is how many bytes of each host's output are kept (head
	// and tail); 0 means the caller's (Limits.CaptureLimit), then 256 KiB.
	// Size and SHA-256 cover everything.
	CaptureLimit int
}

// Fleet runs commands on inventory hosts over the system's OpenSSH client.
type Fleet struct {
	cfg        Config
	ownControl bool
	mu         sync.Mutex
	closed     bool
}

// New checks cfg and returns a Fleet. Close it to end its ControlMaster
// connections.
func New(cfg Config) (*Fleet, error) {
	if cfg.Inventory == nil {
		return nil, errors.New("fleet: no inventory")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 10
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.ControlPersist == 0 {
		cfg.ControlPersist = 60 * time.Second
	}
	if cfg.SSH == "" {
		cfg.SSH = "/usr/bin/ssh"
		if p, err := exec.LookPath("ssh"); err == nil {
			cfg.SSH = p
		}
	}
	for _, a := range cfg.Access {
		if _, ok := cfg.Inventory.members[a.Group]; !ok && a.Group != "all" && a.Group != "ungrouped" {
			return nil, fmt.Errorf("fleet: access for group %q, which the inventory does not have", a.Group)
		}
	}
	f := &Fleet{cfg: cfg}
	// sun_path holds 107 bytes: the dir, "/", controlName (55) and ssh's
	// temporary suffix (17).
	if cfg.ControlPersist > 0 && len(cfg.ControlDir) > 107-1-55-17 {
		return nil, fmt.Errorf("fleet: control dir %s: longer than %d bytes, too long for its unix sockets", cfg.ControlDir, 107-1-55-17)
	}
	if cfg.ControlPersist > 0 && cfg.ControlDir == "" {
		// Short: a unix socket path has at most 107 bytes.
		d, err := os.MkdirTemp("", "tbssh")
		if err != nil {
			return nil, fmt.Errorf("fleet: control dir: %w", err)
		}
		f.cfg.ControlDir, f.ownControl = d, true
	}
	return f, nil
}

// Inventory returns the fleet's inventory.
func (f *Fleet) Inventory() *Inventory { return f.cfg.Inventory }

// Concurrency and Timeout return the effective limits.
func (f *Fleet) Concurrency() int { return f.cfg.Concurrency }

// Timeout returns the configured per-host timeout; 0 means the caller's
// (for agentcore: the local commands' timeout).
func (f *Fleet) Timeout() time.Duration { return f.cfg.Timeout }

// Identity returns the identity a host uses in mode m, and false when no
// Access gives it one (then nothing runs on it: fail closed).
func (f *Fleet) Identity(h Host, m sandbox.Mode) (Identity, bool) {
	for _, a := range f.cfg.Access {
		if a.Group == "all" || slices.Contains(h.Groups, a.Group) || a.Group == "ungrouped" && len(h.Groups) == 0 {
			id := a.ReadOnly
			if m == sandbox.Approved {
				id = a.Privileged
			}
			if id.empty() {
				return Identity{}, false
			}
			if id.User == "" {
				id.User = h.User
			}
			return id, true
		}
	}
	return Identity{}, false
}

// Logins returns the distinct logins hosts use in mode m, in order; "" for
// a login left to ssh_config. Hosts without an identity add nothing.
func (f *Fleet) Logins(hosts []Host, m sandbox.Mode) []string {
	var out []string
	for _, h := range hosts {
		if id, ok := f.Identity(h, m); ok && !slices.Contains(out, id.User) {
			out = append(out, id.User)
		}
	}
	return out
}

// Close ends the ControlMaster connections and removes the private
// control directory.
func (f *Fleet) Close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.cfg.ControlPersist < 0 || f.cfg.ControlDir == "" {
		return nil
	}
	f.closed = true
	ents, _ := os.ReadDir(f.cfg.ControlDir)
	// Concurrently: one at a time, 20 masters took a second or two of
	// every terminal run's exit.
	sem := make(chan struct{}, f.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, e := range ents {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		if f.cfg.KeepReadOnly && strings.HasPrefix(e.Name(), "r-") {
			continue
		}
		sock := filepath.Join(f.cfg.ControlDir, e.Name())
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, f.cfg.SSH, "-o", "ControlPath="+sock, "-O", "exit", "--", "thinbot-fleet")
			cmd.Env = f.cfg.Env
			_ = cmd.Run()
		}()
	}
	wg.Wait()
	if f.ownControl {
		return os.RemoveAll(f.cfg.ControlDir)
	}
	return nil
}

// Result is one host's outcome.
type Result struct {
	Host string `json:"host"`
	User string `json:"user,omitempty"`
	// ExitCode is the remote command's exit code; -1 when it has none
	// (unreachable, timed out, stopped, not started).
	ExitCode int `json:"exit_code"`
	// Output is what the command wrote, stdout and stderr as they came,
	// head and tail kept.
	Output []byte `json:"-"`
	// Size and SHA256 cover all of the output.
	Size   int64  `json:"output_size"`
	SHA256 string `json:"output_sha256"`
	// Err says why the host did not run the command: ssh's own message
	// (connection refused, host key changed, ...) or a local refusal.
	// Empty when the command ran, and for a host not started.
	Err       string        `json:"error,omitempty"`
	Duration  time.Duration `json:"-"`
	TimedOut  bool          `json:"timed_out,omitempty"`
	Cancelled bool          `json:"cancelled,omitempty"`
	// NotStarted: the run was stopped before this host's turn came;
	// nothing was tried there (Cancelled is set too).
	NotStarted bool `json:"not_started,omitempty"`
}

// OK reports whether the command ran and exited 0.
func (r Result) OK() bool {
	return r.Err == "" && !r.TimedOut && !r.Cancelled && r.ExitCode == 0
}

// Unreachable reports whether the host was tried and did not run the
// command.
func (r Result) Unreachable() bool { return r.Err != "" }

// Limits are a run's limits, which the caller gives to have remote
// commands bounded like its local ones; the Config's own values, when
// set, win. Zero fields mean the Config's, then the defaults.
type Limits struct {
	// Timeout per host, connection included.
	Timeout time.Duration
	// CaptureLimit is how many bytes of each host's output are kept.
	CaptureLimit int
}

// Run runs command on every host (at most Concurrency at once, started in
// the order given, each within the timeout) with the identity of mode m,
// and returns one Result per host in that order. The login shell of the
// remote user runs the command (see RemoteCommand), with an empty stdin
// and no terminal. When ctx ends, every ssh client still running is killed
// with its process group, which closes the session: the remote wrapper
// then hangs the command up (SIGHUP to its process group); hosts not
// started yet are marked NotStarted.
func (f *Fleet) Run(ctx context.Context, hosts []Host, m sandbox.Mode, command string, lim Limits) []Result {
	if f.cfg.Timeout > 0 || lim.Timeout <= 0 {
		lim.Timeout = f.cfg.Timeout
	}
	if lim.Timeout <= 0 {
		lim.Timeout = 120 * time.Second
	}
	if f.cfg.CaptureLimit > 0 || lim.CaptureLimit <= 0 {
		lim.CaptureLimit = f.cfg.CaptureLimit
	}
	if lim.CaptureLimit <= 0 {
		lim.CaptureLimit = 256 << 10
	}
	out := make([]Result, len(hosts))
	sem := make(chan struct{}, f.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, h := range hosts {
		// One loop takes the slots in inventory order (goroutines racing
		// for them started hosts in random order); a slot freed by a
		// stopped host may be taken after the stop, so ctx is checked
		// after each wait too.
		stopped := false
		select {
		case sem <- struct{}{}:
			if ctx.Err() != nil {
				<-sem
				stopped = true
			}
		case <-ctx.Done():
			stopped = true
		}
		if stopped {
			for j := i; j < len(hosts); j++ {
				out[j] = Result{Host: hosts[j].Name, ExitCode: -1, Cancelled: true, NotStarted: true}
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = f.runOne(ctx, h, m, command, lim)
		}()
	}
	wg.Wait()
	return out
}

// StartMarker is what the remote prelude writes on stderr before the
// command (a forced command that merges the streams must pass it on to
// stderr, as thinbot sandbox exec does): ssh's messages come before it, the command's after it. Without
// it, ssh's exit code 255 cannot tell "could not connect" from a command
// that exited 255, and ssh's stderr from the command's.
const StartMarker = "\x1ethinbot:start\x1e"

// RemoteCommand is the string ssh sends for command: a POSIX sh prelude,
// then the command as it was gated, from the next line on, so the login
// shell parses it as it would alone. The prelude gives the command an
// empty stdin (readers such as cat or grep end at once instead of waiting
// for the timeout), keeps the session's stdin for a watcher that sends
// SIGHUP to the command's process group when the session closes (what a
// terminal's hangup did: /stop and the timeout kill the ssh client, sshd
// closes the session, the remote command ends), sets the pagers to cat,
// and writes StartMarker on stderr.
func RemoteCommand(command string) string {
	// The watcher starts only when the session's stdin is a pipe or a
	// socket (sshd's): under a forced command that gives the shell
	// /dev/null (thinbot sandbox exec, which watches the session itself),
	// it would read EOF at once and hang the command up.
	return `exec 3<&0 </dev/null; if [ -p /dev/fd/3 ] || [ -S /dev/fd/3 ]; then { cat <&3 >/dev/null 2>&1; kill -s HUP 0; } >/dev/null 2>&1 & fi; exec 3<&-; ` +
		`export PAGER=cat GIT_PAGER=cat MANPAGER=cat SYSTEMD_PAGER= SYSTEMD_LESS=FRXMK; ` +
		`printf '\036thinbot:start\036' >&2` + "\n" + command
}

// controlName is the ControlMaster socket's name for one identity on one
// host: a hash of the mode, the host's address and port, the login and the
// key file, then ssh's own %C (local host, the host ssh resolved, port,
// user). Two identities never share a master, so a read-only command never
// runs over a connection the privileged key authenticated, nor an approved
// one through the read-only key's forced command: %C alone covers the
// login but not the key, and two identities may share a login.
func controlName(h Host, m sandbox.Mode, id Identity) string {
	key := id.Key
	if a, err := filepath.Abs(key); err == nil && key != "" {
		key = a
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{accessKey(m), h.Addr, strconv.Itoa(h.Port), id.User, key}, "\x00")))
	// "r-" or "w-" (Close keeps or ends masters by it), 12 hex digits, "-"
	// and %C (40): 55 bytes.
	prefix := "r-"
	if m == sandbox.Approved {
		prefix = "w-"
	}
	return prefix + hex.EncodeToString(sum[:6]) + "-%C"
}

// Args returns the ssh command line for one host in mode m with identity id
// (without the ssh binary).
func (f *Fleet) Args(h Host, m sandbox.Mode, id Identity, command string) []string {
	args := []string{
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UpdateHostKeys=no",
		"-o", "ForwardAgent=no",
		"-o", "ForwardX11=no",
		"-o", "ForwardX11Trusted=no",
		"-o", "PermitLocalCommand=no",
		"-o", "ClearAllForwardings=yes",
		"-o", "Tunnel=no",
		"-o", "EscapeChar=none",
		"-o", "LogLevel=ERROR",
		"-o", "ConnectTimeout=" + strconv.Itoa(max(1, int(f.cfg.ConnectTimeout/time.Second))),
	}
	// No terminal: a pager or a prompt would wait on one until the
	// timeout, and a terminal merges stderr into stdout and turns LF into
	// CRLF. RemoteCommand's watcher does what its hangup did.
	args = append(args, "-T")
	if f.cfg.SSHConfig != "" {
		args = append([]string{"-F", f.cfg.SSHConfig}, args...)
	}
	if f.cfg.KnownHosts != "" {
		args = append(args, "-o", "UserKnownHostsFile="+f.cfg.KnownHosts, "-o", "GlobalKnownHostsFile=/dev/null")
	}
	if f.cfg.ControlPersist > 0 {
		args = append(args, "-o", "ControlMaster=auto", "-o", "ControlPath="+filepath.Join(f.cfg.ControlDir, controlName(h, m, id)),
			"-o", "ControlPersist="+strconv.Itoa(max(1, int(f.cfg.ControlPersist/time.Second))))
	} else {
		args = append(args, "-o", "ControlMaster=no", "-o", "ControlPath=none")
	}
	if id.Key != "" {
		args = append(args, "-i", id.Key, "-o", "IdentitiesOnly=yes")
	}
	if id.User != "" {
		args = append(args, "-l", id.User)
	}
	if h.Port != 0 {
		args = append(args, "-p", strconv.Itoa(h.Port))
	}
	return append(args, "--", h.Addr, RemoteCommand(command))
}

func (f *Fleet) runOne(ctx context.Context, h Host, m sandbox.Mode, command string, lim Limits) Result {
	res := Result{Host: h.Name, ExitCode: -1}
	id, ok := f.Identity(h, m)
	if !ok {
		res.Err = fmt.Sprintf("no %s identity for this host in the fleet configuration; nothing was run", accessKey(m))
		return res
	}
	res.User = id.User
	// Fail closed: one identity for both modes is no privilege separation
	// (config check refuses every configuration where this can happen).
	if other, ok := f.Identity(h, 1-m); ok && sameIdentity(id, other) {
		res.Err = "the read-only and privileged identities are the same for this host (login " + id.User + "); nothing was run"
		return res
	}
	ctx2, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx2, f.cfg.SSH, f.Args(h, m, id, command)...)
	cmd.Env = f.cfg.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	// ssh's stdin is a pipe nobody writes to and that stays open until ssh
	// is gone: its end is the remote watcher's signal. (The command's own
	// stdin is /dev/null on the remote side.)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		res.Err = "start ssh: " + err.Error()
		return res
	}
	defer stdinW.Close()
	cmd.Stdin = stdinR
	out := &lockedCapture{c: NewCapture(lim.CaptureLimit)}
	stderr := &markerSplit{out: out}
	cmd.Stdout, cmd.Stderr = out, stderr
	start := time.Now()
	err = cmd.Start()
	stdinR.Close()
	if err != nil {
		res.Err = "start ssh: " + err.Error()
		return res
	}
	werr := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res.Duration = time.Since(start)
	started, pre := stderr.result()
	if !started && len(pre) > 0 && ctx2.Err() == nil && cmd.ProcessState.ExitCode() != 255 {
		// No marker but an exit code of the command's: something else ran
		// it (a forced command in authorized_keys); its stderr is output.
		out.Write(pre)
	}
	c := out.capture()
	res.Output, res.Size, res.SHA256 = c.Bytes(), c.Size(), c.SHA256()
	switch {
	case ctx.Err() != nil:
		res.Cancelled = true
		return res
	case ctx2.Err() != nil:
		res.TimedOut = true
		return res
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) && !errors.Is(werr, exec.ErrWaitDelay) {
		res.Err = "ssh: " + werr.Error()
		return res
	}
	res.ExitCode = cmd.ProcessState.ExitCode()
	// 255 is ssh's own failure, or a command that exits 255: the marker
	// tells which.
	if res.ExitCode == 255 && !started {
		res.Err = sshError(string(pre), f.cfg.KnownHosts)
		res.ExitCode = -1
	}
	return res
}

// lockedCapture is a Capture that ssh's stdout and stderr copiers write to
// at once.
type lockedCapture struct {
	mu sync.Mutex
	c  *Capture
}

func (l *lockedCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.Write(p)
}

func (l *lockedCapture) capture() *Capture {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c
}

// markerSplit takes ssh's stderr: what comes before StartMarker is ssh's
// (kept, up to 64 KiB), what comes after is the command's (to out).
type markerSplit struct {
	mu      sync.Mutex
	out     io.Writer
	pre     []byte
	started bool
}

func (w *markerSplit) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return w.out.Write(p)
	}
	w.pre = append(w.pre, p...)
	if i := bytes.Index(w.pre, []byte(StartMarker)); i >= 0 {
		w.started = true
		rest := w.pre[i+len(StartMarker):]
		w.pre = w.pre[:i]
		if len(rest) > 0 {
			w.out.Write(rest)
		}
	} else if len(w.pre) > 64<<10 {
		// Never a marker this late: keep the first 32 KiB and the last
		// bytes, where a split marker may lie.
		w.pre = append(w.pre[:32<<10], w.pre[len(w.pre)-len(StartMarker):]...)
	}
	return len(p), nil
}

func (w *markerSplit) result() (bool, []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started, w.pre
}

// sameIdentity reports whether a and b log in as the same login with the
// same key file.
func sameIdentity(a, b Identity) bool {
	if a.User != b.User {
		return false
	}
	ka, errA := filepath.Abs(a.Key)
	kb, errB := filepath.Abs(b.Key)
	if a.Key == "" || b.Key == "" || errA != nil || errB != nil {
		return a.Key == b.Key
	}
	return ka == kb
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r", ""), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// Capture keeps the first and last limit/2 bytes written, the total size
// and a hash of everything: a command's output, local or remote, held in
// bounded memory.
type Capture struct {
	head, tail []byte
	half       int
	n          int64
	sum        hash.Hash
}

// NewCapture returns a Capture that keeps about limit bytes.
func NewCapture(limit int) *Capture { return &Capture{half: limit / 2, sum: sha256.New()} }

// Size is how many bytes were written in all.
func (c *Capture) Size() int64 { return c.n }

// SHA256 is the hex SHA-256 of everything written.
func (c *Capture) SHA256() string { return hex.EncodeToString(c.sum.Sum(nil)) }

func (c *Capture) Write(p []byte) (int, error) {
	c.sum.Write(p)
	c.n += int64(len(p))
	q := p
	if room := c.half - len(c.head); room > 0 {
		k := min(room, len(q))
		c.head = append(c.head, q[:k]...)
		q = q[k:]
	}
	if len(q) > 0 {
		c.tail = append(c.tail, q...)
		if len(c.tail) > 2*c.half {
			c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.half:]...)
		}
	}
	return len(p), nil
}

// Bytes returns head + tail, with a marker where bytes were dropped.
func (c *Capture) Bytes() []byte {
	tail := c.tail
	if len(tail) > c.half {
		tail = tail[len(tail)-c.half:]
	}
	kept := int64(len(c.head) + len(tail))
	if kept == c.n {
		return append(append([]byte(nil), c.head...), tail...)
	}
	var b bytes.Buffer
	b.Write(c.head)
	fmt.Fprintf(&b, "\n[... %d bytes omitted ...]\n", c.n-kept)
	b.Write(tail)
	return b.Bytes()
}
