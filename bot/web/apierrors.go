package web

import (
	"bytes"
	"html"
	"net/http"
	"regexp"
	"strings"
)

// The page's API answers errors as JSON {"error": "..."}, which the page
// shows as it is. Most handlers write JSON already; jsonErrors turns the
// rest (http.Error's text, the role check's HTML page, the security
// checks' refusals) into JSON too, for every path under /api/.

// maxErrorText bounds the error text kept from a non-JSON answer.
const maxErrorText = 4 << 10

type jsonErrorWriter struct {
	http.ResponseWriter
	status     int
	buf        bytes.Buffer
	converting bool
	wrote      bool
}

// jsonErrors wraps w for an /api/ request; call finish when the handler
// returns.
func jsonErrors(w http.ResponseWriter) *jsonErrorWriter {
	return &jsonErrorWriter{ResponseWriter: w}
}

func (j *jsonErrorWriter) WriteHeader(code int) {
	if j.wrote {
		return
	}
	j.wrote = true
	if code >= 400 && !strings.HasPrefix(j.Header().Get("Content-Type"), "application/json") {
		j.converting, j.status = true, code
		return
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonErrorWriter) Write(b []byte) (int, error) {
	if !j.wrote {
		j.WriteHeader(http.StatusOK)
	}
	if j.converting {
		if room := maxErrorText - j.buf.Len(); room > 0 {
			j.buf.Write(b[:min(len(b), room)])
		}
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}

// Flush lets Server-Sent Events through.
func (j *jsonErrorWriter) Flush() {
	if f, ok := j.ResponseWriter.(http.Flusher); ok && !j.converting {
		f.Flush()
	}
}

// Unwrap serves http.ResponseController.
func (j *jsonErrorWriter) Unwrap() http.ResponseWriter { return j.ResponseWriter }

var tags = regexp.MustCompile(`(?s)<[^>]*>`)

// finish writes the JSON error of a converted answer.
func (j *jsonErrorWriter) finish() {
	if !j.converting {
		return
	}
	msg := j.buf.String()
	if strings.Contains(j.Header().Get("Content-Type"), "html") || strings.HasPrefix(strings.TrimSpace(msg), "<") {
		if i := strings.Index(msg, "<main"); i >= 0 {
			msg = msg[i:]
		}
		msg = html.UnescapeString(tags.ReplaceAllString(msg, " "))
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if msg == "" {
		msg = http.StatusText(j.status)
	}
	h := j.Header()
	h.Del("Content-Length")
	h.Del("Content-Disposition")
	writeJSON(j.ResponseWriter, j.status, map[string]string{"error": msg})
}
