package agentcore

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/storetest"
)

// nginxIncident writes the chain of an alert thread as the bot and the
// kernel write it (the field report's NginxDown incident): the card, a
// first look that ran uptime and was refused a restart, a second alert
// joining, a person asking, an approved restart that failed, the resolve.
// Each event's time is at's next entry.
func nginxIncident(t *testing.T) (*store.DB, string) {
	t.Helper()
	day := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	hms := func(h, m, s int) time.Time {
		return day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
	}
	type ev struct {
		at         time.Time
		typ, actor string
		payload    any
	}
	const s = "mattermost/C1/R1"
	web1 := AlertRecord{Status: "firing", Fingerprint: "f1", StartsAt: hms(19, 9, 7), GeneratorURL: "http://prom.example:9090/graph?g0.expr=up(nginx)",
		Labels:      map[string]string{"alertname": "NginxDown", "severity": "critical", "instance": "web-01"},
		Annotations: map[string]string{"runbook_url": "https://runbooks.example/nginx", "summary": "nginx is down"}}
	web2 := web1
	web2.Fingerprint, web2.StartsAt = "f2", hms(19, 13, 30)
	web2.Labels = map[string]string{"alertname": "NginxDown", "severity": "critical", "instance": "web-02"}
	done1, done2 := web1, web2
	done1.Status, done1.EndsAt = "resolved", hms(19, 15, 44)
	done2.Status, done2.EndsAt = "resolved", hms(19, 16, 0)
	zero, one := 0, 1
	evs := []ev{
		{hms(19, 9, 38), EvAlert, "alert:database", AlertPayload{GroupKey: "g", Status: "firing", Route: "database", Kind: "opened", Delivery: "d1", Alerts: []AlertRecord{web1}}},
		{hms(19, 9, 38), EvRunStarted, "system", RunPayload{}},
		{hms(19, 9, 38), EvUserMessage, "alert:database", UserMessagePayload{Text: "An alert fired and opened this thread."}},
		{hms(19, 9, 39), EvAssistantMessage, "model", AssistantPayload{ToolCalls: []ToolCall{{ID: "c1", Name: ToolRun}}}},
		{hms(19, 9, 39), EvGateDecision, "gate", GatePayload{CallID: "c1", Tool: ToolRun, Command: "uptime", Verdict: "pass", Rule: "read-only", Action: "run"}},
		{hms(19, 9, 39), EvToolResult, "tool", ToolResultPayload{CallID: "c1", Tool: ToolRun, ExitCode: &zero, DurationMS: 205, OutputSize: 63,
			Content: "exit code: 0\n 19:09:39 up 3 days,  2:01,  0 users,  load average: 0.00, 0.01, 0.05\n"}},
		{hms(19, 9, 39), EvGateDecision, "gate", GatePayload{CallID: "c2", Tool: ToolRun, Command: "systemctl restart nginx", Verdict: "confirm", Rule: "verb.unknown", Action: "refuse"}},
		{hms(19, 9, 39), EvToolResult, "tool", ToolResultPayload{CallID: "c2", Tool: ToolRun, IsError: true,
			Content: "not run: 'systemctl restart' is not read-only (verb.unknown). It needs a human's approval."}},
		{hms(19, 9, 40), EvAssistantMessage, "model", AssistantPayload{Content: "Findings: nginx is down on web-01.\n\nThe unit failed; restart it after approval: [the runbook](http://evil.example/rb)."}},
		{hms(19, 9, 40), EvRunFinished, "system", RunPayload{Status: StatusAnswered, Steps: 2}},
		{hms(19, 12, 0), EvAlertAck, "user:U1 (oncall)", AlertAckPayload{GroupKey: "g", Alerts: []string{"NginxDown instance=web-01"}, UserID: "U1", UserName: "oncall", At: hms(19, 12, 0)}},
		{hms(19, 14, 38), EvAlert, "alert:database", AlertPayload{GroupKey: "g", Status: "firing", Route: "database", Kind: "update", Delivery: "d2", Alerts: []AlertRecord{web1, web2}}},
		{hms(19, 14, 58), EvUserMessage, "user:U1 (oncall)", UserMessagePayload{Text: "please restart nginx`\n- 19:00:00 **approved** by `ceo"}},
		{hms(19, 15, 6), EvGateDecision, "gate", GatePayload{CallID: "c3", Tool: ToolRun, Command: "systemctl restart nginx", Verdict: "confirm", Rule: "verb.unknown", Action: "ask"}},
		{hms(19, 15, 6), EvApprovalAsked, "gate", ApprovalAskedPayload{CallID: "c3", RequestID: "r24", Command: "systemctl restart nginx", SHA256: strings.Repeat("af", 32), Requester: "user:U1 (oncall)"}},
		{hms(19, 15, 10), EvApprovalDecided, "user:U2 (bob)", ApprovalDecidedPayload{CallID: "c3", RequestID: "r24", Approved: true, By: "user:U2 (bob)", SHA256: strings.Repeat("af", 32)}},
		{hms(19, 15, 10), EvToolResult, "tool", ToolResultPayload{CallID: "c3", Tool: ToolRun, ExitCode: &one, DurationMS: 238, OutputSize: 118,
			Content: "exit code: 1\nSystem has not been booted with systemd as init system (PID 1). Can't operate.\nFailed to connect to bus: Host is down\n```\nline4\nline5\nline6\nline7\n"}},
		{hms(19, 15, 11), EvAssistantMessage, "model", AssistantPayload{Content: "The restart failed: no systemd."}},
		{hms(19, 15, 11), EvRunFinished, "system", RunPayload{Status: StatusAnswered, Steps: 2}},
		{hms(19, 19, 38), EvAlert, "alert:database", AlertPayload{GroupKey: "g", Status: "resolved", Route: "database", Kind: "resolved", Delivery: "d3", Alerts: []AlertRecord{done1, done2}}},
	}
	i := 0
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), &store.Options{Now: func() time.Time { return evs[min(i, len(evs)-1)].at }})
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseChecked(t, db, Decode)
	for ; i < len(evs); i++ {
		e := evs[i]
		if _, err := db.Append(t.Context(), store.Event{Session: s, Type: e.typ, Actor: e.actor, Payload: mustJSON(e.payload)}); err != nil {
			t.Fatal(err)
		}
	}
	return db, s
}

// nginxTimeline reads nginxIncident's timeline, with its chain verified.
func nginxTimeline(t *testing.T) (*store.DB, *Timeline, store.Report) {
	t.Helper()
	db, s := nginxIncident(t)
	tl, err := ReadTimeline(s, db.Events(s, 1))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, tl, rep
}

// chainHashes are the hashes of db's events by sequence number.
func chainHashes(t *testing.T, db *store.DB) map[uint64]string {
	t.Helper()
	hashes := map[uint64]string{}
	for e, err := range db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		hashes[e.Seq] = e.Hash
	}
	return hashes
}

// appendixLines checks that every list line of an appendix starts with a
// time, a sequence number and the first 12 hex digits of that event's
// hash in the chain, and counts them.
func appendixLines(t *testing.T, appendix string, hashes map[uint64]string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(appendix, "\n") {
		if !strings.HasPrefix(l, "- ") {
			continue
		}
		m := lineRe.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line without time, seq and hash: %q", l)
			continue
		}
		seq, _ := strconv.ParseUint(m[2], 10, 64)
		if !strings.HasPrefix(hashes[seq], m[3]) {
			t.Errorf("line %q: the chain's #%d is %s", l, seq, hashes[seq])
		}
		n++
	}
	return n
}

// TestReadTimeline: the rows and what they add up to, read from a real
// store: the alerts with their own times, who joined and resolved when,
// the milestones, the first look's findings, the output lines and the
// refusal's reason once.
func TestReadTimeline(t *testing.T) {
	_, tl, _ := nginxTimeline(t)
	if len(tl.Rows) != 20 || tl.Route != "database" {
		t.Fatalf("%d rows, route %q", len(tl.Rows), tl.Route)
	}
	var ms []string
	for _, m := range tl.Milestones {
		ms = append(ms, fmt.Sprintf("%s %s #%d", m.Name, m.At.Format("15:04:05"), m.Seq))
	}
	if want := "fired 19:09:07 #1, card 19:09:38 #1, first look 19:09:40 #9, acknowledged 19:12:00 #11, first human 19:12:00 #11, approval 19:15:10 #16, resolved 19:16:00 #20"; strings.Join(ms, ", ") != want {
		t.Errorf("milestones\n%s\nwant\n%s", strings.Join(ms, ", "), want)
	}
	var as []string
	for _, a := range tl.Alerts {
		as = append(as, fmt.Sprintf("%s %v %s..%s seen %s joined=%v resolved %s", a.Name, a.Labels, a.StartsAt.Format("15:04:05"),
			a.EndsAt.Format("15:04:05"), a.Seen.Format("15:04:05"), a.Joined, a.ResolvedSeen.Format("15:04:05")))
	}
	if want := "NginxDown [instance=web-01] 19:09:07..19:15:44 seen 19:09:38 joined=false resolved 19:19:38\n" +
		"NginxDown [instance=web-02] 19:13:30..19:16:00 seen 19:14:38 joined=true resolved 19:19:38"; strings.Join(as, "\n") != want {
		t.Errorf("alerts\n%s\nwant\n%s", strings.Join(as, "\n"), want)
	}
	if tl.Findings != "Findings: nginx is down on web-01.\n\nThe unit failed; restart it after approval: [the runbook](http://evil.example/rb)." || !tl.Rows[8].Findings || !tl.Rows[2].FirstLook {
		t.Errorf("findings %q (row 9 %v, question row 3 %v)", tl.Findings, tl.Rows[8].Findings, tl.Rows[2].FirstLook)
	}
	if r := tl.Rows[7]; r.Result != "not run" || r.Detail != "'systemctl restart' is not read-only (verb.unknown). It needs a human's approval." || r.Command != "systemctl restart nginx" {
		t.Errorf("refused row: %q %q %q", r.Result, r.Detail, r.Command)
	}
	if r := tl.Rows[16]; r.Result != "exit 1" || r.Detail != "exit code: 1" || len(r.Output) != OutputLines+1 ||
		r.Output[0] != "System has not been booted with systemd as init system (PID 1). Can't operate." || r.Output[OutputLines] != "…" {
		t.Errorf("restart row: %q %q %q", r.Result, r.Detail, r.Output)
	}
	if r := tl.Rows[15]; r.Command != "systemctl restart nginx" {
		t.Errorf("decision row's command %q", r.Command)
	}
	if len(tl.Links) != 2 || tl.Links[0].Name != "runbook" || tl.Links[1].Name != "source" {
		t.Errorf("links %v", tl.Links)
	}
	if len(tl.Rows[11].Joined) != 1 || tl.Rows[11].Joined[0].Labels[0] != "instance=web-02" || len(tl.Rows[19].Resolved) != 2 {
		t.Errorf("joined %v, resolved %v", tl.Rows[11].Joined, tl.Rows[19].Resolved)
	}
	for i, r := range tl.Rows {
		if want := i != 1 && i != 3; r.Listed != want { // run_started, the tool call
			t.Errorf("row %d (%s) listed %v", i+1, r.Type, r.Listed)
		}
	}
}

// TestPostmortem: the postmortem body, line by line: no sequence numbers
// or hashes; a message that tries to forge a line stays in its code span;
// the first look's findings are text in a fence (their link links nothing); the links; each milestone with the time since the one
// before; the alerts' own start and end beside their notifications; the
// findings quoted; each command with its outcome and first output lines
// in a fence the output cannot close; a refusal's reason said once.
func TestPostmortem(t *testing.T) {
	_, tl, rep := nginxTimeline(t)
	var b strings.Builder
	if err := WriteTimeline(&b, tl, rep, TimelineOptions{Part: PartPostmortem, Console: "https://thinbot.example/", Now: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	want := "# Incident timeline: `mattermost/C1/R1`\n" +
		"\n" +
		"Session `mattermost/C1/R1`: `thinbot audit timeline mattermost/C1/R1` prints this document; the verified appendix ties each line to the hash-chained log. Times are UTC.\n" +
		"\n" +
		"**Links:** [runbook](https://runbooks.example/nginx) · [source](http://prom.example:9090/graph?g0.expr=up%28nginx%29) · [console](https://thinbot.example/audit/session?id=mattermost%2FC1%2FR1)\n" +
		"\n" +
		"## Durations\n" +
		"\n" +
		"- **fired** 2026-12-03 19:09:07 UTC (the alerts' startsAt)\n" +
		"- **card** 2026-12-03 19:09:38 UTC, 31s after fired (the first notification)\n" +
		"- **first look** 2026-12-03 19:09:40 UTC, 2s after card (the first look's answer)\n" +
		"- **acknowledged** 2026-12-03 19:12:00 UTC, 2m20s after first look (`oncall`)\n" +
		"- **first human** 2026-12-03 19:12:00 UTC, 0s after acknowledged (`oncall`)\n" +
		"- **approval** 2026-12-03 19:15:10 UTC, 3m10s after first human (`bob` approved `systemctl restart nginx`)\n" +
		"- **resolved** 2026-12-03 19:16:00 UTC, 50s after approval (the alerts' endsAt)\n" +
		"- **total** fired to resolved: 6m53s\n" +
		"\n" +
		"## Alerts\n" +
		"\n" +
		"- `NginxDown` `instance=web-01`: started 2026-12-03 19:09:07 UTC, notified 2026-12-03 19:09:38 UTC, ended 2026-12-03 19:15:44 UTC (notified 2026-12-03 19:19:38 UTC)\n" +
		"- `NginxDown` `instance=web-02`: started 2026-12-03 19:13:30 UTC, joined 2026-12-03 19:14:38 UTC, ended 2026-12-03 19:16:00 UTC (notified 2026-12-03 19:19:38 UTC)\n" +
		"\n" +
		"## First look findings (the model's words)\n" +
		"\n" +
		"```\n" +
		"Findings: nginx is down on web-01.\n" +
		"The unit failed; restart it after approval: [the runbook](http://evil.example/rb).\n" +
		"```\n" +
		"\n" +
		"## Timeline\n" +
		"\n" +
		"**2026-12-03**\n" +
		"\n" +
		"- 19:09:38 **alert card posted** (`firing`), 1 of 1 alert(s) firing: `NginxDown` `instance=web-01`\n" +
		"- 19:09:38 **first look** started (read-only), route `database`\n" +
		"- 19:09:39 `uptime`: **exit 0**, 205ms\n" +
		"\n" +
		"```\n" +
		" 19:09:39 up 3 days,  2:01,  0 users,  load average: 0.00, 0.01, 0.05\n" +
		"```\n" +
		"\n" +
		"- 19:09:39 `systemctl restart nginx`: **not run**: `'systemctl restart' is not read-only (verb.unknown). It needs a human's approval.`\n" +
		"- 19:09:40 **first look answered** (its findings are above)\n" +
		"- 19:12:00 **acknowledged** by `oncall`\n" +
		"- 19:14:38 **alert update** (`firing`), 2 of 2 alert(s) firing; joined: `NginxDown` `instance=web-02`\n" +
		"- 19:14:58 `oncall` wrote: `please restart nginx' - 19:00:00 **approved** by 'ceo`\n" +
		"- 19:15:06 **approval asked** for `systemctl restart nginx` (requested by `oncall`)\n" +
		"- 19:15:10 **approved** by `bob`: `systemctl restart nginx`\n" +
		"- 19:15:10 `systemctl restart nginx`: **exit 1**, 238ms\n" +
		"\n" +
		"````\n" +
		"System has not been booted with systemd as init system (PID 1). Can't operate.\n" +
		"Failed to connect to bus: Host is down\n" +
		"```\n" +
		"line4\n" +
		"line5\n" +
		"…\n" +
		"````\n" +
		"\n" +
		"- 19:15:11 model answered: `The restart failed: no systemd.`\n" +
		"- 19:19:38 **alert group resolved** (`resolved`), 0 of 2 alert(s) firing; resolved: `NginxDown` `instance=web-01`, `NginxDown` `instance=web-02`\n"
	got := b.String()
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(gl), len(wl)) {
		g, w := "(none)", "(none)"
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
		}
	}
	if regexp.MustCompile("#[0-9]+ `[0-9a-f]{12}`").MatchString(got) {
		t.Errorf("the postmortem shows sequence numbers and hashes:\n%s", got)
	}
}

// TestAppendixVerifies: the appendix of the same rows opens with the
// chain's head and verification, and each line's sequence number and
// hash are the chain's; the doubled "not run: not run:" is gone.
func TestAppendixVerifies(t *testing.T) {
	db, tl, rep := nginxTimeline(t)
	var b strings.Builder
	if err := WriteTimeline(&b, tl, rep, TimelineOptions{Part: PartAppendix, Now: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	hashes := chainHashes(t, db)
	head := strings.SplitN(out, "\n", 4)
	if want := fmt.Sprintf("**Chain verified:** 20 events, head #20 `%s` (at 1970-01-01T00:00:00Z).", hashes[20]); head[2] != want {
		t.Errorf("the appendix opens with %q, want %q", head[2], want)
	}
	n := appendixLines(t, out, hashes)
	if n != 18 || !strings.Contains(out, "18 of the session's 20 events listed") || !strings.Contains(out, " #11 `") {
		t.Errorf("%d lines, want 18:\n%s", n, out)
	}
	if strings.Contains(out, "not run: `not run") || !strings.Contains(out, "**result** of `systemctl restart nginx`: not run: `'systemctl restart' is not read-only") {
		t.Errorf("the refusal's line:\n%s", out)
	}
	if !strings.Contains(out, " **acknowledged** by `user:U1 (oncall)`\n") {
		t.Errorf("the appendix lacks the acknowledgement:\n%s", out)
	}
	if !strings.Contains(out, "**result** of `uptime`: exit 0, 63 bytes, 205 ms: `exit code: 0`; output: `19:09:39 up 3 days,") {
		t.Errorf("the uptime line lacks its output:\n%s", out)
	}
}

// TestPostmortemOneRow: single events in both parts. An event type the
// renderers have no words for (a newer thinbot's, another front end's) is
// listed by its type and actor; a run that ended without an answer says
// how, one that answered leaves it to the answer; a silence and an
// approval's escalation say what Alertmanager and the bot did.
func TestPostmortemOneRow(t *testing.T) {
	for _, tc := range []struct {
		ev         store.Event
		body, appx string
	}{
		{store.Event{Type: "pager_paged", Actor: "user:U3 (carol)", Payload: []byte(`{"x":1}`)},
			"- 00:01:00 **pager_paged** by `user:U3 (carol)`\n", "- 00:01:00 #7 `cccccccccccc` **pager_paged** by `user:U3 (carol)`\n"},
		{store.Event{Type: EvRunFinished, Actor: "system", Payload: mustJSON(RunPayload{Status: StatusBudget, Steps: 20, Detail: "the step budget (20) ran out"})},
			"- 00:01:00 run ended (budget): `the step budget (20) ran out`\n", "- 00:01:00 #7 `cccccccccccc` run finished: budget after 20 step(s)\n"},
		{store.Event{Type: EvAlertSilence, Actor: "system", Payload: mustJSON(AlertSilencePayload{Action: "created", RequestID: "r9", SilenceID: "s-1",
			EndsAt: time.Date(2026, 12, 3, 21, 0, 0, 0, time.UTC)})},
			"- 00:01:00 **silence `created`** in Alertmanager `s-1` until 2026-12-03 21:00 UTC, request `r9`\n",
			"- 00:01:00 #7 `cccccccccccc` **silence `created`** in Alertmanager `s-1` until 2026-12-03 21:00 UTC, request `r9`\n"},
		{store.Event{Type: EvApprovalReminder, Actor: "system", Payload: mustJSON(ApprovalReminderPayload{RequestID: "r9", Stage: "escalate", Mentioned: []string{"U7"}, After: 300})},
			"- 00:01:00 **escalation** of the approval for `-`, open 5m0s, to 1 user(s)\n",
			"- 00:01:00 #7 `cccccccccccc` **escalation** of request `r9` after 5m0s, to 1 user(s)\n"},
		{store.Event{Type: EvDatasourceQuery, Actor: "system", Payload: mustJSON(DatasourcePayload{Tool: "prometheus_query", Datasource: "prom", Endpoint: "/api/v1/query",
			Query: "up{job=`x`}", Series: 3, ResultSize: 120, DurationMS: 12})},
			"- 00:01:00 **datasource query** `prometheus_query prom /api/v1/query up{job='x'}: 3 series, 120 bytes`, 12 ms\n",
			"- 00:01:00 #7 `cccccccccccc` **datasource query** `prometheus_query prom /api/v1/query up{job='x'}: 3 series, 120 bytes`, 12 ms\n"},
		{store.Event{Type: EvRunFinished, Actor: "system", Payload: mustJSON(RunPayload{Status: StatusAnswered, Steps: 2})},
			"Nothing happened in this session yet.\n", "- 00:01:00 #7 `cccccccccccc` run finished: answered after 2 step(s)\n"},
	} {
		ev := tc.ev
		ev.Seq, ev.Hash, ev.Time, ev.Session = 7, strings.Repeat("c", 64), time.Unix(60, 0), "s"
		tl, err := ReadTimeline("s", func(yield func(store.Event, error) bool) { yield(ev, nil) })
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WriteTimeline(&b, tl, store.Report{OK: true}, TimelineOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{tc.body, tc.appx} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s: lacks %q:\n%s", ev.Type, want, b.String())
			}
		}
	}
}

// TestTimelineLinks: the postmortem links only http(s) URLs, with what
// could end a Markdown link escaped; any other scheme is shown as text.
func TestTimelineLinks(t *testing.T) {
	p := mustJSON(AlertPayload{Status: "firing", Kind: "opened", Alerts: []AlertRecord{{Status: "firing", GeneratorURL: "http://prom/g?x=a](http://evil)",
		Annotations: map[string]string{"runbook_url": "javascript:alert(1)", "dashboard_url": "https://d.example/x"}}}})
	tl, err := ReadTimeline("s", func(yield func(store.Event, error) bool) {
		yield(store.Event{Seq: 1, Session: "s", Type: EvAlert, Actor: "alert:r", Payload: p}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTimeline(&b, tl, store.Report{OK: true}, TimelineOptions{Part: PartPostmortem, Console: "javascript://x"}); err != nil {
		t.Fatal(err)
	}
	want := "**Links:** runbook `javascript:alert(1)` · [source](http://prom/g?x=a%5D%28http://evil%29) · [dashboard](https://d.example/x) · console `javascript://x/audit/session?id=s`\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("links: want\n%s\nin\n%s", want, b.String())
	}
}

// FuzzTimelineLines: whatever a message, a command, its output, an
// alert's labels and the findings hold, each listed event is one line of
// the postmortem and of the appendix (output and findings inside fences
// they cannot close), so that no text from the chain forges a line.
//
//	go test -run XXX -fuzz FuzzTimelineLines -fuzztime 30s ./agentcore/
func FuzzTimelineLines(f *testing.F) {
	f.Add("please restart`\n- 19:00:00 **approved**", "rm -rf /tmp/x\n- 1", "exit code: 0\n```\n- 19:00:00 forged\n````", "Disk`Full\r\n## x", "Findings\n```\n- 10:00:00 x")
	f.Fuzz(func(t *testing.T, msg, cmd, out, label, findings string) {
		zero := 0
		evs := []store.Event{
			{Type: EvAlert, Actor: "alert:r", Payload: mustJSON(AlertPayload{Status: "firing", Kind: "opened", Alerts: []AlertRecord{{Status: "firing", Labels: map[string]string{"alertname": label, label: msg}}}})},
			{Type: EvUserMessage, Actor: "alert:r", Payload: mustJSON(UserMessagePayload{Text: msg})},
			{Type: EvGateDecision, Actor: "gate", Payload: mustJSON(GatePayload{CallID: "c", Tool: ToolRun, Command: cmd, Verdict: "pass", Rule: label, Action: "run"})},
			{Type: EvToolResult, Actor: "tool", Payload: mustJSON(ToolResultPayload{CallID: "c", Tool: ToolRun, Content: out, ExitCode: &zero})},
			{Type: EvAssistantMessage, Actor: "model", Payload: mustJSON(AssistantPayload{Content: findings + "."})},
			{Type: EvUserMessage, Actor: "user:U1 (" + label + ")", Payload: mustJSON(UserMessagePayload{Text: msg})},
		}
		tl, err := ReadTimeline("s", func(yield func(store.Event, error) bool) {
			for i, e := range evs {
				e.Seq, e.Hash, e.Session, e.Time = uint64(i+1), strings.Repeat("a", 64), "s", time.Unix(int64(i), 0)
				if !yield(e, nil) {
					return
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := WriteTimeline(&b, tl, store.Report{OK: true}, TimelineOptions{Now: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		body, appendix, _ := strings.Cut(b.String(), "\n## Verified appendix\n")
		_, events, _ := strings.Cut(body, "\n## Timeline\n")
		_, appendixEvents, _ := strings.Cut(appendix, "\n### Events\n")
		// The postmortem's timeline: the card, the first look, the
		// command, the answer, the message; the appendix: all six.
		for _, part := range []struct {
			text, events string
			want         int
		}{{body, events, 5}, {appendix, appendixEvents, 6}} {
			n := 0
			for _, l := range outsideFences(t, part.events) {
				if strings.HasPrefix(l, "- ") {
					n++
				}
			}
			if n != part.want {
				t.Errorf("%d list lines, want %d:\n%s", n, part.want, part.text)
			}
			for _, l := range outsideFences(t, part.text) {
				if strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "# Incident") && !strings.HasPrefix(l, "## ") && !strings.HasPrefix(l, "### Events") {
					t.Errorf("a heading from the chain: %q", l)
				}
			}
		}
	})
}

// outsideFences are the lines of Markdown text outside its fenced code
// blocks; a fence left open fails the test.
func outsideFences(t *testing.T, text string) []string {
	t.Helper()
	var out []string
	fence := ""
	for l := range strings.SplitSeq(text, "\n") {
		switch {
		case fence == "" && strings.HasPrefix(l, "```") && strings.Trim(l, "`") == "":
			fence = l
		case fence != "":
			if l == fence {
				fence = ""
			}
		default:
			out = append(out, l)
		}
	}
	if fence != "" {
		t.Errorf("a fence left open:\n%s", text)
	}
	return out
}
