package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// denyNonTCPAllThreads installs, on every thread of the process at once
// (SECCOMP_FILTER_FLAG_TSYNC), and so on every thread and process started
// later, a seccomp filter that refuses every AF_INET and AF_INET6 socket
// other than a TCP stream (UDP, ICMP, raw, SCTP, MPTCP) with EACCES, and
// io_uring, which could open one without the socket system call. Landlock
// filters TCP by port; it cannot filter UDP before ABI 10, so this is the
// read-only tier's line for UDP (DNS included: a command could otherwise
// carry data out in lookups). System calls of another architecture (i386,
// x32) fail with ENOSYS, since their socket calls have other numbers.
// The read-only helper installs it once at set-up rather than on each
// command's thread: the kernel compiles every filter it installs. It sets
// no_new_privs on every thread first.
func denyNonTCPAllThreads() error {
	if err := llsys.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return installNonTCP(unix.SECCOMP_FILTER_FLAG_TSYNC)
}

func installNonTCP(flags uintptr) error {
	var arch uint32
	switch runtime.GOARCH {
	case "amd64":
		arch = unix.AUDIT_ARCH_X86_64
	case "arm64":
		arch = unix.AUDIT_ARCH_AARCH64
	default:
		return errors.New("no socket filter for " + runtime.GOARCH)
	}
	const (
		ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		eacc  = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		enosy = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		// Offsets in struct seccomp_data (little-endian: the low half of
		// each 64-bit argument comes first).
		offNr, offArch, offArg0, offArg1, offArg2 = 0, 4, 16, 24, 32
	)
	f := []unix.SockFilter{
		/* 0 */ {Code: ldW, K: offArch},
		/* 1 */ {Code: jeq, K: arch, Jt: 1, Jf: 0},
		/* 2 */ {Code: ret, K: enosy},
		/* 3 */ {Code: ldW, K: offNr},
		/* 4 */ {Code: jge, K: 0x40000000, Jt: 0, Jf: 1}, // x32
		/* 5 */ {Code: ret, K: enosy},
		/* 6 */ {Code: jeq, K: unix.SYS_IO_URING_SETUP, Jt: 0, Jf: 1},
		/* 7 */ {Code: ret, K: eperm},
		/* 8 */ {Code: jeq, K: unix.SYS_SOCKET, Jt: 1, Jf: 0},
		/* 9 */ {Code: ret, K: allow},
		/* 10 */ {Code: ldW, K: offArg0},
		/* 11 */ {Code: jeq, K: unix.AF_INET, Jt: 2, Jf: 0},
		/* 12 */ {Code: jeq, K: unix.AF_INET6, Jt: 1, Jf: 0},
		/* 13 */ {Code: ret, K: allow},
		/* 14 */ {Code: ldW, K: offArg1},
		/* 15 */ {Code: and, K: 0xf}, // SOCK_TYPE_MASK: without NONBLOCK, CLOEXEC
		/* 16 */ {Code: jeq, K: unix.SOCK_STREAM, Jt: 1, Jf: 0},
		/* 17 */ {Code: ret, K: eacc},
		/* 18 */ {Code: ldW, K: offArg2},
		/* 19 */ {Code: jeq, K: 0, Jt: 2, Jf: 0},
		/* 20 */ {Code: jeq, K: unix.IPPROTO_TCP, Jt: 1, Jf: 0},
		/* 21 */ {Code: ret, K: eacc},
		/* 22 */ {Code: ret, K: allow},
	}
	if runtime.GOARCH != "amd64" {
		// No x32 on arm64: skip the check (jump over it to the nr tests).
		f[4] = unix.SockFilter{Code: jge, K: 0xffffffff, Jt: 0, Jf: 1}
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	r, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	if errno != 0 {
		return errno
	}
	if r != 0 {
		// With TSYNC: the id of a thread that could not be synchronised.
		return fmt.Errorf("thread %d could not take the filter", r)
	}
	return nil
}

// denyClone3AllThreads makes clone3 fail with ENOSYS on every thread of
// the process, and so for every command it starts: clone3 can start a
// child in any cgroup v2 group whose directory the caller can name
// (CLONE_INTO_CGROUP), by a descriptor, even an O_PATH one, of a
// read-only mount or of a cgroup2 file system it mounts detached; the
// kernel checks only write permission on cgroup.procs, which root (or the
// owner of a delegated group) has, so a command could put a child outside
// its group, past its limits and the kill. ENOSYS is what a kernel
// without clone3 answers: the C library falls back to clone, and the Go
// runtime uses clone. The helpers themselves start commands with clone
// (they move each one into its group before it runs, cgroup.join).
func denyClone3AllThreads() error {
	if err := llsys.AllThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	const (
		ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		enosy = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	// clone3 has the same number on amd64 and arm64 (435) and on i386;
	// a call of another architecture is left to installNonTCP's arch
	// check where that filter is in force.
	f := []unix.SockFilter{
		{Code: ldW, K: 0},
		{Code: jeq, K: unix.SYS_CLONE3, Jt: 0, Jf: 1},
		{Code: ret, K: enosy},
		{Code: ret, K: allow},
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	r, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(f)
	if errno != 0 {
		return errno
	}
	if r != 0 {
		return fmt.Errorf("thread %d could not take the filter", r)
	}
	return nil
}
