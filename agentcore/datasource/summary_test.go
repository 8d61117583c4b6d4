package datasource

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
)

func TestLokiSummary(t *testing.T) {
	body := `{"status":"success","data":{"resultType":"streams","result":[
{"stream":{"job":"api","level":"error"},"values":[["1700000002000000000","db timeout"],["1700000000000000000","db timeout\nsecond line"]]},
{"stream":{"job":"web"},"values":[["1700000001000000000","GET /"]]}]}}`
	res, err := LokiSummary([]byte(body), 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 streams, 3 lines", `s0	2 lines	{job="api", level="error"}`, "the newest 2 lines:", "22:13:22.000 s0 db timeout\n22:13:21.000 s1 GET /"} {
		if !strings.Contains(res.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.Summary)
		}
	}
	if res.Series != 2 || strings.Contains(res.Summary, "second line") {
		t.Errorf("series %d; summary:\n%s", res.Series, res.Summary)
	}
	metric := `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"job":"api"},"values":[[1700000000,"1"],[1700000060,"5"],[1700000120,"3"]]}]}}`
	res, err = LokiSummary([]byte(metric), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "1 series, 3 points") || !strings.Contains(res.Summary, "1\t5\t3\t3\t{job=\"api\"}") {
		t.Errorf("matrix summary:\n%s", res.Summary)
	}
}

func TestAlertmanagerSummaries(t *testing.T) {
	alerts := `[{"labels":{"alertname":"HighLoad","instance":"web-1"},"annotations":{"summary":"load is high"},"startsAt":"2026-12-04T10:00:00Z","status":{"state":"active"}},
{"labels":{"alertname":"DiskFull"},"annotations":{},"startsAt":"2026-12-04T11:00:00Z","status":{"state":"suppressed"}}]`
	res, err := AlertsSummary([]byte(alerts), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "2 alerts, 1 active, 1 suppressed") || !strings.Contains(res.Summary, "active\t2026-12-04T10:00:00Z\tHighLoad\t{instance=\"web-1\"}\tload is high") {
		t.Errorf("alerts summary:\n%s", res.Summary)
	}
	sil := `[{"id":"s1","matchers":[{"name":"alertname","value":"HighLoad","isRegex":false,"isEqual":true}],"startsAt":"2026-12-04T10:00:00Z","endsAt":"2026-12-04T12:00:00Z","createdBy":"alice","comment":"deploy","status":{"state":"active"}},
{"id":"s2","matchers":[],"endsAt":"2026-12-01T00:00:00Z","status":{"state":"expired"}}]`
	res, err = SilencesSummary([]byte(sil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "1 silences active or pending, 1 expired") || !strings.Contains(res.Summary, `{alertname="HighLoad"}	alice	deploy	s1`) {
		t.Errorf("silences summary:\n%s", res.Summary)
	}
	if _, err := AlertsSummary([]byte(`{"not":"a list"}`), 0); err == nil {
		t.Error("AlertsSummary of an object: no error")
	}
}

func TestSplitMatchers(t *testing.T) {
	got := splitMatchers(`alertname="A", job=~"x,y", msg="say \"hi\", ok" ,`)
	want := []string{`alertname="A"`, `job=~"x,y"`, `msg="say \"hi\", ok"`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("splitMatchers = %q; want %q", got, want)
	}
}

// FuzzLokiSummary: any answer gives a summary or an error, never a panic,
// and a summary is bounded by the lines it may show.
func FuzzLokiSummary(f *testing.F) {
	f.Add([]byte(`{"status":"success","data":{"resultType":"streams","result":[{"stream":{"a":"b"},"values":[["1","x"]]}]}}`), 1)
	f.Add([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"NaN"]]}]}}`), 5)
	f.Add([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"value":[1,"+Inf"]}]}}`), 0)
	f.Fuzz(func(t *testing.T, body []byte, show int) {
		show = show % 50
		res, err := LokiSummary(body, show)
		if err != nil {
			return
		}
		if show <= 0 {
			show = 100
		}
		if n := strings.Count(res.Summary, "\n"); n > show+60 {
			t.Fatalf("summary of %d lines for show %d", n, show)
		}
	})
}

// FuzzAlertmanagerSummaries: the same for Alertmanager's lists.
func FuzzAlertmanagerSummaries(f *testing.F) {
	f.Add([]byte(`[{"labels":{"alertname":"A"},"startsAt":"2026-12-04T10:00:00Z","status":{"state":"active"}}]`))
	f.Add([]byte(`[{"id":"s","matchers":[{"name":"a","value":"b","isRegex":true,"isEqual":false}],"status":{"state":"active"}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if res, err := AlertsSummary(body, 5); err == nil && strings.Count(res.Summary, "\n") > 7 {
			t.Fatalf("alerts summary too long:\n%s", res.Summary)
		}
		if res, err := SilencesSummary(body, 5); err == nil && strings.Count(res.Summary, "\n") > 8 {
			t.Fatalf("silences summary too long:\n%s", res.Summary)
		}
	})
}

// BenchmarkSummariseMatrix: the model's summary of a range answer of 5000
// series of 240 points (what a careless `rate(x[5m])` over an hour
// returns on a big cluster).
func BenchmarkSummariseMatrix(b *testing.B) {
	m := make(model.Matrix, 5000)
	for i := range m {
		ss := &model.SampleStream{Metric: model.Metric{"__name__": "x", "instance": model.LabelValue(fmt.Sprintf("host-%d:9100", i))}}
		for j := range 240 {
			ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.Time(int64(j) * 15000), Value: model.SampleValue(i*j%97) / 7})
		}
		m[i] = ss
	}
	b.ReportAllocs()
	for b.Loop() {
		var s strings.Builder
		if summarise(&s, m, 20) != 5000 {
			b.Fatal("series")
		}
	}
}
