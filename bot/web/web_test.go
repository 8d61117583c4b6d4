package web

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the zones without /usr/share/zoneinfo

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/storetest"
)

// TestThreadStreamsTheAnswer: an answer written over several stream ticks
// reaches the browser in pieces. The bot posts a bare status message after
// two update intervals without text (a slow start, which then carries the
// text and streams nothing); with 40 ms a slow first token under -race took
// that path in about 1 of 30 runs, so this test uses 400 ms and a model
// that writes for 1.3 s.
func TestThreadStreamsTheAnswer(t *testing.T) {
	r := newRig(t, rigOpts{UpdateInterval: 400 * time.Millisecond})
	tid := r.newThread("alice", "please stream the disk report")
	ev := r.follow("alice", tid)
	r.waitPost(tid, "plenty of room left for the logs.")
	waitFor(t, "the stream's events", func() bool {
		for _, e := range ev.snapshot() {
			if e.Type == "update" && e.Post != nil && strings.Contains(e.Post.Text, "plenty of room") {
				return true
			}
		}
		return false
	})
	var snap, appends int
	for _, e := range ev.snapshot() {
		switch e.Type {
		case "snapshot":
			snap++
			if len(e.Posts) == 0 || e.Posts[0].Author != "alice" {
				t.Errorf("snapshot = %+v, want alice's message first", e.Posts)
			}
		case "append":
			appends++
		}
	}
	if snap != 1 || appends < 2 {
		t.Errorf("got %d snapshot(s) and %d append(s); want 1 and the answer streamed in pieces", snap, appends)
	}
	answers := 0
	for _, p := range r.posts(tid) {
		if strings.Contains(p.Text, "The disk is fine") {
			answers++
		}
	}
	if answers != 1 {
		t.Errorf("the answer shows %d times, want once", answers)
	}
}

func TestApprovalRulesAndOneRun(t *testing.T) {
	r := newRig(t, rigOpts{})
	tid := r.newThread("alice", "please create the marker")
	ask := r.waitPost(tid, "Approval needed")
	if len(ask.Buttons) != 2 || ask.value == "" {
		t.Fatalf("approval post = %+v", ask)
	}
	click := func(user, action string) string {
		t.Helper()
		code, body := r.do(user, "POST", "/api/threads/"+tid+"/posts/"+ask.ID+"/click", `{"action":"`+action+`"}`)
		if code != http.StatusOK {
			t.Fatalf("click as %s: %d %s", user, code, body)
		}
		return body
	}
	if got := click("carol", "approve"); !strings.Contains(got, "not an approver") {
		t.Errorf("carol's click = %s, want refused: not an approver", got)
	}
	if got := click("alice", "approve"); !strings.Contains(got, "two-person rule") {
		t.Errorf("alice's own click = %s, want refused by the two-person rule", got)
	}
	if code, _ := r.do("audrey", "POST", "/api/threads/"+tid+"/posts/"+ask.ID+"/click", `{"action":"approve"}`); code != http.StatusForbidden {
		t.Errorf("an auditor's click: status %d, want 403", code)
	}
	click("bob", "approve")
	r.waitPost(tid, "Created `approved.txt`")
	if got := click("bob", "approve"); !strings.Contains(got, "no open request") {
		t.Errorf("a second click = %s, want refused", got)
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "approved.txt"))
	if err != nil || string(b) != "ran\n" {
		t.Errorf("approved.txt = %q, %v; want the command run exactly once", b, err)
	}
	var refused, decided int
	for ev, err := range r.db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "note" && strings.Contains(string(ev.Payload), "click_refused") {
			refused++
		}
		if ev.Type == "approval_decision" {
			decided++
			if !strings.Contains(string(ev.Payload), `"by":"user:bob"`) {
				t.Errorf("decision = %s, want by bob", ev.Payload)
			}
		}
	}
	if refused != 2 || decided != 1 {
		t.Errorf("chain has %d refused clicks and %d decisions, want 2 and 1", refused, decided)
	}
}

func TestStopKillsTheRunningCommand(t *testing.T) {
	r := newRig(t, rigOpts{})
	tid := r.newThread("alice", "wait a minute")
	ask := r.waitPost(tid, "Approval needed")
	r.do("bob", "POST", "/api/threads/"+tid+"/posts/"+ask.ID+"/click", `{"action":"approve"}`)
	waitFor(t, "the command to run", func() bool { return processRunning(sleepCmd) })
	if code, body := r.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"/stop"}`); code != http.StatusAccepted {
		t.Fatalf("/stop: %d %s", code, body)
	}
	r.waitPost(tid, "Stopped by `/stop` from @alice.")
	r.waitPost(tid, "interrupted: stopped by user:alice with /stop; the process group was killed")
	waitFor(t, "the command's process to be gone", func() bool { return !processRunning(sleepCmd) })
	// Rebuilt from the chain, the thread names alice as it did live.
	waitFor(t, "the run to end", func() bool { return runEnded(r, tid) })
	r.restart(t)
	r.waitPost(tid, "Stopped by `/stop` from @alice.")
}

func TestNoModelSaysHowToSetIt(t *testing.T) {
	r := newRig(t, rigOpts{NoModel: true, Auth: &Auth{}})
	code, page := r.do("", "GET", "/", "")
	if code != http.StatusOK || !strings.Contains(page, "No model is configured") || !strings.Contains(page, "AGENT_BASE_URL") {
		t.Fatalf("console page: %d, no model notice in\n%s", code, page)
	}
	tid := r.newThread("", "hello")
	r.waitPost(tid, "No model is configured")
	r.do("", "POST", "/api/threads/"+tid+"/messages", `{"text":"/help"}`)
	r.waitPost(tid, "/stop")
}

func TestNonLoopbackWithoutAuthRefusesToStart(t *testing.T) {
	db := openStore(t)
	for _, listen := range []string{"0.0.0.0:8080", ":8080", "192.0.2.7:8080", "[::]:8080", "thinbot.example.com:80"} {
		if _, err := New(Config{Listen: listen, Chain: db}); err == nil || !strings.Contains(err.Error(), "without authentication") {
			t.Errorf("New(listen %s, no auth) = %v, want refused", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080"} {
		if _, err := New(Config{Listen: listen, Chain: db}); err != nil {
			t.Errorf("New(listen %s) = %v", listen, err)
		}
	}
	auth := rigAuth()
	if _, err := New(Config{Listen: "0.0.0.0:8080", Chain: db, Auth: auth}); err != nil {
		t.Errorf("New(0.0.0.0 with proxy auth) = %v", err)
	}
}

func openStore(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	storetest.CloseChecked(t, db, agentcore.Decode)
	return db
}

// serve runs one request through a server's handler from remote.
func serve(s *Server, method, path, remote string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://thinbot.example.com"+path, strings.NewReader(`{"text":"hi"}`))
	req.RemoteAddr = remote
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w
}

func TestForgedProxyHeaderIsIgnored(t *testing.T) {
	auth := Auth{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")},
		Roles: map[string][]string{"audrey": {RoleAuditor}}}
	s, err := New(Config{Listen: "0.0.0.0:8080", Auth: auth, Chain: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		remote string
		header string
		want   int
	}{
		{"10.0.0.5:4242", "X-Forwarded-User", http.StatusOK},
		{"10.0.0.5:4242", "X-Auth-Request-Email", http.StatusOK},
		{"10.0.0.6:4242", "X-Forwarded-User", http.StatusSeeOther}, // forged: to the login page
		{"127.0.0.1:4242", "X-Forwarded-User", http.StatusSeeOther},
		{"[::ffff:10.0.0.7]:4242", "X-Auth-Request-Email", http.StatusSeeOther},
	}
	for _, tc := range tests {
		w := serve(s, "GET", "/audit", tc.remote, map[string]string{tc.header: "audrey"})
		if w.Code != tc.want {
			t.Errorf("%s from %s: status %d, want %d", tc.header, tc.remote, w.Code, tc.want)
		}
		if tc.want == http.StatusSeeOther && w.Header().Get("Location") != "/login?next=%2Faudit" {
			t.Errorf("%s from %s: redirected to %q, want /login?next=%%2Faudit", tc.header, tc.remote, w.Header().Get("Location"))
		}
	}
}

func TestCrossOriginPostIsRefused(t *testing.T) {
	r := newRig(t, rigOpts{})
	u := "127.0.0.1:4242"
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"other origin", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"no origin", map[string]string{}, http.StatusForbidden},
		{"cross-site fetch", map[string]string{"Origin": "http://thinbot.example.com", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"same origin", map[string]string{"Origin": "http://thinbot.example.com", "Content-Type": "application/json"}, http.StatusCreated},
	} {
		tc.hdr["X-Forwarded-User"] = "alice"
		w := serve(r.srv, "POST", "/api/threads", u, tc.hdr)
		if w.Code != tc.want {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, w.Code, tc.want, w.Body)
		}
	}
	// The login form is state-changing too.
	w := serve(r.srv, "POST", "/login", u, map[string]string{"Origin": "https://evil.example"})
	if w.Code != http.StatusForbidden {
		t.Errorf("cross-origin login: status %d, want 403", w.Code)
	}
}

func TestOpenConsoleAnswersOnlyLoopback(t *testing.T) {
	s, err := New(Config{Listen: "127.0.0.1:8080", Chain: openStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, remote string
		want         int
	}{
		{"127.0.0.1:8080", "127.0.0.1:5555", http.StatusSeeOther}, // the local operator; no chat: to /audit
		{"localhost:8080", "[::1]:5555", http.StatusSeeOther},
		{"rebind.example.com:8080", "127.0.0.1:5555", http.StatusMisdirectedRequest},
		{"127.0.0.1:8080", "192.0.2.9:5555", http.StatusUnauthorized},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Host, req.RemoteAddr = tc.host, tc.remote
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != tc.want {
			t.Errorf("Host %s from %s: status %d, want %d", tc.host, tc.remote, w.Code, tc.want)
		}
	}
}

func TestTokenLoginAndRoles(t *testing.T) {
	r := newRig(t, rigOpts{})
	form := func(token, origin string) *http.Response {
		req, _ := http.NewRequest("POST", r.url+"/login", strings.NewReader("token="+token))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := form("wrong-token-0123456789", r.url); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: status %d", resp.StatusCode)
	}
	resp := form("carol-token-0123456789", r.url)
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: status %d, cookie %+v", resp.StatusCode, cookie)
	}
	get := func(path string, c *http.Cookie) int {
		req, _ := http.NewRequest("GET", r.url+path, nil)
		req.AddCookie(c)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("/api/threads", cookie); code != http.StatusOK {
		t.Errorf("carol's threads: %d", code)
	}
	if code := get("/audit", cookie); code != http.StatusForbidden {
		t.Errorf("carol (no auditor role) on /audit: %d, want 403", code)
	}
	// audrey is an auditor: carol's login does not become hers however
	// the cookie is changed. Each change is tried alone: where a check
	// stands behind the MAC, the cookie is made with the server's key (as
	// a leaked key could), so that the check under test is what refuses.
	name, sid, ok := r.srv.checkCookie(cookie.Value)
	if !ok || name != "carol" {
		t.Fatalf("the login's cookie names %q (%v)", name, ok)
	}
	until := time.Now().Add(time.Hour)
	alter := func(v string) *http.Cookie { c := *cookie; c.Value = v; return &c }
	flip := func(s string) string { // the last character, changed
		b := []byte(s)
		b[len(b)-1] ^= 1
		return string(b)
	}
	for _, tc := range []struct {
		what   string
		cookie *http.Cookie
	}{
		{"another name, the same MAC", alter(strings.Replace(cookie.Value, cookie.Value[:4], "YXVk", 1))},
		{"the MAC altered", alter(flip(cookie.Value))},
		{"carol's session under audrey's name", alter(r.srv.makeCookie("audrey", until, sid))},
		{"a session id of no session", alter(r.srv.makeCookie("carol", until, flip(sid)))},
	} {
		// Signed out: the API answers 401, a page sends to /login.
		for path, want := range map[string]int{"/api/threads": http.StatusUnauthorized, "/audit": http.StatusSeeOther} {
			if code := get(path, tc.cookie); code != want {
				t.Errorf("%s, %s: %d, want %d", tc.what, path, code, want)
			}
		}
	}
	if code := get("/api/threads", cookie); code != http.StatusOK {
		t.Errorf("carol's own cookie after the forgeries: %d", code)
	}
}

func TestSecurityHeaders(t *testing.T) {
	r := newRig(t, rigOpts{})
	for _, path := range []string{"/", "/audit", "/static/console.js", "/login"} {
		req, _ := http.NewRequest("GET", r.url+path, nil)
		req.Header.Set("X-Forwarded-User", "alice")
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, resp.Header)
		}
	}
	// No inline script or style, nothing from elsewhere.
	entries, _ := assets.ReadDir("assets")
	for _, e := range entries {
		b, _ := assets.ReadFile("assets/" + e.Name())
		for _, bad := range []string{"<script>", "style=", "<style", "onclick=", "http://", "https://", "innerHTML"} {
			if bytes.Contains(b, []byte(bad)) {
				t.Errorf("asset %s contains %q", e.Name(), bad)
			}
		}
	}
}

func TestRestartBringsThreadsBack(t *testing.T) {
	r := newRig(t, rigOpts{})
	tid := r.newThread("alice", "please check the disk")
	r.waitPost(tid, "plenty of room")
	waitFor(t, "the run to end", func() bool { return runEnded(r, tid) })
	s, err := New(Config{Listen: "127.0.0.1:0", Chain: r.db, Chat: true})
	if err != nil {
		t.Fatal(err)
	}
	th := s.threads[tid]
	if th == nil || th.Title != "please check the disk" || th.By != "alice" || len(th.posts) != 2 ||
		!strings.Contains(th.posts[1].Text, "plenty of room") {
		t.Fatalf("restored thread = %+v", th)
	}
}

// TestMessagesAfterARestartAreHandled: a restarted console numbers its
// posts afresh, yet a message in an old thread is new to the bot (which
// skips message ids the chain has seen).
func TestMessagesAfterARestartAreHandled(t *testing.T) {
	r := newRig(t, rigOpts{})
	tid := r.newThread("alice", "please create the marker")
	ask := r.waitPost(tid, "Approval needed")
	r.do("bob", "POST", "/api/threads/"+tid+"/posts/"+ask.ID+"/click", `{"action":"approve"}`)
	r.waitPost(tid, "Created `approved.txt`")
	waitFor(t, "the run to end", func() bool { return runEnded(r, tid) })
	for i := range 3 {
		r.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"please check the disk"}`)
		waitFor(t, "an answer", func() bool { return answers(r, tid) == i+1 })
	}
	waitFor(t, "the runs to end", func() bool { return runsEnded(r, tid) == 4 })
	r.restart(t)
	for i := range 3 {
		r.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"please check the disk"}`)
		waitFor(t, "an answer after the restart", func() bool { return answers(r, tid) == 4+i })
	}
}

func answers(r *rig, tid string) int {
	n := 0
	for _, p := range r.posts(tid) {
		if strings.Contains(p.Text, "plenty of room") && !p.Streaming {
			n++
		}
	}
	return n
}

func runsEnded(r *rig, tid string) int {
	n := 0
	for ev, err := range r.db.Events("web/console/"+tid, 1) {
		if err == nil && ev.Type == "run_finished" {
			n++
		}
	}
	return n
}

func runEnded(r *rig, tid string) bool {
	for ev, err := range r.db.Events("web/console/"+tid, 1) {
		if err == nil && ev.Type == "run_finished" {
			return true
		}
	}
	return false
}

func TestDenyExpiryAndThreadCommands(t *testing.T) {
	r := newRig(t, rigOpts{ApprovalTimeout: 300 * time.Millisecond})
	// Expiry: nobody clicks; the post says so and loses its buttons.
	tid := r.newThread("alice", "please create the marker")
	exp := r.waitPost(tid, "Expired")
	if len(exp.Buttons) != 0 {
		t.Errorf("an expired request still has buttons: %+v", exp)
	}
	// Deny: in a second console, bob denies in time.
	r2 := newRig(t, rigOpts{})
	tid = r2.newThread("alice", "please create the marker")
	ask := r2.waitPost(tid, "Approval needed")
	r2.do("bob", "POST", "/api/threads/"+tid+"/posts/"+ask.ID+"/click", `{"action":"deny"}`)
	r2.waitPost(tid, "**Denied** by @bob")
	waitFor(t, "the run to end", func() bool { return runEnded(r2, tid) })
	if _, err := os.Stat(filepath.Join(r2.dir, "approved.txt")); err == nil {
		t.Errorf("a denied command ran")
	}
	// /audit lists the thread's commands as the chain recorded them; /clear
	// starts a new topic.
	r2.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"/audit"}`)
	r2.waitPost(tid, "echo ran >>approved.txt")
	r2.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"/clear"}`)
	r2.waitPost(tid, "New topic")
	if code, _ := r2.do("alice", "POST", "/api/threads/nosuch/messages", `{"text":"hi"}`); code != http.StatusNotFound {
		t.Errorf("a message to no thread: %d", code)
	}
	if code, _ := r2.do("alice", "POST", "/api/threads", `{"text":"   "}`); code != http.StatusBadRequest {
		t.Errorf("an empty message: %d", code)
	}
}

// TestVerificationRunsInTheBackground: a page shows the verification's
// state at once; the chain is verified in full once in the background, then
// new events are verified from the checkpoint as they commit, never by a
// page request (issue #23).
func TestVerificationRunsInTheBackground(t *testing.T) {
	db := fillBig(t, 10)
	s := mustNew(t, db)
	waitStatus(t, s, "verified up to seq 10")
	fulls := 0
	for range 1000 { // the background's first full verification ends
		s.verifyMu.Lock()
		running := s.verified.running
		fulls = s.verified.fulls
		s.verifyMu.Unlock()
		if !running {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fillMore(t, db, 5)
	waitStatus(t, s, "verified up to seq 15")
	s.verifyMu.Lock()
	after, cp := s.verified.fulls, s.verified.seq
	s.verifyMu.Unlock()
	if after != fulls || cp != 15 {
		t.Errorf("after appends: %d full verifications (%d before), checkpoint %d; want no new full one and 15 (the new events checked from the checkpoint)", after, fulls, cp)
	}
	req := httptest.NewRequest("GET", "/audit/verify", nil)
	req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if body := w.Body.String(); !strings.Contains(body, "seq 15") || !strings.Contains(body, "Last full verification") {
		t.Errorf("verify page:\n%s", body)
	}
}

// waitStatus polls the banner until it starts with want (bounded).
func waitStatus(t *testing.T, s *Server, want string) {
	t.Helper()
	var got string
	for range 1000 {
		if got = s.status(t.Context()).Text; strings.HasPrefix(got, want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("status = %q, want %q", got, want)
}

func fillMore(t *testing.T, db *store.DB, n int) {
	t.Helper()
	for range n {
		if _, err := db.Append(t.Context(), store.Event{Session: bigSession, Type: "note", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
	}
}

func mustNew(t *testing.T, db *store.DB) *Server {
	t.Helper()
	s, err := New(Config{Listen: "127.0.0.1:0", Chain: db})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestApprovalsPageWindow(t *testing.T) {
	db := openStore(t)
	add := func(typ, payload string) {
		t.Helper()
		if _, err := db.Append(t.Context(), store.Event{Session: "slack/C1/1.2", Type: typ, Actor: "gate", Payload: []byte(payload)}); err != nil {
			t.Fatal(err)
		}
	}
	add("approval_requested", `{"request_id":"r1","command":"touch old"}`) // seq 1
	fillMore(t, db, 12)
	add("approval_decision", `{"request_id":"r1","approved":true,"by":"user:bob"}`) // seq 14
	add("approval_requested", `{"request_id":"r15","command":"touch new"}`)         // seq 15
	s := mustNew(t, db)
	s.approvalWindow = 10
	get := func(path string) string {
		req := httptest.NewRequest("GET", path, nil)
		req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:5555"
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		return w.Body.String()
	}
	page := get("/audit/approvals")
	if !strings.Contains(page, "touch new") || strings.Contains(page, "touch old") || !strings.Contains(page, `href="/audit/approvals?before=6"`) {
		t.Fatalf("newest window:\n%s", page)
	}
	page = get("/audit/approvals?before=6")
	if !strings.Contains(page, "touch old") || !strings.Contains(page, "user:bob") || strings.Contains(page, "touch new") {
		t.Errorf("older window (its request decided after it):\n%s", page)
	}
}

func TestThreadsInMemoryAreBounded(t *testing.T) {
	s := mustNew(t, openStore(t))
	for i := range maxThreads + 20 {
		s.addThread(fmt.Sprint("t", i), "x", "alice", time.Now())
	}
	if len(s.threads) != maxThreads || len(s.order) != maxThreads || s.threads["t0"] != nil || s.threads[fmt.Sprint("t", maxThreads+19)] == nil {
		t.Errorf("%d threads, %d in order; want the newest %d", len(s.threads), len(s.order), maxThreads)
	}
}

// TestIntentTextIsShown: the model's words that come with a tool call
// ("Let me do that.") appear in the console thread, above the command,
// even when they and the call arrive within one update interval (the
// field report's B4: they were dropped).
func TestIntentTextIsShown(t *testing.T) {
	r := newRig(t, rigOpts{})
	tid := r.newThread("alice", "please create the marker")
	r.waitPost(tid, "Approval needed")
	status := r.waitPost(tid, "💬 Let me do that.")
	if !strings.Contains(status.Text, "- 💬 Let me do that.\n- `echo ran >>approved.txt`") {
		t.Errorf("status = %q", status.Text)
	}
}

// shownPosts is a thread's posts as a person sees them: author, text,
// attachment; the time of day in an approval card is masked (the live card
// takes it from the click, a rebuilt one from the recorded decision, which
// may fall in the next second), where it is written in the zone abbr
// names ("UTC", "IST").
func shownPosts(ps []wpost, abbr string) []string {
	at := regexp.MustCompile(` at \d\d:\d\d:\d\d ` + abbr)
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s|%v|%s|%s|%x", p.Author, p.Bot, at.ReplaceAllString(p.Text, " at T"), p.FileName, sha256.Sum256(p.data)))
	}
	return out
}

// TestRestartRestoresTheWholeThread: after a restart the thread shows
// what it showed before: the messages, the status with the intent and
// who approved, the approval card, the long output's post, the answers
// and the /audit reply (the field report's B7: 12 posts became 4). The
// approver's time is in the configured zone, live and rebuilt alike.
func TestRestartRestoresTheWholeThread(t *testing.T) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		loc  *time.Location
		abbr string
	}{{nil, "UTC"}, {kolkata, "IST"}} {
		t.Run(tc.abbr, func(t *testing.T) { restartRestoresTheWholeThread(t, tc.loc, tc.abbr) })
	}
}

func restartRestoresTheWholeThread(t *testing.T, loc *time.Location, abbr string) {
	r := newRig(t, rigOpts{Location: loc})
	tid := r.newThread("alice", "please create the marker")
	ask := r.waitPost(tid, "Approval needed")
	r.do("bob", "POST", "/api/threads/"+tid+"/posts/"+ask.ID+"/click", `{"action":"approve"}`)
	r.waitPost(tid, "Created `approved.txt`")
	waitFor(t, "the run to end", func() bool { return runEnded(r, tid) })
	r.waitPost(tid, "_Done: 1 step(s)._")
	r.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"/audit"}`)
	r.waitPost(tid, "approved by user:bob")
	r.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"show the big log"}`)
	r.waitPost(tid, "That was long.")
	waitFor(t, "the second run's status", func() bool {
		n := 0
		for _, p := range r.posts(tid) {
			if strings.HasPrefix(p.Text, "_Done: 1 step(s)._") {
				n++
			}
		}
		return n == 2
	})
	before := shownPosts(r.posts(tid), abbr)
	if len(before) < 10 {
		t.Fatalf("the live thread has only %d posts:\n%s", len(before), strings.Join(before, "\n"))
	}
	r.restart(t)
	after := shownPosts(r.posts(tid), abbr)
	if strings.Join(before, "\n---\n") != strings.Join(after, "\n---\n") {
		t.Errorf("the thread after a restart differs.\nbefore (%d posts):\n%s\n\nafter (%d posts):\n%s", len(before),
			strings.Join(before, "\n---\n"), len(after), strings.Join(after, "\n---\n"))
	}
	for _, want := range []string{"💬 Let me do that.", "**Approved** by @bob at T — running.", "Full output of `seq 1 2000` attached", "approved by user:bob, exit 0"} {
		if !strings.Contains(strings.Join(after, "\n"), want) {
			t.Errorf("the restored thread lacks %q", want)
		}
	}
}

// TestRestartRestoresARefusedMessage: a message the token budget refused
// shows after a restart as it did live, the person's text and the reply
// saying why, from the run_refused note.
func TestRestartRestoresARefusedMessage(t *testing.T) {
	r := newRig(t, rigOpts{Tokens: bot.TokenBudgets{PerThread: 1}}) // any call uses it up
	tid := r.newThread("alice", "what is the uptime?")
	waitFor(t, "the first run to end", func() bool { return runEnded(r, tid) })
	r.do("alice", "POST", "/api/threads/"+tid+"/messages", `{"text":"and the load?"}`)
	r.waitPost(tid, "Not started: this thread has used its budget")
	before := shownPosts(r.posts(tid), "UTC")
	r.restart(t)
	after := shownPosts(r.posts(tid), "UTC")
	if strings.Join(before, "\n---\n") != strings.Join(after, "\n---\n") {
		t.Errorf("the thread after a restart differs.\nbefore (%d posts):\n%s\n\nafter (%d posts):\n%s", len(before),
			strings.Join(before, "\n---\n"), len(after), strings.Join(after, "\n---\n"))
	}
	for _, want := range []string{"and the load?", "Not started: this thread has used its budget"} {
		if !strings.Contains(strings.Join(after, "\n"), want) {
			t.Errorf("the restored thread lacks %q", want)
		}
	}
}

// TestEmptyChainVerificationIsNotReused: a verification made while the
// chain was empty is not shown once events exist, however slow it was
// (the busy-chain reuse keeps a result for 20 times as long as it took).
func TestEmptyChainVerificationIsNotReused(t *testing.T) {
	db := openStore(t)
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { // every reading is a second later: a slow verification
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
	s, err := New(Config{Listen: "127.0.0.1:0", Chain: db, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/audit", nil)
	if st := s.status(req.Context()); !strings.Contains(st.Text, "empty") {
		t.Fatalf("empty chain: %q", st.Text)
	}
	if _, err := db.Append(t.Context(), store.Event{Session: "s", Type: "note", Actor: "system", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if st := s.status(req.Context()); st.Text != "verified up to seq 1" {
		t.Errorf("after the first event: %q, want verified up to seq 1", st.Text)
	}
}
