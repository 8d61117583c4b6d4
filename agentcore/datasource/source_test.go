package datasource

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// huge answers 100 MB (a JSON string that never ends within it), or
// until the client hangs up, and counts the bytes written.
func huge(w http.ResponseWriter, written *atomic.Int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"x":"`)
	chunk := []byte(strings.Repeat("a", 1<<16))
	for written.Load() < 100<<20 {
		n, err := w.Write(chunk)
		written.Add(int64(n))
		if err != nil {
			return
		}
	}
}

// TestBadAnswers: a datasource that does not answer in time, answers 500,
// or answers 100 MB gives a clear error, each kind its own, and thinbot
// reads no more than its limit of the huge answer.
func TestBadAnswers(t *testing.T) {
	var written atomic.Int64
	var mode atomic.Value // the handler of a timed-out request may still read it
	mode.Store("")
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "hang":
			select { // until the client gives up, or the test ends
			case <-r.Context().Done():
			case <-release:
			}
		case "500":
			http.Error(w, "upstream exploded: tsdb locked", http.StatusInternalServerError)
		case "huge":
			huge(w, &written)
		}
	}))
	defer srv.Close()
	defer close(release)
	const limit = 1 << 20
	for _, kind := range []string{Prometheus, Loki, Alertmanager} {
		// Only "hang" is to time out: the others get a timeout a loaded
		// machine under -race cannot reach (reading the huge answer's
		// first MiB took over 300 ms there).
		quick, err := New(Config{Name: "x", Kind: kind, URL: srv.URL, Timeout: 300 * time.Millisecond, MaxBytes: limit})
		if err != nil {
			t.Fatal(err)
		}
		patient, err := New(Config{Name: "x", Kind: kind, URL: srv.URL, Timeout: time.Minute, MaxBytes: limit})
		if err != nil {
			t.Fatal(err)
		}
		ask := func(s *Source) error {
			var err error
			switch kind {
			case Prometheus:
				_, err = s.QueryRange(context.Background(), "up", Range{Start: time.Now().Add(-time.Hour), End: time.Now(), Step: time.Minute}, 0)
			case Loki:
				_, err = s.Logs(context.Background(), `{job="a"}`, Range{Start: time.Now().Add(-time.Hour), End: time.Now()}, 0)
			case Alertmanager:
				_, err = s.Alerts(context.Background(), "", 0)
			}
			return err
		}
		for _, c := range []struct {
			mode string
			want error
			text string
		}{
			{"hang", ErrTimeout, "no answer within 300ms"},
			{"500", ErrStatus, "500"},
			{"huge", ErrTooLarge, "more than 1048576 bytes"},
		} {
			mode.Store(c.mode)
			written.Store(0)
			s := patient
			if c.mode == "hang" {
				s = quick
			}
			err := ask(s)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) || !strings.Contains(err.Error(), `"x"`) {
				t.Errorf("%s, %s: err = %v; want %v saying %q and naming the source", kind, c.mode, err, c.want, c.text)
			}
		}
		srv.CloseClientConnections()
		if n := written.Load(); n >= 100<<20 {
			t.Errorf("%s: the server wrote all %d bytes: the client read the whole answer", kind, n)
		}
	}
}

// TestOnlyReads: a Source's transport sends only its kind's documented
// read requests; a write (Alertmanager's POST /api/v2/silences, a DELETE,
// another kind's path) never reaches the server, whatever calls it.
func TestOnlyReads(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		io.WriteString(w, "[]")
	}))
	defer srv.Close()
	am, err := New(Config{Name: "am", Kind: Alertmanager, URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	prom, err := New(Config{Name: "p", Kind: Prometheus, URL: srv.URL + "/prom/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s            *Source
		method, path string
	}{
		{am, http.MethodPost, "/api/v2/silences"},
		{am, http.MethodDelete, "/api/v2/silence/abc"},
		{am, http.MethodPost, "/api/v2/alerts"},
		{am, http.MethodGet, "/api/v1/query"},
		{prom, http.MethodPost, "/prom/api/v1/admin/tsdb/delete_series"},
		{prom, http.MethodPost, "/api/v1/query"}, // outside the source's path prefix
		{prom, http.MethodPut, "/prom/api/v1/query"},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
		if _, err := c.s.client.Do(req); err == nil || !strings.Contains(err.Error(), "not a read request") {
			t.Errorf("%s %s %s: err = %v; want it refused", c.s.Name(), c.method, c.path, err)
		}
	}
	if n := got.Load(); n != 0 {
		t.Fatalf("the server got %d requests; want none", n)
	}
	// The reads do reach it.
	if _, err := am.Silences(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/prom/api/v1/query", strings.NewReader("query=up"))
	if resp, err := prom.client.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	if n := got.Load(); n != 2 {
		t.Fatalf("the server got %d requests; want the 2 reads", n)
	}
}

// TestCredentials: basic auth, a bearer token and Loki's tenant header go
// with every request; a redirect (which could carry them elsewhere) is not
// followed.
func TestCredentials(t *testing.T) {
	var auth, org string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, org = r.Header.Get("Authorization"), r.Header.Get("X-Scope-OrgID")
		if r.URL.Query().Get("redirect") != "" {
			http.Redirect(w, r, "http://127.0.0.2:1/steal", http.StatusFound)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/v2/") {
			io.WriteString(w, "[]")
			return
		}
		io.WriteString(w, `{"status":"success","data":{"resultType":"streams","result":[]}}`)
	}))
	defer srv.Close()
	s, _ := New(Config{Name: "l", Kind: Loki, URL: srv.URL, Username: "u", Password: "pw", OrgID: "team-a"})
	if _, err := s.Logs(context.Background(), `{a="b"}`, Range{Start: time.Now().Add(-time.Minute), End: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	if auth != "Basic dTpwdw==" || org != "team-a" {
		t.Errorf("Authorization %q, X-Scope-OrgID %q", auth, org)
	}
	s, _ = New(Config{Name: "a", Kind: Alertmanager, URL: srv.URL, BearerToken: "tok"})
	if _, err := s.Silences(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if auth != "Bearer tok" {
		t.Errorf("Authorization %q", auth)
	}
	if _, err := s.get(context.Background(), "/api/v2/alerts", map[string][]string{"redirect": {"1"}}); !errors.Is(err, ErrStatus) {
		t.Errorf("redirect: err = %v; want an error answer (302), not followed", err)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, c := range []Config{
		{Name: "", Kind: Loki, URL: "http://x"},
		{Name: "a", Kind: "graphite", URL: "http://x"},
		{Name: "a", Kind: Loki, URL: "ftp://x"},
		{Name: "a", Kind: Loki, URL: "http://user:pw@x"},
		{Name: "a", Kind: Loki, URL: "http://x", CertFile: "/c.pem"},
		{Name: "a", Kind: Loki, URL: "http://x", CAFile: "/nonexistent/ca.pem"},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) = nil error", c)
		}
	}
}

// TestTLS: an https source is verified against ca_file (and only against
// it: the system's roots do not vouch for a test CA); without it the
// answer is refused, with insecure_skip_verify it is read.
func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "[]") }))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pem.Encode(mustCreate(t, ca), &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	for _, c := range []struct {
		cfg  Config
		fail string
	}{
		{Config{CAFile: ca}, ""},
		{Config{}, "certificate"},
		{Config{InsecureSkipVerify: true}, ""},
		{Config{CAFile: ca, ServerName: "other.example"}, "certificate"},
	} {
		c.cfg.Name, c.cfg.Kind, c.cfg.URL = "am", Alertmanager, srv.URL
		s, err := New(c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Silences(context.Background(), 0)
		if (c.fail == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.fail)) {
			t.Errorf("%+v: err = %v; want failure %q", c.cfg, err, c.fail)
		}
	}
}

func mustCreate(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
