package agentcore

import (
	"bufio"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/store"
)

// The parts of a timeline document (TimelineOptions.Part).
const (
	PartBoth       = ""           // the postmortem, then the verified appendix
	PartPostmortem = "postmortem" // the readable body: no sequence numbers or hashes
	PartAppendix   = "appendix"   // the verified appendix: one line per event with its seq and hash
)

// TimelineOptions shape a timeline document. The zero value is both parts
// in UTC, made now, without links to a console.
type TimelineOptions struct {
	// Part is PartBoth, PartPostmortem or PartAppendix.
	Part string
	// Summary, if set, is the model's own summary of the session, shown
	// under a heading of its own that marks it as the model's words.
	Summary string
	// Now is when the timeline was made; zero means time.Now.
	Now time.Time
	// Location is the time zone of the timeline's times; nil means UTC.
	// Outside UTC each day's heading names the zone's abbreviation and
	// offset, and a new heading starts where they change (daylight
	// saving), so that every line's time reads one way; the appendix's
	// lines keep their shape (time, seq, hash) for tools that parse them.
	Location *time.Location
	// Console is the web console's origin ("https://thinbot.example.org");
	// "" means the postmortem links no console page.
	Console string
}

// findingsLines and findingsWidth bound the first look's findings the
// postmortem quotes: lines, and bytes a line.
const findingsLines, findingsWidth = 20, 400

// WriteTimeline writes tl in Markdown with rep, the chain's verification:
// the postmortem (what happened, the alerts' own times, the durations
// between the milestones, the commands with the first lines of their
// output, the first look's findings, the links) and the verified appendix
// (one line per event with its sequence number and the first 12 hex
// digits of its hash, the chain's head and verification at its top), as
// opt.Part picks. Every text taken from an event (a message, a command,
// an alert's labels, output) is quoted in a code span on one line or in a
// fence it cannot close, so that the document's own lines cannot be
// forged by it.
func WriteTimeline(w io.Writer, tl *Timeline, rep store.Report, opt TimelineOptions) error {
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	if opt.Location == nil {
		opt.Location = time.UTC
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# Incident timeline: %s\n\n", textfmt.CodeSpan(tl.Session, 200))
	if opt.Part != PartAppendix {
		writePostmortem(bw, tl, opt)
	}
	if opt.Part == PartBoth {
		bw.WriteString("\n---\n\n## Verified appendix\n\n")
	}
	if opt.Part != PartPostmortem {
		writeAppendix(bw, tl, rep, opt)
	}
	return bw.Flush()
}

// days writes a day's heading before a line whose day (or zone, outside
// UTC) differs from the last line's.
type days struct {
	w   *bufio.Writer
	loc *time.Location
	day string
}

func (d *days) at(t time.Time) time.Time {
	at := t.In(d.loc)
	day := at.Format("**2006-01-02**")
	if d.loc != time.UTC {
		day += at.Format(" (MST, UTC-07:00)")
	}
	if day != d.day {
		fmt.Fprintf(d.w, "%s\n\n", day)
		d.day = day
	}
	return at
}

func zoneSentence(loc *time.Location) string {
	if loc == time.UTC {
		return "Times are UTC."
	}
	return fmt.Sprintf("Times are %s time (zone and offset in each day's heading).", textfmt.CodeSpan(loc.String(), 80))
}

func writePostmortem(w *bufio.Writer, tl *Timeline, opt TimelineOptions) {
	loc := opt.Location
	clock := func(t time.Time) string { return textfmt.Clock(t, loc, "2006-01-02 15:04:05") }
	fmt.Fprintf(w, "Session %s: `thinbot audit timeline %s` prints this document; the verified appendix ties each line to the hash-chained log. %s\n\n",
		textfmt.CodeSpan(tl.Session, 200), strings.ReplaceAll(textfmt.OneLine(tl.Session, 200), "`", "'"), zoneSentence(loc))
	var links []string
	for _, l := range tl.Links {
		links = append(links, mdLink(l.Name, l.URL))
	}
	if opt.Console != "" {
		if u := mdLink("console", strings.TrimRight(opt.Console, "/")+"/audit/session?id="+url.QueryEscape(tl.Session)); u != "" {
			links = append(links, u)
		}
	}
	if len(links) > 0 {
		fmt.Fprintf(w, "**Links:** %s\n\n", strings.Join(links, " · "))
	}
	if len(tl.Milestones) > 0 {
		w.WriteString("## Durations\n\n")
		var prev Milestone
		for i, m := range tl.Milestones {
			fmt.Fprintf(w, "- **%s** %s", m.Name, clock(m.At))
			if i > 0 {
				fmt.Fprintf(w, ", %s after %s", took(m.At.Sub(prev.At)), prev.Name)
			}
			fmt.Fprintf(w, " (%s)\n", m.Note)
			prev = m
		}
		fired, ok1 := tl.Milestone(MilestoneFired)
		resolved, ok2 := tl.Milestone(MilestoneResolved)
		if ok1 && ok2 {
			fmt.Fprintf(w, "- **total** fired to resolved: %s\n", took(resolved.At.Sub(fired.At)))
		}
		w.WriteString("\n")
	}
	if len(tl.Alerts) > 0 {
		w.WriteString("## Alerts\n\n")
		for _, a := range tl.Alerts {
			fmt.Fprintf(w, "- %s: ", alertName(a))
			if !a.StartsAt.IsZero() {
				fmt.Fprintf(w, "started %s, ", clock(a.StartsAt))
			}
			how := "notified"
			if a.Joined {
				how = "joined"
			}
			fmt.Fprintf(w, "%s %s", how, clock(a.Seen))
			switch {
			case a.ResolvedSeen.IsZero():
				w.WriteString(", still firing at the last notification")
			case a.EndsAt.IsZero():
				fmt.Fprintf(w, ", resolved (notified %s)", clock(a.ResolvedSeen))
			default:
				fmt.Fprintf(w, ", ended %s (notified %s)", clock(a.EndsAt), clock(a.ResolvedSeen))
			}
			w.WriteString("\n")
		}
		w.WriteString("\n")
	}
	if tl.Findings != "" {
		// As text in a fence: the first look ran with no one watching, so
		// its words (which an alert can steer) link and format nothing.
		w.WriteString("## First look findings (the model's words)\n")
		fence(w, headLines(tl.Findings, findingsLines, findingsWidth))
	}
	w.WriteString("## Timeline\n\n")
	d := &days{w: w, loc: loc}
	n := 0
	for _, r := range tl.Rows {
		text, output := bodyLine(r)
		if !r.Listed || text == "" {
			continue
		}
		fmt.Fprintf(w, "- %s %s\n", d.at(r.Time).Format("15:04:05"), text)
		if len(output) > 0 {
			fence(w, output)
		}
		n++
	}
	if n == 0 {
		w.WriteString("Nothing happened in this session yet.\n")
	}
	if opt.Summary != "" {
		w.WriteString("\n## The model's summary (the model's words, not evidence)\n\n")
		quote(w, opt.Summary)
	}
}

// quote writes s as a Markdown block quote.
func quote(w *bufio.Writer, s string) {
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		w.WriteString("> " + l + "\n")
	}
}

// fence writes lines in a fenced code block whose fence is longer than
// any run of backquotes in them, so that they cannot close it.
func fence(w *bufio.Writer, lines []string) {
	run, longest := 0, 2
	for _, l := range lines {
		for i := range len(l) {
			if l[i] == '`' {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		run = 0
	}
	f := strings.Repeat("`", longest+1)
	fmt.Fprintf(w, "\n%s\n%s\n%s\n\n", f, strings.Join(lines, "\n"), f)
}

// took is a duration as a postmortem gives it: to the millisecond under
// a second, to a tenth of a second under a minute, else to the second.
func took(d time.Duration) string {
	if d < 0 {
		return "-" + took(-d)
	}
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// mdLink is a Markdown link to an http(s) URL (textfmt.LinkURL); any
// other text is shown as text in a code span, so that it neither links
// nor formats.
func mdLink(name, raw string) string {
	if u := textfmt.LinkURL(raw); u != "" {
		return "[" + name + "](" + u + ")"
	}
	return name + " " + textfmt.CodeSpan(raw, 200)
}

func alertName(a *TimelineAlert) string {
	s := textfmt.CodeSpan(a.Name, 80)
	if len(a.Labels) > 0 {
		l := a.Labels
		if len(l) > 3 {
			l = append(l[:3:3], "…")
		}
		s += " " + textfmt.CodeSpan(strings.Join(l, " "), 160)
	}
	return s
}

func alertNames(as []*TimelineAlert) string {
	var s []string
	for i, a := range as {
		if i == 5 {
			s = append(s, fmt.Sprintf("and %d more", len(as)-5))
			break
		}
		s = append(s, alertName(a))
	}
	return strings.Join(s, ", ")
}

// bodyLine is a row's line in the postmortem ("" to leave it out) and the
// output lines shown under it.
func bodyLine(r TimelineRow) (string, []string) {
	name := textfmt.CodeSpan(who(r.Actor), 80)
	switch p := r.Payload.(type) {
	case *AlertPayload:
		what := map[string]string{"opened": "alert card posted", "update": "alert update", "resolved": "alert group resolved"}[p.Kind]
		if what == "" {
			what = "alert notification"
		}
		firing := 0
		for _, a := range p.Alerts {
			if a.Status == "firing" {
				firing++
			}
		}
		text := fmt.Sprintf("**%s** (%s), %d of %d alert(s) firing", what, textfmt.CodeSpan(p.Status, 20), firing, len(p.Alerts))
		if len(r.Joined) > 0 {
			if r.Joined[0].Joined {
				text += "; joined"
			}
			text += ": " + alertNames(r.Joined)
		}
		if len(r.Resolved) > 0 {
			text += "; resolved: " + alertNames(r.Resolved)
		}
		return text, nil
	case *UserMessagePayload:
		if r.FirstLook {
			return fmt.Sprintf("**first look** started (read-only), route %s", textfmt.CodeSpan(strings.TrimPrefix(r.Actor, "alert:"), 80)), nil
		}
		if strings.HasPrefix(r.Actor, "alert:") {
			return "", nil
		}
		return fmt.Sprintf("%s wrote: %s", name, textfmt.CodeSpan(p.Text, 200)), nil
	case *GatePayload:
		return "", nil // the result (or the approval) says it
	case *ApprovalAskedPayload:
		return fmt.Sprintf("**approval asked** for %s (requested by %s)", textfmt.CodeSpan(p.Command, 200), textfmt.CodeSpan(who(p.Requester), 80)), nil
	case *ApprovalDecidedPayload:
		text := fmt.Sprintf("**denied** by %s: %s", textfmt.CodeSpan(who(orSystem(p.By)), 80), textfmt.CodeSpan(r.Command, 200))
		if p.Approved {
			text = fmt.Sprintf("**approved** by %s: %s", textfmt.CodeSpan(who(p.By), 80), textfmt.CodeSpan(r.Command, 200))
		}
		if p.Why != "" {
			text += " (" + textfmt.CodeSpan(p.Why, 120) + ")"
		}
		return text, nil
	case *ToolResultPayload:
		text := fmt.Sprintf("%s: **%s**", textfmt.CodeSpan(r.Command, 160), r.Result)
		if p.DurationMS > 0 {
			text += ", " + took(time.Duration(p.DurationMS)*time.Millisecond)
		}
		if r.Result == "not run" || r.Result == "timed out" || r.Result == "interrupted" {
			text += ": " + textfmt.CodeSpan(r.Detail, 160)
		}
		return text, r.Output
	case *AlertAckPayload:
		return "**acknowledged** by " + name, nil
	case *ApprovalReminderPayload:
		return fmt.Sprintf("**%s** of the approval for %s, open %s, to %d user(s)", reminderStage(p.Stage), textfmt.CodeSpan(r.Command, 160),
			took(time.Duration(p.After*float64(time.Second))), len(p.Mentioned)), nil
	case *AssistantPayload:
		if r.Findings {
			return "**first look answered** (its findings are above)", nil
		}
		return "model answered: " + textfmt.CodeSpan(firstLine(p.Content), 160), nil
	case *RunPayload:
		switch {
		case p.Cause != "":
			return fmt.Sprintf("run ended (%s): %s", p.Status, stopLine(p.Cause, p.CauseBy)), nil
		case p.Status == StatusAnswered || p.Status == StatusDone:
			return "", nil // the answer says it
		case p.Detail != "":
			return fmt.Sprintf("run ended (%s): %s", p.Status, textfmt.CodeSpan(p.Detail, 160)), nil
		}
		return fmt.Sprintf("run ended (%s)", p.Status), nil
	case *NotePayload:
		if p.Kind == NoteIncidentSummary {
			return "", nil
		}
	}
	return appendixText(r), nil
}

func writeAppendix(w *bufio.Writer, tl *Timeline, rep store.Report, opt TimelineOptions) {
	if rep.OK {
		fmt.Fprintf(w, "**Chain verified:** %d events, head #%d `%s` (at %s).\n", rep.Events, rep.LastSeq, rep.LastHash, opt.Now.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "**CHAIN VERIFICATION FAILED** at #%d: %s. Good events up to #%d `%s`. Do not rely on the lines below without an auditor.\n",
			rep.BadSeq, textfmt.CodeSpan(rep.Problem, 300), rep.LastSeq, rep.LastHash)
	}
	w.WriteString(zoneSentence(opt.Location))
	w.WriteString(" Each line: time, the event's sequence number, the first 12 hex digits of its hash " +
		"(`thinbot audit export --session` shows the whole event).\n\n### Events\n\n")
	d := &days{w: w, loc: opt.Location}
	lines := 0
	for _, r := range tl.Rows {
		if !r.Listed {
			continue
		}
		text := appendixText(r)
		if text == "" {
			continue
		}
		fmt.Fprintf(w, "- %s #%d `%s` %s\n", d.at(r.Time).Format("15:04:05"), r.Seq, short(r.Hash), text)
		lines++
	}
	if lines == 0 {
		w.WriteString("No events in this session.\n")
	}
	fmt.Fprintf(w, "\n%d of the session's %d events listed.\n", lines, len(tl.Rows))
	if opt.Summary != "" && opt.Part == PartAppendix {
		w.WriteString("\n## The model's summary (the model's words, not evidence)\n\n")
		quote(w, opt.Summary)
	}
}

// appendixText is a row's text in the verified appendix: what the event
// records, with the hashes an approval binds.
func appendixText(r TimelineRow) string {
	if r.Problem != "" {
		return fmt.Sprintf("%s event: %s", textfmt.CodeSpan(r.Type, 60), textfmt.CodeSpan(r.Problem, 200))
	}
	switch p := r.Payload.(type) {
	case *AlertPayload:
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
		text += fmt.Sprintf(", %d of %d alert(s) firing", firing, len(p.Alerts))
		if len(r.Joined) > 0 && r.Joined[0].Joined {
			text += "; joined: " + alertNames(r.Joined)
		}
		if len(r.Resolved) > 0 {
			text += "; resolved: " + alertNames(r.Resolved)
		}
		return text
	case *UserMessagePayload:
		if r.FirstLook || strings.HasPrefix(r.Actor, "alert:") {
			return fmt.Sprintf("**first look** started by %s (read-only, the alert as its question)", textfmt.CodeSpan(r.Actor, 80))
		}
		return fmt.Sprintf("**message** from %s: %s", textfmt.CodeSpan(r.Actor, 80), textfmt.CodeSpan(p.Text, 200))
	case *GatePayload:
		target := ""
		if p.TargetCount > 0 {
			target = fmt.Sprintf(" on %d host(s)", p.TargetCount)
		}
		return fmt.Sprintf("**command** %s%s: verdict %s (%s), %s", textfmt.CodeSpan(r.Command, 200), target, p.Verdict, textfmt.CodeSpan(p.Rule, 60), p.Action)
	case *ApprovalAskedPayload:
		return fmt.Sprintf("**approval asked** %s for %s, requested by %s (sha256 %s)", p.RequestID, textfmt.CodeSpan(p.Command, 200), textfmt.CodeSpan(p.Requester, 80), short(p.SHA256))
	case *ApprovalDecidedPayload:
		verdict := "**denied**"
		if p.Approved {
			verdict = "**approved**"
		}
		text := fmt.Sprintf("%s %s: %s by %s", verdict, p.RequestID, textfmt.CodeSpan(r.Command, 200), textfmt.CodeSpan(orSystem(p.By), 80))
		if p.Why != "" {
			text += " (" + textfmt.CodeSpan(p.Why, 120) + ")"
		}
		return text + fmt.Sprintf(" (sha256 %s)", short(p.SHA256))
	case *ToolResultPayload:
		text := fmt.Sprintf("**result** of %s: %s", textfmt.CodeSpan(r.Command, 120), r.Result)
		if p.OutputSize > 0 {
			text += fmt.Sprintf(", %d bytes", p.OutputSize)
		}
		if p.DurationMS > 0 {
			text += fmt.Sprintf(", %d ms", p.DurationMS)
		}
		if r.Detail != "" {
			text += ": " + textfmt.CodeSpan(r.Detail, 120)
		}
		if len(r.Output) > 0 {
			text += "; output: " + textfmt.CodeSpan(r.Output[0], 120)
		}
		return text
	case *RunPayload:
		text := fmt.Sprintf("run finished: %s after %d step(s)", p.Status, p.Steps)
		if p.Cause != "" {
			text += ": " + stopLine(p.Cause, p.CauseBy)
		}
		return text
	case *AssistantPayload:
		if r.Findings {
			return fmt.Sprintf("first look answered (%d characters; the postmortem quotes its findings)", len(p.Content))
		}
		return fmt.Sprintf("model answered (%d characters; the answer is in the thread and the chain)", len(p.Content))
	case *AlertAckPayload:
		return "**acknowledged** by " + textfmt.CodeSpan(r.Actor, 80)
	case *AlertSilencePayload:
		text := fmt.Sprintf("**silence %s** in Alertmanager", textfmt.CodeSpan(p.Action, 20))
		if p.SilenceID != "" {
			text += " " + textfmt.CodeSpan(p.SilenceID, 60)
		}
		if !p.EndsAt.IsZero() && p.Action == "created" {
			text += " until " + p.EndsAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		text += ", request " + textfmt.CodeSpan(p.RequestID, 40)
		if p.Error != "" {
			text += ": " + textfmt.CodeSpan(p.Error, 200)
		}
		return text
	case *ApprovalReminderPayload:
		return fmt.Sprintf("**%s** of request %s after %s, to %d user(s)", reminderStage(p.Stage), textfmt.CodeSpan(p.RequestID, 40),
			time.Duration(p.After*float64(time.Second)).Round(time.Second), len(p.Mentioned))
	case *DatasourcePayload:
		return fmt.Sprintf("**datasource query** %s, %d ms", textfmt.CodeSpan(p.line(), 300), p.DurationMS)
	case *MCPCallPayload:
		text := fmt.Sprintf("**MCP call** %s in the %s tier, %d ms", textfmt.CodeSpan(p.Server+" "+p.Tool, 120), p.Tier, p.DurationMS)
		if p.Error != "" {
			return text + ": error: " + textfmt.CodeSpan(p.Error, 200)
		}
		return text + fmt.Sprintf(", %d bytes (sha256 %s)", p.ResultSize, short(p.ResultSHA))
	case *ClearPayload:
		return fmt.Sprintf("history cleared by %s (a new branch)", textfmt.CodeSpan(r.Actor, 80))
	case *CompactedPayload:
		return "conversation compacted"
	case *NotePayload:
		switch p.Kind {
		case NoteClickRefused:
			return fmt.Sprintf("**click refused**: %s (%s)", textfmt.CodeSpan(p.User+" "+p.Name, 80), textfmt.CodeSpan(p.Detail, 120))
		case NoteRunRefused:
			return fmt.Sprintf("**message not run** from %s: %s (%s)", textfmt.CodeSpan(r.Actor, 80), textfmt.CodeSpan(p.Text, 200), textfmt.CodeSpan(p.Detail, 200))
		case NoteIncidentSummary:
			return fmt.Sprintf("the model wrote a summary (%d characters; shown apart, as the model's words)", len(p.Detail))
		}
		return ""
	}
	// A type this renderer has no words for (a newer kind): its name and
	// who recorded it; the export has the rest.
	return fmt.Sprintf("**%s** by %s", strings.ReplaceAll(textfmt.OneLine(r.Type, 60), "`", "'"), textfmt.CodeSpan(r.Actor, 80))
}

// reminderStage names an approval reminder's stage.
func reminderStage(stage string) string {
	if stage == "escalate" {
		return "escalation"
	}
	return "reminder"
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
