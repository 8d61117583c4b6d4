package main

import (
	"math"
	"runtime/debug"
	"strconv"
	"strings"
)

// The daemon's garbage collector settings, unless the environment sets
// GOGC or GOMEMLIMIT (a unit's Environment= can set them). The terminal commands (ask, chat, goal) and
// the web console use them too: their start allocates about 8 MiB (the
// package inits, the policy), which with GOGC=100 runs the collector a few
// times before the first model request; with 400 it does not run there:
// `thinbot ask`'s first model request 0.80x the time at +1% peak RSS
// (tests/startbench, paired runs).
//
// The daemon keeps little live heap (about 6 MiB with 200 sessions) but
// allocates about 100 KiB per message (requests, events, HTTP buffers), so
// with the default GOGC=100 a burst of messages runs the collector again
// and again, on the cores the runs need. In the 200-thread load test (2
// cores, tests/loadtest) GOGC 100/200/400/800 gave the daemon 168/155/141/
// 131 ms of CPU per run, p99 added latency about 90-126/80-114/73-80/68-107
// ms and peak RSS 42/43/46/49 MiB. 400 takes most of the gain; the soft
// limit makes the collector work harder instead of letting a heap with
// large command outputs (up to 10 MiB each) grow to five times its live
// size.
const (
	daemonGOGC     = 400
	daemonMemLimit = 128 << 20
)

// tuneGC applies the daemon's collector settings, or those the environment
// sets, and returns the function that restores the previous ones (tests
// run serve in their own process). The environment's are applied here, not
// left to the runtime: the runtime reads GOGC and GOMEMLIMIT when the
// process starts, and the commands that call tuneGC start a second time,
// re-executed by sandbox.HideEnviron with an empty environment (the values
// come back only to os.Getenv). A value the runtime would reject keeps the
// default.
func tuneGC(getenv func(string) string) (restore func()) {
	gogc, limit := daemonGOGC, int64(daemonMemLimit)
	if v, ok := parseGOGC(getenv("GOGC")); ok {
		gogc = v
	}
	if v, ok := parseMemLimit(getenv("GOMEMLIMIT")); ok {
		limit = v
	}
	oldGC, oldLimit := debug.SetGCPercent(gogc), debug.SetMemoryLimit(limit)
	return func() {
		debug.SetGCPercent(oldGC)
		debug.SetMemoryLimit(oldLimit)
	}
}

// parseGOGC reads GOGC as the runtime does: a percentage (negative is
// off), or "off".
func parseGOGC(s string) (int, bool) {
	if s == "off" {
		return -1, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// parseMemLimit reads GOMEMLIMIT as the runtime does: a number of bytes
// with an optional unit (B, KiB, MiB, GiB, TiB), or "off".
func parseMemLimit(s string) (int64, bool) {
	if s == "off" {
		return math.MaxInt64, true
	}
	mult := int64(1)
	for i, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if strings.HasSuffix(s, u) {
			s, mult = strings.TrimSuffix(s, u), 1<<(10*(i+1))
			break
		}
	}
	if mult == 1 {
		s = strings.TrimSuffix(s, "B")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}
