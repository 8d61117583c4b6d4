package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStartProfiles writes the daemon's profiles with and without the
// execution trace: every profile asked for is there and not empty, and the
// trace only when asked for.
func TestStartProfiles(t *testing.T) {
	for _, withTrace := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "prof")
		stop, err := startProfiles(dir, withTrace)
		if err != nil {
			t.Fatalf("trace %v: startProfiles: %v", withTrace, err)
		}
		if err := stop(); err != nil {
			t.Fatalf("trace %v: stop: %v", withTrace, err)
		}
		want := map[string]bool{"cpu.pprof": true, "heap.pprof": true, "allocs.pprof": true, "mutex.pprof": true,
			"trace.out": withTrace, "block.pprof": withTrace}
		for name, there := range want {
			fi, err := os.Stat(filepath.Join(dir, name))
			switch {
			case there && (err != nil || fi.Size() == 0):
				t.Errorf("trace %v: %s: %v", withTrace, name, err)
			case !there && err == nil:
				t.Errorf("trace %v: %s written, want none", withTrace, name)
			}
		}
	}
}
