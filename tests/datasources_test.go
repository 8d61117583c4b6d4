package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// This file tests the datasource tools end to end: a real Prometheus
// (Debian's prometheus) scrapes a real node exporter
// (prometheus-node-exporter), evaluates an alerting rule and sends the
// alert to a real Alertmanager, which delivers it to thinbot serve; the
// first look queries the alert's own expression in Prometheus, the logs
// in Loki and the active alerts in Alertmanager, and cites what it found.
// Loki is a fake speaking Loki's query_range wire format: Grafana Loki is
// not packaged in Debian (Debian's "loki" is an unrelated genetics
// program), and its Go module is AGPL.

// startDaemon starts a long-running test dependency with args and kills
// it at cleanup, logging its output if the test failed.
func startDaemon(t *testing.T, name string, args ...string) {
	t.Helper()
	needTool(t, name)
	var out logBuffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(out.String(), 3000))
		}
	})
}

// waitReady polls url until it answers 200.
func waitReady(t *testing.T, what, url string) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	waitUntilBy(t, startDeadline(t), what+" to be ready", func() bool {
		resp, err := hc.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// fakeLoki answers Loki's GET /loki/api/v1/query_range in its wire format
// with the lines pushed to it that fall in the asked window, newest first,
// and records the queries it was asked.
type fakeLoki struct {
	mu      sync.Mutex
	lines   map[string][][2]string // stream labels (JSON) -> [ns, line]
	queries []string
}

func (f *fakeLoki) push(labels map[string]string, at time.Time, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k, _ := json.Marshal(labels)
	f.lines[string(k)] = append(f.lines[string(k)], [2]string{strconv.FormatInt(at.UnixNano(), 10), line})
}

func (f *fakeLoki) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/loki/api/v1/query_range" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	start, _ := strconv.ParseInt(q.Get("start"), 10, 64)
	end, _ := strconv.ParseInt(q.Get("end"), 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries = append(f.queries, q.Get("query"))
	type stream struct {
		Stream map[string]string `json:"stream"`
		Values [][2]string       `json:"values"`
	}
	var result []stream
	for k, vals := range f.lines {
		var st stream
		json.Unmarshal([]byte(k), &st.Stream)
		for _, v := range vals {
			if ns, _ := strconv.ParseInt(v[0], 10, 64); ns >= start && ns <= end && strings.Contains(v[1], "error") {
				st.Values = append(st.Values, v)
			}
		}
		if len(st.Values) > 0 {
			result = append(result, st)
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "streams", "result": result}})
}

// TestFirstLookQueriesDatasources: an alert Prometheus evaluated reaches
// thinbot through Alertmanager; the first look's question carries the
// rule's expression; the model's reads of Prometheus (that expression, last
// hour), Loki and Alertmanager run without an approval and give it
// summaries it cites; a datasource that answers 500 gives it a clear
// error; every read is a datasource_query event in the chain, and the
// daemon keeps answering.
func TestFirstLookQueriesDatasources(t *testing.T) {
	needTool(t, "prometheus")
	needTool(t, "prometheus-node-exporter")
	chat := newMMChat(t)
	const expr = `node_load1{job="node"} >= 0`

	// Node exporter and Prometheus, scraping it every second and sending
	// the rule's alert to Alertmanager.
	nodeAddr := freeAddr(t)
	startDaemon(t, "prometheus-node-exporter", "--web.listen-address="+nodeAddr,
		"--collector.disable-defaults", "--collector.loadavg", "--collector.uname")
	waitReady(t, "node exporter", "http://"+nodeAddr+"/metrics")

	thinbotAddr := freeAddr(t)
	section, tokenFile := alertsSection(t, chat)
	am := startAlertmanager(t, "http://"+thinbotAddr+"/alerts", tokenFile)

	promDir := t.TempDir()
	promAddr := freeAddr(t)
	os.WriteFile(filepath.Join(promDir, "rules.yml"), []byte(`groups:
  - name: test
    rules:
      - alert: NodeLoadSeen
        expr: '`+expr+`'
        labels: {severity: warning}
        annotations: {summary: "load seen on {{ $labels.instance }}"}
`), 0o644)
	os.WriteFile(filepath.Join(promDir, "prometheus.yml"), []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['%s']
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['%s']
`, strings.TrimPrefix(am.url, "http://"), nodeAddr)), 0o644)
	startDaemon(t, "prometheus", "--config.file="+filepath.Join(promDir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(promDir, "data"), "--web.listen-address="+promAddr,
		"--web.external-url=http://"+promAddr+"/")
	waitReady(t, "prometheus", "http://"+promAddr+"/-/ready")

	loki := &fakeLoki{lines: map[string][][2]string{}}
	now := time.Now()
	loki.push(map[string]string{"job": "app", "host": "web-1"}, now.Add(-10*time.Minute), "level=error msg=\"payment failed for order 42\"")
	loki.push(map[string]string{"job": "app", "host": "web-1"}, now.Add(-9*time.Minute), "level=info msg=ok")
	loki.push(map[string]string{"job": "app", "host": "web-1"}, now.Add(-3*time.Hour), "level=error msg=\"too old to be seen\"")
	for i := range 80 { // enough for chat to attach the whole answer
		loki.push(map[string]string{"job": "app", "host": "web-1"}, now.Add(-20*time.Minute+time.Duration(i)*time.Second), fmt.Sprintf("level=error msg=\"retry %d of the payment queue\"", i))
	}
	lokiSrv := httptest.NewServer(loki)
	defer lokiSrv.Close()
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "tsdb is compacting, try later", http.StatusInternalServerError)
	}))
	defer flaky.Close()

	// The model: the first look asks every source at once, then cites
	// what the results said; a later question is answered plainly.
	var (
		mu      sync.Mutex
		results []string
	)
	m := fakemodel.NewFunc(func(r fakemodel.Request) fakemodel.Reply {
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "user" && strings.Contains(last.Content, "ALERT DATA"):
			return fakemodel.Reply{ToolCalls: []fakemodel.Call{
				{Name: agentcore.ToolPromRange, Args: mustJSONString(map[string]string{"query": expr, "datasource": "prom"})},
				{Name: agentcore.ToolLogQuery, Args: `{"query":"{job=\"app\"} |= \"error\"","window":"1h"}`},
				{Name: agentcore.ToolAlerts, Args: `{"filter":"alertname=\"NodeLoadSeen\""}`},
				{Name: agentcore.ToolPromQuery, Args: `{"query":"up","datasource":"flaky"}`},
			}}
		case last.Role == "tool":
			var tools []string
			for _, msg := range r.Messages {
				if msg.Role == "tool" {
					tools = append(tools, msg.Content)
				}
			}
			mu.Lock()
			results = tools
			mu.Unlock()
			// Cite: the last line of each result's table, and the log
			// line that names an order.
			var cite []string
			for _, c := range tools {
				lines := strings.Split(c, "\n")
				cite = append(cite, lines[len(lines)-1])
				for _, l := range lines {
					if strings.Contains(l, "order 42") {
						cite = append(cite, l)
					}
				}
			}
			return fakemodel.Reply{Content: "Findings:\n" + strings.Join(cite, "\n")}
		}
		return fakemodel.Reply{Content: "Still here."}
	})
	defer m.Close()

	ds := fmt.Sprintf(`datasources:
  - name: prom
    type: prometheus
    url: http://%s
  - name: logs
    type: loki
    url: %s
  - name: am
    type: alertmanager
    url: %s
  - name: flaky
    type: prometheus
    url: %s
    timeout: 5s
`, promAddr, lokiSrv.URL, am.url, flaky.URL)
	r := newRig(t, chat, m.URL, rigOpts{Extra: section + ds, Addr: thinbotAddr})
	ops := chat.Ops()

	var card chatPost
	r.waitFor("the alert's card", func() bool {
		roots := botRoots(chat, ops)
		if len(roots) > 0 {
			card = roots[0]
		}
		return len(roots) == 1 && strings.Contains(roots[0].Text, "NodeLoadSeen")
	})
	answer := r.waitPost(ops, card.ID, "Findings:")

	mu.Lock()
	got := results
	mu.Unlock()
	if len(got) != 4 {
		t.Fatalf("the model got %d tool results: %q", len(got), got)
	}
	for i, want := range []string{
		"prometheus prom answered (/api/v1/query_range):\n1 series",
		"loki logs answered (/loki/api/v1/query_range):\n1 streams, 81 lines",
		"alertmanager am answered (/api/v2/alerts):\n1 alerts, 1 active",
		`error: prometheus "flaky": error answer: server error: 500: tsdb is compacting, try later`,
	} {
		if !strings.Contains(got[i], want) {
			t.Errorf("result %d lacks %q:\n%s", i, want, got[i])
		}
	}
	for _, want := range []string{`node_load1{instance="` + nodeAddr + `", job="node"}`, "payment failed for order 42", "NodeLoadSeen", "tsdb is compacting"} {
		if !strings.Contains(answer.Text, want) {
			t.Errorf("the first look's answer does not cite %q:\n%s", want, answer.Text)
		}
	}
	if strings.Contains(strings.Join(got, "\n"), "too old to be seen") {
		t.Error("a log line outside the window reached the model")
	}
	// The whole answer of the long read is attached in the thread.
	attached := false
	for _, f := range chat.Files(ops, card.ID) {
		attached = attached || (strings.Contains(string(f), `"resultType":"streams"`) && strings.Contains(string(f), "retry 79 of the payment queue"))
	}
	if !attached {
		t.Errorf("the Loki answer is not attached in the thread (%d files)", len(chat.Files(ops, card.ID)))
	}
	// The question carried the rule's expression, from generatorURL.
	q := m.Requests()[0].Messages
	if question := q[len(q)-1].Content; !strings.Contains(question, `"expr": "node_load1{job=\"node\"} \u003e= 0"`) || !strings.Contains(question, "promql_range over the last hour") {
		t.Errorf("the first look's question:\n%s", question)
	}
	for _, p := range chat.BotPosts(ops, card.ID) {
		if p.ID != card.ID && len(p.Buttons) > 0 { // the card has its acknowledge buttons
			t.Errorf("a datasource read asked for an approval: %q", p.Text)
		}
	}

	// The daemon keeps working after the failed read.
	chat.Mention("bob", ops, card.ID, "still there?")
	r.waitPost(ops, card.ID, "Still here.")
	r.stop()

	// The chain: each read is a pass decision and a datasource_query
	// event; the Prometheus one covers the last hour.
	db, err := store.Open(filepath.Join(r.stateDir, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var recs []agentcore.DatasourcePayload
	gates := 0
	for _, s := range mustSessions(t, db) {
		for ev, err := range db.Events(s, 1) {
			if err != nil {
				t.Fatal(err)
			}
			p, _ := agentcore.Decode(ev)
			switch p := p.(type) {
			case *agentcore.DatasourcePayload:
				recs = append(recs, *p)
			case *agentcore.GatePayload:
				if p.Rule == "datasource" && p.Verdict == "pass" && p.Action == "run" {
					gates++
				}
			}
		}
	}
	if len(recs) != 4 || gates != 4 {
		t.Fatalf("%d datasource_query events, %d datasource decisions; want 4 each: %+v", len(recs), gates, recs)
	}
	p := recs[0]
	start, _ := time.Parse(time.RFC3339, p.Start)
	end, _ := time.Parse(time.RFC3339, p.End)
	if p.Tool != agentcore.ToolPromRange || p.Query != expr || p.Endpoint != "/api/v1/query_range" || end.Sub(start) != time.Hour || p.Series != 1 || p.ResultSize == 0 {
		t.Errorf("the Prometheus read's record: %+v", p)
	}
	if recs[3].Error == "" || !strings.Contains(recs[3].Error, "500") {
		t.Errorf("the failed read's record: %+v", recs[3])
	}
	if len(loki.queries) != 1 || loki.queries[0] != `{job="app"} |= "error"` {
		t.Errorf("Loki was asked %q", loki.queries)
	}
}

func mustJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mustSessions lists the chain's sessions.
func mustSessions(t *testing.T, db *store.DB) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for ev, err := range db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Session != "" && !seen[ev.Session] {
			seen[ev.Session] = true
			out = append(out, ev.Session)
		}
	}
	return out
}

// TestDatasourcesReload: a SIGHUP that adds a datasource gives the model
// its tools at the next message; one that names a credentials file the
// daemon did not start with is refused (the sandbox would not hide it),
// and the running sources stay.
func TestDatasourcesReload(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t)
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"db"},"value":[1700000000,"42"]}]}}`)
	}))
	defer prom.Close()
	m := modelFunc(t, func(r fakemodel.Request) fakemodel.Reply {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return fakemodel.Reply{Content: "GOT " + last.Content}
		}
		for _, tl := range r.Tools {
			if tl.Function.Name == agentcore.ToolPromQuery {
				return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: agentcore.ToolPromQuery, Args: `{"query":"up"}`}}}
			}
		}
		return fakemodel.Reply{Content: "NO DATASOURCE TOOLS"}
	})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()
	first := chat.Mention("alice", ops, "", "metrics?")
	r.waitPost(ops, first, "NO DATASOURCE TOOLS")

	start, err := os.ReadFile(r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	withProm := string(start) + "datasources:\n  - {name: prom, type: prometheus, url: \"" + prom.URL + "\"}\n"
	r.writeConfig(withProm)
	r.hangup()
	r.waitReloaded(1)
	second := chat.Mention("alice", ops, "", "metrics now?")
	r.waitPost(ops, second, "GOT prometheus prom answered (/api/v1/query):")

	pw := writeSecret(t, t.TempDir(), "loki.pw", "a-loki-password-0123")
	r.writeConfig(withProm + "  - {name: logs, type: loki, url: \"http://127.0.0.1:9\", username: u, password_file: \"" + pw + "\"}\n")
	r.hangup()
	r.waitFor("the refusal naming the new password file", func() bool {
		return strings.Contains(r.log.String(), "cannot change without a restart") && strings.Contains(r.log.String(), "datasources[1].password_file")
	})
	third := chat.Mention("alice", ops, "", "and now?")
	r.waitPost(ops, third, "GOT prometheus prom answered")
	r.stop()
}
