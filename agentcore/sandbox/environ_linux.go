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
// #19). It re-executes the binary with only environFD set, handing the
// environment over in a sealed memfd, and the new image sets it up again
// in Go's own copy; os.Getenv and os.Environ see it as before. The pid, the
// arguments and open files stay. Call it first thing in main, after Main,
// for the commands that run other commands (serve, ask, chat, goal, web).
// It returns only in the re-executed process, or with an error when the
// hand-over failed (the process then goes on with its environment as it
// was).
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
	if _, err := f.Write(encodeEnviron(os.Environ())); err != nil {
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
	err = syscall.Exec(exe, args, []string{environFD + "=" + strconv.Itoa(fd)})
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
	for _, kv := range decodeEnviron(b) {
		os.Setenv(kv[0], kv[1])
	}
	return nil
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
