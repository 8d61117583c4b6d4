package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"
)

// TestTuneGC: serve sets the collector's percent and soft memory limit,
// or the environment's (which the runtime of a process re-executed by
// HideEnviron never saw), and restores what was there.
func TestTuneGC(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		wantGOGC  int
		wantLimit int64
	}{
		{"defaults", nil, daemonGOGC, daemonMemLimit},
		{"GOGC set", map[string]string{"GOGC": "50"}, 50, daemonMemLimit},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, daemonGOGC, 1 << 30},
		{"both set", map[string]string{"GOGC": "off", "GOMEMLIMIT": "512MiB"}, -1, 512 << 20},
		{"bytes", map[string]string{"GOMEMLIMIT": "1000000B"}, daemonGOGC, 1000000},
		{"limit off", map[string]string{"GOMEMLIMIT": "off"}, daemonGOGC, math.MaxInt64},
		{"bad values keep the defaults", map[string]string{"GOGC": "lots", "GOMEMLIMIT": "1GB"}, daemonGOGC, daemonMemLimit},
	}
	for _, tt := range tests {
		// What the runtime would have read from the environment.
		prevGC, prevLimit := debug.SetGCPercent(77), debug.SetMemoryLimit(1<<40)
		restore := tuneGC(func(k string) string { return tt.env[k] })
		gotGC, gotLimit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
		debug.SetGCPercent(gotGC)
		restore()
		afterGC, afterLimit := debug.SetGCPercent(prevGC), debug.SetMemoryLimit(prevLimit)
		if gotGC != tt.wantGOGC || gotLimit != tt.wantLimit {
			t.Errorf("%s: GOGC %d, limit %d; want %d, %d", tt.name, gotGC, gotLimit, tt.wantGOGC, tt.wantLimit)
		}
		if afterGC != 77 || afterLimit != 1<<40 {
			t.Errorf("%s: after restore GOGC %d, limit %d; want 77, %d", tt.name, afterGC, afterLimit, int64(1<<40))
		}
	}
}

// TestGCAndProfilingDocumented: deploy/operations.md states the collector defaults
// serve applies, how to override them, and the profiling switches; the
// systemd unit shows where the override goes.
func TestGCAndProfilingDocumented(t *testing.T) {
	guide, err := os.ReadFile("../../deploy/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	unit, err := os.ReadFile("../../deploy/thinbot.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf("GOGC=%d", daemonGOGC),
		fmt.Sprintf("GOMEMLIMIT=%dMiB", daemonMemLimit>>20),
		"Environment=GOMEMLIMIT=",
		profileEnv + "=",
		traceEnv + "=1",
		"mode 0600",
	} {
		if !strings.Contains(string(guide), want) {
			t.Errorf("deploy/operations.md does not say %q", want)
		}
	}
	if !strings.Contains(string(unit), "Environment=GOMEMLIMIT=") {
		t.Error("deploy/thinbot.service does not show how to set GOMEMLIMIT")
	}
}
