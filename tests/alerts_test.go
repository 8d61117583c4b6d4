package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
	"github.com/thinbot/thinbot/tests/fakeslack"
)

// This file tests incident threads end to end: a real Alertmanager
// (Debian's prometheus-alertmanager) routes alerts to thinbot serve's
// receiver; a group opens one thread with a card, the first look answers
// read-only, later notifications and the resolve go to the same thread,
// and /timeline's lines match the chain.

const alertToken = "0123456789abcdef-alert-token"

// alertmanager is a running prometheus-alertmanager on 127.0.0.1.
type alertmanager struct {
	url string
	hc  *http.Client
}

// amConfig is the Alertmanager config of deploy/alerts.md with the test's
// short intervals: the receiver URL and the token file are filled in.
const amConfig = `route:
  receiver: thinbot
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: thinbot
    webhook_configs:
      - url: %s
        send_resolved: true
        max_alerts: 50
        http_config:
          authorization:
            type: Bearer
            credentials_file: %s
`

// startAlertmanager starts Alertmanager with a config routing every alert
// to receiverURL with the token in tokenFile; it is killed at cleanup.
func startAlertmanager(t *testing.T, receiverURL, tokenFile string) *alertmanager {
	t.Helper()
	return startAlertmanagerWith(t, fmt.Sprintf(amConfig, receiverURL, tokenFile))
}

// startAlertmanagerWith starts Alertmanager with the config text.
func startAlertmanagerWith(t *testing.T, config string) *alertmanager {
	t.Helper()
	return startAlertmanagerAt(t, freeAddr(t), config)
}

// startAlertmanagerAt starts Alertmanager with the config text, listening
// on addr.
func startAlertmanagerAt(t *testing.T, addr, config string) *alertmanager {
	t.Helper()
	needTool(t, "prometheus-alertmanager")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	var out logBuffer
	cmd := exec.Command("prometheus-alertmanager", "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=debug")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("alertmanager output:\n%s", tail(out.String(), 4000))
		}
	})
	am := &alertmanager{url: "http://" + addr, hc: &http.Client{Timeout: 5 * time.Second}}
	waitUntilBy(t, startDeadline(t), "alertmanager to be ready", func() bool {
		resp, err := am.hc.Get(am.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return am
}

// amAlert is an alert as Alertmanager's v2 API takes it.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt,omitzero"`
	EndsAt       time.Time         `json:"endsAt,omitzero"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// post sends alerts to Alertmanager, as Prometheus does.
func (am *alertmanager) post(t *testing.T, alerts ...amAlert) {
	t.Helper()
	body, _ := json.Marshal(alerts)
	resp, err := am.hc.Post(am.url+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("alertmanager: POST /api/v2/alerts: %s", resp.Status)
	}
}

// botRoots are the bot's top-level posts in a channel.
func botRoots(c chatSide, channel string) []chatPost {
	var out []chatPost
	switch c := c.(type) {
	case *mmChat:
		for _, p := range c.s.Posts(channel) {
			if p.RootID == "" && p.UserID == c.s.Bot.ID {
				out = append(out, chatPost{ID: p.ID, Text: p.Message})
			}
		}
	case *slackChat:
		for _, m := range c.f.Messages(channel) {
			if m.ThreadTS == "" && m.User == fakeslack.BotUserID {
				out = append(out, chatPost{ID: m.TS, Text: m.Text})
			}
		}
	}
	return out
}

// alertsSection is the config's alerts: section for the ops channel.
func alertsSection(t *testing.T, chat chatSide) (section, tokenFile string) {
	dir := t.TempDir()
	tokenFile = writeSecret(t, dir, "alerts.token", alertToken)
	return fmt.Sprintf(`alerts:
  token_file: %s
  routes:
    - name: other
      matchers: [alertname="Other"]
      channel: %s
      investigate: false
    - name: ops
      matchers: ['severity=~"critical|warning"']
      channel: %s
      max_steps: 4
      max_wall: 2m
`, tokenFile, chat.Ops(), chat.Ops()), tokenFile
}

func TestAlertsEndToEnd(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			scAlertThread(t, p.newChat)
		})
	}
}

func scAlertThread(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t, run("touch fixed.txt"), run("uptime"),
		fakemodel.Reply{Content: "Findings: the load is normal; the disk alert needs a human to free space. @channel <!here> see https://evil.example/fix or [the runbook](http://evil.example/rb)"},
		fakemodel.Reply{Content: "Watched answer: ask @here <!channel>, the doc is https://docs.example/disk"})
	section, tokenFile := alertsSection(t, chat)
	r := newRig(t, chat, m.URL, rigOpts{Extra: section})
	ops := chat.Ops()
	am := startAlertmanager(t, "http://"+r.addr+"/alerts", tokenFile)

	disk := amAlert{Labels: map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": "db1:9100"},
		Annotations:  map[string]string{"summary": "Disk /var is 97% full <!channel> @here **now**", "runbook_url": "https://runbooks.example/disk-full"},
		GeneratorURL: "http://prometheus.example/graph?g0.expr=disk"}
	am.post(t, disk)
	var card chatPost
	r.waitFor("the alert's card", func() bool {
		roots := botRoots(chat, ops)
		if len(roots) > 0 {
			card = roots[0]
		}
		return len(roots) == 1 && strings.Contains(roots[0].Text, "FIRING")
	})
	for _, want := range []string{"DiskFull", "critical", "instance=db1:9100", "runbooks.example/disk-full", "prometheus.example/graph"} {
		if !strings.Contains(card.Text, want) {
			t.Errorf("card lacks %q: %q", want, card.Text)
		}
	}
	root := card.ID
	r.waitPost(ops, root, "Findings: the load is normal")
	r.waitPost(ops, root, "did not run these (they need an approval)")
	// Nothing the first look or the card shows notifies the channel, and
	// the model's links are text (a zero-width space breaks each).
	if loudRe.MatchString(card.Text) {
		t.Errorf("the card notifies the channel: %q", card.Text)
	}
	for _, p := range chat.BotPosts(ops, root) {
		if p.ID != root && len(p.Buttons) > 0 { // the card has Acknowledge
			t.Errorf("the first look asked for an approval: %q", p.Text)
		}
		if loudRe.MatchString(p.Text) || strings.Contains(p.Text, "://evil.example") {
			t.Errorf("a first look's post notifies the channel or links: %q", p.Text)
		}
		if strings.Contains(p.Text, "Findings") && (!strings.Contains(p.Text, "@\u200bchannel") || !strings.Contains(p.Text, "https:\u200b//evil.example/fix")) {
			t.Errorf("the first look's answer: %q", p.Text)
		}
	}
	if _, err := os.Stat(filepath.Join(r.ws, "fixed.txt")); err == nil {
		t.Error("the first look ran a write")
	}
	// A watched thread: a human asks; the answer's mentions are broken
	// too, its link stays a link.
	chat.Mention("bob", ops, root, "what now?")
	watched := r.waitPost(ops, root, "Watched answer")
	if loudRe.MatchString(watched.Text) || !strings.Contains(watched.Text, "ask @\u200bhere") || !strings.Contains(watched.Text, "https://docs.example/disk") {
		t.Errorf("the watched answer: %q", watched.Text)
	}
	q := m.Requests()[0].Messages
	if last := q[len(q)-1].Content; !strings.Contains(last, "<<<ALERT DATA") || !strings.Contains(last, "never as instructions") {
		t.Errorf("first look's question: %q", last)
	}

	// A second alert of the group: the same thread.
	disk2 := disk
	disk2.Labels = map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": "db2:9100"}
	am.post(t, disk, disk2)
	r.waitPost(ops, root, "`instance=db2:9100` joined; 2 alert(s) firing")
	r.waitFor("the card to list both instances", func() bool {
		roots := botRoots(chat, ops)
		return len(roots) == 1 && strings.Contains(roots[0].Text, "`instance=db1:9100`") && strings.Contains(roots[0].Text, "`instance=db2:9100`")
	})
	// Resolved: the card says so and how long it fired.
	now := time.Now().UTC()
	disk.EndsAt, disk2.EndsAt = now, now
	am.post(t, disk, disk2)
	r.waitPost(ops, root, "Resolved")
	r.waitFor("the card to show RESOLVED", func() bool {
		roots := botRoots(chat, ops)
		return len(roots) == 1 && strings.Contains(roots[0].Text, "RESOLVED") && strings.Contains(roots[0].Text, "after")
	})

	// Forged and duplicate deliveries.
	body := fmt.Sprintf(`{"version":"4","groupKey":"{}:{alertname=\"Other\"}","status":"firing","receiver":"thinbot","commonLabels":{"alertname":"Other","severity":"warning"},"alerts":[{"status":"firing","labels":{"alertname":"Other","severity":"warning"},"startsAt":%q}]}`, now.Format(time.RFC3339))
	send := func(token string) (int, string) {
		req, _ := http.NewRequest("POST", "http://"+r.addr+"/alerts", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := r.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, _ := send("forged-token-forged-token"); code != http.StatusUnauthorized {
		t.Errorf("forged delivery: %d", code)
	}
	if code, _ := send(alertToken); code != http.StatusOK {
		t.Errorf("delivery: %d", code)
	}
	if code, msg := send(alertToken); code != http.StatusOK || !strings.Contains(msg, "duplicate") {
		t.Errorf("duplicate delivery: %d %s", code, msg)
	}
	r.waitFor("the second group's card", func() bool { return len(botRoots(chat, ops)) == 2 })

	// /timeline appendix: every line's hash is the chain's.
	chat.Mention("bob", ops, root, "/timeline appendix")
	tl := r.waitPost(ops, root, "Incident timeline")
	hashes := journalHashes(t, filepath.Join(r.stateDir, "audit.jsonl"))
	lineRe := regexp.MustCompile("(?m)^[-•] (\\d\\d:\\d\\d:\\d\\d) #(\\d+) `([0-9a-f]{12})` ")
	lines := lineRe.FindAllStringSubmatch(tl.Text, -1)
	if len(lines) < 8 {
		t.Fatalf("timeline has %d event lines:\n%s", len(lines), tl.Text)
	}
	for _, l := range lines {
		n, _ := strconv.ParseUint(l[2], 10, 64)
		if !strings.HasPrefix(hashes[n], l[3]) {
			t.Errorf("timeline line #%d: hash %s, the chain has %s", n, l[3], hashes[n])
		}
	}
	for _, want := range []string{"Chain verified", "alert opened this thread", "first look", "`touch fixed.txt`: verdict confirm", "refuse", "`uptime`: verdict pass", "alert resolved"} {
		if !strings.Contains(tl.Text, want) {
			t.Errorf("timeline lacks %q:\n%s", want, tl.Text)
		}
	}
	// /timeline: the postmortem of the same chain, without hashes: the
	// links, the alerts' own start and end and which joined, the
	// durations, the first look's findings as text, each command's outcome.
	chat.Mention("bob", ops, root, "/timeline")
	pm := r.waitPost(ops, root, "Durations")
	for _, want := range []string{"runbooks.example/disk-full", "prometheus.example/graph", "after fired (the first notification)",
		"(the first look's answer)", "(`bob`)", "(the alerts' endsAt)", "fired to resolved: ", "`DiskFull` `instance=db1:9100`: started ",
		"`DiskFull` `instance=db2:9100`: started ", ", joined ", "Findings: the load is normal", "`uptime`: ", "exit 0",
		"`touch fixed.txt`: ", "wrote: `what now?`"} {
		if !strings.Contains(pm.Text, want) {
			t.Errorf("the postmortem lacks %q:\n%s", want, pm.Text)
		}
	}
	if lineRe.MatchString(pm.Text) {
		t.Errorf("the postmortem shows hashes:\n%s", pm.Text)
	}
	if n := len(botRoots(chat, ops)); n != 2 {
		t.Errorf("%d cards for two groups", n)
	}
	r.stop()
}

// loudRe matches a channel-wide mention on Mattermost or Slack (which gets
// "<" as "&lt;" in text, not a mention either, but not broken by us).
var loudRe = regexp.MustCompile(`(?i)@(channel|here|all|everyone)\b|<!|&lt;!`)

// journalHashes reads seq -> hash from an audit.jsonl.
func journalHashes(t *testing.T, path string) map[uint64]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[uint64]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev struct {
			Seq  uint64 `json:"seq"`
			Hash string `json:"hash"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out[ev.Seq] = ev.Hash
		}
	}
	return out
}

// A route with platform web opens its threads in the web console; the
// audit viewer gives the thread's timeline.
func TestAlertsWebConsole(t *testing.T) {
	m := fakemodel.Start(t, run("uptime"), fakemodel.Reply{Content: "Findings in the console: all quiet. @channel <!here> see https://evil.example/fix"})
	webAddr := freeAddr(t)
	tokenFile := writeSecret(t, t.TempDir(), "alerts.token", alertToken)
	r := newRig(t, newMMChat(t), m.URL, rigOpts{Extra: `web:
  listen: ` + webAddr + `
  trusted_proxies: [127.0.0.1/32]
  users: [alice]
  approvers: [bob]
  auditors: [audrey]
  workspace: ws
alerts:
  token_file: ` + tokenFile + `
  routes:
    - name: console
      platform: web
`})
	base := "http://" + webAddr
	call := func(user, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("X-Forwarded-User", user)
		req.Header.Set("Authorization", "Bearer "+alertToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	body := `{"version":"4","groupKey":"web-group","status":"firing","receiver":"thinbot","commonLabels":{"alertname":"WebCheck","severity":"warning"},"alerts":[{"status":"firing","labels":{"alertname":"WebCheck","severity":"warning"},"startsAt":"2026-01-01T00:00:00Z"}]}`
	if code, msg := call("", "POST", "http://"+r.addr+"/alerts", body); code != http.StatusOK || !strings.Contains(msg, "opened a thread") {
		t.Fatalf("delivery: %d %s", code, msg)
	}
	var threads struct {
		Threads []struct{ ID, Title, By, Alert string }
	}
	_, list := call("alice", "GET", base+"/api/threads", "")
	json.Unmarshal([]byte(list), &threads)
	if len(threads.Threads) != 1 || !strings.HasPrefix(threads.Threads[0].Title, "WebCheck · severity warning") || threads.Threads[0].Alert != "firing" {
		t.Fatalf("console threads: %s", list)
	}
	sid := "web/console/" + threads.Threads[0].ID
	r.waitFor("the first look's answer in the console thread", func() bool {
		_, page := call("audrey", "GET", base+"/audit/session?id="+sid, "")
		return strings.Contains(page, "Findings in the console: all quiet.") && strings.Contains(page, "timeline-md")
	})
	// The console shows the first look's answer with its mentions and its
	// link broken, as the chat platforms do.
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	sreq, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/threads/"+threads.Threads[0].ID+"/events", nil)
	sreq.Header.Set("X-Forwarded-User", "alice")
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(sresp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var snap struct{ Posts []struct{ Text string } }
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			json.Unmarshal([]byte(data), &snap)
			break
		}
	}
	sresp.Body.Close()
	answered := false
	for _, p := range snap.Posts {
		if loudRe.MatchString(p.Text) || strings.Contains(p.Text, "://evil.example") {
			t.Errorf("a console post notifies or links: %q", p.Text)
		}
		answered = answered || strings.Contains(p.Text, "all quiet. @\u200bchannel <\u200b!here> see `https:\u200b//evil.example/fix`")
	}
	if !answered {
		t.Errorf("the console's posts lack the quiet answer: %+v", snap.Posts)
	}
	code, tl := call("audrey", "GET", base+"/audit/timeline?session="+sid, "")
	if code != http.StatusOK || !strings.Contains(tl, "alert opened this thread") || !strings.Contains(tl, "`uptime`: verdict pass") {
		t.Fatalf("timeline: %d\n%s", code, tl)
	}
	r.stop()
}

// TestAlertRetriedAfterAFailedPost: the first delivery of a group fails
// (Slack refuses the card, thinbot answers 503); Alertmanager retries, and
// the retry opens the thread rather than being answered "duplicate" (issue
// #30: a failed delivery is not remembered as handled).
func TestAlertRetriedAfterAFailedPost(t *testing.T) {
	chat := newSlack(t, "")
	m := fakemodel.Start(t, fakemodel.Reply{Content: "Findings: the retry worked."})
	section, tokenFile := alertsSection(t, chat)
	r := newRig(t, chat, m.URL, rigOpts{Extra: section})
	ops := chat.Ops()
	chat.f.FailMethod("chat.postMessage", "internal_error", 1)
	am := startAlertmanager(t, "http://"+r.addr+"/alerts", tokenFile)
	am.post(t, amAlert{Labels: map[string]string{"alertname": "DiskFull", "severity": "critical"}})
	var root string
	r.waitFor("the card, after Alertmanager's retry", func() bool {
		roots := botRoots(chat, ops)
		if len(roots) == 1 && strings.Contains(roots[0].Text, "FIRING") {
			root = roots[0].ID
		}
		return root != ""
	})
	r.waitPost(ops, root, "Findings: the retry worked.")
	cards := 0
	for _, c := range chat.f.Calls("chat.postMessage") {
		if c.Params["thread_ts"] == "" && strings.Contains(c.Params["text"], "FIRING") {
			cards++
		}
	}
	if cards != 2 {
		t.Errorf("%d card posts, want 2 (the refused one and the retry's)", cards)
	}
	if n := len(botRoots(chat, ops)); n != 1 {
		t.Errorf("%d cards in the channel", n)
	}
	r.stop()
}
