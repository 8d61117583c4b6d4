package datasource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Kinds of Source.
const (
	Prometheus   = "prometheus"
	Loki         = "loki"
	Alertmanager = "alertmanager"
)

// Errors of a query (wrapped, with the source's name).
var (
	// ErrTooLarge is returned when an answer is longer than the source's
	// MaxBytes: thinbot stopped reading it.
	ErrTooLarge = errors.New("answer too large")
	// ErrTimeout is returned when the source did not answer within its
	// Timeout.
	ErrTimeout = errors.New("no answer in time")
	// ErrStatus is returned for an HTTP error answer (4xx, 5xx).
	ErrStatus = errors.New("error answer")
)

// Config is one datasource. Name, Kind and URL are required.
type Config struct {
	Name string
	Kind string // Prometheus, Loki or Alertmanager
	// URL is the API's base: http://prometheus:9090, http://loki:3100,
	// http://alertmanager:9093 (a path prefix is kept).
	URL string
	// Username and Password are sent as basic auth when Username is set;
	// BearerToken as an Authorization bearer token when set.
	Username, Password string
	BearerToken        string
	// OrgID is Loki's tenant (X-Scope-OrgID), "" for none.
	OrgID string
	// TLS: a CA bundle (PEM) instead of the system's, a client
	// certificate and key (PEM), the server name to verify, or no
	// verification at all.
	CAFile, CertFile, KeyFile string
	ServerName                string
	InsecureSkipVerify        bool
	// Timeout bounds one query; 0 means 30 seconds.
	Timeout time.Duration
	// MaxBytes bounds one answer; 0 means 16 MiB.
	MaxBytes int64
}

// Source is a configured datasource. It is safe for concurrent use.
type Source struct {
	cfg    Config
	base   *url.URL
	client *http.Client
}

// New checks cfg and returns its Source. It reads the TLS files.
func New(cfg Config) (*Source, error) {
	if cfg.Name == "" {
		return nil, errors.New("datasource: a name is required")
	}
	if !slices.Contains([]string{Prometheus, Loki, Alertmanager}, cfg.Kind) {
		return nil, fmt.Errorf("datasource %s: kind %q is not prometheus, loki or alertmanager", cfg.Name, cfg.Kind)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("datasource %s: url %q is not an http(s) URL", cfg.Name, cfg.URL)
	}
	if u.User != nil {
		return nil, fmt.Errorf("datasource %s: url has credentials in it; use username and password_file", cfg.Name)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 16 << 20
	}
	tc, err := tlsConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("datasource %s: %w", cfg.Name, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.Proxy = nil // a datasource is reached directly, as configured
	s := &Source{cfg: cfg, base: u}
	s.client = &http.Client{
		Transport: &readOnly{s: s, next: tr},
		// A redirect could lead the credentials elsewhere: not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{ServerName: cfg.ServerName, InsecureSkipVerify: cfg.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, errors.New("cert_file and key_file go together")
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Name is the source's configured name.
func (s *Source) Name() string { return s.cfg.Name }

// Kind is Prometheus, Loki or Alertmanager.
func (s *Source) Kind() string { return s.cfg.Kind }

// readPaths are the API paths a Source may ask, by kind, with the methods
// each allows: Prometheus's query endpoints take a form POST (the API's
// read POST, which client_golang prefers for long queries).
var readPaths = map[string]map[string][]string{
	Prometheus:   {"/api/v1/query": {http.MethodGet, http.MethodPost}, "/api/v1/query_range": {http.MethodGet, http.MethodPost}},
	Loki:         {"/loki/api/v1/query_range": {http.MethodGet}},
	Alertmanager: {"/api/v2/alerts": {http.MethodGet}, "/api/v2/silences": {http.MethodGet}},
}

// readOnly is a Source's transport: it lets through only the documented
// read requests of the source's kind, to the source's host, adds the
// credentials, and caps the answer at MaxBytes.
type readOnly struct {
	s    *Source
	next http.RoundTripper
}

func (t *readOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.s
	path, inside := strings.CutPrefix(req.URL.Path, s.base.Path)
	methods, ok := readPaths[s.cfg.Kind][path]
	if req.URL.Host != s.base.Host || req.URL.Scheme != s.base.Scheme || !inside || !ok || !slices.Contains(methods, req.Method) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("datasource %s: %s %s is not a read request of the %s API; not sent", s.cfg.Name, req.Method, req.URL.Path, s.cfg.Kind)
	}
	req = req.Clone(req.Context())
	switch {
	case s.cfg.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+s.cfg.BearerToken)
	case s.cfg.Username != "":
		req.SetBasicAuth(s.cfg.Username, s.cfg.Password)
	}
	if s.cfg.OrgID != "" {
		req.Header.Set("X-Scope-OrgID", s.cfg.OrgID)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &capped{r: resp.Body, left: s.cfg.MaxBytes, limit: s.cfg.MaxBytes}
	return resp, nil
}

// capped reads at most limit bytes of an answer, then fails with
// ErrTooLarge; it counts what it read.
type capped struct {
	r     io.ReadCloser
	left  int64
	limit int64
	n     int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a body of exactly limit bytes from a longer one.
		var one [1]byte
		if n, _ := c.r.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, c.limit)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	c.n += int64(n)
	return n, err
}

func (c *capped) Close() error { return c.r.Close() }

// get asks path with query q and returns the answer's body (status 2xx).
func (s *Source) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	u := *s.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %q: %w: HTTP %d: %s", s.cfg.Kind, s.cfg.Name, ErrStatus, resp.StatusCode, snippet(body))
	}
	return body, nil
}

// fail words a failed request: a timeout as ErrTimeout, an answer cut as
// ErrTooLarge, others as they are; each names the source.
func (s *Source) fail(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%s %q: %w (more than %d bytes); thinbot stopped reading it", s.cfg.Kind, s.cfg.Name, ErrTooLarge, s.cfg.MaxBytes)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s %q: %w: no answer within %s", s.cfg.Kind, s.cfg.Name, ErrTimeout, s.cfg.Timeout)
	}
	return fmt.Errorf("%s %q: %w", s.cfg.Kind, s.cfg.Name, err)
}

// snippet is the start of an error answer, on one line.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b[:min(len(b), 300)]), "?")), " ")
	if len(b) > 300 {
		s += " …"
	}
	return s
}
