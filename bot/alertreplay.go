package bot

import (
	"maps"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// AlertReplay rebuilds an alert thread's posts from the chain's alert
// events as the receiver showed them live: the card (the thread's root
// post, rewritten by each delivery) and the line each later delivery
// posted. A front end that rebuilds threads from the chain (the web
// console after a restart) feeds it one thread's alert payloads in chain
// order. Location is the zone of the times in the texts (nil means UTC),
// the zone the receiver wrote them in. Not safe for concurrent use.
type AlertReplay struct {
	Location *time.Location

	g     agentcore.AlertGroup
	known bool
}

// Event returns the card after the delivery p, recorded at at, and the
// line that delivery posted in the thread ("" for the delivery that opened
// the thread). The chain keeps each alert but not the delivery's common
// labels and annotations: they are rebuilt as Alertmanager computes them,
// the labels and annotations all its alerts share.
func (r *AlertReplay) Event(p agentcore.AlertPayload, at time.Time) (card, line string) {
	wh := webhookOf(p)
	if !r.known || p.Kind == "opened" {
		r.known = true
		r.g = agentcore.AlertGroup{Status: p.Status, StartsAt: earliest(p.Alerts), Last: p}
		return alertCard(wh, p, at, time.Time{}, r.Location), ""
	}
	starts := r.g.StartsAt
	if e := earliest(p.Alerts); !e.IsZero() && (starts.IsZero() || e.Before(starts)) {
		starts = e
	}
	card = alertCard(wh, p, at, starts, r.Location)
	line = alertLine(r.g, wh, p, at, starts, r.Location)
	r.g.Status, r.g.Last, r.g.StartsAt = p.Status, p, starts
	return card, line
}

// webhookOf is the delivery a payload records, as far as the card reads it.
func webhookOf(p agentcore.AlertPayload) Webhook {
	wh := Webhook{GroupKey: p.GroupKey, Status: p.Status, Receiver: p.Receiver, TruncatedAlerts: p.Truncated}
	for i, r := range p.Alerts {
		wh.Alerts = append(wh.Alerts, WebhookAlert{Status: r.Status, Labels: r.Labels, Annotations: r.Annotations,
			StartsAt: r.StartsAt, EndsAt: r.EndsAt, GeneratorURL: r.GeneratorURL, Fingerprint: r.Fingerprint})
		if i == 0 {
			wh.CommonLabels, wh.CommonAnnotations = maps.Clone(r.Labels), maps.Clone(r.Annotations)
			continue
		}
		shared(wh.CommonLabels, r.Labels)
		shared(wh.CommonAnnotations, r.Annotations)
	}
	return wh
}

// shared deletes from common what other does not have alike.
func shared(common, other map[string]string) {
	for k, v := range common {
		if ov, ok := other[k]; !ok || ov != v {
			delete(common, k)
		}
	}
}
