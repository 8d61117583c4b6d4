package datasource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Result is one query's answer.
type Result struct {
	// Endpoint is the API path asked ("/api/v1/query_range").
	Endpoint string
	// Summary is what the model sees: counts, the top rows of a compact
	// table, the warnings.
	Summary string
	// Data is the answer's data as JSON, whole, for the console.
	Data []byte
	// Series counts the series, streams, alerts or silences answered.
	Series int
}

// Range is the window of a range query.
type Range struct {
	Start, End time.Time
	Step       time.Duration
}

// prom is the Prometheus API client over the source's transport.
func (s *Source) prom() (v1.API, error) {
	if s.cfg.Kind != Prometheus {
		return nil, fmt.Errorf("datasource %s is %s, not prometheus", s.cfg.Name, s.cfg.Kind)
	}
	c, err := api.NewClient(api.Config{Address: s.base.String(), Client: s.client})
	if err != nil {
		return nil, fmt.Errorf("prometheus %q: %w", s.cfg.Name, err)
	}
	return v1.NewAPI(c), nil
}

// Instant runs a PromQL instant query at time at; top bounds the rows
// shown (0 means 20).
func (s *Source) Instant(ctx context.Context, query string, at time.Time, top int) (Result, error) {
	p, err := s.prom()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	v, warn, _, err := p.Query(ctx, query, at, v1.WithTimeout(s.cfg.Timeout))
	if err != nil {
		return Result{Endpoint: "/api/v1/query"}, s.promFail(ctx, err)
	}
	return promResult("/api/v1/query", v, warn, top), nil
}

// QueryRange runs a PromQL range query over r; top bounds the rows
// shown (0 means 20).
func (s *Source) QueryRange(ctx context.Context, query string, r Range, top int) (Result, error) {
	p, err := s.prom()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	v, warn, _, err := p.QueryRange(ctx, query, v1.Range{Start: r.Start, End: r.End, Step: r.Step}, v1.WithTimeout(s.cfg.Timeout))
	if err != nil {
		return Result{Endpoint: "/api/v1/query_range"}, s.promFail(ctx, err)
	}
	return promResult("/api/v1/query_range", v, warn, top), nil
}

// promFail words client_golang's errors: Prometheus's own (a bad query:
// bad_data, with its message) as they are, the transport's as fail does.
func (s *Source) promFail(ctx context.Context, err error) error {
	var pe *v1.Error
	if errors.As(err, &pe) {
		switch pe.Type {
		case v1.ErrServer, v1.ErrBadResponse:
			return fmt.Errorf("prometheus %q: %w: %s: %s", s.cfg.Name, ErrStatus, pe.Msg, snippet([]byte(pe.Detail)))
		case v1.ErrClient:
			return s.fail(ctx, err)
		}
		return fmt.Errorf("prometheus %q: %s: %s", s.cfg.Name, pe.Type, pe.Msg)
	}
	return s.fail(ctx, err)
}

func promResult(endpoint string, v model.Value, warn v1.Warnings, top int) Result {
	data, _ := json.Marshal(map[string]any{"resultType": typeName(v), "result": v})
	res := Result{Endpoint: endpoint, Data: data}
	var b strings.Builder
	res.Series = summarise(&b, v, top)
	for _, w := range warn {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	res.Summary = strings.TrimRight(b.String(), "\n")
	return res
}

func typeName(v model.Value) string {
	if v == nil {
		return "none"
	}
	return v.Type().String()
}
