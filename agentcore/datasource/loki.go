package datasource

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Logs runs a LogQL query over r (Loki's query_range, newest lines first),
// at most limit lines (0 means 100); the summary shows the newest lines
// with their stream, or a metric query's series as PromQL's do.
func (s *Source) Logs(ctx context.Context, query string, r Range, limit int) (Result, error) {
	const endpoint = "/loki/api/v1/query_range"
	if s.cfg.Kind != Loki {
		return Result{}, fmt.Errorf("datasource %s is %s, not loki", s.cfg.Name, s.cfg.Kind)
	}
	if limit <= 0 {
		limit = 100
	}
	q := url.Values{"query": {query}, "start": {strconv.FormatInt(r.Start.UnixNano(), 10)},
		"end": {strconv.FormatInt(r.End.UnixNano(), 10)}, "limit": {strconv.Itoa(limit)}, "direction": {"backward"}}
	if r.Step > 0 {
		q.Set("step", strconv.FormatFloat(r.Step.Seconds(), 'f', -1, 64))
	}
	body, err := s.get(ctx, endpoint, q)
	if err != nil {
		return Result{Endpoint: endpoint}, err
	}
	res, err := LokiSummary(body, limit)
	if err != nil {
		return Result{Endpoint: endpoint}, fmt.Errorf("loki %q: %w", s.cfg.Name, err)
	}
	res.Endpoint = endpoint
	return res, nil
}

// LokiSummary reads a Loki query answer (the JSON of query and
// query_range) and sums it up: streams and line counts and the newest
// lines, at most show of them; a metric query's matrix or vector as
// PromQL's. Data is the answer's data.
func LokiSummary(body []byte, show int) (Result, error) {
	var ans struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return Result{}, fmt.Errorf("not a Loki answer: %w", err)
	}
	if ans.Status != "success" {
		return Result{}, fmt.Errorf("not a Loki answer: status %q", ans.Status)
	}
	if show <= 0 {
		show = 100
	}
	res := Result{Data: body}
	var b strings.Builder
	switch ans.Data.ResultType {
	case "streams":
		var streams []struct {
			Stream map[string]string `json:"stream"`
			Values [][2]string       `json:"values"`
		}
		if err := json.Unmarshal(ans.Data.Result, &streams); err != nil {
			return Result{}, fmt.Errorf("Loki streams: %w", err)
		}
		type line struct {
			at     int64
			stream int
			text   string
		}
		var lines []line
		for i, st := range streams {
			for _, v := range st.Values {
				ns, err := strconv.ParseInt(v[0], 10, 64)
				if err != nil {
					return Result{}, fmt.Errorf("Loki streams: timestamp %q: %w", v[0], err)
				}
				lines = append(lines, line{at: ns, stream: i, text: v[1]})
			}
		}
		res.Series = len(streams)
		fmt.Fprintf(&b, "%d streams, %d lines", len(streams), len(lines))
		if len(lines) == 0 {
			b.WriteString(" (no log lines in the window)")
			break
		}
		slices.SortStableFunc(lines, func(x, y line) int { return -cmpInt(x.at, y.at) })
		fmt.Fprintf(&b, " from %s to %s\n", time.Unix(0, lines[len(lines)-1].at).UTC().Format(time.RFC3339), time.Unix(0, lines[0].at).UTC().Format(time.RFC3339))
		b.WriteString("streams:\n")
		for i, st := range streams[:min(len(streams), 20)] {
			fmt.Fprintf(&b, "s%d\t%d lines\t%s\n", i, len(st.Values), cut(model.LabelSet(labelSet(st.Stream)).String(), maxLabels))
		}
		if len(streams) > 20 {
			fmt.Fprintf(&b, "… and %d more streams\n", len(streams)-20)
		}
		if len(lines) > show {
			fmt.Fprintf(&b, "the newest %d lines:\n", show)
		} else {
			b.WriteString("lines, newest first:\n")
		}
		for _, l := range lines[:min(len(lines), show)] {
			fmt.Fprintf(&b, "%s s%d %s\n", time.Unix(0, l.at).UTC().Format("15:04:05.000"), l.stream, cut(l.text, 300))
		}
	case "matrix":
		var m model.Matrix
		if err := json.Unmarshal(ans.Data.Result, &m); err != nil {
			return Result{}, fmt.Errorf("Loki matrix: %w", err)
		}
		res.Series = summarise(&b, m, 20)
	case "vector":
		var v model.Vector
		if err := json.Unmarshal(ans.Data.Result, &v); err != nil {
			return Result{}, fmt.Errorf("Loki vector: %w", err)
		}
		res.Series = summarise(&b, v, 20)
	default:
		return Result{}, fmt.Errorf("Loki result type %q is not streams, matrix or vector", ans.Data.ResultType)
	}
	res.Summary = strings.TrimRight(b.String(), "\n")
	return res, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func labelSet(m map[string]string) model.LabelSet {
	ls := make(model.LabelSet, len(m))
	for k, v := range m {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	return ls
}
