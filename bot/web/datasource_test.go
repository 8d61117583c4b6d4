package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore/datasource"
)

// TestDatasourceAnswerInFullFromTheChain: the console's full output of a
// datasource read is the whole answer its datasource_query event keeps,
// not the summary the model read, and its SHA-256 is checked.
func TestDatasourceAnswerInFullFromTheChain(t *testing.T) {
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[`+
			`{"metric":{"__name__":"up","instance":"db-7:9100"},"values":[[1700000000,"1"],[1700000060,"0"]]}]}}`)
	}))
	defer prom.Close()
	src, err := datasource.New(datasource.Config{Name: "prom", Kind: datasource.Prometheus, URL: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigOpts{Datasources: []*datasource.Source{src}})
	tid := r.newThread("alice", "query the metrics")
	r.waitPost(tid, "Queried.")
	status := r.waitPost(tid, "promql_range prom")
	code, body := r.do("bob", "GET", "/api/threads/"+tid+"/output?command="+url.QueryEscape("promql_range prom: up [1h step 15s]")+
		"&after="+url.QueryEscape(status.Time.Format(time.RFC3339Nano))+"&n=0", "")
	var v struct {
		Output   string
		Verified bool
	}
	if err := json.Unmarshal([]byte(body), &v); code != http.StatusOK || err != nil {
		t.Fatalf("output: %d %.300s %v", code, body, err)
	}
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(v.Output), &data); err != nil || !v.Verified || data.ResultType != "matrix" ||
		len(data.Result) != 1 || data.Result[0].Metric["instance"] != "db-7:9100" || len(data.Result[0].Values) != 2 {
		t.Errorf("output %q (verified %v): %v", v.Output, v.Verified, err)
	}
	if strings.Contains(v.Output, "min\tmax") {
		t.Error("the console shows the model's summary, not the answer")
	}
}
