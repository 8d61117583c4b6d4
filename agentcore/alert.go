package agentcore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/thinbot/thinbot/store"
)

// EvAlert records an alert notification a front end received for the
// session's thread (AlertPayload). It never enters the projection: the
// model sees an alert only as the quoted question of an investigation.
const EvAlert = "alert"

// EvAlertAck records that a person took an alert group's incident: they
// pressed Acknowledge on its card (AlertAckPayload). Like EvAlert it never
// enters the projection.
const EvAlertAck = "alert_ack"

// AlertAckPayload is an EvAlertAck's: who acknowledged which group, when.
type AlertAckPayload struct {
	GroupKey string `json:"group_key"`
	// Alerts names the group's alerts as the card showed them when it was
	// acknowledged: each alert's alertname and the labels that tell it
	// apart from the others ("DiskFull instance=db1:9100").
	Alerts []string `json:"alerts"`
	// UserID and UserName are the chat user who acknowledged (ids are
	// what approver lists match; the name is for readers).
	UserID   string `json:"user_id"`
	UserName string `json:"user_name,omitempty"`
	// At is when the click was accepted.
	At time.Time `json:"at"`
	// PostID is the card's post.
	PostID string `json:"post_id,omitempty"`
}

// EvAlertSilence records a silence of an alert group in Alertmanager
// (AlertSilencePayload): created or expired after an approval, or what
// Alertmanager answered when it refused. The approval itself is the
// approval_requested and approval_decision events before it, whose
// request id it carries.
const EvAlertSilence = "alert_silence"

// AlertSilencePayload is an EvAlertSilence's.
type AlertSilencePayload struct {
	GroupKey string `json:"group_key"`
	// Action is "created", "expired" or "failed".
	Action string `json:"action"`
	// RequestID is the approval request that allowed it.
	RequestID string `json:"request_id"`
	// SilenceID is Alertmanager's id of the silence.
	SilenceID string `json:"silence_id,omitempty"`
	// Matchers are the silence's label matchers, name="value".
	Matchers []string `json:"matchers,omitempty"`
	// StartsAt and EndsAt are the silence's; CreatedBy and Comment as
	// Alertmanager shows them.
	StartsAt  time.Time `json:"starts_at,omitzero"`
	EndsAt    time.Time `json:"ends_at,omitzero"`
	CreatedBy string    `json:"created_by,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	// By is who approved it (an actor).
	By string `json:"by,omitempty"`
	// Error is why it failed.
	Error string `json:"error,omitempty"`
}

// AlertPayload is one alert notification (an Alertmanager or Grafana
// webhook delivery) as the chain records it.
type AlertPayload struct {
	// GroupKey is the notifier's key of the alert group; one group is one
	// thread.
	GroupKey string `json:"group_key"`
	// Status is the group's status: "firing" or "resolved".
	Status   string `json:"status"`
	Receiver string `json:"receiver,omitempty"`
	// Route is the name of the configured route that matched.
	Route string `json:"route,omitempty"`
	// Delivery is the SHA-256 of the delivery's body (duplicates share it).
	Delivery string `json:"delivery"`
	// PostID is the thread's card (the root post).
	PostID string        `json:"post_id,omitempty"`
	Alerts []AlertRecord `json:"alerts"`
	// Truncated is how many alerts the notifier left out.
	Truncated int `json:"truncated,omitempty"`
	// Kind is "opened" (a new thread), "update" or "resolved".
	Kind string `json:"kind"`
	// GroupLabels are the labels the notifier grouped the alerts by
	// (Alertmanager's group_by): a silence of the group matches them.
	GroupLabels map[string]string `json:"group_labels,omitempty"`
}

// AlertRecord is one alert of a notification.
type AlertRecord struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"starts_at"`
	EndsAt       time.Time         `json:"ends_at,omitzero"`
	GeneratorURL string            `json:"generator_url,omitempty"`
	Fingerprint  string            `json:"fingerprint,omitempty"`
}

// AlertGroup is what the chain says of one alert group's thread.
type AlertGroup struct {
	Session string
	PostID  string
	Route   string
	Status  string
	// Opened is when the thread was opened (the first notification's
	// record), StartsAt the earliest startsAt of its alerts.
	Opened   time.Time
	StartsAt time.Time
	// Card is the last notification, for redrawing the card.
	Last AlertPayload
	// Ack is the group's acknowledgement, nil if nobody took it yet.
	Ack *AlertAckPayload
	// Silence is the group's silence created last, nil if none or it was
	// expired through thinbot.
	Silence *AlertSilencePayload
	// LookOffered: the group's card offers Run first look: its automatic
	// first look was skipped, or waits in the queue (or waited when the
	// daemon stopped, which drops the queue), and nobody has run it since
	// (its last NoteFirstLook in the thread).
	LookOffered bool
}

// AlertGroups reads every alert group's thread from the chain, and the
// deliveries recorded since `since` (for deduplication after a restart).
func AlertGroups(db *store.DB, since time.Time) (map[string]AlertGroup, []string, error) {
	groups := map[string]AlertGroup{}
	bySession := map[string]string{} // a thread's group key
	var deliveries []string
	for e, err := range db.All(1) {
		if err != nil {
			return nil, nil, fmt.Errorf("scan chain: %w", err)
		}
		if e.Type == EvNote {
			if k, ok := bySession[e.Session]; ok {
				var n NotePayload
				if json.Unmarshal(e.Payload, &n) == nil && n.Kind == NoteFirstLook {
					g := groups[k]
					// A look still queued when the daemon stopped was
					// dropped with its memory: as good as skipped.
					g.LookOffered = n.Detail == "skipped" || n.Detail == "queued"
					groups[k] = g
				}
			}
			continue
		}
		if e.Type == EvAlertSilence {
			var sp AlertSilencePayload
			if json.Unmarshal(e.Payload, &sp) == nil {
				if g, ok := groups[sp.GroupKey]; ok {
					switch sp.Action {
					case "created":
						g.Silence = &sp
					case "expired":
						g.Silence = nil
					}
					groups[sp.GroupKey] = g
				}
			}
			continue
		}
		if e.Type == EvAlertAck {
			var ack AlertAckPayload
			if json.Unmarshal(e.Payload, &ack) == nil {
				if g, ok := groups[ack.GroupKey]; ok && g.Ack == nil {
					g.Ack = &ack
					groups[ack.GroupKey] = g
				}
			}
			continue
		}
		if e.Type != EvAlert {
			continue
		}
		var p AlertPayload
		if json.Unmarshal(e.Payload, &p) != nil || p.GroupKey == "" {
			continue
		}
		if !e.Time.Before(since) {
			deliveries = append(deliveries, p.Delivery)
		}
		g, ok := groups[p.GroupKey]
		if !ok {
			g = AlertGroup{Session: e.Session, PostID: p.PostID, Route: p.Route, Opened: e.Time}
			bySession[e.Session] = p.GroupKey
		}
		g.Status, g.Last = p.Status, p
		for _, a := range p.Alerts {
			if !a.StartsAt.IsZero() && (g.StartsAt.IsZero() || a.StartsAt.Before(g.StartsAt)) {
				g.StartsAt = a.StartsAt
			}
		}
		groups[p.GroupKey] = g
	}
	return groups, deliveries, nil
}

// EvAlertCard records that a front end is about to post a new alert
// group's card (AlertCardPayload), before it posts it: the card carries
// the event's Mark where the platform keeps it unseen, so that when the
// card reached the chat but its EvAlert "opened" (which names the card's
// post as the thread) was never committed, because the daemon died in
// between or the chat's answer was lost, the group's next delivery finds
// the card by its mark and adopts it instead of posting a second one. It
// lives in AlertCardSession and never enters a projection.
const EvAlertCard = "alert_card"

// AlertCardSession is the session the EvAlertCard events are recorded in:
// the card's thread does not exist before the card is posted. Like the
// other "system:" sessions it has no user message and never becomes a
// chat thread.
const AlertCardSession = "system:alerts"

// AlertCardPayload is an EvAlertCard's: which group's card is posted
// where, and the mark it carries.
type AlertCardPayload struct {
	GroupKey string `json:"group_key"`
	// Route is the route that matched; Platform and Channel where the
	// card is posted (the route's then).
	Route    string `json:"route,omitempty"`
	Platform string `json:"platform"`
	Channel  string `json:"channel"`
	// Mark is a random value the card carries unseen (Mattermost post
	// props, Slack message metadata).
	Mark string `json:"mark"`
	// Delivery is the delivery's digest (AlertPayload.Delivery).
	Delivery string `json:"delivery,omitempty"`
}

// AlertCard is an EvAlertCard as the chain holds it: the payload and when
// it was committed, which is before the card was posted.
type AlertCard struct {
	AlertCardPayload
	At time.Time
}

// AlertCards reads the last EvAlertCard of each alert group from
// AlertCardSession (one session's index, not the chain). A group whose
// EvAlert "opened" is in the chain too (AlertGroups) has its card; one
// without is a card that may be in the chat with no thread recorded.
func AlertCards(db *store.DB) (map[string]AlertCard, error) {
	cards := map[string]AlertCard{}
	for e, err := range db.Events(AlertCardSession, 1) {
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", AlertCardSession, err)
		}
		var p AlertCardPayload
		if e.Type != EvAlertCard || json.Unmarshal(e.Payload, &p) != nil || p.GroupKey == "" {
			continue
		}
		cards[p.GroupKey] = AlertCard{AlertCardPayload: p, At: e.Time}
	}
	return cards, nil
}
