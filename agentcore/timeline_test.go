package agentcore

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones without /usr/share/zoneinfo

	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// incident appends a session of n rounds (an alert, a message, a command
// with its approval and result, an answer) and returns the store.
func incident(tb testing.TB, rounds int) *store.DB {
	tb.Helper()
	db, err := store.Open(filepath.Join(tb.TempDir(), "events.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	const s = "mattermost/C1/R1"
	zero := 0
	var evs []store.Event
	add := func(typ, actor string, p any) {
		evs = append(evs, store.Event{Session: s, Type: typ, Actor: actor, Payload: mustJSON(p)})
	}
	for i := range rounds {
		add(EvAlert, "alert:ops", AlertPayload{GroupKey: "g", Status: "firing", Kind: "update", Delivery: fmt.Sprint(i),
			Alerts: []AlertRecord{{Status: "firing", Labels: map[string]string{"alertname": "Disk`Full\n- 00:00:00 #1 `forged`", "severity": "critical"}}}})
		add(EvUserMessage, "user:U1 (alice)", UserMessagePayload{Text: fmt.Sprintf("check disk %d", i)})
		call := fmt.Sprint("c", i)
		add(EvGateDecision, "gate", GatePayload{CallID: call, Tool: ToolRun, Command: "rm -f /var/tmp/big", Verdict: "confirm", Rule: "write", Action: "ask"})
		add(EvApprovalAsked, "gate", ApprovalAskedPayload{CallID: call, RequestID: "r" + call, Command: "rm -f /var/tmp/big", SHA256: strings.Repeat("ab", 32), Requester: "user:U1 (alice)"})
		add(EvApprovalDecided, "user:U2 (bob)", ApprovalDecidedPayload{CallID: call, RequestID: "r" + call, Approved: true, By: "user:U2 (bob)", SHA256: strings.Repeat("ab", 32)})
		add(EvToolResult, "tool", ToolResultPayload{CallID: call, Tool: ToolRun, Content: "exit code: 0\nremoved", ExitCode: &zero, OutputSize: 7, DurationMS: 3})
		add(EvAssistantMessage, "model", AssistantPayload{Content: "Freed 2 GB."})
		add(EvRunFinished, "system", RunPayload{Status: StatusAnswered, Steps: 1})
	}
	for len(evs) > 0 {
		n := min(len(evs), 512)
		if _, err := db.Append(context.Background(), evs[:n]...); err != nil {
			tb.Fatal(err)
		}
		evs = evs[n:]
	}
	return db
}

var lineRe = regexp.MustCompile("^- (\\d\\d:\\d\\d:\\d\\d) #(\\d+) `([0-9a-f]{12})` ")

func TestTimeline(t *testing.T) {
	db := incident(t, 2)
	ag, err := New(Config{Store: db, Model: noModel{}, Policy: gate.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ag.Timeline(t.Context(), "mattermost/C1/R1", TimelineOptions{Summary: "The disk filled.\n# Not a heading", Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	hashes := chainHashes(t, db)
	seq, head := db.LastSeq(), hashes[db.LastSeq()]
	if !strings.Contains(out, fmt.Sprintf("**Chain verified:** 16 events, head #%d `%s`", seq, head)) {
		t.Errorf("no verified head:\n%s", out)
	}
	_, appendix, ok := strings.Cut(out, "## Verified appendix")
	if !ok {
		t.Fatalf("no appendix:\n%s", out)
	}
	lines := appendixLines(t, appendix, hashes)
	if lines != 16 {
		t.Errorf("%d lines, want 16:\n%s", lines, out)
	}
	for _, want := range []string{"**approved** rc0: `rm -f /var/tmp/big` by `user:U2 (bob)`", "**message** from `user:U1 (alice)`: `check disk 0`",
		"verdict confirm (`write`), ask", "**result** of `rm -f /var/tmp/big`: exit 0, 7 bytes, 3 ms: `exit code: 0`; output: `removed`",
		"## The model's summary (the model's words, not evidence)\n\n> The disk filled.\n> # Not a heading",
		"`Disk'Full - 00:00:00 #1 'forged'`"} {
		if !strings.Contains(out, want) {
			t.Errorf("timeline lacks %q:\n%s", want, out)
		}
	}
}

// TestTimelineRefusedMessage: a message no run was started for (a token
// budget's refusal) is a line of the timeline, with its text and why.
func TestTimelineRefusedMessage(t *testing.T) {
	db := incident(t, 1)
	if _, err := db.Append(t.Context(), store.Event{Session: "mattermost/C1/R1", Type: EvNote, Actor: "user:U1 (alice)",
		Payload: mustJSON(NotePayload{Kind: NoteRunRefused, PostID: "p9", User: "U1", Name: "alice", Text: "and the load?", Detail: "Not started: this thread has used its budget"})}); err != nil {
		t.Fatal(err)
	}
	ag, err := New(Config{Store: db, Model: noModel{}, Policy: gate.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ag.Timeline(t.Context(), "mattermost/C1/R1", TimelineOptions{Now: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if want := "**message not run** from `user:U1 (alice)`: `and the load?` (`Not started: this thread has used its budget`)"; !strings.Contains(out, want) {
		t.Errorf("timeline lacks %q:\n%s", want, out)
	}
}

// BenchmarkTimeline10k is the timeline of a 10,000-event session (with
// the whole chain verified): go test -run XXX -bench Timeline10k ./agentcore/
func BenchmarkTimeline10k(b *testing.B) {
	db := incident(b, 1250)
	ag, err := New(Config{Store: db, Model: noModel{}, Policy: gate.DefaultPolicy()})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ag.Timeline(context.Background(), "mattermost/C1/R1", TimelineOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

type noModel struct{}

func (noModel) Complete(context.Context, Request) (Response, error) { return Response{}, nil }

// TestFileReadNamed: a read_file decision is named "read_file PATH" in
// /audit's rows and in the timeline, a command by the command itself.
func TestFileReadNamed(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const s = "web/C1/R1"
	var evs []store.Event
	for _, p := range []GatePayload{
		{CallID: "c1", Tool: ToolReadFile, Path: "/etc/hosts", Verdict: "pass", Rule: "read-only", Action: "run"},
		{CallID: "c2", Tool: ToolRun, Command: "uptime", Path: "/ignored", Verdict: "pass", Rule: "read-only", Action: "run"},
	} {
		evs = append(evs, store.Event{Session: s, Type: EvGateDecision, Actor: "gate", Payload: mustJSON(p)})
	}
	if _, err := db.Append(t.Context(), evs...); err != nil {
		t.Fatal(err)
	}
	ag, err := New(Config{Store: db, Model: noModel{}, Policy: gate.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ag.Audit(s, 10)
	if err != nil || len(rows) != 2 || rows[0].What != "read_file /etc/hosts" || rows[1].What != "uptime" {
		t.Fatalf("Audit = %+v, %v; want read_file /etc/hosts, then uptime", rows, err)
	}
	out, err := ag.Timeline(t.Context(), s, TimelineOptions{})
	if err != nil || !strings.Contains(out, "**command** `read_file /etc/hosts`: verdict pass") || !strings.Contains(out, "**command** `uptime`: verdict pass") {
		t.Fatalf("Timeline = %q, %v; want both named", out, err)
	}
}

// TestTimelineZone: TimelineOptions.Location sets the times; outside UTC
// each day's heading names the zone's abbreviation and offset, and a new
// heading starts where daylight saving changes them, so that New York's
// 01:30 of the fall-back night reads one way each time. UTC is as it was,
// and the verification's RFC 3339 stamp stays UTC in every zone.
func TestTimelineZone(t *testing.T) {
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	at := []time.Time{
		time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), // 01:30 EDT, 11:00 IST
		time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC), // 01:30 EST, 12:00 IST
		time.Date(2026, 11, 1, 20, 0, 0, 0, time.UTC), // 15:00 EST, 01:30 IST the next day
	}
	events := func(yield func(store.Event, error) bool) {
		for i, ts := range at {
			e := store.Event{Seq: uint64(i + 1), Time: ts, Session: "s", Type: EvUserMessage, Actor: "user:U1 (alice)",
				Hash: strings.Repeat(fmt.Sprint(i+1), 64), Payload: mustJSON(UserMessagePayload{Text: "hi"})}
			if !yield(e, nil) {
				return
			}
		}
	}
	rep := store.Report{OK: true, Events: 3, LastSeq: 3, LastHash: "h"}
	now := time.Date(2026, 11, 1, 21, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		loc           *time.Location
		verified, say string
		lines         []string
	}{
		{nil, "(at 2026-11-01T21:00:00Z)", "Times are UTC.", []string{
			"**2026-11-01**", "- 05:30:00 #1 `111111111111`", "- 06:30:00 #2 `222222222222`", "- 20:00:00 #3 `333333333333`"}},
		{zone("America/New_York"), "(at 2026-11-01T21:00:00Z)", "Times are `America/New_York` time", []string{
			"**2026-11-01** (EDT, UTC-04:00)", "- 01:30:00 #1 `111111111111`",
			"**2026-11-01** (EST, UTC-05:00)", "- 01:30:00 #2 `222222222222`", "- 15:00:00 #3 `333333333333`"}},
		{zone("Asia/Kolkata"), "(at 2026-11-01T21:00:00Z)", "Times are `Asia/Kolkata` time", []string{
			"**2026-11-01** (IST, UTC+05:30)", "- 11:00:00 #1 `111111111111`", "- 12:00:00 #2 `222222222222`",
			"**2026-11-02** (IST, UTC+05:30)", "- 01:30:00 #3 `333333333333`"}},
	} {
		tl, err := ReadTimeline("s", events)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WriteTimeline(&b, tl, rep, TimelineOptions{Now: now, Location: tc.loc, Part: PartAppendix}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		var got []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "**20") {
				got = append(got, l)
			} else if m := lineRe.FindString(l); m != "" {
				got = append(got, strings.TrimSuffix(m, " "))
			}
		}
		if strings.Join(got, "\n") != strings.Join(tc.lines, "\n") || !strings.Contains(out, tc.verified) || !strings.Contains(out, tc.say) {
			t.Errorf("timeline in %v: days and lines\n%s\nwant\n%s\nand %q, %q in:\n%s", tc.loc, strings.Join(got, "\n"), strings.Join(tc.lines, "\n"), tc.verified, tc.say, out)
		}
	}
}
