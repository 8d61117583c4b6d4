package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// bigSession is the id of the 10,000-event session of the benchmarks.
const bigSession = "web/console/big"

// fillBig appends a session of n events shaped like real turns (message,
// answer, gate decision, result) to a fresh store, in batches.
func fillBig(tb testing.TB, n int) *store.DB {
	tb.Helper()
	db, err := store.Open(filepath.Join(tb.TempDir(), "events.db"), &store.Options{AuditPath: "-"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	kinds := []struct{ typ, actor, payload string }{
		{"user_message", "user:alice", `{"text":"how full is /var?"}`},
		{"assistant_message", "model", `{"content":"Let me look.","tool_calls":[{"name":"run","arguments":"{}"}],"protocol":"tools","usage":{}}`},
		{"gate_decision", "gate", `{"call_id":"c1","tool":"run","command":"df -h /var","verdict":"pass","reason":"read-only","rule":"df","action":"run"}`},
		{"tool_result", "system", `{"call_id":"c1","tool":"run","content":"exit code: 0\nFilesystem Size Used Avail Use% Mounted on\n/dev/sda1 100G 42G 58G 42% /var","exit_code":0,"duration_ms":4}`},
	}
	batch := make([]store.Event, 0, 500)
	for i := range n {
		k := kinds[i%len(kinds)]
		batch = append(batch, store.Event{Session: bigSession, Type: k.typ, Actor: k.actor, Payload: json.RawMessage(k.payload)})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := db.Append(context.Background(), batch...); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return db
}

// BenchmarkSessionPage10k is the server time of one timeline page of a
// 10,000-event session: the first page, and a page in the middle (reached by
// the "next" link's seq cursor). The chain's verification is cached (as
// between page views); BenchmarkVerify10k is its cost when it is not.
func BenchmarkSessionPage10k(b *testing.B) {
	db := fillBig(b, 10000)
	s, err := New(Config{Listen: "127.0.0.1:0", Chain: db})
	if err != nil {
		b.Fatal(err)
	}
	h := s.Handler()
	for _, tc := range []struct{ name, query string }{{"first", ""}, {"middle", "&after=5000"}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest("GET", "/audit/session?id="+bigSession+tc.query, nil)
				req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Next 200 events") {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}

// BenchmarkVerify10k is a whole-chain verification of 10,000 events, which
// the viewer runs in the background at start and daily (see
// fullVerifyEvery), never in a page request.
func BenchmarkVerify10k(b *testing.B) {
	db := fillBig(b, 10000)
	for b.Loop() {
		rep, err := db.Verify(context.Background(), nil)
		if err != nil || !rep.OK {
			b.Fatal(rep, err)
		}
	}
}

func TestTimelinePaginates(t *testing.T) {
	db := fillBig(t, 1000)
	s, err := New(Config{Listen: "127.0.0.1:0", Chain: db, PageSize: 300})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	next := "/audit/session?id=" + bigSession
	for pages := 0; next != ""; pages++ {
		if pages > 4 {
			t.Fatal("more pages than 1000/300")
		}
		req := httptest.NewRequest("GET", next, nil)
		req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		body := w.Body.String()
		n := strings.Count(body, `<li class="ev `)
		seen = append(seen, fmt.Sprint(n))
		next = ""
		if i := strings.Index(body, `id="next-page"`); i >= 0 {
			j := strings.LastIndex(body[:i], `href="`)
			next = strings.ReplaceAll(body[j+6:i-2], "&amp;", "&")
		}
	}
	if got := strings.Join(seen, ","); got != "300,300,300,100" {
		t.Errorf("pages of %s events, want 300,300,300,100", got)
	}
}
