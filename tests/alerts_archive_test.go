package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// TestArchiveKeepsFiringAlertGroups: `thinbot audit archive` leaves the
// thread of an alert group still firing live, so that after the archive and
// a restart the group's resolve lands in its thread instead of opening a
// new one; a resolved group's thread is archived.
func TestArchiveKeepsFiringAlertGroups(t *testing.T) {
	chat := newMMChat(t)
	m := fakemodel.Start(t)
	tokenFile := writeSecret(t, t.TempDir(), "alerts.token", alertToken)
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`alerts:
  token_file: %s
  routes:
    - name: ops
      channel: %s
      investigate: false
`, tokenFile, chat.Ops())})
	ops := chat.Ops()
	send := func(group, status string) { t.Helper(); deliver(t, r, group, status) }
	root := func(alertname string) string {
		for _, p := range botRoots(chat, ops) {
			if strings.Contains(p.Text, alertname) {
				return p.ID
			}
		}
		return ""
	}
	// Gone fires and resolves; Still fires after it and stays firing.
	send("Gone", "firing")
	r.waitFor("Gone's card", func() bool { return root("Gone") != "" })
	send("Gone", "resolved")
	r.waitPost(ops, root("Gone"), "Resolved")
	send("Still", "firing")
	r.waitFor("Still's card", func() bool { return root("Still") != "" })
	still := root("Still")
	r.stop()

	before := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	res := thinbot(t, r.dir, nil, "audit", "archive", "--config", r.cfgPath, "--before", before)
	if res.code != 0 {
		t.Fatalf("audit archive: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	t.Logf("audit archive: %s", res.stdout)
	// Gone's thread went into the archive; Still's events stayed live.
	exp := thinbot(t, r.dir, nil, "audit", "export", "--config", r.cfgPath)
	if exp.code != 0 {
		t.Fatalf("audit export: exit %d\n%s", exp.code, exp.stderr)
	}
	if !strings.Contains(exp.stdout, r.session(ops, still)) {
		t.Fatalf("the live chain lost the firing group's thread %s:\n%s", still, exp.stdout)
	}
	if strings.Contains(exp.stdout, r.session(ops, root("Gone"))) {
		t.Errorf("the resolved group's thread was not archived:\n%s", exp.stdout)
	}

	r.start()
	send("Still", "resolved")
	r.waitPost(ops, still, "Resolved")
	if n := len(botRoots(chat, ops)); n != 2 {
		t.Errorf("%d cards after the resolve, want 2 (the resolve opened a new thread)", n)
	}
	r.stop()
}

// deliver sends the receiver a webhook of one alert of group (its
// alertname too) with status, as Alertmanager writes it, and fails the test
// unless it is answered 200.
func deliver(t *testing.T, r *rig, group, status string) {
	t.Helper()
	ends := ""
	if status == "resolved" {
		ends = `,"endsAt":"2026-01-01T00:10:00Z"`
	}
	body := fmt.Sprintf(`{"version":"4","groupKey":%q,"status":%q,"receiver":"thinbot","commonLabels":{"alertname":%q,"severity":"warning"},`+
		`"alerts":[{"status":%q,"labels":{"alertname":%q,"severity":"warning"},"startsAt":"2026-01-01T00:00:00Z"%s,"fingerprint":%q}]}`,
		group, status, group, status, group, ends, group)
	req, _ := http.NewRequest("POST", "http://"+r.addr+"/alerts", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+alertToken)
	resp, err := r.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delivery %s %s: %d %s", group, status, resp.StatusCode, b.String())
	}
}

// TestAlertRouteByChannelName: a route names its channel ("ops") while the
// channel is configured by its id; the card opens there (issue 33: the
// config check refused it).
func TestAlertRouteByChannelName(t *testing.T) {
	chat := newMMChat(t)
	m := fakemodel.Start(t)
	tokenFile := writeSecret(t, t.TempDir(), "alerts.token", alertToken)
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`alerts:
  token_file: %s
  routes:
    - name: ops
      channel: ops
      investigate: false
`, tokenFile)})
	deliver(t, r, "ByName", "firing")
	r.waitFor("the card in the ops channel", func() bool {
		roots := botRoots(chat, chat.Ops())
		return len(roots) == 1 && strings.Contains(roots[0].Text, "ByName")
	})
	r.stop()
}

// TestAlertsWebOnly: a daemon with no chat platform (platform: web, the
// web console alone, as a new user tries it first) takes Alertmanager's
// alerts into console threads, with the first look's answer, and a route
// needs no channel (issue 33: alerts needed Mattermost or Slack).
func TestAlertsWebOnly(t *testing.T) {
	m := fakemodel.Start(t, run("uptime"), fakemodel.Reply{Content: "Findings in the web-only console: all quiet."})
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	addr, webAddr := freeAddr(t), freeAddr(t)
	tokenFile := writeSecret(t, dir, "alerts.token", alertToken)
	cfg := filepath.Join(dir, "thinbot.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`platform: web
model: {base_url: %s, model: test-model, max_retries: 0}
listen: %s
state_dir: %s
systemd_unit: thinbot-e2e-test.service
web:
  listen: %s
  trusted_proxies: [127.0.0.1/32]
  users: [alice]
  approvers: [bob]
  workspace: ws
alerts:
  token_file: %s
  routes:
    - name: all
      max_steps: 4
`, m.URL, addr, filepath.Join(dir, "state"), webAddr, tokenFile)), 0o600)
	if res := thinbot(t, dir, nil, "config", "check", "--config", cfg); res.code != 0 {
		t.Fatalf("config check: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	cmd := exec.Command(thinbotBin, "serve", "--config", cfg)
	cmd.Dir, cmd.Env = dir, baseEnv()
	log := &logBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("thinbot output:\n%s", tail(log.String(), 6000))
		}
	})
	waitLogged(t, "thinbot serve", log, 0, `"msg":"thinbot serving"`, done)

	am := startAlertmanager(t, "http://"+addr+"/alerts", tokenFile)
	am.post(t, amAlert{Labels: map[string]string{"alertname": "WebOnlyDown", "severity": "critical"}})
	c := consoleClient{t: t, base: "http://" + webAddr, user: "alice"}
	var id string
	waitUntilBy(t, time.Now().Add(waitTimeout), "the alert's console thread", func() bool {
		_, list := c.call("GET", "/api/threads", "")
		var threads struct{ Threads []struct{ ID, Title string } }
		json.Unmarshal([]byte(list), &threads)
		for _, th := range threads.Threads {
			if strings.Contains(th.Title, "WebOnlyDown") {
				id = th.ID
			}
		}
		return id != ""
	})
	waitUntilBy(t, time.Now().Add(waitTimeout), "the first look's answer", func() bool { return c.hasPost(id, "Findings in the web-only console: all quiet.") })
	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	if cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("thinbot exited with %d after SIGTERM", cmd.ProcessState.ExitCode())
	}
	verifyChain(t, filepath.Join(dir, "state", "events.db"))
}
