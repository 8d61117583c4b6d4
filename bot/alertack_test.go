package bot

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// sessionEvents returns the decoded payloads of a session's events of type
// typ.
func sessionEvents[T any](t *testing.T, db *store.DB, session, typ string) []*T {
	t.Helper()
	var out []*T
	for e, err := range db.Events(session, 1) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type != typ {
			continue
		}
		p, err := agentcore.Decode(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.(*T))
	}
	return out
}

// TestAlertAcknowledge: a firing group's card has an Acknowledge button;
// a user who is neither an approver of the channel nor one of the route's
// acknowledgers is refused (and the refusal recorded); an approver's press
// is recorded in the chain (group, alerts, user, time) before the card
// shows it in place of the button, once; a later notification keeps it,
// and so does a restart. A route's acknowledger who approves nothing may
// acknowledge too.
func TestAlertAcknowledge(t *testing.T) {
	carol := User{ID: "U4", Name: "carol"}
	r := newRig(t, cmdModel{cmd: "true"}, Channel{Approvers: []string{"U2"}}, Config{})
	routes := []AlertRoute{{Name: "ops", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}, Acknowledgers: []string{"U4"}}}
	h := r.alerts(t, AlertsConfig{Routes: routes})
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
		t.Fatalf("deliver: %d %s", w.Code, w.Body)
	}
	card := r.ad.rootPosts()[0]
	th := Thread{Platform: "fake", Channel: "C1", Root: card.id}
	if len(card.post.Buttons) != 1 || card.post.Buttons[0].ID != ActionAck || card.post.Value != ackValue("g1") {
		t.Fatalf("card buttons = %+v, value %q", card.post.Buttons, card.post.Value)
	}
	click := func(u User, th Thread) ClickResult {
		return r.b.HandleClick(r.ctx, Click{Thread: th, PostID: th.Root, ActionID: ActionAck, Value: card.post.Value, User: u})
	}

	res := click(eve, th)
	if res.Update != nil || !strings.Contains(res.Ephemeral, "cannot acknowledge") {
		t.Fatalf("eve's press = %+v", res)
	}
	if acks := sessionEvents[agentcore.AlertAckPayload](t, r.db, th.Key(), agentcore.EvAlertAck); len(acks) != 0 {
		t.Fatalf("eve's press was recorded as an acknowledgement: %+v", acks[0])
	}
	notes := sessionEvents[agentcore.NotePayload](t, r.db, th.Key(), agentcore.EvNote)
	if len(notes) != 1 || notes[0].Kind != agentcore.NoteClickRefused || notes[0].User != "U3" {
		t.Fatalf("refusal notes = %+v", notes)
	}
	// The button's value pressed in another thread is no card of this group.
	if res := click(bob, Thread{Platform: "fake", Channel: "C1", Root: "R9"}); res.Update != nil {
		t.Fatalf("a press in another thread = %+v", res)
	}

	res = click(bob, th)
	if res.Update == nil || !strings.Contains(res.Update.Text, "**Acknowledged** by @bob at ") || len(res.Update.Buttons) != 0 {
		t.Fatalf("bob's press = %+v", res)
	}
	acks := sessionEvents[agentcore.AlertAckPayload](t, r.db, th.Key(), agentcore.EvAlertAck)
	if len(acks) != 1 || acks[0].GroupKey != "g1" || acks[0].UserID != "U2" || acks[0].UserName != "bob" || acks[0].At.IsZero() ||
		len(acks[0].Alerts) != 1 || acks[0].Alerts[0] != "DiskFull instance=db1:9100" || acks[0].PostID != card.id {
		t.Fatalf("acknowledgements = %+v", acks)
	}
	if res := click(carol, th); res.Update != nil || !strings.Contains(res.Ephemeral, "@bob acknowledged this") {
		t.Fatalf("a second press = %+v", res)
	}

	// A later notification redraws the card with the acknowledgement.
	two := diskAlert("firing")
	two.Fingerprint, two.Labels = "f2", map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": "db2:9100"}
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"), two)); w.Code != http.StatusOK {
		t.Fatalf("update: %d %s", w.Code, w.Body)
	}
	r.ad.waitPost(t, th, contains("joined"))
	card = r.ad.rootPosts()[0]
	if !strings.Contains(card.post.Text, "**Acknowledged** by @bob") || len(card.post.Buttons) != 0 {
		t.Fatalf("card after an update = %+v", card.post)
	}

	// A route's acknowledger who is no approver may take another group.
	if w := deliver(h, testAlertToken, alertBody("g2", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
		t.Fatalf("deliver g2: %d %s", w.Code, w.Body)
	}
	card2 := r.ad.rootPosts()[1]
	th2 := Thread{Platform: "fake", Channel: "C1", Root: card2.id}
	res = r.b.HandleClick(r.ctx, Click{Thread: th2, PostID: card2.id, ActionID: ActionAck, Value: card2.post.Value, User: carol})
	if res.Update == nil || !strings.Contains(res.Update.Text, "by @carol") {
		t.Fatalf("carol's press = %+v", res)
	}

	groups, _, err := agentcore.AlertGroups(r.db, time.Now().Add(-time.Hour))
	if err != nil || groups["g1"].Ack == nil || groups["g1"].Ack.UserID != "U2" || groups["g2"].Ack == nil || groups["g2"].Ack.UserID != "U4" {
		t.Fatalf("AlertGroups after the presses = %+v, %v", groups, err)
	}
}
