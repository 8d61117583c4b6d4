package gate

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"
)

func TestVerdictText(t *testing.T) {
	for _, v := range []Verdict{Deny, Confirm, Pass} {
		b, err := json.Marshal(Decision{Verdict: v})
		if err != nil {
			t.Fatal(err)
		}
		var d Decision
		if err := json.Unmarshal(b, &d); err != nil || d.Verdict != v {
			t.Errorf("round trip of %v via %s = %v, %v", v, b, d.Verdict, err)
		}
	}
	if _, err := Verdict(7).MarshalText(); err == nil {
		t.Error("MarshalText(7) succeeded")
	}
	var v Verdict
	if err := v.UnmarshalText([]byte("allow")); err == nil {
		t.Error(`UnmarshalText("allow") succeeded`)
	}
	if Verdict(7).String() != "verdict(7)" {
		t.Errorf("String(7) = %q", Verdict(7).String())
	}
	var zero Decision
	if zero.Verdict != Deny {
		t.Error("the zero Decision is not a deny")
	}
}

func TestClassifyPath(t *testing.T) {
	p := testPolicy(t)
	tests := []struct {
		path string
		want Verdict
	}{
		{"/etc/shadow", Confirm},
		{"/etc/../etc/shadow", Confirm},
		{"//etc//shadow", Confirm},
		{"/home/bot/.ssh/id_rsa", Confirm},
		{"~/.ssh/id_rsa", Confirm},
		{"/srv/app/.env", Confirm},
		{"/etc/thinbot/config.yaml", Confirm},
		{"/var/lib/thinbot/audit.jsonl", Confirm},
		{"/var/lib/thinbot", Confirm},
		{"/var/lib/thinbot/../thinbot/store.db", Confirm},
		{"tls/server.key", Confirm},
		{"", Confirm},
		{"/etc/shadow\u202e", Confirm},
		{"/etc/passwd\x00", Deny},
		{"/etc/passwd", Pass},
		{"/var/log/syslog", Pass},
		{"/var/lib/thinbotx/data", Pass},
		{"README.md", Pass},
		{"/srv/repo/main.go", Pass},
		{"/dev/fd/../../1/environ", Deny},
		{"/proc/1/environ", Deny},
		{"/proc/1234/task/1234/mem", Deny},
		{"/proc/self/root/proc/1/environ", Deny},
		{"/dev/mem", Deny},
		{"/proc/self/environ", Confirm},
		{"/proc/1/root/etc/shadow", Confirm},
		{"/proc/1/task/1/root/home/bot/notes", Confirm},
		{"/proc/self/cwd/config.yaml", Confirm},
		{"/proc/thread-self/fd/3", Confirm},
		{"/dev/fd/3", Confirm},
		{"/dev/sda", Confirm},
		{"/dev/vda1", Confirm},
		{"/dev/mapper/vg0-root", Confirm},
		{"/dev/block/253:0", Confirm},
		{"/dev/vg0/root", Confirm},
		{"/work/.thinbot/events.db", Confirm},
		{"/dev/null", Pass},
		{"/dev/urandom", Confirm},
		{"/proc/meminfo", Pass},
		{"/proc/1/status", Pass},
	}
	for _, tc := range tests {
		if got := p.ClassifyPath(tc.path); got.Verdict != tc.want {
			t.Errorf("ClassifyPath(%q) = %v (%s), want %v", tc.path, got.Verdict, got.Reason, tc.want)
		}
	}
}

func TestZeroPolicy(t *testing.T) {
	var p *Policy
	for cmd, want := range map[string]Verdict{"ls": Confirm, "rm -rf /": Confirm, "ls\x00": Deny} {
		if got := p.Classify(cmd); got.Verdict != want {
			t.Errorf("nil policy Classify(%q) = %v, want %v", cmd, got.Verdict, want)
		}
		if got := (&Policy{}).Classify(cmd); got.Verdict != want {
			t.Errorf("zero policy Classify(%q) = %v, want %v", cmd, got.Verdict, want)
		}
	}
	if got := (&Policy{}).ClassifyPath("/etc/passwd"); got.Verdict != Pass {
		t.Errorf("zero policy ClassifyPath = %v", got.Verdict)
	}
}

func TestTrustAllRepos(t *testing.T) {
	p, err := ParsePolicy([]byte("trust_all_repos: true\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Classify("git status"); got.Verdict != Pass {
		t.Errorf("git status with trust_all_repos = %+v", got)
	}
	if got := DefaultPolicy().Classify("git status"); got.Verdict != Confirm {
		t.Errorf("git status by default = %+v", got)
	}
}

func TestWithCopies(t *testing.T) {
	base := DefaultPolicy()
	q := base.WithProtected("/srv/secret", "relative/ignored", "")
	if got := q.Classify("cat /srv/secret/x"); got.Verdict != Confirm {
		t.Errorf("protected path = %v", got.Verdict)
	}
	if got := base.Classify("cat /srv/secret/x"); got.Verdict != Pass {
		t.Errorf("WithProtected changed its receiver: %v", got.Verdict)
	}
	s := base.WithReadOnlyScripts("/opt/s/run.sh")
	if got := s.Classify("bash /opt/s/run.sh a b"); got.Verdict != Pass {
		t.Errorf("read-only script = %+v", got)
	}
	if got := base.Classify("bash /opt/s/run.sh a b"); got.Verdict != Confirm {
		t.Errorf("WithReadOnlyScripts changed its receiver: %v", got.Verdict)
	}
}

// A hand-built Policy (no ParsePolicy) compiles its tables on each call.
func TestHandBuiltPolicy(t *testing.T) {
	p := &Policy{
		Commands:       map[string]*Rule{"cat": {Operands: "files"}},
		SensitivePaths: []string{"/secret/**"},
		Deny:           DenyRules{Commands: map[string]string{"boom": "explodes"}},
	}
	for cmd, want := range map[string]Verdict{"cat /a": Pass, "cat /secret/a": Confirm, "ls && boom": Deny} {
		if got := p.Classify(cmd); got.Verdict != want {
			t.Errorf("Classify(%q) = %v (%s), want %v", cmd, got.Verdict, got.Reason, want)
		}
	}
}

func TestSedScripts(t *testing.T) {
	safe := []string{"p", "1,5p", "$p", "s/a/b/g", "s|a|b|", "/x/d", "/x/!d", "1~2p", "/a/,/b/p", "y/abc/xyz/", ":a;N;ba", "s/a/b/2p", "\\,x,p", "{p}", "=", "q5", "# comment\np", "s/\\//x/"}
	unsafe := []string{"w out", "1w out", "W out", "r file", "R file", "e id", "1e id", "s/a/b/w out", "s/a/b/e", "s/a/b/gw x", "a text", "i\\x", "c x", "/x/{w out\n}", "s/a/b", "p x", "v", "1,"}
	for _, s := range safe {
		if r := sedUnsafe(s); r != "" {
			t.Errorf("sedUnsafe(%q) = %q, want safe", s, r)
		}
	}
	for _, s := range unsafe {
		if sedUnsafe(s) == "" {
			t.Errorf("sedUnsafe(%q) = safe", s)
		}
	}
}

func TestANSIC(t *testing.T) {
	tests := map[string]string{`\x72m`: "rm", `\162m`: "rm", `\u0072m`: "rm", `a\nb`: "a\nb", `\'`: "'", `x\x00y`: "x", `\q`: `\q`, `\cA`: "\x01"}
	for in, want := range tests {
		if got := ansiC(in); got != want {
			t.Errorf("ansiC(%q) = %q, want %q", in, got, want)
		}
	}
}

// fuzzSeeds are the table cases plus a few odd shapes.
func fuzzSeeds() []string {
	var out []string
	for _, list := range [][]gateCase{denyCases, confirmCases, passCases, holeCases, containCases} {
		for _, c := range list {
			out = append(out, c.cmd)
		}
	}
	return append(out, "((", "$(", "<<", "'", "\\", "a=(1 2)", "${a[$(id)]}", "cat <<-EOF\n\tx\n\tEOF", "ls |& cat", "coproc x { ls; }")
}

// FuzzClassify checks that Classify never panics and, for a command it
// passes, these properties:
//
//   - it parses cleanly into simple commands (and for loops) whose names
//     are on the policy's tables, with plain-text words, no substitutions
//     and no background jobs; the re-check uses the parser directly, not
//     the gate;
//   - it does not pass once its output is redirected to a file, in any
//     working directory;
//   - followed by `rm -rf /` it is deny: nothing in a passing command
//     hides a later command from the deny scan.
//
// The command is wrapped as `( true\nCMD\n)`, which holds whatever CMD
// is (only a comment) or ends with (a comment, a here-document, a
// backslash-newline).
func FuzzClassify(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	p := testPolicy(f)
	f.Fuzz(func(t *testing.T, cmd string) {
		d := p.Classify(cmd)
		if d.Verdict < Deny || d.Verdict > Pass || d.Rule == "" || d.Reason == "" {
			t.Fatalf("Classify(%q) = %+v", cmd, d)
		}
		if d.Verdict != Pass {
			return
		}
		if problem := independentPassCheck(p, cmd); problem != "" {
			t.Fatalf("Classify(%q) = pass, but %s", cmd, problem)
		}
		for _, dir := range []string{"", "/srv/app", "/"} {
			if w := "( true\n" + cmd + "\n) > /tmp/fuzz-out"; p.ClassifyIn(dir, w).Verdict == Pass {
				t.Fatalf("Classify(%q) = pass, and ClassifyIn(%q, %q) = pass too", cmd, dir, w)
			}
		}
		if len(cmd) < 4000 {
			if w := "( true\n" + cmd + "\n); rm -rf /"; p.Classify(w).Verdict != Deny {
				t.Fatalf("Classify(%q) = pass, but Classify(%q) = %+v, want deny", cmd, w, p.Classify(w))
			}
		}
	})
}

// independentPassCheck re-parses a command and reports anything a passed
// command must not contain.
func independentPassCheck(p *Policy, cmd string) string {
	if strings.IndexByte(cmd, 0) >= 0 || len(cmd) > 4096 {
		return "the raw text is not acceptable"
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(cmd), "")
	if err != nil {
		return fmt.Sprintf("it does not parse: %v", err)
	}
	problem := ""
	loopVars := map[string]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		if problem != "" {
			return false
		}
		switch x := n.(type) {
		case *syntax.ForClause:
			// A for loop over words, whose variable is not one of bash's.
			wi, ok := x.Loop.(*syntax.WordIter)
			if !ok || x.Select || strings.ToLower(wi.Name.Value) != wi.Name.Value {
				problem = "it has a loop that is not `for name in words`"
			} else {
				loopVars[wi.Name.Value] = true
			}
		case *syntax.ParamExp:
			if x.Param == nil || !loopVars[x.Param.Value] || x.Exp != nil || x.Repl != nil || x.Index != nil || x.Slice != nil {
				problem = "it expands a variable that is not a loop's"
			}
		case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ArithmExp, *syntax.ArithmCmd,
			*syntax.FuncDecl, *syntax.IfClause, *syntax.WhileClause, *syntax.CaseClause,
			*syntax.DeclClause, *syntax.LetClause, *syntax.CoprocClause, *syntax.ExtGlob, *syntax.TestClause:
			problem = fmt.Sprintf("it contains a %T", n)
		case *syntax.SglQuoted:
			if x.Dollar {
				problem = "it contains $'…'"
			}
		case *syntax.Stmt:
			if x.Background || x.Coprocess {
				problem = "it runs something in the background"
			}
		case *syntax.Redirect:
			switch x.Op {
			case syntax.RdrOut, syntax.AppOut, syntax.RdrAll, syntax.AppAll, syntax.RdrClob:
				if x.Word.Lit() != "/dev/null" {
					problem = "it redirects output to " + x.Word.Lit()
				}
			case syntax.RdrInOut:
				problem = "it opens a file for writing"
			}
		case *syntax.CallExpr:
			if len(x.Args) == 0 {
				problem = "it assigns a shell variable"
				return false
			}
			// The name is the concatenation of its literal and quoted
			// parts (cat'' is cat).
			name := ""
			for _, q := range x.Args[0].Parts {
				switch y := q.(type) {
				case *syntax.Lit:
					name += y.Value
				case *syntax.SglQuoted:
					name += y.Value
				}
			}
			name = strings.TrimPrefix(strings.TrimPrefix(name, "/usr/bin/"), "/bin/")
			_, cmdOK := p.Commands[name]
			_, wrapOK := p.Wrappers[name]
			script := (name == "bash" || name == "sh" || name == "python3") && len(x.Args) > 1 && p.comp().scripts[path.Clean(x.Args[1].Lit())]
			if !cmdOK && !wrapOK && !script && !strings.ContainsAny(cmd, `"\`) {
				problem = fmt.Sprintf("the command %q is on no table", name)
			}
		}
		return true
	})
	return problem
}

func TestFuzzSeedsIndependentCheck(t *testing.T) {
	p := testPolicy(t)
	for _, c := range passCases {
		if c.want == Confirm {
			continue
		}
		if problem := independentPassCheck(p, c.cmd); problem != "" {
			t.Errorf("pass case %q: %s", c.cmd, problem)
		}
	}
}

// BenchmarkClassify measures ClassifyIn over a realistic mix. ns/op is the
// mean; median-ns/cmd is the median of the per-command means.
func BenchmarkClassify(b *testing.B) {
	p := testPolicy(b)
	mix := benchMix()
	per := make([]float64, len(mix))
	for i, cmd := range mix {
		const n = 200
		start := time.Now()
		for range n {
			p.ClassifyIn("/srv/repo", cmd)
		}
		per[i] = float64(time.Since(start).Nanoseconds()) / n
	}
	slices.Sort(per)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		p.ClassifyIn("/srv/repo", mix[i%len(mix)])
	}
	b.ReportMetric(per[len(per)/2], "median-ns/cmd")
}

// benchMix is a realistic mix of ~50 commands a model sends.
func benchMix() []string {
	return []string{
		"ls -la", "df -h", "free -m", "uptime", "ps aux | grep nginx", "systemctl status nginx",
		"journalctl -u nginx --since '1 hour ago' --no-pager", "tail -n 100 /var/log/nginx/error.log",
		"grep -i error /var/log/syslog | tail -n 20", "cat /etc/os-release", "kubectl get pods -n prod",
		"kubectl logs web-1 --tail=100", "docker ps -a", "docker stats --no-stream", "git status",
		"git log --oneline -n 10", "git diff --stat", "du -sh /var/log/* | sort -h", "ss -tlnp",
		"ip -br addr", "find /var/log -name '*.gz' -mtime +7", "sed -n '1,40p' /etc/nginx/nginx.conf",
		"wc -l /var/log/syslog", "head -n 50 app.log", "cat /etc/shadow", "cat ~/.ssh/id_rsa",
		"rm -rf /tmp/build", "rm -rf /", "sudo systemctl restart nginx", "curl -s http://localhost:8080/health",
		"bash -c 'rm -rf /'", "echo $(id)", "ls > out.txt", "apt-get update", "systemctl restart nginx",
		"kubectl delete pod web-1", "env", "tail -f /var/log/syslog", "find . -delete",
		"sed -i 's/a/b/' f", "LC_ALL=C sort -u names.txt", "timeout 5 du -sh /srv", "lsblk -f",
		"dmesg -T | tail -n 30", "cat /proc/meminfo", "stat -c %s /var/lib/docker", "ps -eo pid,comm,%cpu --sort=-%cpu | head",
		"kubectl describe pod web-1", "git show HEAD~1 --stat", "echo 'done' && date",
	}
}

// TestBenchMix keeps the benchmark mix realistic in size.
func TestBenchMix(t *testing.T) {
	if n := len(benchMix()); n < 45 {
		t.Errorf("benchmark mix has %d commands", n)
	}
}
