package bot

import (
	"testing"
	"time"
)

// The backoff grows to Max only after the first minutes of an outage: a
// server back after a long outage is found within EarlyMax while the
// outage is young, and within Max later.
func TestBackoff(t *testing.T) {
	b := Backoff{}.WithDefaults()
	for _, tc := range []struct {
		lost time.Duration
		max  time.Duration
	}{
		{0, 5 * time.Second},
		{119 * time.Second, 5 * time.Second},
		{2 * time.Minute, 60 * time.Second},
		{time.Hour, 60 * time.Second},
	} {
		if got := b.Limit(tc.lost); got != tc.max {
			t.Errorf("Limit(%v) = %v, want %v", tc.lost, got, tc.max)
		}
		for n := range 20 {
			want := min(time.Second<<min(n, 10), tc.max)
			for range 50 {
				if d := b.Delay(n, tc.lost); d < want/2 || d > want {
					t.Fatalf("Delay(%d, lost %v) = %v, want in [%v, %v]", n, tc.lost, d, want/2, want)
				}
			}
		}
	}
}

func TestBackoffDefaults(t *testing.T) {
	for _, tc := range []struct{ in, want Backoff }{
		{Backoff{}, Backoff{Min: time.Second, Max: time.Minute, EarlyMax: 5 * time.Second, EarlyFor: 2 * time.Minute}},
		{Backoff{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond}, Backoff{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond, EarlyMax: 5 * time.Second, EarlyFor: 2 * time.Minute}},
		{Backoff{Min: 2 * time.Minute}, Backoff{Min: 2 * time.Minute, Max: 2 * time.Minute, EarlyMax: 5 * time.Second, EarlyFor: 2 * time.Minute}},
	} {
		if got := tc.in.WithDefaults(); got != tc.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	// An early cap below Min is Min.
	if got := (Backoff{Min: 10 * time.Second}).WithDefaults().Limit(0); got != 10*time.Second {
		t.Errorf("Limit = %v, want Min", got)
	}
}

func TestDedupe(t *testing.T) {
	s := NewDedupe(3)
	for _, id := range []string{"a", "b", "c"} {
		if !s.Add(id) {
			t.Fatalf("Add(%s) = false for a new key", id)
		}
	}
	if s.Add("a") {
		t.Error("Add(a) twice = true")
	}
	s.Add("d")       // evicts a
	if !s.Add("a") { // evicts b
		t.Error("evicted key a still remembered")
	}
	if s.Add("c") || s.Add("d") {
		t.Error("recent keys c, d forgotten")
	}
	if !s.Add("b") {
		t.Error("evicted key b still remembered")
	}
}
