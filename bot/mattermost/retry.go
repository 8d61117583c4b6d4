package mattermost

import (
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// retryTransport retries requests answered with 429 Too Many Requests after
// the delay the server asks for, at most maxRetries times. Requests whose
// body cannot be replayed are not retried.
type retryTransport struct {
	base       http.RoundTripper
	log        *slog.Logger
	maxRetries int
	maxWait    time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := t.base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests || attempt >= t.maxRetries {
			return resp, err
		}
		if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
			return resp, nil
		}
		wait := min(retryDelay(resp.Header, time.Now()), t.maxWait)
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		t.log.Warn("mattermost rate limit; retrying", "method", req.Method, "path", req.URL.Path, "wait", wait, "attempt", attempt+1)
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, req.Context().Err()
		case <-timer.C:
		}
		next := req.Clone(req.Context())
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			next.Body = body
		}
		req = next
	}
}

// maxDelaySeconds keeps absurd header values from overflowing a Duration.
const maxDelaySeconds = 24 * 60 * 60

// retryDelay reads how long to wait from Retry-After (seconds or an HTTP
// date) or X-Ratelimit-Reset (seconds until the window resets, as
// Mattermost sends it; a Unix time is accepted too). The default is 1s.
func retryDelay(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return time.Duration(min(s, maxDelaySeconds)) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	if v := h.Get("X-Ratelimit-Reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			if s > 1_000_000_000 { // a Unix time, not a duration
				return max(time.Unix(s, 0).Sub(now), 0)
			}
			return time.Duration(min(s, maxDelaySeconds)) * time.Second
		}
	}
	return time.Second
}
