package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

var _ agentcore.Model = (*Client)(nil)

// Config configures a Client. The zero value of every field but BaseURL and
// Model is a working default.
type Config struct {
	// BaseURL is the API root, e.g. http://10.0.0.8:8000/v1 (AGENT_BASE_URL).
	// An empty or "/" path gets /v1 appended; any other path is kept.
	BaseURL string
	// Model is the model name sent with every request (AGENT_MODEL).
	Model string
	// APIKey is sent as a bearer token (AGENT_API_KEY); empty sends no
	// Authorization header, as local servers expect.
	APIKey string
	// HTTPClient nil means a client with dial, TLS and idle timeouts but no
	// overall timeout (Timeout bounds each attempt instead).
	HTTPClient *http.Client
	// IdleConns is how many idle connections to the server that default
	// client keeps for the next calls; 0 means 16. A daemon sets it to its
	// number of concurrent runs: each call beyond it closes its connection
	// when it ends and the next one dials again.
	IdleConns int
	// Timeout bounds each attempt, from sending the request to the end of
	// the answer; 0 means 10 minutes. A call that times out is not retried.
	Timeout time.Duration
	// MaxRetries is how many times a failed call is retried; 0 means 4, a
	// negative value means none.
	MaxRetries int
	// NoStream asks for whole answers instead of SSE streams.
	NoStream bool
	// FeedReasoning sends Message.Reasoning back as reasoning_content on
	// assistant turns with tool calls, for models whose docs require it
	// (newer DeepSeek thinking models). Off by default: DeepSeek-R1 answers
	// 400 when reasoning is sent back.
	FeedReasoning bool
	// Temperature nil leaves the sampling temperature to the server.
	Temperature *float64
	// Logger receives retry warnings; nil discards them.
	Logger *slog.Logger
	// Sleep waits between retries; nil means a timer that stops early when
	// ctx is done. Tests inject one to avoid real waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client talks to one model on one OpenAI-compatible server. It may be used
// concurrently.
type Client struct {
	cfg       Config
	http      *http.Client
	chatURL   string
	modelsURL string
	log       *slog.Logger
	sleep     func(context.Context, time.Duration) error
	// readers are the 16 KiB buffers answers are read through, kept for
	// the next call instead of allocating one per call.
	readers sync.Pool
	// msgs holds the encodings of long messages, which the next steps of
	// their runs send again (see encodeRequest).
	msgs msgCache
}

// Retry backoff: base doubles per attempt up to cap, with jitter.
const (
	backoffBase = time.Second
	backoffCap  = 30 * time.Second
	// maxBody caps a whole (non-streamed) answer and error bodies.
	maxBody      = 64 << 20
	maxErrorBody = 64 << 10
)

// New returns a Client. It fails if BaseURL is not an http(s) URL or Model
// is empty.
func New(cfg Config) (*Client, error) {
	base, err := baseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai: model name is empty")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 4
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	c := &Client{cfg: cfg, http: cfg.HTTPClient, log: cfg.Logger, sleep: cfg.Sleep,
		chatURL: base + "/chat/completions", modelsURL: base + "/models"}
	if c.http == nil {
		c.http = defaultHTTPClient(cfg.IdleConns)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	return c, nil
}

func baseURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "", fmt.Errorf("openai: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("openai: base URL %q: want http(s)://host[:port][/v1]", raw)
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if u.Path == "" {
		u.Path = "/v1"
	}
	return u.String(), nil
}

func defaultHTTPClient(idle int) *http.Client {
	if idle <= 0 {
		idle = 16
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.IdleConnTimeout = 90 * time.Second
	t.MaxIdleConnsPerHost = idle
	t.MaxIdleConns = max(t.MaxIdleConns, idle)
	return &http.Client{Transport: t}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Complete sends one chat-completion request and returns the answer. It
// retries as the package doc describes, and returns when the answer is
// complete, ctx is done, or the call failed for good. Errors are wrapped
// *APIError (with agentcore.ErrContextLength or ErrToolsUnsupported where
// they apply), ErrStreamCut, connection errors, context.DeadlineExceeded for
// a timed-out attempt, or ctx's error.
func (c *Client) Complete(ctx context.Context, req agentcore.Request) (agentcore.Response, error) {
	stream := !c.cfg.NoStream
	body, err := c.encodeRequest(c.buildRequest(req, stream))
	if err != nil {
		return agentcore.Response{}, fmt.Errorf("chat completion: encode request: %w", err)
	}
	for attempt := 0; ; attempt++ {
		resp, delivered, err := c.attempt(ctx, body, req, stream)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return agentcore.Response{}, fmt.Errorf("chat completion: %w", context.Cause(ctx))
		}
		wait, retry := c.retryWait(err, delivered, attempt)
		if !retry || attempt >= c.cfg.MaxRetries {
			if attempt > 0 {
				return agentcore.Response{}, fmt.Errorf("chat completion (%d attempts): %w", attempt+1, err)
			}
			return agentcore.Response{}, fmt.Errorf("chat completion: %w", err)
		}
		c.log.Warn("model call failed, retrying", "attempt", attempt+1, "wait", wait, "err", err)
		if err := c.sleep(ctx, wait); err != nil {
			return agentcore.Response{}, fmt.Errorf("chat completion: %w", err)
		}
	}
}

// connError marks a failure to reach the server or a connection lost before
// an answer began; it is retried.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// cutError is ErrStreamCut with the cause and whether text was shown.
type cutError struct {
	cause     error
	delivered bool
}

func (e *cutError) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%v: %v", ErrStreamCut, e.cause)
	}
	return ErrStreamCut.Error()
}
func (e *cutError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrStreamCut, e.cause}
	}
	return []error{ErrStreamCut}
}

// retryWait decides whether err is worth another attempt, and how long to
// wait first.
func (c *Client) retryWait(err error, delivered bool, attempt int) (time.Duration, bool) {
	var apiErr *APIError
	var conn *connError
	var cut *cutError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return 0, false // this attempt used its whole timeout; another would too
	case errors.As(err, &apiErr):
		if !apiErr.retryable() || (apiErr.InStream && delivered) {
			return 0, false
		}
		if apiErr.RetryAfter > 0 {
			return apiErr.RetryAfter, true
		}
	case errors.As(err, &cut):
		if cut.delivered {
			return 0, false
		}
	case errors.As(err, &conn):
	default:
		return 0, false
	}
	d := min(backoffBase<<min(attempt, 10), backoffCap)
	return d/2 + rand.N(d/2+1), true
}

// attempt makes one HTTP request. delivered reports whether any text
// reached req.OnText.
func (c *Client) attempt(ctx context.Context, body []byte, req agentcore.Request, stream bool) (resp agentcore.Response, delivered bool, err error) {
	actx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout,
		fmt.Errorf("no complete answer within %v: %w", c.cfg.Timeout, context.DeadlineExceeded))
	defer cancel()
	defer func() {
		if err != nil && ctx.Err() == nil && actx.Err() != nil {
			err = context.Cause(actx)
		}
	}()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, c.chatURL, bytes.NewReader(body))
	if err != nil {
		return resp, false, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return resp, false, &connError{fmt.Errorf("POST %s: %w", c.chatURL, err)}
	}
	defer hresp.Body.Close()
	tools := req.Tools != nil
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(hresp.Body, maxErrorBody))
		return resp, false, parseAPIError(hresp.StatusCode, hresp.Header, b, tools)
	}
	ct, _, _ := mime.ParseMediaType(hresp.Header.Get("Content-Type"))
	// Nothing read through br outlives this call: events and answers are
	// decoded into strings, errors copy what they quote.
	br, _ := c.readers.Get().(*bufio.Reader)
	if br == nil {
		br = bufio.NewReaderSize(nil, answerBuffer)
	}
	br.Reset(hresp.Body)
	defer func() {
		br.Reset(nil)
		c.readers.Put(br)
	}()
	if ct == "text/event-stream" || (ct != "application/json" && looksLikeSSE(br)) {
		// Some proxies drop or rewrite the SSE content type; the body tells.
		return readStream(actx, br, req.OnText, tools)
	}
	resp, err = readWhole(br, hresp, tools)
	// Text-form tool calls are never shown, also in the text protocol,
	// where they stay in Content for the kernel to run.
	if shown := extract(resp.Content, true).Content; err == nil && req.OnText != nil && shown != "" {
		req.OnText(shown)
		delivered = true
	}
	return resp, delivered, err
}

// readWhole reads a non-streamed answer (also what a server sends when it
// ignores "stream": true).
func readWhole(body io.Reader, hresp *http.Response, tools bool) (agentcore.Response, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err != nil {
		return agentcore.Response{}, &connError{fmt.Errorf("read answer: %w", err)}
	}
	if len(b) > maxBody {
		return agentcore.Response{}, fmt.Errorf("answer larger than %d bytes", maxBody)
	}
	if isHTML(hresp.Header.Get("Content-Type"), b) {
		return agentcore.Response{}, &APIError{StatusCode: hresp.StatusCode, HTML: true, Message: htmlTitle(b)}
	}
	var w wireResponse
	if err := json.Unmarshal(b, &w); err != nil {
		return agentcore.Response{}, fmt.Errorf("decode answer: %w (body starts %q)", err, clipBytes(b, 80))
	}
	if len(w.Error) > 0 && string(w.Error) != "null" {
		return agentcore.Response{}, inStreamError(w.Error, tools)
	}
	if len(w.Choices) == 0 {
		return agentcore.Response{}, fmt.Errorf("answer has no choices (body starts %q)", clipBytes(b, 80))
	}
	var a answer
	a.add(&w)
	return a.response(tools), nil
}

// looksLikeSSE peeks at the start of a body for an SSE field or comment.
func looksLikeSSE(br *bufio.Reader) bool {
	b, _ := br.Peek(64)
	b = bytes.TrimLeft(b, " \t\r\n")
	return bytes.HasPrefix(b, []byte("data:")) || bytes.HasPrefix(b, []byte(":")) || bytes.HasPrefix(b, []byte("event:"))
}

// inStreamError turns the error object of a 200 answer into an APIError.
func inStreamError(raw json.RawMessage, tools bool) *APIError {
	e := &APIError{StatusCode: http.StatusOK, InStream: true}
	if !fillFromErrorBody(e, errorBody{Error: raw}) {
		e.Message = clip(string(raw))
	}
	e.kind = classify(http.StatusOK, e, tools)
	return e
}

// readStream reads an SSE answer, handing visible text to onText. It stops
// as soon as ctx is done, even if more of the answer is buffered.
func readStream(ctx context.Context, r io.Reader, onText func(string), tools bool) (agentcore.Response, bool, error) {
	var (
		a         answer
		f         = textFilter{toolCalls: true} // shown text never has tool-call markup
		delivered bool
		sse       = newSSEReader(r)
	)
	show := func(s string) {
		if s != "" && onText != nil {
			onText(s)
			delivered = true
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return agentcore.Response{}, delivered, context.Cause(ctx)
		}
		ev, err := sse.next()
		if errors.Is(err, io.EOF) {
			break // ended without [DONE]: judged below
		}
		if err != nil {
			return agentcore.Response{}, delivered, &cutError{cause: err, delivered: delivered}
		}
		if bytes.Equal(ev.Data, doneMarker) {
			show(f.flush())
			return a.response(tools), delivered, nil
		}
		var w wireResponse
		if err := json.Unmarshal(ev.Data, &w); err != nil {
			return agentcore.Response{}, delivered, fmt.Errorf("decode stream chunk: %w (chunk starts %q)", err, clipBytes(ev.Data, 80))
		}
		if len(w.Error) > 0 && string(w.Error) != "null" {
			return agentcore.Response{}, delivered, inStreamError(w.Error, tools)
		}
		if ev.Event == "error" {
			return agentcore.Response{}, delivered, inStreamError(ev.Data, tools)
		}
		show(f.push(a.add(&w)))
	}
	if a.finish != "" {
		// No [DONE], but the answer said it was finished: use it.
		show(f.flush())
		return a.response(tools), delivered, nil
	}
	return agentcore.Response{}, delivered, &cutError{delivered: delivered}
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// Ping checks that the server answers GET {base}/models with 2xx, for
// readiness checks. It does not retry.
func (c *Client) Ping(ctx context.Context) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.modelsURL, nil)
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if c.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("ping: GET %s: %w", c.modelsURL, err)
	}
	defer hresp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(hresp.Body, maxErrorBody))
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		return fmt.Errorf("ping: %w", parseAPIError(hresp.StatusCode, hresp.Header, b, false))
	}
	if isHTML(hresp.Header.Get("Content-Type"), b) {
		return fmt.Errorf("ping: %w", &APIError{StatusCode: hresp.StatusCode, HTML: true, Message: htmlTitle(b)})
	}
	return nil
}
