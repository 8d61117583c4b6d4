package datasource

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Alerts lists the alerts Alertmanager holds (GET /api/v2/alerts), active,
// silenced and inhibited alike, narrowed by filter (matchers such as
// `alertname="HighLoad"`, comma-separated; "" for all); at most top rows
// are shown (0 means 30).
func (s *Source) Alerts(ctx context.Context, filter string, top int) (Result, error) {
	const endpoint = "/api/v2/alerts"
	if s.cfg.Kind != Alertmanager {
		return Result{}, fmt.Errorf("datasource %s is %s, not alertmanager", s.cfg.Name, s.cfg.Kind)
	}
	q := url.Values{}
	for _, m := range splitMatchers(filter) {
		q.Add("filter", m)
	}
	body, err := s.get(ctx, endpoint, q)
	if err != nil {
		return Result{Endpoint: endpoint}, err
	}
	res, err := AlertsSummary(body, top)
	if err != nil {
		return Result{Endpoint: endpoint}, fmt.Errorf("alertmanager %q: %w", s.cfg.Name, err)
	}
	res.Endpoint = endpoint
	return res, nil
}

// Silences lists Alertmanager's silences (GET /api/v2/silences): the
// active and pending ones, and how many expired.
func (s *Source) Silences(ctx context.Context, top int) (Result, error) {
	const endpoint = "/api/v2/silences"
	if s.cfg.Kind != Alertmanager {
		return Result{}, fmt.Errorf("datasource %s is %s, not alertmanager", s.cfg.Name, s.cfg.Kind)
	}
	body, err := s.get(ctx, endpoint, nil)
	if err != nil {
		return Result{Endpoint: endpoint}, err
	}
	res, err := SilencesSummary(body, top)
	if err != nil {
		return Result{Endpoint: endpoint}, fmt.Errorf("alertmanager %q: %w", s.cfg.Name, err)
	}
	res.Endpoint = endpoint
	return res, nil
}

// splitMatchers splits "a=\"x\", b=~\"y,z\"" at the commas outside quotes.
func splitMatchers(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, esc := false, false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case r == '\\' && quoted:
			esc = true
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			if m := strings.TrimSpace(cur.String()); m != "" {
				out = append(out, m)
			}
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if m := strings.TrimSpace(cur.String()); m != "" {
		out = append(out, m)
	}
	return out
}

// AlertsSummary sums up Alertmanager's alert list (the JSON of GET
// /api/v2/alerts): counts by state, then one row per alert, at most top.
func AlertsSummary(body []byte, top int) (Result, error) {
	type alert struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
		Status      struct {
			State string `json:"state"`
		} `json:"status"`
	}
	var alerts []alert
	if err := json.Unmarshal(body, &alerts); err != nil {
		return Result{}, fmt.Errorf("not an Alertmanager alert list: %w", err)
	}
	if top <= 0 {
		top = 30
	}
	states := map[string]int{}
	for _, a := range alerts {
		states[a.Status.State]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d alerts", len(alerts))
	for _, st := range slices.Sorted(maps.Keys(states)) {
		fmt.Fprintf(&b, ", %d %s", states[st], st)
	}
	b.WriteString("\n")
	slices.SortStableFunc(alerts, func(x, y alert) int { return y.StartsAt.Compare(x.StartsAt) })
	if len(alerts) > 0 {
		if len(alerts) > top {
			fmt.Fprintf(&b, "the %d newest:\n", top)
		}
		b.WriteString("state\tsince\talertname\tlabels\tsummary\n")
	}
	for _, a := range alerts[:min(len(alerts), top)] {
		rest := labelSet(a.Labels)
		delete(rest, "alertname")
		sum := a.Annotations["summary"]
		if sum == "" {
			sum = a.Annotations["description"]
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", a.Status.State, a.StartsAt.UTC().Format(time.RFC3339), cut(a.Labels["alertname"], 80),
			cut(rest.String(), maxLabels), cut(sum, 200))
	}
	return Result{Data: body, Series: len(alerts), Summary: strings.TrimRight(b.String(), "\n")}, nil
}

// SilencesSummary sums up Alertmanager's silence list (the JSON of GET
// /api/v2/silences): the active and pending silences, at most top, and
// how many expired.
func SilencesSummary(body []byte, top int) (Result, error) {
	type silence struct {
		ID       string `json:"id"`
		Matchers []struct {
			Name    string `json:"name"`
			Value   string `json:"value"`
			IsRegex bool   `json:"isRegex"`
			IsEqual *bool  `json:"isEqual"`
		} `json:"matchers"`
		StartsAt  time.Time `json:"startsAt"`
		EndsAt    time.Time `json:"endsAt"`
		CreatedBy string    `json:"createdBy"`
		Comment   string    `json:"comment"`
		Status    struct {
			State string `json:"state"`
		} `json:"status"`
	}
	var all []silence
	if err := json.Unmarshal(body, &all); err != nil {
		return Result{}, fmt.Errorf("not an Alertmanager silence list: %w", err)
	}
	if top <= 0 {
		top = 30
	}
	var live []silence
	expired := 0
	for _, s := range all {
		if s.Status.State == "expired" {
			expired++
			continue
		}
		live = append(live, s)
	}
	slices.SortStableFunc(live, func(x, y silence) int { return x.EndsAt.Compare(y.EndsAt) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d silences active or pending, %d expired\n", len(live), expired)
	if len(live) > 0 {
		b.WriteString("state\tends\tmatchers\tby\tcomment\tid\n")
	}
	for _, s := range live[:min(len(live), top)] {
		var ms []string
		for _, m := range s.Matchers {
			op := "="
			switch {
			case m.IsEqual != nil && !*m.IsEqual && m.IsRegex:
				op = "!~"
			case m.IsEqual != nil && !*m.IsEqual:
				op = "!="
			case m.IsRegex:
				op = "=~"
			}
			ms = append(ms, fmt.Sprintf("%s%s%q", m.Name, op, m.Value))
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Status.State, s.EndsAt.UTC().Format(time.RFC3339), cut("{"+strings.Join(ms, ", ")+"}", maxLabels),
			cut(s.CreatedBy, 60), cut(s.Comment, 120), s.ID)
	}
	if len(live) > top {
		fmt.Fprintf(&b, "… and %d more\n", len(live)-top)
	}
	return Result{Data: body, Series: len(live), Summary: strings.TrimRight(b.String(), "\n")}, nil
}
