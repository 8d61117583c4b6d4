package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
)

// fakeCaller stands for a bot.ExternalThread: it records the calls and
// answers them, or, for "wait", blocks until the call's ctx ends.
type fakeCaller struct {
	mu      sync.Mutex
	calls   []agentcore.ExternalCall
	waiting chan struct{} // closed when a "wait" call blocks
	ended   chan error    // the ctx error a "wait" call ended with
	stop    chan struct{} // closed when the test ends: a "wait" call gives up
}

func (f *fakeCaller) Call(ctx context.Context, text string, c agentcore.ExternalCall) (agentcore.ExternalResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if c.Command == "wait" {
		close(f.waiting)
		select {
		case <-ctx.Done():
		case <-f.stop:
			return agentcore.ExternalResult{}, errors.New("the test ended")
		}
		f.ended <- ctx.Err()
		return agentcore.ExternalResult{Result: agentcore.Result{Status: agentcore.StatusCancelled}, Content: "not run: cancelled", IsError: true}, ctx.Err()
	}
	return agentcore.ExternalResult{Content: "ran " + c.Command + c.Path + " for " + text}, nil
}

// daemon serves Handler with tokens ci and other; opened records who
// opened sessions.
func daemon(t *testing.T, fc *fakeCaller) (*httptest.Server, *[]bot.User) {
	t.Helper()
	var mu sync.Mutex
	var opened []bot.User
	srv := httptest.NewServer(Handler(Config{
		Open: func(_ context.Context, who bot.User, title string) (Caller, error) {
			mu.Lock()
			defer mu.Unlock()
			opened = append(opened, who)
			if !strings.Contains(title, who.Name) {
				t.Errorf("title %q does not name the client %q", title, who.Name)
			}
			return fc, nil
		},
		Tokens: func() []Token {
			return []Token{{Name: "ci", Secret: "ci-secret-0123456789"}, {Name: "other", Secret: "other-secret-0123456789"}}
		},
		ProgressEvery: 10 * time.Millisecond,
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(fc.stop) }) // first: a call left waiting gives up
	return srv, &opened
}

// proxied starts Proxy on pipes and connects an SDK client to it as
// "codex"; closing the returned writer is the client going away.
func proxied(t *testing.T, url, token string, opts ...*mcp.ClientOptions) (*mcp.ClientSession, io.Closer, <-chan error) {
	t.Helper()
	cin, pout := io.Pipe() // proxy -> client
	pin, cout := io.Pipe() // client -> proxy
	done := make(chan error, 1)
	go func() {
		done <- Proxy(t.Context(), ProxyConfig{URL: url, Token: token, In: pin, Out: pout})
		pout.Close()
	}()
	var o *mcp.ClientOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "codex"}, o)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: cin, Writer: cout}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, cout, done
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The proxy offers run and read_file and forwards each call to the
// daemon's endpoint under the client's name, in one session of the
// token's identity.
func TestProxyForwards(t *testing.T) {
	fc := &fakeCaller{waiting: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv, opened := daemon(t, fc)
	cs, closer, done := proxied(t, srv.URL, "ci-secret-0123456789")
	tools, err := cs.ListTools(t.Context(), nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools %+v, %v", tools, err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "uptime", "reason": "load"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "ran uptime") || !strings.Contains(text(res), "codex") {
		t.Fatalf("run = %+v %q, %v", res, text(res), err)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/etc/hostname"}})
	if err != nil || res.IsError || !strings.Contains(text(res), "ran /etc/hostname") {
		t.Fatalf("read_file = %+v, %v", res, err)
	}
	if len(*opened) != 1 || (*opened)[0] != (bot.User{ID: "mcp:ci", Name: "codex"}) {
		t.Errorf("sessions opened %+v, want one as mcp:ci for codex", *opened)
	}
	closer.Close()
	if err := <-done; err != nil {
		t.Errorf("Proxy = %v after the client closed", err)
	}
}

// A client that goes away while its call waits (for an approval): the call
// is cancelled on the daemon's side, and the proxy returns.
func TestProxyClientGoneCancelsTheCall(t *testing.T) {
	fc := &fakeCaller{waiting: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv, _ := daemon(t, fc)
	cs, closer, done := proxied(t, srv.URL, "ci-secret-0123456789")
	go cs.CallTool(context.WithoutCancel(t.Context()), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "wait"}})
	<-fc.waiting
	closer.Close()
	// Bounded, so that a call nobody cancels fails the test rather than
	// hanging it.
	bound, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case err := <-fc.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the waiting call ended with %v, want cancelled", err)
		}
	case <-bound.Done():
		t.Fatal("the call still waits after its client went away")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Proxy = %v", err)
		}
	case <-bound.Done():
		t.Fatal("Proxy still runs after its client went away")
	}
}

// A wrong token reaches nothing: the proxy's call is an error result.
func TestProxyWrongToken(t *testing.T) {
	fc := &fakeCaller{waiting: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv, opened := daemon(t, fc)
	cs, closer, _ := proxied(t, srv.URL, "ci-secret-0123456789x")
	defer closer.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "uptime"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "could not reach") {
		t.Fatalf("run with a wrong token = %+v, %v", res, err)
	}
	if len(*opened) != 0 || len(fc.calls) != 0 {
		t.Errorf("a wrong token opened %v, called %v", *opened, fc.calls)
	}
}

// A client that ends its session (DELETE) while a call of it waits: the
// call is cancelled, so an approval given later runs nothing.
func TestSessionEndCancelsTheWaitingCall(t *testing.T) {
	fc := &fakeCaller{waiting: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv, _ := daemon(t, fc)
	hc := &http.Client{Transport: bearer{token: "ci-secret-0123456789"}}
	c := mcp.NewClient(&mcp.Implementation{Name: "raw"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go cs.CallTool(context.WithoutCancel(t.Context()), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "wait"}})
	<-fc.waiting
	// The DELETE as the client sends it (the SDK's Close waits for its
	// own calls first).
	closed := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodDelete, srv.URL, nil)
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		closed <- err
	}()
	bound, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	select {
	case err := <-fc.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the waiting call ended with %v, want cancelled", err)
		}
	case <-bound.Done():
		t.Fatal("the call still waits after its session ended")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("DELETE: %v", err)
		}
	case <-bound.Done():
		t.Fatal("ending the session does not return")
	}
}

// BenchmarkProxyCall is one run call through thinbot mcp's proxy and the
// daemon's endpoint (streamable HTTP, bearer token) to a caller that
// answers at once: what MCP adds to a call, before the gate and the
// sandbox.
func BenchmarkProxyCall(b *testing.B) {
	fc := &fakeCaller{waiting: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv := httptest.NewServer(Handler(Config{
		Open:   func(context.Context, bot.User, string) (Caller, error) { return fc, nil },
		Tokens: func() []Token { return []Token{{Name: "ci", Secret: "ci-secret-0123456789"}} },
	}))
	defer srv.Close()
	cin, pout := io.Pipe()
	pin, cout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Proxy(b.Context(), ProxyConfig{URL: srv.URL, Token: "ci-secret-0123456789", In: pin, Out: pout})
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil).Connect(b.Context(), &mcp.IOTransport{Reader: cin, Writer: cout}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "uptime"}}); err != nil {
			b.Fatal(err)
		}
	}
	cout.Close()
	<-done
}

// Behind a reverse proxy on the same host a request reaches the loopback
// address with the public Host: it is served (the token is what counts),
// and one without a token is not.
func TestEndpointBehindAProxy(t *testing.T) {
	fc := &fakeCaller{waiting: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv, _ := daemon(t, fc)
	initialize := func(token string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
		req.Host = "thinbot.example.com"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := initialize("ci-secret-0123456789"); code != http.StatusOK {
		t.Errorf("initialize through a proxy: %d, want 200", code)
	}
	if code := initialize(""); code != http.StatusUnauthorized {
		t.Errorf("initialize without a token: %d, want 401", code)
	}
}

// A call that waits (for an approval) is reported as under way to a client
// that asked for progress, through the proxy.
func TestWaitingCallReportsProgress(t *testing.T) {
	fc := &fakeCaller{waiting: make(chan struct{}), ended: make(chan error, 1), stop: make(chan struct{})}
	srv, _ := daemon(t, fc)
	got := make(chan string, 100)
	cs, closer, _ := proxied(t, srv.URL, "ci-secret-0123456789", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case got <- fmt.Sprint(r.Params.ProgressToken) + " " + r.Params.Message:
			default:
			}
		}})
	defer closer.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"command": "wait"}}
	p.SetProgressToken(7) // a number, as Codex sends it: JSON gives the proxy a float64
	go cs.CallTool(ctx, p)
	bound, stop := context.WithTimeout(t.Context(), 30*time.Second)
	defer stop()
	select {
	case msg := <-got:
		if !strings.HasPrefix(msg, "7 ") || !strings.Contains(msg, "approval") {
			t.Errorf("progress %q", msg)
		}
	case <-bound.Done():
		t.Fatal("no progress while the call waits")
	}
}
