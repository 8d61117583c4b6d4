//go:build unix

package skills

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePython puts a python3 on PATH (and only there, with /usr/bin and /bin
// for the tools it uses) that runs script with sh. Every run appends its
// arguments as a line to the returned file.
func fakePython(t *testing.T, script string) (runs string) {
	t.Helper()
	dir := t.TempDir()
	runs = filepath.Join(dir, "runs")
	text := "#!/bin/sh\necho \"$*\" >> " + runs + "\n" + script + "\n"
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	return runs
}

// runLines are the runs fakePython recorded.
func runLines(t *testing.T, runs string) []string {
	t.Helper()
	b, err := os.ReadFile(runs)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "_"))
}

// pythonSkills writes two skills that need python3 >= 3.8 and returns
// their search path.
func pythonSkills(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, n := range []string{"py-one", "py-two"} {
		writeSkill(t, filepath.Join(root, n), n, "Needs python.", "requires:\n  python: \">=3.8\"\n")
	}
	return root
}

// A python3 slower to start than the probe's old 5-second bound (as on
// a busy host) is waited for: the skills that need it load. The probe
// runs it isolated and without site (-I -S), the cheapest start.
func TestPythonProbeWaitsForASlowStart(t *testing.T) {
	runs := fakePython(t, "sleep 6\necho 3 12")
	set := Load([]string{pythonSkills(t)}, Options{})
	if len(set.Skills) != 2 || len(set.Filtered) != 0 {
		t.Fatalf("with a python3 that takes 6 s to answer: loaded %d, filtered %+v", len(set.Skills), set.Filtered)
	}
	if got := runLines(t, runs); len(got) != 1 || !strings.HasPrefix(got[0], "-I_-S_-c_") {
		t.Errorf("python3 runs: %q; want one, with -I -S", got)
	}
}

// A python3 that does not answer within the bound hides the skills that
// need it, with a reason that says so; the probe does not wait for the
// children of a python3 wrapper that hold its output.
func TestPythonProbeTimeoutSaysWhy(t *testing.T) {
	fakePython(t, "sleep 60; echo 3 12") // sh's child sleep keeps stdout open
	p := &PythonProbe{Timeout: 200 * time.Millisecond}
	set := Load([]string{pythonSkills(t)}, Options{Probe: Probe{Python: p.Version}})
	if len(set.Skills) != 0 || len(set.Filtered) != 2 {
		t.Fatalf("loaded %d, filtered %+v; want both hidden", len(set.Skills), set.Filtered)
	}
	for _, f := range set.Filtered {
		if !strings.Contains(f.Reason, "python3 >= 3.8 needed: python3 did not report its version within 200ms") {
			t.Errorf("%s hidden because %q; want the bound said", f.Name, f.Reason)
		}
	}
}

// One probe shared by several Loads (a daemon's workspaces) and callers
// at once runs python3 once; a Load without one runs its own, once.
func TestPythonProbeRunsOnce(t *testing.T) {
	runs := fakePython(t, "echo 3 11")
	dir := pythonSkills(t)
	p := &PythonProbe{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if maj, minor, err := p.Version(); maj != 3 || minor != 11 || err != nil {
				t.Errorf("Version = %d, %d, %v", maj, minor, err)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			if set := Load([]string{dir}, Options{Probe: Probe{Python: p.Version}}); len(set.Skills) != 2 {
				t.Errorf("shared probe: filtered %+v", set.Filtered)
			}
		})
	}
	wg.Wait()
	if n := len(runLines(t, runs)); n != 1 {
		t.Errorf("python3 ran %d times for one shared probe; want 1", n)
	}
	if set := Load([]string{dir}, Options{}); len(set.Skills) != 2 {
		t.Errorf("own probe: filtered %+v", set.Filtered)
	}
	if n := len(runLines(t, runs)); n != 2 {
		t.Errorf("python3 ran %d times for a Load of two skills with its own probe; want once more", n-1)
	}
}

// What python3 says when it fails is in the reason.
func TestPythonProbeSaysWhatFailed(t *testing.T) {
	fakePython(t, "echo 'Unknown option: -I' >&2; exit 2")
	_, _, err := (&PythonProbe{}).Version()
	if err == nil || !strings.Contains(err.Error(), "exit status 2: Unknown option: -I") {
		t.Errorf("Version error = %v; want the exit status and python3's message", err)
	}
}
