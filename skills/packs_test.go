package skills

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// needPython skips a test when python3 is absent, and fails it under CI
// (.ci/run installs python3).
func needPython(t *testing.T) {
	t.Helper()
	needTool(t, "python3", "the csv-stats and log-triage scripts need it")
}

// needTool returns the path of a program a test needs. A missing program
// skips the test on a developer's machine and fails it under CI (CI=1,
// set by .ci/run, which installs what the tests need).
func needTool(t *testing.T, name, why string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (%s); .ci/run installs it", name, why)
		}
		t.Skipf("%s is not installed; %s", name, why)
	}
	return p
}

// runScript runs a pack script with an explicit interpreter, as the model does.
func runScript(t *testing.T, stdin string, env []string, interp string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), interp, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), errors.Join(err, errors.New(stderr.String()))
	}
	return string(out), nil
}

func TestPacksLoad(t *testing.T) {
	needPython(t)
	set := Load([]string{"."}, Options{Probe: Probe{UID: 4242424}})
	var names []string
	for _, s := range set.Skills {
		names = append(names, s.Name)
		if len(s.Warnings) > 0 {
			t.Errorf("%s: warnings %q", s.Name, s.Warnings)
		}
		if len(s.Description) > 300 {
			t.Errorf("%s: description is %d bytes; keep pack descriptions within one index line", s.Name, len(s.Description))
		}
		txt, err := s.Text()
		_, scripts := os.Stat(filepath.Join(s.Dir, "scripts"))
		if err != nil || (scripts == nil && !strings.Contains(txt, s.Dir+"/scripts/")) || strings.Contains(txt, "{SKILL_DIR}") {
			t.Errorf("%s: Text() = %v, no filled-in script path:\n%s", s.Name, err, txt)
		}
	}
	if want := []string{"csv-stats", "log-triage", "promql", "skill-author", "sys-doctor"}; !slices.Equal(names, want) {
		t.Errorf("packs %q, want %q", names, want)
	}
	if len(set.Filtered) != 0 || len(set.Shadowed) != 0 {
		t.Errorf("filtered %+v shadowed %+v", set.Filtered, set.Shadowed)
	}
}

// TestSysDoctorReadOnly installs sys-doctor as an administrator would (files
// not writable by the bot) and checks its script is declared read-only.
func TestSysDoctorReadOnly(t *testing.T) {
	root := t.TempDir()
	dst := filepath.Join(root, "sys-doctor")
	for _, rel := range []string{"SKILL.md", "scripts/doctor.sh"} {
		data, err := os.ReadFile(filepath.Join("sys-doctor", rel))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{root, dst, filepath.Join(dst, "scripts")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	set := Load([]string{root}, Options{Probe: Probe{UID: 4242424}})
	sk, ok := set.Get("sys-doctor")
	if !ok {
		t.Fatalf("sys-doctor not loaded: %+v", set.Filtered)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(dst, "scripts", "doctor.sh"))
	if got := set.ReadOnlyScripts(); !slices.Equal(got, []string{real}) {
		t.Errorf("ReadOnlyScripts = %q, want %q (warnings %q)", got, real, sk.Warnings)
	}
}

func TestLogTriageScript(t *testing.T) {
	needPython(t)
	script := filepath.Join("log-triage", "scripts", "triage.py")
	out, err := runScript(t, "", nil, "python3", script, "log-triage/testdata/app.log")
	if err != nil {
		t.Fatal(err)
	}
	want := `lines 12, matched 9, signatures 4

     3  2024-05-01T10:00:05Z → 2024-05-01T10:02:13Z
  sig: ERROR db: connection to <ip> refused (attempt <n>)
  ex:  2024-05-01T10:00:05Z ERROR db: connection to 10.0.0.7:5432 refused (attempt 1)

     3  2024-05-01T10:00:09Z → 2024-05-01T10:04:16Z
  sig: ERROR request <uuid> failed: timeout after <n>
  ex:  2024-05-01T10:00:09Z ERROR request 3f2a9c1e-1b2c-4d5e-8f90-abcdef012345 failed: timeout after 3000ms

     2  2024-05-01T10:01:12Z → 2024-05-01T10:02:14Z
  sig: ERROR open <path>: permission denied
  ex:  2024-05-01T10:01:12Z ERROR open /var/lib/app/data/shard-17.db: permission denied

     1  2024-05-01T10:03:15Z
  sig: FATAL worker <hex> panicked: index out of range [<n>] with length <n>
  ex:  2024-05-01T10:03:15Z FATAL worker 0xdeadbeef panicked: index out of range [7] with length 4
`
	if out != want {
		t.Errorf("triage app.log =\n%s\nwant\n%s", out, want)
	}

	journal, err := os.ReadFile("log-triage/testdata/journal.txt")
	if err != nil {
		t.Fatal(err)
	}
	out, err = runScript(t, string(journal), nil, "python3", script, "-", "--top", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"lines 7, matched 4, signatures 2, showing top 1",
		"     2  May 01 10:00:02 → May 01 10:07:02",
		"  sig: kernel: Out of memory: Killed process <n> (java) total-vm:<n>",
		"… 1 more signatures (2 lines); use --top to see them",
	} {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("journal triage lacks %q:\n%s", w, out)
		}
	}
	if _, err := runScript(t, "", nil, "python3", script, "no/such/file"); err == nil {
		t.Error("a missing file did not fail")
	}
}

func TestCSVStatsScript(t *testing.T) {
	needPython(t)
	script := filepath.Join("csv-stats", "scripts", "csv_stats.py")
	out, err := runScript(t, "", nil, "python3", script, "--json", "csv-stats/testdata/orders.csv")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Rows, Columns, RaggedRows, DuplicateRows int
		Stats                                    []map[string]any `json:"column_stats"`
	}
	res.RaggedRows, res.DuplicateRows = -1, -1
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Rows != 10 || res.Columns != 7 || raw["ragged_rows"] != 1.0 || raw["duplicate_rows"] != 1.0 {
		t.Errorf("rows %d columns %d ragged %v duplicates %v", res.Rows, res.Columns, raw["ragged_rows"], raw["duplicate_rows"])
	}
	want := map[string]map[string]any{
		"order_id": {"type": "int", "missing": 0.0, "distinct": 9.0, "min": 1.0, "max": 9.0, "mean": 4.7},
		"amount":   {"type": "float", "missing": 1.0, "odd": "abc", "max": 120.5, "min": 0.99},
		"quantity": {"type": "int", "missing": 1.0, "p50": 1.0},
		"paid":     {"type": "bool", "type_share": 1.0},
		"created":  {"type": "date", "type_share": 0.9, "odd": "not a date"},
		"note":     {"type": "text", "missing": 6.0, "distinct": 3.0},
	}
	for _, col := range res.Stats {
		w, ok := want[col["name"].(string)]
		if !ok {
			continue
		}
		for k, v := range w {
			if col[k] != v {
				t.Errorf("column %s: %s = %v, want %v", col["name"], k, col[k], v)
			}
		}
	}

	// The text output, on stdin with a sniffed semicolon delimiter and a
	// generated file large enough to cross the 64 KiB sniffing window.
	var b strings.Builder
	b.WriteString("id;value\n")
	for i := range 20000 {
		b.WriteString(strings.Repeat("x", i%3) + "1;2.5\n")
	}
	out, err = runScript(t, b.String(), nil, "python3", script, "-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "delimiter ';'  rows 20000  columns 2  ragged 0  empty-lines 0  duplicates 19997") ||
		!strings.Contains(out, "value                 float  missing 0 (0.0%)  distinct 1  min 2.5 max 2.5") {
		t.Errorf("stdin profile:\n%s", out)
	}
}

func TestSysDoctorScript(t *testing.T) {
	script := filepath.Join("sys-doctor", "scripts", "doctor.sh")
	out, err := runScript(t, "", []string{"DOCTOR_PROC=sys-doctor/testdata/proc"}, "bash", script, "load", "mem")
	if err != nil {
		t.Fatal(err)
	}
	want := `== load ==
load 9.50 8.25 7.00  cpus 2  up 1d 2h 3m
!! 5-minute load 8.25 is above the 2 CPUs
== mem ==
mem total 7.6G available 0.4G (5%)  swap 1.9G used 1.8G
!! only 5% of memory available
!! swap 95% used
`
	if out != want {
		t.Errorf("doctor load mem =\n%s\nwant\n%s", out, want)
	}

	// Without ss the ports section falls back to /proc/net/tcp.
	bin := t.TempDir()
	for _, b := range []string{"awk", "sort", "head", "grep", "sed"} {
		p := needTool(t, b, "sys-doctor's ports fallback uses it")
		if err := os.Symlink(p, filepath.Join(bin, b)); err != nil {
			t.Fatal(err)
		}
	}
	bash := needTool(t, "bash", "sys-doctor is a bash script")
	out, err = runScript(t, "", []string{"DOCTOR_PROC=sys-doctor/testdata/proc", "PATH=" + bin}, bash, script, "ports")
	if err != nil {
		t.Fatal(err)
	}
	if out != "== ports ==\ntcp  port 22\ntcp  port 8080\n" {
		t.Errorf("ports fallback = %q", out)
	}

	// The whole check-up on this machine: every section present, exit 0.
	out, err = runScript(t, "", nil, "bash", script)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"load", "mem", "disk", "inodes", "units", "procs", "ports", "oom"} {
		if !strings.Contains(out, "== "+s+" ==\n") {
			t.Errorf("section %s missing:\n%s", s, out)
		}
	}
	if _, err := runScript(t, "", nil, "bash", script, "bogus"); err == nil {
		t.Error("an unknown section did not fail")
	}
}

func TestSkillAuthorScaffold(t *testing.T) {
	parent := t.TempDir()
	script := filepath.Join("skill-author", "scripts", "scaffold.sh")
	desc := `Rotates "app" logs: it's safe to rerun.`
	out, err := runScript(t, "", nil, "bash", script, "rotate-logs", parent, desc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "SKILL.md") || !strings.Contains(out, "scripts/run.sh") {
		t.Errorf("scaffold output: %s", out)
	}
	sk, err := LoadOne(filepath.Join(parent, "rotate-logs"), Options{})
	if err != nil {
		t.Fatalf("scaffolded skill does not validate: %v", err)
	}
	if sk.Name != "rotate-logs" || sk.Description != desc || len(sk.Warnings) != 0 {
		t.Errorf("scaffolded skill %q %q warnings %q", sk.Name, sk.Description, sk.Warnings)
	}
	for _, args := range [][]string{{"rotate-logs", parent, "again"}, {"Bad_Name", parent, "x"}, {"ok", parent, " "}} {
		if _, err := runScript(t, "", nil, "bash", append([]string{script}, args...)...); err == nil {
			t.Errorf("scaffold %q succeeded", args)
		}
	}
}
