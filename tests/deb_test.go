package tests

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needTool fails in CI (which installs it) and skips elsewhere.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; .ci/run installs it", name)
		}
		t.Skipf("%s is not installed", name)
	}
}

// sh runs a command and returns its combined output, failing the test on
// a non-zero exit.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestReleaseVersionOrder checks that the Debian versions release.sh gives
// sort in release order whatever the commit hashes are: untagged builds
// below every release and in commit-time order (one hash starts with a
// digit, one with a letter: a version made of the bare hash sorted
// "9e1ae8b" above "1.0.0"), a tagged commit at its tag, later commits
// between that tag and the next. It builds nothing, so it always runs.
func TestReleaseVersionOrder(t *testing.T) {
	needTool(t, "git")
	needTool(t, "dpkg")
	repo := t.TempDir()
	script, err := os.ReadFile(filepath.Join("..", "deploy", "release.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(repo, "deploy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "deploy", "release.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(date string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@localhost",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@localhost",
			"GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date, "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// commit makes a commit at date whose hash starts with a digit or not.
	commit := func(date string, digit bool) {
		t.Helper()
		for i := 0; ; i++ {
			if i == 0 {
				git(date, "commit", "-q", "--allow-empty", "-m", "c "+date)
			} else {
				git(date, "commit", "-q", "--amend", "--allow-empty", "-m", fmt.Sprintf("c %s %d", date, i))
			}
			h := git(date, "rev-parse", "--short=7", "HEAD")
			if (h[0] >= '0' && h[0] <= '9') == digit {
				return
			}
		}
	}
	version := func() string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "deploy/release.sh", "--version")
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("release.sh --version: %v\n%s", err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("2026-01-01T00:00:00Z", "init", "-q")
	git("2026-01-01T00:00:00Z", "add", "deploy")
	var got []string
	commit("2026-01-01T10:00:00Z", false)
	got = append(got, version())
	commit("2026-01-01T11:00:00Z", true)
	got = append(got, version())
	commit("2026-01-02T00:00:00Z", false)
	git("2026-01-02T00:00:00Z", "tag", "v1.0.0")
	got = append(got, version())
	commit("2026-01-03T00:00:00Z", true)
	got = append(got, version())
	commit("2026-01-04T00:00:00Z", false)
	got = append(got, version())
	commit("2026-01-05T00:00:00Z", true)
	git("2026-01-05T00:00:00Z", "tag", "v1.0.1")
	got = append(got, version())
	if got[2] != "1.0.0" || got[5] != "1.0.1" {
		t.Errorf("tagged commits: %q and %q, want 1.0.0 and 1.0.1", got[2], got[5])
	}
	if want := "0.0~git20260101100000."; !strings.HasPrefix(got[0], want) {
		t.Errorf("untagged build %q, want %s<hash>", got[0], want)
	}
	for i := 1; i < len(got); i++ {
		if err := exec.Command("dpkg", "--compare-versions", got[i-1], "lt", got[i]).Run(); err != nil {
			t.Errorf("dpkg --compare-versions %s lt %s: false (%v); all: %q", got[i-1], got[i], err, got)
		}
	}
}

// TestRelease runs deploy/release.sh as a developer would by hand: this
// machine's architecture only (the release's default), a static binary and
// a Debian package whose contents, owners, modes, conffiles, docs, man page
// and maintainer scripts are checked, and which lintian passes; the other
// architecture is type-checked (go vet), not built or packaged, which is
// what it needs to stay buildable. Then, as root, the package is installed
// for real, configured, started, stopped, removed and purged, and the purge
// keeps the audit chain. It builds a release binary (minutes on a busy
// machine), so it runs in CI (CI=1) or with THINBOT_RELEASE_TEST=1. The
// install part needs root and a machine that may get a system user (CI's
// throwaway VM).
func TestRelease(t *testing.T) {
	if os.Getenv("CI") == "" && os.Getenv("THINBOT_RELEASE_TEST") == "" {
		t.Skip("builds the release binaries (minutes); runs with CI=1 or THINBOT_RELEASE_TEST=1")
	}
	needTool(t, "dpkg-deb")
	needTool(t, "file")
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "deploy/release.sh", out)
	cmd.Dir = ".."
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "ARCHES=") })
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release.sh: %v\n%s", err, b)
	}

	want := map[string]string{"amd64": "x86-64", "arm64": "ARM aarch64"}[runtime.GOARCH]
	if got := sh(t, "file", filepath.Join(out, "thinbot-linux-"+runtime.GOARCH)); !strings.Contains(got, "statically linked") || !strings.Contains(got, want) {
		t.Errorf("file says %q; want a statically linked %s binary", got, want)
	}
	if other, _ := filepath.Glob(filepath.Join(out, "thinbot-linux-*")); len(other) != 1 {
		t.Errorf("binaries %q: release.sh by hand builds this machine's architecture only", other)
	}
	t.Run("cross", func(t *testing.T) {
		// The other release architecture type-checks: what could break it
		// is code (a syscall field of another width), not the packaging.
		other := map[string]string{"amd64": "arm64", "arm64": "amd64"}[runtime.GOARCH]
		cmd := exec.CommandContext(t.Context(), "go", "vet", "./cmd/thinbot")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+other, "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOARCH=%s go vet ./cmd/thinbot: %v\n%s", other, err, b)
		}
	})

	tarballs, _ := filepath.Glob(filepath.Join(out, "thinbot-*-linux-"+runtime.GOARCH+".tar.gz"))
	if len(tarballs) != 1 {
		t.Fatalf("tarballs for %s: %q", runtime.GOARCH, tarballs)
	}
	listing := sh(t, "tar", "-tzf", tarballs[0])
	for _, want := range []string{"/thinbot", "/deploy/fleet.md", "/deploy/mattermost.md", "/deploy/slack.md", "/deploy/alerts.md", "/deploy/operations.md", "/deploy/console.md", "/deploy/security.md", "/deploy/audit.md", "/deploy/measurements.md", "/deploy/thinbot.service", "/deploy/thinbot.example.yaml", "/skills/sys-doctor/SKILL.md"} {
		if !strings.Contains(listing, want+"\n") {
			t.Errorf("the tarball has no %s:\n%s", want, listing)
		}
	}

	debs, _ := filepath.Glob(filepath.Join(out, "thinbot_*_"+runtime.GOARCH+".deb"))
	if len(debs) != 1 {
		t.Fatalf("packages for %s: %q", runtime.GOARCH, debs)
	}
	deb := debs[0]
	contents := sh(t, "dpkg-deb", "-c", deb)
	for _, want := range []struct{ mode, path string }{
		{"-rwxr-xr-x root/root", "./usr/bin/thinbot"},
		{"-rw-r--r-- root/root", "./usr/lib/systemd/system/thinbot.service"},
		{"drwxr-x--- root/root", "./etc/thinbot/"},
		{"-rw-r----- root/root", "./etc/thinbot/thinbot.example.yaml"},
		{"-rw-r--r-- root/root", "./usr/share/thinbot/skills/sys-doctor/SKILL.md"},
		{"-rwxr-xr-x root/root", "./usr/share/thinbot/skills/sys-doctor/scripts/doctor.sh"},
		{"drwxr-xr-x root/root", "./usr/share/thinbot/skills/sys-doctor/scripts/"},
		{"-rw-r--r-- root/root", "./usr/share/doc/thinbot/fleet.md"},
		{"-rw-r--r-- root/root", "./usr/share/doc/thinbot/mattermost.md"},
		{"-rw-r--r-- root/root", "./usr/share/doc/thinbot/slack.md"},
		{"-rw-r--r-- root/root", "./usr/share/doc/thinbot/copyright"},
		{"-rw-r--r-- root/root", "./usr/share/doc/thinbot/changelog.gz"},
		{"-rw-r--r-- root/root", "./usr/share/man/man1/thinbot.1.gz"},
		{"-rw-r--r-- root/root", "./usr/share/lintian/overrides/thinbot"},
	} {
		if !hasEntry(contents, want.mode, want.path) {
			t.Errorf("the package has no %s %s:\n%s", want.mode, want.path, contents)
		}
	}
	if strings.Contains(contents, "testdata") || strings.Contains(contents, "./var/") {
		t.Errorf("the package ships test data or /var:\n%s", contents)
	}
	info := sh(t, "dpkg-deb", "-I", deb)
	for _, want := range []string{"Package: thinbot", "Architecture: " + runtime.GOARCH, "Depends: adduser", "postinst", "postrm", "conffiles"} {
		if !strings.Contains(info, want) {
			t.Errorf("dpkg-deb -I lacks %q:\n%s", want, info)
		}
	}
	if got := strings.TrimSpace(sh(t, "dpkg-deb", "-I", deb, "conffiles")); got != "/etc/thinbot/thinbot.example.yaml" {
		t.Errorf("conffiles %q", got)
	}
	if got := sh(t, "dpkg-deb", "-I", deb, "postinst"); !strings.Contains(got, "adduser --system") {
		t.Errorf("postinst does not create a system user:\n%s", got)
	}
	if got := sh(t, "dpkg-deb", "-I", deb, "postrm"); !strings.Contains(got, `"$1" = purge`) || regexp.MustCompile(`(?m)^[\s&|;]*rm\s`).MatchString(got) {
		t.Errorf("postrm deletes files itself, or outside purge (a purge keeps the chain):\n%s", got)
	}
	tree := t.TempDir()
	sh(t, "dpkg-deb", "-x", deb, tree)
	// The man page is the binary's help, rendered without a warning.
	needTool(t, "man")
	if man, err := exec.Command("man", "--warnings", "-l", filepath.Join(tree, "usr/share/man/man1/thinbot.1.gz")).CombinedOutput(); err != nil ||
		!strings.Contains(string(man), "audit verify") || !strings.Contains(string(man), "-from SEQ:HASH") || strings.Contains(string(man), "warning") {
		t.Errorf("man thinbot (%v):\n%s", err, man)
	}
	// The copyright names thinbot and every module linked in, with a license.
	cr, _ := os.ReadFile(filepath.Join(tree, "usr/share/doc/thinbot/copyright"))
	for _, want := range []string{"Copyright: the thinbot authors", "go.etcd.io/bbolt v", "github.com/slack-go/slack v", "Apache-2.0: see /usr/share/common-licenses/Apache-2.0"} {
		if !strings.Contains(string(cr), want) {
			t.Errorf("the copyright file lacks %q", want)
		}
	}
	t.Run("lintian", func(t *testing.T) {
		// Clean: every tag it would print is overridden in the package,
		// each with its reason (deploy/release.sh).
		needTool(t, "lintian")
		if b, err := exec.CommandContext(t.Context(), "lintian", "--fail-on", "error,warning", deb).CombinedOutput(); err != nil {
			t.Errorf("lintian --fail-on error,warning %s: %v\n%s", filepath.Base(deb), err, b)
		}
		// What it found and the overrides' reasons, for the log.
		b, _ := exec.CommandContext(t.Context(), "lintian", "--fail-on", "none", "--show-overrides", deb).CombinedOutput()
		t.Logf("lintian --show-overrides %s:\n%s", filepath.Base(deb), b)
	})
	unit, err := os.ReadFile(filepath.Join(tree, "usr/lib/systemd/system/thinbot.service"))
	if err != nil || !strings.Contains(string(unit), "\nExecStart=/usr/bin/thinbot serve --config /etc/thinbot/thinbot.yaml\n") ||
		!strings.Contains(string(unit), "\nExecStartPre=/usr/bin/thinbot config check --config /etc/thinbot/thinbot.yaml\n") ||
		strings.Contains(string(unit), "=/usr/local/bin") || !strings.Contains(string(unit), "User=thinbot") ||
		!strings.Contains(string(unit), "ReadWritePaths=/var/lib/thinbot -/srv/ops") {
		t.Errorf("the packaged unit does not run /usr/bin/thinbot as thinbot (%v):\n%s", err, unit)
	}
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		// The packaged unit parses without a warning (its binary: the
		// package's own, extracted).
		u := filepath.Join(t.TempDir(), "thinbot.service")
		os.WriteFile(u, []byte(strings.ReplaceAll(string(unit), "/usr/bin/thinbot", filepath.Join(tree, "usr/bin/thinbot"))), 0o644)
		if out, err := exec.Command("systemd-analyze", "verify", "--man=no", u).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify of the packaged unit: %v\n%s", err, out)
		}
	}

	t.Run("install", func(t *testing.T) {
		if os.Getuid() != 0 {
			if os.Getenv("CI") != "" {
				t.Fatal("CI runs as root; dpkg -i needs it")
			}
			t.Skip("dpkg -i needs root")
		}
		installDeb(t, deb)
	})
}

// hasEntry reports whether a dpkg-deb -c listing has path with mode and owner.
func hasEntry(listing, mode, path string) bool {
	for _, l := range strings.Split(listing, "\n") {
		if f := strings.Fields(l); len(f) >= 6 && f[0]+" "+f[1] == mode && f[len(f)-1] == path {
			return true
		}
	}
	return false
}

// installDeb installs the package with dpkg -i, checks the user, folders
// and owners, checks a config with the installed binary, runs the daemon
// as the thinbot user until /healthz answers, stops it with SIGTERM, and
// purges the package.
func installDeb(t *testing.T, deb string) {
	if out, err := exec.Command("dpkg-query", "-W", "-f", "${Status}", "thinbot").CombinedOutput(); err == nil && strings.Contains(string(out), "installed") {
		t.Fatalf("a thinbot package is already installed here (%s); this test installs and purges its own", out)
	}
	// A fresh install: the postinst makes the system user (a purge keeps
	// it, so an earlier run's user is removed first, and this run's after).
	if u, err := user.Lookup("thinbot"); err == nil {
		if u.HomeDir != "/var/lib/thinbot" {
			t.Fatalf("a thinbot user with home %s exists here; this test makes and removes its own", u.HomeDir)
		}
		sh(t, "deluser", "--system", "thinbot")
	}
	for _, d := range []string{"/etc/thinbot", "/var/lib/thinbot"} {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("%s exists; this test makes (and removes) its own", d)
		}
	}
	purged := false
	t.Cleanup(func() {
		if !purged {
			exec.Command("dpkg", "--purge", "thinbot").Run()
		}
		// What a purge keeps (the chain, the config) is this test's own.
		os.RemoveAll("/var/lib/thinbot")
		os.RemoveAll("/etc/thinbot")
		exec.Command("deluser", "--system", "thinbot").Run()
	})
	if out := sh(t, "dpkg", "-i", deb); strings.Contains(out, "Warning") || strings.Contains(out, "can't be accessed") {
		t.Errorf("dpkg -i warned on a fresh install:\n%s", out)
	}

	u, err := user.Lookup("thinbot")
	if err != nil {
		t.Fatalf("no thinbot user after install: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid >= 1000 || uid == 0 || u.HomeDir != "/var/lib/thinbot" {
		t.Errorf("thinbot user uid %d home %s; want a system user with home /var/lib/thinbot", uid, u.HomeDir)
	}
	for _, want := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{"/etc/thinbot", os.ModeDir | 0o750, 0, gid},
		{"/etc/thinbot/thinbot.example.yaml", 0o640, 0, gid},
		{"/var/lib/thinbot", os.ModeDir | 0o700, uid, gid},
		{"/usr/bin/thinbot", 0o755, 0, 0},
		{"/usr/share/thinbot/skills/sys-doctor/scripts/doctor.sh", 0o755, 0, 0},
	} {
		fi, err := os.Stat(want.path)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != want.mode || int(st.Uid) != want.uid || int(st.Gid) != want.gid {
			t.Errorf("%s: %s %d:%d, want %s %d:%d", want.path, fi.Mode(), st.Uid, st.Gid, want.mode, want.uid, want.gid)
		}
	}

	// The guide's workspace and token step (deploy/mattermost.md), on the
	// installed package, as root without sudo as the guide says: the guide
	// and the package must agree on owners and modes.
	chat := newMMChat(t)
	modelURL := "http://" + freeAddr(t) + "/v1" // the daemon starts without its model
	addr := freeAddr(t)
	text, err := os.ReadFile(filepath.Join("..", "deploy", "mattermost.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := guideBlocks(t, string(text))
	ws := "/srv/thinbot-deb-test-ops"
	if _, err := os.Stat(ws); err == nil {
		t.Fatalf("%s exists; this test makes and removes it", ws)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	guide := strings.NewReplacer("/srv/ops", ws, "PASTE-THE-BOT-TOKEN-HERE", chat.(*mmChat).s.Bot.Token, "sudo ", "")
	sh(t, "bash", "-euc", guide.Replace(blocks["setup"]))
	for _, want := range []struct {
		path     string
		mode     os.FileMode
		uid, gid int
	}{
		{"/etc/thinbot/mattermost.token", 0o640, 0, gid},
		{ws, os.ModeDir | 0o750, uid, gid},
	} {
		if fi, err := os.Stat(want.path); err != nil {
			t.Errorf("after the guide's setup: %v", err)
		} else if st := fi.Sys().(*syscall.Stat_t); fi.Mode() != want.mode || int(st.Uid) != want.uid || int(st.Gid) != want.gid {
			t.Errorf("the guide made %s %s %d:%d, want %s %d:%d", want.path, fi.Mode(), st.Uid, st.Gid, want.mode, want.uid, want.gid)
		}
	}
	cfg := fmt.Sprintf(`platform: mattermost
mattermost:
  url: %s
  token_file: /etc/thinbot/mattermost.token
  callback_url: http://%s/hooks/mattermost/actions
model: {base_url: %s, model: test-model}
listen: %s
state_dir: /var/lib/thinbot/state
skills_dirs: [/usr/share/thinbot/skills]
channels:
  - {id: %s, workspace: %s, approvers: [%s]}
`, chat.(*mmChat).s.URL, addr, modelURL, addr, chat.Ops(), ws, chat.UserID("bob"))
	writeOwned(t, "/etc/thinbot/thinbot.yaml", cfg, 0o640, 0, gid)

	asBot := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(t.Context(), "/usr/bin/thinbot", args...)
		cmd.Dir = "/var/lib/thinbot"
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/var/lib/thinbot"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		return cmd
	}
	// The guide's check, with its no-sudo rule (setpriv as thinbot).
	check := strings.ReplaceAll(strings.TrimSpace(blocks["check"]), "sudo -u thinbot ", "setpriv --reuid=thinbot --regid=thinbot --init-groups ")
	checkCmd := exec.CommandContext(t.Context(), "bash", "-euc", check)
	checkCmd.Dir = "/"
	checkCmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if out, err := checkCmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "is fine") {
		t.Fatalf("the guide's %q on the installed package: %v\n%s", check, err, out)
	}
	if out, err := asBot("skills", "--dir", "/usr/share/thinbot/skills").CombinedOutput(); err != nil || !strings.Contains(string(out), "read-only: /usr/share/thinbot/skills/sys-doctor/scripts/doctor.sh") {
		t.Errorf("the packaged skills as the bot sees them (%v):\n%s", err, out)
	}

	// Start and stop: the unit's ExecStart, run directly as its user (the
	// test machine need not run systemd).
	serve := asBot("serve", "--config", "/etc/thinbot/thinbot.yaml")
	var log logBuffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.Wait() }()
	hc := &http.Client{Timeout: 5 * time.Second}
	healthy := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !healthy; {
		if resp, err := hc.Get("http://" + addr + "/healthz"); err == nil {
			healthy = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		select {
		case err := <-done:
			t.Fatalf("thinbot serve exited: %v\n%s", err, log.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !healthy {
		serve.Process.Kill()
		<-done
		t.Fatalf("thinbot serve did not answer /healthz:\n%s", log.String())
	}
	// A thread, so that the chain holds events (the model is unreachable:
	// the message and the run's end are recorded all the same).
	chat.Mention("bob", chat.Ops(), "", "how full are the disks?")
	for deadline := time.Now().Add(60 * time.Second); ; {
		if st, err := os.Stat("/var/lib/thinbot/state/audit.jsonl"); err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing recorded for a mention:\n%s", log.String())
		}
		select {
		case err := <-done:
			t.Fatalf("thinbot serve exited: %v\n%s", err, log.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	serve.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Errorf("SIGTERM: %v\n%s", err, log.String())
	}
	if _, err := os.Stat("/var/lib/thinbot/state"); err != nil {
		t.Errorf("no state written: %v", err)
	}

	// Remove keeps the operator's data; purge removes what the package
	// made and keeps the audit chain, saying where it is.
	journal := "/var/lib/thinbot/state/audit.jsonl"
	chain, err := os.ReadFile(journal)
	if err != nil || len(chain) == 0 {
		t.Fatalf("no audit chain written: %v", err)
	}
	sh(t, "dpkg", "--remove", "thinbot")
	if _, err := os.Stat("/usr/bin/thinbot"); err == nil {
		t.Error("remove left /usr/bin/thinbot")
	}
	if _, err := os.Stat("/etc/thinbot/thinbot.yaml"); err != nil {
		t.Errorf("remove deleted the config: %v", err)
	}
	if _, err := os.Stat("/var/lib/thinbot/state"); err != nil {
		t.Errorf("remove deleted the state: %v", err)
	}
	out := sh(t, "dpkg", "--purge", "thinbot")
	purged = true
	for _, p := range []string{"/etc/thinbot/thinbot.example.yaml", "/usr/share/thinbot", "/usr/lib/systemd/system/thinbot.service"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("purge left %s", p)
		}
	}
	if got, err := os.ReadFile(journal); err != nil || string(got) != string(chain) {
		t.Errorf("purge did not keep the audit chain %s as it was (%v)", journal, err)
	}
	if _, err := os.Stat("/etc/thinbot/thinbot.yaml"); err != nil {
		t.Errorf("purge deleted the operator's config: %v", err)
	}
	if !strings.Contains(out, "purge kept /var/lib/thinbot: the audit chain") || !strings.Contains(out, "rm -r /var/lib/thinbot") {
		t.Errorf("purge did not say where the chain is and how to delete it:\n%s", out)
	}

	// Once the operator has deleted them, a purge leaves nothing behind.
	for _, d := range []string{"/var/lib/thinbot", "/etc/thinbot"} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, "dpkg", "-i", deb)
	purged = false
	sh(t, "dpkg", "--purge", "thinbot")
	purged = true
	for _, p := range []string{"/etc/thinbot", "/var/lib/thinbot"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a purge of an unused install left %s", p)
		}
	}
}

func writeOwned(t *testing.T, path, data string, mode os.FileMode, uid, gid int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
