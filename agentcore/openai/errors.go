package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/thinbot/thinbot/agentcore"
)

// ErrStreamCut is returned (wrapped) when a stream ended, or the connection
// broke, before the answer was complete: no [DONE] and no finish_reason.
// Complete retries such a call only if no text reached Request.OnText yet,
// because a retry would show the user a second, different beginning.
var ErrStreamCut = errors.New("stream ended before the answer was complete")

// APIError is an error answer from the model server: a non-2xx status, or an
// error object inside a 200 body or stream. Use errors.As to read it; it
// also unwraps to agentcore.ErrContextLength or agentcore.ErrToolsUnsupported
// when the message says so.
type APIError struct {
	// StatusCode is the HTTP status (200 for an error inside a stream).
	StatusCode int
	// Type, Code and Message are the server's error fields, when it sent JSON.
	Type, Code, Message string
	// HTML is set when the body was an HTML page, typically from a proxy or
	// load balancer in front of the model server; Message is then the page
	// title.
	HTML bool
	// InStream is set for an error object that arrived inside a 200 answer.
	InStream bool
	// RetryAfter is the server's Retry-After (or retry-after-ms), 0 if none.
	RetryAfter time.Duration

	kind error // agentcore sentinel this error means, or nil
	// nCtx and nPrompt are llama.cpp's n_ctx and n_prompt_tokens fields.
	nCtx, nPrompt int
}

// HTTPStatus returns the HTTP status of the answer (200 for an error
// inside a stream), so that callers outside this package can say that the
// endpoint answered, and how, rather than that it could not be reached.
func (e *APIError) HTTPStatus() int { return e.StatusCode }

// Error returns a short, one-line description.
func (e *APIError) Error() string {
	if e.HTML {
		if e.Message == "" {
			return fmt.Sprintf("HTTP %d from a proxy (HTML page)", e.StatusCode)
		}
		return fmt.Sprintf("HTTP %d from a proxy (HTML page: %s)", e.StatusCode, e.Message)
	}
	var b strings.Builder
	if e.InStream {
		b.WriteString("error in answer")
	} else {
		fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	var det []string
	if e.Type != "" {
		det = append(det, "type "+e.Type)
	}
	if e.Code != "" && e.Code != strconv.Itoa(e.StatusCode) {
		det = append(det, "code "+e.Code)
	}
	if len(det) > 0 {
		b.WriteString(" (" + strings.Join(det, ", ") + ")")
	}
	return b.String()
}

// Unwrap returns agentcore.ErrToolsUnsupported, or a
// *agentcore.ContextLengthError (which unwraps to agentcore.ErrContextLength)
// with the numbers the message gave, when the error means one of them, else
// nil.
func (e *APIError) Unwrap() error { return e.kind }

// retryable reports whether the status calls for another attempt.
func (e *APIError) retryable() bool {
	if e.kind != nil {
		return false
	}
	code := e.StatusCode
	if e.InStream {
		// An error inside a stream carries its meaning in code, when numeric
		// (vLLM, OpenRouter); rate limits and overloads are worth a retry.
		n, err := strconv.Atoi(e.Code)
		if err != nil {
			return e.Type == "server_error" || e.Type == "rate_limit_error" || e.Type == "overloaded_error"
		}
		code = n
	}
	switch code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// maxMessage caps error messages taken from server bodies.
const maxMessage = 500

// parseAPIError builds the APIError for a non-2xx answer.
func parseAPIError(status int, h http.Header, body []byte, hadTools bool) *APIError {
	e := &APIError{StatusCode: status, RetryAfter: retryAfter(h, time.Now())}
	switch {
	case isHTML(h.Get("Content-Type"), body):
		e.HTML = true
		e.Message = htmlTitle(body)
	case !fillFromJSON(e, body):
		e.Message = clip(strings.Join(strings.Fields(string(body)), " "))
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
	}
	e.kind = classify(status, e, hadTools)
	return e
}

// errorBody covers the error shapes seen in the field: OpenAI
// {"error":{"message","type","code"}}, Ollama {"error":"…"}, vLLM's
// top-level {"object":"error","message","type","code"}, FastAPI {"detail"}.
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Detail  json.RawMessage `json:"detail"`
}

type errorObject struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	// llama.cpp's exceed_context_size_error carries the numbers.
	NCtx          int `json:"n_ctx"`
	NPromptTokens int `json:"n_prompt_tokens"`
}

// fillFromJSON fills e from a JSON error body and reports whether body was one.
func fillFromJSON(e *APIError, body []byte) bool {
	var eb errorBody
	if json.Unmarshal(body, &eb) != nil {
		return false
	}
	return fillFromErrorBody(e, eb)
}

func fillFromErrorBody(e *APIError, eb errorBody) bool {
	switch {
	case len(eb.Error) > 0 && eb.Error[0] == '{':
		var o errorObject
		if json.Unmarshal(eb.Error, &o) != nil {
			return false
		}
		e.Message, e.Type, e.Code = clip(o.Message), o.Type, rawCode(o.Code)
		e.nCtx, e.nPrompt = o.NCtx, o.NPromptTokens
	case len(eb.Error) > 0 && eb.Error[0] == '"':
		var s string
		_ = json.Unmarshal(eb.Error, &s)
		e.Message = clip(s)
	case eb.Message != "":
		e.Message, e.Type, e.Code = clip(eb.Message), eb.Type, rawCode(eb.Code)
	case len(eb.Detail) > 0 && string(eb.Detail) != "null":
		var s string
		if json.Unmarshal(eb.Detail, &s) != nil {
			s = string(eb.Detail)
		}
		e.Message = clip(s)
	default:
		return false
	}
	return true
}

// rawCode turns a code that may be a string, a number or null into text.
func rawCode(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Messages that mean the prompt does not fit, from OpenAI, vLLM, SGLang,
// llama.cpp, Ollama, DeepSeek and Anthropic-style proxies.
var contextLengthHints = []string{
	"context_length_exceeded",
	"maximum context length",
	"context length",
	"context window",
	"too many tokens",
	"prompt is too long",
	"input is too long",
	"exceeds the available context",
	"exceed_context_size",
	"maximum model length",
	"reduce the length of the messages",
}

// overflowRules find the numbers in context-length messages. Each pattern
// fills the fields named, in order, with its groups. Wordings:
//
//	vLLM (old), DeepSeek: This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (1000 in the messages, 32000 in the completion).
//	vLLM (0.6+):          'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 tokens and your request has 2778 input tokens (8000 > 4096 - 2778).
//	vLLM (0.10+):         This model's maximum context length is 131072 tokens. However, you requested 65536 output tokens and your prompt contains at least 65537 input tokens, for a total of at least 131073 tokens.
//	vLLM (newest):        You passed 12289 input tokens and requested 4096 output tokens. However, the model's context length is only 16384 tokens, ...
//	OpenAI:               This model's maximum context length is 128000 tokens. However, your messages resulted in 130021 tokens. (code context_length_exceeded)
//	llama.cpp:            request (4476 tokens) exceeds the available context size (4096 tokens)  (+ n_ctx, n_prompt_tokens)
//	SGLang:               The input (4097 tokens) is longer than the model's context length (4096 tokens).
//	Ollama:               the input length exceeds the context length  (no numbers)
var overflowRules = []struct {
	re     *regexp.Regexp
	fields string // w window, p prompt, c completion
}{
	{regexp.MustCompile(`maximum context length is (\d+)`), "w"},
	{regexp.MustCompile(`\((\d+) in the messages, (\d+) in the completion\)`), "pc"},
	{regexp.MustCompile(`is too large: (\d+)`), "c"},
	{regexp.MustCompile(`request has (\d+) input tokens`), "p"},
	{regexp.MustCompile(`requested (\d+) output tokens`), "c"},
	{regexp.MustCompile(`prompt contains at least (\d+) input tokens`), "p"},
	{regexp.MustCompile(`passed (\d+) input tokens`), "p"},
	{regexp.MustCompile(`context length is only (\d+)`), "w"},
	{regexp.MustCompile(`messages resulted in (\d+) tokens`), "p"},
	{regexp.MustCompile(`request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)`), "pw"},
	{regexp.MustCompile(`input \((\d+) tokens\) is longer than the model's context length \((\d+) tokens\)`), "pw"},
}

// overflowNumbers reads the server's numbers from a context-length error.
func overflowNumbers(e *APIError) *agentcore.ContextLengthError {
	o := &agentcore.ContextLengthError{Window: max(e.nCtx, 0), Prompt: max(e.nPrompt, 0)}
	for _, r := range overflowRules {
		m := r.re.FindStringSubmatch(e.Message)
		if m == nil {
			continue
		}
		for i, f := range r.fields {
			n, err := strconv.Atoi(m[i+1])
			if err != nil || n <= 0 {
				continue
			}
			switch f {
			case 'w':
				if o.Window == 0 {
					o.Window = n
				}
			case 'p':
				if o.Prompt == 0 {
					o.Prompt = n
				}
			case 'c':
				if o.Completion == 0 {
					o.Completion = n
				}
			}
		}
	}
	return o
}

// Messages that mean the server will not do tool calling: vLLM without
// --enable-auto-tool-choice, Ollama models without tools, llama.cpp without
// --jinja, and generic wording.
var toolsHints = []string{
	"enable-auto-tool-choice",
	"does not support tools",
	"tools param requires",
	"tool_choice",
	"tool choice",
	"tool calling",
	"tool use",
	"function calling",
	"tools are not supported",
	"tools is not supported",
	"unsupported parameter: 'tools'",
	"tools not supported",
}

// classify maps an error to the agentcore sentinel it means, if any.
func classify(status int, e *APIError, hadTools bool) error {
	if e.HTML {
		return nil
	}
	msg := strings.ToLower(e.Message + " " + e.Code + " " + e.Type)
	if status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusUnprocessableEntity || e.InStream || status == http.StatusInternalServerError {
		for _, h := range contextLengthHints {
			if strings.Contains(msg, h) {
				return overflowNumbers(e)
			}
		}
	}
	// llama.cpp answers 500 "tools param requires --jinja flag"; others 400/422.
	if hadTools && (status == http.StatusBadRequest || status == http.StatusUnprocessableEntity ||
		status == http.StatusNotImplemented || status == http.StatusInternalServerError) {
		for _, h := range toolsHints {
			if strings.Contains(msg, h) {
				return agentcore.ErrToolsUnsupported
			}
		}
	}
	return nil
}

// maxRetryAfter caps a server's Retry-After: a chat turn does not wait longer.
const maxRetryAfter = 2 * time.Minute

// retryAfter reads retry-after-ms (OpenAI) or Retry-After (seconds or an
// HTTP date), capped at maxRetryAfter; 0 if absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			d = time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); d == 0 && v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil {
			if s > 0 && s < 1e6 {
				d = time.Duration(s * float64(time.Second))
			}
		} else if t, err := http.ParseTime(v); err == nil {
			d = t.Sub(now)
		}
	}
	if d < 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

func isHTML(contentType string, body []byte) bool {
	if strings.Contains(strings.ToLower(contentType), "text/html") {
		return true
	}
	b := bytes.TrimSpace(body)
	if len(b) > 15 {
		b = b[:15]
	}
	b = bytes.ToLower(b)
	return bytes.HasPrefix(b, []byte("<!doctype html")) || bytes.HasPrefix(b, []byte("<html")) ||
		bytes.HasPrefix(b, []byte("<head")) || bytes.HasPrefix(b, []byte("<title"))
}

var titleRE = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)

// htmlTitle returns the page's <title>, or its first <h1>, as plain text.
func htmlTitle(body []byte) string {
	m := titleRE.FindSubmatch(body)
	if m == nil {
		m = h1RE.FindSubmatch(body)
	}
	if m == nil {
		return ""
	}
	s := html.UnescapeString(tagRE.ReplaceAllString(string(m[1]), ""))
	return clip(strings.Join(strings.Fields(s), " "))
}

var (
	h1RE  = regexp.MustCompile(`(?is)<h1[^>]*>(.*?)</h1>`)
	tagRE = regexp.MustCompile(`<[^>]*>`)
)

// clip shortens s to maxMessage bytes at a rune boundary.
func clip(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	s = s[:maxMessage]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
