package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/mcp"
	"github.com/thinbot/thinbot/bot/web"
)

// mcpConfig is the mcp: section: thinbot as an MCP server on the daemon's
// listener (deploy/mcp.md, "MCP out").
type mcpConfig struct {
	// TokensFile holds the bearer tokens, one "name token" pair a line
	// (as web.tokens_file); the name is the identity the chain records
	// ("mcp:NAME"). Required; read again when it changes.
	TokensFile string `yaml:"tokens_file" secret:"file"`
	// Path is the endpoint's URL path; "" means /mcp.
	Path string `yaml:"path"`
	// Channel is a configured channel's id or name, where each client
	// session gets its thread; with platform web, "" (the console).
	Channel string `yaml:"channel"`
	// Platform "web" opens the threads in the web console.
	Platform string `yaml:"platform"`
	// ApprovalTimeout shortens approval_timeout for the clients' requests;
	// "" means approval_timeout.
	ApprovalTimeout duration `yaml:"approval_timeout"`
	// SessionTimeout closes a client session idle this long; "" means 30m.
	SessionTimeout duration `yaml:"session_timeout"`
}

func (m *mcpConfig) configured() bool {
	return m.TokensFile != "" || m.Channel != "" || m.Platform != ""
}

// check reports the section's problems through bad.
func (m *mcpConfig) check(bad func(string, ...any), channels []channelConfig, platform string, w webConfig, who daemonUser) {
	if !m.configured() {
		return
	}
	if m.TokensFile == "" {
		bad("mcp.tokens_file is empty: the MCP endpoint is not served without tokens")
	} else if _, err := readTokenFile("mcp.tokens_file", m.TokensFile, who); err != nil {
		bad("%v", err)
	}
	if m.Path != "" && !strings.HasPrefix(m.Path, "/") {
		bad("mcp.path %q: want a path starting with /", m.Path)
	}
	m.ApprovalTimeout.check(bad, "mcp.approval_timeout", "10m")
	m.SessionTimeout.check(bad, "mcp.session_timeout", "30m")
	switch m.Platform {
	case "", platform:
	case web.Platform:
		if w.Listen == "" || len(w.Users) == 0 {
			bad("mcp.platform web: the web console is not served (web.listen and web.users)")
		}
		if m.Channel != "" && m.Channel != "console" {
			bad("mcp.channel %q: the web console has no channels (its threads open in the console)", m.Channel)
		}
		return
	default:
		bad("mcp.platform %q: want %s or web", m.Platform, platform)
		return
	}
	for _, ch := range channels {
		if m.Channel != "" && (ch.ID == m.Channel || (ch.Name != "" && strings.TrimLeft(ch.Name, "#~") == strings.TrimLeft(m.Channel, "#~"))) {
			return
		}
	}
	bad("mcp.channel %q is not one of the configured channels (by id or name)", m.Channel)
}

// serveMCP mounts the MCP endpoint on mux when the config has an mcp
// section: each client session opens a thread in the section's channel
// through the bot of its platform (bots).
func serveMCP(ctx context.Context, c *daemonConfig, bots map[string]*bot.Bot, adapter bot.Adapter, mux *http.ServeMux, logger *slog.Logger) error {
	m := c.MCP
	if !m.configured() {
		return nil
	}
	t := bot.Thread{Platform: c.Platform, Channel: m.Channel}
	if m.Platform == web.Platform {
		t = bot.Thread{Platform: web.Platform, Channel: "console"}
	} else {
		for _, ch := range c.Channels {
			if ch.ID != "" && ch.ID == m.Channel {
				t.Channel = ch.ID
			}
		}
		if t.Channel == m.Channel && !isChannelID(c, m.Channel) {
			res, ok := adapter.(bot.ChannelResolver)
			if !ok {
				return fmt.Errorf("mcp.channel %q: this chat platform cannot resolve channel names: give the channel's id", m.Channel)
			}
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			id, err := res.ChannelID(rctx, m.Channel)
			cancel()
			if err != nil {
				return fmt.Errorf("mcp.channel %q: %w", m.Channel, err)
			}
			t.Channel = id
		}
	}
	b := bots[t.Platform]
	if b == nil {
		return fmt.Errorf("mcp: no bot serves platform %q", t.Platform)
	}
	tokens := &tokenFile{path: m.TokensFile, logger: logger}
	if _, err := tokens.load(); err != nil {
		return err
	}
	timeout := m.ApprovalTimeout.or(c.ApprovalTimeout.Duration)
	h := mcp.Handler(mcp.Config{
		Open: func(ctx context.Context, who bot.User, title string) (mcp.Caller, error) {
			return b.OpenExternal(ctx, bot.External{Thread: t, Who: who, Title: title, ApprovalTimeout: timeout})
		},
		Tokens:         tokens.get,
		SessionTimeout: m.SessionTimeout.Duration,
		Version:        version,
		Logger:         logger,
	})
	path := m.Path
	if path == "" {
		path = "/mcp"
	}
	mux.Handle(path, h)
	logger.Info("mcp endpoint enabled", "path", path, "platform", t.Platform, "channel", t.Channel)
	return nil
}

// isChannelID reports whether s is the id of one of c's channels.
func isChannelID(c *daemonConfig, s string) bool {
	for _, ch := range c.Channels {
		if ch.ID != "" && ch.ID == s {
			return true
		}
	}
	return false
}

// tokenFile is mcp.tokens_file, read again when it changes (its size, time
// or inode): a token removed from it stops working at the next request. A
// file that cannot be read leaves no token in force (fail closed), logged.
type tokenFile struct {
	path   string
	logger *slog.Logger

	mu     sync.Mutex
	stamp  string
	tokens []mcp.Token
}

func (f *tokenFile) get() []mcp.Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	stamp := ""
	if err == nil {
		ino := uint64(0)
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			ino = sys.Ino
		}
		stamp = fmt.Sprint(st.Size(), st.ModTime().UnixNano(), ino)
	}
	if stamp != "" && stamp == f.stamp {
		return f.tokens
	}
	toks, err := f.loadLocked()
	if err != nil {
		f.logger.Error("mcp.tokens_file cannot be read: no MCP token works until it can", "err", err)
		f.tokens, f.stamp = nil, ""
		return nil
	}
	f.tokens, f.stamp = toks, stamp
	return toks
}

func (f *tokenFile) load() ([]mcp.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loadLocked()
}

func (f *tokenFile) loadLocked() ([]mcp.Token, error) {
	byToken, err := readTokenFile("mcp.tokens_file", f.path, currentUser())
	if err != nil {
		return nil, err
	}
	var out []mcp.Token
	for tok, name := range byToken {
		out = append(out, mcp.Token{Name: name, Secret: tok})
	}
	return out, nil
}

// mcpTokenEnv names the file `thinbot mcp` reads its token from when
// --token-file is not given.
const mcpTokenEnv = "THINBOT_MCP_TOKEN_FILE"

// cmdMCP is `thinbot mcp`: an MCP server on stdin/stdout for a coding
// agent (Codex CLI, Claude Code) that forwards each call to the daemon's
// MCP endpoint, where it is gated, approved in chat and recorded. It runs
// nothing itself: the daemon holds the chain, the chat connection and the
// sandbox (deploy/mcp.md says why).
func cmdMCP(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "mcp")
	url := fs.String("url", "http://127.0.0.1:8080/mcp", "the daemon's MCP endpoint `URL` (mcp.path on its listen address)")
	tokenFile := fs.String("token-file", "", "`file` holding the bearer token (a line's token of mcp.tokens_file); default $"+mcpTokenEnv)
	if err := fs.parse(args); err != nil {
		return err
	}
	path := *tokenFile
	if path == "" {
		path = e.getenv(mcpTokenEnv)
	}
	if path == "" {
		return errors.New("mcp: give the token with --token-file or $" + mcpTokenEnv)
	}
	token, err := readSecret(path)
	if err != nil {
		return fmt.Errorf("mcp token: %w", err)
	}
	if token == "" {
		return fmt.Errorf("mcp token: %s is empty", path)
	}
	// stdout is the protocol's: the log goes to stderr, which MCP clients
	// show or keep as the server's log.
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return mcp.Proxy(ctx, mcp.ProxyConfig{URL: *url, Token: token, In: readCloser{e.stdin}, Out: writeCloser{e.stdout}, Version: version, Logger: logger})
}

// readCloser and writeCloser give the stdio transport the Close it wants;
// the process's own stdin and stdout stay open until it exits.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }

type writeCloser struct{ io.Writer }

func (writeCloser) Close() error { return nil }
