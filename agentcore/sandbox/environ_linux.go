package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// environFD names the variable that hands the environment to the
// re-executed daemon (see HideEnviron).
const environFD = "THINBOT_ENVIRON_FD"

// HideEnviron makes the kernel's copy of this process's environment
// (/proc/<pid>/environ) empty, so that no command, approved or not, can
// read a credential the operator passed in a variable of any name: on this
// kernel an approved root command can read a root daemon's environ even
// without CAP_SYS_PTRACE and across Landlock domains (measured: issue
// #19). Its command line (/proc/<pid>/cmdline, which every process of the
// host can read, and ps shows) is cut to the program and its first
// argument, the command ("thinbot serve"): the rest names the config file
// and other paths the sandbox hides. It re-executes the binary with only
// environFD set and that short command line, handing the arguments and
// the environment over in a sealed memfd, and the new image sets them up
// again in Go's own copies: os.Args, os.Getenv and os.Environ see them as
// before. The pid and open files stay. Call it first thing in main, after
// Main, with os.Args, for the commands that run other commands (serve,
// ask, chat, goal, web). It returns only in the re-executed process, or
// with an error when the hand-over failed (the process then goes on with
// its environment and arguments as they were).
func HideEnviron(args []string) error {
	if v, ok := os.LookupEnv(environFD); ok {
		return takeEnviron(v)
	}
	fd, err := unix.MemfdCreate("thinbot-environ", unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("hide environment: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "environ")
	defer f.Close()
	if _, err := f.Write(encodeHandOver(args, os.Environ())); err != nil {
		return fmt.Errorf("hide environment: %w", err)
	}
	_, _ = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK)
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("hide environment: %w", err)
	}
	// Go opens files close-on-exec: this one must survive the exec.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("hide environment: %w", err)
	}
	err = syscall.Exec(exe, args[:min(len(args), 2)], []string{environFD + "=" + strconv.Itoa(fd)})
	return fmt.Errorf("hide environment: exec %s: %w", exe, err)
}

func takeEnviron(v string) error {
	os.Unsetenv(environFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return fmt.Errorf("hide environment: bad %s %q", environFD, v)
	}
	f := os.NewFile(uintptr(fd), "environ")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("hide environment: %w", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("hide environment: %w", err)
	}
	args, environ, err := decodeHandOver(b)
	if err != nil {
		return fmt.Errorf("hide environment: %w", err)
	}
	for _, kv := range decodeEnviron(environ) {
		os.Setenv(kv[0], kv[1])
	}
	os.Args = args
	return nil
}

// encodeHandOver writes what HideEnviron hands over: the number of
// arguments, each argument, then the environment (encodeEnviron), each
// field followed by a NUL byte (the kernel's argv and environ hold no NUL
// inside a field).
func encodeHandOver(args, environ []string) []byte {
	b := encodeEnviron(append([]string{strconv.Itoa(len(args))}, args...))
	return append(b, encodeEnviron(environ)...)
}

// decodeHandOver reads what encodeHandOver wrote: the arguments, and the
// environment for decodeEnviron.
func decodeHandOver(b []byte) (args []string, environ []byte, err error) {
	count, rest, ok := bytes.Cut(b, []byte{0})
	n, aerr := strconv.Atoi(string(count))
	if !ok || aerr != nil || n < 0 || n > len(rest) {
		return nil, nil, fmt.Errorf("bad hand-over: argument count %q", count)
	}
	args = make([]string, 0, n)
	for range n {
		a, r, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return nil, nil, fmt.Errorf("bad hand-over: %d arguments, %d found", n, len(args))
		}
		args, rest = append(args, string(a)), r
	}
	return args, rest, nil
}

// encodeEnviron writes environment entries (NAME=VALUE) as the kernel
// keeps them: each followed by a NUL byte.
func encodeEnviron(environ []string) []byte {
	var b bytes.Buffer
	for _, kv := range environ {
		b.WriteString(kv)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// decodeEnviron reads what encodeEnviron wrote: the name and value of each
// entry, skipping entries without "=" or with an empty name (the kernel's
// own environ can hold such entries; Setenv would refuse them).
func decodeEnviron(b []byte) [][2]string {
	var out [][2]string
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, val, ok := strings.Cut(kv, "="); ok && k != "" {
			out = append(out, [2]string{k, val})
		}
	}
	return out
}
