package agentcore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/thinbot/thinbot/agentcore/datasource"
	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// The datasource tools (Config.Datasources): reads of Prometheus, Loki
// and Alertmanager through package datasource, offered when a source of
// their kind is configured. They run without an approval (a source sends
// only its API's read requests) and each call is recorded: a gate_decision
// (verdict pass, rule datasource) before it, an EvDatasourceQuery with the
// answer after it, and the tool_result with the summary the model reads.
const (
	ToolPromQuery = "promql_query"
	ToolPromRange = "promql_range"
	ToolLogQuery  = "logql_query"
	ToolAlerts    = "active_alerts"
	ToolSilences  = "silences"
)

// Datasource query bounds.
const (
	// DefaultWindow is a range query's window when the call names none:
	// the last hour (an alert's first look queries its expression so).
	DefaultWindow  = time.Hour
	maxPromWindow  = 7 * 24 * time.Hour
	maxLogWindow   = 24 * time.Hour
	maxRangePoints = 240 // a step finer than window/maxRangePoints is coarsened
	// datasourceKept bounds the answer's data an EvDatasourceQuery keeps
	// (its size and SHA-256 cover the whole).
	datasourceKept = 1 << 20
)

// datasourceKind is the kind of source each tool asks.
var datasourceKind = map[string]string{
	ToolPromQuery: datasource.Prometheus, ToolPromRange: datasource.Prometheus,
	ToolLogQuery: datasource.Loki, ToolAlerts: datasource.Alertmanager, ToolSilences: datasource.Alertmanager,
}

const dsParam = `"datasource":{"type":"string","description":"optional: the datasource's name, when several of its kind are configured"}`

// datasourceTools are the tools for the kinds of the configured sources.
func datasourceTools(srcs []*datasource.Source) []Tool {
	has := map[string]bool{}
	for _, s := range srcs {
		has[s.Kind()] = true
	}
	var out []Tool
	if has[datasource.Prometheus] {
		out = append(out,
			Tool{Name: ToolPromQuery, Description: "Run a PromQL instant query against Prometheus (read-only, no approval). Returns the series count and a compact table of the largest values.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"PromQL expression"},"time":{"type":"string","description":"optional RFC 3339 time; default now"},"top":{"type":"integer","description":"rows shown, default 20"},` + dsParam + `},"required":["query"]}`)},
			Tool{Name: ToolPromRange, Description: "Run a PromQL range query over a window ending now or at end (read-only, no approval). Returns per series min, max and last value, largest last first.",
				Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"PromQL expression"},"window":{"type":"string","description":"how far back: 15m, 1h, 6h, 2d (default 1h, at most 7d)"},"end":{"type":"string","description":"optional RFC 3339 end; default now"},"step":{"type":"string","description":"optional resolution, e.g. 30s; default window/240"},"top":{"type":"integer","description":"rows shown, default 20"},` + dsParam + `},"required":["query"]}`)})
	}
	if has[datasource.Loki] {
		out = append(out, Tool{Name: ToolLogQuery, Description: "Run a LogQL query against Loki over a window ending now or at end (read-only, no approval). Returns the streams and the newest lines, or a metric query's series.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"LogQL, e.g. {job=\"api\"} |= \"error\""},"window":{"type":"string","description":"how far back: 15m, 1h (default 1h, at most 24h)"},"end":{"type":"string","description":"optional RFC 3339 end; default now"},"limit":{"type":"integer","description":"lines, default 100, at most 1000"},` + dsParam + `},"required":["query"]}`)})
	}
	if has[datasource.Alertmanager] {
		out = append(out,
			Tool{Name: ToolAlerts, Description: "List the alerts Alertmanager holds (firing, silenced, inhibited), optionally filtered by label matchers (read-only, no approval).",
				Parameters: json.RawMessage(`{"type":"object","properties":{"filter":{"type":"string","description":"optional matchers, comma-separated: alertname=\"HighLoad\", severity=~\"crit.*\""},` + dsParam + `}}`)},
			Tool{Name: ToolSilences, Description: "List Alertmanager's active and pending silences (read-only, no approval).",
				Parameters: json.RawMessage(`{"type":"object","properties":{` + dsParam + `}}`)})
	}
	return out
}

// datasourcePrompt is the system prompt's datasource section: the
// sources by name, and in the text protocol how to call their tools.
func datasourcePrompt(srcs []*datasource.Source, text bool) string {
	if len(srcs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n# Datasources\nRead-only queries, no approval needed; prefer them to curl.\n")
	for _, s := range srcs {
		tools := map[string]string{datasource.Prometheus: ToolPromQuery + ", " + ToolPromRange, datasource.Loki: ToolLogQuery,
			datasource.Alertmanager: ToolAlerts + ", " + ToolSilences}[s.Kind()]
		fmt.Fprintf(&b, "- %s (%s): %s\n", s.Name(), s.Kind(), tools)
	}
	if text {
		b.WriteString(`Call one with a line like <tool_call>{"name": "promql_range", "arguments": {"query": "up", "window": "1h"}}</tool_call>` + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// pickSource returns the configured source of kind named name ("" for
// the only one of its kind).
func pickSource(srcs []*datasource.Source, kind, name string) (*datasource.Source, error) {
	var names []string
	var found *datasource.Source
	for _, s := range srcs {
		if s.Kind() != kind {
			continue
		}
		names = append(names, s.Name())
		if s.Name() == name || (name == "" && found == nil) {
			found = s
		}
	}
	switch {
	case len(names) == 0:
		return nil, fmt.Errorf("no %s datasource is configured", kind)
	case name == "" && len(names) > 1:
		return nil, fmt.Errorf("several %s datasources are configured (%s): name one with datasource", kind, strings.Join(names, ", "))
	case found == nil:
		return nil, fmt.Errorf("no %s datasource is called %q; there are: %s", kind, name, strings.Join(names, ", "))
	}
	return found, nil
}

// dsQuery is one datasource call as the arguments describe it.
type dsQuery struct {
	src        *datasource.Source
	start, end time.Time
	step       time.Duration
}

// plan checks a datasource call's arguments and resolves its window.
func (r *run) plan(tool string, a toolArgs) (dsQuery, error) {
	src, err := pickSource(r.cfg.Datasources, datasourceKind[tool], a.Datasource)
	if err != nil {
		return dsQuery{}, err
	}
	q := dsQuery{src: src, end: r.cfg.Now().UTC()}
	if tool == ToolAlerts || tool == ToolSilences {
		return q, nil
	}
	if strings.TrimSpace(a.Query) == "" {
		return dsQuery{}, fmt.Errorf("%s needs the field \"query\"", tool)
	}
	at := a.End
	if tool == ToolPromQuery {
		at = a.Time
	}
	if at != "" {
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return dsQuery{}, fmt.Errorf("time %q is not RFC 3339 (2006-01-02T15:04:05Z)", at)
		}
		q.end = t.UTC()
	}
	if tool == ToolPromQuery {
		return q, nil
	}
	window := DefaultWindow
	if a.Window != "" {
		d, err := model.ParseDuration(a.Window)
		if err != nil || d <= 0 {
			return dsQuery{}, fmt.Errorf("window %q is not a duration like 15m, 1h or 2d", a.Window)
		}
		window = time.Duration(d)
	}
	limit := maxPromWindow
	if tool == ToolLogQuery {
		limit = maxLogWindow
	}
	if window > limit {
		return dsQuery{}, fmt.Errorf("window %s is longer than %s allows (%s); query a shorter one", a.Window, tool, model.Duration(limit))
	}
	q.start = q.end.Add(-window)
	if tool == ToolLogQuery {
		return q, nil
	}
	q.step = max(window/maxRangePoints, time.Second).Round(time.Second)
	if a.Step != "" {
		d, err := model.ParseDuration(a.Step)
		if err != nil || d <= 0 {
			return dsQuery{}, fmt.Errorf("step %q is not a duration like 30s or 1m", a.Step)
		}
		q.step = max(q.step, time.Duration(d))
	}
	return q, nil
}

// describe is the call as the gate decision, the status post and the
// timeline show it: tool, source, query and window.
func (q dsQuery) describe(tool string, a toolArgs) string {
	s := tool + " " + q.src.Name()
	switch tool {
	case ToolAlerts:
		if a.Filter != "" {
			s += " " + a.Filter
		}
		return s
	case ToolSilences:
		return s
	case ToolPromQuery:
		return s + ": " + a.Query
	}
	s += ": " + a.Query + " [" + model.Duration(q.end.Sub(q.start)).String()
	if q.step > 0 {
		s += " step " + model.Duration(q.step).String()
	}
	return s + "]"
}

// queryDatasource serves the datasource tools: it records the read
// decision, asks the source, records the answer, and returns the
// summary the model reads (or the error, which ends nothing: the model
// reads it and the run goes on).
func (r *run) queryDatasource(ctx context.Context, call ToolCall, a toolArgs) (string, bool, error) {
	q, perr := r.plan(call.Name, a)
	if perr != nil {
		content := "error: " + perr.Error()
		r.hookResult(CommandInfo{Tool: call.Name, Command: call.Name}, content, true)
		return content, true, nil
	}
	what := q.describe(call.Name, a)
	info := CommandInfo{Tool: call.Name, Command: what}
	d := gate.Decision{Verdict: gate.Pass, Rule: "datasource", Reason: "a read-only query of the " + q.src.Kind() + " datasource " + q.src.Name()}
	if _, _, err := r.decide(ctx, call, info, d, ""); err != nil {
		return "", false, err
	}
	info.Verdict, info.Reason = d.Verdict.String(), d.Reason
	started := r.cfg.Now()
	var (
		res datasource.Result
		err error
	)
	switch call.Name {
	case ToolPromQuery:
		res, err = q.src.Instant(ctx, a.Query, q.end, a.Top)
	case ToolPromRange:
		res, err = q.src.QueryRange(ctx, a.Query, datasource.Range{Start: q.start, End: q.end, Step: q.step}, a.Top)
	case ToolLogQuery:
		res, err = q.src.Logs(ctx, a.Query, datasource.Range{Start: q.start, End: q.end}, min(max(a.Limit, 0), 1000))
	case ToolAlerts:
		res, err = q.src.Alerts(ctx, a.Filter, a.Top)
	case ToolSilences:
		res, err = q.src.Silences(ctx, a.Top)
	}
	p := DatasourcePayload{CallID: call.ID, Tool: call.Name, Datasource: q.src.Name(), Kind: q.src.Kind(), Endpoint: res.Endpoint,
		Query: a.Query, Filter: a.Filter, Series: res.Series, ResultSize: int64(len(res.Data)),
		DurationMS: r.cfg.Now().Sub(started).Milliseconds()}
	if !q.start.IsZero() {
		p.Start, p.Step = q.start.Format(time.RFC3339), model.Duration(q.step).String()
		if q.step == 0 {
			p.Step = ""
		}
	}
	if call.Name != ToolAlerts && call.Name != ToolSilences {
		p.End = q.end.Format(time.RFC3339)
	}
	var content string
	if err != nil {
		p.Error = err.Error()
		content = r.maskOutput("error: " + err.Error() + datasourceHint(err))
		if ctx.Err() != nil { // /stop or shutdown: the result says whose
			r.stopped = CauseOf(ctx)
		}
	} else {
		sum := sha256.Sum256(res.Data)
		p.ResultSHA = hex.EncodeToString(sum[:])
		p.Result = string(res.Data)
		if len(p.Result) > datasourceKept {
			p.Result, p.ResultCut = strings.ToValidUTF8(p.Result[:datasourceKept], ""), true
		}
		content = r.maskOutput(fmt.Sprintf("%s %s answered (%s):\n%s", q.src.Kind(), q.src.Name(), res.Endpoint, res.Summary))
	}
	if _, rerr := r.record(buffered, store.Event{Type: EvDatasourceQuery, Actor: "system", Payload: mustJSON(p)}); rerr != nil {
		return "", false, rerr
	}
	if r.t.Hooks.Result != nil && err == nil {
		info.Output, info.Size = []byte(r.maskOutput(string(res.Data))), int64(len(res.Data))
	}
	r.hookResult(info, content, err != nil)
	return content, err != nil, nil
}

// datasourceHint tells the model what to do about a failed query.
func datasourceHint(err error) string {
	switch {
	case errors.Is(err, datasource.ErrTooLarge):
		return ". Narrow the query: a shorter window, a larger step, fewer series (sum by, topk), or a tighter log selector."
	case errors.Is(err, datasource.ErrTimeout):
		return ". The datasource may be overloaded or down; try a cheaper query, or say so in your answer."
	}
	return ""
}

// line is an EvDatasourceQuery as one line of text, for the timeline.
func (p DatasourcePayload) line() string {
	s := p.Tool + " " + p.Datasource + " " + p.Endpoint
	if p.Query != "" {
		s += " " + textfmt.OneLine(p.Query, 120)
	}
	if p.Start != "" {
		s += " [" + p.Start + " .. " + p.End + "]"
	}
	if p.Error != "" {
		return s + ": error: " + textfmt.OneLine(p.Error, 160)
	}
	return fmt.Sprintf("%s: %d series, %d bytes", s, p.Series, p.ResultSize)
}

// HasDatasource reports whether a datasource of kind (datasource.Prometheus,
// ...) is configured: its tools are offered.
func (a *Agent) HasDatasource(kind string) bool {
	for _, s := range a.cfg.Datasources {
		if s.Kind() == kind {
			return true
		}
	}
	return false
}
