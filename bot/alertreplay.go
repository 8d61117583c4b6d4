package bot

import (
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// AlertReplay rebuilds an alert thread's posts from the chain's alert
// events as the receiver showed them live: the card (the thread's root
// post, redrawn by each delivery, acknowledgement and silence) and the line
// each later delivery posted. A front end that rebuilds threads from the
// chain (the web console after a restart) feeds it one thread's alert
// events in chain order. Location is the zone of the times in the texts
// (nil means UTC), the zone the receiver wrote them in. Not safe for
// concurrent use.
type AlertReplay struct {
	Location *time.Location

	g     agentcore.AlertGroup
	known bool
}

// Event returns the card after the delivery p, recorded at at, and the
// line that delivery posted in the thread ("" for the delivery that opened
// the thread). The chain keeps each alert but not the delivery's common
// labels and annotations: they are rebuilt as Alertmanager computes them,
// those all its alerts share (payloadWebhook).
func (r *AlertReplay) Event(p agentcore.AlertPayload, at time.Time) (card Post, line string) {
	wh := payloadWebhook(p)
	if !r.known || p.Kind == "opened" {
		r.known = true
		r.g = agentcore.AlertGroup{Status: p.Status, StartsAt: earliest(p.Alerts), Last: p}
		return cardPost(agentcore.AlertGroup{}, wh, p, at, time.Time{}, r.Location), ""
	}
	starts := r.g.StartsAt
	if e := earliest(p.Alerts); !e.IsZero() && (starts.IsZero() || e.Before(starts)) {
		starts = e
	}
	line = alertLine(r.g, wh, p, at, starts, r.Location)
	r.g.Status, r.g.Last, r.g.StartsAt = p.Status, p, starts
	return cardPost(r.g, wh, p, at, starts, r.Location), line
}

// Ack returns the card after the acknowledgement a, recorded at at; ok is
// false before the thread's first delivery, or for a second
// acknowledgement, which the receiver never records.
func (r *AlertReplay) Ack(a agentcore.AlertAckPayload, at time.Time) (card Post, ok bool) {
	if !r.known || r.g.Ack != nil {
		return Post{}, false
	}
	r.g.Ack = &a
	return r.redraw(at), true
}

// Silence returns the card after the silence record s, recorded at at.
func (r *AlertReplay) Silence(s agentcore.AlertSilencePayload, at time.Time) (card Post, ok bool) {
	if !r.known {
		return Post{}, false
	}
	switch s.Action {
	case "created":
		r.g.Silence = &s
	case "expired":
		r.g.Silence = nil
	}
	return r.redraw(at), true
}

// Look returns the line a NoteFirstLook posted (state: its Detail, text:
// its Text), and the card after it, at time at: a skipped or queued look
// puts Run first look on the card, any later state of the look takes it
// off, as agentcore.AlertGroups reads the notes.
func (r *AlertReplay) Look(state, text string, at time.Time) (line, card Post, redrawn bool) {
	line = Post{Text: text}
	if !r.known {
		return line, Post{}, false
	}
	r.g.LookOffered = state == lookSkipped || state == "queued"
	return line, r.redraw(at), true
}

func (r *AlertReplay) redraw(at time.Time) Post {
	return cardPost(r.g, payloadWebhook(r.g.Last), r.g.Last, at, r.g.StartsAt, r.Location)
}
