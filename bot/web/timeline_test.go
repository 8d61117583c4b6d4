package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/storetest"
)

// The audit viewer's session page links the session's timeline, which an
// auditor downloads as Markdown (both parts, or ?part= one), and names the
// CLI command that prints it; others cannot, and a session the chain does
// not hold is not found.
func TestAuditTimeline(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseChecked(t, db, agentcore.Decode)
	if _, err := db.Append(context.Background(), store.Event{Session: "web/console/t1", Type: "user_message", Actor: "user:alice", Payload: []byte(`{"text":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	var asked, part string
	srv, err := New(Config{Listen: "127.0.0.1:0", Auth: rigAuth(), Chain: db, Timeline: func(_ context.Context, s, p string) (string, error) {
		asked, part = s, p
		return "# Incident timeline: `" + s + "`\n", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(user, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "127.0.0.1:5555"
		req.Header.Set("X-Forwarded-User", user)
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		return w
	}
	page := get("audrey", "/audit/session?id=web%2Fconsole%2Ft1")
	for _, want := range []string{`href="/audit/timeline?session=web%2fconsole%2ft1"`, `href="/audit/timeline?session=web%2fconsole%2ft1&part=postmortem"`,
		`<span class="mono" id="cli">thinbot audit timeline web/console/t1</span>`} {
		if page.Code != http.StatusOK || !strings.Contains(strings.ToLower(page.Body.String()), strings.ToLower(want)) {
			t.Fatalf("session page (%d) lacks %s:\n%s", page.Code, want, page.Body)
		}
	}
	w := get("audrey", "/audit/timeline?session=web%2Fconsole%2Ft1")
	if w.Code != http.StatusOK || asked != "web/console/t1" || part != agentcore.PartBoth || !strings.HasPrefix(w.Body.String(), "# Incident timeline") ||
		w.Header().Get("Content-Type") != "text/markdown; charset=utf-8" || !strings.Contains(w.Header().Get("Content-Disposition"), "timeline-web_console_t1.md") {
		t.Fatalf("timeline: %d %v %q", w.Code, w.Header(), w.Body)
	}
	if w := get("audrey", "/audit/timeline?session=web%2Fconsole%2Ft1&part=postmortem"); w.Code != http.StatusOK || part != agentcore.PartPostmortem ||
		!strings.Contains(w.Header().Get("Content-Disposition"), "-postmortem.md") {
		t.Errorf("postmortem: %d %q, %v", w.Code, part, w.Header())
	}
	if w := get("audrey", "/audit/timeline?session=web%2Fconsole%2Ft1&part=hashes"); w.Code != http.StatusBadRequest {
		t.Errorf("an unknown part: %d", w.Code)
	}
	asked = ""
	if w := get("audrey", "/audit/timeline?session=web%2Fconsole%2Fnope"); w.Code != http.StatusNotFound || asked != "" {
		t.Errorf("an unknown session: %d (asked %q)", w.Code, asked)
	}
	if w := get("carol", "/audit/timeline?session=web%2Fconsole%2Ft1"); w.Code == http.StatusOK {
		t.Errorf("a non-auditor got the timeline: %d", w.Code)
	}
}

// rowsOf are agentcore's timeline rows of evs, as the session page reads
// them.
func rowsOf(t *testing.T, evs ...store.Event) []trow {
	t.Helper()
	tl, err := agentcore.ReadTimeline("s", func(yield func(store.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var rows []trow
	for _, r := range tl.Rows {
		rows = append(rows, timelineRow(r))
	}
	return rows
}

// The audit viewer's rows of a stopped command and run say why they
// stopped: the shutdown's signal, or who sent /stop.
func TestAuditRowsSayWhyARunStopped(t *testing.T) {
	for _, tc := range []struct {
		ev    store.Event
		badge string
		meta  string
	}{
		{store.Event{Type: "tool_result", Payload: []byte(`{"tool":"run","content":"interrupted: thinbot is shutting down (SIGTERM); the process group was killed","exit_code":-1,"cause":"shutdown","cause_by":"SIGTERM"}`)},
			"interrupted", "cause: thinbot is shutting down (SIGTERM)"},
		{store.Event{Type: "run_finished", Payload: []byte(`{"status":"cancelled","detail":"stopped by user:U1 (alice) with /stop","cause":"stop","cause_by":"user:U1 (alice)"}`)},
			"cancelled", "cause: stopped by user:U1 (alice)"},
	} {
		r := rowsOf(t, tc.ev)[0]
		if r.Badge != tc.badge || !slices.Contains(r.Meta, tc.meta) {
			t.Errorf("%s: badge %q meta %q, want %q and %q", tc.ev.Type, r.Badge, r.Meta, tc.badge, tc.meta)
		}
	}
}

// TestSessionPageRendersTimelineRows: the session page is agentcore's
// timeline rows in HTML: a result names its command (from the gate's
// decision before it), an alert notification names the alerts that
// joined with their own start, the first look's question and findings
// are marked, an acknowledgement says who, a datasource query what it
// asked, and text from the chain is escaped.
func TestSessionPageRendersTimelineRows(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseChecked(t, db, agentcore.Decode)
	const sid = "mattermost/C1/R1"
	js := func(v any) []byte {
		b, _ := json.Marshal(v)
		return b
	}
	start := time.Date(2026, 12, 3, 19, 9, 7, 0, time.UTC)
	one := 1
	alert := func(kind string, as ...agentcore.AlertRecord) store.Event {
		return store.Event{Session: sid, Type: agentcore.EvAlert, Actor: "alert:db", Payload: js(agentcore.AlertPayload{Status: "firing", Kind: kind, Alerts: as})}
	}
	web1 := agentcore.AlertRecord{Status: "firing", Fingerprint: "1", StartsAt: start, Labels: map[string]string{"alertname": "NginxDown", "instance": "web-01"}}
	web2 := agentcore.AlertRecord{Status: "firing", Fingerprint: "2", StartsAt: start.Add(time.Minute), Labels: map[string]string{"alertname": "NginxDown", "instance": "web-02"}}
	if _, err := db.Append(t.Context(),
		alert("opened", web1),
		store.Event{Session: sid, Type: agentcore.EvUserMessage, Actor: "alert:db", Payload: js(agentcore.UserMessagePayload{Text: "An alert fired"})},
		store.Event{Session: sid, Type: agentcore.EvGateDecision, Actor: "gate", Payload: js(agentcore.GatePayload{CallID: "c1", Tool: agentcore.ToolRun, Command: "systemctl status <nginx>", Verdict: "pass", Rule: "read-only", Action: "run"})},
		store.Event{Session: sid, Type: agentcore.EvToolResult, Actor: "tool", Payload: js(agentcore.ToolResultPayload{CallID: "c1", Tool: agentcore.ToolRun, ExitCode: &one, Content: "exit code: 1\ninactive"})},
		store.Event{Session: sid, Type: agentcore.EvAssistantMessage, Actor: "model", Payload: js(agentcore.AssistantPayload{Content: "nginx is inactive"})},
		alert("update", web1, web2),
		store.Event{Session: sid, Type: agentcore.EvAlertAck, Actor: "user:U1 (oncall)", Payload: js(agentcore.AlertAckPayload{Alerts: []string{"NginxDown instance=web-01"}, UserID: "U1"})},
		store.Event{Session: sid, Type: agentcore.EvDatasourceQuery, Actor: "system", Payload: js(agentcore.DatasourcePayload{Tool: "prometheus_query", Datasource: "prom",
			Endpoint: "/api/v1/query", Query: "up", Series: 3, ResultSize: 120, DurationMS: 12})},
	); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listen: "127.0.0.1:0", Auth: rigAuth(), Chain: db})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/audit/session?id="+strings.ReplaceAll(sid, "/", "%2F"), nil)
	req.RemoteAddr = "127.0.0.1:5555"
	req.Header.Set("X-Forwarded-User", "audrey")
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, req)
	body := w.Body.String()
	li := func(seq string) string {
		i := strings.Index(body, `id="seq-`+seq+`"`)
		if i < 0 {
			t.Fatalf("no row #%s:\n%s", seq, body)
		}
		j := strings.Index(body[i:], "</li>")
		return body[i : i+j]
	}
	for seq, wants := range map[string][]string{
		"2": {"First look (read-only): the alert&#39;s question"},
		"4": {`<span class="badge v-deny">exit 1</span>`, `<pre class="code">systemctl status &lt;nginx&gt;</pre>`},
		"5": {"Model: the first look&#39;s findings", "nginx is inactive"},
		"6": {"Alert notification (update)", "new: NginxDown instance=web-02 (started " + `<time class="utc" datetime="2026-12-03T19:10:07Z">2026-12-03 19:10:07 UTC</time>)`},
		"7": {"Acknowledged", "by user:U1 (oncall)", "NginxDown instance=web-01"},
		"8": {"Datasource query (prom)", `<pre class="code">/api/v1/query up</pre>`, "3 series, 120 bytes"},
	} {
		row := li(seq)
		for _, want := range wants {
			if !strings.Contains(row, want) {
				t.Errorf("row #%s lacks %q:\n%s", seq, want, row)
			}
		}
	}
	if strings.Contains(li("6"), "web-01") {
		t.Errorf("row #6 names an alert that did not join:\n%s", li("6"))
	}
}
