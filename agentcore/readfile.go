package agentcore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/thinbot/thinbot/gate"
)

// readFileLimit bounds what one read_file call returns.
const readFileLimit = 64 << 10

// readFile serves the read_file tool: gated by gate.ClassifyPath, audited.
func (r *run) readFile(ctx context.Context, call ToolCall, args toolArgs) (string, bool, *ExecResult, error) {
	if args.Target != "" {
		return r.readRemote(ctx, call, args)
	}
	content, isErr, err := r.readLocal(ctx, call, args)
	return content, isErr, nil, err
}

func (r *run) readLocal(ctx context.Context, call ToolCall, args toolArgs) (string, bool, error) {
	path := args.Path
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, path[2:])
		}
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(r.t.Dir, path)
	}
	// The gate resolves /dev/fd and /proc magic links before `..`; a
	// text-cleaned path (/dev/fd/../../1/environ → /dev/1/environ) would
	// hide them, so it judges the raw path too and the stricter wins.
	raw := path
	path = filepath.Clean(path)
	d := r.cfg.Policy.ClassifyPath(path)
	if d2 := r.cfg.Policy.ClassifyPath(raw); d2.Verdict < d.Verdict {
		d = d2
	}
	// The real file behind a symlink must pass too.
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		if d2 := r.cfg.Policy.ClassifyPath(real); d2.Verdict < d.Verdict {
			d = d2
		}
	}
	info := CommandInfo{Tool: ToolReadFile, Command: path}
	ok, refusal, err := r.decide(ctx, call, info, d, "read "+path)
	if err != nil {
		return "", false, err
	}
	info.Verdict, info.Reason = d.Verdict.String(), d.Reason
	if !ok {
		r.hookResult(info, refusal, true)
		return refusal, true, nil
	}
	var content string
	isErr := true
	if f, msg := r.openChecked(path, d); f == nil {
		content = msg
	} else {
		content, isErr = readLines(f, path, args.Offset, args.Limit)
		f.Close()
	}
	content = r.maskOutput(content)
	r.hookResult(info, content, isErr)
	return content, isErr, nil
}

// openChecked opens path for read_file the safe way round: it opens first
// (the last component not followed if it is a symlink, so the file is the
// one the gate saw resolved) and then checks what it opened: a regular
// file, whose real path (from the kernel, /proc/self/fd) the gate judges
// no stricter than decision d. A file swapped between the check and the
// open is refused, not read: the error message is returned instead.
func (a *Agent) openChecked(path string, d gate.Decision) (*os.File, string) {
	target := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real
	}
	fd, err := syscall.Open(target, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, "error: " + path + " changed while it was opened (a symlink appeared); not read"
		}
		return nil, "error: open " + path + ": " + err.Error()
	}
	f := os.NewFile(uintptr(fd), target)
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		f.Close()
		return nil, "error: cannot tell which file was opened: " + err.Error()
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, "error: " + err.Error()
	case st.IsDir():
		f.Close()
		return nil, "error: " + path + " is a directory; use run with ls"
	case !st.Mode().IsRegular():
		f.Close()
		return nil, "error: " + path + " is not a regular file"
	}
	if d2 := a.cfg.Policy.ClassifyPath(real); d2.Verdict < d.Verdict {
		f.Close()
		return nil, fmt.Sprintf("error: the file opened is %s, which the gate rates %s (%s); not read", real, d2.Verdict, d2.Reason)
	}
	return f, ""
}

// readLines returns lines [offset, offset+limit) of the text file f (named
// path), numbered, within readFileLimit bytes.
func readLines(f *os.File, path string, offset, limit int) (string, bool) {
	if offset < 1 {
		offset = 1
	}
	if limit <= 0 {
		limit = 2000
	}
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, shown := 0, 0
	for sc.Scan() {
		n++
		if n < offset {
			continue
		}
		if shown >= limit || b.Len() > readFileLimit {
			fmt.Fprintf(&b, "[... more lines; continue with offset %d ...]\n", n)
			break
		}
		line := sc.Text()
		if !utf8.ValidString(line) || strings.ContainsRune(line, 0) {
			return fmt.Sprintf("error: %s looks binary (line %d); use run with file/xxd/strings", path, n), true
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, line)
		shown++
	}
	if err := sc.Err(); err != nil {
		return fmt.Sprintf("error: reading %s: %v", path, err), true
	}
	if shown == 0 {
		return fmt.Sprintf("(no lines from %d; the file has %d lines)", offset, n), false
	}
	return b.String(), false
}
