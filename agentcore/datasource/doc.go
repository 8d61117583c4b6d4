// Package datasource queries the read APIs of Prometheus, Loki and
// Alertmanager for the model's datasource tools, and sums the answers up
// for it.
//
// Reads by construction: a Source sends only the documented read
// requests (Prometheus's /api/v1/query and /api/v1/query_range through
// client_golang's API client, which POSTs them as the API allows; Loki's
// GET /loki/api/v1/query_range; Alertmanager's GET /api/v2/alerts and
// /api/v2/silences), and its transport refuses any other method or path
// (readOnly), so no change to this package's callers can make it write.
//
// Every answer is bounded: a request ends after the source's timeout, and
// an answer longer than its byte limit is not read further
// (ErrTooLarge). A Result holds the model's summary (series count, top
// series, min/max/last per series, a compact table) and the answer's data
// as JSON for the console.
package datasource
