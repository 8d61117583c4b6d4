package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/datasource"
	"github.com/thinbot/thinbot/agentcore/openai"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// This file is the rig of the console's tests: a real store, a real Agent
// talking to the scripted model (tests/fakemodel), a real bot.Bot, and the
// Server on an httptest listener (127.0.0.1). Users are named by a trusted
// proxy header (the rig's client is the proxy): alice and bob are users and
// approvers, carol is a user only, audrey an auditor; the channel has the
// two-person rule, so alice cannot approve her own requests.

const waitTimeout = 20 * time.Second

// sleepCmd is the command /stop interrupts; its odd duration tells its
// process from other tests' sleeps.
const sleepCmd = "sleep 67.25"

// processRunning reports whether a process whose command line contains cmd
// exists (the /stop tests wait for the command to have started).
func processRunning(cmd string) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), cmd) {
			return true
		}
	}
	return false
}

// script is the model's side of every scenario, keyed by the user's words.
func script(req fakemodel.Request) fakemodel.Reply {
	var user string
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	last := req.Messages[len(req.Messages)-1]
	afterTool := last.Role == "tool"
	run := func(cmd, why string) fakemodel.Reply {
		args, _ := json.Marshal(map[string]string{"command": cmd, "reason": why})
		return fakemodel.Reply{Content: "Let me do that.", ToolCalls: []fakemodel.Call{{Name: "run", Args: string(args)}}}
	}
	switch {
	case strings.Contains(user, "StormHold"):
		// An alert's first look that holds its slot until the test ends.
		return fakemodel.Reply{Content: "Never shown.", Delay: time.Hour}
	case strings.Contains(user, "stream the disk report"):
		// Written over about 1.3 s: several stream ticks of a 400 ms
		// UpdateInterval see it being written.
		return fakemodel.Reply{Content: "The disk is fine: **42%** used on `/`, plenty of room left for the logs.",
			Fragment: 6, ChunkDelay: 100 * time.Millisecond}
	case strings.Contains(user, "check the disk"):
		return fakemodel.Reply{Content: "The disk is fine: **42%** used on `/`, plenty of room left for the logs.",
			Fragment: 6, ChunkDelay: 15 * time.Millisecond}
	case strings.Contains(user, "slowly create the marker") && !afterTool:
		// A second before the request: time for another user to write.
		r := run("echo ran >>approved.txt", "create the marker file you asked for")
		r.Delay = time.Second
		return r
	case strings.Contains(user, "create the marker") && afterTool:
		return fakemodel.Reply{Content: "Created `approved.txt`."}
	case strings.Contains(user, "create the marker"):
		return run("echo ran >>approved.txt", "create the marker file you asked for")
	case strings.Contains(user, "show the big log") && afterTool:
		return fakemodel.Reply{Content: "That was long."}
	case strings.Contains(user, "show the big log"):
		return run("seq 1 2000", "show the log")
	case strings.Contains(user, "query the metrics") && afterTool:
		return fakemodel.Reply{Content: "Queried."}
	case strings.Contains(user, "query the metrics"):
		return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "promql_range", Args: `{"query":"up"}`}}}
	case strings.Contains(user, "An alert fired and opened this thread") && strings.Contains(user, "HoldsTheLook"):
		return fakemodel.Reply{Content: "Never shown.", Delay: time.Hour} // holds the channel's first look
	case strings.Contains(user, "An alert fired and opened this thread") && strings.Contains(user, "NginxDown") && !afterTool:
		return run("git frobnicate --all", "look at the repository")
	case strings.Contains(user, "An alert fired and opened this thread") && strings.Contains(user, "NginxDown"):
		return fakemodel.Reply{Content: "Looked around. The alert says to follow [the fix](https://evil.example/fix) or https://evil.example/run-this."}
	case strings.Contains(user, "show me the links"):
		return fakemodel.Reply{Content: "The [runbook](https://runbooks.example.com/nginx/down) says restart; see also https://grafana.example.com/d/nginx-overview-for-the-whole-frontend-fleet-and-its-upstreams?orgId=1&from=now-6h. " +
			"Not links: [click me](javascript:alert(document.cookie)), [data](data:text/html,hi) and `https://in.a.code.span/`."}
	case strings.Contains(user, "break the model"):
		return fakemodel.Reply{Status: 500}
	case strings.Contains(user, "think hard"):
		return fakemodel.Reply{Content: "Never shown.", Delay: time.Hour}
	case strings.Contains(user, "write slowly"):
		return fakemodel.Reply{Content: "First words. " + strings.Repeat("and more ", 400) + "THE END.",
			Fragment: 9, ChunkDelay: 50 * time.Millisecond}
	case strings.Contains(user, "wait a minute") && afterTool:
		return fakemodel.Reply{Content: "Waited."}
	case strings.Contains(user, "wait a minute"):
		return run(sleepCmd, "wait as asked")
	}
	return fakemodel.Reply{Content: "I only know the test script."}
}

type rigOpts struct {
	// Auth, if set, replaces the rig's proxy auth.
	Auth *Auth
	// NoModel starts the console without a model.
	NoModel bool
	// ApprovalTimeout is the bot's; 0 means a minute.
	ApprovalTimeout time.Duration
	// UpdateInterval is the bot's; 0 means 40 ms.
	UpdateInterval time.Duration
	// Location is the bot's and the console's time zone; nil means UTC.
	Location *time.Location
	// Tokens are the console channel's token budgets.
	Tokens bot.TokenBudgets
	// Datasources are the agent's (its datasource tools).
	Datasources []*datasource.Source
	// Investigate starts an alert's first look (the rig's alert route).
	Investigate bool
	// Storm allows one first look at a time and one queued (Investigate).
	Storm bool
	// StateDir, if set, is a copy of another rig's state dir (events.db
	// and audit.jsonl) to start from, as a process started over the files
	// a killed one left.
	StateDir string
}

type rig struct {
	t       *testing.T
	dir     string // the workspace
	db      *store.DB
	auth    Auth
	problem string
	timeout time.Duration
	// interval is the bot's UpdateInterval.
	interval time.Duration
	ch       bot.Channel
	loc      *time.Location
	state    string // the store's dir
	look     bool   // the alert route's first look
	storm    bool   // one first look at a time, one queued

	// The running console; start replaces them.
	srv    *Server
	bot    *bot.Bot
	hs     *httptest.Server
	url    string
	alerts *httptest.Server // the alert receiver, routing to the console
	cancel context.CancelFunc
	done   chan struct{}
}

// rigAuth is the proxy auth of the rig: the loopback client is the proxy.
func rigAuth() Auth {
	return Auth{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Tokens:         map[string]string{"carol-token-0123456789": "carol"},
		Roles: map[string][]string{
			"alice": {RoleUser, RoleApprover}, "bob": {RoleUser, RoleApprover}, "carol": {RoleUser},
			"audrey": {RoleAuditor},
		},
	}
}

func newRig(t testing.TB, o rigOpts) *rig {
	t.Helper()
	tt, _ := t.(*testing.T)
	dir := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	if o.StateDir != "" {
		copyDir(t, o.StateDir, state)
	}
	db, err := store.Open(filepath.Join(state, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var model agentcore.Model
	problem := ""
	if o.NoModel {
		problem = "Set AGENT_BASE_URL and AGENT_MODEL and restart."
		model = openailess{}
	} else {
		fm := fakemodel.NewFunc(script)
		t.Cleanup(fm.Close)
		model, err = openai.New(openai.Config{BaseURL: fm.URL, Model: "test-model", MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
	}
	ag, err := agentcore.New(agentcore.Config{Store: db, Model: model, Policy: gate.DefaultPolicy(),
		Exec: agentcore.ExecConfig{Environ: []string{"PATH=" + os.Getenv("PATH")}}, Datasources: o.Datasources})
	if err != nil {
		t.Fatal(err)
	}
	auth := rigAuth()
	if o.Auth != nil {
		auth = *o.Auth
	}
	if o.UpdateInterval == 0 {
		o.UpdateInterval = 40 * time.Millisecond
	}
	if o.ApprovalTimeout == 0 {
		o.ApprovalTimeout = time.Minute
	}
	approvers := []string{"alice", "bob"}
	if auth.open() {
		approvers = []string{"local"}
	}
	r := &rig{t: tt, dir: dir, db: db, auth: auth, state: state, look: o.Investigate || o.Storm, storm: o.Storm, problem: problem, timeout: o.ApprovalTimeout, interval: o.UpdateInterval, loc: o.Location,
		ch: bot.Channel{Agent: ag, Workspace: dir, Approvers: approvers, TwoPerson: !auth.open(), Tokens: o.Tokens}}
	r.start(t)
	t.Cleanup(func() {
		r.stop()
		db.Close()
	})
	return r
}

// alertToken is the bearer token of the rig's alert receiver.
const alertToken = "rig-alert-token-0123456789"

// start starts the console and its bot as cmd/thinbot does: what the
// previous process left open is closed in the chain (agentcore.Recover)
// before the console rebuilds its threads, the bot knows the chain's
// sessions, message ids and alert groups, and it tells the threads what
// the restart closed (bot.Recover).
func (r *rig) start(t testing.TB) {
	t.Helper()
	unfinished, err := agentcore.Recover(r.db)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listen: "127.0.0.1:0", Auth: r.auth, Chain: r.db, Chat: true, ModelProblem: r.problem, Location: r.loc})
	if err != nil {
		t.Fatal(err)
	}
	sessions, seen, err := agentcore.Sessions(r.db)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Config{Adapter: srv, Channel: func(id string) (bot.Channel, bool) { return r.ch, id == "console" },
		UpdateInterval: r.interval, ApprovalTimeout: r.timeout, Sessions: sessions, Seen: seen, Location: r.loc})
	if err != nil {
		t.Fatal(err)
	}
	groups, deliveries, err := agentcore.AlertGroups(r.db, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	limit := 0 // the default
	if r.storm {
		limit = 1
	}
	recv, err := bot.NewAlertReceiver(bot.AlertsConfig{Token: []byte(alertToken), Platform: Platform, Groups: groups, Deliveries: deliveries, MaxPerChannel: limit, MaxQueued: limit,
		Routes: []bot.AlertRoute{{Name: "console", Channel: "console", Investigate: r.look}}}, map[string]*bot.Bot{Platform: b})
	if err != nil {
		t.Fatal(err)
	}
	b.Recover(context.Background(), unfinished)
	r.srv, r.bot = srv, b
	r.hs = httptest.NewServer(srv.Handler())
	r.url = r.hs.URL
	r.alerts = httptest.NewServer(recv)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		if err := b.Run(ctx); err != nil {
			t.Errorf("bot run: %v", err)
		}
	}()
	waitFor(t, "the console to run", srv.Connected)
}

func (r *rig) stop() {
	r.cancel()
	<-r.done
	r.hs.CloseClientConnections()
	r.hs.Close()
	r.alerts.Close()
}

// copyDir copies the files of from (not its sub-directories) into a new
// directory to.
func copyDir(t testing.TB, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// alert delivers an Alertmanager webhook body (version 4) to the rig's
// alert receiver over HTTP and fails the test unless it is accepted.
func (r *rig) alert(body string) {
	r.t.Helper()
	req, err := http.NewRequest("POST", r.alerts.URL, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+alertToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("alert delivery: %d %s", resp.StatusCode, b)
	}
}

// restart stops the console and starts a new one on the same chain.
func (r *rig) restart(t testing.TB) {
	t.Helper()
	r.stop()
	r.start(t)
}

// openailess is the model of a console without one.
type openailess struct{}

func (openailess) Complete(context.Context, agentcore.Request) (agentcore.Response, error) {
	return agentcore.Response{}, context.Canceled
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// do sends a request as user (through the "proxy"); body is JSON.
func (r *rig) do(user, method, path, body string) (int, string) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.url+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	if user != "" {
		req.Header.Set("X-Forwarded-User", user)
	}
	if method != http.MethodGet {
		req.Header.Set("Origin", r.url)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var noRedirect = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// posts returns a copy of a thread's posts as the server holds them.
func (r *rig) posts(tid string) []wpost {
	r.srv.mu.Lock()
	defer r.srv.mu.Unlock()
	th := r.srv.threads[tid]
	if th == nil {
		return nil
	}
	out := make([]wpost, len(th.posts))
	for i, p := range th.posts {
		out[i] = *p
	}
	return out
}

// waitPost waits for a post in tid whose text contains want.
func (r *rig) waitPost(tid, want string) wpost {
	r.t.Helper()
	var found wpost
	waitFor(r.t, "a post containing "+want, func() bool {
		for _, p := range r.posts(tid) {
			if strings.Contains(p.Text, want) && !p.Streaming {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// newThread starts a thread as user and returns its id.
func (r *rig) newThread(user, text string) string {
	r.t.Helper()
	code, body := r.do(user, "POST", "/api/threads", `{"text":`+quote(text)+`}`)
	if code != http.StatusCreated {
		r.t.Fatalf("new thread: %d %s", code, body)
	}
	var v struct{ ID string }
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		r.t.Fatal(err)
	}
	return v.ID
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// sse reads a thread's event stream as user, collecting events until
// stop is closed or the stream ends.
type sseReader struct {
	mu     sync.Mutex
	events []event
}

func (r *rig) follow(user, tid string) *sseReader {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", r.url+"/api/threads/"+tid+"/events", nil)
	req.Header.Set("X-Forwarded-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	s := &sseReader{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev event
			if json.Unmarshal([]byte(line), &ev) == nil {
				s.mu.Lock()
				s.events = append(s.events, ev)
				s.mu.Unlock()
			}
		}
	}()
	r.t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return s
}

func (s *sseReader) snapshot() []event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]event(nil), s.events...)
}
