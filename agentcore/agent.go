package agentcore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore/datasource"
	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/mcp"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// Errors returned by Run (wrapped).
var (
	// ErrBudget is returned when a run ends because a budget was exhausted.
	ErrBudget = errors.New("budget exhausted")
	// ErrModel is returned (wrapping the cause) when the model endpoint
	// failed: unreachable, an error answer after retries, or a failed
	// compaction. Store failures are not ErrModel.
	ErrModel = errors.New("model")
)

// Budgets limit one run. Zero fields take the defaults noted.
type Budgets struct {
	MaxSteps      int           // tool-using steps per run; 0 means 30 (goal mode: 100)
	MaxModelCalls int           // model calls per run; 0 means 2×MaxSteps
	MaxWall       time.Duration // wall time per run; 0 means 30 minutes
	MaxToolErrors int           // consecutive failed tool calls; 0 means 8
	// MaxTokens is the run's budget of prompt plus completion tokens, as
	// the server reports them (estimated, 4 bytes a token, for a reply
	// without usage); 0 means none. It is checked before each model call.
	MaxTokens int
}

// Config configures an Agent. Store, Model and Policy are required.
type Config struct {
	Store  *store.DB
	Model  Model
	Policy *gate.Policy
	// Skills are the loaded skills; the zero Set means none.
	Skills skills.Set
	// Prompt is the base system prompt; "" means the built-in one.
	Prompt string
	// GlobalInstructions is the global AGENT.md text (config folder), put
	// before the workspace's own AGENT.md.
	GlobalInstructions string
	// TextProtocol forces the text protocol (no tool calling).
	TextProtocol bool
	Exec         ExecConfig
	// Fleet, if set, lets run and read_file take a target: inventory hosts
	// reached over OpenSSH (see package fleet). Nil offers no target.
	Fleet   *fleet.Fleet
	Budgets Budgets
	// Datasources are the Prometheus, Loki and Alertmanager sources the
	// datasource tools read (datasources.go); none offers no such tool.
	Datasources []*datasource.Source
	// MCP, if set, adds the tools of its MCP servers (started) to the
	// model's tools; each call is decided like a command (callMCP).
	MCP *mcp.Set
	// ContextWindow is the model's context window in tokens; 0 means 32768.
	ContextWindow int
	// CompactAt is the share of ContextWindow at which the session is
	// compacted before a model call; 0 means 0.75.
	CompactAt float64
	// CompactPrompt replaces the built-in compaction instruction if set.
	CompactPrompt string
	// SkillIndexShare is the share of the context window the skill index
	// takes; 0 means 0.02 (as Codex does). The index may grow to four times
	// that so every skill keeps a short description and the skills matching
	// the session's first message keep long ones (skills.IndexOptionsFor).
	SkillIndexShare float64
	// Secrets are values (the model API key, chat tokens) replaced by
	// [REDACTED] wherever they, or a form a command or a model turns them
	// into (base64, hex, URL-encoded, reversed, JSON-escaped, split across
	// lines), appear in anything the kernel lets out: command output, file
	// reads, the model's text and tool calls, the chain, what the chat
	// shows. Even an approved `cat` of a token file cannot carry them to the
	// model, the chat or the audit log. Values shorter than 8 bytes are
	// ignored.
	Secrets []string
	// NoMask turns off the masking of well-known secret shapes (gitleaks'
	// rules, see Masker), which otherwise applies wherever Secrets do.
	NoMask bool
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Agent runs turns of sessions. One Agent serves many sessions; Run may be
// called concurrently for different sessions (calls for the same session
// are serialised).
type Agent struct {
	cfg   Config
	log   *slog.Logger
	mu    sync.Mutex
	state map[string]*session
	// limits is what the model server said about its context window.
	limits serverLimits
	// scrub is what every string leaving the kernel passes through (see
	// redact.go).
	scrub *scrubber
	// indexed: the store keeps the state index (useStateIndex); imu
	// guards it.
	imu     sync.Mutex
	indexed bool
}

// session is the cached projection of one session.
type session struct {
	mu   sync.Mutex
	proj Projector
	last uint64
	// smu guards status, which /status reads while a turn runs.
	smu    sync.Mutex
	status Status
}

func (s *session) setStatus(f func(*Status)) {
	s.smu.Lock()
	f(&s.status)
	s.smu.Unlock()
}

// Status is what a session is doing, for /status.
type Status struct {
	Running    bool
	Goal       bool
	Steps      int
	ModelCalls int
	Started    time.Time
	Current    string // the command running or awaiting approval, if any
	Budgets    Budgets
	Usage      Usage
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Store == nil || cfg.Model == nil || cfg.Policy == nil {
		return nil, errors.New("agentcore: Store, Model and Policy are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ContextWindow <= 0 {
		cfg.ContextWindow = 32768
	}
	if cfg.CompactAt <= 0 || cfg.CompactAt > 1 {
		cfg.CompactAt = 0.75
	}
	if cfg.SkillIndexShare <= 0 {
		cfg.SkillIndexShare = 0.02
	}
	var secrets []string
	for _, v := range cfg.Secrets {
		if len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
	cfg.Secrets = secrets
	if ro := cfg.Skills.ReadOnlyScripts(); len(ro) > 0 {
		cfg.Policy = cfg.Policy.WithReadOnlyScripts(ro...)
	}
	cfg.Exec = cfg.Exec.withDefaults()
	var mask *Masker
	if !cfg.NoMask {
		m, err := NewMasker()
		if err != nil {
			return nil, err
		}
		mask = m
	}
	return &Agent{cfg: cfg, log: cfg.Logger, state: map[string]*session{}, scrub: newScrubber(secrets, mask)}, nil
}

func (b Budgets) withDefaults(goal bool) Budgets {
	if b.MaxSteps <= 0 {
		b.MaxSteps = 30
		if goal {
			b.MaxSteps = 100
		}
	}
	if b.MaxModelCalls <= 0 {
		b.MaxModelCalls = 2 * b.MaxSteps
	}
	if b.MaxWall <= 0 {
		b.MaxWall = 30 * time.Minute
	}
	if b.MaxToolErrors <= 0 {
		b.MaxToolErrors = 8
	}
	return b
}

// lower returns b with each field of o that is set and smaller put in.
func (b Budgets) lower(o Budgets) Budgets {
	low := func(v *int, w int) {
		if w > 0 && w < *v {
			*v = w
		}
	}
	low(&b.MaxSteps, o.MaxSteps)
	low(&b.MaxModelCalls, o.MaxModelCalls)
	low(&b.MaxToolErrors, o.MaxToolErrors)
	if o.MaxWall > 0 && o.MaxWall < b.MaxWall {
		b.MaxWall = o.MaxWall
	}
	if o.MaxTokens > 0 && (b.MaxTokens == 0 || o.MaxTokens < b.MaxTokens) {
		b.MaxTokens = o.MaxTokens
	}
	return b
}

// maxCachedSessions bounds the projections kept in memory; an evicted
// session is read back from the store when it is next used.
const maxCachedSessions = 2000

func (a *Agent) session(id string) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.state[id]
	if !ok {
		if len(a.state) >= maxCachedSessions {
			a.evict()
		}
		s = &session{}
		a.state[id] = s
	}
	return s
}

// evict drops the cached projections of idle sessions, about half of the
// cache. The caller holds a.mu.
func (a *Agent) evict() {
	n := 0
	for id, s := range a.state {
		if n >= maxCachedSessions/2 {
			return
		}
		if s.mu.TryLock() {
			delete(a.state, id)
			s.mu.Unlock()
			n++
		}
	}
}

// load brings the session's projection up to date with the chain. The
// caller holds s.mu.
func (a *Agent) load(id string, s *session) error {
	for e, err := range a.cfg.Store.Events(id, s.last+1) {
		if err != nil {
			return fmt.Errorf("read session %s: %w", id, err)
		}
		s.proj.Apply(e)
		s.last = e.Seq
	}
	return nil
}
