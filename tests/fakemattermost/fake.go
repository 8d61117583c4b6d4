// Package fakemattermost is a fake Mattermost server for tests. It speaks
// the REST API v4 JSON and the WebSocket event protocol for the calls
// thinbot makes, on an httptest server bound to 127.0.0.1, and it plays
// Mattermost's part in interactive buttons: Click posts to
// /api/v4/posts/{id}/actions/{action_id} as a user, and the fake calls the
// button's integration URL with the same JSON body Mattermost sends and
// applies the integration response.
//
// # Driving it
//
//	mm := fakemattermost.New(t)                 // team, bot user "thinbot" (mm.Bot, token mm.Bot.Token)
//	alice := mm.AddUser("alice")                // a human with her own token
//	ch := mm.AddChannel("ops", mm.Bot.ID, alice.ID)
//	dm := mm.DirectChannel(alice.ID)            // DM between the bot and alice
//	id := mm.UserPost(alice.ID, ch, "", "@thinbot df -h")   // stored and broadcast as "posted"
//	replies := mm.Thread(id)                    // root and replies, props and files included
//	res, err := mm.Click(ctx, postID, "approve", bob.ID)  // res.Ephemeral is what bob saw
//	mm.DropWebSockets()                         // cut every event connection
//	mm.BlockWebSockets(true)                    // refuse new ones until unblocked
//	mm.WaitConnections(ctx, 1)                  // until the bot is connected again
//	mm.Throttle(2, 1)                           // next 2 API calls get 429, reset in 1s
//	mm.Requests()                               // every request: method, path, user, status
//
// # Failing loudly
//
// Every API route checks the bearer token (401 otherwise) and Mattermost's
// basic rules (channel membership, root posts, message length, file
// ownership). A request to a route the fake does not implement answers 404
// and fails the test given to New (or, with a nil testing.TB, is listed by
// Failures). Posts returned by the API and the WebSocket have their button
// integrations (URL and context) stripped, as Mattermost does; the test
// accessors (Posts, Thread, Post) show them.
//
// All methods may be called concurrently. Close (registered as a cleanup
// by New when it has a testing.TB) stops the server.
package fakemattermost

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// ServerVersion is the version the fake reports in X-Version-ID and hello.
const ServerVersion = "6.0.0"

// MaxMessageRunes is Mattermost's limit on a post's message.
const MaxMessageRunes = 16383

// User is an account on the fake server.
type User struct {
	ID       string
	Username string
	// Token authenticates the user's API requests (Authorization: Bearer).
	Token string
	IsBot bool
}

// Channel is a channel on the fake server.
type Channel struct {
	ID          string
	Name        string
	DisplayName string
	// Type is "O" (open), "P" (private), "D" (direct) or "G" (group).
	Type    string
	TeamID  string // "" for direct channels
	Members []string
}

// Action is an interactive button on a post, as the integration made it.
type Action struct {
	ID    string
	Type  string
	Name  string
	Style string
	// URL and Context are the button's integration, which Mattermost keeps
	// on the server and never returns to clients.
	URL     string
	Context map[string]any
}

// Attachment is a message attachment of a post.
type Attachment struct {
	Text    string
	Actions []Action
}

// File is an uploaded file.
type File struct {
	ID   string
	Name string
	Data []byte
}

// Post is a post as the fake stores it.
type Post struct {
	ID        string
	ChannelID string
	RootID    string
	UserID    string
	Message   string
	Type      string
	// Props is the post's props as JSON decodes them.
	Props       map[string]any
	Attachments []Attachment
	Files       []File
	CreateAt    int64
	UpdateAt    int64
	EditAt      int64
}

// Request is one request the fake received.
type Request struct {
	Method   string
	Path     string
	RawQuery string
	UserID   string // "" if unauthenticated
	Status   int
}

// Ephemeral is a message shown to one user only (an integration's
// ephemeral_text).
type Ephemeral struct {
	UserID    string
	ChannelID string
	PostID    string
	Message   string
}

// ClickResult is the outcome of Click.
type ClickResult struct {
	// Status is the HTTP status of the actions call (200 when the
	// integration answered 200).
	Status int
	// IntegrationStatus is the status the integration URL answered with.
	IntegrationStatus int
	// Ephemeral is the text shown to the clicker only, if any.
	Ephemeral string
	// Updated reports whether the integration response updated the post.
	Updated bool
}

// Server is a running fake Mattermost server.
type Server struct {
	// URL is the server's base URL (http://127.0.0.1:port).
	URL string
	// TeamID and TeamName name the one team every user belongs to.
	TeamID   string
	TeamName string
	// Bot is the bot account thinbot logs in as.
	Bot User

	tb  testing.TB
	srv *httptest.Server
	hc  *http.Client
	wg  sync.WaitGroup

	// reqMu guards reqs; handlers log their status while holding mu.
	reqMu sync.Mutex
	reqs  []Request

	mu         sync.Mutex
	users      map[string]*User
	byToken    map[string]*User
	channels   map[string]*Channel
	posts      map[string]*storedPost
	files      map[string]*storedFile
	failures   []string
	ephemerals []Ephemeral
	byTrigger  map[string]string // trigger id -> ephemeral text
	throttleN  int
	throttleS  int
	omitName   bool
	hangUsers  bool
	blockWS    bool
	conns      map[*wsConn]struct{}
	changed    chan struct{}
	lastMillis int64
	closed     bool
}

type storedPost struct {
	ID, ChannelID, RootID, UserID, Message, Type string
	Props                                        map[string]any
	FileIDs                                      []string
	CreateAt, UpdateAt, EditAt                   int64
}

type storedFile struct {
	ID, Name, UserID, ChannelID, PostID string
	Data                                []byte
	CreateAt                            int64
}

// New starts a fake server with one team and a bot user "thinbot". With a
// non-nil tb, unexpected requests fail the test and Close runs at cleanup.
func New(tb testing.TB) *Server {
	s := &Server{
		tb:        tb,
		users:     make(map[string]*User),
		byToken:   make(map[string]*User),
		channels:  make(map[string]*Channel),
		posts:     make(map[string]*storedPost),
		files:     make(map[string]*storedFile),
		byTrigger: make(map[string]string),
		conns:     make(map[*wsConn]struct{}),
		changed:   make(chan struct{}),
		TeamID:    newID(),
		TeamName:  "thinbot-team",
	}
	s.Bot = s.addUser("thinbot", true)
	s.srv = httptest.NewUnstartedServer(s.routes())
	s.srv.Listener.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("fakemattermost: listen: %v", err))
	}
	s.srv.Listener = l
	s.srv.Start()
	s.URL = s.srv.URL
	s.hc = &http.Client{Timeout: 60 * time.Second}
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// Close cuts the WebSockets and stops the server. It is safe to call more
// than once.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	s.DropWebSockets()
	s.srv.Close()
	s.wg.Wait()
}

// fail records a broken expectation.
func (s *Server) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.failures = append(s.failures, msg)
	s.mu.Unlock()
	if s.tb != nil {
		s.tb.Errorf("fakemattermost: %s", msg)
	}
}

// Failures lists the broken expectations so far (unknown routes, bad test
// input), for use without a testing.TB.
func (s *Server) Failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failures...)
}

func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 26)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// millis returns a strictly increasing server time in Unix ms. s.mu is held.
func (s *Server) millis() int64 {
	now := time.Now().UnixMilli()
	if now <= s.lastMillis {
		now = s.lastMillis + 1
	}
	s.lastMillis = now
	return now
}

func (s *Server) addUser(name string, isBot bool) User {
	u := &User{ID: newID(), Username: name, Token: newID(), IsBot: isBot}
	s.mu.Lock()
	s.users[u.ID] = u
	s.byToken[u.Token] = u
	s.mu.Unlock()
	return *u
}

// AddUser adds a human user to the team.
func (s *Server) AddUser(name string) User { return s.addUser(name, false) }

// AddBotUser adds another bot account (its posts carry from_bot).
func (s *Server) AddBotUser(name string) User { return s.addUser(name, true) }

// AddChannel adds an open channel in the team with the given member ids.
// Include s.Bot.ID to make the bot a member. It returns the channel id.
func (s *Server) AddChannel(name string, members ...string) string {
	c := &Channel{ID: newID(), Name: name, DisplayName: name, Type: "O", TeamID: s.TeamID, Members: append([]string(nil), members...)}
	s.mu.Lock()
	s.channels[c.ID] = c
	s.mu.Unlock()
	return c.ID
}

// AddPrivateChannel adds a private channel in the team with the given
// member ids; a non-member cannot read anything of it (403).
func (s *Server) AddPrivateChannel(name string, members ...string) string {
	id := s.AddChannel(name, members...)
	s.mu.Lock()
	s.channels[id].Type = "P"
	s.mu.Unlock()
	return id
}

// DirectChannel returns the direct channel between the bot and userID,
// creating it when needed.
func (s *Server) DirectChannel(userID string) string {
	a, b := s.Bot.ID, userID
	if b < a {
		a, b = b, a
	}
	name := a + "__" + b
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.channels {
		if c.Name == name {
			return c.ID
		}
	}
	c := &Channel{ID: newID(), Name: name, Type: "D", Members: []string{s.Bot.ID, userID}}
	s.channels[c.ID] = c
	return c.ID
}

// AddMember adds userID to a channel.
func (s *Server) AddMember(channelID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.channels[channelID]; c != nil && !c.isMember(userID) {
		c.Members = append(c.Members, userID)
	}
}

func (c *Channel) isMember(userID string) bool {
	for _, m := range c.Members {
		if m == userID {
			return true
		}
	}
	return false
}

// Throttle makes the next n API requests fail with 429, with the headers
// Mattermost's rate limiter sends (reset and retry after resetSeconds).
func (s *Server) Throttle(n, resetSeconds int) {
	s.mu.Lock()
	s.throttleN, s.throttleS = n, resetSeconds
	s.mu.Unlock()
}

// OmitUserName makes button callbacks leave out user_name, as servers
// before 7.x do.
func (s *Server) OmitUserName(omit bool) {
	s.mu.Lock()
	s.omitName = omit
	s.mu.Unlock()
}

// HangUserLookups makes GET /users/{id} (other than /users/me) hang until
// the caller gives up, as a server stuck on one endpoint does.
func (s *Server) HangUserLookups(hang bool) {
	s.mu.Lock()
	s.hangUsers = hang
	s.mu.Unlock()
}

// Backdate sets a post's create_at (and update_at) to at, as if it had
// been made then: a post from before thinbot ever ran. It does not
// broadcast anything.
func (s *Server) Backdate(postID string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.posts[postID]; p != nil {
		p.CreateAt, p.UpdateAt = at.UnixMilli(), at.UnixMilli()
	}
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.reqMu.Lock()
	defer s.reqMu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Ephemerals returns the ephemeral messages shown so far.
func (s *Server) Ephemerals() []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ephemeral(nil), s.ephemerals...)
}

// UserPost creates a post by userID in channelID (a reply when rootID is
// set) and broadcasts it as a "posted" event. It returns the post id, or ""
// (and a test failure) if Mattermost would refuse the post.
func (s *Server) UserPost(userID, channelID, rootID, text string) string {
	s.mu.Lock()
	u := s.users[userID]
	s.mu.Unlock()
	if u == nil {
		s.fail("UserPost: unknown user %q", userID)
		return ""
	}
	p, apiErr := s.createPost(u, channelID, rootID, text, nil, nil)
	if apiErr != nil {
		s.fail("UserPost: %s", apiErr.Message)
		return ""
	}
	return p.ID
}

// Post returns the post id as stored, with integrations and files.
func (s *Server) Post(id string) (Post, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.posts[id]
	if p == nil {
		return Post{}, false
	}
	return s.export(p), true
}

// Posts returns the posts of a channel in creation order.
func (s *Server) Posts(channelID string) []Post {
	return s.collect(func(p *storedPost) bool { return p.ChannelID == channelID })
}

// Thread returns a thread's root post and its replies in creation order.
func (s *Server) Thread(rootID string) []Post {
	return s.collect(func(p *storedPost) bool { return p.ID == rootID || p.RootID == rootID })
}

func (s *Server) collect(keep func(*storedPost) bool) []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Post
	for _, p := range s.posts {
		if keep(p) {
			out = append(out, s.export(p))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreateAt < out[j].CreateAt })
	return out
}

// export copies a stored post for a test. s.mu is held.
func (s *Server) export(p *storedPost) Post {
	out := Post{
		ID: p.ID, ChannelID: p.ChannelID, RootID: p.RootID, UserID: p.UserID,
		Message: p.Message, Type: p.Type, Props: deepCopy(p.Props),
		CreateAt: p.CreateAt, UpdateAt: p.UpdateAt, EditAt: p.EditAt,
	}
	out.Attachments = parseAttachments(p.Props)
	for _, id := range p.FileIDs {
		if f := s.files[id]; f != nil {
			out.Files = append(out.Files, File{ID: f.ID, Name: f.Name, Data: append([]byte(nil), f.Data...)})
		}
	}
	return out
}

// parseAttachments reads props.attachments the way Mattermost does.
func parseAttachments(props map[string]any) []Attachment {
	list, _ := props["attachments"].([]any)
	var out []Attachment
	for _, item := range list {
		m, _ := item.(map[string]any)
		if m == nil {
			continue
		}
		a := Attachment{}
		a.Text, _ = m["text"].(string)
		acts, _ := m["actions"].([]any)
		for _, x := range acts {
			am, _ := x.(map[string]any)
			if am == nil {
				continue
			}
			act := Action{}
			act.ID, _ = am["id"].(string)
			act.Type, _ = am["type"].(string)
			act.Name, _ = am["name"].(string)
			act.Style, _ = am["style"].(string)
			if in, _ := am["integration"].(map[string]any); in != nil {
				act.URL, _ = in["url"].(string)
				act.Context, _ = in["context"].(map[string]any)
			}
			a.Actions = append(a.Actions, act)
		}
		out = append(out, a)
	}
	return out
}

// deepCopy copies a JSON value tree.
func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

// stripIntegrations removes button integrations from props, as Mattermost
// does before sending a post to any client.
func stripIntegrations(props map[string]any) map[string]any {
	out := deepCopy(props)
	list, _ := out["attachments"].([]any)
	for _, item := range list {
		m, _ := item.(map[string]any)
		acts, _ := m["actions"].([]any)
		for _, x := range acts {
			if am, _ := x.(map[string]any); am != nil {
				delete(am, "integration")
			}
		}
	}
	return out
}

// apiError is Mattermost's AppError JSON.
type apiError struct {
	ID            string `json:"id"`
	Message       string `json:"message"`
	DetailedError string `json:"detailed_error"`
	RequestID     string `json:"request_id"`
	StatusCode    int    `json:"status_code"`
}

func newErr(status int, id, msg string) *apiError {
	return &apiError{ID: id, Message: msg, StatusCode: status}
}

// createPost validates and stores a post and broadcasts it.
func (s *Server) createPost(u *User, channelID, rootID, text string, props map[string]any, fileIDs []string) (*storedPost, *apiError) {
	s.mu.Lock()
	c := s.channels[channelID]
	if c == nil {
		s.mu.Unlock()
		return nil, newErr(http.StatusNotFound, "app.channel.get.existing.app_error", "Unable to find the existing channel.")
	}
	if !c.isMember(u.ID) {
		s.mu.Unlock()
		return nil, newErr(http.StatusForbidden, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
	}
	if rootID != "" {
		root := s.posts[rootID]
		if root == nil || root.ChannelID != channelID || root.RootID != "" {
			s.mu.Unlock()
			return nil, newErr(http.StatusBadRequest, "api.post.create_post.root_id.app_error", "Invalid RootId parameter.")
		}
	}
	if utf8.RuneCountInString(text) > MaxMessageRunes {
		s.mu.Unlock()
		return nil, newErr(http.StatusBadRequest, "model.post.is_valid.msg.app_error", "Invalid Message.")
	}
	for _, id := range fileIDs {
		f := s.files[id]
		if f == nil || f.UserID != u.ID || f.ChannelID != channelID || f.PostID != "" {
			s.mu.Unlock()
			return nil, newErr(http.StatusBadRequest, "api.post.create_post.file_ids.app_error", "Invalid file ids.")
		}
	}
	if props == nil {
		props = map[string]any{}
	}
	if u.IsBot {
		props["from_bot"] = "true"
	}
	now := s.millis()
	p := &storedPost{ID: newID(), ChannelID: channelID, RootID: rootID, UserID: u.ID, Message: text,
		Props: props, FileIDs: fileIDs, CreateAt: now, UpdateAt: now}
	for _, id := range fileIDs {
		s.files[id].PostID = p.ID
	}
	s.posts[p.ID] = p
	s.broadcastPost("posted", c, u, p)
	s.mu.Unlock()
	return p, nil
}

// clientPost renders a post as the API sends it to clients. s.mu is held.
func clientPost(p *storedPost) map[string]any {
	out := map[string]any{
		"id": p.ID, "create_at": p.CreateAt, "update_at": p.UpdateAt, "edit_at": p.EditAt,
		"delete_at": 0, "is_pinned": false, "user_id": p.UserID, "channel_id": p.ChannelID,
		"root_id": p.RootID, "original_id": "", "message": p.Message, "type": p.Type,
		"props": stripIntegrations(p.Props), "hashtags": "", "pending_post_id": "",
		"reply_count": 0, "last_reply_at": 0, "participants": nil, "metadata": map[string]any{},
	}
	if len(p.FileIDs) > 0 {
		out["file_ids"] = p.FileIDs
	}
	return out
}

// mentionsOf lists the channel members mentioned in a post, as the server
// computes them for the "mentions" field. s.mu is held.
func (s *Server) mentionsOf(c *Channel, author, text string) []string {
	var out []string
	lower := strings.ToLower(text)
	for _, id := range c.Members {
		if id == author {
			continue
		}
		u := s.users[id]
		if u == nil {
			continue
		}
		if c.Type == "D" || containsMention(lower, strings.ToLower(u.Username)) {
			out = append(out, id)
		}
	}
	return out
}

func containsMention(lower, name string) bool {
	needle := "@" + name
	for i := 0; ; {
		j := strings.Index(lower[i:], needle)
		if j < 0 {
			return false
		}
		end := i + j + len(needle)
		if end == len(lower) || !isNameByte(lower[end]) || (lower[end] == '.' && (end+1 == len(lower) || !isNameByte(lower[end+1]))) {
			return true
		}
		i = end
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// broadcastPost sends a "posted" or "post_edited" event to the WebSocket
// connections of the channel's members. s.mu is held.
func (s *Server) broadcastPost(event string, c *Channel, author *User, p *storedPost) {
	postJSON, _ := json.Marshal(clientPost(p))
	data := map[string]any{"post": string(postJSON)}
	if event == "posted" {
		data["channel_display_name"] = c.DisplayName
		data["channel_name"] = c.Name
		data["channel_type"] = c.Type
		data["sender_name"] = "@" + author.Username
		data["set_online"] = true
		data["team_id"] = c.TeamID
		if m := s.mentionsOf(c, author.ID, p.Message); len(m) > 0 {
			mj, _ := json.Marshal(m)
			data["mentions"] = string(mj)
		}
	}
	broadcast := map[string]any{"omit_users": nil, "user_id": "", "channel_id": c.ID, "team_id": "", "connection_id": "", "omit_connection_id": ""}
	for wc := range s.conns {
		if c.isMember(wc.userID) {
			wc.sendEvent(event, data, broadcast)
		}
	}
}

// Click presses the button actionID of post postID as userID, the way a
// Mattermost client does: POST /api/v4/posts/{id}/actions/{action_id} with
// the user's token. The fake then calls the button's integration URL and
// applies the integration response. It blocks until all of that is done.
func (s *Server) Click(ctx context.Context, postID, actionID, userID string) (ClickResult, error) {
	s.mu.Lock()
	u := s.users[userID]
	s.mu.Unlock()
	if u == nil {
		return ClickResult{}, fmt.Errorf("fakemattermost: click: unknown user %q", userID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/api/v4/posts/"+postID+"/actions/"+actionID, strings.NewReader("{}"))
	if err != nil {
		return ClickResult{}, fmt.Errorf("fakemattermost: click: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+u.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return ClickResult{}, fmt.Errorf("fakemattermost: click: %w", err)
	}
	defer resp.Body.Close()
	var body struct {
		Status    string `json:"status"`
		TriggerID string `json:"trigger_id"`
	}
	json.NewDecoder(resp.Body).Decode(&body)
	res := ClickResult{Status: resp.StatusCode}
	res.IntegrationStatus, _ = strconv.Atoi(resp.Header.Get("X-Fake-Integration-Status"))
	res.Updated = resp.Header.Get("X-Fake-Updated") == "true"
	s.mu.Lock()
	res.Ephemeral = s.byTrigger[body.TriggerID]
	delete(s.byTrigger, body.TriggerID)
	s.mu.Unlock()
	return res, nil
}

// ErrNoConnection is returned by WaitConnections when ctx ends first.
var ErrNoConnection = errors.New("fakemattermost: not enough websocket connections")

// WebSocketCount returns the number of authenticated event connections.
func (s *Server) WebSocketCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for wc := range s.conns {
		if wc.userID != "" {
			n++
		}
	}
	return n
}

// WaitConnections blocks until at least n authenticated event connections
// are open, or ctx ends.
func (s *Server) WaitConnections(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if s.WebSocketCount() >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrNoConnection, ctx.Err())
		case <-ch:
		}
	}
}

// notify wakes WaitConnections. s.mu is held.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// DropWebSockets cuts every event connection abruptly (no close frame), as
// a crashed proxy would.
func (s *Server) DropWebSockets() {
	s.mu.Lock()
	conns := s.conns
	s.conns = make(map[*wsConn]struct{})
	s.notify()
	s.mu.Unlock()
	for wc := range conns {
		wc.conn.Close()
	}
}

// RevokeToken invalidates token, as revoking the bot's access token in
// Mattermost does: REST calls with it get 401, and the WebSocket
// connections it authenticated are cut.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	u := s.byToken[token]
	delete(s.byToken, token)
	var cut []*wsConn
	for wc := range s.conns {
		if u != nil && wc.userID == u.ID {
			cut = append(cut, wc)
		}
	}
	s.mu.Unlock()
	for _, wc := range cut {
		wc.conn.Close()
	}
}

// BlockWebSockets makes new WebSocket connections fail with 503 while
// block is true (for catch-up tests).
func (s *Server) BlockWebSockets(block bool) {
	s.mu.Lock()
	s.blockWS = block
	s.mu.Unlock()
}
