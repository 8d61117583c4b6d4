package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// The audit viewer's session page links the session's timeline, which an
// auditor downloads as Markdown; others cannot.
func TestAuditTimeline(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Append(context.Background(), store.Event{Session: "web/console/t1", Type: "user_message", Actor: "user:alice", Payload: []byte(`{"text":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	var asked string
	srv, err := New(Config{Listen: "127.0.0.1:0", Auth: rigAuth(), Chain: db, Timeline: func(_ context.Context, s string) (string, error) {
		asked = s
		return "# Incident timeline: `" + s + "`\n", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	get := func(user, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "127.0.0.1:5555"
		req.Header.Set("X-Forwarded-User", user)
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		return w
	}
	page := get("audrey", "/audit/session?id=web%2Fconsole%2Ft1")
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `href="/audit/timeline?session=web%2Fconsole%2Ft1"`) {
		t.Fatalf("session page (%d) has no timeline link:\n%s", page.Code, page.Body)
	}
	w := get("audrey", "/audit/timeline?session=web%2Fconsole%2Ft1")
	if w.Code != http.StatusOK || asked != "web/console/t1" || !strings.HasPrefix(w.Body.String(), "# Incident timeline") ||
		w.Header().Get("Content-Type") != "text/markdown; charset=utf-8" || !strings.Contains(w.Header().Get("Content-Disposition"), ".md") {
		t.Fatalf("timeline: %d %v %q", w.Code, w.Header(), w.Body)
	}
	if w := get("carol", "/audit/timeline?session=web%2Fconsole%2Ft1"); w.Code == http.StatusOK {
		t.Errorf("a non-auditor got the timeline: %d", w.Code)
	}
}

// The audit viewer's rows of a stopped command and run say why they
// stopped: the shutdown's signal, or who sent /stop.
func TestAuditRowsSayWhyARunStopped(t *testing.T) {
	for _, tc := range []struct {
		ev    store.Event
		badge string
		meta  string
	}{
		{store.Event{Type: "tool_result", Payload: []byte(`{"tool":"run","content":"interrupted: thinbot is shutting down (SIGTERM); the process group was killed","exit_code":-1,"cause":"shutdown","cause_by":"SIGTERM"}`)},
			"interrupted", "cause: thinbot is shutting down (SIGTERM)"},
		{store.Event{Type: "run_finished", Payload: []byte(`{"status":"cancelled","detail":"stopped by user:U1 (alice) with /stop","cause":"stop","cause_by":"user:U1 (alice)"}`)},
			"cancelled", "cause: stopped by user:U1 (alice)"},
	} {
		r := timelineRow(tc.ev)
		if r.Badge != tc.badge || !slices.Contains(r.Meta, tc.meta) {
			t.Errorf("%s: badge %q meta %q, want %q and %q", tc.ev.Type, r.Badge, r.Meta, tc.badge, tc.meta)
		}
	}
}
