package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// Server is one configured MCP server: a stdio Command or a streamable
// HTTP URL.
type Server struct {
	// Name prefixes the server's tool names (Tool.Name): lowercase
	// letters, digits and '-', starting with a letter or digit.
	Name string
	// Command is the program and its arguments; Command[0] must be an
	// absolute path. It runs in Dir ("" means /) with exactly Env.
	Command []string
	Dir     string
	Env     []string
	// URL is a streamable HTTP endpoint, instead of Command; Headers go
	// with every request (an Authorization header, say).
	URL     string
	Headers map[string]string
	// ReadOnly marks every tool of the server read-only, ReadOnlyTools
	// the tools named (the server's own names). A read-only tool runs
	// without an approval, in the ReadOnly tier; the server's own
	// readOnlyHint counts for nothing here.
	ReadOnly      bool
	ReadOnlyTools []string
	// Timeout bounds each call; 0 means 60s. A start (the process, the
	// handshake, the tool list) may take Timeout or a minute, whichever
	// is longer: a loaded host starts slowly.
	Timeout time.Duration
}

// Config configures a Set. The zero value has no servers.
type Config struct {
	Servers []Server
	// MaxResult bounds one message from a server (a tool's result, as
	// JSON) in bytes; 0 means 4 MiB. A larger one stops the server.
	MaxResult int
	// Logger gets the servers' state changes; nil means discard.
	Logger *slog.Logger
}

// Tool is a tool of a server as the model is offered it.
type Tool struct {
	// Name is what the model calls: the server's name, "__" and the
	// tool's name with every byte outside [A-Za-z0-9_-] made '_'.
	Name   string
	Server string
	// Tool is the server's own name of the tool.
	Tool        string
	Description string
	// InputSchema is the tool's JSON schema of its arguments.
	InputSchema json.RawMessage
	// ReadOnly reports that the config marks the tool read-only.
	ReadOnly bool
	// ReadOnlyHint is what the server says (annotations.readOnlyHint):
	// shown to the approver, never trusted.
	ReadOnlyHint bool
	// Remote reports a streamable HTTP server (no local process, no
	// sandbox tier).
	Remote bool
}

// Result is how a call ended, when the server answered.
type Result struct {
	// Text is the result's content as text: text parts as they are,
	// other parts as a line saying what they are, structured content as
	// JSON when there is no other.
	Text string
	// IsError reports that the tool said it failed.
	IsError bool
	// Size and SHA256 are of Text.
	Size   int
	SHA256 string
}

// Runner starts a command in a sandbox tier and waits for it:
// *sandbox.Sandbox is one.
type Runner interface {
	Run(ctx context.Context, m sandbox.Mode, c sandbox.Cmd, out io.Writer) (sandbox.Result, error)
}

// Set is the configured servers and their processes. Its methods may be
// called concurrently.
type Set struct {
	cfg     Config
	log     *slog.Logger
	servers map[string]*server
	order   []string

	mu    sync.Mutex
	tools map[string]Tool // by Tool.Name
}

type server struct {
	cfg Server
	// err is why the server offers no tools (Start).
	err error

	mu    sync.Mutex
	conns map[sandbox.Mode]*conn
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// New checks cfg and returns a Set with no server started.
func New(cfg Config) (*Set, error) {
	if cfg.MaxResult <= 0 {
		cfg.MaxResult = 4 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Set{cfg: cfg, log: cfg.Logger, servers: map[string]*server{}, tools: map[string]Tool{}}
	var errs []error
	for _, sc := range cfg.Servers {
		if err := CheckServer(sc); err != nil {
			errs = append(errs, err)
			continue
		}
		if s.servers[sc.Name] != nil {
			errs = append(errs, fmt.Errorf("mcp server %s: named twice", sc.Name))
			continue
		}
		if sc.Timeout <= 0 {
			sc.Timeout = 60 * time.Second
		}
		s.servers[sc.Name] = &server{cfg: sc, conns: map[sandbox.Mode]*conn{}}
		s.order = append(s.order, sc.Name)
	}
	return s, errors.Join(errs...)
}

// CheckServer reports what is wrong with a server's configuration, or nil.
func CheckServer(sc Server) error {
	switch {
	case !namePattern.MatchString(sc.Name):
		return fmt.Errorf("mcp server %q: the name must be lowercase letters, digits and '-'", sc.Name)
	case len(sc.Command) > 0 && sc.URL != "":
		return fmt.Errorf("mcp server %s: set command or url, not both", sc.Name)
	case len(sc.Command) == 0 && sc.URL == "":
		return fmt.Errorf("mcp server %s: set command (stdio) or url (streamable HTTP)", sc.Name)
	case len(sc.Command) > 0 && !strings.HasPrefix(sc.Command[0], "/"):
		return fmt.Errorf("mcp server %s: command %q is not an absolute path", sc.Name, sc.Command[0])
	case sc.URL != "" && !strings.HasPrefix(sc.URL, "http://") && !strings.HasPrefix(sc.URL, "https://"):
		return fmt.Errorf("mcp server %s: url %q is not an http(s) URL", sc.Name, sc.URL)
	}
	return nil
}

// Start connects to every server (a stdio server in the ReadOnly tier,
// through r) and lists its tools. A server that fails offers no tools;
// Problems says why. It returns once every server has answered or timed
// out.
func (s *Set) Start(ctx context.Context, r Runner) {
	var wg sync.WaitGroup
	for _, name := range s.order {
		sv := s.servers[name]
		wg.Go(func() {
			tools, err := s.list(ctx, sv, r)
			if err != nil {
				sv.err = err
				s.log.Warn("mcp server offers no tools", "server", sv.cfg.Name, "err", err)
				return
			}
			s.mu.Lock()
			for _, t := range tools {
				s.tools[t.Name] = t
			}
			s.mu.Unlock()
			s.log.Info("mcp server ready", "server", sv.cfg.Name, "tools", len(tools))
		})
	}
	wg.Wait()
}

// list starts sv's ReadOnly connection and reads its tools.
func (s *Set) list(ctx context.Context, sv *server, r Runner) ([]Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout(sv.cfg))
	defer cancel()
	c, err := s.conn(ctx, sv, r, sandbox.ReadOnly)
	if err != nil {
		return nil, err
	}
	var tools []Tool
	seen := map[string]bool{}
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			s.drop(sv, sandbox.ReadOnly, c)
			return nil, c.explain(fmt.Errorf("list tools: %w", err))
		}
		name := sv.cfg.Name + "__" + toolName(t.Name)
		if len(name) > 64 || seen[name] {
			s.log.Warn("mcp tool left out: its name is too long or not unique", "server", sv.cfg.Name, "tool", t.Name)
			continue
		}
		seen[name] = true
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = []byte(`{"type":"object"}`)
		}
		tools = append(tools, Tool{Name: name, Server: sv.cfg.Name, Tool: t.Name, Description: t.Description, InputSchema: schema,
			ReadOnly:     sv.cfg.ReadOnly || slices.Contains(sv.cfg.ReadOnlyTools, t.Name),
			ReadOnlyHint: t.Annotations != nil && t.Annotations.ReadOnlyHint, Remote: sv.cfg.URL != ""})
	}
	for _, n := range sv.cfg.ReadOnlyTools {
		if !slices.ContainsFunc(tools, func(t Tool) bool { return t.Tool == n }) {
			s.log.Warn("mcp read_only_tools names a tool the server does not offer", "server", sv.cfg.Name, "tool", n)
		}
	}
	return tools, nil
}

// startTimeout bounds a server's start (Server.Timeout).
func startTimeout(sc Server) time.Duration { return max(sc.Timeout, time.Minute) }

func toolName(n string) string {
	b := []byte(n)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Tools returns the tools of every server that started, ordered by name
// (the model's tool list must not change between calls).
func (s *Set) Tools() []Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Tool, 0, len(s.tools))
	for _, t := range s.tools {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Tool returns the tool the model calls name.
func (s *Set) Tool(name string) (Tool, bool) {
	if s == nil {
		return Tool{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tools[name]
	return t, ok
}

// Problems says, per server that offers no tools, why; call it after
// Start.
func (s *Set) Problems() map[string]string {
	out := map[string]string{}
	for name, sv := range s.servers {
		if sv.err != nil {
			out[name] = sv.err.Error()
		}
	}
	return out
}

// Call calls tool t with args (a JSON object) in tier m (a remote server
// has none), starting the tier's process through r if it is not running.
// It blocks until the server answers, the server's Timeout, or ctx's end.
// An error means the call failed (the server did not start, crashed, did
// not answer in time, answered too much, or refused the call); it says
// what happened and is meant for the model and the record.
func (s *Set) Call(ctx context.Context, r Runner, m sandbox.Mode, t Tool, args json.RawMessage) (Result, error) {
	sv := s.servers[t.Server]
	if sv == nil {
		return Result{}, fmt.Errorf("mcp server %s is not configured", t.Server)
	}
	if sv.cfg.URL != "" {
		m = sandbox.Approved // one connection
	}
	sctx, cancelStart := context.WithTimeout(ctx, startTimeout(sv.cfg))
	c, err := s.conn(sctx, sv, r, m)
	cancelStart()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, sv.cfg.Timeout)
	defer cancel()
	res, err := c.session.CallTool(ctx, &sdk.CallToolParams{Name: t.Tool, Arguments: args})
	if err != nil {
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return Result{}, fmt.Errorf("the server refused the call: %s", rpcErr.Message)
		}
		// The connection is of no further use: a late answer would
		// meet no caller, a hung server stays hung.
		s.drop(sv, m, c)
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return Result{}, c.stderrOf(fmt.Errorf("no answer within %s; the server was stopped (it starts again at the next call)", sv.cfg.Timeout))
		case ctx.Err() != nil:
			return Result{}, fmt.Errorf("cancelled; the server was stopped: %w", ctx.Err())
		}
		return Result{}, c.explain(err)
	}
	text := render(res)
	sum := sha256.Sum256([]byte(text))
	return Result{Text: text, IsError: res.IsError, Size: len(text), SHA256: hex.EncodeToString(sum[:])}, nil
}

// render is a result's content as text.
func render(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link %s]", c.URI))
		case *sdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s, %d bytes]", c.Resource.URI, len(c.Resource.Blob)))
			}
		default:
			b, _ := json.Marshal(c)
			parts = append(parts, string(b))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		parts = append(parts, string(b))
	}
	return strings.Join(parts, "\n")
}

// Close stops every server process and connection.
func (s *Set) Close() error {
	var errs []error
	for _, sv := range s.servers {
		sv.mu.Lock()
		conns := sv.conns
		sv.conns = map[sandbox.Mode]*conn{}
		sv.mu.Unlock()
		for _, c := range conns {
			errs = append(errs, c.close())
		}
	}
	return errors.Join(errs...)
}

// conn returns sv's live connection of tier m, or starts one.
func (s *Set) conn(ctx context.Context, sv *server, r Runner, m sandbox.Mode) (*conn, error) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if c := sv.conns[m]; c != nil {
		if !c.exited() {
			return c, nil
		}
		_ = c.close()
		delete(sv.conns, m)
	}
	c, err := s.dial(ctx, sv.cfg, r, m)
	if err != nil {
		return nil, err
	}
	sv.conns[m] = c
	return c, nil
}

func (s *Set) drop(sv *server, m sandbox.Mode, c *conn) {
	sv.mu.Lock()
	if sv.conns[m] == c {
		delete(sv.conns, m)
	}
	sv.mu.Unlock()
	_ = c.close()
}

// conn is one connection to a server: for a stdio server, its process.
type conn struct {
	session *sdk.ClientSession
	// stop ends the process (stdio); done is closed once it has exited
	// and exit says how.
	stop   context.CancelFunc
	done   chan struct{}
	exit   string
	stderr *tail
}

func (c *conn) exited() bool {
	if c.done == nil {
		return false
	}
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// explain adds to err how the process ended and the end of its standard
// error. The connection must be closed (or its process have exited).
func (c *conn) explain(err error) error {
	if c.done != nil {
		<-c.done
		err = fmt.Errorf("%w (the server %s)", err, c.exit)
	}
	return c.stderrOf(err)
}

// stderrOf adds to err the end of the server's standard error.
func (c *conn) stderrOf(err error) error {
	if t := c.stderr.String(); t != "" {
		err = fmt.Errorf("%w; its stderr ends: %s", err, t)
	}
	return err
}

// close stops the process first (a hung server would hold a graceful
// close), then the session.
func (c *conn) close() error {
	if c.stop != nil {
		c.stop()
		<-c.done
	}
	err := c.session.Close()
	if errors.Is(err, sdk.ErrConnectionClosed) || c.done != nil {
		// The process is gone or stopped: that is how it was closed.
		err = nil
	}
	return err
}

func client() *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "thinbot", Version: "1"}, &sdk.ClientOptions{Capabilities: &sdk.ClientCapabilities{}})
}

// dial connects to sc: over HTTP, or by starting its command in tier m.
func (s *Set) dial(ctx context.Context, sc Server, r Runner, m sandbox.Mode) (*conn, error) {
	if sc.URL != "" {
		hc := &http.Client{Transport: headers{h: sc.Headers, max: int64(s.cfg.MaxResult), next: http.DefaultTransport}}
		t := &sdk.StreamableClientTransport{Endpoint: sc.URL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true, MaxEventSize: s.cfg.MaxResult}
		cs, err := client().Connect(ctx, t, nil)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", sc.URL, err)
		}
		return &conn{session: cs, stderr: &tail{}}, nil
	}
	if r == nil {
		r = localRunner{}
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	outR, outW := io.Pipe()
	// The process lives until the connection is closed, not until the
	// call that started it ends.
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &conn{stop: stop, done: make(chan struct{}), stderr: &tail{}}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(c.stderr, errR)
		errR.Close()
	}()
	go func() {
		res, err := r.Run(pctx, m, sandbox.Cmd{Args: sc.Command, Dir: sc.Dir, Env: sc.Env, Stdin: inR, Stderr: errW}, outW)
		inR.Close()
		errW.Close()
		switch {
		case err != nil:
			c.exit = "could not start: " + err.Error()
		case res.Killed:
			c.exit = "was stopped"
		case res.Signal != 0:
			c.exit = fmt.Sprintf("was killed by signal %d", res.Signal)
		default:
			c.exit = fmt.Sprintf("exited with code %d", res.ExitCode)
		}
		if res.Limit != "" {
			c.exit += " (" + res.Limit + ")"
		}
		outW.Close()
		<-copied
		close(c.done)
	}()
	t := &sdk.IOTransport{Reader: outR, Writer: inW, MaxLineLength: s.cfg.MaxResult}
	cs, err := client().Connect(ctx, t, nil)
	if err != nil {
		stop()
		<-c.done
		inW.Close()
		return nil, c.explain(fmt.Errorf("start %s (%s tier): %w", sc.Name, m, err))
	}
	c.session = cs
	return c, nil
}

// headers adds configured headers to every request, and bounds a JSON
// answer to max bytes: the SDK reads one whole (an event stream's events
// it bounds itself, MaxEventSize).
type headers struct {
	h    map[string]string
	max  int64
	next http.RoundTripper
}

func (h headers) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		req = req.Clone(req.Context())
		for k, v := range h.h {
			req.Header.Set(k, v)
		}
	}
	resp, err := h.next.RoundTrip(req)
	if err == nil && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: h.max}
	}
	return resp, err
}

// limitedBody fails a read past its limit.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

var errTooLarge = errors.New("the server's answer exceeded the configured maximum size")

// tail keeps the last bytes written to it (a server's stderr).
type tail struct {
	mu sync.Mutex
	b  []byte
}

const tailBytes = 1024

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailBytes {
		t.b = t.b[len(t.b)-tailBytes:]
	}
	return len(p), nil
}

// String is the kept bytes on one line.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(strings.Fields(string(t.b)), " ")
}

// localRunner runs a server as a plain child process in a process group
// of its own: the tier is not enforced (there is no sandbox).
type localRunner struct{}

func (localRunner) Run(ctx context.Context, _ sandbox.Mode, c sandbox.Cmd, out io.Writer) (sandbox.Result, error) {
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Dir, c.Env, c.Stdin, out, c.Stderr
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A child that keeps stdout open must not hold Wait.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return sandbox.Result{}, err
	}
	done, killed := make(chan struct{}), make(chan bool, 1)
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			killed <- true
		case <-done:
			killed <- false
		}
	}()
	err := cmd.Wait()
	close(done)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res := sandbox.Result{ExitCode: cmd.ProcessState.ExitCode(), Killed: <-killed}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = int(ws.Signal())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, err
	}
	return res, nil
}
