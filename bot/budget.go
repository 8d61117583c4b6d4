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
// that would start over one does not start. The tallies come from the
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
	// threads are the tallies of the threads that ran since the process
	// started (thread key -> tokens), each read from the chain when first
	// needed.
	threads map[string]int
}

// tokenBudget puts the thread's remaining budget into t, or says why the
// run cannot start.
func (b *Bot) tokenBudget(th *thread, t *agentcore.Turn) string {
	tb := th.ch.Tokens
	if tb == (TokenBudgets{}) {
		return ""
	}
	usedThread, usedDay, err := b.tokens.used(th.ch.Agent, th.t, b.cfg.Now())
	if err != nil {
		// Closed: the budget is a cost control, and a store that cannot be
		// read would fail the run anyway.
		b.cfg.Metrics.error("store")
		b.log.Error("token budget: reading the tallies", "conv", th.t.Key(), "err", err)
		return "Not started: this channel's token budget could not be checked (the event store failed). Operators can see the details in the log."
	}
	limit := tb.PerRun
	lower := func(n int) {
		if limit == 0 || n < limit {
			limit = n
		}
	}
	if tb.PerThread > 0 {
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
		t.Spent = func() string { return b.daySpent(th) }
	}
	return ""
}

// daySpent is a run's check of its channel's day before each model call:
// runs of one channel that overlap share what the day has left, which
// the run's own MaxTokens, fixed at its start, cannot see. It says why the
// run must stop, or "".
func (b *Bot) daySpent(th *thread) string {
	_, usedDay, err := b.tokens.used(th.ch.Agent, th.t, b.cfg.Now())
	if err != nil {
		b.cfg.Metrics.error("store")
		b.log.Error("token budget: reading the tallies", "conv", th.t.Key(), "err", err)
		return "Stopped: this channel's token budget could not be checked (the event store failed). Operators can see the details in the log."
	}
	if perDay := th.ch.Tokens.PerDay; usedDay >= perDay {
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

// used returns what thread th and its channel today have used: it brings
// the tallies forward from the chain and reads a thread's tally the first
// time the thread asks.
func (tt *tokenTally) used(ag *agentcore.Agent, th Thread, now time.Time) (thread, day int, err error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if err := tt.catchUp(ag, now); err != nil {
		return 0, 0, err
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
	return n, tt.days[th.channelKey()], nil
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
			if t, ok := ThreadOf(u.Session); ok { // not a schedule's session
				tt.days[t.channelKey()] += u.Tokens
			}
		}
	}
	// Past upTo even where it has no calls: the next look starts there.
	tt.mark, tt.ready = max(top, upTo), true
	return nil
}
