package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thinbot/thinbot/agentcore"
)

// ProxyConfig configures Proxy.
type ProxyConfig struct {
	// URL is the daemon's MCP endpoint ("http://127.0.0.1:8080/mcp").
	URL string
	// Token is the bearer token of the identity the calls are made as.
	Token string
	// In and Out are the client's side of the stdio transport.
	In  io.ReadCloser
	Out io.WriteCloser
	// HTTPClient; nil means a client without a timeout (a call may wait
	// for an approval as long as the daemon lets it).
	HTTPClient *http.Client
	Version    string
	Logger     *slog.Logger
}

// Proxy is `thinbot mcp`: an MCP server on stdio (In, Out) whose run and
// read_file calls are forwarded to the daemon's endpoint, where they are
// gated, approved in chat and recorded. It connects on the first call,
// under the name the client gave in its initialize request, so that the
// session's thread is named after the client. It returns when the client
// closes its side (or ctx ends): the SDK then cancels the calls under way,
// which cancels them at the daemon (a call waiting for an approval is
// refused, recorded so), and the daemon's session is closed.
func Proxy(ctx context.Context, cfg ProxyConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	up := &upstream{cfg: cfg, http: &http.Client{Transport: bearer{token: cfg.Token, next: hc.Transport}, Timeout: hc.Timeout}}
	defer up.close()
	srv := mcp.NewServer(&mcp.Implementation{Name: "thinbot", Title: "thinbot gate", Version: cfg.Version}, &mcp.ServerOptions{Logger: cfg.Logger})
	addTools(srv, func(ctx context.Context, req *mcp.CallToolRequest, _ agentcore.ExternalCall) (*mcp.CallToolResult, any, error) {
		cs, err := up.session(ctx, req.Session)
		if err != nil {
			cfg.Logger.Error("mcp proxy: connect to the daemon", "url", cfg.URL, "err", err)
			return errResult("thinbot mcp could not reach the thinbot daemon, so nothing ran: " + err.Error()), nil, nil
		}
		// The arguments go on as the client wrote them: the daemon reads
		// them with the same schema.
		p := &mcp.CallToolParams{Name: req.Params.Name, Arguments: req.Params.Arguments}
		// The client's progress token goes on (and nothing else of its
		// _meta, which speaks of its own connection): the daemon's
		// progress notifications come back with it, and are passed on.
		// (Set as it came: SetProgressToken would panic on the float64
		// that JSON makes of a numeric token.)
		if tok := req.Params.GetProgressToken(); tok != nil {
			p.Meta = mcp.Meta{"progressToken": tok}
		}
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return errResult("thinbot mcp: the daemon did not answer the call: " + err.Error()), nil, nil
		}
		return res, nil, nil
	})
	err := srv.Run(ctx, &mcp.IOTransport{Reader: cfg.In, Writer: cfg.Out})
	if errors.Is(err, io.EOF) || (err != nil && ctx.Err() != nil) {
		return nil
	}
	return err
}

// upstream is the proxy's one session with the daemon, opened on the first
// call.
type upstream struct {
	cfg  ProxyConfig
	http *http.Client

	mu sync.Mutex
	cs *mcp.ClientSession
}

func (u *upstream) session(ctx context.Context, ss *mcp.ServerSession) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return u.cs, nil
	}
	name, version := "unknown client", ""
	if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
		name, version = p.ClientInfo.Name, p.ClientInfo.Version
	}
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: version}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(ctx context.Context, r *mcp.ProgressNotificationClientRequest) {
			_ = ss.NotifyProgress(ctx, r.Params) // best effort, as the daemon's
		}})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: u.http, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", u.cfg.URL, err)
	}
	u.cs = cs
	return cs, nil
}

// close ends the daemon's session (a DELETE), which cancels any call of it
// still waiting.
func (u *upstream) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		_ = u.cs.Close()
	}
}

// bearer adds the token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}
