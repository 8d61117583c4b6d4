package agentcore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/store"
)

// TimelineOptions shape a postmortem timeline.
type TimelineOptions struct {
	// Summary, if set, is the model's own summary of the session, shown
	// under a heading of its own that marks it as the model's words.
	Summary string
	// Now is when the timeline was made; zero means time.Now.
	Now time.Time
	// Location is the time zone of the timeline's times; nil means UTC.
	// Outside UTC each day's heading names the zone's abbreviation and
	// offset, and a new heading starts where they change (daylight
	// saving), so that every line's time reads one way; the lines keep
	// their shape (time, seq, hash) for tools that parse them.
	Location *time.Location
}

// Timeline writes the session's postmortem timeline in Markdown: the whole
// chain's verification and head at the top, then one line per human
// message, alert, command with its verdict, approval and result, each with
// its time, sequence number and the first 12 hex digits of its hash. It
// first syncs what a running turn appended buffered.
func (a *Agent) Timeline(ctx context.Context, session string, opt TimelineOptions) (string, error) {
	db := a.cfg.Store
	if err := db.Sync(); err != nil && !errors.Is(err, store.ErrReadOnly) {
		return "", fmt.Errorf("timeline of %s: %w", session, err)
	}
	rep, err := db.Verify(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("timeline of %s: verify: %w", session, err)
	}
	var b strings.Builder
	if err := WriteTimeline(&b, session, db.Events(session, 1), rep, opt); err != nil {
		return "", err
	}
	return b.String(), nil
}

// WriteTimeline writes the timeline of session's events (in chain order)
// with rep, the chain's verification, at the top. Every text taken from
// an event (a message, a command, an alert's labels) is quoted in a code
// span on one line, so the timeline's own lines cannot be forged by it.
func WriteTimeline(w io.Writer, session string, events iter.Seq2[store.Event, error], rep store.Report, opt TimelineOptions) error {
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	loc := opt.Location
	if loc == nil {
		loc = time.UTC
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Incident timeline: %s\n\n", textfmt.CodeSpan(session, 200))
	if rep.OK {
		fmt.Fprintf(bw, "**Chain verified:** %d events, head #%d `%s` (at %s).\n", rep.Events, rep.LastSeq, rep.LastHash, opt.Now.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(bw, "**CHAIN VERIFICATION FAILED** at #%d: %s. Good events up to #%d `%s`. Do not rely on the lines below without an auditor.\n",
			rep.BadSeq, textfmt.CodeSpan(rep.Problem, 300), rep.LastSeq, rep.LastHash)
	}
	if loc == time.UTC {
		bw.WriteString("Times are UTC.")
	} else {
		fmt.Fprintf(bw, "Times are %s time (zone and offset in each day's heading).", textfmt.CodeSpan(loc.String(), 80))
	}
	bw.WriteString(" Each line: time, the event's sequence number, the first 12 hex digits of its hash " +
		"(`thinbot audit export --session` shows the whole event).\n\n## Events\n\n")
	t := &timeline{w: bw, loc: loc, calls: map[string]string{}, requests: map[string]string{}}
	n := 0
	for e, err := range events {
		if err != nil {
			return fmt.Errorf("timeline of %s: %w", session, err)
		}
		n++
		t.event(e)
	}
	if t.lines == 0 {
		bw.WriteString("No events in this session.\n")
	}
	fmt.Fprintf(bw, "\n%d of the session's %d events listed.\n", t.lines, n)
	if opt.Summary != "" {
		bw.WriteString("\n## The model's summary (the model's words, not evidence)\n\n")
		for _, l := range strings.Split(strings.TrimSpace(opt.Summary), "\n") {
			bw.WriteString("> " + l + "\n")
		}
	}
	return bw.Flush()
}

type timeline struct {
	w        *bufio.Writer
	loc      *time.Location
	day      string // the last day's heading
	lines    int
	calls    map[string]string // call id -> command, for results
	requests map[string]string // request id -> command, for decisions
}

func (t *timeline) line(e store.Event, text string) {
	at := e.Time.In(t.loc)
	day := at.Format("**2006-01-02**")
	if t.loc != time.UTC {
		day += at.Format(" (MST, UTC-07:00)")
	}
	if day != t.day {
		fmt.Fprintf(t.w, "%s\n\n", day)
		t.day = day
	}
	h := e.Hash
	if len(h) > 12 {
		h = h[:12]
	}
	fmt.Fprintf(t.w, "- %s #%d `%s` %s\n", at.Format("15:04:05"), e.Seq, h, text)
	t.lines++
}

func (t *timeline) event(e store.Event) {
	switch e.Type {
	case EvAlert:
		var p AlertPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		name, sev := "", ""
		firing := 0
		for _, a := range p.Alerts {
			if name == "" {
				name, sev = a.Labels["alertname"], a.Labels["severity"]
			}
			if a.Status == "firing" {
				firing++
			}
		}
		what := map[string]string{"opened": "alert opened this thread", "update": "alert notification", "resolved": "alert resolved"}[p.Kind]
		if what == "" {
			what = "alert"
		}
		text := fmt.Sprintf("**%s** (%s): %s", what, p.Status, textfmt.CodeSpan(name, 80))
		if sev != "" {
			text += " severity " + textfmt.CodeSpan(sev, 40)
		}
		t.line(e, text+fmt.Sprintf(", %d of %d alert(s) firing", firing, len(p.Alerts)))
	case EvAlertAck:
		var p AlertAckPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		t.line(e, "**acknowledged** by "+textfmt.CodeSpan(e.Actor, 80))
	case EvAlertSilence:
		var p AlertSilencePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		text := fmt.Sprintf("**silence %s** in Alertmanager", textfmt.CodeSpan(p.Action, 20))
		if p.SilenceID != "" {
			text += " " + textfmt.CodeSpan(p.SilenceID, 60)
		}
		if !p.EndsAt.IsZero() && p.Action == "created" {
			text += " until " + p.EndsAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		text += ", request `" + p.RequestID + "`"
		if p.Error != "" {
			text += ": " + textfmt.CodeSpan(p.Error, 200)
		}
		t.line(e, text)
	case EvApprovalReminder:
		var p ApprovalReminderPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		what := map[string]string{"remind": "reminder", "escalate": "escalation"}[p.Stage]
		if what == "" {
			what = "reminder"
		}
		t.line(e, fmt.Sprintf("**%s** of request `%s` after %s, to %d user(s)", what, p.RequestID,
			time.Duration(p.After*float64(time.Second)).Round(time.Second), len(p.Mentioned)))
	case EvUserMessage:
		var p UserMessagePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		if strings.HasPrefix(e.Actor, "alert:") {
			t.line(e, fmt.Sprintf("**first look** started by %s (read-only, the alert as its question)", textfmt.CodeSpan(e.Actor, 80)))
			return
		}
		t.line(e, fmt.Sprintf("**message** from %s: %s", textfmt.CodeSpan(e.Actor, 80), textfmt.CodeSpan(p.Text, 200)))
	case EvGateDecision:
		var p GatePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		what := p.what()
		t.calls[p.CallID] = what
		target := ""
		if p.TargetCount > 0 {
			target = fmt.Sprintf(" on %d host(s)", p.TargetCount)
		}
		t.line(e, fmt.Sprintf("**command** %s%s: verdict %s (%s), %s", textfmt.CodeSpan(what, 200), target, p.Verdict, textfmt.CodeSpan(p.Rule, 60), p.Action))
	case EvApprovalAsked:
		var p ApprovalAskedPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		t.requests[p.RequestID] = p.Command
		t.line(e, fmt.Sprintf("**approval asked** %s for %s, requested by %s (sha256 %s)", p.RequestID, textfmt.CodeSpan(p.Command, 200), textfmt.CodeSpan(p.Requester, 80), short(p.SHA256)))
	case EvApprovalDecided:
		var p ApprovalDecidedPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		verdict := "**denied**"
		if p.Approved {
			verdict = "**approved**"
		}
		text := fmt.Sprintf("%s %s: %s by %s", verdict, p.RequestID, textfmt.CodeSpan(t.requests[p.RequestID], 200), textfmt.CodeSpan(orSystem(p.By), 80))
		if p.Why != "" {
			text += " (" + textfmt.CodeSpan(p.Why, 120) + ")"
		}
		t.line(e, text+fmt.Sprintf(" (sha256 %s)", short(p.SHA256)))
	case EvToolResult:
		var p ToolResultPayload
		if json.Unmarshal(e.Payload, &p) != nil || p.Tool == ToolSkill {
			return
		}
		res := "done"
		switch {
		case p.TimedOut:
			res = "timed out"
		case p.Cause != "":
			res = "interrupted"
		case p.ExitCode != nil:
			res = fmt.Sprintf("exit %d", *p.ExitCode)
		case p.IsError:
			res = "not run"
		}
		text := fmt.Sprintf("**result** of %s: %s", textfmt.CodeSpan(t.calls[p.CallID], 120), res)
		if p.OutputSize > 0 {
			text += fmt.Sprintf(", %d bytes", p.OutputSize)
		}
		if p.DurationMS > 0 {
			text += fmt.Sprintf(", %d ms", p.DurationMS)
		}
		if first := firstLine(p.Content); first != "" {
			text += ": " + textfmt.CodeSpan(first, 120)
		}
		t.line(e, text)
	case EvRunFinished:
		var p RunPayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		text := fmt.Sprintf("run finished: %s after %d step(s)", p.Status, p.Steps)
		if p.Cause != "" {
			text += ": " + stopLine(p.Cause, p.CauseBy)
		}
		t.line(e, text)
	case EvAssistantMessage:
		var p AssistantPayload
		if json.Unmarshal(e.Payload, &p) != nil || len(p.ToolCalls) > 0 || strings.TrimSpace(p.Content) == "" {
			return
		}
		t.line(e, fmt.Sprintf("model answered (%d characters; the answer is in the thread and the chain)", len(p.Content)))
	case EvClear:
		t.line(e, fmt.Sprintf("history cleared by %s (a new branch)", textfmt.CodeSpan(e.Actor, 80)))
	case EvCompacted:
		t.line(e, "conversation compacted")
	case EvNote:
		var p NotePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			return
		}
		switch p.Kind {
		case NoteClickRefused:
			t.line(e, fmt.Sprintf("**click refused**: %s (%s)", textfmt.CodeSpan(p.User+" "+p.Name, 80), textfmt.CodeSpan(p.Detail, 120)))
		case NoteRunRefused:
			t.line(e, fmt.Sprintf("**message not run** from %s: %s (%s)", textfmt.CodeSpan(e.Actor, 80), textfmt.CodeSpan(p.Text, 200), textfmt.CodeSpan(p.Detail, 200)))
		case NoteIncidentSummary:
			t.line(e, fmt.Sprintf("the model wrote a summary (%d characters; shown apart, as the model's words)", len(p.Detail)))
		}
	}
}

// stopLine says why a run stopped, from run_finished's cause and cause_by,
// the who or what (untrusted: a chat name) in a code span.
func stopLine(kind, by string) string {
	switch kind {
	case StopShutdown:
		return "**thinbot shut down** (" + textfmt.CodeSpan(by, 40) + ")"
	case StopUser:
		return "**stopped** by " + textfmt.CodeSpan(by, 80)
	case StopBudget:
		return "**budget ran out** (" + textfmt.CodeSpan(by, 80) + ")"
	}
	return textfmt.CodeSpan(kind, 40) + " " + textfmt.CodeSpan(by, 80)
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// firstLine is the first non-empty line of s.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// NoteIncidentSummary marks a note holding the model's summary of a
// session for its timeline (Detail).
const NoteIncidentSummary = "incident_summary"

const incidentSummaryPrompt = `Write a short postmortem summary of this incident from the conversation above: what alerted or was asked, what was checked and found, what was changed and by whose approval, how it ended, and what is still open. Plain text, at most 200 words. Say only what the conversation shows.`

// IncidentSummary asks the model for a summary of the session for its
// timeline and records it in the chain (a NoteIncidentSummary note); the
// timeline shows it apart, as the model's words.
func (a *Agent) IncidentSummary(ctx context.Context, session string) (string, error) {
	s := a.session(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(session, s); err != nil {
		return "", err
	}
	msgs := s.proj.Messages()
	if len(msgs) < 2 {
		return "", errors.New("nothing to summarise yet")
	}
	req := append(msgs[:len(msgs):len(msgs)], Message{Role: RoleUser, Content: incidentSummaryPrompt})
	limit := int(0.9 * float64(a.window()))
	for EstimateTokens(req) > limit && len(req) > 3 {
		req = append(req[:1:1], req[2:]...)
		for len(req) > 2 && req[1].Role == RoleTool {
			req = append(req[:1:1], req[2:]...)
		}
	}
	resp, err := a.cfg.Model.Complete(ctx, Request{Messages: req})
	if err != nil {
		return "", fmt.Errorf("%w: incident summary: %w", ErrModel, err)
	}
	summary := strings.TrimSpace(resp.Content)
	if summary == "" {
		return "", errors.New("incident summary: the model returned an empty summary")
	}
	if _, err := a.commit(session, s, durable, []store.Event{{Type: EvNote, Actor: "model", Payload: mustJSON(NotePayload{
		Kind: NoteIncidentSummary, Detail: summary})}}); err != nil {
		return "", err
	}
	return a.scrub.scrub(summary), nil
}
