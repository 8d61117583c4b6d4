package tests

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakeslack"
)

// The setup guides (deploy/mattermost.md, deploy/slack.md) followed
// literally from a clean directory against the fakes: the guide's own
// shell blocks create the folders and token files, its config block is the
// config file, its `config check` and `thinbot serve` lines are run as
// written, its readyz URL is asked, and a mention is answered. Only the
// values a reader replaces with theirs are rewritten: hosts, ids, tokens,
// and the root of the filesystem (a temp dir instead of /). A guide block
// is marked by an HTML comment, <!-- guide-test: NAME -->, on the line
// before its fence.

// guideBlocks returns the marked fenced blocks of a guide by name.
func guideBlocks(t *testing.T, text string) map[string]string {
	t.Helper()
	blocks := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	name, in, indent := "", false, ""
	var b strings.Builder
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case !in && strings.HasPrefix(trimmed, "<!-- guide-test: "):
			name = strings.TrimSuffix(strings.TrimPrefix(trimmed, "<!-- guide-test: "), " -->")
		case !in && name != "" && strings.HasPrefix(trimmed, "```"):
			// A block in a list item is indented; its lines lose that
			// indentation, as Markdown reads them.
			in, indent = true, line[:len(line)-len(trimmed)]
			b.Reset()
		case in && strings.HasPrefix(trimmed, "```"):
			blocks[name] = b.String()
			name, in = "", false
		case in:
			b.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
	}
	for _, want := range []string{"install", "setup", "config", "dms", "check", "serve", "ready"} {
		if blocks[want] == "" {
			t.Fatalf("the guide has no %q block", want)
		}
	}
	return blocks
}

// noSudo is the guides' rule for a root shell without sudo; asUser
// applies it.
const noSudo = "every `sudo -u thinbot COMMAND` below as `setpriv --reuid=thinbot --regid=thinbot --init-groups COMMAND`"

// asUser turns a guide's root commands into ones a test can run: no chown,
// no useradd (the test is the thinbot user), and no sudo: as root, the
// guide's own rule (setpriv for `sudo -u thinbot`, with the test's user in
// place of thinbot); otherwise the commands as they are.
func asUser(block string) string {
	runAs := ""
	if os.Getuid() == 0 {
		runAs = "setpriv --reuid=root --regid=root --init-groups "
	}
	var out []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "id thinbot >/dev/null 2>&1 || sudo useradd ") {
			continue
		}
		l = strings.ReplaceAll(l, "sudo -u thinbot ", runAs)
		l = strings.ReplaceAll(l, "sudo ", "")
		l = strings.ReplaceAll(l, " -o thinbot -g thinbot", "")
		l = strings.ReplaceAll(l, " -o root -g thinbot", "")
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// guideRun is a guide followed: setup, config (with the DM entry), check,
// serve, ready. The serve process is killed at cleanup if still running.
type guideRun struct {
	t      *testing.T
	root   string // stands for /
	guide  string
	blocks map[string]string
	rw     *strings.Replacer
	cmd    *exec.Cmd
	log    *logBuffer
	done   chan struct{}
}

func followGuide(t *testing.T, guide string, values map[string]string) *guideRun {
	return followGuideMode(t, guide, "", values)
}

// followGuideMode follows a guide; mode "http" also takes the guide's
// HTTP-mode steps (the http-setup block, and the http block in place of the
// config's slack: section and listen:).
func followGuideMode(t *testing.T, guide, mode string, values map[string]string) *guideRun {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "deploy", guide))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var pairs []string
	for k, v := range values {
		pairs = append(pairs, k, v)
	}
	for _, p := range []string{"/etc/thinbot", "/var/lib/thinbot", "/srv/ops", "/usr/local/bin"} {
		pairs = append(pairs, p, root+p)
	}
	g := &guideRun{t: t, root: root, guide: string(text), blocks: guideBlocks(t, string(text)),
		rw: strings.NewReplacer(pairs...), log: &logBuffer{}, done: make(chan struct{})}
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.MkdirAll(filepath.Join(root, "var", "lib"), 0o755)
	os.MkdirAll(filepath.Join(root, "srv"), 0o755)
	os.MkdirAll(filepath.Join(root, "usr", "local", "bin"), 0o755)
	if !strings.Contains(strings.Join(strings.Fields(g.guide), " "), noSudo) {
		t.Errorf("the guide does not say how to run its commands without sudo (%q)", noSudo)
	}

	// Step: install from the tarball (the binary, the user, the folders),
	// in the unpacked tarball's folder (here: the root, holding thinbot).
	// PATH has the guide's /usr/local/bin only, so the binary that runs is
	// the one this step installed.
	if err := copyFile(thinbotBin, filepath.Join(root, "thinbot")); err != nil {
		t.Fatal(err)
	}
	if out, err := g.shell(asUser(g.rw.Replace(g.blocks["install"]))).CombinedOutput(); err != nil {
		t.Fatalf("the guide's install failed: %v\n%s", err, out)
	}
	checkModes(t, root, map[string]os.FileMode{"/etc/thinbot": os.ModeDir | 0o750, "/var/lib/thinbot": os.ModeDir | 0o700, "/usr/local/bin/thinbot": 0o755})
	os.Remove(filepath.Join(root, "thinbot"))

	// Step: the workspace and token files, as the guide writes them.
	setup := g.blocks["setup"]
	if mode == "http" {
		setup += g.blocks["http-setup"]
	}
	if out, err := g.shell(asUser(g.rw.Replace(setup))).CombinedOutput(); err != nil {
		t.Fatalf("the guide's setup failed: %v\n%s", err, out)
	}
	// Every token file the guide names anywhere is the one setup wrote:
	// no name changes between steps.
	for _, f := range regexp.MustCompile(`/etc/thinbot/[A-Za-z0-9_.-]+\.(?:token|secret|key)`).FindAllString(g.guide, -1) {
		if strings.HasSuffix(f, "model.key") || (mode != "http" && strings.HasSuffix(f, "slack-signing.secret")) {
			continue // optional (commented out), and HTTP mode's own step
		}
		if fi, err := os.Stat(root + f); err != nil {
			t.Errorf("the guide names %s, which its setup does not create", f)
		} else if fi.Mode() != 0o640 {
			t.Errorf("the guide's %s has mode %s; the guide and the package say 0640 (root:thinbot)", f, fi.Mode())
		}
	}
	checkModes(t, root, map[string]os.FileMode{"/srv/ops": os.ModeDir | 0o750})
	if os.Getuid() == 0 {
		// The test plays the thinbot user with root, and a root daemon's
		// read-only commands run as thinbot-ro, not as the daemon's user
		// that owns the workspace (the guide's daemon runs as thinbot, so
		// its read-only commands run as thinbot). Give thinbot-ro what the
		// guide's own user has: a way down to the workspace, and the
		// workspace itself.
		for _, d := range []string{filepath.Dir(root), root, filepath.Join(root, "srv", "ops")} {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Step: the config file, as the guide shows it, with the entry that
	// enables direct messages added at the end of channels:.
	config := g.blocks["config"] + g.blocks["dms"]
	if mode == "http" {
		sec := regexp.MustCompile(`(?s)\nslack:\n.*?\nlisten:[^\n]*\n`)
		if !sec.MatchString(config) || g.blocks["http"] == "" {
			t.Fatal("no slack: section and listen: to replace, or no http block")
		}
		config = sec.ReplaceAllLiteralString(config, "\n"+g.blocks["http"])
	}
	cfg := filepath.Join(root, "etc", "thinbot", "thinbot.yaml")
	if err := os.WriteFile(cfg, []byte(g.rw.Replace(config)), 0o640); err != nil {
		t.Fatal(err)
	}
	// Step: config check, as written.
	check := asUser(g.rw.Replace(g.blocks["check"]))
	if out, err := g.shell(check).CombinedOutput(); err != nil || !strings.Contains(string(out), "is fine") {
		t.Fatalf("the guide's %q: %v\n%s", strings.TrimSpace(check), err, out)
	}
	// Step: sandbox check, as written, where the guide has it: it must
	// not fail on the guide's own layout.
	if g.blocks["sandbox"] != "" {
		sb := asUser(g.rw.Replace(g.blocks["sandbox"]))
		if out, err := g.shell(sb).CombinedOutput(); err != nil || !strings.Contains(string(out), "thinbot will:") {
			t.Errorf("the guide's %q: %v\n%s", strings.TrimSpace(sb), err, out)
		}
	}
	// Step: thinbot serve, as written (exec, so that SIGTERM reaches it).
	g.cmd = g.shell("exec " + strings.TrimSpace(asUser(g.rw.Replace(g.blocks["serve"]))))
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		select {
		case <-g.done:
		default:
			g.cmd.Process.Kill()
			<-g.done
		}
		if t.Failed() {
			t.Logf("thinbot output:\n%s", tail(g.log.String(), 6000))
		}
	})
	// Step: the readyz check, at the guide's URL.
	url := regexp.MustCompile(`https?://\S+/readyz`).FindString(g.rw.Replace(g.blocks["ready"]))
	if url == "" {
		t.Fatalf("the ready block has no /readyz URL: %q", g.blocks["ready"])
	}
	waitLogged(t, "the guide's thinbot serve", g.log, 0, `"msg":"thinbot serving"`, g.done)
	hc := &http.Client{Timeout: 10 * time.Second}
	var last string
	g.waitUntil(startDeadline(t), "the guide's "+url+" to say ready", func() bool {
		resp, err := hc.Get(url)
		if err != nil {
			last = err.Error()
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		last = string(b)
		return resp.StatusCode == http.StatusOK && strings.TrimSpace(last) == "ready"
	}, &last)
	return g
}

// shell runs script with bash in the guide's root, with the guide's
// /usr/local/bin first on PATH.
func (g *guideRun) shell(script string) *exec.Cmd {
	cmd := exec.Command("bash", "-euc", script)
	cmd.Dir = g.root
	cmd.Env = []string{"PATH=" + filepath.Join(g.root, "usr", "local", "bin") + ":" + os.Getenv("PATH"), "HOME=" + g.root, "USER=thinbot"}
	return cmd
}

// checkModes checks the modes of files below root (paths as the guide
// names them).
func checkModes(t *testing.T, root string, want map[string]os.FileMode) {
	t.Helper()
	for p, mode := range want {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Errorf("the guide's %s: %v", p, err)
		} else if fi.Mode() != mode {
			t.Errorf("the guide's %s has mode %s, want %s (as the Debian package makes it)", p, fi.Mode(), mode)
		}
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

func (g *guideRun) wait(what string, cond func() bool, last *string) {
	g.t.Helper()
	g.waitUntil(time.Now().Add(waitTimeout), what, cond, last)
}

// waitUntil is wait with a deadline of its own.
func (g *guideRun) waitUntil(deadline time.Time, what string, cond func() bool, last *string) {
	g.t.Helper()
	for !cond() {
		select {
		case <-g.done:
			g.t.Fatalf("thinbot exited while waiting for %s", what)
		default:
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out waiting for %s (last: %q)", what, *last)
		}
		time.Sleep(waitTick)
	}
}

// answered mentions the bot as alice in channel and waits for the answer.
func (g *guideRun) answered(chat chatSide, channel string) {
	g.t.Helper()
	root := chat.Mention("alice", channel, "", "uptime")
	var last string
	g.wait("the mention in "+channel+" to be answered", func() bool {
		for _, p := range chat.BotPosts(channel, root) {
			if last = p.Text; strings.Contains(p.Text, "ANSWER(uptime)") {
				return true
			}
		}
		return false
	}, &last)
}

// auditVerify runs the guide's audit verify block and checks its output
// has every one of want.
func (g *guideRun) auditVerify(want ...string) {
	g.t.Helper()
	if g.blocks["audit"] == "" {
		g.t.Fatal("the guide has no audit block")
	}
	cmd := asUser(g.rw.Replace(g.blocks["audit"]))
	out, err := g.shell(cmd).CombinedOutput()
	if err != nil {
		g.t.Errorf("the guide's %q: %v\n%s", strings.TrimSpace(cmd), err, out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			g.t.Errorf("the guide's %q says no %q:\n%s", strings.TrimSpace(cmd), w, out)
		}
	}
}

// stop sends SIGTERM and expects a clean exit.
func (g *guideRun) stop() {
	g.t.Helper()
	g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		g.t.Fatal("thinbot did not stop within 30s of SIGTERM")
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		g.t.Errorf("thinbot exited with %d", code)
	}
}

// checkUnit checks that the systemd unit the guide installs runs the
// guide's binary and config and lets commands write to its state and
// workspace, as the guide says it does.
func checkUnit(t *testing.T, g *guideRun) {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join("..", "deploy", "thinbot.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/usr/local/bin/thinbot serve --config /etc/thinbot/thinbot.yaml",
		"ExecStartPre=/usr/local/bin/thinbot config check --config /etc/thinbot/thinbot.yaml",
		"ReadWritePaths=/var/lib/thinbot /srv/ops",
		"PrivateTmp=yes",
		"User=thinbot",
	} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("deploy/thinbot.service lacks %q", want)
		}
	}
	guide := strings.Join(strings.Fields(g.guide), " ")
	for _, want := range []string{
		"`ReadWritePaths=` lists `/var/lib/thinbot` and `/srv/ops`",
		"your `state_dir` if it is not `/var/lib/thinbot`",
		"`PrivateTmp=yes`",
		"a workspace under `/tmp` or `/var/tmp` cannot work under the unit",
		"install `deploy/thinbot.service` (it runs `/usr/local/bin/thinbot`)",
	} {
		if !strings.Contains(guide, want) {
			t.Errorf("the guide does not say %q", want)
		}
	}
}

func TestGuideMattermost(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t).(*mmChat)
	m := modelFunc(t, (&answerer{}).reply)
	addr := freeAddr(t)
	g := followGuide(t, "mattermost.md", map[string]string{
		"https://mattermost.example.com": chat.s.URL,
		"http://10.0.0.8:8000/v1":        m.URL,
		"10.0.0.5:8079":                  addr,
		"4xp9fdt4e3rpcqa8cwyb3ou3yw":     chat.Ops(),
		"wbiz7r1mzpfk9g3nd5ce8t4hqy":     chat.UserID("alice"),
		"q3mtjx6fa8d1oxk5reh9ubp2wn":     chat.UserID("bob"),
		"PASTE-THE-BOT-TOKEN-HERE":       chat.s.Bot.Token,
	})
	g.answered(chat, chat.Ops())
	g.answered(chat, chat.DM("alice")) // the guide's DM entry works
	// The guide's audit verify: the export while serve runs, the store
	// and the export after.
	g.auditVerify("held by the running thinbot; verifying its export instead", "/var/lib/thinbot/audit.jsonl: ok")
	g.stop()
	g.auditVerify("/var/lib/thinbot/events.db: ok", "identical to the store")
	checkUnit(t, g)
	checkGuideText(t, g, []string{
		// The bot joins the team before /invite, in the UI, mmctl and REST.
		"Add the bot to the **team** first",
		"`mmctl team users add TEAM thinbot`",
		"$MM/api/v4/teams/TEAM_ID/members",
		// A bot's token over REST is a second call.
		"$MM/api/v4/users/BOT_USER_ID/tokens",
		"$MM/api/v4/users/username/alice",
		"`config check` reads files only: it does not contact Mattermost",
		"`/audit`",
		"`!stop`",
		"mention the bot by the name you chose",
	})
}

// checkGuideText checks that a guide says each of want (whitespace as in
// Markdown: any run is one space), for the steps a test cannot run.
func checkGuideText(t *testing.T, g *guideRun, want []string) {
	t.Helper()
	text := strings.Join(strings.Fields(g.guide), " ")
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("the guide does not say %q", w)
		}
	}
}

func TestGuideSlack(t *testing.T) {
	t.Parallel()
	chat := newSlack(t, "")
	m := modelFunc(t, (&answerer{}).reply)
	addr := freeAddr(t)
	g := followGuide(t, "slack.md", map[string]string{
		"  # api_url: https://slack.com/api/   # only for a proxy in front of Slack": "  api_url: " + chat.f.APIURL(),
		"http://10.0.0.8:8000/v1":   m.URL,
		"127.0.0.1:8079":            addr,
		"C0123ABCD":                 chat.Ops(),
		"U0123ALICE":                chat.UserID("alice"),
		"U0123BOBBY":                chat.UserID("bob"),
		"PASTE-THE-XOXB-TOKEN-HERE": fakeslack.BotToken,
		"PASTE-THE-XAPP-TOKEN-HERE": fakeslack.AppToken,
	})
	g.answered(chat, chat.Ops())
	g.answered(chat, chat.DM("alice")) // the guide's DM entry works
	g.auditVerify("held by the running thinbot; verifying its export instead", "/var/lib/thinbot/audit.jsonl: ok")
	g.stop()
	g.auditVerify("/var/lib/thinbot/events.db: ok", "identical to the store")
	checkUnit(t, g)
	checkGuideText(t, g, []string{"`config check` reads files only: it does not contact Slack"})
}

// HTTP mode: the guide's signing secret step and slack: section, with the
// fake delivering events and clicks to thinbot's /slack/ endpoints (the
// TLS proxy of the guide would forward exactly those).
func TestGuideSlackHTTPMode(t *testing.T) {
	t.Parallel()
	const secret = "8f14e45fceea167a5a36dedd4bea2543"
	chat := newSlack(t, secret)
	m := modelFunc(t, (&answerer{}).reply)
	addr := freeAddr(t)
	g := followGuideMode(t, "slack.md", "http", map[string]string{
		"  mode: http\n":                "  mode: http\n  api_url: " + chat.f.APIURL() + "\n",
		"http://10.0.0.8:8000/v1":       m.URL,
		"127.0.0.1:8079":                addr,
		"C0123ABCD":                     chat.Ops(),
		"U0123ALICE":                    chat.UserID("alice"),
		"U0123BOBBY":                    chat.UserID("bob"),
		"PASTE-THE-XOXB-TOKEN-HERE":     fakeslack.BotToken,
		"PASTE-THE-XAPP-TOKEN-HERE":     fakeslack.AppToken,
		"PASTE-THE-SIGNING-SECRET-HERE": secret,
	})
	chat.f.DeliverHTTP("http://"+addr, secret)
	g.answered(chat, chat.Ops())
	g.stop()
}
