package bot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

// webAlert is an alert of the group WebDown on instance web-N, with a
// summary of its own.
func webAlert(n int, status string) WebhookAlert {
	a := WebhookAlert{Status: status, Fingerprint: fmt.Sprintf("fp%d", n), StartsAt: fired,
		Labels:      map[string]string{"alertname": "WebDown", "severity": "critical", "instance": fmt.Sprintf("web-%d", n)},
		Annotations: map[string]string{"summary": fmt.Sprintf("web-%d answers 502", n), "runbook_url": "https://runbooks.example/web"}}
	if status == "resolved" {
		a.EndsAt = fired.Add(10 * 60e9)
	}
	return a
}

// groupBody is a delivery as Alertmanager sends it: the common labels and
// annotations are those every alert shares.
func groupBody(status string, alerts ...WebhookAlert) Webhook {
	var rs []agentcore.AlertRecord
	for _, a := range alerts {
		rs = append(rs, agentcore.AlertRecord{Labels: a.Labels, Annotations: a.Annotations})
	}
	ann := map[string]string{}
	for k, v := range alerts[0].Annotations {
		ann[k] = v
		for _, a := range alerts[1:] {
			if a.Annotations[k] != v {
				delete(ann, k)
			}
		}
	}
	return Webhook{Version: "4", GroupKey: "g", Status: status, GroupLabels: map[string]string{"alertname": "WebDown"},
		CommonLabels: sharedLabels(rs), CommonAnnotations: ann, Alerts: alerts}
}

// TestAlertCardListsTheAlerts: a group of several alerts whose instances
// and summaries differ shows each alert's instance and summary on its
// card, at most cardAlerts of them and how many more, and an update says
// which alert joined or resolved.
func TestAlertCardListsTheAlerts(t *testing.T) {
	wh := groupBody("firing", webAlert(1, "firing"), webAlert(2, "firing"))
	card := alertCard(wh, agentcore.AlertPayload{Alerts: records(wh)}, fired, fired, nil)
	for _, want := range []string{"2 of 2 alert(s) firing", "**Alerts:**\n- 🔥 `instance=web-1` · `web-1 answers 502`\n- 🔥 `instance=web-2` · `web-2 answers 502`\n"} {
		if !strings.Contains(card, want) {
			t.Errorf("card lacks %q:\n%s", want, card)
		}
	}

	var many []WebhookAlert
	for i := range cardAlerts + 3 {
		st := "firing"
		if i == 0 {
			st = "resolved"
		}
		many = append(many, webAlert(i, st))
	}
	wh = groupBody("firing", many...)
	card = alertCard(wh, agentcore.AlertPayload{Alerts: records(wh)}, fired, fired, nil)
	if n := strings.Count(card, "\n- "); n != cardAlerts+1 {
		t.Errorf("card lists %d lines, want %d and a count:\n%s", n, cardAlerts+1, card)
	}
	if !strings.Contains(card, "- … and 3 more\n") || strings.Contains(card, "✅ `instance=web-0`") {
		t.Errorf("card does not list the firing alerts first and count the rest:\n%s", card)
	}

	for _, tc := range []struct {
		old, cur []WebhookAlert
		want     string
	}{
		{[]WebhookAlert{webAlert(1, "firing")}, []WebhookAlert{webAlert(1, "firing"), webAlert(2, "firing")}, "`instance=web-2` joined"},
		{[]WebhookAlert{webAlert(1, "firing"), webAlert(2, "firing")}, []WebhookAlert{webAlert(1, "resolved"), webAlert(2, "firing")}, "`instance=web-1` resolved"},
		{[]WebhookAlert{webAlert(1, "resolved"), webAlert(2, "firing")}, []WebhookAlert{webAlert(1, "firing"), webAlert(2, "firing"), webAlert(3, "firing")},
			"`instance=web-3` joined; `instance=web-1` firing again"},
		{[]WebhookAlert{webAlert(1, "firing")}, []WebhookAlert{webAlert(1, "firing")}, ""},
		{nil, many[1:], "`instance=web-1`, `instance=web-2`, `instance=web-3`, `instance=web-4`, `instance=web-5` and 7 more joined"},
	} {
		got := alertChanges(records(Webhook{Alerts: tc.old}), records(Webhook{Alerts: tc.cur}))
		if got != tc.want {
			t.Errorf("alertChanges = %q, want %q", got, tc.want)
		}
	}
}
