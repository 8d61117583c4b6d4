package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// Reminders remind and escalate an approval request nobody decides: at
// RemindAfter the thread mentions the request's approvers again, at
// EscalateAfter it mentions EscalateTo. Each is posted in the request's
// thread and recorded (agentcore.EvApprovalReminder); the request still
// expires as a deny at its timeout. A stage at or after the timeout, or
// zero, is off. The zero value reminds nobody.
type Reminders struct {
	RemindAfter   time.Duration
	EscalateAfter time.Duration
	// EscalateTo are the user ids an escalation mentions.
	EscalateTo []string
}

// The stages of a reminder, as recorded.
const (
	stageRemind   = "remind"
	stageEscalate = "escalate"
)

// timers returns the timers of the request asked at asked that expires
// after timeout; a stage that is off gets a timer that never fires.
func (r Reminders) timers(asked time.Time, timeout time.Duration, now time.Time) (remind, escalate *time.Timer) {
	at := func(after time.Duration, on bool) *time.Timer {
		if !on || after <= 0 || after >= timeout {
			t := time.NewTimer(time.Hour)
			t.Stop()
			return t
		}
		return time.NewTimer(asked.Add(after).Sub(now))
	}
	return at(r.RemindAfter, true), at(r.EscalateAfter, len(r.EscalateTo) > 0)
}

// remind posts a stage's reminder of req in its thread, if req is still
// open, and records it.
func (b *Bot) remind(ctx context.Context, req *request, stage string) {
	b.mu.Lock()
	open := b.pending[req.ap.RequestID] == req
	b.mu.Unlock()
	if !open {
		return
	}
	loc := b.zone(req.ch)
	waited := b.cfg.Now().Sub(req.expires.Add(-req.timeout))
	var mention []string
	var text strings.Builder
	switch stage {
	case stageRemind:
		mention = req.ch.Approvers
		fmt.Fprintf(&text, "⏰ **Reminder** — this request has waited %s for an approver:", roundDur(waited))
	default:
		mention = req.reminders.EscalateTo
		fmt.Fprintf(&text, "🚨 **Escalation** — nobody decided this request in %s:", roundDur(waited))
	}
	fmt.Fprintf(&text, " %s (request `%s`). It expires at %s, and then it is a deny.", textfmt.CodeSpan(req.ap.Command, 200),
		req.ap.RequestID, textfmt.Clock(req.expires, loc, "15:04"))
	if len(mention) == 0 && req.ch.AnyMember {
		text.WriteString(" Any member of this channel may decide it.")
	}
	id := b.post(ctx, req.th.t, Post{Text: text.String(), Mentions: mention})
	p := agentcore.ApprovalReminderPayload{RequestID: req.ap.RequestID, Stage: stage, Mentioned: mention, After: waited.Seconds(),
		Expires: req.expires.UTC(), PostID: id}
	if _, err := req.ch.Agent.NoteUnlocked(req.ap.Session, agentcore.EvApprovalReminder, "bot", p); err != nil {
		b.cfg.Metrics.error("store")
		b.log.Error("record approval reminder", "conv", req.ap.Session, "request", req.ap.RequestID, "err", err)
		return
	}
	b.log.Info("approval reminder", "conv", req.ap.Session, "request", req.ap.RequestID, "stage", stage)
}
