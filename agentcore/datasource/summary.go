package datasource

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// maxLabels bounds a series' labels as the model sees them.
const maxLabels = 160

// summarise writes the model's view of a PromQL (or LogQL metric) value
// to b: the series count, then a compact table of at most top series
// (the largest first): for an instant vector its value, for a range its
// min, max and last value and point count. It returns the series count.
func summarise(b *strings.Builder, v model.Value, top int) int {
	if top <= 0 {
		top = 20
	}
	switch v := v.(type) {
	case model.Vector:
		fmt.Fprintf(b, "%d series", len(v))
		if len(v) == 0 {
			b.WriteString(" (empty result)\n")
			return 0
		}
		fmt.Fprintf(b, " at %s\n", v[0].Timestamp.Time().UTC().Format(time.RFC3339))
		rows := slices.Clone(v)
		slices.SortStableFunc(rows, func(x, y *model.Sample) int { return cmpDesc(float64(x.Value), float64(y.Value)) })
		shown := rows[:min(len(rows), top)]
		if len(rows) > top {
			fmt.Fprintf(b, "the %d largest:\n", top)
		}
		fmt.Fprintf(b, "value\tseries\n")
		for _, s := range shown {
			fmt.Fprintf(b, "%s\t%s\n", num(float64(s.Value)), labels(s.Metric))
		}
		return len(v)
	case model.Matrix:
		points := 0
		type row struct {
			m             model.Metric
			lo, hi, last  float64
			n             int
			first, lastAt time.Time
		}
		rows := make([]row, 0, len(v))
		for _, ss := range v {
			if len(ss.Values) == 0 {
				continue
			}
			r := row{m: ss.Metric, lo: math.Inf(1), hi: math.Inf(-1), n: len(ss.Values),
				first: ss.Values[0].Timestamp.Time(), lastAt: ss.Values[len(ss.Values)-1].Timestamp.Time()}
			for _, p := range ss.Values {
				f := float64(p.Value)
				r.lo, r.hi = math.Min(r.lo, f), math.Max(r.hi, f)
			}
			r.last = float64(ss.Values[len(ss.Values)-1].Value)
			points += r.n
			rows = append(rows, r)
		}
		fmt.Fprintf(b, "%d series, %d points", len(v), points)
		if len(rows) == 0 {
			b.WriteString(" (empty result)\n")
			return len(v)
		}
		from, to := rows[0].first, rows[0].lastAt
		for _, r := range rows {
			from, to = minTime(from, r.first), maxTime(to, r.lastAt)
		}
		fmt.Fprintf(b, " from %s to %s\n", from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
		slices.SortStableFunc(rows, func(x, y row) int { return cmpDesc(x.last, y.last) })
		if len(rows) > top {
			fmt.Fprintf(b, "the %d with the largest last value:\n", top)
		}
		b.WriteString("min\tmax\tlast\tpoints\tseries\n")
		for _, r := range rows[:min(len(rows), top)] {
			fmt.Fprintf(b, "%s\t%s\t%s\t%d\t%s\n", num(r.lo), num(r.hi), num(r.last), r.n, labels(r.m))
		}
		return len(v)
	case *model.Scalar:
		fmt.Fprintf(b, "scalar %s at %s\n", num(float64(v.Value)), v.Timestamp.Time().UTC().Format(time.RFC3339))
		return 1
	case *model.String:
		fmt.Fprintf(b, "string %q at %s\n", cut(v.Value, 500), v.Timestamp.Time().UTC().Format(time.RFC3339))
		return 1
	}
	b.WriteString("no result\n")
	return 0
}

// cmpDesc orders larger first, NaN last.
func cmpDesc(x, y float64) int {
	switch {
	case math.IsNaN(x) && math.IsNaN(y):
		return 0
	case math.IsNaN(x):
		return 1
	case math.IsNaN(y):
		return -1
	}
	return cmp.Compare(y, x)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// num is a value in at most 6 significant digits.
func num(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

// labels is a series' name and labels on one line, cut at maxLabels bytes.
func labels(m model.Metric) string {
	s := m.String()
	if len(m) == 0 {
		s = "{}"
	}
	return cut(s, maxLabels)
}

// cut shortens s to at most n bytes (valid UTF-8, "…" added), on one line.
func cut(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
