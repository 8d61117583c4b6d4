package gate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	shexpand "mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// The differential harness: a command the gate passes is run under the
// real bash, the way thinbot runs it (bash -c PROGRAM), in a throwaway
// root where nothing can act, and every simple command bash reaches is
// compared with the simple commands the gate judged. bash reports them
// itself through xtrace (set -x), which prints each command's words after
// expansion and before bash looks the command up, so nothing has to run
// for it to be recorded:
//
//   - BASH_ENV points bash at a prelude that turns on xtrace, sends it to
//     a descriptor of its own, then disables every builtin (enable -n), so
//     that echo, cd, eval, exec, set, source… are looked up as programs;
//   - PATH names no directory, and command_not_found_handle answers for
//     every program bash looks up (exit 0 in one run, 1 in another, so
//     both sides of && and || are reached);
//   - the root is an empty directory holding only bash and its libraries
//     (chroot, in new user, mount, network, IPC and UTS namespaces), so a
//     path such as /bin/rm names nothing, and the run is killed after a
//     few seconds.
//
// A pass input whose trace holds a command the gate did not judge (a
// different program, other arguments, one more command) is a parser
// differential: bash and the gate disagree about what the program is.

// bashRig is a throwaway root with bash in it.
type bashRig struct {
	root  string // the directory bash is chrooted into
	bash  string // bash's path inside root
	home  string // HOME inside root
	nonce string // marks trace records, so output cannot forge one
}

var bashRigOnce struct {
	sync.Once
	rig *bashRig
	err error
}

// needBashRig returns the rig shared by the package's tests, made once.
// Without bash or user namespaces the test skips on a developer's machine
// and fails under CI=1, so CI never passes without having run the check.
func needBashRig(t testing.TB) *bashRig {
	t.Helper()
	bashRigOnce.Do(func() {
		bashRigOnce.rig, bashRigOnce.err = newBashRig()
	})
	if err := bashRigOnce.err; err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the bash differential rig: %v, and CI is set: bash and namespaces are prerequisites of this test", err)
		}
		t.Skipf("the bash differential rig: %v", err)
	}
	return bashRigOnce.rig
}

func newBashRig() (*bashRig, error) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, err
	}
	bash, err = filepath.EvalSymlinks(bash)
	if err != nil {
		return nil, err
	}
	root, err := os.MkdirTemp("", "gate-bash-")
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, 8)
	rand.Read(nonce)
	r := &bashRig{root: root, bash: "/.rig/bash", home: "/home/u", nonce: hex.EncodeToString(nonce)}
	out, err := exec.Command("ldd", bash).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bash, err)
	}
	files := map[string]string{r.bash: bash}
	for _, m := range regexp.MustCompile(`(/\S+)`).FindAllString(string(out), -1) {
		files[m] = m
	}
	for to, from := range files {
		if err := copyFile(from, filepath.Join(root, to)); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"tmp", "dev", "home/u", "work"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o777); err != nil {
			return nil, err
		}
	}
	prelude := "PS4=$'\\001" + r.nonce + "|${BASH_SUBSHELL}|${FUNCNAME[0]}|'\n" +
		"command_not_found_handle() { (( ${RIG_RC:-0} == 0 )); }\n" +
		"exec 99>&3 3>&-\nBASH_XTRACEFD=99\nset -x\nenable -n $(compgen -b)\n" +
		"rig_start_" + r.nonce + "\n"
	if err := os.WriteFile(filepath.Join(root, ".rig/prelude"), []byte(prelude), 0o644); err != nil {
		return nil, err
	}
	// One run, to learn whether the kernel lets us make the namespaces.
	if _, err := r.trace(context.Background(), "true", 0); err != nil {
		return nil, err
	}
	return r, nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

// errRigTimeout ends a run that took too long (a loop of many items on a
// loaded machine: every program bash looks up is a fork); what bash
// reached until then is returned with it and still checked.
var errRigTimeout = errors.New("bash ran for 20 s in the rig and was killed")

// tracedCmd is one record of bash's trace.
type tracedCmd struct {
	text    string   // as bash printed it
	keyword string   // "[[", "((", "for", "select", "case" for a compound's line
	words   []string // the words, decoded (assignments first)
	level   int      // BASH_SUBSHELL
}

// trace runs program as thinbot does (bash -c PROGRAM) in the rig and
// returns what bash reached. rc is what every program bash looks up
// exits with.
func (r *bashRig) trace(ctx context.Context, program string, rc int) ([]tracedCmd, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tr, tw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer tr.Close()
	cmd := &exec.Cmd{
		Path: r.bash,
		Args: []string{"bash", "-c", program},
		Env: []string{"BASH_ENV=/.rig/prelude", "PATH=/nonexistent", "HOME=" + r.home,
			fmt.Sprintf("RIG_RC=%d", rc)},
		Dir:        "/",
		ExtraFiles: []*os.File{tw},
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     r.root,
			Setpgid:    true,
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			UidMappings: []syscall.SysProcIDMap{
				{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{
				{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
			GidMappingsEnableSetgroups: false,
		},
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	cmd.Stdin = nil
	if err := cmd.Start(); err != nil {
		tw.Close()
		return nil, fmt.Errorf("start bash in the rig: %w", err)
	}
	tw.Close()
	pid := cmd.Process.Pid
	done := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(tr, 8<<20))
		done <- b
	}()
	werr := make(chan error, 1)
	go func() { werr <- cmd.Wait() }()
	var out []byte
	select {
	case out = <-done:
	case <-ctx.Done():
		syscall.Kill(-pid, syscall.SIGKILL)
		out = <-done
	}
	<-werr
	syscall.Kill(-pid, syscall.SIGKILL) // anything left in the group
	recs, err := r.parseTrace(out)
	if err != nil {
		return nil, err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return recs, errRigTimeout
	}
	return recs, nil
}

// parseTrace splits bash's trace into records and decodes each. The
// records before the prelude's marker are the prelude's own; a record of
// the not-found handler is the rig's.
func (r *bashRig) parseTrace(b []byte) ([]tracedCmd, error) {
	re := regexp.MustCompile("\x01+" + r.nonce + `\|([0-9]+)\|([^|\n]*)\|`)
	idx := re.FindAllSubmatchIndex(b, -1)
	var recs []tracedCmd
	started := false
	for i, m := range idx {
		end := len(b)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		text := strings.TrimSuffix(string(b[m[1]:end]), "\n")
		level := 0
		fmt.Sscan(string(b[m[2]:m[3]]), &level)
		fn := string(b[m[4]:m[5]])
		if !started {
			started = text == "rig_start_"+r.nonce
			continue
		}
		if f := strings.Fields(text); fn == "command_not_found_handle" && len(f) == 5 && f[0] == "((" && (f[1] == "0" || f[1] == "1") && f[2] == "==" && f[3] == "0" && f[4] == "))" {
			continue
		}
		rec, err := decodeTraced(text)
		if err != nil {
			return nil, fmt.Errorf("trace record %q: %w", text, err)
		}
		rec.level = level
		recs = append(recs, rec)
	}
	if !started {
		return nil, fmt.Errorf("the prelude did not run (bash's trace: %q)", b)
	}
	return recs, nil
}

// decodeTraced reads one trace record: a compound's line is kept as
// text; a simple command's words are bash-quoted and decoded here.
func decodeTraced(text string) (tracedCmd, error) {
	rec := tracedCmd{text: text}
	for _, kw := range []string{"[[", "((", "for", "select", "case"} {
		if strings.HasPrefix(text, kw+" ") || text == kw {
			rec.keyword = kw
			return rec, nil
		}
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(text), "")
	if err != nil {
		return rec, err
	}
	if len(f.Stmts) != 1 {
		return rec, fmt.Errorf("%d statements", len(f.Stmts))
	}
	call, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok {
		return rec, fmt.Errorf("not a simple command: %T", f.Stmts[0].Cmd)
	}
	for _, as := range call.Assigns {
		v := ""
		if as.Value != nil {
			if v, err = unquote(as.Value); err != nil {
				return rec, err
			}
		}
		rec.words = append(rec.words, as.Name.Value+"="+v)
	}
	for _, w := range call.Args {
		s, err := unquote(w)
		if err != nil {
			return rec, err
		}
		rec.words = append(rec.words, s)
	}
	return rec, nil
}

// unquote removes the quoting of a word bash's trace printed. expand.Fields
// with no configuration removes quotes and backslashes, as bash does, and
// neither splits nor globs words that hold no expansion (the trace quotes
// every special character); expand.Literal would keep an unquoted
// backslash (bash traces the word '00 as two quoted parts around an
// escaped quote, and Literal would read it as \'00).
func unquote(w *syntax.Word) (string, error) {
	f, err := shexpand.Fields(nil, w)
	if err != nil {
		return "", err
	}
	if len(f) != 1 {
		return "", fmt.Errorf("the traced word %q expands to %d words", w.Lit(), len(f))
	}
	return f[0], nil
}

// judgedCmd is one simple command the gate judged.
type judgedCmd struct {
	assigns []string
	args    []arg
}

// judged returns every simple command the read-only check judges in the
// parser's reading of command, whatever the verdict.
func judged(p *Policy, dir, command string) []judgedCmd {
	f, err := parse(command)
	if err != nil {
		return nil
	}
	var out []judgedCmd
	k := checker{p: p, c: p.comp(), dirs: []string{dir}, seen: func(as []string, args []arg) {
		out = append(out, judgedCmd{assigns: as, args: append([]arg(nil), args...)})
	}}
	k.stmts(f.Stmts)
	return out
}

// matches reports whether bash's record is the judged command: the same
// words, where a glob the gate judged may stand for the files it matched
// and a tilde for the rig's home.
func (j judgedCmd) matches(home string, words []string) bool {
	if matchArgs(home, j.args, words) {
		return true // bash traced the assignments on a line of their own
	}
	if len(words) < len(j.assigns) {
		return false
	}
	for i, a := range j.assigns {
		if words[i] != a {
			return false
		}
	}
	return matchArgs(home, j.args, words[len(j.assigns):])
}

// hasAssigns reports whether words are assignments only, each one the
// judged command sets: bash traces `A=1 cmd` as `A=1` and then `cmd`.
func (j judgedCmd) hasAssigns(words []string) bool {
	if len(words) == 0 {
		return false
	}
	for _, w := range words {
		if !slices.Contains(j.assigns, w) {
			return false
		}
	}
	return true
}

// dirStackTop is a tilde-prefix naming the directory stack's entry 0.
var dirStackTop = regexp.MustCompile(`^~[+-]?0+$`)

func matchArgs(home string, args []arg, words []string) bool {
	if len(args) == 0 {
		return len(words) == 0
	}
	a := args[0]
	want := a.s
	if a.tilde {
		// bash's tilde forms, as the rig runs them: ~ is HOME, ~+ is
		// PWD (the rig's /); ~N, ~+N and ~-N name the directory stack,
		// whose one entry (N = 0) is PWD; ~- (OLDPWD, unset), a stack
		// entry past it and ~user (no passwd file) stay as written.
		prefix, rest, _ := strings.Cut(want, "/")
		if rest != "" || strings.Contains(want, "/") {
			rest = "/" + rest
		}
		switch {
		case prefix == "~":
			want = home + rest
		case prefix == "~+" || dirStackTop.MatchString(prefix):
			want = "/" + rest // PWD is /: ~+/x is //x
		}
	}
	if len(words) > 0 && words[0] == want && matchArgs(home, args[1:], words[1:]) {
		return true
	}
	if !a.glob {
		return false
	}
	// A glob stands for one or more names it matches.
	for n := 1; n <= len(words); n++ {
		if ok, _ := path.Match(want, words[n-1]); !ok {
			return false
		}
		if matchArgs(home, args[1:], words[n:]) {
			return true
		}
	}
	return false
}

// disagreement runs the program thinbot would run for a command the gate
// passes and returns what bash reached that the gate did not judge, or "".
// runs says which text bash gets for the command.
func (r *bashRig) disagreement(ctx context.Context, p *Policy, command string, runs func(Decision, string) string) (string, error) {
	d := p.Classify(command)
	if d.Verdict != Pass {
		return "", nil
	}
	return r.disagreementOf(ctx, p, command, runs(d, command))
}

// disagreementOf runs program and compares what bash reached with what
// the read-only check judges in command, whatever the verdict.
func (r *bashRig) disagreementOf(ctx context.Context, p *Policy, command, program string) (string, error) {
	js := judged(p, "", command)
	// A second run with every program failing reaches the other side of
	// && and || (and of any condition bash may find in the text).
	runs := 1
	for _, s := range []string{"&&", "||", "if", "while", "until"} {
		if strings.Contains(program, s) {
			runs = 2
		}
	}
	for rc := range runs {
		recs, err := r.trace(ctx, program, rc)
		if err != nil && !errors.Is(err, errRigTimeout) {
			return "", err
		}
	next:
		for _, rec := range recs {
			if rec.keyword == "for" {
				continue // the gate passes for loops; their bodies are judged per item
			}
			if rec.keyword != "" {
				return fmt.Sprintf("bash ran the compound `%s`, which the gate never passes", rec.text), nil
			}
			for _, j := range js {
				if j.matches(r.home, rec.words) || j.hasAssigns(rec.words) {
					continue next
				}
			}
			return fmt.Sprintf("bash ran %q (exit status %d of every program), which the gate did not judge; the gate judged %s", rec.words, rc, describeJudged(js)), nil
		}
	}
	return "", nil
}

func describeJudged(js []judgedCmd) string {
	var b strings.Builder
	for i, j := range js {
		if i > 0 {
			b.WriteString(", ")
		}
		var ws []string
		ws = append(ws, j.assigns...)
		for _, a := range j.args {
			ws = append(ws, a.s)
		}
		fmt.Fprintf(&b, "%q", ws)
	}
	if len(js) == 0 {
		return "nothing"
	}
	return b.String()
}

// bashDifferentials are the shapes where the parser and bash read the
// same text as different programs (issue 29 and its neighbours). Before
// the gate ran its own rendering, each was pass and bash ran a program
// the gate never judged; now each is confirm (or deny), and what runs is
// the rendering, which bash reads as the gate does.
var bashDifferentials = []gateCase{
	// A comment whose line ends in a backslash: bash ends the comment at
	// the newline; the parser continued the line before the #.
	{cmd: "ls -la #\\\nbash -c 'cat /etc/default/*'", want: Confirm, rule: "input.bash-differs"},
	{cmd: "ls -la #\\\nid", want: Confirm, rule: "input.bash-differs"},
	{cmd: "ls #x\\\ncat /etc/shadow", want: Confirm},
	{cmd: "ls # a comment \\\n  python3 -c 'import os'", want: Confirm},
	{cmd: "ls #\\\nrm -rf /", want: Deny},
	{cmd: "ls #\\\n#\\\nrm -rf /", want: Deny},
	{cmd: "(ls #\\\ntouch /tmp/x\n)", want: Confirm},
	{cmd: "ls | grep x #\\\nid", want: Confirm},
	{cmd: "bash -c 'ls #\\\nrm -rf /'", want: Deny},
	{cmd: "sh -c \"ls #\\\\\nrm -rf /\"", want: Deny},
	// A backslash-newline in an unquoted here-document: bash joins the
	// lines before it expands the body.
	{cmd: "cat <<EOF\n$\\\n(id)\nEOF", want: Confirm},
	{cmd: "cat <<EOF\n$\\\n{HOME}\nEOF", want: Confirm},
	{cmd: "cat <<EOF\n$\\\n((1+2))\nEOF", want: Confirm},
	{cmd: "cat <<EOF\n$\\\n\\\n(id)\nEOF", want: Confirm},
	{cmd: "cat <<A <<B\nx\nA\n$\\\n(touch /tmp/x)\nB", want: Confirm},
	{cmd: "cat <<-EOF\n\t$\\\n(python3 -c 1)\n\tEOF", want: Confirm},
	{cmd: "cat <<EOF\n$\\\n(rm -rf /)\nEOF", want: Deny},
	{cmd: "bash -c 'cat <<EOF\n$\\\n(rm -rf /)\nEOF'", want: Deny},
	// The quoted forms read the same in both: the body is text.
	{cmd: "cat <<'EOF'\n$\\\n(id)\nEOF", want: Pass},
	{cmd: "cat <<\\EOF\n$\\\n(id)\nEOF", want: Pass},
	{cmd: "cat <<EOF\nplain text\nEOF", want: Pass},
	{cmd: "ls -la # a comment", want: Pass},
	{cmd: "ls -la \\\n  /var/log", want: Pass},
}

// TestBashDifferentials keeps the known shapes: each gets its verdict,
// and bash, run on what thinbot runs, reaches only what the gate judged.
func TestBashDifferentials(t *testing.T) {
	p := testPolicy(t)
	for _, c := range bashDifferentials {
		got := p.Classify(c.cmd)
		if got.Verdict != c.want || (c.rule != "" && got.Rule != c.rule) {
			t.Errorf("Classify(%q) = %v (%s: %s), want %v %s", c.cmd, got.Verdict, got.Rule, got.Reason, c.want, c.rule)
		}
	}
	r := needBashRig(t)
	for _, c := range bashDifferentials {
		msg, err := r.disagreement(context.Background(), p, c.cmd, runsProgram)
		if err != nil {
			t.Errorf("%q: %v", c.cmd, err)
		} else if msg != "" {
			t.Errorf("%q: %s", c.cmd, msg)
		}
	}
}

// runsProgram is what thinbot hands bash for a command: the gate's
// rendering.
func runsProgram(d Decision, command string) string { return d.Program }

// TestBashHarnessSeesDifferentials checks that the harness sees the
// differential it is for: the two shapes above, run as written (as thinbot
// ran them before the rendering), reach commands the parser's reading does
// not hold. FuzzBashAgrees runs every command of the gate's tables as its
// seeds, so `go test` runs the tables under bash too.
func TestBashHarnessSeesDifferentials(t *testing.T) {
	r := needBashRig(t)
	p := testPolicy(t)
	for _, raw := range []string{"ls -la #\\\nid", "cat <<EOF\n$\\\n(id)\nEOF"} {
		msg, err := r.disagreementOf(context.Background(), p, raw, raw)
		if err != nil {
			t.Fatal(err)
		}
		if msg == "" {
			t.Errorf("%q run as written: the harness saw no difference, so it cannot catch one", raw)
		}
		t.Logf("%q run as written: %s", raw, msg)
	}
	// And that the rig holds: nothing outside it is reached.
	recs, err := r.trace(context.Background(), "/bin/touch /tmp/rig-escaped; echo $(/usr/bin/id)", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Errorf("trace = %+v, want the three commands bash reached", recs)
	}
	if _, err := os.Stat("/tmp/rig-escaped"); err == nil {
		t.Errorf("a command in the rig wrote outside it")
	}
}

// FuzzBashAgrees: whatever the gate passes, bash reaches only what the
// gate judged, when it runs what thinbot runs. Seeded from the gate's
// tables and every differential found.
func FuzzBashAgrees(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	for _, c := range bashDifferentials {
		f.Add(c.cmd)
	}
	p := testPolicy(f)
	r := needBashRig(f)
	f.Fuzz(func(t *testing.T, cmd string) {
		if len(cmd) > 4096 {
			return
		}
		msg, err := r.disagreement(context.Background(), p, cmd, runsProgram)
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		if msg != "" {
			t.Fatalf("%q: %s", cmd, msg)
		}
	})
}
