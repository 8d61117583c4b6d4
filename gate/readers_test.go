package gate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"
)

// readerCases are issue 29's pass-tier readers that printed what the
// policy refuses elsewhere (every Confirm row here was pass before), and
// the everyday reads beside them that must stay pass.
var readerCases = []gateCase{
	// helm status -o json|yaml encodes the release: user values, chart,
	// rendered manifest with its Secrets (what `helm get values` and
	// `helm get manifest` are refused for).
	{cmd: "helm status web -o json", want: Confirm, rule: "flag.value"},
	{cmd: "helm status web -o yaml", want: Confirm, rule: "flag.value"},
	{cmd: "helm status web --output=json", want: Confirm, rule: "flag.value"},
	{cmd: "helm status web --output yaml", want: Confirm, rule: "flag.value"},
	{cmd: "helm status web -ojson", want: Confirm, rule: "flag.value"},
	{cmd: "helm -n prod status web -o json --revision 3", want: Confirm, rule: "flag.value"},
	{cmd: "helm get values web", want: Confirm},
	{cmd: "helm status web", want: Pass},
	{cmd: "helm status web -o table", want: Pass},
	{cmd: "helm status web --show-resources --show-desc", want: Pass},
	{cmd: "helm -n prod status web --revision 3", want: Pass},
	// list and history print release metadata in every format.
	{cmd: "helm list -A -o json", want: Pass},
	{cmd: "helm history web -o yaml --max 5", want: Pass},
	// kubectl: Secrets in every output form and spelling need approval;
	// other kinds pass with -o.
	{cmd: "kubectl get secret", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl get secrets -o yaml", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl get pods,secrets -o yaml -A", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl get secret/db -o jsonpath={.data.password}", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl get Secrets.v1. -o go-template='{{.data}}'", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl get -n prod -o custom-columns=D:.data secret", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl describe secrets", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl get pods", want: Pass},
	{cmd: "kubectl get pods -o wide", want: Pass},
	{cmd: "kubectl get deploy web -o yaml", want: Pass},
	{cmd: "kubectl get all -o yaml -n prod", want: Pass},
	{cmd: "kubectl get cm app-config -o json", want: Pass},
	{cmd: "kubectl describe pod web-1", want: Pass},
	// jq reads `$ ENV` (blanks or a comment after the $) as $ENV.
	{cmd: "jq -n '$ ENV'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '$\tENV.PATH'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '$ # a comment\nENV'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '\"\\(env)\"'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '@base64 \"\\($ ENV)\"'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '{a: env}'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '\"m\" | modulemeta'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n 'm::f'", want: Confirm, rule: "jq.unsafe"},
	// jq 1.7 continues a comment after a backslash, jq 1.6 does not: the
	// two read different programs.
	{cmd: "jq -n '1 # \\\nenv'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '1 # \\\n\"\nenv\"'", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '\"abc'", want: Confirm, rule: "jq.unsafe"},
	// What jq 1.6 (Debian 12's jq) never ends: gsub, and sub with flag g,
	// on a regex that can match the empty string; indices("") and the
	// functions built on it.
	{cmd: "jq 'gsub(\"\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'sub(\"\";\"-\";\"g\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\"^\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\"\\\\b\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\"x*\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\"(?=b)\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\"(?<x>)\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\" \";\"-\";\"x\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\"a{0,2}\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq --arg re '' 'gsub($re;\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(.re;\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'gsub(\"\\(.re)\";\"-\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'sub(\"a\";\"-\";$f)' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'indices(\"\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'index(\"\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'rindex(\"\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq '_strindices(\"\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq 'index(.sep)' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -n 'repeat(1)'", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -n 'range(infinite)'", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -n '1|recurse(.+1)'", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -n '1|recurse(.+1; true)'", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -n '1|while(true; .)'", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -n '1|until(false; .)'", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -n 'def f: f; f'", want: Confirm, rule: "jq.endless"},
	// Everyday jq.
	{cmd: "jq .items[] pods.json", want: Pass},
	{cmd: "jq -r .items[].metadata.name pods.json", want: Pass},
	{cmd: "jq '.items[]' pods.json", want: Pass},
	{cmd: "jq -r '.x | test(\"a\")' f.json", want: Pass},
	{cmd: "jq -r '.x | test(\"\")' f.json", want: Pass},
	{cmd: "jq -r '[.x | scan(\"\")]' f.json", want: Pass},
	{cmd: "jq -r '.x | gsub(\"-\";\"_\")' f.json", want: Pass},
	{cmd: "jq -r '.x | gsub(\"[0-9]+\";\"N\")' f.json", want: Pass},
	{cmd: "jq -r '.x | gsub(\"(?<d>[0-9])\";\"<\\(.d)>\")' f.json", want: Pass},
	{cmd: "jq -r '.x | sub(\"^v\";\"\")' f.json", want: Pass},
	{cmd: "jq -r '.x | sub(\"^\";\">\")' f.json", want: Confirm, rule: "jq.endless"},
	{cmd: "jq -r '.x | sub(\"a b\";\"c\";\"g\")' f.json", want: Pass},
	{cmd: "jq -r '.x | ascii_downcase | index(\",\")' f.json", want: Pass},
	{cmd: "jq -r '.[] | indices(1)' f.json", want: Pass},
	{cmd: "jq .env f.json", want: Pass},
	{cmd: "jq -r '.a.env, .[\"env\"], .environment' f.json", want: Pass},
	{cmd: "jq -r '.items | recurse | .name?' f.json", want: Pass},
	{cmd: "jq '[limit(3; .[])]' f.json", want: Pass},
	{cmd: "jq -n '$__loc__'", want: Pass},
	{cmd: "jq -r 'input_filename' f.json", want: Pass},
	{cmd: "jq --arg v \"it's\" '.x == $v' f.json", want: Pass},
	{cmd: "jq -r '.msg # the message\n| ascii_upcase' f.json", want: Pass},
	{cmd: "kubectl get pods -o json | jq -r '.items[] | select(.status.phase != \"Running\") | .metadata.name'", want: Pass},
	// A bracket that nothing closes is literal to bash; one that is
	// closed is a glob.
	{cmd: "jq .items[0] pods.json", want: Confirm, rule: "word.glob"},
	{cmd: "cat x[]]", want: Confirm, rule: "word.glob"},
	{cmd: "jq '.[0]' f.json", want: Pass},
	// A process's memory, address space and environment: one rule for
	// every process and thread, however the path is spelled.
	{cmd: "cat /proc/1/smaps", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/1/smaps_rollup", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/1/numa_maps", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/1/syscall", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/1/stack", want: Confirm, rule: "secret.path"},
	{cmd: "xxd /proc/1/auxv", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/1/task/1/maps", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/1/task/1/smaps", want: Confirm, rule: "secret.path"},
	{cmd: "head -c 64 /proc/1/task/1/pagemap", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/self/task/1/../1/maps", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/thread-self/smaps", want: Confirm, rule: "secret.path"},
	{cmd: "cat /dev/fd/../../1/smaps", want: Confirm, rule: "secret.path"},
	{cmd: "grep rw-p /proc/self/smaps", want: Confirm, rule: "secret.path"},
	{cmd: "cd /proc/1/task/1 && cat maps", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/self/environ", want: Confirm, rule: "secret.path"},
	{cmd: "cat /proc/1/task/1/environ", want: Deny},
	{cmd: "cat /proc/1/task/1/mem", want: Deny},
	{cmd: "cat /proc/meminfo", want: Pass},
	{cmd: "cat /proc/1/status", want: Pass},
	{cmd: "cat /proc/1/stat", want: Pass},
	{cmd: "cat /proc/1/task/1/status", want: Pass},
	{cmd: "cat /proc/1/cmdline", want: Pass},
	{cmd: "cat /proc/self/status", want: Pass},
	{cmd: "cat /proc/self/mountinfo", want: Pass},
	// Credentials the policy refuses as ~/.kube/config, under other names.
	{cmd: "cat /etc/kubernetes/admin.conf", want: Confirm, rule: "secret.path"},
	{cmd: "grep client-key-data /etc/kubernetes/super-admin.conf", want: Confirm, rule: "secret.path"},
	{cmd: "cat /etc/rancher/k3s/k3s.yaml", want: Confirm, rule: "secret.path"},
	{cmd: "cat /var/lib/rancher/k3s/server/token", want: Confirm, rule: "secret.path"},
	{cmd: "cat /etc/wireguard/wg0.conf", want: Confirm, rule: "secret.path"},
	{cmd: "cat /etc/mysql/debian.cnf", want: Confirm, rule: "secret.path"},
	{cmd: "cat /etc/kubernetes/manifests/kube-apiserver.yaml", want: Pass},
	{cmd: "ls -la /etc/kubernetes /etc/wireguard", want: Pass},
	{cmd: "cat /etc/mysql/my.cnf", want: Pass},
	{cmd: "ps aux", want: Pass},
	{cmd: "ps -eo pid,rss,comm --sort=-rss", want: Pass},
	{cmd: "ss -tlnp", want: Pass},
	{cmd: "free -m", want: Pass},
}

func TestPassTierReaders(t *testing.T) {
	p := testPolicy(t)
	for _, tc := range readerCases {
		got := p.ClassifyIn(tc.dir, tc.cmd)
		if got.Verdict != tc.want {
			t.Errorf("ClassifyIn(%q, %q) = %v (%s: %s), want %v", tc.dir, tc.cmd, got.Verdict, got.Rule, got.Reason, tc.want)
			continue
		}
		if tc.rule != "" && got.Rule != tc.rule {
			t.Errorf("ClassifyIn(%q, %q) rule = %s (%s), want %s", tc.dir, tc.cmd, got.Rule, got.Reason, tc.rule)
		}
		if tc.want == Pass {
			if problem := independentPassCheck(p, tc.cmd); problem != "" {
				t.Errorf("pass case %q: %s", tc.cmd, problem)
			}
		}
	}
}

// processFiles are the names sensitive_paths' /proc/*/{,task/*/}{…} rule
// covers; TestProcessFileSpellings reads each through every spelling.
var processFiles = []string{"environ", "mem", "maps", "smaps", "smaps_rollup", "numa_maps", "pagemap", "auxv", "syscall", "stack"}

func TestProcessFileSpellings(t *testing.T) {
	p := testPolicy(t)
	spellings := []string{
		"/proc/1/%s", "/proc/self/%s", "/proc/thread-self/%s", "/proc/1/task/1/%s",
		"/proc/self/task/1/%s", "/proc/self/task/1/../1/%s", "/proc/1/task/../%s", "/proc//1/./%s",
		"/dev/fd/../../1/%s", "/dev/fd/../%s", "/dev/stdin/../../%s", "/proc/self/net/../%s",
		"/proc/1/fdinfo/../task/2/%s", "/proc/thread-self/../2/%s",
	}
	for _, name := range processFiles {
		for _, sp := range spellings {
			path := strings.ReplaceAll(sp, "%s", name)
			if d := p.ClassifyPath(path); d.Verdict == Pass {
				t.Errorf("ClassifyPath(%q) = pass (%s), want confirm or deny", path, d.Reason)
			}
			if d := p.Classify("cat " + path); d.Verdict == Pass {
				t.Errorf("Classify(cat %s) = pass, want confirm or deny", path)
			}
		}
	}
	for _, path := range []string{"/proc/1/status", "/proc/1/cmdline", "/proc/1/task/1/stat", "/proc/meminfo", "/proc/self/limits", "/proc/thread-self/../../1/environ"} {
		if d := p.ClassifyPath(path); d.Verdict != Pass {
			t.Errorf("ClassifyPath(%q) = %v (%s), want pass", path, d.Verdict, d.Reason)
		}
	}
}

func TestExpandBraces(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"/etc/shadow*", []string{"/etc/shadow*"}},
		{"/proc/*/{a,b}", []string{"/proc/*/a", "/proc/*/b"}},
		{"/proc/*/{,task/*/}{a,b}", []string{"/proc/*/a", "/proc/*/task/*/a", "/proc/*/b", "/proc/*/task/*/b"}},
		{"/x/{a", []string{"/x/{a"}},
		{"/x/a}", []string{"/x/a}"}},
		{strings.Repeat("{a,b}", 9), []string{strings.Repeat("{a,b}", 9)}},
	} {
		got := expandBraces(tc.in)
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("expandBraces(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if _, err := ParsePolicy([]byte("sensitive_paths: [\"/x/"+strings.Repeat("{a,b}", 9)+"\"]\n"), nil); err == nil {
		t.Error("ParsePolicy accepts a sensitive path that expands to 512 patterns")
	}
}

// jqPrograms are filters run by the real jq in TestJQAgreesWithRealJQ,
// with their input: the gate's verdict on each must agree with what jq
// does with it.
var jqPrograms = []struct{ prog, input string }{
	{`$ENV`, `null`}, {`$ ENV`, `null`}, {"$ # c\nENV | length", `null`}, {`env.THINBOT_PROBE`, `null`},
	{`"\(env)"`, `null`}, {`@json "\($ ENV)"`, `null`}, {`$ENV.THINBOT_PROBE`, `null`},
	{`.env`, `{"env":"e"}`}, {`{env}`, `{"env":"e"}`}, {`.["ENV"]`, `{"ENV":1}`},
	{`gsub("";"-")`, `"abc"`}, {`sub("";"-";"g")`, `"abc"`}, {`gsub("(?=b)";"-")`, `"abc"`},
	{`gsub(" ";"-";"x")`, `"a b"`}, {`indices("")`, `"abc"`},
	{`sub("";"-")`, `"abc"`}, {`test("";"g")`, `"abc"`}, {`[match("";"g")]`, `"abc"`},
	{`[scan("")]`, `"abc"`}, {`split("";"g")`, `"abc"`}, {`[splits("")]`, `"abc"`}, {`split("")`, `"abc"`},
	{`gsub("a";"b")`, `"aaa"`}, {`gsub("[0-9]+";"N")`, `"a1b22"`}, {`gsub("(?<d>[0-9])";"<\(.d)>")`, `"a1"`},
	{`sub("a b";"c";"g")`, `"a b a b"`}, {`index(",")`, `"a,b"`}, {`indices(1)`, `[1,2,1]`},
	{`.items[]`, `{"items":[1,2]}`}, {`.x | test("a")`, `{"x":"abc"}`}, {`[limit(3; .[])]`, `[1,2,3,4]`},
	{`recurse`, `[[1]]`}, {`$__loc__`, `null`}, {`input_filename`, `null`},
	{"1 # c\n+ 1", `null`},
}

// TestJQAgreesWithRealJQ runs the programs under the real jq with a probe
// in its environment: a program the gate passes must end and must not
// print the probe; one that printed the probe must be jq.unsafe to the
// gate, and one that did not end jq.endless.
func TestJQAgreesWithRealJQ(t *testing.T) {
	jq := realJQ(t)
	const probe = "thinbot-probe-4b1d"
	type run struct {
		out    []byte
		killed bool // by its CPU limit
	}
	// Concurrently, so the programs that never end cost their CPU limit
	// together. A CPU limit, not a clock, tells a program that never ends
	// (jq 1.6 starts in about 20ms of CPU) on a busy machine.
	runs := make([]run, len(jqPrograms))
	var wg sync.WaitGroup
	for i, c := range jqPrograms {
		dir := t.TempDir()
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `ulimit -t 1 && exec "$0" -c "$1"`, jq, c.prog)
			cmd.Env = []string{"THINBOT_PROBE=" + probe, "PATH=/usr/bin:/bin"}
			cmd.Dir = dir
			cmd.Stdin = strings.NewReader(c.input)
			out, err := cmd.CombinedOutput() // a program jq rejects is fine
			var exit *exec.ExitError
			killed := errors.As(err, &exit) && exit.ProcessState.Sys().(syscall.WaitStatus).Signaled()
			runs[i] = run{out, killed}
		})
	}
	wg.Wait()
	ended, leaked, endless := 0, 0, 0
	for i, c := range jqPrograms {
		rule, why := jqProblem(c.prog)
		out := runs[i].out
		switch {
		case runs[i].killed:
			endless++
			if rule != "jq.endless" {
				t.Errorf("jq %q did not end in 1s of CPU, but the gate says %q %s", c.prog, rule, why)
			}
		case bytes.Contains(out, []byte(probe)) || strings.Contains(c.prog, "ENV") && bytes.Contains(out, []byte(`"PATH"`)):
			leaked++
			if rule != "jq.unsafe" {
				t.Errorf("jq %q printed the environment (%s), but the gate says %q %s", c.prog, out, rule, why)
			}
		default:
			ended++
		}
	}
	if endless < 5 || leaked < 6 {
		t.Errorf("jq %s: %d programs never ended, %d printed the environment; the list expects at least 5 and 6", jqVersion(jq), endless, leaked)
	}
	t.Logf("jq %s: %d ended, %d printed the environment, %d never ended", jqVersion(jq), ended, leaked, endless)
}

// realJQ returns the path of jq. Without it the test skips on a
// developer's machine and fails under CI=1 (.ci/run installs jq).
func realJQ(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("jq")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no jq on this machine, and CI is set: jq is a prerequisite of this test")
		}
		t.Skip("no jq on this machine")
	}
	return p
}

func jqVersion(jq string) string {
	out, _ := exec.Command(jq, "--version").Output()
	return strings.TrimSpace(string(out))
}

// FuzzJQLex checks that the jq lexer's verdict does not depend on layout:
// the program's tokens written out one blank apart get the same rule.
func FuzzJQLex(f *testing.F) {
	for _, c := range jqPrograms {
		f.Add(c.prog)
	}
	for _, tc := range readerCases {
		if strings.HasPrefix(tc.cmd, "jq ") {
			f.Add(tc.cmd[3:])
		}
	}
	f.Fuzz(func(t *testing.T, prog string) {
		rule, _ := jqProblem(prog)
		toks, err := jqLex(prog)
		if err != nil {
			if rule != "jq.unsafe" {
				t.Fatalf("jqLex(%q) fails, but jqProblem gives %q", prog, rule)
			}
			return
		}
		if !utf8.ValidString(prog) {
			return // json.Marshal would write U+FFFD for the bad bytes
		}
		var b strings.Builder
		for _, tok := range toks {
			switch tok.kind {
			case jqString:
				if !tok.literal {
					return // interpolations and bad escapes: no plain rendering
				}
				q, _ := json.Marshal(tok.text)
				b.Write(q)
			case jqField:
				b.WriteString("." + tok.text)
			case jqVar:
				b.WriteString("$" + tok.text)
			default:
				b.WriteString(tok.text)
			}
			b.WriteByte(' ')
		}
		if rule2, _ := jqProblem(b.String()); rule2 != rule {
			t.Fatalf("jqProblem(%q) = %q, but its tokens %q give %q", prog, rule, b.String(), rule2)
		}
	})
}
