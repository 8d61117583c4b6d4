package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// TestAlertAckEscalateSilence is the person on call's path with Debian's
// real Alertmanager (issue #33): an alert fires and its card is
// acknowledged from its button (a non-approver's press refused); a
// /silence request nobody decides at first is reminded to the approvers
// and escalated; a denied silence creates nothing in Alertmanager; an
// approved one is listed by Alertmanager's API with the group's matchers,
// and the card shows it; /unsilence expires it; the alert resolves. The
// chain holds each step in order.
func TestAlertAckEscalateSilence(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			scAckEscalateSilence(t, p.newChat)
		})
	}
}

// amSilences lists Alertmanager's silences by state (GET /api/v2/silences).
func (am *alertmanager) silences(t *testing.T) []amListed {
	t.Helper()
	resp, err := am.hc.Get(am.url + "/api/v2/silences")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []amListed
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// amListed is a silence as Alertmanager's API lists it.
type amListed struct {
	ID       string `json:"id"`
	Matchers []struct {
		Name, Value      string
		IsRegex, IsEqual bool
	} `json:"matchers"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
}

func scAckEscalateSilence(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	m := fakemodel.Start(t) // no first look: the route does not investigate
	dir := t.TempDir()
	tokenFile := writeSecret(t, dir, "alerts.token", alertToken)
	amAddr := freeAddr(t)
	amToken := writeSecret(t, dir, "am.token", "am-bearer-token-0123456789")
	r := newRig(t, chat, m.URL, rigOpts{ApprovalTimeout: "5m", Extra: fmt.Sprintf(`approval_reminders:
  remind_after: 1s
  escalate_after: 2s
  escalate_to: [%s]
alerts:
  token_file: %s
  alertmanager:
    url: http://%s
    bearer_token_file: %s
  routes:
    - name: ops
      matchers: ['severity="critical"']
      channel: %s
      investigate: false
`, chat.UserID("carol"), tokenFile, amAddr, amToken, chat.Ops())})
	ops := chat.Ops()
	// Alertmanager listens where thinbot's config says.
	am := startAlertmanagerAt(t, amAddr, fmt.Sprintf(amConfig, "http://"+r.addr+"/alerts", tokenFile))

	disk := amAlert{Labels: map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": "db1:9100"},
		Annotations: map[string]string{"summary": "Disk /var is 97% full"}}
	am.post(t, disk)
	var card chatPost
	r.waitFor("the alert's card with Acknowledge", func() bool {
		roots := botRoots(chat, ops)
		if len(roots) == 1 {
			card = roots[0]
		}
		return len(roots) == 1 && strings.Contains(card.Text, "FIRING") && hasButton(chat, ops, card.ID, "ack")
	})
	root := card.ID

	// Acknowledge: carol approves nothing and is refused; bob takes it.
	chat.Click(t, ops, root, root, "ack", "carol")
	r.waitFor("carol's refusal", func() bool {
		return strings.Contains(strings.Join(chat.Ephemerals("carol"), "\n"), "cannot acknowledge")
	})
	chat.Click(t, ops, root, root, "ack", "bob")
	r.waitFor("the card to say bob acknowledged", func() bool {
		roots := botRoots(chat, ops)
		return len(roots) == 1 && strings.Contains(roots[0].Text, "Acknowledged") && strings.Contains(roots[0].Text, "bob") && !hasButton(chat, ops, root, "ack")
	})

	// A silence denied: Alertmanager has none.
	chat.Mention("alice", ops, root, "/silence 1h first try")
	ask := r.waitPost(ops, root, "comment: first try")
	if !strings.Contains(ask.Text, `alertname=\"DiskFull\"`) && !strings.Contains(ask.Text, `alertname="DiskFull"`) {
		t.Errorf("the approval card does not show the matchers: %q", ask.Text)
	}
	chat.Click(t, ops, root, ask.ID, "deny", "bob")
	r.waitPost(ops, root, "Denied")
	if s := am.silences(t); len(s) != 0 {
		t.Fatalf("a denied silence reached Alertmanager: %+v", s)
	}

	// A silence nobody decides at first: reminded, escalated, then approved.
	chat.Mention("alice", ops, root, "/silence 1h disk cleanup under way")
	ask = r.waitPost(ops, root, "comment: disk cleanup under way")
	// This request's reminders (the denied one may have had one too, on
	// a slow machine).
	reqID := requestRe.FindStringSubmatch(ask.Text)
	if reqID == nil {
		t.Fatalf("no request id on the card: %q", ask.Text)
	}
	remind := waitPostBoth(r, ops, root, "has waited", reqID[1])
	escalate := waitPostBoth(r, ops, root, "nobody decided this request in", reqID[1])
	for _, want := range []string{"alice", "bob"} {
		if !strings.Contains(remind.Text, mentionOf(chat, want)) {
			t.Errorf("the reminder does not mention %s: %q", want, remind.Text)
		}
	}
	if !strings.Contains(escalate.Text, mentionOf(chat, "carol")) {
		t.Errorf("the escalation does not mention carol: %q", escalate.Text)
	}
	chat.Click(t, ops, root, ask.ID, "approve", "bob")
	r.waitPost(ops, root, "Silenced in Alertmanager until")
	sil := am.silences(t)
	if len(sil) != 1 || sil[0].Status.State != "active" || len(sil[0].Matchers) != 1 || sil[0].Matchers[0].Name != "alertname" ||
		sil[0].Matchers[0].Value != "DiskFull" || !sil[0].Matchers[0].IsEqual || sil[0].CreatedBy != "alice (thinbot)" ||
		sil[0].Comment != "disk cleanup under way" || sil[0].EndsAt.Sub(sil[0].StartsAt).Round(time.Second) != time.Hour {
		t.Fatalf("Alertmanager's silences: %+v", sil)
	}
	r.waitFor("the card to show the silence", func() bool {
		roots := botRoots(chat, ops)
		return len(roots) == 1 && strings.Contains(roots[0].Text, "Silenced") && strings.Contains(roots[0].Text, sil[0].ID)
	})

	// /unsilence, approved: expired in Alertmanager; then the resolve
	// (which the silence would have muted) reaches the thread.
	chat.Mention("alice", ops, root, "/unsilence")
	ask = r.waitPost(ops, root, "expire silence "+sil[0].ID)
	chat.Click(t, ops, root, ask.ID, "approve", "bob")
	r.waitPost(ops, root, "expired in Alertmanager")
	if s := am.silences(t); len(s) != 1 || s[0].Status.State != "expired" {
		t.Fatalf("Alertmanager's silences after /unsilence: %+v", s)
	}
	disk.EndsAt = time.Now().UTC()
	am.post(t, disk)
	r.waitFor("the card to show RESOLVED", func() bool {
		roots := botRoots(chat, ops)
		return len(roots) == 1 && strings.Contains(roots[0].Text, "RESOLVED") && strings.Contains(roots[0].Text, "Acknowledged")
	})

	// The chain, in order (the reminders of the second request).
	var seq []string
	for _, ev := range journalEvents(t, filepath.Join(r.stateDir, "audit.jsonl")) {
		if ev.Type == "approval_reminder" && ev.str("request_id") != reqID[1] {
			continue
		}
		switch ev.Type {
		case "alert", "alert_ack", "approval_reminder", "alert_silence", "approval_requested", "approval_decision":
			what := ev.Type
			switch ev.Type {
			case "alert":
				what += ":" + ev.str("kind")
			case "approval_reminder":
				what += ":" + ev.str("stage")
			case "alert_silence":
				what += ":" + ev.str("action")
			case "approval_decision":
				what += ":" + fmt.Sprint(ev.Payload["approved"])
			}
			seq = append(seq, what)
		}
	}
	want := "alert:opened alert_ack approval_requested approval_decision:false approval_requested approval_reminder:remind approval_reminder:escalate " +
		"approval_decision:true alert_silence:created approval_requested approval_decision:true alert_silence:expired alert:resolved"
	if got := strings.Join(seq, " "); got != want {
		t.Errorf("chain:\n got %s\nwant %s", got, want)
	}
	chat.Mention("bob", ops, root, "/timeline appendix")
	tl := r.waitPost(ops, root, "Chain verified")
	plain := strings.ReplaceAll(tl.Text, "*", "") // Slack writes bold with one
	for _, w := range []string{"acknowledged by `user:" + chat.UserID("bob") + " (bob)`", "reminder of request", "escalation of request",
		"silence `created` in Alertmanager `" + sil[0].ID} {
		if !strings.Contains(plain, w) {
			t.Errorf("the timeline lacks %q:\n%s", w, tl.Text)
		}
	}
	// The postmortem counts the acknowledgement among the milestones.
	chat.Mention("bob", ops, root, "/timeline")
	pm := strings.ReplaceAll(r.waitPost(ops, root, "Durations").Text, "*", "")
	for _, w := range []string{"acknowledged by `bob`", "after card (`bob`)", "escalation of the approval for ", "silence `created` in Alertmanager"} {
		if !strings.Contains(pm, w) {
			t.Errorf("the postmortem lacks %q:\n%s", w, pm)
		}
	}
	r.stop()
}

// requestRe finds the request id on an approval card.
var requestRe = regexp.MustCompile("[Rr]equest `(s[0-9a-f]+)`")

// waitPostBoth waits for a bot post in the thread that contains both a
// and b.
func waitPostBoth(r *rig, channel, root, a, b string) chatPost {
	r.t.Helper()
	var found chatPost
	r.waitFor(fmt.Sprintf("a post containing %q and %q", a, b), func() bool {
		for _, p := range r.chat.BotPosts(channel, root) {
			if strings.Contains(p.Text, a) && strings.Contains(p.Text, b) {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// hasButton reports whether the bot's post id in channel has a button
// with the action id.
func hasButton(chat chatSide, channel, id, action string) bool {
	for _, p := range chat.BotPosts(channel, id) {
		if p.ID == id {
			for _, b := range p.Buttons {
				if b == action {
					return true
				}
			}
		}
	}
	return false
}

// mentionOf is how the platform writes a mention of user.
func mentionOf(chat chatSide, user string) string {
	if chat.Platform() == "slack" {
		return "<@" + chat.UserID(user) + ">"
	}
	return "@" + user
}

// journalEvent is one line of audit.jsonl.
type journalEvent struct {
	Type    string         `json:"type"`
	Payload map[string]any `json:"payload"`
}

func (e journalEvent) str(k string) string { s, _ := e.Payload[k].(string); return s }

// journalEvents reads an audit.jsonl.
func journalEvents(t *testing.T, path string) []journalEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []journalEvent
	for _, line := range strings.Split(string(data), "\n") {
		var e journalEvent
		if json.Unmarshal([]byte(line), &e) == nil && e.Type != "" {
			out = append(out, e)
		}
	}
	return out
}
