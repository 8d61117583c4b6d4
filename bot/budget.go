package bot

import (
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// TokenBudgets bound a channel's model tokens (prompt plus completion, as
// the server reports them, estimated where it reports none); 0 means no
// bound. A run stops when it reaches the smallest that applies; a run
// that would start over one does not start. A scheduled question of the
// channel is a run of it too, under PerRun and PerDay (scheduleBudget). The tallies come from the
// chain (each model call's assistant event, through the state index), so
// a restart keeps them: a crash loop does not hand a channel a fresh day.
type TokenBudgets struct {
	PerRun    int
	PerThread int
	PerDay    int // the channel's, per UTC day
}

// maxThreadTallies bounds the threads whose tallies are kept in memory; a
// thread forgotten beyond it is read from the chain again when it next
// runs.
const maxThreadTallies = 100000

// tokenTally is what threads and channels used, as far as the chain's
// model calls up to mark say (agentcore.Agent.TokenUses, TokenUsesAfter,
// SessionTokens). It is only ever
// brought forward from the chain, never added to by a run: a run's calls
// are in the chain, and counting them twice (once at the run's end, once
// when read back) is what an in-memory sum beside the chain would risk.
// It reads through the running thread's channel Agent: the channels of one
// Bot keep their sessions in one store (as cmd/thinbot wires them).
type tokenTally struct {
	mu sync.Mutex
	// ready: mark is set, and days and threads count every call up to it.
	ready bool
	mark  uint64
	day   time.Time      // the UTC midnight days counts from
	days  map[string]int // Thread.channelKey -> tokens since day
	// schedules are the channels (Thread.channelKey) of the schedules'
	// sessions ("schedule:NAME"), whose calls count in days too.
	schedules map[string]string
	// threads are the tallies of the threads that ran since the process
	// started (thread key -> tokens), each read from the chain when first
	// needed.
	threads map[string]int
}

// tokenBudget puts the thread's remaining budget into t, or says why the
// run cannot start.
func (b *Bot) tokenBudget(th *thread, t *agentcore.Turn) string {
	return b.channelBudget(th.ch, th.t.channelKey(), &th.t, t)
}

// scheduleBudget is tokenBudget for a scheduled question of channel ch:
// its run and the channel's day are bounded as a thread's run is, and what
// it spends counts in the channel's day. The thread's budget does not
// apply: a schedule's session lasts as long as the schedule, and a
// budget of it, once spent, would stop the schedule for good.
func (b *Bot) scheduleBudget(s Schedule, ch Channel, t *agentcore.Turn) string {
	key := Thread{Platform: s.Platform, Channel: s.Channel}.channelKey()
	b.tokens.schedule(t.Session, key)
	return b.channelBudget(ch, key, nil, t)
}

// channelBudget puts the remaining budget of a run in channel ch (key is
// its Thread.channelKey) into t, or says why the run cannot start; th is
// the run's thread, nil for a schedule's run.
func (b *Bot) channelBudget(ch Channel, key string, th *Thread, t *agentcore.Turn) string {
	tb := ch.Tokens
	if tb == (TokenBudgets{}) {
		return ""
	}
	usedThread, usedDay, err := b.tokens.used(ch.Agent, th, key, b.cfg.Now())
	if err != nil {
		// Closed: the budget is a cost control, and a store that cannot be
		// read would fail the run anyway.
		b.cfg.Metrics.error("store")
		b.log.Error("token budget: reading the tallies", "conv", t.Session, "err", err)
		return "Not started: this channel's token budget could not be checked (the event store failed). Operators can see the details in the log."
	}
	limit := tb.PerRun
	lower := func(n int) {
		if limit == 0 || n < limit {
			limit = n
		}
	}
	if tb.PerThread > 0 && th != nil {
		if usedThread >= tb.PerThread {
			return fmt.Sprintf("Not started: this thread has used its budget of %d model tokens (%d used). Start a new thread, or ask an operator to raise `tokens.per_thread`.", tb.PerThread, usedThread)
		}
		lower(tb.PerThread - usedThread)
	}
	if tb.PerDay > 0 {
		if usedDay >= tb.PerDay {
			return fmt.Sprintf("Not started: this channel has used its budget of %d model tokens for today (UTC). It renews at midnight UTC; an operator can raise `tokens.per_day`.", tb.PerDay)
		}
		lower(tb.PerDay - usedDay)
	}
	if limit > 0 && (t.Budgets.MaxTokens == 0 || limit < t.Budgets.MaxTokens) {
		t.Budgets.MaxTokens = limit
	}
	if tb.PerDay > 0 {
		// Other runs of the channel may spend the day meanwhile.
		t.Spent = func() string { return b.daySpent(ch, key, t.Session) }
	}
	return ""
}

// daySpent is a run's check of its channel's day before each model call:
// runs of one channel that overlap share what the day has left, which
// the run's own MaxTokens, fixed at its start, cannot see. It says why the
// run must stop, or "".
func (b *Bot) daySpent(ch Channel, key, conv string) string {
	_, usedDay, err := b.tokens.used(ch.Agent, nil, key, b.cfg.Now())
	if err != nil {
		b.cfg.Metrics.error("store")
		b.log.Error("token budget: reading the tallies", "conv", conv, "err", err)
		return "Stopped: this channel's token budget could not be checked (the event store failed). Operators can see the details in the log."
	}
	if perDay := ch.Tokens.PerDay; usedDay >= perDay {
		return fmt.Sprintf("Stopped: this channel has used its budget of %d model tokens for today (UTC).", perDay)
	}
	return ""
}

// spent counts a run's usage in the metrics. The tallies read it from the
// chain (tokenTally).
func (b *Bot) spent(th *thread, u agentcore.Usage) {
	if u.PromptTokens+u.CompletionTokens == 0 {
		return
	}
	b.cfg.Metrics.tokensUsed(th.t.Channel, u)
}

// used returns what thread th (0 when nil) and channel chanKey today have
// used: it brings the tallies forward from the chain and reads a thread's
// tally the first time the thread asks.
func (tt *tokenTally) used(ag *agentcore.Agent, th *Thread, chanKey string, now time.Time) (thread, day int, err error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if err := tt.catchUp(ag, now); err != nil {
		return 0, 0, err
	}
	if th == nil {
		return 0, tt.days[chanKey], nil
	}
	key := th.Key()
	n, ok := tt.threads[key]
	if !ok {
		// Up to mark: catchUp adds the calls after it.
		if n, err = ag.SessionTokens(key, tt.mark); err != nil {
			return 0, 0, err
		}
		if len(tt.threads) >= maxThreadTallies {
			for k := range tt.threads {
				delete(tt.threads, k) // any one: it is read again when needed
				break
			}
		}
		tt.threads[key] = n
	}
	return n, tt.days[chanKey], nil
}

// schedule says that the calls of session (a schedule's) count in the day
// of channel chanKey. A session the tallies did not know, or knew of
// another channel, makes them count the day afresh at the next look: its
// calls of today may be in the chain already (before a restart, before a
// config reload moved the schedule), counted nowhere or elsewhere. A
// schedule a reload removed keeps its channel until the process ends.
func (tt *tokenTally) schedule(session, chanKey string) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.schedules[session] == chanKey {
		return
	}
	if tt.schedules == nil {
		tt.schedules = map[string]string{}
	}
	tt.schedules[session] = chanKey
	tt.ready, tt.threads = false, nil
}

// catchUp adds the model calls after mark to the threads whose tallies are
// kept and, when they are of today, to their channel's. On a new UTC day
// (and at the first call) it counts the day's channel tallies afresh,
// reading the calls newest first back to mark or the day's start,
// whichever is earlier: a start-up reads one day of calls, not the chain.
// Otherwise it reads the calls after mark, oldest first, a block at a time.
// The caller holds mu.
func (tt *tokenTally) catchUp(ag *agentcore.Agent, now time.Time) error {
	day := now.UTC().Truncate(24 * time.Hour)
	fresh := !tt.ready || !day.Equal(tt.day)
	var uses iter.Seq2[agentcore.TokenUse, error]
	var upTo uint64 // every call up to it is in uses (that catchUp reads)
	var err error
	if fresh {
		uses, upTo, err = ag.TokenUses()
	} else {
		uses, upTo, err = ag.TokenUsesAfter(tt.mark)
	}
	if err != nil {
		return err
	}
	if fresh {
		tt.day, tt.days = day, map[string]int{}
	}
	if tt.threads == nil {
		tt.threads = map[string]int{}
	}
	top := tt.mark
	for u, err := range uses {
		if err != nil {
			// A tally read in part counts too few tokens: tokenBudget
			// refuses the run, and the tallies, some calls already
			// added, are read afresh at the next look, as at start-up.
			tt.ready, tt.threads = false, nil
			return err
		}
		top = max(top, u.Seq) // newest first: the first; oldest first: each
		newer := tt.ready && u.Seq > tt.mark
		today := !u.Time.Before(day)
		if !newer && (!fresh || !today) {
			break
		}
		if n, ok := tt.threads[u.Session]; ok && newer {
			tt.threads[u.Session] = n + u.Tokens
		}
		if today {
			if t, ok := ThreadOf(u.Session); ok {
				tt.days[t.channelKey()] += u.Tokens
			} else if k, ok := tt.schedules[u.Session]; ok {
				tt.days[k] += u.Tokens
			}
		}
	}
	// Past upTo even where it has no calls: the next look starts there.
	tt.mark, tt.ready = max(top, upTo), true
	return nil
}
