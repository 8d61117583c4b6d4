package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// Channel is how the bot works in one chat channel.
type Channel struct {
	// Agent runs the channel's sessions (one Agent per workspace).
	Agent *agentcore.Agent
	// Workspace is the working directory of commands (its skills, AGENT.md
	// and memory).
	Workspace string
	// Instructions is the channel's own AGENT.md text, after the workspace's.
	Instructions string
	// Approvers are the user ids of who may approve. Ids only: a name can
	// be taken by renaming an account, an id cannot.
	Approvers []string
	// AnyMember lets any member of the channel approve.
	AnyMember bool
	// TwoPerson forbids the requester approving their own request.
	TwoPerson bool
	// AllowAll runs confirm verdicts without asking (never deny). Meant for
	// sandbox channels only.
	AllowAll bool
	// FleetGroups limits remote targets to these fleet groups; empty
	// means every host of the agent's fleet.
	FleetGroups []string
	// Tokens bounds the model tokens of a run, a thread and the channel
	// per UTC day (budget.go).
	Tokens TokenBudgets
	// Location is the time zone of the times the bot writes into the
	// channel's threads (alert cards, approval expiry, approvers, the
	// timeline); nil means Config.Location.
	Location *time.Location
}

// Config configures a Bot. Adapter and Channel are required.
type Config struct {
	Adapter Adapter
	// Channel returns the configuration of a channel id; false means the
	// bot ignores the channel.
	Channel func(channelID string) (Channel, bool)
	// Users are the ids of who may talk to the bot; empty means everyone.
	Users []string
	// AllowBots lets other bots' messages start and continue sessions.
	AllowBots bool
	// MentionInThread requires a fresh mention for every message in a
	// thread; by default any reply in a session's thread continues it.
	MentionInThread bool
	// MaxConcurrent is the global limit of concurrent runs; 0 means 4.
	MaxConcurrent int
	// ApprovalTimeout is how long an approval request stays open; 0 means
	// 15 minutes. An unanswered request is a deny.
	ApprovalTimeout time.Duration
	// Reminders remind and escalate a request nobody decides; the zero
	// value reminds nobody.
	Reminders Reminders
	// UpdateInterval throttles progress-message updates; 0 means 1s.
	UpdateInterval time.Duration
	// Sessions are thread keys of sessions that already exist (replies in
	// them continue without a mention); Seen are message ids already
	// handled. Both come from the chain at start.
	Sessions []string
	Seen     []string
	// Known, if set, reports whether the chain has a session for a thread
	// key that is not in Sessions, read when a message arrives in a thread
	// the Bot has not seen yet (agentcore.KnownSession reads the state
	// index): start-up then lists no sessions, where a year of them was
	// 20,000 keys read and kept (issue #23). An error (the store could not
	// be read) is logged and counts as not known: the Bot answers only a
	// message that mentions it, rather than every message of a thread
	// that may not be its own.
	Known   func(key string) (bool, error)
	Metrics *Metrics
	Logger  *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Location is the time zone of the times the bot writes into chat,
	// each shown with the zone's abbreviation ("03:12 CET"), for a channel
	// that has none of its own; nil means UTC. Times in logs and in the
	// chain stay UTC.
	Location *time.Location
	// Console is the web console's origin as browsers see it, for the
	// console link of /timeline's postmortem; "" means none.
	Console string
}

// Bot is the chat daemon: it implements Handler for an Adapter.
type Bot struct {
	cfg   Config
	log   *slog.Logger
	slots chan struct{}
	wg    sync.WaitGroup
	// access is the part of cfg that SetAccess may change while the Bot
	// runs.
	access atomic.Pointer[Access]

	mu      sync.Mutex
	threads map[string]*thread
	known   map[string]bool
	seen    *Dedupe
	pending map[string]*request
	closing bool
	// runCtx is Run's context: work that outlives the request that
	// started it (an alert's first look) ends with it, and its cause
	// (a shutdown's signal) is the run's.
	runCtx context.Context
	// notEnabled is when each unconfigured channel was last told that the
	// bot does not work there.
	notEnabled map[string]time.Time
	// recovered are messages a previous process queued but never handled;
	// Run queues them again.
	recovered []agentcore.QueuedMessage
	// carried are the approval requests a cluster's old leader left open,
	// whose runs this bot goes on with (resume.go).
	carried []agentcore.CarriedApproval
	// tokens is what threads and channels have used (budget.go).
	tokens tokenTally
	// shutdownRuns are the sessions whose runs Run's ctx (the shutdown)
	// cancelled, for its last log line.
	shutdownRuns []string
	// alerts is the alert receiver whose cards this Bot posts, for their
	// Acknowledge buttons (nil without one).
	alerts *alerts
}

// Access is who may talk to the Bot and how long an approval request
// stays open: the Config fields a config reload may change while the Bot
// runs (SetAccess).
type Access struct {
	Users           []string
	AllowBots       bool
	MentionInThread bool
	// ApprovalTimeout is a request's life; 0 means 15 minutes.
	ApprovalTimeout time.Duration
	// Reminders are a request's reminders (approval.go).
	Reminders Reminders
}

// SetAccess replaces the Bot's Users, AllowBots, MentionInThread,
// ApprovalTimeout and Reminders, for the messages and approval requests
// that come after it; a request already open keeps its expiry and
// reminders. Safe to call while the Bot
// runs. (Config.Channel is a function: the caller swaps what it returns.)
func (b *Bot) SetAccess(a Access) {
	if a.ApprovalTimeout <= 0 {
		a.ApprovalTimeout = 15 * time.Minute
	}
	b.access.Store(&a)
}

// thread is one chat thread's queue and run state.
type thread struct {
	t Thread
	// ch is the channel's configuration the current (or last) run of the
	// thread started with: each item takes the one in force when its
	// message arrived, so that a config reload never changes a run under
	// way. Written by the thread's worker, under Bot.mu.
	ch           Channel
	queue        []item
	running      bool
	cancel       context.CancelCauseFunc // cancels the current run, saying why (an agentcore.StopCause)
	participants map[string]bool         // user ids who wrote in the thread
}

// item is one queued piece of work.
type item struct {
	msg Message
	ch  Channel // the channel's configuration when msg arrived
	cmd string  // "", "clear", "compact" or "skill" (a skill command, run without the model)
	// alert, if set, makes the run an alert's first look (alertinvestigate.go).
	alert *alertRun
	// carried, with cmd "resume", is a run to go on with (resume.go).
	carried *agentcore.CarriedApproval
}

const maxSeen = 100000

// notEnabledEvery rate-limits the "not enabled here" notice per channel.
const notEnabledEvery = time.Hour

// New checks cfg and returns a Bot.
func New(cfg Config) (*Bot, error) {
	if cfg.Adapter == nil || cfg.Channel == nil {
		return nil, errors.New("bot: Adapter and Channel are required")
	}
	if cfg.MaxConcurrent <= 0 {
		cfg.MaxConcurrent = 4
	}
	if cfg.ApprovalTimeout <= 0 {
		cfg.ApprovalTimeout = 15 * time.Minute
	}
	if cfg.UpdateInterval <= 0 {
		cfg.UpdateInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	b := &Bot{cfg: cfg, log: cfg.Logger, slots: make(chan struct{}, cfg.MaxConcurrent),
		threads: map[string]*thread{}, known: map[string]bool{}, seen: NewDedupe(maxSeen), pending: map[string]*request{},
		notEnabled: map[string]time.Time{}}
	b.SetAccess(Access{Users: cfg.Users, AllowBots: cfg.AllowBots, MentionInThread: cfg.MentionInThread, ApprovalTimeout: cfg.ApprovalTimeout,
		Reminders: cfg.Reminders})
	for _, k := range cfg.Sessions {
		b.known[k] = true
	}
	for _, id := range cfg.Seen {
		b.markSeen(id)
	}
	return b, nil
}

// zone is the time zone of ch's chat texts: its own, else the Bot's,
// else UTC.
// showState tells an adapter that shows thread states (StateShower) that
// t's run started or ended.
func (b *Bot) showState(t Thread, running bool) {
	if s, ok := b.cfg.Adapter.(StateShower); ok {
		s.RunState(t, running)
	}
}

// showAlert tells an adapter that shows thread states (StateShower) the
// status of t's alert group.
func (b *Bot) showAlert(t Thread, status string) {
	if s, ok := b.cfg.Adapter.(StateShower); ok {
		s.AlertState(t, status)
	}
}

func (b *Bot) zone(ch Channel) *time.Location {
	switch {
	case ch.Location != nil:
		return ch.Location
	case b.cfg.Location != nil:
		return b.cfg.Location
	}
	return time.UTC
}

// lookupKnown asks Config.Known whether the chain has a session for key,
// and remembers a yes.
func (b *Bot) lookupKnown(key string) bool {
	if b.cfg.Known == nil {
		return false
	}
	known, err := b.cfg.Known(key)
	if err != nil {
		b.cfg.Metrics.error("store")
		b.log.Error("looking up a thread's session", "conv", key, "err", err)
	}
	if !known {
		return false
	}
	b.mu.Lock()
	b.known[key] = true
	b.mu.Unlock()
	return true
}

// Run connects the adapter and serves until ctx is done. It returns after
// every run it started has ended and recorded its end.
func (b *Bot) Run(ctx context.Context) error {
	b.mu.Lock()
	b.runCtx = ctx
	b.mu.Unlock()
	b.requeue(ctx)
	err := b.cfg.Adapter.Run(ctx, b)
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.wg.Wait()
	if ctx.Err() != nil {
		b.logShutdown(ctx)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// noteShutdown remembers a session whose run the shutdown cancelled.
func (b *Bot) noteShutdown(key string) {
	b.mu.Lock()
	b.shutdownRuns = append(b.shutdownRuns, key)
	b.mu.Unlock()
}

// logShutdown logs why the bot stopped (the signal, when a StopCause names
// it) and the sessions whose runs that cancelled; each run's chain says the
// same in its run_finished.
func (b *Bot) logShutdown(ctx context.Context) {
	b.mu.Lock()
	runs := slices.Clone(b.shutdownRuns)
	b.mu.Unlock()
	why := []any{"cause", context.Cause(ctx).Error()}
	if c := agentcore.CauseOf(ctx); c != nil && c.Kind == agentcore.StopShutdown {
		why = []any{"signal", c.By}
	}
	b.log.Info("bot stopped", append(why, "cancelled_runs", len(runs), "sessions", runs)...)
}

// markSeen records a message id; it reports false if it was seen before.
func (b *Bot) markSeen(id string) bool {
	return id == "" || b.seen.Add(id)
}

// HandleMessage implements Handler.
func (b *Bot) HandleMessage(ctx context.Context, m Message) {
	acc := b.access.Load()
	if m.FromBot && !acc.AllowBots {
		return
	}
	ch, ok := b.cfg.Channel(m.Thread.Channel)
	if !ok {
		if m.Mentioned || m.Direct {
			b.notEnabledHere(ctx, m)
		}
		return
	}
	key := m.Thread.Key()
	b.mu.Lock()
	if b.closing || !b.markSeen(m.ID) {
		b.mu.Unlock()
		return
	}
	known := b.known[key]
	b.mu.Unlock()
	known = known || b.lookupKnown(key)
	if !m.Direct && !m.Mentioned && (!known || acc.MentionInThread) {
		return
	}
	if !matchUser(acc.Users, m.User) {
		// Other people talk in session threads too: only someone who
		// addressed the bot is told it will not answer them.
		if m.Mentioned || m.Direct {
			b.log.Info("message from a user not allowed", "user", m.User.ID, "name", m.User.Name)
			b.post(ctx, m.Thread, Post{Text: fmt.Sprintf("Sorry, @%s is not allowed to use this bot.", displayName(m.User))})
		}
		return
	}
	text := strings.TrimSpace(m.Text)
	if name, ok := commandName(text); ok {
		b.command(ctx, m, ch, name)
		return
	}
	if name, _, ok := ch.Agent.SkillCommand(text); ok {
		b.enqueue(ctx, m, ch, item{msg: m, cmd: "skill"})
		return
	} else if f := strings.Fields(text); len(f) > 0 && (f[0] == "/run" || f[0] == "!run") {
		b.post(ctx, m.Thread, Post{Text: fmt.Sprintf("There is no skill command `%s`; `/help` lists them.", oneLineMD(name))})
		return
	}
	if text == "" {
		b.post(ctx, m.Thread, Post{Text: "Yes? Tell me what to look at, or send `/help`."})
		return
	}
	b.enqueue(ctx, m, ch, item{msg: m})
}

// notEnabledHere answers a mention or direct message in a channel without
// configuration, once an hour per channel at most, so that the user is not
// left with silence, and logs it for the operator.
func (b *Bot) notEnabledHere(ctx context.Context, m Message) {
	now := b.cfg.Now()
	ch := m.Thread.Channel
	b.mu.Lock()
	if b.closing || !b.markSeen(m.ID) {
		b.mu.Unlock()
		return
	}
	last, told := b.notEnabled[ch]
	tell := !told || now.Sub(last) >= notEnabledEvery
	if tell {
		if len(b.notEnabled) >= 10000 {
			clear(b.notEnabled)
		}
		b.notEnabled[ch] = now
		b.wg.Add(1)
	}
	b.mu.Unlock()
	b.log.Info("message in a channel without configuration", "channel", ch, "direct", m.Direct, "user", m.User.ID, "told", tell)
	if !tell {
		return
	}
	where := "in this channel"
	if m.Direct {
		where = "in direct messages"
	}
	// The notice goes out on its own goroutine: a slow chat API must not
	// hold up the adapter's delivery of other messages.
	go func() {
		defer b.wg.Done()
		b.post(ctx, m.Thread, Post{Text: fmt.Sprintf("I am not enabled %s, so I will not answer here. An operator can enable me by adding this channel (`%s`) to my configuration.", where, ch)})
	}()
}

// enqueue adds work to a thread's queue and starts its worker if idle.
func (b *Bot) enqueue(ctx context.Context, m Message, ch Channel, it item) {
	key := m.Thread.Key()
	b.mu.Lock()
	th := b.threads[key]
	if th == nil {
		th = &thread{t: m.Thread, ch: ch, participants: map[string]bool{}}
		b.threads[key] = th
	}
	b.known[key] = true
	th.participants[m.User.ID] = true
	it.ch = ch
	th.queue = append(th.queue, it)
	queued := len(th.queue)
	start := !th.running
	th.running = true
	if start {
		b.wg.Add(1)
	}
	b.mu.Unlock()
	b.cfg.Metrics.queue(1)
	if it.cmd == "" || it.cmd == "skill" {
		b.cfg.Metrics.message()
	}
	if start {
		go b.work(ctx, th)
	} else if it.cmd == "" || it.cmd == "skill" {
		b.noteQueued(th, ch, m)
		b.post(ctx, m.Thread, Post{Text: fmt.Sprintf("Queued: I will handle this after the current run (%d waiting). Send `/stop` to stop the run.", queued)})
	}
}

// noteQueued records a message that has to wait, so that a restart (or a
// crash) does not lose it: Recover reports it until a run handles it.
func (b *Bot) noteQueued(th *thread, ch Channel, m Message) {
	if _, err := ch.Agent.NoteUnlocked(th.t.Key(), agentcore.EvNote, actor(m.User), agentcore.NotePayload{
		Kind: agentcore.NoteMessageQueued, PostID: m.ID, User: m.User.ID, Name: m.User.Name, Detail: m.Text}); err != nil {
		b.log.Error("record queued message", "conv", th.t.Key(), "err", err)
	}
}

// noteRefused records a message no run was started for (why: the reply),
// so that the chain shows the refusal and a restart does not take the
// message again (agentcore.NoteRunRefused).
func (b *Bot) noteRefused(th *thread, m Message, why string) {
	if _, err := th.ch.Agent.Note(th.t.Key(), agentcore.EvNote, actor(m.User), agentcore.NotePayload{
		Kind: agentcore.NoteRunRefused, PostID: m.ID, User: m.User.ID, Name: m.User.Name, Detail: why, Text: m.Text}); err != nil {
		b.log.Error("record refused message", "conv", th.t.Key(), "err", err)
	}
}

// requeue queues the messages a previous process left waiting.
func (b *Bot) requeue(ctx context.Context) {
	b.resumeCarried(ctx)
	b.mu.Lock()
	rec := b.recovered
	b.recovered = nil
	b.mu.Unlock()
	for _, q := range rec {
		t, ok := ThreadOf(q.Session)
		if !ok {
			continue
		}
		ch, ok := b.cfg.Channel(t.Channel)
		if !ok {
			continue
		}
		m := Message{Thread: t, ID: q.MessageID, User: User{ID: q.UserID, Name: q.UserName}, Text: q.Text}
		b.mu.Lock()
		fresh := b.markSeen(m.ID)
		b.mu.Unlock()
		if fresh {
			b.log.Info("handling a message queued before the restart", "conv", q.Session, "msg", q.MessageID)
			it := item{msg: m}
			if _, _, ok := ch.Agent.SkillCommand(m.Text); ok {
				it.cmd = "skill"
			}
			b.enqueue(ctx, m, ch, it)
		}
	}
}

// work drains a thread's queue, one run at a time.
func (b *Bot) work(ctx context.Context, th *thread) {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		if len(th.queue) == 0 || ctx.Err() != nil {
			n := len(th.queue)
			th.queue, th.running = nil, false
			b.mu.Unlock()
			b.cfg.Metrics.queue(-float64(n))
			if n > 0 {
				b.post(context.WithoutCancel(ctx), th.t, Post{Text: fmt.Sprintf("thinbot is shutting down; %d queued message(s) will be handled after the restart.", n)})
			}
			return
		}
		it := th.queue[0]
		th.queue = th.queue[1:]
		th.ch = it.ch
		b.mu.Unlock()
		b.cfg.Metrics.queue(-1)
		if !b.acquire(ctx, th, it) {
			continue
		}
		switch it.cmd {
		case "clear":
			b.clear(ctx, th, it.msg)
		case "compact":
			b.compact(ctx, th)
		case "resume":
			b.resume(ctx, th, it)
		default:
			b.turn(ctx, th, it)
		}
		<-b.slots
		if it.alert != nil {
			it.alert.release()
		}
	}
}

// acquire takes a run slot, telling the thread when it has to wait (and
// recording the waiting message, as for a queued one).
func (b *Bot) acquire(ctx context.Context, th *thread, it item) bool {
	select {
	case b.slots <- struct{}{}:
		return true
	default:
	}
	if it.cmd == "" || it.cmd == "skill" {
		b.noteQueued(th, it.ch, it.msg)
	}
	b.post(ctx, th.t, Post{Text: fmt.Sprintf("Waiting: %d runs are in progress (the limit); this thread is next in line.", b.cfg.MaxConcurrent)})
	select {
	case b.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// turn runs one message through the agent (a skill command without the
// model when skill is set) and renders it into the thread.
func (b *Bot) turn(ctx context.Context, th *thread, it item) {
	m, skill := it.msg, it.cmd == "skill"
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.mu.Lock()
	th.cancel = cancel
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		th.cancel = nil
		b.mu.Unlock()
	}()
	b.cfg.Metrics.activeRuns(1)
	defer b.cfg.Metrics.activeRuns(-1)
	b.showState(th.t, true)
	defer b.showState(th.t, false)

	r := newRenderer(b, th.t)
	if it.alert != nil {
		r.unwatched()
	}
	r.start(ctx)
	defer r.stop()
	approver := &threadApprover{b: b, th: th, requester: m.User, r: r, asked: map[string]*request{}}
	run := th.ch.Agent.Run
	if skill {
		run = th.ch.Agent.RunSkillCommand
	}
	t := agentcore.Turn{
		Session:      th.t.Key(),
		Actor:        actor(m.User),
		Text:         m.Text,
		MessageID:    m.ID,
		Dir:          th.ch.Workspace,
		Instructions: []string{th.ch.Instructions},
		AllowAll:     th.ch.AllowAll,
		FleetGroups:  th.ch.FleetGroups,
		Approver:     approver,
		Hooks:        r.hooks(),
	}
	if it.alert != nil {
		it.alert.prepare(&t)
		defer it.alert.after(context.WithoutCancel(ctx), b, th.t)
	}
	if why := b.tokenBudget(th, &t); why != "" {
		b.noteRefused(th, m, why) // in the chain before the thread shows it
		r.finish(context.WithoutCancel(ctx), why)
		return
	}
	res, err := run(runCtx, t)
	b.ended(ctx, th, r, res, err)
}

// ended counts a run's tokens and outcome and shows its end in the
// thread.
func (b *Bot) ended(ctx context.Context, th *thread, r *renderer, res agentcore.Result, err error) {
	b.spent(th, res.Usage)
	b.cfg.Metrics.run(res.Status)
	out := context.WithoutCancel(ctx)
	switch {
	case res.Status == agentcore.StatusCancelled:
		if ctx.Err() != nil {
			b.noteShutdown(th.t.Key())
		}
		r.finish(out, CancelledText(res.Cause, ctx.Err() == nil))
	case res.Status == agentcore.StatusBudget:
		r.finish(out, res.Answer+BudgetSuffix)
	case err != nil:
		kind := "model"
		if !isModelError(err) {
			kind = "store"
		}
		b.cfg.Metrics.error(kind)
		b.log.Error("run failed", "conv", th.t.Key(), "seq", res.LastSeq, "err", err)
		r.finish(out, userError(err, res.LastSeq))
	default:
		r.finish(out, res.Answer)
	}
}

// isModelError tells model failures (the endpoint) from store failures.
func isModelError(err error) bool { return errors.Is(err, agentcore.ErrModel) }

// userError is the short message a thread sees for a failed run; operators
// find the details in the log and the chain under the reference.
func userError(err error, ref uint64) string {
	if errors.Is(err, agentcore.ErrContextLength) {
		return fmt.Sprintf("This conversation no longer fits in the model's context window, even after compacting, so this run stopped (ref %d). Send `/clear` to start afresh; if even a new thread fails, the operators need to give the model a larger context window.", ref)
	}
	// An endpoint that answered with an error (agentcore/openai's APIError)
	// was reached: say what it answered.
	var answered interface{ HTTPStatus() int }
	if isModelError(err) && errors.As(err, &answered) {
		what := "an error inside its answer"
		if code := answered.HTTPStatus(); code != http.StatusOK {
			what = fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
		}
		return fmt.Sprintf("The model endpoint answered with %s, so this run stopped (ref %d). Please try again later; operators can see the details in the log.", what, ref)
	}
	if isModelError(err) {
		return fmt.Sprintf("I could not reach the model endpoint, so this run stopped (ref %d). Please try again later; operators can see the details in the log.", ref)
	}
	return fmt.Sprintf("Something went wrong and the run stopped before doing anything more (ref %d). Operators can see the details in the log.", ref)
}

// post sends a message, logging (not returning) a failure: the callers are
// best-effort notices.
func (b *Bot) post(ctx context.Context, t Thread, p Post) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	id, err := b.cfg.Adapter.Post(ctx, t, quiet(p))
	if err != nil {
		b.cfg.Metrics.error("chat")
		b.log.Warn("post to thread", "conv", t.Key(), "err", err)
	}
	return id
}

func (b *Bot) update(ctx context.Context, t Thread, postID string, p Post) {
	if postID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := b.cfg.Adapter.Update(ctx, t, postID, quiet(p)); err != nil {
		b.cfg.Metrics.error("chat")
		b.log.Warn("update post", "conv", t.Key(), "post", postID, "err", err)
	}
}

// matchUser reports whether u's id is in list; an empty list matches
// everyone. Names never match: a renamed account must not inherit another
// user's access.
func matchUser(list []string, u User) bool {
	return len(list) == 0 || (u.ID != "" && slices.Contains(list, u.ID))
}

// isApprover reports whether u's id is in the approver list. Names never
// match: a renamed account must not inherit an approver's rights.
func isApprover(list []string, u User) bool {
	return u.ID != "" && slices.Contains(list, u.ID)
}

// actor is how the chain records a chat user: by id, which no rename can
// take over, with the name alongside for readers ("user:U123 (bob)").
func actor(u User) string {
	if u.Name == "" || u.Name == u.ID {
		return "user:" + u.ID
	}
	return "user:" + u.ID + " (" + u.Name + ")"
}

func displayName(u User) string {
	if u.Name != "" {
		return u.Name
	}
	return u.ID
}

// ThreadOf parses a session key made by Thread.Key.
func ThreadOf(key string) (Thread, bool) {
	p := strings.SplitN(key, "/", 3)
	if len(p) != 3 || p[0] == "" || p[1] == "" || p[2] == "" {
		return Thread{}, false
	}
	return Thread{Platform: p[0], Channel: p[1], Root: p[2]}, true
}

// Recover updates the threads of what a previous process left open: the
// approval messages say they expired and interrupted threads are told.
// Call it after agentcore's Recover and before Run.
func (b *Bot) Recover(ctx context.Context, u agentcore.Unfinished) {
	b.mu.Lock()
	b.recovered = append(b.recovered, u.Queued...)
	b.carried = append(b.carried, u.Carried...)
	b.mu.Unlock()
	for _, pa := range u.Approvals {
		t, ok := ThreadOf(pa.Session)
		if !ok {
			continue
		}
		b.cfg.Metrics.approval("expired")
		text := RestartExpiredCard(pa.Command)
		if u.LeaderLost {
			text = LeaderLostExpiredCard(pa.Command)
		}
		if pa.PostID == "" {
			// The process died between posting the buttons and recording
			// the post: say so in the thread, since the old message
			// cannot be found (its buttons are refused anyway).
			b.post(ctx, t, Post{Text: text + fmt.Sprintf("\n(request `%s`; its buttons no longer work)", pa.RequestID)})
			continue
		}
		b.update(ctx, t, pa.PostID, Post{Text: text})
	}
	for _, sid := range u.Runs {
		t, ok := ThreadOf(sid)
		if !ok {
			continue
		}
		text := InterruptedText
		if u.LeaderLost {
			text = LeaderLostText
		}
		b.post(ctx, t, Post{Text: text})
	}
}
