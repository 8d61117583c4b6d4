package agentcore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/store"
)

// OutputLines is how many lines of a command's output a timeline row
// keeps (TimelineRow.Output).
const OutputLines = 5

// Timeline is a session's timeline read from the chain: one row per event
// and what the rows add up to (the alerts' lives, the milestones, the first
// look's findings, the links). The Markdown (WriteTimeline) and the web
// console's pages render the same rows.
type Timeline struct {
	Session string
	Rows    []TimelineRow
	// Alerts are the alerts the session's notifications named, in the
	// order they first came.
	Alerts []*TimelineAlert
	// Milestones are the incident's steps that the chain shows, in time
	// order (ties in the order of MilestoneFired .. MilestoneResolved); a
	// step not reached is missing.
	Milestones []Milestone
	// Findings is the first look's final answer (the model's words), ""
	// when there was none.
	Findings string
	// Route names the alert route whose notifications the session holds.
	Route string
	// Links are the alerts' runbook, source and dashboard links, as the
	// alerting system sent them (not checked: a renderer must).
	Links []Link
}

// TimelineRow is one event of a timeline with what the events before it
// say about it. Payload is Decode's typed payload; it is nil for a type
// Decode does not know, and nil with Problem set for a payload that is
// capped or does not decode.
type TimelineRow struct {
	store.Event
	Payload any
	Problem string
	// Command is what a gate decision, an approval or a tool result is
	// about: the command, or "read_file PATH".
	Command string
	// Result is a tool result's outcome: "exit N", "timed out",
	// "interrupted", "not run" or "done".
	Result string
	// Detail is a tool result's status line, or why it did not run (its
	// content's first line without the "not run: " it starts with).
	Detail string
	// Output is the first lines of a command's output (at most
	// OutputLines, each on one line), as the chain holds them: masked.
	Output []string
	// FirstLook marks the first look's question (an alert route's
	// message); Findings marks the first look's final answer.
	FirstLook, Findings bool
	// Joined and Resolved are, for an alert notification, the alerts new
	// to the session (all of its first notification's, or those that
	// fired again) and those it reports resolved.
	Joined, Resolved []*TimelineAlert
	// Listed reports whether the timeline documents list the row; the
	// console's session page shows every row.
	Listed bool
}

// TimelineAlert is one alert of a session's notifications.
type TimelineAlert struct {
	// Name is its alertname label; Labels are its other labels but
	// severity, "k=v" sorted.
	Name   string
	Labels []string
	// StartsAt and EndsAt are the alerting system's own times (EndsAt is
	// zero while it fires).
	StartsAt, EndsAt time.Time
	// Seen is when the first notification naming it was recorded,
	// ResolvedSeen when the one saying it resolved was (zero while it
	// fires).
	Seen, ResolvedSeen time.Time
	// Joined reports that it came after the session's first notification.
	Joined bool
}

// Link is a named link of a timeline.
type Link struct{ Name, URL string }

// Milestone is an incident step the chain shows: when, from which event,
// and a note on what it was ("the alerts' startsAt", who), Markdown whose
// text from the chain is in code spans.
type Milestone struct {
	Name string
	At   time.Time
	Seq  uint64
	Note string
}

// The milestones of an incident, in their order.
const (
	MilestoneFired        = "fired"        // the earliest startsAt of the alerts
	MilestoneCard         = "card"         // the first notification was recorded (the card posted)
	MilestoneFirstLook    = "first look"   // the first look answered
	MilestoneAcknowledged = "acknowledged" // a person took the incident (the card's Acknowledge)
	MilestoneFirstHuman   = "first human"  // a person first wrote, acknowledged or decided in the session
	MilestoneApproval     = "approval"     // the first approved command
	MilestoneResolved     = "resolved"     // the group resolved: its alerts' latest endsAt
)

var milestoneOrder = []string{MilestoneFired, MilestoneCard, MilestoneFirstLook, MilestoneAcknowledged, MilestoneFirstHuman, MilestoneApproval, MilestoneResolved}

// unlisted are the event types the timeline documents leave out: the
// machinery of a run. A type not here is listed, one Decode does not know
// in a generic line, so that a newer kind shows without a renderer's help.
var unlisted = map[string]bool{EvSystemPrompt: true, EvRunStarted: true, EvProtocolSwitch: true, EvMemory: true,
	EvSkillFiltered: true, EvSkillOpened: true, EvChainVerified: true, EvConfigReloaded: true, EvConfigReloadRefused: true}

// ReadTimeline reads the timeline of session from its events, in chain
// order. It returns the first error events yields.
func ReadTimeline(session string, events iter.Seq2[store.Event, error]) (*Timeline, error) {
	tl := &Timeline{Session: session}
	b := timelineBuilder{tl: tl, calls: map[string]string{}, requests: map[string]string{}, alerts: map[string]*TimelineAlert{},
		reached: map[string]Milestone{}}
	for e, err := range events {
		if err != nil {
			return nil, fmt.Errorf("timeline of %s: %w", session, err)
		}
		tl.Rows = append(tl.Rows, b.row(e))
	}
	for _, name := range milestoneOrder {
		if m, ok := b.reached[name]; ok {
			tl.Milestones = append(tl.Milestones, m)
		}
	}
	// In time order, so that each step's duration is from the one before
	// (a person may write before the first look answers).
	slices.SortStableFunc(tl.Milestones, func(x, y Milestone) int { return x.At.Compare(y.At) })
	return tl, nil
}

// Milestone returns the named milestone and whether the chain shows it.
func (tl *Timeline) Milestone(name string) (Milestone, bool) {
	for _, m := range tl.Milestones {
		if m.Name == name {
			return m, true
		}
	}
	return Milestone{}, false
}

type timelineBuilder struct {
	tl       *Timeline
	calls    map[string]string // call id -> command, for results
	requests map[string]string // request id -> command, for decisions
	alerts   map[string]*TimelineAlert
	reached  map[string]Milestone
	// inLook is set from the first look's question until its answer or
	// a person's message.
	inLook, looked bool
}

func (b *timelineBuilder) reach(name string, e store.Event, at time.Time, note string) {
	if _, ok := b.reached[name]; !ok && !at.IsZero() {
		b.reached[name] = Milestone{Name: name, At: at, Seq: e.Seq, Note: note}
	}
}

func (b *timelineBuilder) row(e store.Event) TimelineRow {
	r := TimelineRow{Event: e, Listed: !unlisted[e.Type]}
	if c, ok := store.Capped(e.Payload); ok {
		r.Problem = fmt.Sprintf("payload capped: %d bytes, sha256 %.12s…", c.Size, c.SHA256)
		return r
	}
	p, err := Decode(e)
	if err != nil {
		r.Problem = err.Error()
		return r
	}
	r.Payload = p
	if strings.HasPrefix(e.Actor, "user:") && e.Type != EvNote {
		b.reach(MilestoneFirstHuman, e, e.Time, textfmt.CodeSpan(who(e.Actor), 80))
	}
	switch p := p.(type) {
	case *AlertPayload:
		b.alert(&r, p)
	case *UserMessagePayload:
		if strings.HasPrefix(e.Actor, "alert:") && !b.looked {
			r.FirstLook, b.inLook, b.looked = true, true, true
		} else if !strings.HasPrefix(e.Actor, "alert:") {
			b.inLook = false
		}
	case *GatePayload:
		r.Command = p.what()
		b.calls[p.CallID] = r.Command
	case *ApprovalAskedPayload:
		r.Command = p.Command
		b.requests[p.RequestID] = p.Command
	case *AlertAckPayload:
		b.reach(MilestoneAcknowledged, e, e.Time, textfmt.CodeSpan(who(e.Actor), 80))
	case *ApprovalReminderPayload:
		r.Command = b.requests[p.RequestID]
	case *ApprovalDecidedPayload:
		r.Command = b.requests[p.RequestID]
		if p.Approved {
			b.reach(MilestoneApproval, e, e.Time, textfmt.CodeSpan(who(p.By), 80)+" approved "+textfmt.CodeSpan(r.Command, 80))
		}
	case *ToolResultPayload:
		r.Listed = r.Listed && p.Tool != ToolSkill
		r.Command, r.Result = b.calls[p.CallID], p.Outcome()
		status, rest, _ := strings.Cut(p.Content, "\n")
		switch {
		case r.Result == "not run":
			r.Detail = strings.TrimPrefix(firstLine(p.Content), "not run: ")
		case p.ExitCode != nil || p.TimedOut || p.Cause != "":
			r.Detail, r.Output = status, headLines(rest, OutputLines, outputWidth)
		default:
			r.Output = headLines(p.Content, OutputLines, outputWidth)
		}
	case *AssistantPayload:
		r.Listed = r.Listed && len(p.ToolCalls) == 0 && strings.TrimSpace(p.Content) != ""
		if r.Listed && b.inLook {
			r.Findings, b.inLook, b.tl.Findings = true, false, strings.TrimSpace(p.Content)
			b.reach(MilestoneFirstLook, e, e.Time, "the first look's answer")
		}
	case *NotePayload:
		r.Listed = p.Kind == NoteClickRefused || p.Kind == NoteRunRefused || p.Kind == NoteIncidentSummary
	}
	return r
}

// alert notes an alert notification's news: the alerts that joined and
// those that resolved, the group's first card and its resolve.
func (b *timelineBuilder) alert(r *TimelineRow, p *AlertPayload) {
	first := len(b.alerts) == 0
	if b.tl.Route == "" {
		b.tl.Route = p.Route
	}
	var fired, ended time.Time
	for _, a := range p.Alerts {
		k := a.Fingerprint
		if k == "" {
			k = fmt.Sprint(a.Labels)
		}
		ta, ok := b.alerts[k]
		if !ok {
			ta = &TimelineAlert{Name: a.Labels["alertname"], StartsAt: a.StartsAt, Seen: r.Time, Joined: !first}
			for _, l := range slices.Sorted(maps.Keys(a.Labels)) {
				if l != "alertname" && l != "severity" {
					ta.Labels = append(ta.Labels, l+"="+a.Labels[l])
				}
			}
			b.alerts[k] = ta
			b.tl.Alerts = append(b.tl.Alerts, ta)
			r.Joined = append(r.Joined, ta)
			b.links(a)
		}
		switch {
		case a.Status == "resolved" && ta.ResolvedSeen.IsZero():
			ta.EndsAt, ta.ResolvedSeen = a.EndsAt, r.Time
			r.Resolved = append(r.Resolved, ta)
		case a.Status == "firing" && !ta.ResolvedSeen.IsZero():
			// It fired again: a new life, seen now.
			ta.StartsAt, ta.EndsAt, ta.ResolvedSeen, ta.Seen, ta.Joined = a.StartsAt, time.Time{}, time.Time{}, r.Time, true
			r.Joined = append(r.Joined, ta)
		}
		if !a.StartsAt.IsZero() && (fired.IsZero() || a.StartsAt.Before(fired)) {
			fired = a.StartsAt
		}
		if a.EndsAt.After(ended) {
			ended = a.EndsAt
		}
	}
	b.reach(MilestoneFired, r.Event, fired, "the alerts' startsAt")
	b.reach(MilestoneCard, r.Event, r.Time, "the first notification")
	if p.Status == "resolved" {
		if ended.IsZero() {
			b.reach(MilestoneResolved, r.Event, r.Time, "the resolved notification")
		} else {
			b.reach(MilestoneResolved, r.Event, ended, "the alerts' endsAt")
		}
	}
}

// links keeps the first runbook, source and dashboard link the alerts give.
func (b *timelineBuilder) links(a AlertRecord) {
	for _, l := range []Link{{"runbook", a.Annotations["runbook_url"]}, {"source", a.GeneratorURL}, {"dashboard", a.Annotations["dashboard_url"]}} {
		l.URL = strings.TrimSpace(l.URL)
		if l.URL != "" && !slices.ContainsFunc(b.tl.Links, func(k Link) bool { return k.Name == l.Name }) {
			b.tl.Links = append(b.tl.Links, l)
		}
	}
	slices.SortStableFunc(b.tl.Links, func(x, y Link) int { return linkRank(x.Name) - linkRank(y.Name) })
}

func linkRank(name string) int {
	return map[string]int{"runbook": 0, "source": 1, "dashboard": 2}[name]
}

// Outcome says how a tool call ended: "timed out", "interrupted" (the
// run's cancellation ended it), "exit N", "not run" (refused, or an
// error before it ran) or "done".
func (p *ToolResultPayload) Outcome() string {
	switch {
	case p.TimedOut:
		return "timed out"
	case p.Cause != "" && p.ExitCode != nil:
		return "interrupted"
	case p.ExitCode != nil:
		return fmt.Sprintf("exit %d", *p.ExitCode)
	case p.IsError:
		return "not run"
	}
	return "done"
}

// who is a person's name from an actor: "alice" of "user:U1 (alice)",
// the actor without "user:" when it names no one else.
func who(actor string) string {
	actor = strings.TrimPrefix(actor, "user:")
	if i := strings.LastIndex(actor, " ("); i > 0 && strings.HasSuffix(actor, ")") {
		return actor[i+2 : len(actor)-1]
	}
	return actor
}

// outputWidth is how many bytes of an output line a row keeps.
const outputWidth = 160

// headLines are the first n non-empty lines of s, then "…" if more
// follow: each cut to width bytes, its control characters (a terminal's
// escapes, a carriage return) made spaces, its indentation kept, so that
// columns (df, ps) still line up.
func headLines(s string, n, width int) []string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		l = strings.TrimRightFunc(strings.Map(func(r rune) rune {
			if r < ' ' && r != '\t' || r == 0x7f {
				return ' '
			}
			return r
		}, strings.ToValidUTF8(l, "?")), unicode.IsSpace)
		if l == "" {
			continue
		}
		if len(out) == n {
			out = append(out, "…")
			break
		}
		if h, rest := textfmt.Ends(l, width, 0); rest != "" || len(h) < len(l) {
			l = h + "…"
		}
		out = append(out, l)
	}
	return out
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

// Timeline writes the session's postmortem timeline in Markdown
// (WriteTimeline), with the whole chain's verification. It first syncs
// what a running turn appended buffered.
func (a *Agent) Timeline(ctx context.Context, session string, opt TimelineOptions) (string, error) {
	db := a.cfg.Store
	if err := db.Sync(); err != nil && !errors.Is(err, store.ErrReadOnly) {
		return "", fmt.Errorf("timeline of %s: %w", session, err)
	}
	rep, err := db.Verify(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("timeline of %s: verify: %w", session, err)
	}
	tl, err := ReadTimeline(session, db.Events(session, 1))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := WriteTimeline(&b, tl, rep, opt); err != nil {
		return "", err
	}
	return b.String(), nil
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
