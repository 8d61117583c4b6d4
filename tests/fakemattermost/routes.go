package fakemattermost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

type ctxKey struct{}

// routes builds the API. Each handler finds the caller in the context.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h func(w http.ResponseWriter, r *http.Request, u *User)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			h(w, r, r.Context().Value(ctxKey{}).(*User))
		})
	}
	api("GET /api/v4/system/ping", func(w http.ResponseWriter, r *http.Request, u *User) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "OK"})
	})
	api("GET /api/v4/users/{id}", s.getUser)
	api("GET /api/v4/users/{id}/teams", s.getTeams)
	api("GET /api/v4/users/{id}/teams/{team}/channels", s.getTeamChannels)
	api("GET /api/v4/users/{id}/channels", s.getUserChannels)
	api("GET /api/v4/channels/{id}/posts", s.getPostsSince)
	api("GET /api/v4/channels/{id}/members/{user}", s.getMember)
	api("POST /api/v4/posts", s.postCreate)
	api("GET /api/v4/posts/{id}", s.getPost)
	api("PUT /api/v4/posts/{id}/patch", s.postPatch)
	api("POST /api/v4/posts/{id}/actions/{action}", s.postAction)
	api("POST /api/v4/files", s.uploadFiles)
	mux.HandleFunc("GET /api/v4/websocket", s.serveWebSocket)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail("unexpected request %s %s", r.Method, r.URL.Path)
		writeErr(w, newErr(http.StatusNotFound, "api.context.404.app_error", "Sorry, we could not find the page."))
	})
	return s.middleware(mux)
}

// middleware logs requests, injects 429s and checks the bearer token.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rid := newID()
		w.Header().Set("X-Request-ID", rid)
		w.Header().Set("X-Version-ID", ServerVersion+"."+ServerVersion+".fake.false")
		if r.URL.Path == "/api/v4/websocket" {
			s.record(r, "", http.StatusSwitchingProtocols)
			next.ServeHTTP(w, r)
			return
		}
		s.mu.Lock()
		throttled := s.throttleN > 0
		reset := s.throttleS
		if throttled {
			s.throttleN--
		}
		s.mu.Unlock()
		if throttled {
			s.record(r, "", http.StatusTooManyRequests)
			w.Header().Set("X-Ratelimit-Limit", "10")
			w.Header().Set("X-Ratelimit-Remaining", "0")
			w.Header().Set("X-Ratelimit-Reset", strconv.Itoa(reset))
			w.Header().Set("Retry-After", strconv.Itoa(reset))
			http.Error(w, "limit exceeded", http.StatusTooManyRequests)
			return
		}
		u := s.authUser(r)
		if u == nil {
			s.record(r, "", http.StatusUnauthorized)
			writeErr(w, &apiError{ID: "api.context.session_expired.app_error", Message: "Invalid or expired session, please login again.", RequestID: rid, StatusCode: http.StatusUnauthorized})
			return
		}
		// The request is logged before it is answered, so a test that saw
		// the answer's effect also finds the request in Requests.
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, s: s, idx: s.record(r, u.ID, 0)}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, u)))
		sw.WriteHeader(0)
	})
}

func (s *Server) authUser(r *http.Request) *User {
	// Like Mattermost, the scheme is case-insensitive (Mattermost's own
	// client sends "BEARER", thinbot "Bearer").
	h := r.Header.Get("Authorization")
	var tok string
	switch {
	case len(h) > 7 && strings.EqualFold(h[:7], "bearer "):
		tok = h[7:]
	case len(h) > 6 && strings.EqualFold(h[:6], "token "):
		tok = h[6:]
	default:
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byToken[tok]
}

// record logs a request and returns its index in the log.
func (s *Server) record(r *http.Request, userID string, status int) int {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, UserID: userID, Status: status})
	return len(s.reqs) - 1
}

// statusWriter fills in the logged status when the handler answers.
type statusWriter struct {
	http.ResponseWriter
	s      *Server
	idx    int
	status int
	done   bool
}

// WriteHeader logs code; WriteHeader(0) marks an implicit 200.
func (w *statusWriter) WriteHeader(code int) {
	if w.done {
		return
	}
	w.done = true
	if code != 0 {
		w.status = code
	}
	w.s.reqMu.Lock()
	w.s.reqs[w.idx].Status = w.status
	w.s.reqMu.Unlock()
	if code != 0 {
		w.ResponseWriter.WriteHeader(code)
	}
}

// Write logs an implicit 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	w.WriteHeader(0)
	return w.ResponseWriter.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, e *apiError) {
	if e.RequestID == "" {
		e.RequestID = w.Header().Get("X-Request-ID")
	}
	writeJSON(w, e.StatusCode, e)
}

// userParam resolves {id}, where "me" is the caller.
func (s *Server) userParam(r *http.Request, caller *User) *User {
	id := r.PathValue("id")
	if id == "me" {
		return caller
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.users[id]
}

func userJSON(u *User) map[string]any {
	out := map[string]any{
		"id": u.ID, "create_at": 1, "update_at": 1, "delete_at": 0, "username": u.Username,
		"auth_data": "", "auth_service": "", "email": u.Username + "@example.test", "nickname": "",
		"first_name": "", "last_name": "", "position": "", "roles": "system_user", "locale": "en",
		"timezone": map[string]string{"automaticTimezone": "", "manualTimezone": "", "useAutomaticTimezone": "true"},
	}
	if u.IsBot {
		out["is_bot"] = true
		out["bot_description"] = "fake bot"
	}
	return out
}

func channelJSON(c *Channel) map[string]any {
	return map[string]any{
		"id": c.ID, "create_at": 1, "update_at": 1, "delete_at": 0, "team_id": c.TeamID, "type": c.Type,
		"display_name": c.DisplayName, "name": c.Name, "header": "", "purpose": "", "last_post_at": 0,
		"total_msg_count": 0, "extra_update_at": 0, "creator_id": "",
	}
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request, caller *User) {
	s.mu.Lock()
	hang := s.hangUsers && r.PathValue("id") != "me"
	s.mu.Unlock()
	if hang {
		<-r.Context().Done() // until the caller gives up
		return
	}
	u := s.userParam(r, caller)
	if u == nil {
		writeErr(w, newErr(http.StatusNotFound, "app.user.missing_account.const", "Unable to find the user."))
		return
	}
	writeJSON(w, http.StatusOK, userJSON(u))
}

func (s *Server) getTeams(w http.ResponseWriter, r *http.Request, caller *User) {
	u := s.userParam(r, caller)
	if u == nil || u.ID != caller.ID {
		writeErr(w, newErr(http.StatusForbidden, "api.context.permissions.app_error", "You do not have the appropriate permissions."))
		return
	}
	writeJSON(w, http.StatusOK, []map[string]any{{
		"id": s.TeamID, "create_at": 1, "update_at": 1, "delete_at": 0, "display_name": s.TeamName,
		"name": s.TeamName, "description": "", "email": "", "type": "O", "allow_open_invite": false,
	}})
}

// memberChannels lists the channels of u matching keep, by name.
func (s *Server) memberChannels(u *User, keep func(*Channel) bool) []map[string]any {
	s.mu.Lock()
	var chs []*Channel
	for _, c := range s.channels {
		if c.isMember(u.ID) && keep(c) {
			chs = append(chs, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(chs, func(i, j int) bool { return chs[i].Name < chs[j].Name })
	out := make([]map[string]any, 0, len(chs))
	for _, c := range chs {
		out = append(out, channelJSON(c))
	}
	return out
}

func (s *Server) getTeamChannels(w http.ResponseWriter, r *http.Request, caller *User) {
	u := s.userParam(r, caller)
	team := r.PathValue("team")
	if u == nil || u.ID != caller.ID || team != s.TeamID {
		writeErr(w, newErr(http.StatusForbidden, "api.context.permissions.app_error", "You do not have the appropriate permissions."))
		return
	}
	// Like Mattermost, a team's channel list includes direct and group channels.
	writeJSON(w, http.StatusOK, s.memberChannels(u, func(c *Channel) bool { return c.TeamID == team || c.TeamID == "" }))
}

func (s *Server) getUserChannels(w http.ResponseWriter, r *http.Request, caller *User) {
	u := s.userParam(r, caller)
	if u == nil || u.ID != caller.ID {
		writeErr(w, newErr(http.StatusForbidden, "api.context.permissions.app_error", "You do not have the appropriate permissions."))
		return
	}
	writeJSON(w, http.StatusOK, s.memberChannels(u, func(*Channel) bool { return true }))
}

// channelFor returns the channel {id} if caller may read it.
func (s *Server) channelFor(w http.ResponseWriter, id string, caller *User) *Channel {
	s.mu.Lock()
	c := s.channels[id]
	s.mu.Unlock()
	if c == nil {
		writeErr(w, newErr(http.StatusNotFound, "app.channel.get.existing.app_error", "Unable to find the existing channel."))
		return nil
	}
	if !c.isMember(caller.ID) {
		writeErr(w, newErr(http.StatusForbidden, "api.context.permissions.app_error", "You do not have the appropriate permissions."))
		return nil
	}
	return c
}

func (s *Server) getPostsSince(w http.ResponseWriter, r *http.Request, caller *User) {
	c := s.channelFor(w, r.PathValue("id"), caller)
	if c == nil {
		return
	}
	sinceStr := r.URL.Query().Get("since")
	if sinceStr == "" {
		s.fail("GET posts of a channel without since= (only the since form is implemented)")
		writeErr(w, newErr(http.StatusNotImplemented, "fake.not_implemented", "only since= is implemented"))
		return
	}
	since, err := strconv.ParseInt(sinceStr, 10, 64)
	if err != nil {
		writeErr(w, newErr(http.StatusBadRequest, "api.context.invalid_url_param.app_error", "Invalid since parameter."))
		return
	}
	// collapsedThreads=true answers root posts only, as Mattermost's
	// getPostsSinceCollapsedThreads does (RootId = '').
	roots := r.URL.Query().Get("collapsedThreads") == "true"
	s.mu.Lock()
	var list []*storedPost
	for _, p := range s.posts {
		if p.ChannelID == c.ID && p.UpdateAt > since && (!roots || p.RootID == "") {
			list = append(list, p)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreateAt > list[j].CreateAt })
	if len(list) > 1000 {
		list = list[:1000]
	}
	order := make([]string, 0, len(list))
	posts := make(map[string]any, len(list))
	for _, p := range list {
		order = append(order, p.ID)
		posts[p.ID] = clientPost(p)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"order": order, "posts": posts, "next_post_id": "", "prev_post_id": "", "has_next": false, "first_inaccessible_post_time": 0})
}

func (s *Server) getMember(w http.ResponseWriter, r *http.Request, caller *User) {
	// Like Mattermost (getChannelMember needs read_channel, which only
	// the channel's own roles grant: team_user does not have it), the
	// caller must be in the channel, open or private; a channel that
	// does not exist is refused the same way (403, not 404). Seen on
	// 6.7.2: 403 for a public channel the bot was not in.
	s.mu.Lock()
	c := s.channels[r.PathValue("id")]
	allowed := c != nil && c.isMember(caller.ID)
	s.mu.Unlock()
	if !allowed {
		writeErr(w, newErr(http.StatusForbidden, "api.context.permissions.app_error", "You do not have the appropriate permissions."))
		return
	}
	uid := r.PathValue("user")
	s.mu.Lock()
	member := c.isMember(uid)
	s.mu.Unlock()
	if !member {
		writeErr(w, newErr(http.StatusNotFound, "app.channel.get_member.missing.app_error", "No channel member found for that user ID and channel ID."))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"channel_id": c.ID, "user_id": uid, "roles": "channel_user", "last_viewed_at": 0, "msg_count": 0,
		"mention_count": 0, "notify_props": map[string]string{}, "last_update_at": 0, "scheme_user": true, "scheme_admin": false,
	})
}

func (s *Server) postCreate(w http.ResponseWriter, r *http.Request, caller *User) {
	var in struct {
		ChannelID string         `json:"channel_id"`
		RootID    string         `json:"root_id"`
		Message   string         `json:"message"`
		Props     map[string]any `json:"props"`
		FileIDs   []string       `json:"file_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeErr(w, newErr(http.StatusBadRequest, "api.context.invalid_body_param.app_error", "Invalid or missing post in request body."))
		return
	}
	p, e := s.createPost(caller, in.ChannelID, in.RootID, in.Message, in.Props, in.FileIDs)
	if e != nil {
		writeErr(w, e)
		return
	}
	s.mu.Lock()
	out := clientPost(p)
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) getPost(w http.ResponseWriter, r *http.Request, caller *User) {
	s.mu.Lock()
	p := s.posts[r.PathValue("id")]
	var c *Channel
	if p != nil {
		c = s.channels[p.ChannelID]
	}
	if p == nil || !c.isMember(caller.ID) {
		s.mu.Unlock()
		writeErr(w, newErr(http.StatusNotFound, "app.post.get.app_error", "Unable to get the post."))
		return
	}
	out := clientPost(p)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) postPatch(w http.ResponseWriter, r *http.Request, caller *User) {
	var in struct {
		Message *string         `json:"message"`
		Props   *map[string]any `json:"props"`
		FileIDs *[]string       `json:"file_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeErr(w, newErr(http.StatusBadRequest, "api.context.invalid_body_param.app_error", "Invalid or missing patch in request body."))
		return
	}
	// The answer is written after s.mu is released: the request log's
	// status writer takes s.mu too.
	out, apiErr := s.patch(r.PathValue("id"), caller, in.Message, in.Props)
	if apiErr != nil {
		writeErr(w, apiErr)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// patch applies a post patch by caller and returns the post as clients see it.
func (s *Server) patch(id string, caller *User, msg *string, props *map[string]any) (map[string]any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.posts[id]
	if p == nil {
		return nil, newErr(http.StatusNotFound, "app.post.get.app_error", "Unable to get the post.")
	}
	if p.UserID != caller.ID {
		return nil, newErr(http.StatusForbidden, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	if msg != nil && utf8Len(*msg) > MaxMessageRunes {
		return nil, newErr(http.StatusBadRequest, "model.post.is_valid.msg.app_error", "Invalid Message.")
	}
	s.applyUpdate(p, caller, msg, props)
	return clientPost(p), nil
}

// applyUpdate replaces a post's message and props and broadcasts
// post_edited. s.mu is held.
func (s *Server) applyUpdate(p *storedPost, author *User, msg *string, props *map[string]any) {
	now := s.millis()
	if msg != nil && *msg != p.Message {
		p.Message = *msg
		p.EditAt = now
	}
	if props != nil {
		p.Props = *props
		if p.Props == nil {
			p.Props = map[string]any{}
		}
	}
	p.UpdateAt = now
	if c := s.channels[p.ChannelID]; c != nil {
		s.broadcastPost("post_edited", c, author, p)
	}
}

func utf8Len(s string) int { return len([]rune(s)) }

func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request, caller *User) {
	mr, err := r.MultipartReader()
	if err != nil {
		writeErr(w, newErr(http.StatusBadRequest, "api.file.upload_file.read_request.app_error", "Unable to read the multipart request."))
		return
	}
	var channelID string
	var uploaded []*storedFile
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			writeErr(w, newErr(http.StatusBadRequest, "api.file.upload_file.read_request.app_error", "Unable to read the multipart request."))
			return
		}
		switch part.FormName() {
		case "channel_id":
			b, _ := io.ReadAll(part)
			channelID = string(b)
		case "files":
			// Mattermost reads the stream in order: channel_id must come first.
			if channelID == "" {
				writeErr(w, newErr(http.StatusBadRequest, "api.file.upload_file.multipart.channel_id.app_error", "channel_id must come before the files."))
				return
			}
			uploaded = append(uploaded, s.readFilePart(part, caller.ID, channelID))
		}
	}
	if len(uploaded) == 0 {
		writeErr(w, newErr(http.StatusBadRequest, "api.file.upload_file.no_files.app_error", "No files in the request."))
		return
	}
	if s.channelFor(w, channelID, caller) == nil {
		return
	}
	infos := make([]map[string]any, 0, len(uploaded))
	s.mu.Lock()
	for _, f := range uploaded {
		s.files[f.ID] = f
		ext := ""
		if i := strings.LastIndexByte(f.Name, '.'); i >= 0 {
			ext = f.Name[i+1:]
		}
		infos = append(infos, map[string]any{
			"id": f.ID, "user_id": f.UserID, "channel_id": f.ChannelID, "post_id": "", "create_at": f.CreateAt,
			"update_at": f.CreateAt, "delete_at": 0, "name": f.Name, "extension": ext, "size": len(f.Data),
			"mime_type": http.DetectContentType(f.Data),
		})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"file_infos": infos, "client_ids": []string{}})
}

func (s *Server) readFilePart(part *multipart.Part, userID, channelID string) *storedFile {
	data, _ := io.ReadAll(part)
	return &storedFile{ID: newID(), Name: part.FileName(), UserID: userID, ChannelID: channelID, Data: data, CreateAt: time.Now().UnixMilli()}
}

// postAction is POST /posts/{id}/actions/{action}: what Mattermost does
// when a user presses a button.
func (s *Server) postAction(w http.ResponseWriter, r *http.Request, caller *User) {
	postID, actionID := r.PathValue("id"), r.PathValue("action")
	s.mu.Lock()
	p := s.posts[postID]
	var c *Channel
	if p != nil {
		c = s.channels[p.ChannelID]
	}
	if p == nil || !c.isMember(caller.ID) {
		s.mu.Unlock()
		writeErr(w, newErr(http.StatusNotFound, "app.post.get.app_error", "Unable to get the post."))
		return
	}
	var action *Action
	for _, a := range parseAttachments(p.Props) {
		for _, act := range a.Actions {
			if act.ID == actionID {
				act := act
				action = &act
			}
		}
	}
	omitName := s.omitName
	channelName, teamID := c.Name, c.TeamID
	s.mu.Unlock()
	if action == nil || action.URL == "" {
		writeErr(w, newErr(http.StatusNotFound, "api.post.do_action.action_id.app_error", "Invalid action id."))
		return
	}
	trigger := newID()
	req := map[string]any{
		"user_id": caller.ID, "channel_id": p.ChannelID, "channel_name": channelName,
		"team_id": teamID, "team_domain": s.TeamName, "post_id": postID, "trigger_id": trigger,
		"type": "", "data_source": "", "context": action.Context,
	}
	if !omitName {
		req["user_name"] = caller.Username
	}
	body, _ := json.Marshal(req)
	ireq, err := http.NewRequestWithContext(r.Context(), http.MethodPost, action.URL, strings.NewReader(string(body)))
	if err != nil {
		writeErr(w, newErr(http.StatusBadRequest, "api.post.do_action.action_integration.app_error", "Action integration error."))
		return
	}
	ireq.Header.Set("Content-Type", "application/json")
	ireq.Header.Set("Accept", "application/json")
	resp, err := s.hc.Do(ireq)
	if err != nil {
		writeErr(w, newErr(http.StatusBadRequest, "api.post.do_action.action_integration.app_error", "Action integration error: "+err.Error()))
		return
	}
	defer resp.Body.Close()
	w.Header().Set("X-Fake-Integration-Status", strconv.Itoa(resp.StatusCode))
	if resp.StatusCode != http.StatusOK {
		writeErr(w, newErr(http.StatusBadRequest, "api.post.do_action.action_integration.app_error", fmt.Sprintf("Action integration error: status %d.", resp.StatusCode)))
		return
	}
	var ir struct {
		Update *struct {
			Message string          `json:"message"`
			Props   *map[string]any `json:"props"`
		} `json:"update"`
		EphemeralText string `json:"ephemeral_text"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ir); err != nil {
		writeErr(w, newErr(http.StatusBadRequest, "api.post.do_action.action_integration.app_error", "Action integration error: bad JSON."))
		return
	}
	s.mu.Lock()
	if ir.Update != nil {
		// Like Mattermost's UpdatePost: message and props are replaced whole.
		props := ir.Update.Props
		if props == nil {
			props = &map[string]any{}
		}
		author := s.users[p.UserID]
		s.applyUpdate(p, author, &ir.Update.Message, props)
		w.Header().Set("X-Fake-Updated", "true")
	}
	if ir.EphemeralText != "" {
		s.ephemerals = append(s.ephemerals, Ephemeral{UserID: caller.ID, ChannelID: p.ChannelID, PostID: postID, Message: ir.EphemeralText})
		s.byTrigger[trigger] = ir.EphemeralText
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"status": "OK", "trigger_id": trigger})
}
