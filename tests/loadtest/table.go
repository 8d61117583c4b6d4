package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/thinbot/thinbot/store"
)

// Row is one line of the issue #23 table: how long start-up, the audit
// viewer's pages and `thinbot audit verify` take on a store of Events
// events. Each page time is its first request after start-up (what an
// auditor who opens the viewer waits for).
type Row struct {
	Events    int
	Gen       time.Duration // building the store (0: it existed)
	Bytes     int64         // events.db + audit.jsonl
	Start     time.Duration // `thinbot serve` start to /healthz answering
	Sessions  time.Duration
	Approvals time.Duration
	Chain     time.Duration
	Verify    time.Duration // `thinbot audit verify --db`
	VerifyCPU time.Duration // its user+system CPU time (on a shared machine wall time varies; CPU less)
	StartCPU  time.Duration // the daemon's CPU time up to /healthz
	Session   time.Duration // one session's page
	Threads   time.Duration // the console's thread list
	Problems  []string
}

// Table builds (once, under dir/N) a store of each size and measures it
// reps times (at least once), keeping the median of each figure: on a
// shared machine one measurement is noise.
func Table(ctx context.Context, bin, dir string, sizes []int, reps int, log io.Writer) ([]Row, error) {
	var rows []Row
	for _, n := range sizes {
		d := filepath.Join(dir, strconv.Itoa(n))
		var row Row
		row.Events = n
		if _, err := os.Stat(filepath.Join(d, "state", "events.db")); err != nil {
			fmt.Fprintf(log, "generating %d events in %s\n", n, d)
			took, err := Generate(ctx, filepath.Join(d, "state"), n)
			if err != nil {
				return rows, err
			}
			row.Gen = took
			fmt.Fprintf(log, "generated in %s\n", took.Round(time.Millisecond))
		}
		var runs []Row
		for i := range max(reps, 1) {
			r := row
			if err := measure(ctx, bin, d, &r, i == 0); err != nil {
				return rows, fmt.Errorf("%d events: %w", n, err)
			}
			runs = append(runs, r)
		}
		rows = append(rows, median(runs))
	}
	return rows, nil
}

// median is the run with each figure the median of the runs' (the
// problems of all of them).
func median(runs []Row) Row {
	out := runs[0]
	pick := func(get func(*Row) *time.Duration) {
		var ds []time.Duration
		for i := range runs {
			if d := *get(&runs[i]); d > 0 {
				ds = append(ds, d)
			}
		}
		if len(ds) > 0 {
			slices.Sort(ds)
			*get(&out) = ds[len(ds)/2]
		}
	}
	for _, f := range []func(*Row) *time.Duration{
		func(r *Row) *time.Duration { return &r.Start }, func(r *Row) *time.Duration { return &r.StartCPU },
		func(r *Row) *time.Duration { return &r.Sessions }, func(r *Row) *time.Duration { return &r.Approvals },
		func(r *Row) *time.Duration { return &r.Chain }, func(r *Row) *time.Duration { return &r.Session },
		func(r *Row) *time.Duration { return &r.Threads },
	} {
		pick(f)
	}
	out.Problems = nil
	for _, r := range runs {
		out.Problems = append(out.Problems, r.Problems...)
	}
	return out
}

// measure starts the daemon on dir's store, times start-up and the pages,
// stops it and, if verify, times `thinbot audit verify --db`.
func measure(ctx context.Context, bin, dir string, row *Row, verify bool) error {
	state := filepath.Join(dir, "state")
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return err
	}
	for _, f := range []string{"events.db", "audit.jsonl"} {
		if st, err := os.Stat(filepath.Join(state, f)); err == nil {
			row.Bytes += st.Size()
		}
	}
	// A session to open: the newest one, read before the daemon holds
	// the store.
	db, err := store.Open(filepath.Join(state, "events.db"), &store.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	infos, err := db.Sessions()
	db.Close()
	if err != nil || len(infos) == 0 {
		return fmt.Errorf("no sessions in the store (%v)", err)
	}
	// The newest conversation.
	var sid string
	for i := len(infos) - 1; i >= 0; i-- {
		if sid = infos[i].ID; sid != store.ArchiveSession && !strings.HasPrefix(sid, "system:") {
			break // an archive's record and the checkpoints are no conversation
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--listen", addr, "--state-dir", state)
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "THINBOT_SANDBOX=off"}
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	}()
	base := "http://" + addr
	client := &http.Client{Timeout: 5 * time.Minute}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := client.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("daemon exited: %v (see %s)", err, logf.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("no /healthz within 5 minutes")
		}
	}
	row.Start = time.Since(start)
	row.StartCPU = procCPU(cmd.Process.Pid)
	get := func(path string, out *time.Duration, want string) {
		t := time.Now()
		resp, err := client.Get(base + path)
		if err != nil {
			row.Problems = append(row.Problems, fmt.Sprintf("%s: %v", path, err))
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		*out = time.Since(t)
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte(want)) {
			row.Problems = append(row.Problems, fmt.Sprintf("%s: status %d, %q not in the page", path, resp.StatusCode, want))
		}
	}
	get("/audit", &row.Sessions, "session")
	get("/audit/approvals", &row.Approvals, "approval")
	get("/audit/verify", &row.Chain, "verif")
	get("/audit/session?id="+url.QueryEscape(sid), &row.Session, "Message from")
	get("/api/threads", &row.Threads, "")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			return fmt.Errorf("daemon exit: %v (see %s)", err, logf.Name())
		}
	case <-time.After(2 * time.Minute):
		return errors.New("daemon did not stop")
	}
	if !verify {
		return nil
	}
	t := time.Now()
	vc := exec.CommandContext(ctx, bin, "audit", "verify", "--db", filepath.Join(state, "events.db"))
	out, err := vc.CombinedOutput()
	row.Verify = time.Since(t)
	if vc.ProcessState != nil {
		row.VerifyCPU = vc.ProcessState.UserTime() + vc.ProcessState.SystemTime()
	}
	if err != nil {
		row.Problems = append(row.Problems, fmt.Sprintf("audit verify: %v: %s", err, strings.TrimSpace(string(out))))
	}
	return nil
}

// procCPU is a process's user+system CPU time so far, from
// /proc/PID/stat (0 where unknown).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// printTable writes the rows as the table.
func printTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "events\tstart→/healthz (cpu)\tSessions\tApprovals\tChain\taudit verify --db (cpu)\tsession page\tthread list\tdisk\tbuilt in\t\n")
	for _, r := range rows {
		gen := "-"
		if r.Gen > 0 {
			gen = r.Gen.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%d\t%s (%s)\t%s\t%s\t%s\t%s (%s)\t%s\t%s\t%s\t%s\t\n", r.Events, ms(r.Start), ms(r.StartCPU), ms(r.Sessions), ms(r.Approvals), ms(r.Chain),
			ms(r.Verify), ms(r.VerifyCPU), ms(r.Session), ms(r.Threads), mib(r.Bytes), gen)
	}
	tw.Flush()
	for _, r := range rows {
		for _, p := range r.Problems {
			fmt.Fprintf(w, "%d events: PROBLEM: %s\n", r.Events, p)
		}
	}
}
