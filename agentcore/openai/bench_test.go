package openai

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// benchStream is a short streamed answer: the first chunk is flushed at
// once, the rest follows.
func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	first := []byte(chunkC("Hello"))
	rest := []byte(chunkC(", world") + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(first)
		w.(http.Flusher).Flush()
		w.Write(rest)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkFirstByte measures the time from calling Complete to the first
// text reaching OnText (reported as ttfb-ns/op), through the whole client.
// A call whose text never reached OnText fails: broken streaming must not
// report a perfect 0 ns.
func BenchmarkFirstByte(b *testing.B) {
	srv := benchServer(b)
	c, err := New(Config{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	req := agentcore.Request{Messages: []agentcore.Message{{Role: "user", Content: "hi"}}}
	var total time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		var first time.Duration
		req.OnText = func(string) {
			if first == 0 {
				first = time.Since(start)
			}
		}
		resp, err := c.Complete(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		if first == 0 || resp.Content != "Hello, world" {
			b.Fatalf("no streamed text reached OnText (first after %v), answer %q", first, resp.Content)
		}
		total += first
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ttfb-ns/op")
}

// BenchmarkFirstByteRaw is the baseline: plain net/http and bufio reading
// the same stream up to its first data: line.
func BenchmarkFirstByteRaw(b *testing.B) {
	srv := benchServer(b)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	client := defaultHTTPClient(0)
	var total time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		req, _ := http.NewRequestWithContext(b.Context(), http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if strings.HasPrefix(line, "data:") {
				break
			}
		}
		total += time.Since(start)
		io.Copy(io.Discard, br)
		resp.Body.Close()
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ttfb-ns/op")
}
