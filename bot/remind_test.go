package bot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// TestApprovalReminders: a request nobody decides is reminded to its
// approvers, then escalated to the configured group, each a post in the
// thread that mentions them and an approval_reminder in the chain between
// the request and its decision; it still expires as a deny and nothing
// runs. A request decided before its reminders gets none.
func TestApprovalReminders(t *testing.T) {
	rem := Reminders{RemindAfter: 30 * time.Millisecond, EscalateAfter: 60 * time.Millisecond, EscalateTo: []string{"U7", "U8"}}
	r := newRig(t, cmdModel{cmd: "touch x"}, Channel{Approvers: []string{"U2"}}, Config{ApprovalTimeout: time.Second, Reminders: rem})
	r.say(alice, th1, "m1", "go", true)
	reminder := r.ad.waitPost(t, th1, contains("**Reminder**"))
	escalation := r.ad.waitPost(t, th1, contains("**Escalation**"))
	r.ad.waitPost(t, th1, contains("finished: not run"))
	if !slices.Equal(reminder.post.Mentions, []string{"U2"}) || !strings.Contains(reminder.post.Text, "`touch x`") {
		t.Errorf("reminder = %+v", reminder.post)
	}
	if !slices.Equal(escalation.post.Mentions, []string{"U7", "U8"}) || !strings.Contains(escalation.post.Text, "then it is a deny") {
		t.Errorf("escalation = %+v", escalation.post)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "x")); err == nil {
		t.Error("an escalated request ran without an approval")
	}
	var seq []string
	var reqID string
	for e, err := range r.db.Events(th1.Key(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		p, err := agentcore.Decode(e)
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *agentcore.ApprovalAskedPayload:
			reqID = p.RequestID
			seq = append(seq, "asked")
		case *agentcore.ApprovalReminderPayload:
			if p.RequestID != reqID || p.PostID == "" || p.After <= 0 || p.Expires.IsZero() {
				t.Errorf("reminder record = %+v (request %s)", p, reqID)
			}
			seq = append(seq, p.Stage+strings.Join(p.Mentioned, ","))
		case *agentcore.ApprovalDecidedPayload:
			seq = append(seq, "decided:"+p.By)
		}
	}
	if got := strings.Join(seq, " "); got != "asked remindU2 escalateU7,U8 decided:expiry" {
		t.Errorf("chain = %s", got)
	}

	// Decided at once: no reminder follows.
	r2 := newRig(t, cmdModel{cmd: "touch y"}, Channel{Approvers: []string{"U2"}}, Config{ApprovalTimeout: time.Second,
		Reminders: Reminders{RemindAfter: 200 * time.Millisecond}})
	r2.say(alice, th1, "m1", "go", true)
	req := r2.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	r2.b.HandleClick(r2.ctx, Click{Thread: th1, PostID: req.id, ActionID: ActionApprove, Value: req.post.Value, User: bob})
	r2.ad.waitPost(t, th1, contains("finished: exit code: 0"))
	r2.stop() // the run is over: its timers are stopped
	for _, p := range r2.ad.posts {
		if strings.Contains(p.post.Text, "Reminder") {
			t.Errorf("a decided request was reminded: %q", p.post.Text)
		}
	}
}

// TestRemindersFollowSetAccess: a config reload's reminders (SetAccess)
// apply to the requests asked after it.
func TestRemindersFollowSetAccess(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "touch z"}, Channel{Approvers: []string{"U2"}}, Config{ApprovalTimeout: time.Second})
	r.b.SetAccess(Access{ApprovalTimeout: time.Second, Reminders: Reminders{RemindAfter: 20 * time.Millisecond}})
	r.say(alice, th1, "m1", "go", true)
	p := r.ad.waitPost(t, th1, contains("**Reminder**"))
	if len(p.post.Mentions) != 1 || p.post.Mentions[0] != "U2" {
		t.Errorf("reminder after SetAccess = %+v", p.post)
	}
}
