// Command loadtest measures what thinbot serve adds to a model's latency
// when many chat threads are busy at once. It starts the fake Mattermost
// (tests/fakemattermost) and a scripted OpenAI-compatible model
// (tests/fakemodel) with a fixed latency in a process of their own (this
// program re-executed), builds thinbot (without -race) and runs `thinbot
// serve` against them as a child process, posts one mention per thread, all
// at once (one burst the fakes take in order) or spread over -ramp, and
// times each answer from when the fake took the post to the bot's final
// answer in the thread (as a user's WebSocket sees it). The model's own time (latency × model calls
// per message) is subtracted to get the daemon's added latency. At the end
// it stops the daemon, checks that every message was answered exactly
// once, verifies the event chain and runs `thinbot audit verify`.
//
//	go run ./tests/loadtest -threads 200 -latency 200ms
//	go run ./tests/loadtest -threads 200 -latency 200ms -steps 1 -messages 3
//	go run ./tests/loadtest -threads 200 -latency 200ms -ramp 1s
//	go run ./tests/loadtest -threads 200 -latency 200ms -steps 3 -cgroup off
//	go run ./tests/loadtest -threads 200 -latency 200ms -steps 1 -cluster
//	go run ./tests/loadtest -threads 200 -latency 200ms -profile /tmp/prof [-trace]
//
// With -profile the daemon writes its CPU profile and its heap, allocation
// and mutex profiles (with -trace also its execution trace and block
// profile) into the directory: `go tool pprof -top /tmp/prof/cpu.pprof`,
// `go tool trace /tmp/prof/trace.out`. Profiling slows the daemon, so such
// a run's figures are not its usual ones. GOGC, GOMEMLIMIT, GOMAXPROCS and
// GODEBUG pass through to the daemon.
//
// The daemon's CPU time is also taken apart, read from /proc just before it
// stops: the daemon itself, its sandbox helpers, and the commands the
// helpers reaped; "daemon+helpers per command" divides the first two by
// the commands run (it includes what the messages cost without commands:
// compare with a -steps 0 run).
//
// It exits 1 if an answer is missing or duplicated, the chain does not
// verify, or the daemon fails; with -enforce also when a target (p99 added
// latency, peak memory) is missed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Targets from the issue: p99 added latency and the daemon's peak memory.
const (
	targetAddedP99 = 100 * time.Millisecond
	targetPeakRSS  = 200 << 20
)

func main() {
	if spec := os.Getenv(fakesEnv); spec != "" {
		if err := serveFakes(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest fakes:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.IntVar(&cfg.Threads, "threads", 200, "concurrent chat threads")
	fs.IntVar(&cfg.Messages, "messages", 1, "messages per thread, each sent after the previous answer")
	fs.DurationVar(&cfg.Latency, "latency", 200*time.Millisecond, "the scripted model's latency per call")
	fs.DurationVar(&cfg.Ramp, "ramp", 0, "spread the threads' first messages over this duration (0 = all at once)")
	fs.IntVar(&cfg.Steps, "steps", 0, "read-only commands per message before the answer (0 = plain answer)")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "bound of the load phase")
	fs.StringVar(&cfg.Bin, "bin", "", "thinbot `binary` to test (default: go build ./cmd/thinbot)")
	fs.StringVar(&cfg.Dir, "dir", "", "work `directory` (default: a temporary one, removed)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary work directory (state, config, daemon.log)")
	fs.StringVar(&cfg.Profile, "profile", "", "write the daemon's CPU profile, execution trace and heap/mutex/block profiles into this `directory`")
	fs.BoolVar(&cfg.Trace, "trace", false, "with -profile, also the daemon's execution trace and block profile (slow)")
	fs.IntVar(&cfg.MaxConcurrent, "max-concurrent", 0, "the daemon's max_concurrent_runs (default max(256, threads))")
	fs.BoolVar(&cfg.Cluster, "cluster", false, "run three daemons of one cluster (deploy/cluster.md) and load the leader")
	fs.StringVar(&cfg.Cgroup, "cgroup", "", "the daemon's limits.cgroup: auto, v1, v2 or off (default: the daemon's)")
	genN := fs.Int("gen", 0, "build a store of this many events in the shape of a year of on-call into -dir (events.db, audit.jsonl) and exit")
	table := fs.String("table", "", "comma-separated store sizes (e.g. 1000,200000,1000000): build each under -dir/N/state once and print the start-up, audit viewer and verify timings")
	reps := fs.Int("reps", 3, "with -table, measure each size this many times and print the medians (audit verify runs once)")
	enforce := fs.Bool("enforce", false, "exit 1 when a target is missed")
	verbose := fs.Bool("v", false, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case *genN > 0:
		if cfg.Dir == "" {
			return errors.New("-gen needs -dir")
		}
		took, err := Generate(ctx, cfg.Dir, *genN)
		if err == nil {
			fmt.Fprintf(stdout, "%d events in %s in %s\n", *genN, cfg.Dir, took.Round(time.Millisecond))
		}
		return err
	case *table != "":
		return runTable(ctx, cfg, *table, *reps, stdout, stderr)
	}
	if cfg.Trace && cfg.Profile == "" {
		return errors.New("-trace needs -profile")
	}
	if cfg.Threads <= 0 || cfg.Messages <= 0 || cfg.Steps < 0 || cfg.Latency < 0 || cfg.Ramp < 0 {
		return errors.New("-threads and -messages must be positive, -steps, -latency and -ramp not negative")
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	res, err := Run(ctx, cfg)
	if res != nil {
		printResult(stdout, res)
		if cfg.Keep || cfg.Dir != "" {
			fmt.Fprintf(stdout, "work directory: %s\n", res.Dir)
		}
	}
	if err != nil {
		return err
	}
	if *enforce {
		var missed []error
		if res.Added.P99 >= targetAddedP99 {
			missed = append(missed, fmt.Errorf("p99 added latency %s is not under %s", res.Added.P99, targetAddedP99))
		}
		if res.PeakRSS == 0 || res.PeakRSS >= targetPeakRSS {
			missed = append(missed, fmt.Errorf("peak RSS %s is not under %s", mib(res.PeakRSS), mib(targetPeakRSS)))
		}
		return errors.Join(missed...)
	}
	return nil
}

// runTable is -table: the issue #23 measurements.
func runTable(ctx context.Context, cfg Config, spec string, reps int, stdout, stderr io.Writer) error {
	var sizes []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-table: bad size %q", f)
		}
		sizes = append(sizes, n)
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "thinbot-table-")
		if err != nil {
			return err
		}
		if !cfg.Keep {
			defer os.RemoveAll(d)
		}
		dir = d
	}
	bin := cfg.Bin
	if bin == "" {
		bin = filepath.Join(dir, "thinbot")
		if err := build(ctx, bin); err != nil {
			return err
		}
	}
	rows, err := Table(ctx, bin, dir, sizes, reps, stderr)
	printTable(stdout, rows)
	return err
}

// printResult writes the result table.
func printResult(w io.Writer, r *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "threads\tmessages\tanswered\tmodel calls\tsteps/msg\tmodel latency\tmodel time/msg\tramp\twall\n")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Threads, r.Sent, r.Answered, r.ModelCalls, r.Steps,
		r.Latency, r.ModelTime, r.Ramp, r.Wall.Round(time.Millisecond))
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "latency\tmedian\tp90\tp99\tmax\t\n")
	for _, row := range []struct {
		name string
		s    Stats
	}{{"end-to-end", r.EndToEnd}, {"added", r.Added}, {"  post→model", r.Ingest}, {"  between calls", r.Between}, {"  model→answer", r.Render}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", row.name, ms(row.s.Median), ms(row.s.P90), ms(row.s.P99), ms(row.s.Max))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "added p99\t%s\t(target < %s: %s)\n", ms(r.Added.P99), ms(targetAddedP99), verdict(r.Added.N > 0 && r.Added.P99 < targetAddedP99))
	fmt.Fprintf(tw, "daemon peak RSS (VmHWM)\t%s\t(target < %s: %s)\n", mib(r.PeakRSS), mib(targetPeakRSS), verdict(r.PeakRSS > 0 && r.PeakRSS < targetPeakRSS))
	fmt.Fprintf(tw, "CPU time: daemon (with its commands) / driver+fakes\t%s / %s\t\n", r.DaemonCPU.Round(time.Millisecond), r.DriverCPU.Round(time.Millisecond))
	if sp := r.Split; sp != (CPUSplit{}) {
		fmt.Fprintf(tw, "  daemon / helpers / commands\t%s / %s / %s\t\n", sp.Daemon, sp.Helpers, sp.Commands)
		if n := r.Sent * r.Steps; n > 0 {
			fmt.Fprintf(tw, "  daemon+helpers per command\t%s\t(includes what a message costs without commands)\n", ((sp.Daemon + sp.Helpers) / time.Duration(n)).Round(time.Microsecond))
		}
	}
	fmt.Fprintf(tw, "answers missing / duplicated\t%d / %d\t\n", r.Missing, r.Duplicates)
	if r.Sent > 0 {
		total := 0
		for _, n := range r.BotRequests {
			total += n
		}
		fmt.Fprintf(tw, "bot's chat requests per message\t%.2f\t(%s)\n", float64(total)/float64(r.Sent), routes(r.BotRequests, r.Sent))
		fmt.Fprintf(tw, "model calls per message\t%.2f\t\n", float64(r.ModelCalls)/float64(r.Sent))
		fmt.Fprintf(tw, "store syncs / commits per message\t%s / %s\t\n", perMessage(r.Syncs, r.Sent), perMessage(r.Commits, r.Sent))
	}
	fmt.Fprintf(tw, "bot websocket reconnects\t%d\t\n", r.BotReconnects)
	chain := "not verified"
	if r.Events > 0 || r.ChainOK {
		chain = "broken"
		if r.ChainOK {
			chain = "verified"
		}
	}
	fmt.Fprintf(tw, "events in chain\t%d\t(%s)\n", r.Events, chain)
	tw.Flush()
	audit := r.AuditVerify
	if r.AuditErr != nil {
		audit = "FAILED: " + r.AuditErr.Error()
	}
	fmt.Fprintf(w, "thinbot audit verify: %s\n", oneLine(audit))
}

// perMessage is n/sent, or "?" for an unknown n (-1).
func perMessage(n float64, sent int) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", n/float64(sent))
}

// routes lists requests per message by route, most first.
func routes(m map[string]int, sent int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", k, float64(m[k])/float64(sent))
	}
	return b.String()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func mib(b int64) string {
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

// oneLine shortens multi-line command output to its first line.
func oneLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i] + " …"
		}
	}
	return s
}
