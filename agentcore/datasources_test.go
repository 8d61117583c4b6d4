package agentcore

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/datasource"
	"github.com/thinbot/thinbot/skills"
)

// fakeProm answers Prometheus's query API in its wire format; the
// sources at /bad ("bad", "slow") answer as mode says (500, hang, huge).
func fakeProm(t *testing.T, mode *atomic.Value) *httptest.Server {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if strings.HasPrefix(r.URL.Path, "/bad/") {
			switch mode.Load() {
			case "500":
				http.Error(w, "storage is on fire", http.StatusInternalServerError)
			case "hang":
				select {
				case <-r.Context().Done():
				case <-release:
				}
			case "huge":
				io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"x":"`)
				chunk := strings.Repeat("a", 1<<16)
				for i := 0; i < 1600; i++ { // 100 MiB, unless the client hangs up
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[`+
			`{"metric":{"__name__":"up","job":"node","instance":"a:9100"},"values":[[1700000000,"1"],[1700000060,"0"],[1700000120,"1"]]},`+
			`{"metric":{"__name__":"up","job":"api","instance":"b:80"},"values":[[1700000000,"0"],[1700000060,"0"]]}]}}`)
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	return srv
}

// TestDatasourceToolsRecordAndSurviveBadAnswers: a range query reaches the
// model as a summary (series, min/max/last), recorded as a gate decision
// (pass, rule datasource), a datasource_query event with the whole answer,
// and the tool result; a source that answers 500, hangs or answers 100 MB
// gives the model a clear error each, recorded too, and the run goes on.
func TestDatasourceToolsRecordAndSurviveBadAnswers(t *testing.T) {
	var mode atomic.Value // the handler of a timed-out request may still read it
	mode.Store("")
	srv := fakeProm(t, &mode)
	good, _ := datasource.New(datasource.Config{Name: "prom", Kind: datasource.Prometheus, URL: srv.URL})
	// "slow" is the one to time out; "bad" gets a timeout a loaded
	// machine under -race cannot reach while it reads the huge answer's
	// first MiB (over 300 ms there).
	bad, _ := datasource.New(datasource.Config{Name: "bad", Kind: datasource.Prometheus, URL: srv.URL + "/bad", Timeout: time.Minute, MaxBytes: 1 << 20})
	slow, _ := datasource.New(datasource.Config{Name: "slow", Kind: datasource.Prometheus, URL: srv.URL + "/bad", Timeout: 300 * time.Millisecond, MaxBytes: 1 << 20})
	var saw []string
	see := func(next func(Request) (Response, error)) func(Request) (Response, error) {
		return func(r Request) (Response, error) {
			saw = append(saw, lastToolContent(r))
			return next(r)
		}
	}
	setMode := func(m string, next func(Request) (Response, error)) func(Request) (Response, error) {
		return func(r Request) (Response, error) { mode.Store(m); return next(r) }
	}
	f := newFixture(t, Config{Datasources: []*datasource.Source{good, bad, slow}},
		func(r Request) (Response, error) {
			if !hasTool(r.Tools, ToolPromRange) || !hasTool(r.Tools, ToolPromQuery) || hasTool(r.Tools, ToolLogQuery) {
				t.Errorf("tools offered: %v", r.Tools)
			}
			return call(ToolPromRange, `{"query":"up","datasource":"prom","window":"30m"}`)(r)
		},
		see(call(ToolPromQuery, `{"query":"up"}`)), // two sources: which?
		see(setMode("500", call(ToolPromQuery, `{"query":"up","datasource":"bad"}`))),
		see(setMode("hang", call(ToolPromQuery, `{"query":"up","datasource":"slow"}`))),
		see(setMode("huge", call(ToolPromQuery, `{"query":"up","datasource":"bad"}`))),
		see(say("done")))
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "is up up?", Dir: f.dir})
	if err != nil || res.Status != StatusAnswered {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	for i, want := range []string{
		"2 series, 5 points",
		"several prometheus datasources are configured (prom, bad, slow)",
		"500: storage is on fire",
		"no answer within 300ms",
		"answer too large (more than 1048576 bytes); thinbot stopped reading it. Narrow the query",
	} {
		if i >= len(saw) || !strings.Contains(saw[i], want) {
			t.Errorf("model's view %d lacks %q: %q", i, want, saw)
		}
	}
	if len(saw) > 0 && !strings.Contains(saw[0], "0\t1\t1\t3\tup{instance=\"a:9100\", job=\"node\"}") {
		t.Errorf("summary:\n%s", saw[0])
	}
	var gates, queries []string
	var first DatasourcePayload
	prevType := ""
	for _, ev := range f.events(t, "s") {
		p, _ := Decode(ev)
		switch p := p.(type) {
		case *GatePayload:
			gates = append(gates, p.Verdict+" "+p.Rule+" "+p.Action+" "+p.Command)
		case *DatasourcePayload:
			if prevType != EvGateDecision {
				t.Errorf("datasource_query after %s, not after its gate decision", prevType)
			}
			if len(queries) == 0 {
				first = *p
			}
			queries = append(queries, p.Datasource+" "+p.Endpoint+" "+p.Error)
		}
		prevType = ev.Type
	}
	if len(gates) != 4 || gates[0] != "pass datasource run promql_range prom: up [30m step 8s]" {
		t.Errorf("gate decisions: %q", gates)
	}
	if len(queries) != 4 || !strings.Contains(queries[1], "500") || !strings.Contains(queries[2], "no answer within") || !strings.Contains(queries[3], "too large") {
		t.Errorf("datasource_query events: %q", queries)
	}
	if first.Series != 2 || first.Start == "" || first.End == "" || first.Step != "8s" || first.ResultSize == 0 || len(first.ResultSHA) != 64 ||
		!json.Valid([]byte(first.Result)) || !strings.Contains(first.Result, `"a:9100"`) {
		t.Errorf("first query's record: %+v", first)
	}
}

// TestDatasourceToolInTextProtocol: a model without tool calling is told
// how to call the datasource tools and its text-form call runs.
func TestDatasourceToolInTextProtocol(t *testing.T) {
	var mode atomic.Value
	mode.Store("")
	srv := fakeProm(t, &mode)
	good, _ := datasource.New(datasource.Config{Name: "prom", Kind: datasource.Prometheus, URL: srv.URL})
	var prompt, saw string
	f := newFixture(t, Config{TextProtocol: true, Datasources: []*datasource.Source{good}},
		func(r Request) (Response, error) {
			prompt = r.Messages[0].Content
			return Response{Content: `<tool_call>{"name": "promql_range", "arguments": {"query": "up"}}</tool_call>`}, nil
		},
		func(r Request) (Response, error) { saw = lastToolContent(r); return Response{Content: "ok"}, nil })
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "up?", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(prompt, "- prom (prometheus): promql_query, promql_range") || !strings.Contains(prompt, `<tool_call>{"name": "promql_range"`) {
		t.Errorf("system prompt:\n%s", prompt)
	}
	if !strings.Contains(saw, "Result of promql_range") || !strings.Contains(saw, "2 series, 5 points") {
		t.Errorf("model saw %q", saw)
	}
}

// TestPromqlSkillCommand: the promql pack's `!promql QUERY` runs the
// datasource tool without the model, recorded as the model's calls are
// (decision, datasource_query, result), and answers with the summary.
func TestPromqlSkillCommand(t *testing.T) {
	var mode atomic.Value
	mode.Store("")
	srv := fakeProm(t, &mode)
	good, _ := datasource.New(datasource.Config{Name: "prom", Kind: datasource.Prometheus, URL: srv.URL})
	set := skills.Load([]string{"../skills"}, skills.Options{Probe: skills.Probe{UID: -1}})
	f := newFixture(t, Config{Skills: set, Datasources: []*datasource.Source{good}})
	res, err := f.a.RunSkillCommand(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "!promql sum by (job) (up)", Dir: f.dir})
	if err != nil || !strings.Contains(res.Answer, "`promql_query sum by (job) (up)`") || !strings.Contains(res.Answer, "2 series, 5 points") {
		t.Fatalf("RunSkillCommand = %+v, %v", res, err)
	}
	var query string
	for _, ev := range f.events(t, "s") {
		if p, _ := Decode(ev); p != nil {
			if d, ok := p.(*DatasourcePayload); ok {
				query = d.Query
			}
		}
	}
	if query != "sum by (job) (up)" {
		t.Errorf("recorded query %q", query)
	}
	// Without a Prometheus datasource: a clear error, nothing asked.
	f2 := newFixture(t, Config{Skills: set})
	res, err = f2.a.RunSkillCommand(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "!promql up", Dir: f2.dir})
	if err != nil || !strings.Contains(res.Answer, "no prometheus datasource is configured") {
		t.Errorf("without a source: %+v, %v", res, err)
	}
}

// TestDatasourceReadStoppedByAPerson: a /stop while a read waits for its
// source ends the read, and its result records who stopped it.
func TestDatasourceReadStoppedByAPerson(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel(&StopCause{Kind: StopUser, By: "user:U1 (alice)", Via: "/stop"})
		<-release
	}))
	defer srv.Close()
	defer close(release)
	src, _ := datasource.New(datasource.Config{Name: "prom", Kind: datasource.Prometheus, URL: srv.URL})
	f := newFixture(t, Config{Datasources: []*datasource.Source{src}}, call(ToolPromQuery, `{"query":"up"}`))
	res, _ := f.a.Run(ctx, Turn{Session: "s", Actor: "user:al", Text: "up?", Dir: f.dir})
	if res.Status != StatusCancelled {
		t.Fatalf("status %q", res.Status)
	}
	var got *ToolResultPayload
	for _, ev := range f.events(t, "s") {
		if p, _ := Decode(ev); p != nil {
			if tr, ok := p.(*ToolResultPayload); ok {
				got = tr
			}
		}
	}
	if got == nil || got.Cause != StopUser || got.CauseBy != "user:U1 (alice)" || !got.IsError {
		t.Errorf("tool result: %+v", got)
	}
}
