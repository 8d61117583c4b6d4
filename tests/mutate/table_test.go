package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTableMatchesTheTree keeps the table true without running a mutant
// (go run ./tests/mutate does that): every row's snippet is in its file
// exactly once, the mutant differs, the ids are unique, the packages exist
// and the tests a row names exist.
func TestTableMatchesTheTree(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range table {
		if m.ID == "" || seen[m.ID] {
			t.Errorf("row id %q is empty or repeated", m.ID)
		}
		seen[m.ID] = true
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			t.Errorf("%s: %v", m.ID, err)
			continue
		}
		if n := bytes.Count(src, []byte(m.Old)); n != 1 {
			t.Errorf("%s: the snippet %q occurs %d times in %s, want once: update the row to the edited line", m.ID, m.Old, n, m.File)
		}
		if m.Old == m.New || m.What == "" || len(m.Pkgs) == 0 {
			t.Errorf("%s: no change, no description or no packages", m.ID)
		}
		if m.Run == "" {
			continue
		}
		re, err := regexp.Compile(m.Run)
		if err != nil {
			t.Errorf("%s: -run %q: %v", m.ID, m.Run, err)
			continue
		}
		if m.Pending == "" && !anyTest(t, root, m.Pkgs, re) {
			t.Errorf("%s: no test in %v matches -run %q", m.ID, m.Pkgs, m.Run)
		}
	}
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Example)\w*)\(`)

// anyTest reports whether a test function of one of pkgs matches re.
func anyTest(t *testing.T, root string, pkgs []string, re *regexp.Regexp) bool {
	for _, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(root, p, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Errorf("package %s has no tests", p)
			continue
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, sm := range testFunc.FindAllStringSubmatch(string(src), -1) {
				if re.MatchString(sm[1]) {
					return true
				}
			}
		}
	}
	return false
}

func TestFailedTests(t *testing.T) {
	for _, tt := range []struct{ out, want string }{
		{"--- FAIL: TestA (0.1s)\n    --- FAIL: TestA/sub (0.0s)\n--- FAIL: TestB (0s)\nFAIL\n", "TestA, TestB"},
		{"panic: test timed out after 5m0s\n", "the test timeout"},
		{"FAIL\texample.com/x\t0.1s\n", "a failing run (no test named)"},
		{"--- FAIL: A (0s)\n--- FAIL: B (0s)\n--- FAIL: C (0s)\n--- FAIL: D (0s)\n", "A, B, C and 1 more"},
	} {
		if got := failedTests([]byte(tt.out)); got != tt.want {
			t.Errorf("failedTests(%q) = %q, want %q", tt.out, got, tt.want)
		}
	}
}

// The merged baselines run every test the table's rows run: for each row,
// a baseline of the same packages whose pattern selects each test function
// the row's does, so that no row is "killed" against an unchecked test.
func TestBaselinesCoverEveryRow(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bs := baselines(table)
	if len(bs) >= len(table) {
		t.Errorf("%d baselines for %d rows: nothing merged", len(bs), len(table))
	}
	names := map[string][]string{} // package -> its test functions
	for _, m := range table {
		for _, p := range m.Pkgs {
			if _, ok := names[p]; ok {
				continue
			}
			files, _ := filepath.Glob(filepath.Join(root, p, "*_test.go"))
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, sm := range testFunc.FindAllStringSubmatch(string(src), -1) {
					names[p] = append(names[p], sm[1])
				}
			}
		}
	}
	top := func(run string) *regexp.Regexp { // the pattern's first level
		first, _, _ := strings.Cut(run, "/")
		return regexp.MustCompile(first)
	}
	for _, m := range table {
		covered := false
		for _, b := range bs {
			if !slices.Equal(b.Pkgs, m.Pkgs) || (strings.Contains(m.Run, "/") && b.Run != m.Run) {
				continue
			}
			covered = true
			for _, p := range m.Pkgs {
				for _, n := range names[p] {
					if m.Run == "" || top(m.Run).MatchString(n) {
						if b.Run != "" && !top(b.Run).MatchString(n) {
							covered = false
						}
					}
				}
			}
			if covered {
				break
			}
		}
		if !covered {
			t.Errorf("%s: no baseline runs every test of -run %q in %v", m.ID, m.Run, m.Pkgs)
		}
	}
	// A row without a pattern makes its packages' baseline run everything.
	if got := baselines([]mutation{{Pkgs: []string{"./x"}, Run: "A"}, {Pkgs: []string{"./x"}}, {Pkgs: []string{"./x"}, Run: "B"}}); len(got) != 1 || got[0].Run != "" || got[0].rows != 3 {
		t.Errorf("baselines with an empty pattern = %+v", got)
	}
}
