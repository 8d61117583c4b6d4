package bot

import (
	"fmt"
	"sync"

	"github.com/thinbot/thinbot/agentcore"
)

// TokenBudgets bound a channel's model tokens (prompt plus completion, as
// the server reports them, estimated where it reports none); 0 means no
// bound. A run stops when it reaches the smallest that applies; a run
// that would start over one does not start. The tallies are the
// process's: a restart starts them afresh.
type TokenBudgets struct {
	PerRun    int
	PerThread int
	PerDay    int // the channel's, per UTC day
}

// tokenTally is what threads and channels used.
type tokenTally struct {
	mu      sync.Mutex
	day     string
	threads map[string]int
	days    map[string]int // channel -> tokens today
}

// tokenBudget puts the thread's remaining budget into t, or says why the
// run cannot start.
func (b *Bot) tokenBudget(th *thread, t *agentcore.Turn) string {
	tb := th.ch.Tokens
	if tb == (TokenBudgets{}) {
		return ""
	}
	tt := &b.tokens
	tt.mu.Lock()
	tt.roll(b.cfg.Now().UTC().Format("2006-01-02"))
	usedThread, usedDay := tt.threads[th.t.Key()], tt.days[th.t.Channel]
	tt.mu.Unlock()
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
	return ""
}

// spent adds a run's usage to its thread's and channel's tallies and
// counts it in the metrics.
func (b *Bot) spent(th *thread, u agentcore.Usage) {
	n := u.PromptTokens + u.CompletionTokens
	if n == 0 {
		return
	}
	b.cfg.Metrics.tokensUsed(th.t.Channel, u)
	tt := &b.tokens
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.roll(b.cfg.Now().UTC().Format("2006-01-02"))
	tt.threads[th.t.Key()] += n
	tt.days[th.t.Channel] += n
}

// roll starts a new day's channel tallies; the caller holds mu.
func (tt *tokenTally) roll(day string) {
	if tt.threads == nil {
		tt.threads = map[string]int{}
	}
	if tt.day != day || tt.days == nil {
		tt.day, tt.days = day, map[string]int{}
	}
	if len(tt.threads) > 100000 {
		clear(tt.threads) // bounded: the oldest threads' tallies are forgotten
	}
}
