package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// TestAuditArchivedSession: after an archive, the viewer reports a session
// whose events were archived as archived, naming the file, not as missing;
// a session that went on after the archive shows its live events and says
// where the earlier ones are; an unknown session is still a 404.
func TestAuditArchivedSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		s := fmt.Sprintf("web/console/t%d", i/10)
		if _, err := db.Append(context.Background(), store.Event{Session: s, Type: "user_message", Actor: "user:alice", Payload: []byte(`{"text":"hi"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	res, err := store.Archive(context.Background(), path, nil, store.ArchiveOptions{UpTo: 20})
	if err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Append(context.Background(), store.Event{Session: "web/console/t1", Type: "user_message", Actor: "user:alice", Payload: []byte(`{"text":"again"}`)}); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Listen: "127.0.0.1:0", Auth: rigAuth(), Chain: db})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = "127.0.0.1:5555"
		req.Header.Set("X-Forwarded-User", "audrey")
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		return w
	}
	file := filepath.Base(res.Path)
	w := get("/audit/session?id=web%2Fconsole%2Ft0")
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "is archived") || !strings.Contains(body, "10 events of this session (seq 1–10") || !strings.Contains(body, file) {
		t.Fatalf("archived session page (%d):\n%s", w.Code, body)
	}
	w = get("/audit/session?id=web%2Fconsole%2Ft1")
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, `id="archived"`) || !strings.Contains(body, file) || !strings.Contains(body, `id="seq-32"`) {
		t.Fatalf("continued session page (%d):\n%s", w.Code, body)
	}
	w = get("/audit/export?session=web%2Fconsole%2Ft1")
	if h := w.Header().Get("X-Thinbot-Archived"); w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `{"seq":32,`) || h != "10 earlier events (seq 11-20) in "+file {
		t.Fatalf("export of a continued session: %d %q\n%s", w.Code, h, w.Body)
	}
	if w := get("/audit/session?id=nope"); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), `id="archived"`) ||
		!strings.Contains(w.Body.String(), "Events 1–20 of the chain are archived") {
		t.Fatalf("unknown session: %d\n%s", w.Code, w.Body)
	}
}
