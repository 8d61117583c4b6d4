// Command startbench measures thinbot's start-up as whole processes: the
// built binary is executed, as a user or a service manager would, and timed
// from just before its exec to what it first does for the user.
//
//	go run ./tests/startbench                          # builds cmd/thinbot, 10 runs each
//	go run ./tests/startbench -bin NEW -vs OLD -n 20   # paired, interleaved: NEW OLD NEW OLD ...
//
// Three cases, each in a workspace of its own (one per binary, kept across
// runs, as a directory someone works in):
//
//   - ask: `thinbot ask` against a scripted model (tests/fakemodel, served
//     by this program on 127.0.0.1) that answers at once; timed to the
//     first model request (the request's arrival at the fake) and to exit.
//   - ask10: `thinbot ask` whose model runs ten read-only commands, one a
//     step, then answers: the whole run's wall time (the sandbox, the
//     gate and the chain at every step).
//   - serve: `thinbot serve` with nothing configured (the web console, no
//     model), timed to its first 200 from GET /healthz (polled every
//     millisecond), then stopped with SIGTERM.
//   - serve-mm: `thinbot serve --config` for one Mattermost channel
//     (tests/fakemattermost, served here too) and the scripted model,
//     timed the same way.
//
// Each figure is the median of the runs (min and max beside it); peak is
// the largest resident set among the process and the helpers it waited
// for (rusage maxrss). With -vs the two binaries run in turn, and each
// pair's ratio NEW/OLD is taken before the median: pairing keeps the ratio
// meaningful on a machine whose load drifts. It measures and never judges.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/thinbot/thinbot/tests/fakemattermost"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "startbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("startbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "thinbot `binary` to measure; empty builds ./cmd/thinbot")
	vs := fs.String("vs", "", "baseline thinbot `binary`: run in turn with -bin, ratios taken pair by pair")
	n := fs.Int("n", 10, "measured runs of each binary and case (after one warm-up run)")
	cases := fs.String("cases", "ask,ask10,serve,serve-mm", "comma-separated `cases`: ask, ask10, serve, serve-mm")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 {
		return errors.New("-n must be at least 1")
	}
	tmp, err := os.MkdirTemp("", "startbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if *bin == "" {
		*bin = filepath.Join(tmp, "thinbot")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", *bin, "github.com/thinbot/thinbot/cmd/thinbot")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %w\n%s", err, out)
		}
	}
	bins := []string{*bin}
	if *vs != "" {
		bins = append(bins, *vs)
	}
	for i, b := range bins {
		if bins[i], err = filepath.Abs(b); err != nil {
			return err
		}
	}
	model := newModel()
	defer model.close()
	mm := fakemattermost.New(nil)
	defer mm.Close()
	alice := mm.AddUser("alice")
	mmChannel := mm.AddChannel("ops", mm.Bot.ID, alice.ID)

	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "case\tfigure\tbinary\tmedian\tmin\tmax\t\n")
	for _, c := range strings.Split(*cases, ",") {
		var m measure
		switch c {
		case "ask":
			m = func(ctx context.Context, bin, dir string) (sample, error) { return ask(ctx, model, bin, dir, 0) }
		case "ask10":
			m = func(ctx context.Context, bin, dir string) (sample, error) { return ask(ctx, model, bin, dir, 10) }
		case "serve":
			m = func(ctx context.Context, bin, dir string) (sample, error) { return serve(ctx, bin, dir, nil) }
		case "serve-mm":
			m = func(ctx context.Context, bin, dir string) (sample, error) {
				return serve(ctx, bin, dir, func(addr string) (string, error) {
					return mmConfig(dir, addr, mm.URL, mm.Bot.Token, mmChannel, alice.ID, model.srv.URL)
				})
			}
		default:
			return fmt.Errorf("unknown case %q", c)
		}
		runs, err := pairs(ctx, m, bins, filepath.Join(tmp, c), *n)
		if err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		report(tw, c, bins, runs)
	}
	return tw.Flush()
}

// sample is one run's figures, by name ("first request", "wall", ...);
// durations in milliseconds, peak in MiB.
type sample map[string]float64

// measure runs bin once in the workspace dir.
type measure func(ctx context.Context, bin, dir string) (sample, error)

// pairs runs m for each binary in turn, n times after a warm-up each: runs[b][i].
func pairs(ctx context.Context, m measure, bins []string, dir string, n int) ([][]sample, error) {
	runs := make([][]sample, len(bins))
	for i := -1; i < n; i++ {
		for b, bin := range bins {
			ws := filepath.Join(dir, fmt.Sprint(b))
			if err := os.MkdirAll(ws, 0o755); err != nil {
				return nil, err
			}
			s, err := m(ctx, bin, ws)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", bin, err)
			}
			if i >= 0 {
				runs[b] = append(runs[b], s)
			}
		}
	}
	return runs, nil
}

// report writes each figure's median, min and max per binary, and with two
// binaries the median of the pairs' ratios.
func report(w io.Writer, name string, bins []string, runs [][]sample) {
	var figures []string
	for f := range runs[0][0] {
		figures = append(figures, f)
	}
	slices.Sort(figures)
	label := []string{"A", "B"}
	for _, f := range figures {
		for b := range bins {
			var v []float64
			for _, s := range runs[b] {
				v = append(v, s[f])
			}
			med, lo, hi := stats(v)
			fmt.Fprintf(w, "%s\t%s\t%s\t%.1f\t%.1f\t%.1f\t\n", name, f, label[b], med, lo, hi)
		}
		if len(bins) == 2 {
			var r []float64
			for i := range runs[0] {
				if runs[1][i][f] > 0 {
					r = append(r, runs[0][i][f]/runs[1][i][f])
				}
			}
			med, lo, hi := stats(r)
			fmt.Fprintf(w, "%s\t%s\tA/B\t%.2f\t%.2f\t%.2f\t\n", name, f, med, lo, hi)
		}
	}
	if len(bins) == 2 {
		fmt.Fprintf(w, "\tA = %s\t\t\t\t\t\n\tB = %s\t\t\t\t\t\n", bins[0], bins[1])
	}
}

func stats(v []float64) (med, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	med = v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return med, v[0], v[len(v)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// peakMiB is the largest resident set of p and the children it waited for.
func peakMiB(p *os.ProcessState) float64 {
	if ru, ok := p.SysUsage().(*syscall.Rusage); ok {
		return float64(ru.Maxrss) / 1024 // KiB on Linux
	}
	return 0
}

// scriptedModel is the scripted model every ask run talks to: one run at a time,
// each with a script of its own, and the time its first request arrived.
type scriptedModel struct {
	srv *fakemodel.Server

	mu       sync.Mutex
	commands int       // the run's commands left to ask for
	first    time.Time // when the run's first request arrived
}

// readOnly are the ten commands of ask10: what someone checks first on a
// host, each passed by the gate.
var readOnly = []string{"uptime", "df -h", "free -m", "uname -a", "cat /proc/loadavg", "ls -la /", "date", "id", "hostname", "cat /etc/os-release"}

func newModel() *scriptedModel {
	m := &scriptedModel{}
	m.srv = fakemodel.NewFunc(m.reply)
	return m
}

func (m *scriptedModel) reply(fakemodel.Request) fakemodel.Reply {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.first.IsZero() {
		m.first = time.Now()
	}
	if m.commands == 0 {
		return fakemodel.Reply{Content: "All is well."}
	}
	c := readOnly[(len(readOnly)-m.commands)%len(readOnly)]
	m.commands--
	return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "run", Args: fmt.Sprintf(`{"command":%q,"reason":"health check"}`, c)}}}
}

// start readies the model for a run of commands steps.
func (m *scriptedModel) start(commands int) {
	m.mu.Lock()
	m.commands, m.first = commands, time.Time{}
	m.mu.Unlock()
}

func (m *scriptedModel) firstRequest() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.first
}

func (m *scriptedModel) close() { m.srv.Close() }

// environ is what every run gets: no variable of this process's, so that
// the user's config and skills play no part.
func environ(home string, extra ...string) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + home, "USER=bench", "LANG=C.UTF-8"}
	if v := os.Getenv("THINBOT_SANDBOX"); v != "" {
		env = append(env, "THINBOT_SANDBOX="+v)
	}
	return append(env, extra...)
}

// ask runs `thinbot ask` in dir with a model that asks for commands
// commands first.
func ask(ctx context.Context, m *scriptedModel, bin, dir string, commands int) (sample, error) {
	m.start(commands)
	cmd := exec.CommandContext(ctx, bin, "ask", "Is the host healthy?")
	cmd.Dir = dir
	cmd.Env = environ(dir, "AGENT_BASE_URL="+m.srv.URL, "AGENT_MODEL=bench")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("ask: %w\n%s", err, out.String())
	}
	wall := time.Since(t0)
	first := m.firstRequest()
	if first.IsZero() {
		return nil, fmt.Errorf("ask: no model request\n%s", out.String())
	}
	if commands > 0 {
		if n := strings.Count(out.String(), "[pass]"); n != commands {
			return nil, fmt.Errorf("ask: %d of %d commands passed\n%s", n, commands, out.String())
		}
		return sample{"wall ms": ms(wall), "peak MiB": peakMiB(cmd.ProcessState)}, nil
	}
	return sample{"first request ms": ms(first.Sub(t0)), "wall ms": ms(wall), "peak MiB": peakMiB(cmd.ProcessState)}, nil
}

// serve runs `thinbot serve` in dir until its /healthz answers, then
// stops it: with nothing configured, or with the config file config
// writes for the listen address.
func serve(ctx context.Context, bin, dir string, config func(addr string) (string, error)) (sample, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--listen", addr}
	if config != nil {
		path, err := config(addr)
		if err != nil {
			return nil, err
		}
		args = []string{"serve", "--config", path}
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = environ(dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	client := &http.Client{Timeout: time.Second}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(30 * time.Second)
	var up time.Duration
	for up == 0 {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("serve exited before /healthz answered: %v\n%s", err, out.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			<-exited
			return nil, fmt.Errorf("serve: no /healthz within 30 s\n%s", out.String())
		case <-time.After(time.Millisecond):
		}
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			up = time.Since(t0)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		return nil, fmt.Errorf("serve: %w\n%s", err, out.String())
	}
	return sample{"healthz ms": ms(up), "peak MiB": peakMiB(cmd.ProcessState)}, nil
}

// freePort returns a 127.0.0.1 address that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// mmConfig writes a daemon config for one Mattermost channel into dir and
// returns its path.
func mmConfig(dir, addr, mmURL, token, channel, approver, modelURL string) (string, error) {
	tokenFile := filepath.Join(dir, "mm.token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return "", err
	}
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return "", err
	}
	conf := fmt.Sprintf(`model: {base_url: %q, model: bench}
platform: mattermost
mattermost: {url: %q, token_file: %q, callback_url: "http://%s/hooks/mattermost/actions"}
listen: %q
state_dir: %q
channels:
  - {id: %q, workspace: %q, approvers: [%q]}
`, modelURL, mmURL, tokenFile, addr, addr, filepath.Join(dir, "state"), channel, ws, approver)
	path := filepath.Join(dir, "thinbot.yaml")
	return path, os.WriteFile(path, []byte(conf), 0o600)
}
