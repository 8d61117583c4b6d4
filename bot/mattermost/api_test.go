package mattermost

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mattermost/mattermost/server/public/model"

	"github.com/thinbot/thinbot/bot"
)

const apiTestToken = "s3cr3t-bot-token-0123456789"

// wireRequest is a request as the test server saw it.
type wireRequest struct {
	Method, Path, RawQuery, Auth, ContentType string
	Body                                      []byte
}

// wireServer is an httptest server that answers each request with the
// next of its scripted handlers and records what it received.
type wireServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []wireRequest
	next []http.HandlerFunc
}

func newWireServer(t *testing.T, handlers ...http.HandlerFunc) *wireServer {
	t.Helper()
	s := &wireServer{next: handlers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, wireRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		var h http.HandlerFunc
		if len(s.next) > 0 {
			h, s.next = s.next[0], s.next[1:]
		}
		s.mu.Unlock()
		if h == nil {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.Error(w, "unexpected", http.StatusInternalServerError)
			return
		}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *wireServer) requests() []wireRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]wireRequest(nil), s.reqs...)
}

// client returns the API client of an adapter for s, built by New as in
// production (retrying transport included).
func (s *wireServer) client(t *testing.T, hc *http.Client) (*apiClient, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	a, err := New(Config{URL: s.URL + "/", Token: apiTestToken, CallbackURL: "http://127.0.0.1:1/cb",
		ActionSecret: testSecret, HTTPClient: hc, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return a.client, logs
}

// answer writes a JSON body as Mattermost does.
func answer(status int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// A post as Mattermost 9 returns it: every field, most unused by thinbot.
const wirePost = `{"id":"p1","create_at":1700000000123,"update_at":1700000000123,"edit_at":0,"delete_at":0,
"is_pinned":false,"user_id":"b1","channel_id":"c1","root_id":"r1","original_id":"","message":"hello",
"type":"","props":{"from_bot":"true","attachments":[{"id":0,"fallback":"buttons","actions":[]}]},
"hashtags":"","file_ids":["f1"],"pending_post_id":"","reply_count":0,"last_reply_at":0,"participants":null,
"metadata":{"files":[{"id":"f1","name":"out.txt","size":6}]}}`

func TestAPIRequestsAndAnswers(t *testing.T) {
	ctx := t.Context()
	s := newWireServer(t,
		answer(http.StatusOK, `{"id":"b1","create_at":1,"username":"thinbot","email":"","is_bot":true,"roles":"system_user"}`, "X-Version-Id", "9.11.0.9.11.0.abc.true"),
		answer(http.StatusOK, `{"id":"u1","username":"alice","locale":"en"}`),
		answer(http.StatusOK, `[{"id":"t1","display_name":"Ops","name":"ops","type":"O"}]`),
		answer(http.StatusOK, `[{"id":"c1","team_id":"t1","type":"O","display_name":"Ops Room","name":"ops","header":""},{"id":"d1","team_id":"","type":"D","display_name":"","name":"b1__u1"}]`),
		answer(http.StatusOK, `[{"id":"c1","type":"P","display_name":"X","name":"x"}]`),
		answer(http.StatusOK, `{"channel_id":"c1","user_id":"u1","roles":"channel_user","notify_props":{}}`),
		answer(http.StatusOK, `{"order":["p1"],"posts":{"p1":`+wirePost+`},"next_post_id":"","prev_post_id":"","has_next":false}`),
		answer(http.StatusCreated, wirePost),
		answer(http.StatusOK, wirePost),
		answer(http.StatusCreated, `{"file_infos":[{"id":"f9","user_id":"b1","channel_id":"c1","name":"out.txt","extension":"txt","size":6}],"client_ids":[]}`),
	)
	c, _ := s.client(t, nil)

	me, version, err := c.getMe(ctx)
	if err != nil || me.Id != "b1" || me.Username != "thinbot" || version != "9.11.0.9.11.0.abc.true" {
		t.Errorf("getMe = %+v, %q, %v", me, version, err)
	}
	if u, err := c.getUser(ctx, "u1"); err != nil || u.Username != "alice" {
		t.Errorf("getUser = %+v, %v", u, err)
	}
	if ts, err := c.getTeamsForUser(ctx, "b1"); err != nil || len(ts) != 1 || ts[0].Id != "t1" {
		t.Errorf("getTeamsForUser = %+v, %v", ts, err)
	}
	chs, err := c.getChannelsForTeamForUser(ctx, "t1", "b1")
	if err != nil || len(chs) != 2 || chs[0].Id != "c1" || chs[0].Name != "ops" || chs[0].DisplayName != "Ops Room" ||
		chs[0].Type != model.ChannelTypeOpen || chs[1].Type != model.ChannelTypeDirect {
		t.Errorf("getChannelsForTeamForUser = %+v, %v", chs, err)
	}
	if chs, err := c.getChannelsForUser(ctx, "b1"); err != nil || len(chs) != 1 || chs[0].Type != model.ChannelTypePrivate {
		t.Errorf("getChannelsForUser = %+v, %v", chs, err)
	}
	if err := c.getChannelMember(ctx, "c1", "u1"); err != nil {
		t.Errorf("getChannelMember = %v", err)
	}
	checkPost := func(what string, p *model.Post) {
		t.Helper()
		if p == nil || p.Id != "p1" || p.CreateAt != 1700000000123 || p.UserId != "b1" || p.ChannelId != "c1" || p.RootId != "r1" ||
			p.Message != "hello" || p.DeleteAt != 0 || p.Type != "" || !fromBot(p) {
			t.Errorf("%s = %+v", what, p)
		}
	}
	list, err := c.getPostsSince(ctx, "c1", 1700000000000)
	if err != nil || len(list.Posts) != 1 || len(list.Order) != 1 {
		t.Errorf("getPostsSince = %+v, %v", list, err)
	} else {
		checkPost("getPostsSince", list.Posts["p1"])
	}
	props := model.StringInterface{"attachments": []attachment{}}
	np := &model.Post{ChannelId: "c1", RootId: "r1", Message: "hello", FileIds: model.StringArray{"f1"}}
	np.SetProps(props)
	if p, err := c.createPost(ctx, np); err != nil {
		t.Errorf("createPost: %v", err)
	} else {
		checkPost("createPost", p)
	}
	msg := "edited"
	if err := c.patchPost(ctx, "p1", &model.PostPatch{Message: &msg, Props: &props}); err != nil {
		t.Errorf("patchPost = %v", err)
	}
	if ids, err := c.uploadFile(ctx, "c1", "out.txt", []byte("hello\n")); err != nil || len(ids) != 1 || ids[0] != "f9" {
		t.Errorf("uploadFile = %v, %v", ids, err)
	}

	wants := []struct{ method, path, query, contentType, body string }{
		{"GET", "/api/v4/users/me", "", "", ""},
		{"GET", "/api/v4/users/u1", "", "", ""},
		{"GET", "/api/v4/users/b1/teams", "", "", ""},
		{"GET", "/api/v4/users/b1/teams/t1/channels", "include_deleted=false", "", ""},
		{"GET", "/api/v4/users/b1/channels", "last_delete_at=0", "", ""},
		{"GET", "/api/v4/channels/c1/members/u1", "", "", ""},
		{"GET", "/api/v4/channels/c1/posts", "collapsedThreads=false&since=1700000000000", "", ""},
		{"POST", "/api/v4/posts", "", "", `{"channel_id":"c1","root_id":"r1","message":"hello","file_ids":["f1"],"props":{"attachments":[]}}`},
		{"PUT", "/api/v4/posts/p1/patch", "", "", `{"message":"edited","props":{"attachments":[]}}`},
		{"POST", "/api/v4/files", "", "multipart/form-data", ""},
	}
	reqs := s.requests()
	if len(reqs) != len(wants) {
		t.Fatalf("%d requests, want %d", len(reqs), len(wants))
	}
	for i, w := range wants {
		r := reqs[i]
		if r.Method != w.method || r.Path != w.path || r.RawQuery != w.query || !strings.HasPrefix(r.ContentType, w.contentType) {
			t.Errorf("request %d = %s %s?%s (%s), want %s %s?%s (%s)", i, r.Method, r.Path, r.RawQuery, r.ContentType, w.method, w.path, w.query, w.contentType)
		}
		// Client4 sends "BEARER"; Mattermost reads the scheme
		// case-insensitively.
		if !strings.EqualFold(r.Auth, "Bearer "+apiTestToken) {
			t.Errorf("request %d: Authorization %q", i, r.Auth)
		}
		if w.body != "" {
			// model.Post and model.PostPatch send every field; the ones
			// that matter must carry what the adapter set.
			if !jsonSubset(t, w.body, r.Body) {
				t.Errorf("request %d: body %s, want the fields of %s", i, r.Body, w.body)
			}
		}
	}

	// The upload is multipart with channel_id before the file, as the
	// server reads it in order.
	up := reqs[len(reqs)-1]
	req, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader(string(up.Body)))
	req.Header.Set("Content-Type", up.ContentType)
	mr, err := req.MultipartReader()
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for {
		part, err := mr.NextPart()
		if err != nil {
			break
		}
		data, _ := io.ReadAll(part)
		parts = append(parts, part.FormName()+"|"+part.FileName()+"|"+string(data))
	}
	if len(parts) != 2 || parts[0] != "channel_id||c1" || parts[1] != "files|out.txt|hello\n" {
		t.Errorf("multipart parts = %q", parts)
	}
}

// jsonSubset reports whether every field of the JSON object want is in the
// JSON object got with the same value.
func jsonSubset(t *testing.T, want string, got []byte) bool {
	t.Helper()
	var w, g map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if json.Unmarshal(got, &g) != nil {
		return false
	}
	for k, v := range w {
		wv, _ := json.Marshal(v)
		gv, _ := json.Marshal(g[k])
		if string(wv) != string(gv) {
			return false
		}
	}
	return true
}

// The JSON of a button is the PostAction JSON Mattermost reads.
func TestButtonWireFormat(t *testing.T) {
	a := &Adapter{cfg: Config{CallbackURL: "http://10.0.0.5/cb", ActionSecret: testSecret}}
	b, err := json.Marshal(a.props("c1", "r1", bot.Post{Text: "ask", Value: "v1", Buttons: []bot.Button{{ID: "approve", Label: "Approve", Style: "primary"}}}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"attachments":[{"fallback":"buttons","actions":[{"id":"approve","type":"button","name":"Approve","style":"primary",` +
		`"integration":{"url":"http://10.0.0.5/cb","context":{"action":"approve","mac":"` + a.mac("c1", "r1", "v1", "approve") + `","root":"r1","value":"v1"}}}]}]}`
	if string(b) != want {
		t.Errorf("props JSON:\n got %s\nwant %s", b, want)
	}
}

func TestAPIErrors(t *testing.T) {
	appErr := `{"id":"api.context.permissions.app_error","message":"You do not have the appropriate permissions.","detailed_error":"","request_id":"rq1","status_code":403}`
	tests := []struct {
		name    string
		h       http.HandlerFunc
		status  int
		id      string
		reqID   string
		message string // in Error()
	}{
		{"app error", answer(http.StatusForbidden, appErr, "X-Request-Id", "rq1"), 403, "api.context.permissions.app_error", "rq1",
			"mattermost: get user: HTTP 403: You do not have the appropriate permissions. (api.context.permissions.app_error) [request rq1]"},
		{"request id from body", answer(http.StatusNotFound, `{"id":"app.user.missing_account.const","message":"Unable to find the user.","request_id":"rq2","status_code":404}`),
			404, "app.user.missing_account.const", "rq2", "Unable to find the user."},
		{"plain text", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream unavailable", http.StatusBadGateway)
		},
			502, "", "", "mattermost: get user: HTTP 502: upstream unavailable"},
		{"empty body", answer(http.StatusInternalServerError, ""), 500, "", "", "HTTP 500: Internal Server Error"},
		{"long html", answer(http.StatusBadGateway, "<html>"+strings.Repeat("x", 5000)+"</html>"), 502, "", "", "<html>xxx"},
		{"echoed token in text", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad header: "+r.Header.Get("Authorization"), http.StatusBadRequest)
		}, 400, "", "", "bad header: BEARER [token]"}, // Client4 sends BEARER
		{"echoed token in app error", func(w http.ResponseWriter, r *http.Request) {
			answer(http.StatusUnauthorized, `{"id":"api.context.session_expired.app_error","message":"Invalid session `+apiTestToken+`","status_code":401}`)(w, r)
		}, 401, "api.context.session_expired.app_error", "", "Invalid session [token]"},
		{"bad json on success", answer(http.StatusOK, `{"id":`), 200, "", "", "decode response"},
		{"answer too large", answer(http.StatusOK, `{"id":"u1","username":"`+strings.Repeat("a", maxObjectAnswer)+`"}`), 200, "", "",
			"decode response: the answer is larger than 4 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newWireServer(t, tt.h)
			c, _ := s.client(t, nil)
			_, err := c.getUser(t.Context(), "u1")
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an *APIError", err)
			}
			if ae.Status != tt.status || ae.ID != tt.id || ae.RequestID != tt.reqID || ae.Op != "get user" {
				t.Errorf("APIError = %+v", ae)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.message) {
				t.Errorf("Error() = %q, want it to contain %q", msg, tt.message)
			}
			if strings.Contains(msg, apiTestToken) || len(msg) > 400 {
				t.Errorf("Error() leaks the token or is too long: %q", msg)
			}
		})
	}
}

// TestAnswerLimits: each call's answer is capped by what it can hold, a
// list of channels well above one object's cap (a bot in hundreds of
// channels), one user or post far below a catch-up page's.
func TestAnswerLimits(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		want         int64
	}{
		{"GET", "/users/me", maxObjectAnswer},
		{"GET", "/users/u1", maxObjectAnswer},
		{"GET", "/users/b1/teams", maxListAnswer},
		{"GET", "/users/b1/channels", maxListAnswer},
		{"GET", "/users/b1/teams/t1/channels", maxListAnswer},
		{"GET", "/channels/c1/posts", maxPostsAnswer},
		{"GET", "/channels/c1/members/u1", maxObjectAnswer},
		{"POST", "/posts", maxObjectAnswer},
		{"PUT", "/posts/p1/patch", maxObjectAnswer},
		{"POST", "/files", maxObjectAnswer},
		{"POST", "/channels/c1/posts", maxObjectAnswer},
	} {
		if got := answerLimit(tt.method, tt.path); got != tt.want {
			t.Errorf("answerLimit(%s %s) = %d MiB, want %d MiB", tt.method, tt.path, got>>20, tt.want>>20)
		}
	}

	// Through New's client, on a server under a path: a 5 MiB list of
	// teams is read, a 5 MiB user is refused.
	big := strings.Repeat("a", 5<<20)
	s := newWireServer(t,
		answer(http.StatusOK, `[{"id":"t1","display_name":"`+big+`"}]`),
		answer(http.StatusOK, `{"id":"u1","username":"`+big+`"}`))
	logs := &syncBuffer{}
	a, err := New(Config{URL: s.URL + "/mm", Token: apiTestToken, CallbackURL: "http://127.0.0.1:1/cb",
		ActionSecret: testSecret, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if ts, err := a.client.getTeamsForUser(t.Context(), "b1"); err != nil || len(ts) != 1 || ts[0].Id != "t1" {
		t.Errorf("5 MiB list of teams: %d teams, %v", len(ts), err)
	}
	if _, err := a.client.getUser(t.Context(), "u1"); err == nil || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Errorf("5 MiB user: err = %v, want larger than 4 MiB", err)
	}
	if reqs := s.requests(); len(reqs) != 2 || reqs[0].Path != "/mm/api/v4/users/b1/teams" {
		t.Errorf("requests = %+v", reqs)
	}
}

// TestErrorBodyCapped: an error answer is read up to maxErrorBody, not to
// its end: a server (or a proxy) that sends an endless error page does not
// make the client read it into memory.
func TestErrorBodyCapped(t *testing.T) {
	const total = 256 << 20
	written := make(chan int64, 1)
	s := newWireServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		chunk := []byte(strings.Repeat("x", 64<<10))
		var n int64
		for n < total {
			k, err := w.Write(chunk)
			n += int64(k)
			if err != nil {
				break
			}
		}
		written <- n
	})
	c, _ := s.client(t, nil)
	_, err := c.getUser(t.Context(), "u1")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || len(err.Error()) > 400 {
		t.Errorf("err = %.500v, want a short APIError 502", err)
	}
	select {
	case n := <-written:
		// Socket buffers hold a few MiB beyond what the client read.
		if n >= total {
			t.Errorf("the server wrote the whole %d MiB error page: the client read it to the end", total>>20)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server's handler did not end within 30s")
	}
}

// TestAPIRedirectNotFollowed: a redirect (to another port of the same
// host, or from https to http) is not followed, so the token is not sent
// there, and the error says what happened.
func TestAPIRedirectNotFollowed(t *testing.T) {
	var leaked atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		answer(http.StatusOK, `{"id":"u1","username":"alice"}`)(w, r)
	}))
	defer elsewhere.Close()
	s := newWireServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusFound)
	})
	c, _ := s.client(t, nil)
	_, err := c.getUser(t.Context(), "u1")
	if leaked.Load() != 0 {
		t.Error("the token was sent to the redirect's target")
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusFound || !strings.Contains(err.Error(), "redirected to "+elsewhere.URL+"/api/v4/users/u1") {
		t.Errorf("err = %v, want an *APIError for the 302 naming its target", err)
	}
}

func TestAPIRateLimit(t *testing.T) {
	limited := func(header ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i+1 < len(header); i += 2 {
				w.Header().Set(header[i], header[i+1])
			}
			w.Header().Set("X-Ratelimit-Limit", "10")
			w.Header().Set("X-Ratelimit-Remaining", "0")
			http.Error(w, "limit exceeded", http.StatusTooManyRequests)
		}
	}
	// The retry replays the body: both attempts carry the same post.
	s := newWireServer(t, limited("Retry-After", "0"), limited("X-Ratelimit-Reset", "0"), answer(http.StatusCreated, wirePost))
	c, logs := s.client(t, nil)
	if _, err := c.createPost(t.Context(), &model.Post{ChannelId: "c1", Message: "hello"}); err != nil {
		t.Fatal(err)
	}
	reqs := s.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		if !jsonSubset(t, `{"channel_id":"c1","message":"hello"}`, r.Body) || string(r.Body) != string(reqs[0].Body) ||
			!strings.EqualFold(r.Auth, "Bearer "+apiTestToken) {
			t.Errorf("attempt sent %s with %q", r.Body, r.Auth)
		}
	}
	if n := strings.Count(logs.String(), "rate limit"); n != 2 {
		t.Errorf("%d rate-limit log lines, want 2", n)
	}

	// After three retries the 429 is the answer.
	s = newWireServer(t, limited("Retry-After", "0"), limited("Retry-After", "0"), limited("Retry-After", "0"), limited("Retry-After", "0"))
	c, _ = s.client(t, nil)
	_, err := c.createPost(t.Context(), &model.Post{ChannelId: "c1", Message: "hello"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || !strings.Contains(err.Error(), "limit exceeded") {
		t.Errorf("err = %v, want an APIError 429", err)
	}
}

// A hung server: the request ends with the caller's context, or with the
// client's timeout, and the error says so. Every wait is bounded, so a
// request that never arrives or never ends fails the test instead of
// hanging it.
func TestAPICancelAndTimeout(t *testing.T) {
	arrived := make(chan struct{}, 1)
	hang := func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}

	s := newWireServer(t, hang)
	c, _ := s.client(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	noRequest := make(chan struct{})
	go func() {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			close(noRequest)
		}
		cancel()
	}()
	_, err := c.getUser(ctx, "u1")
	select {
	case <-noRequest:
		t.Fatalf("the request did not reach the server within 10s (err = %v)", err)
	default:
	}
	var ae *APIError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &ae) || ae.Op != "get user" {
		t.Errorf("cancelled: err = %v", err)
	}

	s = newWireServer(t, hang)
	c, _ = s.client(t, &http.Client{Timeout: 50 * time.Millisecond})
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = c.getUser(ctx, "u1")
	var ne interface{ Timeout() bool }
	if ctx.Err() != nil || !errors.As(err, &ne) || !ne.Timeout() || strings.Contains(err.Error(), apiTestToken) {
		t.Errorf("timed out: err = %v (the client's 50ms timeout, not the test's 10s)", err)
	}
}
