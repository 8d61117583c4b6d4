// Command mutate checks that the tests guard the project's security-critical
// lines: it applies each mutation of its table (one product line changed, as
// a careless edit would) to a scratch copy of the tree, one at a time, runs
// the named package tests there, and fails if any mutant survives (its tests
// pass), if a row's snippet is no longer in the tree exactly once, or if the
// unmutated copy fails the same tests.
//
// Run it from anywhere in the module:
//
//	go run ./tests/mutate            # every row
//	go run ./tests/mutate -run 'S|A' # rows whose id matches
//	go run ./tests/mutate -j 2       # two mutants at a time (CI)
//
// A row that survives means a test is missing: write the test that fails
// with the mutation applied, do not delete the row. A row whose snippet
// moved (the code was edited) must be updated to the new line.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

func main() {
	runRe := flag.String("run", "", "only the rows whose id matches this regexp")
	timeout := flag.Duration("timeout", 5*time.Minute, "go test -timeout for each mutant")
	keep := flag.Bool("keep", false, "keep the scratch copy (its path is printed)")
	verbose := flag.Bool("v", false, "print the go test output of every run")
	jobs := flag.Int("j", 1, "mutants tested at a time, each in a scratch copy of its own")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *runRe, *timeout, *keep, *verbose, max(*jobs, 1), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

// outcome is what became of one row.
type outcome struct {
	m      mutation
	result string // killed, SURVIVED, STALE, BROKEN, survived (pending)
	bad    bool
	took   time.Duration
}

func run(ctx context.Context, only string, timeout time.Duration, keep, verbose bool, jobs int, out io.Writer) error {
	var re *regexp.Regexp
	if only != "" {
		var err error
		if re, err = regexp.Compile(only); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	var rows []mutation
	for _, m := range table {
		if re == nil || re.MatchString(m.ID) {
			rows = append(rows, m)
		}
	}
	if len(rows) == 0 {
		return errors.New("no row matches -run")
	}
	var scratches []string
	for range min(jobs, len(rows)) {
		scratch, err := os.MkdirTemp("", "thinbot-mutate-")
		if err != nil {
			return err
		}
		if keep {
			fmt.Fprintln(out, "scratch copy:", scratch)
		} else {
			defer os.RemoveAll(scratch)
		}
		if err := copyTree(ctx, root, scratch); err != nil {
			return err
		}
		scratches = append(scratches, scratch)
	}
	scratch := scratches[0]

	// The unmutated copy must pass every test the rows use; otherwise a
	// "killed" row would prove nothing. One run per set of packages
	// (baselines) rather than per row: the same check with one build
	// and start of each test binary instead of one per row, and a
	// timeout that grows with the rows it stands for (to 30 minutes).
	for _, b := range baselines(rows) {
		args := b.args(min(timeout*time.Duration(b.rows), 30*time.Minute))
		key := strings.Join(args, " ")
		t0 := time.Now()
		outp, err := goTest(ctx, scratch, args)
		if verbose {
			out.Write(outp)
		}
		if err != nil {
			return fmt.Errorf("the unmutated tree fails `go %s` (%v):\n%s", key, err, tail(outp))
		}
		fmt.Fprintf(out, "baseline ok (%s): go %s\n", time.Since(t0).Round(time.Second), key)
	}

	// The mutants, jobs at a time: each worker owns a scratch copy, in
	// which it applies one row's mutation at a time.
	results := make([]outcome, len(rows))
	next := make(chan int)
	lout := &lockedWriter{w: out}
	var wg sync.WaitGroup
	errs := make([]error, len(scratches))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w, dir := range scratches {
		wg.Go(func() {
			for i := range next {
				m := rows[i]
				o := outcome{m: m}
				t0 := time.Now()
				var err error
				o.result, o.bad, err = try(wctx, dir, m, timeout, verbose, lout)
				if err != nil {
					errs[w] = err
					cancel()
					return
				}
				o.took = time.Since(t0).Round(time.Second)
				fmt.Fprintf(lout, "%s %s (%s)\n", m.ID, o.result, o.took)
				results[i] = o
			}
		})
	}
feed:
	for i := range rows {
		select {
		case next <- i:
		case <-wctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nid\tfile\tmutation\tresult\ttime")
	failed, pending := 0, 0
	for _, o := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", o.m.ID, o.m.File, o.m.What, o.result, o.took)
		switch {
		case o.bad:
			failed++
		case strings.HasPrefix(o.result, "survived"):
			pending++
		}
	}
	tw.Flush()
	// The plain closing line CI reads: a killed mutant is a passed check,
	// a pending row that survived a skipped one.
	fmt.Fprintf(out, "mutants: %d passed, %d failed, %d skipped\n", len(results)-failed-pending, failed, pending)
	if failed > 0 {
		return fmt.Errorf("%d of %d rows not killed", failed, len(results))
	}
	return nil
}

// baseline is one run of the unmutated tree for rows of the same packages.
type baseline struct {
	mutation     // Pkgs and Run
	rows     int // how many rows it stands for
	runs     []string
}

// baselines merges the rows' commands: rows of the same packages share one
// run whose -run pattern is the alternation of theirs, and a row without a
// pattern makes it run every test. A pattern with a subtest level ("/")
// keeps a run of its own, since go test splits the whole pattern at "/".
func baselines(rows []mutation) []baseline {
	var out []baseline
	index := map[string]int{} // packages -> out index of the merged run
	for _, m := range rows {
		key := strings.Join(m.Pkgs, " ")
		if strings.Contains(m.Run, "/") {
			key += " " + m.Run
		}
		i, ok := index[key]
		if !ok {
			index[key] = len(out)
			out = append(out, baseline{mutation: mutation{Pkgs: m.Pkgs, Run: m.Run}, rows: 1, runs: []string{m.Run}})
			continue
		}
		b := &out[i]
		b.rows++
		switch {
		case b.Run == "" || m.Run == "":
			b.Run = ""
		case !slices.Contains(b.runs, m.Run):
			b.runs = append(b.runs, m.Run)
			b.Run = strings.Join(b.runs, "|")
		}
	}
	return out
}

// lockedWriter lets the workers write whole lines to one output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// try applies m in the scratch copy, runs its tests and restores the file.
func try(ctx context.Context, scratch string, m mutation, timeout time.Duration, verbose bool, out io.Writer) (string, bool, error) {
	path := filepath.Join(scratch, filepath.FromSlash(m.File))
	orig, err := os.ReadFile(path)
	if err != nil {
		return "", false, err
	}
	if n := bytes.Count(orig, []byte(m.Old)); n != 1 {
		return fmt.Sprintf("STALE: the original snippet occurs %d times", n), true, nil
	}
	mutated := bytes.Replace(orig, []byte(m.Old), []byte(m.New), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return "", false, err
	}
	defer os.WriteFile(path, orig, 0o644)
	outp, err := goTest(ctx, scratch, m.args(timeout))
	if verbose {
		out.Write(outp)
	}
	switch {
	case ctx.Err() != nil:
		return "", false, ctx.Err()
	case err == nil && m.Pending != "":
		return "survived (pending: " + m.Pending + ")", false, nil
	case err == nil:
		return "SURVIVED", true, nil
	case bytes.Contains(outp, []byte("[build failed]")) || bytes.Contains(outp, []byte("[setup failed]")):
		// A mutant that does not compile proves nothing about the tests.
		fmt.Fprintf(out, "%s does not build:\n%s\n", m.ID, tail(outp))
		return "BROKEN: the mutant does not build", true, nil
	}
	killer := failedTests(outp)
	if m.Pending != "" {
		return "killed by " + killer + " (its Pending mark can go)", false, nil
	}
	return "killed by " + killer, false, nil
}

// goTest runs go with args in dir; -count=1 so nothing comes from the cache.
func goTest(ctx context.Context, dir string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// Mutants run without -race; so does the thinbot binary that the
	// end-to-end tests build.
	cmd.Env = append(os.Environ(), "THINBOT_E2E_NORACE=1")
	return cmd.CombinedOutput()
}

var failLine = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// failedTests names the failing tests of a go test output (a timeout or a
// panic names none).
func failedTests(outp []byte) string {
	var names []string
	seen := map[string]bool{}
	for _, sm := range failLine.FindAllSubmatch(outp, -1) {
		n := string(sm[1])
		if top, _, ok := strings.Cut(n, "/"); ok && seen[top] {
			continue
		}
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	switch {
	case len(names) > 3:
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
	case len(names) > 0:
		return strings.Join(names, ", ")
	case bytes.Contains(outp, []byte("panic: test timed out")):
		return "the test timeout"
	}
	return "a failing run (no test named)"
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 3000 {
		s = "…" + s[len(s)-3000:]
	}
	return s
}

// moduleRoot finds the directory of go.mod from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// copyTree copies the files git knows (tracked, and untracked but not
// ignored, so uncommitted edits count) from root into dst.
func copyTree(ctx context.Context, root, dst string) error {
	cmd := exec.CommandContext(ctx, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	list, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		st, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return err
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		switch {
		case st.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		case st.Mode().IsRegular():
			data, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, data, st.Mode().Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}
