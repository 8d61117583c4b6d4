package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"go.yaml.in/yaml/v3"

	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// Config describes one load run. The zero value of every field but
// Threads, Messages and Latency has a documented default.
type Config struct {
	// Bin is the thinbot binary to start; "" builds one (without -race)
	// into the work directory with `go build`.
	Bin string
	// Threads is the number of chat threads driven concurrently; 0 means 200.
	Threads int
	// Messages is the number of messages per thread, sent one after the
	// other (the next one after the answer to the previous); 0 means 1.
	Messages int
	// Steps is the number of read-only commands the scripted model runs
	// before answering each message: 0 is a plain answer.
	Steps int
	// Latency is how long the scripted model takes for each call.
	Latency time.Duration
	// Ramp spreads the threads' first messages evenly over this duration;
	// 0 posts them all at once (the harshest burst).
	Ramp time.Duration
	// Timeout bounds the load phase, from starting the daemon until the last
	// answer; 0 means 2 minutes. Shutdown and verification have their own
	// short bounds.
	Timeout time.Duration
	// MaxConcurrent is the daemon's max_concurrent_runs; 0 means
	// max(256, Threads), so that the global limit does not queue the load.
	MaxConcurrent int
	// Cgroup is the daemon's limits.cgroup (auto, v1, v2, off); "" keeps
	// the daemon's default. With off, a run shows what the cgroup per
	// command costs.
	Cgroup string
	// Dir is the work directory (state, workspace, config, daemon log);
	// "" means a temporary directory, removed at the end unless Keep.
	Dir string
	// Keep leaves a temporary Dir in place for inspection.
	Keep bool
	// Profile, if set, is a directory into which the daemon writes its
	// CPU profile and heap, allocation and mutex profiles
	// (THINBOT_PROFILE_DIR), and the fakes process its CPU profile
	// (fakes-cpu.pprof). Profiling slows the daemon: the
	// figures of such a run are not the daemon's usual ones.
	Profile string
	// Trace adds the daemon's execution trace and block profile to
	// Profile (THINBOT_PROFILE_TRACE), which slows it much more.
	Trace bool
	// Cluster runs three daemons of one cluster (deploy/cluster.md) on
	// loopback instead of one: the load goes to the leader, whose figures
	// (memory, CPU) are the ones measured.
	Cluster bool
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
}

// Stats are order statistics of a set of durations (nearest rank).
type Stats struct {
	N                          int
	Min, Median, P90, P99, Max time.Duration
	Mean                       time.Duration
}

// Result is what a load run measured.
type Result struct {
	Threads, Messages, Steps int
	Latency, Ramp            time.Duration
	// Sent is the number of messages posted; Answered the number whose
	// answer arrived in its thread.
	Sent, Answered int
	// Duplicates counts answers that arrived more than once; Missing those
	// that never arrived. Both are counted from the fake server's stored
	// threads after the daemon stopped.
	Duplicates, Missing int
	// ModelCalls is the number of chat completions the fake model served.
	ModelCalls int
	// ModelTime is the model's own time per message: Latency × calls.
	ModelTime time.Duration
	// EndToEnd is post-to-answer time; Added is EndToEnd minus ModelTime.
	EndToEnd, Added Stats
	// Ingest is the time from the post to the first model call; Between
	// the time between model calls beyond the model's latency (commands,
	// store appends); Render the time from the model's final reply to the
	// answer in the thread. Ingest + Between + Render = Added.
	Ingest, Between, Render Stats
	// DaemonCPU is the daemon's user+system CPU time over its life;
	// DriverCPU that of this process (the fakes and the driver), which
	// shares the machine with it.
	DaemonCPU, DriverCPU time.Duration
	// Split is DaemonCPU taken apart just before the daemon stops: the
	// daemon process itself, its sandbox helpers (its children) and what
	// the helpers reaped (the commands); zero when /proc could not tell.
	Split CPUSplit
	// PeakRSS is the daemon's VmHWM in bytes (0 if unknown).
	PeakRSS int64
	// Events is the number of events in the verified chain.
	Events uint64
	// ChainOK reports the in-process verification of the store.
	ChainOK bool
	// AuditVerify is the output of `thinbot audit verify`; AuditErr its
	// failure, if any.
	AuditVerify string
	AuditErr    error
	// Wall is the load phase's duration (first post to last answer).
	Wall time.Duration
	// BotReconnects counts the bot's WebSocket connections beyond the first.
	BotReconnects int
	// Syncs and Commits are the store's durable commits and all its
	// commits (thinbot_store_syncs_total, thinbot_store_commits_total),
	// read just before the daemon stops; -1 when the daemon does not say.
	Syncs, Commits float64
	// BotRequests counts the bot's requests to the chat server by route
	// ("POST /api/v4/posts"), the WebSocket included.
	BotRequests map[string]int
	// Dir is the work directory (kept when Config.Keep).
	Dir string
}

// tagRe finds the load tag in a user message: load-<thread>-<message>.
var tagRe = regexp.MustCompile(`load-\d+-\d+`)

// answerPrefix starts every final answer of the scripted model.
const answerPrefix = "Answer for "

// Run performs one load run: it starts the fakes, the daemon, drives the
// threads, stops the daemon and verifies the chain. It returns the
// measurements and an error if anything went wrong (a missing or duplicate
// answer, a broken chain, a daemon that died); the Result is filled as far
// as the run got. Cancelling ctx ends the run early.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = defaults(cfg)
	log := cfg.Logger
	res := &Result{Threads: cfg.Threads, Messages: cfg.Messages, Steps: cfg.Steps, Latency: cfg.Latency, Ramp: cfg.Ramp,
		ModelTime: cfg.Latency * time.Duration(cfg.Steps+1)}

	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "thinbot-load-")
		if err != nil {
			return res, fmt.Errorf("loadtest: %w", err)
		}
		dir = d
		if !cfg.Keep {
			defer os.RemoveAll(dir)
		}
	}
	res.Dir = dir
	bin := cfg.Bin
	if bin == "" {
		bin = filepath.Join(dir, "thinbot")
		log.Info("building thinbot", "out", bin)
		if err := build(ctx, bin); err != nil {
			return res, err
		}
	}

	// The fakes run in their own process: the driver's and the daemon's
	// figures do not include their scheduling or garbage collection.
	f, err := startFakes(ctx, cfg.Steps, cfg.Latency, cfg.Profile)
	if err != nil {
		return res, err
	}
	var fakesCPU time.Duration
	fakesOpen := true
	defer func() {
		if fakesOpen {
			f.close()
		}
	}()

	var nodes []*daemon
	if cfg.Cluster {
		if nodes, err = startCluster(dir, bin, f, cfg); err != nil {
			return res, err
		}
	} else {
		d, err := startDaemon(dir, bin, f, cfg, "", nil)
		if err != nil {
			return res, err
		}
		nodes = []*daemon{d}
	}
	for _, n := range nodes {
		defer n.kill()
	}
	d := nodes[0]

	loadCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// The load ends early if the daemon dies.
	go func() {
		select {
		case <-d.exited:
			cancel()
		case <-loadCtx.Done():
		}
	}()
	if cfg.Cluster {
		if d, err = waitLeader(loadCtx, nodes); err != nil {
			return res, d.explain(fmt.Errorf("loadtest: no leader: %w", err))
		}
	}
	if err := d.waitReady(loadCtx, f); err != nil {
		return res, d.explain(fmt.Errorf("loadtest: daemon not ready: %w", err))
	}
	log.Info("daemon ready", "pid", d.cmd.Process.Pid)

	obs, err := observe(loadCtx, f.MMURL, f.BotID, f.AliceToken)
	if err != nil {
		return res, fmt.Errorf("loadtest: observer: %w", err)
	}
	defer obs.close()

	e2e, runErr := drive(loadCtx, cfg, f, obs)
	res.Wall = e2e.wall
	res.Sent, res.Answered = e2e.sent, len(e2e.samples)
	res.EndToEnd = stats(e2e.samples)
	added := make([]time.Duration, len(e2e.samples))
	for i, s := range e2e.samples {
		added[i] = s - res.ModelTime
	}
	res.Added = stats(added)
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer scancel()
	fst, statsErr := f.stats(sctx)
	var ingest, between, render []time.Duration
	for _, m := range e2e.timed {
		at := fst.Calls[m.tag]
		if len(at) == 0 {
			continue
		}
		ingest = append(ingest, at[0].Sub(m.posted))
		between = append(between, at[len(at)-1].Sub(at[0])-time.Duration(len(at)-1)*cfg.Latency)
		render = append(render, m.answered.Sub(at[len(at)-1])-cfg.Latency)
	}
	res.Ingest, res.Between, res.Render = stats(ingest), stats(between), stats(render)
	res.PeakRSS, _ = peakRSS(d.cmd.Process.Pid)
	if obsErr := obs.err(); obsErr != nil && runErr == nil {
		runErr = fmt.Errorf("loadtest: observer: %w", obsErr)
	}

	res.Split, _ = cpuSplit(d.cmd.Process.Pid)
	res.Syncs, res.Commits = d.storeCounters(sctx)
	var followers []*daemon
	for _, n := range nodes {
		if n != d {
			followers = append(followers, n)
		}
	}
	if cfg.Cluster {
		// The followers must have applied every committed event before
		// they stop (their chains are verified too). One stops before the
		// leader, so that the leader's hand-over finds no majority to
		// commit a new leader's events with, and one after it (a node
		// left without a majority exits 1: not an error here).
		waitSameHeads(sctx, nodes)
		followers[0].stop(10 * time.Second)
	}
	stopErr := d.stop(10 * time.Second)
	if st := d.cmd.ProcessState; st != nil {
		res.DaemonCPU = st.UserTime() + st.SystemTime()
	}
	for _, n := range followers {
		n.stop(10 * time.Second)
	}
	if fst2, err := f.stats(sctx); err == nil {
		fst.WebSockets, fst.Failures, fst.ModelCalls, fst.ModelErr = fst2.WebSockets, fst2.Failures, fst2.ModelCalls, fst2.ModelErr
		fst.BotRequests = fst2.BotRequests
	} else if statsErr == nil {
		statsErr = err
	}
	res.ModelCalls = fst.ModelCalls
	res.BotRequests = fst.BotRequests
	var countErr error
	res.Duplicates, res.Missing, countErr = countAnswers(sctx, f, e2e.roots, cfg.Messages)
	// The observer holds one connection; the bot the others.
	res.BotReconnects = max(fst.WebSockets-2, 0)
	fakesCPU, fakesOpen = f.close(), false
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		res.DriverCPU = time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) + fakesCPU
	}

	var errs []error
	if err := errors.Join(statsErr, countErr); err != nil {
		errs = append(errs, fmt.Errorf("loadtest: fakes: %w", err))
	}
	if runErr != nil {
		errs = append(errs, d.explain(runErr))
	}
	if stopErr != nil {
		errs = append(errs, d.explain(stopErr))
	}
	if res.Duplicates > 0 || res.Missing > 0 {
		errs = append(errs, fmt.Errorf("loadtest: %d answer(s) missing, %d duplicated", res.Missing, res.Duplicates))
	}
	if want := res.Sent * (cfg.Steps + 1); res.ModelCalls != want && runErr == nil {
		errs = append(errs, fmt.Errorf("loadtest: the model served %d calls, want %d", res.ModelCalls, want))
	}
	if len(fst.Failures) > 0 {
		errs = append(errs, fmt.Errorf("loadtest: fake mattermost: %s", strings.Join(fst.Failures, "; ")))
	}
	if fst.ModelErr != "" {
		errs = append(errs, fmt.Errorf("loadtest: %s", fst.ModelErr))
	}

	vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer vcancel()
	dbPath := filepath.Join(d.dir, "state", "events.db")
	if err := verifyStore(vctx, dbPath, res); err != nil {
		errs = append(errs, err)
	}
	res.AuditVerify, res.AuditErr = auditVerify(vctx, bin, dbPath)
	if res.AuditErr != nil {
		errs = append(errs, res.AuditErr)
	}
	if cfg.Cluster {
		if err := sameChains(vctx, bin, nodes, res.AuditVerify); err != nil {
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

func defaults(cfg Config) Config {
	if cfg.Threads <= 0 {
		cfg.Threads = 200
	}
	if cfg.Messages <= 0 {
		cfg.Messages = 1
	}
	if cfg.Steps < 0 {
		cfg.Steps = 0
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = max(256, cfg.Threads)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// build compiles cmd/thinbot without -race.
func build(ctx context.Context, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/thinbot/thinbot/cmd/thinbot")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("loadtest: go build: %w\n%s", err, stderr.String())
	}
	return nil
}

// calls records when the model calls of each message tag arrived.
type calls struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (c *calls) add(tag string, t time.Time) {
	c.mu.Lock()
	c.at[tag] = append(c.at[tag], t)
	c.mu.Unlock()
}

func (c *calls) of(tag string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at[tag]
}

// scriptedModel answers each message with steps `run` calls of a read-only
// command and then a final answer naming the message's tag. It reads the
// position from the conversation itself, so it serves any number of
// sessions concurrently. It records the arrival of every call in rec.
func scriptedModel(steps int, latency time.Duration, rec *calls) func(fakemodel.Request) fakemodel.Reply {
	return func(req fakemodel.Request) fakemodel.Reply {
		now := time.Now()
		tag, tools := "", 0
		for _, m := range req.Messages {
			switch m.Role {
			case "user":
				tag, tools = tagRe.FindString(m.Content), 0
			case "tool":
				tools++
			}
		}
		if tag == "" {
			tag = "(no tag)"
		}
		rec.add(tag, now)
		if tools < steps {
			args, _ := json.Marshal(map[string]string{"command": "echo " + tag, "reason": "load test step"})
			return fakemodel.Reply{Delay: latency, ToolCalls: []fakemodel.Call{{Name: "run", Args: string(args)}}}
		}
		return fakemodel.Reply{Delay: latency, Content: answerPrefix + tag + "."}
	}
}

// daemon is a running `thinbot serve` child process.
type daemon struct {
	dir     string // its work directory (state, config, log)
	cmd     *exec.Cmd
	addr    string
	logPath string
	exited  chan struct{}
	waitErr error
}

// startDaemon starts `thinbot serve` in dir against the fakes, listening on
// addr ("" means a free port), with extra merged into its config.
func startDaemon(dir, bin string, f *fakes, cfg Config, addr string, extra map[string]any) (*daemon, error) {
	channel, approver, modelURL := f.Channel, f.AliceID, f.ModelURL
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	tokenFile := filepath.Join(dir, "mm.token")
	if err := os.WriteFile(tokenFile, []byte(f.BotToken+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	if addr == "" {
		var err error
		if addr, err = freeAddr(); err != nil {
			return nil, err
		}
	}
	conf := map[string]any{
		"model":    map[string]any{"base_url": modelURL, "model": "fake"},
		"platform": "mattermost",
		"mattermost": map[string]any{"url": f.MMURL, "token_file": tokenFile,
			"callback_url": "http://" + addr + "/hooks/mattermost/actions"},
		"listen":              addr,
		"state_dir":           filepath.Join(dir, "state"),
		"max_concurrent_runs": cfg.MaxConcurrent,
		"log_level":           "info",
		"channels":            []any{map[string]any{"id": channel, "workspace": ws, "approvers": []string{approver}}},
	}
	if cfg.Cgroup != "" {
		conf["limits"] = map[string]any{"cgroup": cfg.Cgroup}
	}
	maps.Copy(conf, extra)
	b, err := yaml.Marshal(conf)
	if err != nil {
		return nil, fmt.Errorf("loadtest: config: %w", err)
	}
	confPath := filepath.Join(dir, "thinbot.yaml")
	if err := os.WriteFile(confPath, b, 0o600); err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	logPath := filepath.Join(dir, "daemon.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("loadtest: %w", err)
	}
	cmd := exec.Command(bin, "serve", "--config", confPath)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	// The Go runtime's settings pass through, as a unit's Environment=
	// would set them.
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GODEBUG"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if cfg.Profile != "" {
		cmd.Env = append(cmd.Env, "THINBOT_PROFILE_DIR="+cfg.Profile)
		if cfg.Trace {
			cmd.Env = append(cmd.Env, "THINBOT_PROFILE_TRACE=1")
		}
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("loadtest: start daemon: %w", err)
	}
	d := &daemon{dir: dir, cmd: cmd, addr: addr, logPath: logPath, exited: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		logFile.Close()
		close(d.exited)
	}()
	return d, nil
}

// storeCounters reads the store's syncs and commits from the daemon's
// /metrics; -1 for one it does not show.
func (d *daemon) storeCounters(ctx context.Context) (syncs, commits float64) {
	syncs, commits = -1, -1
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+"/metrics", nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "thinbot_store_syncs_total":
			syncs = f
		case "thinbot_store_commits_total":
			commits = f
		}
	}
	return
}

// freeAddr finds a free 127.0.0.1 port for the daemon's listener.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("loadtest: free port: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr, nil
}

// waitReady waits for the bot's WebSocket on the fake, then for /readyz.
func (d *daemon) waitReady(ctx context.Context, f *fakes) error {
	if err := f.waitConnections(ctx, 1); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+"/readyz", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM and waits for a clean exit, killing after grace.
func (d *daemon) stop(grace time.Duration) error {
	select {
	case <-d.exited:
		return fmt.Errorf("loadtest: daemon exited during the run: %v", d.waitErr)
	default:
	}
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("loadtest: stop daemon: %w", err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-d.exited:
		if d.waitErr != nil {
			return fmt.Errorf("loadtest: daemon exit: %w", d.waitErr)
		}
		return nil
	case <-t.C:
		d.kill()
		return fmt.Errorf("loadtest: daemon did not stop within %s after SIGTERM", grace)
	}
}

// kill ends the daemon if it still runs and waits for it.
func (d *daemon) kill() {
	select {
	case <-d.exited:
		return
	default:
	}
	d.cmd.Process.Kill()
	<-d.exited
}

// explain adds the tail of the daemon's log to err.
func (d *daemon) explain(err error) error {
	b, rerr := os.ReadFile(d.logPath)
	if rerr != nil || len(b) == 0 {
		return err
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var keep []string
	for _, l := range lines {
		if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, `"level":"WARN"`) || !strings.HasPrefix(l, "{") {
			keep = append(keep, l)
		}
	}
	if len(keep) > 15 {
		keep = keep[len(keep)-15:]
	}
	if len(keep) == 0 {
		return err
	}
	return fmt.Errorf("%w\ndaemon log (%s), last warnings and errors:\n%s", err, d.logPath, strings.Join(keep, "\n"))
}

// observer watches the channel as a user over the fake's WebSocket and
// hands each bot answer to the goroutine waiting for its tag.
type observer struct {
	conn  *websocket.Conn
	botID string
	done  chan struct{}

	mu      sync.Mutex
	waiters map[string]chan time.Time
	readErr error
	closing bool
}

func observe(ctx context.Context, mmURL, botID, token string) (*observer, error) {
	u := "ws" + strings.TrimPrefix(mmURL, "http") + "/api/v4/websocket"
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, u, http.Header{"Authorization": {"Bearer " + token}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	o := &observer{conn: conn, botID: botID, done: make(chan struct{}), waiters: map[string]chan time.Time{}}
	// The hello event says the connection is authenticated and subscribed.
	var hello struct {
		Event string `json:"event"`
	}
	if err := conn.ReadJSON(&hello); err != nil || hello.Event != "hello" {
		conn.Close()
		return nil, fmt.Errorf("no hello (got %q): %v", hello.Event, err)
	}
	go o.read()
	return o, nil
}

// expect registers interest in the answer to tag; call it before posting.
func (o *observer) expect(tag string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	o.mu.Lock()
	o.waiters[tag] = ch
	o.mu.Unlock()
	return ch
}

func (o *observer) read() {
	defer close(o.done)
	for {
		_, msg, err := o.conn.ReadMessage()
		if err != nil {
			o.mu.Lock()
			if !o.closing {
				o.readErr = err
			}
			o.mu.Unlock()
			return
		}
		now := time.Now()
		tag, ok := answerTag(msg, o.botID)
		if !ok {
			continue
		}
		o.mu.Lock()
		ch := o.waiters[tag]
		delete(o.waiters, tag)
		o.mu.Unlock()
		if ch != nil {
			ch <- now
		}
	}
}

// answerTag reads a WebSocket event and returns the tag of a bot's final
// answer, if the event is one.
func answerTag(msg []byte, botID string) (string, bool) {
	var ev struct {
		Event string `json:"event"`
		Data  struct {
			Post string `json:"post"`
		} `json:"data"`
	}
	if json.Unmarshal(msg, &ev) != nil || ev.Event != "posted" || ev.Data.Post == "" {
		return "", false
	}
	var p struct {
		UserID  string `json:"user_id"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(ev.Data.Post), &p) != nil || p.UserID != botID {
		return "", false
	}
	return tagOfAnswer(p.Message)
}

// tagOfAnswer returns the tag of a final answer text.
func tagOfAnswer(text string) (string, bool) {
	rest, ok := strings.CutPrefix(text, answerPrefix)
	if !ok {
		return "", false
	}
	tag := tagRe.FindString(rest)
	return tag, tag != ""
}

func (o *observer) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.readErr
}

func (o *observer) close() {
	o.mu.Lock()
	o.closing = true
	o.mu.Unlock()
	o.conn.Close()
	<-o.done
}

// driven is what drive measured.
type driven struct {
	samples []time.Duration
	timed   []timedMessage
	roots   []string // root post id per thread ("" if never posted)
	sent    int
	wall    time.Duration
}

// timedMessage is one answered message.
type timedMessage struct {
	tag              string
	posted, answered time.Time
}

// drive runs the threads: all post their first message at once, then each
// sends its next message when the previous one is answered. Without a ramp
// the first messages go to the fakes in one request, which takes them one
// after the other (each with its own clock), as a burst of users would
// reach a server; with a ramp each thread posts its own at its time.
func drive(ctx context.Context, cfg Config, f *fakes, obs *observer) (driven, error) {
	type threadResult struct {
		timed []timedMessage
		sent  int
		err   error
	}
	out := driven{roots: make([]string, cfg.Threads)}
	results := make([]threadResult, cfg.Threads)
	tagOf := func(thread, msg int) string { return fmt.Sprintf("load-%d-%d", thread, msg) }
	textOf := func(tag string) string { return "@thinbot please look at " + tag }
	var burst []postReply
	burstAnswered := make([]<-chan time.Time, cfg.Threads)
	t0 := time.Now()
	if cfg.Ramp == 0 {
		ps := make([]userPost, cfg.Threads)
		for i := range cfg.Threads {
			tag := tagOf(i, 0)
			burstAnswered[i] = obs.expect(tag)
			ps[i] = userPost{User: f.AliceID, Channel: f.Channel, Text: textOf(tag)}
		}
		var err error
		if burst, err = f.userPosts(ctx, ps); err != nil {
			return out, fmt.Errorf("loadtest: post the first messages: %w", err)
		}
	}
	var wg sync.WaitGroup
	for i := range cfg.Threads {
		wg.Go(func() {
			r := &results[i]
			if cfg.Ramp > 0 && i > 0 {
				t := time.NewTimer(cfg.Ramp * time.Duration(i) / time.Duration(cfg.Threads))
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					r.err = fmt.Errorf("thread %d: %w", i, ctx.Err())
					return
				}
			}
			root := ""
			for m := range cfg.Messages {
				tag := tagOf(i, m)
				var answered <-chan time.Time
				var id string
				var posted time.Time
				if m == 0 && burst != nil {
					answered, id, posted = burstAnswered[i], burst[i].ID, burst[i].At
				} else {
					answered = obs.expect(tag)
					id, posted = f.userPost(ctx, f.AliceID, f.Channel, root, textOf(tag))
				}
				if id == "" {
					r.err = fmt.Errorf("thread %d: the fake refused message %d", i, m)
					return
				}
				r.sent++
				if root == "" {
					root = id
					out.roots[i] = id
				}
				select {
				case t1 := <-answered:
					r.timed = append(r.timed, timedMessage{tag: tag, posted: posted, answered: t1})
				case <-ctx.Done():
					r.err = fmt.Errorf("thread %d: no answer to message %d: %w", i, m, ctx.Err())
					return
				}
			}
		})
	}
	wg.Wait()
	out.wall = time.Since(t0)
	var errs []error
	for _, r := range results {
		for _, m := range r.timed {
			out.samples = append(out.samples, m.answered.Sub(m.posted))
		}
		out.timed = append(out.timed, r.timed...)
		out.sent += r.sent
		if r.err != nil {
			errs = append(errs, r.err)
		}
	}
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more threads failed", len(errs)-3))
	}
	return out, errors.Join(errs...)
}

// countAnswers counts, in the fake's stored threads, the final answers per
// message tag: duplicates (beyond one) and missing ones.
func countAnswers(ctx context.Context, f *fakes, roots []string, messages int) (dup, missing int, err error) {
	for i, root := range roots {
		seen := map[string]int{}
		if root != "" {
			posts, err := f.thread(ctx, root)
			if err != nil {
				return 0, 0, err
			}
			for _, p := range posts {
				if p.UserID != f.BotID {
					continue
				}
				if tag, ok := tagOfAnswer(p.Message); ok {
					seen[tag]++
				}
			}
		}
		for m := range messages {
			switch n := seen[fmt.Sprintf("load-%d-%d", i, m)]; {
			case n == 0:
				missing++
			case n > 1:
				dup += n - 1
			}
		}
	}
	return dup, missing, nil
}

// verifyStore opens the stopped daemon's store read-only and verifies it.
func verifyStore(ctx context.Context, path string, res *Result) error {
	db, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("loadtest: open store: %w", err)
	}
	defer db.Close()
	rep, err := db.Verify(ctx, nil)
	if err != nil {
		return fmt.Errorf("loadtest: verify store: %w", err)
	}
	res.Events, res.ChainOK = rep.Events, rep.OK
	if !rep.OK {
		return fmt.Errorf("loadtest: chain broken at seq %d: %s", rep.BadSeq, rep.Problem)
	}
	return nil
}

// auditVerify runs `thinbot audit verify --db path`.
func auditVerify(ctx context.Context, bin, dbPath string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, "audit", "verify", "--db", dbPath)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		return text, fmt.Errorf("loadtest: thinbot audit verify: %w: %s", err, text)
	}
	return text, nil
}

// peakRSS reads VmHWM (the peak resident set size) of a process.
// CPUSplit is the CPU time of a daemon, of its helpers and of the
// commands those reaped, from /proc/PID/stat.
type CPUSplit struct {
	Daemon, Helpers, Commands time.Duration
}

// clockTick is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuSplit reads the CPU times of pid and of its child processes (the
// sandbox helpers) while they run: each helper's own time, and the time
// of the children it has reaped (its commands and their orphans).
func cpuSplit(pid int) (CPUSplit, error) {
	var s CPUSplit
	self, err := procTimes(strconv.Itoa(pid))
	if err != nil {
		return s, err
	}
	s.Daemon = self.own
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return s, err
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		t, err := procTimes(e.Name())
		if err != nil || t.ppid != pid {
			continue
		}
		s.Helpers += t.own
		s.Commands += t.children
	}
	return s, nil
}

type procTime struct {
	ppid          int
	own, children time.Duration
}

// procTimes reads /proc/NAME/stat.
func procTimes(name string) (procTime, error) {
	b, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return procTime{}, err
	}
	return parseStat(string(b))
}

// parseStat reads the parent pid and the times of a /proc/PID/stat line:
// the fields after the command name, which is in parentheses and may
// itself hold spaces and parentheses.
func parseStat(line string) (procTime, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procTime{}, errors.New("stat: no command name")
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 15 {
		return procTime{}, fmt.Errorf("stat: %d fields after the name, want at least 15", len(f))
	}
	var n [5]int64
	for k, idx := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[idx], 10, 64)
		if err != nil || v < 0 || v > 1<<40 {
			return procTime{}, fmt.Errorf("stat: field %d: %q", idx+3, f[idx])
		}
		n[k] = v
	}
	return procTime{ppid: int(n[0]), own: time.Duration(n[1]+n[2]) * clockTick, children: time.Duration(n[3]+n[4]) * clockTick}, nil
}

func peakRSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseHWM(f)
}

// parseHWM reads the VmHWM line of a /proc/PID/status file, in bytes.
func parseHWM(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmHWM: unexpected format %q", rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0, fmt.Errorf("VmHWM: bad value %q", f[0])
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("VmHWM: not found")
}

// stats computes order statistics by the nearest-rank method.
func stats(ds []time.Duration) Stats {
	s := Stats{N: len(ds)}
	if len(ds) == 0 {
		return s
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(sorted)))) - 1
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	s.Median, s.P90, s.P99 = rank(0.50), rank(0.90), rank(0.99)
	s.Mean = sum / time.Duration(len(sorted))
	return s
}
