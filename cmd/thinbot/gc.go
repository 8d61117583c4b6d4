package main

import (
	"runtime/debug"
)

// The daemon's garbage collector settings, unless the environment sets
// GOGC or GOMEMLIMIT (which the runtime reads itself; a unit's
// Environment= can set them). The terminal commands (ask, chat, goal) and
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

// tuneGC applies the daemon's collector settings that the environment does
// not set, and returns the function that restores the previous ones (tests
// run serve in their own process).
func tuneGC(getenv func(string) string) (restore func()) {
	var undo []func()
	if getenv("GOGC") == "" {
		old := debug.SetGCPercent(daemonGOGC)
		undo = append(undo, func() { debug.SetGCPercent(old) })
	}
	if getenv("GOMEMLIMIT") == "" {
		old := debug.SetMemoryLimit(daemonMemLimit)
		undo = append(undo, func() { debug.SetMemoryLimit(old) })
	}
	return func() {
		for _, f := range undo {
			f()
		}
	}
}
