// Package mcp is thinbot as an MCP server: a front end, beside the chat
// adapters, through which an agent outside thinbot (Codex CLI, Claude
// Code, any MCP client) calls thinbot's run and read_file tools, each call
// gated, approved in chat, sandboxed, masked and recorded like a call of
// thinbot's own model.
//
// Handler serves the streamable HTTP transport on the daemon's listener,
// behind bearer tokens (each token names an identity); Proxy is `thinbot
// mcp`, a stdio server that forwards every call to that endpoint, so the
// daemon, which holds the chain, the chat connection and the sandbox,
// decides and records it. It is the only importer of the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) on the server side.
package mcp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/bot"
)

// Caller runs the calls of one client session: bot.ExternalThread.
type Caller interface {
	Call(ctx context.Context, text string, c agentcore.ExternalCall) (agentcore.ExternalResult, error)
}

// Token is one bearer token the endpoint accepts, and the identity it
// names (recorded as the actor "mcp:NAME").
type Token struct {
	Name   string
	Secret string
}

// Config configures Handler. Open and Tokens are required.
type Config struct {
	// Open opens the thread of a new client session, on its first tool
	// call: who is the identity (ID "mcp:NAME") and the client's name
	// (Name, from its initialize request); title is the thread's first
	// post.
	Open func(ctx context.Context, who bot.User, title string) (Caller, error)
	// Tokens returns the tokens in force (a reload may change them; a
	// session keeps the identity it started with, and only that identity's
	// requests reach it).
	Tokens func() []Token
	// SessionTimeout closes a session that sent nothing for this long
	// (no call waiting); 0 means 30 minutes.
	SessionTimeout time.Duration
	// ProgressEvery is how often a call whose request carries a progress
	// token is reported as still under way (a client may count that as
	// life, and a human reads it while an approval is pending); 0 means
	// 15 seconds.
	ProgressEvery time.Duration
	// Version is thinbot's, reported to clients.
	Version string
	// Logger; nil means discard.
	Logger *slog.Logger
}

// Tool names, as thinbot's model has them.
const (
	ToolRun      = agentcore.ToolRun
	ToolReadFile = agentcore.ToolReadFile
)

// RunArgs are the arguments of the run tool.
type RunArgs struct {
	Command string `json:"command" jsonschema:"the bash command line to run in the workspace"`
	Reason  string `json:"reason,omitempty" jsonschema:"why you run it, shown to the human who approves it"`
}

// ReadFileArgs are the arguments of the read_file tool.
type ReadFileArgs struct {
	Path   string `json:"path" jsonschema:"the file, absolute or relative to the workspace"`
	Offset int    `json:"offset,omitempty" jsonschema:"first line, from 1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"number of lines"`
}

const (
	runDescription = "Run one bash command in thinbot's workspace and return its exit code and output. " +
		"Read-only commands run at once in a kernel sandbox; commands that change things wait for a human's approval in chat " +
		"(the call returns when they decide, or refused when they deny or the request expires); dangerous ones are refused. " +
		"Every call is recorded in thinbot's audit log."
	readFileDescription = "Read a text file, optionally a range of lines. Sensitive paths need a human's approval or are refused. Every call is recorded in thinbot's audit log."
)

// Handler serves the MCP endpoint: streamable HTTP behind bearer tokens.
// Each client session is bound to the identity of the token that opened
// it (another token's request for it is refused with 403), and gets its
// own chat thread on its first tool call.
func Handler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 30 * time.Minute
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 15 * time.Second
	}
	w := &waiting{calls: map[string]map[*int]context.CancelFunc{}}
	idle := newServer(cfg, nil, w) // answers the requests of sessions that exist
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if r.Header.Get("Mcp-Session-Id") != "" {
			return idle
		}
		// A new session: a server of its own, holding its thread.
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil || ti.UserID == "" {
			return nil
		}
		return newServer(cfg, &session{cfg: cfg, identity: ti.UserID}, w)
	}, &mcp.StreamableHTTPOptions{SessionTimeout: cfg.SessionTimeout, Logger: cfg.Logger, PropagateRequestCancellation: true,
		// The SDK refuses a request that reached a loopback address with
		// another Host (DNS rebinding); a TLS reverse proxy on the same
		// host sends exactly that. Every request here needs a bearer
		// token, which a rebinding page does not have.
		DisableLocalhostProtection: true})
	ended := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		// A client that ends its session (DELETE; `thinbot mcp` does when
		// its client goes away) gives up the calls it left waiting: they
		// are cancelled first, since the SDK waits for them to finish
		// before it closes the session.
		if id := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodDelete && id != "" {
			if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
				w.cancel(ti.UserID + "\x00" + id)
			}
		}
		h.ServeHTTP(rw, r)
	})
	return auth.RequireBearerToken(verifier(cfg.Tokens), &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(ended)
}

// waiting are the calls under way, by identity and session id, so that
// the end of a session cancels them.
type waiting struct {
	mu    sync.Mutex
	calls map[string]map[*int]context.CancelFunc
}

// add registers a call's cancel under key; the returned func removes it.
func (w *waiting) add(key string, cancel context.CancelFunc) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	tag := new(int)
	if w.calls[key] == nil {
		w.calls[key] = map[*int]context.CancelFunc{}
	}
	w.calls[key][tag] = cancel
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.calls[key], tag)
		if len(w.calls[key]) == 0 {
			delete(w.calls, key)
		}
	}
}

// cancel cancels the calls under key.
func (w *waiting) cancel(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.calls[key] {
		c()
	}
}

// verifier checks a bearer token against every token in force, in
// constant time (each comparison is of SHA-256 sums, so of equal length,
// and none ends the loop early).
func verifier(tokens func() []Token) auth.TokenVerifier {
	return func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		got := sha256.Sum256([]byte(token))
		name := ""
		for _, t := range tokens() {
			want := sha256.Sum256([]byte(t.Secret))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 && t.Secret != "" {
				name = t.Name
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: name}, nil
	}
}

// session is one client session's state: its identity and, from its first
// call, its thread.
type session struct {
	cfg      Config
	identity string

	mu     sync.Mutex
	caller Caller
}

// thread opens the session's thread once; a failure is tried again at the
// next call.
func (s *session) thread(ctx context.Context, client string) (Caller, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caller != nil {
		return s.caller, nil
	}
	who := bot.User{ID: "mcp:" + s.identity, Name: client}
	title := fmt.Sprintf("**MCP session** of %s (token `%s`): its commands and approvals follow in this thread.",
		textfmt.CodeSpan(client, 80), textfmt.OneLine(s.identity, 80))
	c, err := s.cfg.Open(ctx, who, title)
	if err != nil {
		return nil, err
	}
	s.caller = c
	return c, nil
}

// newServer is the MCP server of one session (s), or, with s nil, the one
// that stands for existing sessions in the SDK's version checks (it is
// never connected).
func newServer(cfg Config, s *session, w *waiting) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "thinbot", Title: "thinbot gate", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "thinbot runs your shell commands through its gate: reads run at once in a sandbox, writes wait for a human's approval in chat, " +
			"and everything is recorded in an audit log. Give each command a reason: the approver reads it.",
		Logger: cfg.Logger,
	})
	addTools(srv, func(ctx context.Context, req *mcp.CallToolRequest, c agentcore.ExternalCall) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if s != nil {
			defer w.add(s.identity+"\x00"+req.Session.ID(), cancel)()
		}
		return call(ctx, cfg, s, req, c)
	})
	return srv
}

// addTools adds run and read_file to srv, both handled by h: the daemon's
// server and the proxy offer the same tools.
func addTools(srv *mcp.Server, h func(context.Context, *mcp.CallToolRequest, agentcore.ExternalCall) (*mcp.CallToolResult, any, error)) {
	ro, destructive := true, true
	mcp.AddTool(srv, &mcp.Tool{Name: ToolRun, Description: runDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Run a command through thinbot's gate", DestructiveHint: &destructive}},
		func(ctx context.Context, req *mcp.CallToolRequest, in RunArgs) (*mcp.CallToolResult, any, error) {
			return h(ctx, req, agentcore.ExternalCall{Tool: ToolRun, Command: in.Command, Reason: in.Reason})
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolReadFile, Description: readFileDescription,
		Annotations: &mcp.ToolAnnotations{Title: "Read a file through thinbot's gate", ReadOnlyHint: ro}},
		func(ctx context.Context, req *mcp.CallToolRequest, in ReadFileArgs) (*mcp.CallToolResult, any, error) {
			return h(ctx, req, agentcore.ExternalCall{Tool: ToolReadFile, Path: in.Path, Offset: in.Offset, Limit: in.Limit})
		})
}

// call runs one tool call in the session's thread. What the client reads
// is what thinbot's model would: the tool's result, masked; a refusal or
// a failure is an error result saying why, never the daemon's internals.
func call(ctx context.Context, cfg Config, s *session, req *mcp.CallToolRequest, c agentcore.ExternalCall) (*mcp.CallToolResult, any, error) {
	if s == nil {
		return errResult("thinbot: this session is unknown; start a new one"), nil, nil
	}
	client := "unknown client"
	if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil && p.ClientInfo.Name != "" {
		client = p.ClientInfo.Name
	}
	caller, err := s.thread(ctx, client)
	if err != nil {
		cfg.Logger.Error("mcp: open the session's thread", "identity", s.identity, "client", client, "err", err)
		return errResult("thinbot could not open this session's chat thread, so nothing ran; the operators can see why in its log."), nil, nil
	}
	args, _ := json.Marshal(req.Params.Arguments)
	text := fmt.Sprintf("MCP client %s calls %s %s", textfmt.OneLine(client, 80), c.Tool, textfmt.OneLine(string(args), 400))
	if tok := req.Params.GetProgressToken(); tok != nil {
		stop := progress(ctx, cfg.ProgressEvery, req.Session, tok)
		defer stop()
	}
	res, err := caller.Call(ctx, text, c)
	switch {
	case err != nil && res.Status == agentcore.StatusCancelled:
		return errResult(res.Content), nil, nil
	case err != nil:
		return errResult(fmt.Sprintf("thinbot could not record this call, so nothing ran (ref %d); the operators can see why in its log.", res.LastSeq)), nil, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Content}}, IsError: res.IsError}, nil, nil
}

// progress tells the client, every interval until stop, that its call is
// still under way: it may wait for a human's approval in chat. stop
// returns once the reporting goroutine has ended.
func progress(ctx context.Context, every time.Duration, ss *mcp.ServerSession, token any) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			// Best effort: a client that cannot take it still gets its result.
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(n),
				Message: "thinbot: still under way (a command that changes something waits for an approval in chat)"})
		}
	})
	return func() { cancel(); wg.Wait() }
}

func errResult(text string) *mcp.CallToolResult {
	if text == "" {
		text = "not run"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}
