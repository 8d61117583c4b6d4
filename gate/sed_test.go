package gate

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// gnuSed returns the path of GNU sed: the gate's sed parser is checked
// against the real one. Without it the test skips on a developer's
// machine and fails under CI=1 (.ci/run installs sed), so CI never passes
// without having run the check.
func gnuSed(t testing.TB) string {
	t.Helper()
	missing := func(why string) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s, and CI is set: GNU sed is a prerequisite of this test", why)
		}
		t.Skip(why)
	}
	p, err := exec.LookPath("sed")
	if err != nil {
		missing("no sed on this machine")
		return ""
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil || !bytes.Contains(out, []byte("GNU sed")) {
		missing("sed is not GNU sed")
		return ""
	}
	return p
}

// sandboxRefuses runs GNU sed --sandbox on the script (with no input) and
// reports whether sed refused it because it holds an e, r or w command.
func sandboxRefuses(t testing.TB, sed, script string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sed, "--sandbox", "-n", "-e", script, "/dev/null")
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // a parse error is fine; only the sandbox refusal matters
	return strings.Contains(stderr.String(), "disabled in sandbox mode")
}

// sedScriptsForSandbox are scripts the gate reads as read-only; GNU sed's
// sandbox must accept every one of them (no e, r or w command hidden in a
// label or a bracket expression).
var sedScriptsForSandbox = []string{
	"p", "1,5p", "$p", "s/a/b/g", "s|a|b|", "/x/d", "/x/!d", "1~2p", "/a/,/b/p", "y/abc/xyz/",
	":a;N;ba", "s/a/b/2p", "\\,x,p", "{p}", "=", "q5", "# comment\np", "s/\\//x/",
	":a;s/x/y/;ta", ":top;N;$!btop;p", "/x/{:a;N;ba}", "b;p", "s/[0-9][0-9]*/N/g",
	"s/[[:space:]]+$//", "s/[^a-z]/_/g", "s/[]a]/x/", "/^[#;]/!p", "s|[/]|x|", "l 80", "5q",
	"s;a;b;g", "0,/re/p", "2,+3p", "2,~4p", "s/x/\\n/", "s/[a-z]/&\\n/2",
}

func TestSedParserAgreesWithSandbox(t *testing.T) {
	sed := gnuSed(t)
	for _, s := range sedScriptsForSandbox {
		if r := sedUnsafe(s); r != "" {
			t.Errorf("sedUnsafe(%q) = %q, want read-only", s, r)
		}
		if sandboxRefuses(t, sed, s) {
			t.Errorf("gate reads %q as read-only, but GNU sed --sandbox refuses it", s)
		}
	}
	// The red team's scripts: GNU sed runs or writes through each, and
	// the gate must never call them read-only.
	for _, s := range []string{":a e id", ":a w out", ":a;b a;e id", "bx;:x w out", ":x;t x;w out",
		"s/[/]/;s|a|/e", "s/[/]/x/e", "s/[/]/x/w out", "/[/]/e id", "1R f", "p;W o", "s/x/y/w out"} {
		if !sandboxRefuses(t, sed, s) {
			t.Errorf("GNU sed --sandbox accepts %q; the test expects a script it refuses", s)
		}
		if sedUnsafe(s) == "" {
			t.Errorf("sedUnsafe(%q) = read-only, but GNU sed --sandbox refuses it", s)
		}
	}
}

// FuzzSedSandbox checks the gate's sed parser against GNU sed: a script
// the gate reads as read-only must never be refused by sed --sandbox,
// which refuses exactly the e, r and w commands and flags.
func FuzzSedSandbox(f *testing.F) {
	sed := gnuSed(f)
	for _, s := range sedScriptsForSandbox {
		f.Add(s)
	}
	f.Add("s/[/]/;s|a|/e")
	f.Add(":a e id")
	f.Fuzz(func(t *testing.T, script string) {
		if strings.IndexByte(script, 0) >= 0 || len(script) > 200 || sedUnsafe(script) != "" {
			return
		}
		if sandboxRefuses(t, sed, script) {
			t.Fatalf("gate reads %q as read-only, but GNU sed --sandbox refuses it", script)
		}
	})
}
