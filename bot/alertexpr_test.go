package bot

import (
	"strings"
	"testing"
	"time"
)

func TestAlertExpr(t *testing.T) {
	for url, want := range map[string]string{
		"http://prom:9090/graph?g0.expr=node_load1+%3E+0&g0.tab=1":                  "node_load1 > 0",
		"http://prom:9090/graph?g0.expr=sum+by+%28job%29+%28%0A++up%0A%29+%3D%3D+0": "sum by (job) ( up ) == 0",
		"http://grafana/alerting/grafana/abc/view":                                  "",
		"http://prom/graph?g0.expr=" + strings.Repeat("a", maxExpr+1):               "",
		"::not a url":                   "",
		"http://prom/graph?g0.expr=%ZZ": "",
	} {
		if got := AlertExpr(url); got != want {
			t.Errorf("AlertExpr(%q) = %q; want %q", url, got, want)
		}
	}
}

// TestFirstLookQueriesTheExpression: with a Prometheus datasource, the
// first look's question carries each alert's expression inside the data
// markers and asks for it over the last hour; without one, neither.
func TestFirstLookQueriesTheExpression(t *testing.T) {
	wh := Webhook{Status: "firing", Alerts: []WebhookAlert{{Status: "firing", Labels: map[string]string{"alertname": "Load"},
		StartsAt: time.Unix(0, 0), GeneratorURL: "http://prom:9090/graph?g0.expr=node_load1+%3E+0&g0.tab=1"}}}
	q := alertQuestion(wh, nil, true)
	data := q[strings.Index(q, "<<<ALERT DATA"):]
	if !strings.Contains(data, `"expr": "node_load1 \u003e 0"`) || !strings.Contains(q, "promql_range over the last hour") {
		t.Errorf("question:\n%s", q)
	}
	if q := alertQuestion(wh, nil, false); strings.Contains(q, `"expr"`) || strings.Contains(q, "promql_range") {
		t.Errorf("question without Prometheus:\n%s", q)
	}
}

func FuzzAlertExpr(f *testing.F) {
	f.Add("http://prom:9090/graph?g0.expr=up&g0.tab=1")
	f.Add("http://x/?g0.expr=%0A%00")
	f.Fuzz(func(t *testing.T, u string) {
		e := AlertExpr(u)
		if len(e) > maxExpr || strings.ContainsAny(e, "\n\x00") || strings.TrimSpace(e) != e {
			t.Fatalf("AlertExpr(%q) = %q", u, e)
		}
	})
}
