package bot

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff bounds the delay between an adapter's reconnect attempts. The
// delay doubles from Min up to Max, with random jitter; for the first
// EarlyFor after the connection was lost it grows no higher than EarlyMax,
// so that a short outage ends with a quick reconnect (and /readyz recovers
// within seconds of its end). Zero fields take the defaults of
// WithDefaults: 1s..60s, at most 5s for the first 2 minutes.
type Backoff struct {
	Min      time.Duration
	Max      time.Duration
	EarlyMax time.Duration
	EarlyFor time.Duration
}

// WithDefaults returns b with its zero fields set to the defaults; a Max
// below Min becomes Min.
func (b Backoff) WithDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = time.Second
	}
	if b.Max <= 0 {
		b.Max = time.Minute
	}
	b.Max = max(b.Max, b.Min)
	if b.EarlyMax <= 0 {
		b.EarlyMax = 5 * time.Second
	}
	if b.EarlyFor <= 0 {
		b.EarlyFor = 2 * time.Minute
	}
	return b
}

// Limit is the longest delay lost after the connection was lost: EarlyMax
// (but at least Min) for the first EarlyFor, then Max.
func (b Backoff) Limit(lost time.Duration) time.Duration {
	if lost < b.EarlyFor {
		return max(min(b.Max, b.EarlyMax), b.Min)
	}
	return b.Max
}

// Delay returns the wait before reconnect attempt n (0-based), lost after
// the connection was lost: Min*2^n capped at Limit(lost), with the upper
// half randomised so that many clients do not reconnect in step.
func (b Backoff) Delay(n int, lost time.Duration) time.Duration {
	limit := b.Limit(lost)
	d := b.Min
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// Dedupe is a bounded set of recently seen keys (message ids, event ids):
// once full, the oldest key is forgotten first. Adapters use it to drop
// redelivered events, the bot to handle a message once. It grows as keys
// come and is safe for concurrent use.
type Dedupe struct {
	mu   sync.Mutex
	max  int
	keys map[string]struct{}
	ring []string // grows to max, then is reused from next
	next int
}

// NewDedupe returns a Dedupe that remembers the last n keys (n > 0).
func NewDedupe(n int) *Dedupe {
	return &Dedupe{max: max(n, 1), keys: map[string]struct{}{}}
}

// Add records key and reports whether it was new.
func (d *Dedupe) Add(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.keys[key]; ok {
		return false
	}
	if len(d.ring) < d.max {
		d.ring = append(d.ring, key)
	} else {
		delete(d.keys, d.ring[d.next])
		d.ring[d.next] = key
		d.next = (d.next + 1) % d.max
	}
	d.keys[key] = struct{}{}
	return true
}
