package web

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// TestApprovalsPageIndexed: with the state index current (a daemon keeps
// it), the approvals page reads it: newest first, filtered by state,
// approver, source and channel, paged by seq (issue #23).
func TestApprovalsPageIndexed(t *testing.T) {
	db := openStore(t)
	if err := db.UseIndex(t.Context(), agentcore.StateIndex); err != nil {
		t.Fatal(err)
	}
	add := func(session, typ, actor, payload string) {
		t.Helper()
		if _, err := db.Append(t.Context(), store.Event{Session: session, Type: typ, Actor: actor, Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 130 {
		session := fmt.Sprintf("mattermost/ops/p%d", i)
		if i%2 == 1 {
			session = fmt.Sprintf("slack/C9/%d.1", i)
		}
		add(session, "approval_requested", "gate", fmt.Sprintf(`{"request_id":"r%d","command":"touch f%03d","requester":"user:al"}`, i, i))
		switch i % 4 {
		case 0:
			add(session, "approval_decision", "user:bob", fmt.Sprintf(`{"request_id":"r%d","approved":true,"by":"user:bob"}`, i))
		case 1:
			add(session, "note", "user:eve", fmt.Sprintf(`{"kind":"click_refused","request_id":"r%d","detail":"not an approver"}`, i))
			add(session, "approval_decision", "user:carol", fmt.Sprintf(`{"request_id":"r%d","approved":false,"by":"user:carol","why":"no"}`, i))
		case 2:
			add(session, "approval_decision", "system", fmt.Sprintf(`{"request_id":"r%d","approved":false,"by":"expiry"}`, i))
		}
	}
	if !db.IndexCurrent(agentcore.StateIndex.Name) {
		t.Fatal("index not current")
	}
	s := mustNew(t, db)
	get := func(path string) string {
		req := httptest.NewRequest("GET", path, nil)
		req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		return w.Body.String()
	}
	page := get("/audit/approvals")
	if !strings.Contains(page, "touch f129") || !strings.Contains(page, "touch f030") || strings.Contains(page, "touch f029") ||
		!strings.Contains(page, "100 request(s)") || !strings.Contains(page, "refused click — eve: not an approver") {
		t.Fatalf("first page:\n%s", page)
	}
	i := strings.Index(page, `id="older"`)
	if i < 0 {
		t.Fatalf("no older link:\n%s", page)
	}
	href := page[strings.LastIndex(page[:i], `href="`)+6 : i-2]
	older := get(strings.ReplaceAll(href, "&amp;", "&"))
	if !strings.Contains(older, "touch f029") || !strings.Contains(older, "touch f000") || strings.Contains(older, "touch f030") || strings.Contains(older, `id="older"`) {
		t.Errorf("older page (%s):\n%s", href, older)
	}
	for _, tt := range []struct {
		query     string
		want, not []string
	}{
		{"state=open", []string{"touch f127", "touch f003"}, []string{"touch f128", "touch f126"}},
		{"state=expired", []string{"touch f126", "touch f002"}, []string{"touch f127"}},
		{"by=carol", []string{"touch f125", "user:carol"}, []string{"touch f124"}},
		{"kind=slack", []string{"touch f129"}, []string{"touch f128"}},
		{"channel=mattermost/ops", []string{"touch f128"}, []string{"touch f129"}},
		{"state=approved&kind=mattermost", []string{"touch f128", "touch f000"}, []string{"touch f126", "touch f129"}},
	} {
		page := get("/audit/approvals?" + tt.query)
		for _, w := range tt.want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: page lacks %q", tt.query, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(page, n) {
				t.Errorf("%s: page has %q", tt.query, n)
			}
		}
	}
}

// TestSessionsPageIndexed: sessions most recently active first, in pages
// keyed by seq, filtered by source, by the first message's text and by
// date, with topics from the state index (issue #23).
func TestSessionsPageIndexed(t *testing.T) {
	db, err := store.Open(t.TempDir()+"/events.db", &store.Options{Now: clockFrom(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.UseIndex(t.Context(), agentcore.StateIndex); err != nil {
		t.Fatal(err)
	}
	for i := range 150 { // one event an hour: session i's message at hour i
		session := fmt.Sprintf("mattermost/ops/p%03d", i)
		if i%3 == 0 {
			session = fmt.Sprintf("web/console/t%03d", i)
		}
		text := fmt.Sprintf("question %03d about nginx", i)
		if i == 42 {
			text = "why is the disk full on db7"
		}
		if _, err := db.Append(t.Context(), store.Event{Session: session, Type: "user_message", Actor: "user:al", Payload: []byte(fmt.Sprintf(`{"text":%q}`, text))}); err != nil {
			t.Fatal(err)
		}
	}
	s := mustNew(t, db)
	get := func(path string) string {
		req := httptest.NewRequest("GET", path, nil)
		req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		return w.Body.String()
	}
	page := get("/audit")
	if !strings.Contains(page, "question 149 about nginx") || !strings.Contains(page, "p050") || strings.Contains(page, "p049") || strings.Index(page, "p149") > strings.Index(page, "p148") {
		t.Fatalf("first page:\n%s", page)
	}
	i := strings.Index(page, `id="next-sessions"`)
	if i < 0 {
		t.Fatal("no next link")
	}
	href := strings.ReplaceAll(page[strings.LastIndex(page[:i], `href="`)+6:i-2], "&amp;", "&")
	if older := get(href); !strings.Contains(older, "p049") || !strings.Contains(older, "t000") || strings.Contains(older, "p050") {
		t.Errorf("older page %s:\n%s", href, older)
	}
	for _, tt := range []struct {
		query     string
		want, not []string
	}{
		{"q=disk+full", []string{"web/console/t042", "why is the disk full"}, []string{"p041", "p043"}},
		{"kind=web", []string{"web/console/t147"}, []string{"p149"}},
		// Hour 100 is 2026-01-05 04:00: since that day, sessions from hour 96 on.
		{"since=2026-01-05", []string{"p097", "t096"}, []string{"p095"}},
		{"until=2026-01-02", []string{"p047", "t000"}, []string{"t048", "p049"}},
	} {
		page := get("/audit?" + tt.query)
		for _, w := range tt.want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: page lacks %q", tt.query, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(page, n) {
				t.Errorf("%s: page has %q", tt.query, n)
			}
		}
	}
}

// clockFrom is a clock that starts at t0 and moves step per call.
func clockFrom(t0 time.Time, step time.Duration) func() time.Time {
	now := t0.Add(-step)
	return func() time.Time { now = now.Add(step); return now }
}

// TestEmptyChainThenFirstEvent: the banner of an empty chain says so, and
// once an event exists the next page shows it verified, never the empty
// chain's result (the flake main's TestEmptyChainVerificationIsNotReused
// pins for the earlier, cached verification).
func TestEmptyChainThenFirstEvent(t *testing.T) {
	db := openStore(t)
	s := mustNew(t, db)
	if st := s.status(t.Context()); !strings.Contains(st.Text, "empty") {
		t.Fatalf("empty chain: %q", st.Text)
	}
	if _, err := db.Append(t.Context(), store.Event{Session: "s", Type: "note", Actor: "system", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if st := s.status(t.Context()); st.Text != "verified up to seq 1" {
		t.Errorf("after the first event: %q, want verified up to seq 1", st.Text)
	}
}
