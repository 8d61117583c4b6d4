package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// ActionAck is the button id of an alert card's Acknowledge.
const ActionAck = "ack"

// Acknowledging: the card of a firing group carries an Acknowledge button.
// The first authorised press records who took the incident and when
// (agentcore.EvAlertAck) and redraws the card in place with their name
// instead of the button. Who may press it: the users the route lists in
// Acknowledgers, and whoever may approve in the route's channel (its
// approvers, or its members with AnyMember). A refused press is recorded
// as a refused click, as an approval's is.

// ackValue is the value an Acknowledge button carries: a digest of the
// group key (a key may be 4 KiB; button values are short), bound to the
// card's thread when pressed.
func ackValue(groupKey string) string {
	sum := sha256.Sum256([]byte(groupKey))
	return "alert:" + hex.EncodeToString(sum[:12])
}

// cardPost is a group's card: the text alertCard draws for the last
// notification, who acknowledged it, and the Acknowledge button while the
// group fires and nobody took it.
func cardPost(g agentcore.AlertGroup, wh Webhook, p agentcore.AlertPayload, now, starts time.Time, loc *time.Location) Post {
	text := alertCard(wh, p, now, starts, loc)
	var lines []string
	if g.Ack != nil {
		lines = append(lines, "**Acknowledged** by @"+textfmt.OneLine(cmpName(g.Ack.UserName, g.Ack.UserID), 80)+" at "+textfmt.Clock(g.Ack.At, loc, "2006-01-02 15:04:05"))
	}
	if g.Silence != nil {
		lines = append(lines, silenceLine(g.Silence, loc))
	}
	if len(lines) > 0 {
		add := strings.Join(lines, "\n")
		// Above the card's last line, its note on alert text.
		if i := strings.LastIndexByte(text, '\n'); i >= 0 {
			text = text[:i+1] + add + "\n" + text[i+1:]
		} else {
			text += "\n" + add
		}
	}
	post := Post{Text: text}
	if wh.Status == "firing" && g.Ack == nil {
		post.Buttons = []Button{{ID: ActionAck, Label: "Acknowledge", Style: "primary"}}
		post.Value = ackValue(wh.GroupKey)
	}
	if wh.Status == "firing" && g.LookOffered {
		// Its automatic first look was skipped or waits in a storm's
		// queue (alertinvestigate.go).
		post.Buttons = append(post.Buttons, Button{ID: ActionFirstLook, Label: "Run first look"})
		post.Value = ackValue(wh.GroupKey)
	}
	return quiet(post)
}

func cmpName(name, id string) string {
	if name != "" {
		return name
	}
	return id
}

// payloadWebhook is the notification a payload records, as alertCard
// reads it: the common labels and annotations are those every alert
// shares, as Alertmanager computes them.
func payloadWebhook(p agentcore.AlertPayload) Webhook {
	wh := Webhook{GroupKey: p.GroupKey, Status: p.Status, Receiver: p.Receiver, TruncatedAlerts: p.Truncated,
		CommonLabels: sharedLabels(p.Alerts), CommonAnnotations: map[string]string{}}
	for i, r := range p.Alerts {
		wh.Alerts = append(wh.Alerts, WebhookAlert{Status: r.Status, Labels: r.Labels, Annotations: r.Annotations,
			StartsAt: r.StartsAt, EndsAt: r.EndsAt, GeneratorURL: r.GeneratorURL, Fingerprint: r.Fingerprint})
		if i == 0 {
			for k, v := range r.Annotations {
				wh.CommonAnnotations[k] = v
			}
			continue
		}
		for k, v := range wh.CommonAnnotations {
			if r.Annotations[k] != v {
				delete(wh.CommonAnnotations, k)
			}
		}
	}
	return wh
}

// ackNames names a group's alerts for the acknowledgement's record.
func ackNames(rs []agentcore.AlertRecord) []string {
	shared := sharedLabels(rs)
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		name := r.Labels["alertname"]
		if n := strings.Trim(alertName(r, shared), "`"); n != name && n != "-" {
			name = strings.TrimSpace(name + " " + n)
		}
		out = append(out, name)
		if len(out) == 50 {
			break
		}
	}
	return out
}

// acknowledge handles a press of a card's Acknowledge.
func (b *Bot) acknowledge(ctx context.Context, c Click) ClickResult {
	b.mu.Lock()
	a := b.alerts
	b.mu.Unlock()
	if a == nil {
		return ClickResult{Ephemeral: "This alert is not known (thinbot receives no alerts now). Nothing was changed."}
	}
	a.mu.Lock()
	key := a.ackKeys[c.Value]
	a.mu.Unlock()
	if key == "" {
		return ClickResult{Ephemeral: "This card's alert group is not known. Nothing was changed."}
	}
	// A press that races the card's record waits for the delivery, which
	// holds the group's lock.
	unlock := a.lock(key)
	defer unlock()
	a.mu.Lock()
	g, ok := a.groups[key]
	a.mu.Unlock()
	if !ok || g.Session != c.Thread.Key() || (c.PostID != "" && c.PostID != g.PostID) {
		return ClickResult{Ephemeral: "This card's alert group is not known. Nothing was changed."}
	}
	ch, ok := b.cfg.Channel(c.Thread.Channel)
	if !ok || ch.Agent == nil {
		return ClickResult{Ephemeral: "This channel is not configured. Nothing was changed."}
	}
	loc := b.zone(ch)
	if g.Ack != nil {
		return ClickResult{Ephemeral: "@" + cmpName(g.Ack.UserName, g.Ack.UserID) + " acknowledged this at " + textfmt.Clock(g.Ack.At, loc, "15:04") + ". Nothing was changed."}
	}
	if g.Status != "firing" {
		return ClickResult{Ephemeral: "This alert group is resolved. Nothing was changed."}
	}
	var acks []string
	for _, r := range a.cfg.Load().Routes {
		if r.Name == g.Route {
			acks = r.Acknowledgers
		}
	}
	if why := b.mayAcknowledge(ctx, ch, acks, c); why != "" {
		b.log.Warn("acknowledge refused", "conv", g.Session, "group", key, "user", c.User.ID, "name", c.User.Name, "why", why)
		if _, err := ch.Agent.NoteUnlocked(g.Session, agentcore.EvNote, actor(c.User), agentcore.NotePayload{
			Kind: agentcore.NoteClickRefused, User: c.User.ID, Detail: "acknowledge: " + why}); err != nil {
			b.log.Error("record refused click", "err", err)
		}
		return ClickResult{Ephemeral: "You cannot acknowledge this alert: " + why + ". Nothing was changed."}
	}
	ack := agentcore.AlertAckPayload{GroupKey: key, Alerts: ackNames(g.Last.Alerts), UserID: c.User.ID, UserName: c.User.Name,
		At: b.cfg.Now().UTC(), PostID: g.PostID}
	if _, err := ch.Agent.NoteUnlocked(g.Session, agentcore.EvAlertAck, actor(c.User), ack); err != nil {
		b.cfg.Metrics.error("store")
		b.log.Error("record acknowledgement", "conv", g.Session, "group", key, "err", err)
		return ClickResult{Ephemeral: "The acknowledgement could not be written to the audit log, so it was not taken; try again."}
	}
	g.Ack = &ack
	a.mu.Lock()
	a.groups[key] = g
	a.mu.Unlock()
	b.log.Info("alert acknowledged", "conv", g.Session, "group", key, "user", c.User.ID)
	post := cardPost(g, payloadWebhook(g.Last), g.Last, b.cfg.Now(), g.StartsAt, loc)
	return ClickResult{Update: &post}
}

// mayAcknowledge returns why c's user may not acknowledge an alert of ch,
// or "" if they may: they are listed in acks, or may approve in ch.
func (b *Bot) mayAcknowledge(ctx context.Context, ch Channel, acks []string, c Click) string {
	if c.User.ID != "" && (slices.Contains(acks, c.User.ID) || isApprover(ch.Approvers, c.User)) {
		return ""
	}
	if ch.AnyMember {
		ok, err := b.cfg.Adapter.IsMember(ctx, c.Thread.Channel, c.User.ID)
		if err != nil {
			b.log.Warn("check channel membership", "channel", c.Thread.Channel, "user", c.User.ID, "err", err)
			return "your channel membership could not be checked"
		}
		if ok {
			return ""
		}
		return "only members of this channel may acknowledge"
	}
	return "you are neither an approver of this channel nor one of the route's acknowledgers"
}
