package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/thinbot/thinbot/bot"
)

// maxMessage is the longest message the console accepts, in bytes.
const maxMessage = 32 << 10

// maxThreadPosts bounds one thread's posts kept in memory; older ones
// stay in the chain.
const maxThreadPosts = 2000

// wpost is one post of a console thread, as the page shows it.
type wpost struct {
	ID        string    `json:"id"`
	Author    string    `json:"author"`
	Bot       bool      `json:"bot"`
	Text      string    `json:"text"`
	Buttons   []button  `json:"buttons,omitempty"`
	Streaming bool      `json:"streaming,omitempty"`
	Time      time.Time `json:"time"`
	FileName  string    `json:"file,omitempty"`
	FileSize  int       `json:"file_size,omitempty"`

	value     string    // Post.Value: the approval request id, never sent to the page
	expires   time.Time // Post.Expires: when that request expires
	requester string    // who asked for what the buttons decide (the inbox)
	data      []byte    // the attached file
	restored  bool      // rebuilt from the chain at start (restore)
}

// button is a bot.Button as the page reads it.
type button struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Style string `json:"style,omitempty"`
}

func buttons(bs []bot.Button) []button {
	var out []button
	for _, b := range bs {
		out = append(out, button{ID: b.ID, Label: b.Label, Style: b.Style})
	}
	return out
}

// wthread is one console thread: its posts and the pages following it.
type wthread struct {
	ID string `json:"id"`
	// Title is plain text (plainTitle): the first line of the alert card
	// for a thread an alert opened, else the first message.
	Title string `json:"title"`
	By    string `json:"by"`
	// Alert is the status of the alert group whose thread this is
	// ("firing", "resolved"), "" for a thread no alert opened.
	Alert string `json:"alert,omitempty"`
	// State is what the thread does: "waiting for approval", "running"
	// or "idle" (stateOf).
	State   string    `json:"state"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`

	running bool // a run is in progress (RunState)
	posts   []*wpost
	subs    map[chan event]struct{}
}

// event is one Server-Sent Event for a thread's pages.
type event struct {
	Type string `json:"type"` // snapshot, post, update, append, thread
	Post *wpost `json:"post,omitempty"`
	// Thread is the thread's title and state (snapshot, and thread: they
	// changed).
	Thread *wthread `json:"thread,omitempty"`
	Posts  []wpost  `json:"posts,omitempty"`
	Delta  string   `json:"delta,omitempty"`
}

// Run delivers the messages typed in the console to h until ctx is done,
// and lets clicks through while it runs. It returns ctx.Err().
func (s *Server) Run(ctx context.Context, h bot.Handler) error {
	if h == nil {
		return errors.New("web: run: nil handler")
	}
	s.handler.Store(&handlerBox{h: h})
	defer s.handler.Store(nil)
	for {
		select {
		case m := <-s.inbox:
			h.HandleMessage(ctx, m)
		case <-ctx.Done():
			s.closeSubscribers()
			return ctx.Err()
		}
	}
}

// Connected reports whether Run is delivering messages.
func (s *Server) Connected() bool { return s.handler.Load() != nil }

func (s *Server) thread(t bot.Thread) (*wthread, error) {
	if t.Platform != Platform || t.Channel != s.cfg.Channel {
		return nil, fmt.Errorf("web: thread %s is not a console thread", t.Key())
	}
	th := s.threads[t.Root]
	if th == nil {
		// A thread of a previous process that restore did not bring back
		// (beyond maxRestored): a recovery notice brings it back.
		th = s.addThread(t.Root, "Earlier thread", "", s.cfg.Now())
	}
	return th, nil
}

// stateOf is what th does: waiting for an approver's decision, running,
// or idle; the caller holds s.mu.
func (s *Server) stateOf(th *wthread) string {
	for _, pt := range s.pending {
		if pt == th {
			return "waiting for approval"
		}
	}
	if th.running {
		return "running"
	}
	return "idle"
}

// restate recomputes th's state and tells its pages when its title or
// state changed; the caller holds s.mu.
func (s *Server) restate(th *wthread, title string) {
	st := s.stateOf(th)
	if st == th.State && title == th.Title {
		return
	}
	th.State, th.Title = st, title
	s.tell(th)
}

// tell sends th's title and state to every page, whichever thread it
// follows: each page's list of threads shows them; the caller holds s.mu.
func (s *Server) tell(th *wthread) {
	ev := event{Type: "thread", Thread: th.meta()}
	for _, o := range s.threads {
		s.broadcast(o, ev)
	}
}

// meta is th's title and state, without its posts.
func (th *wthread) meta() *wthread {
	return &wthread{ID: th.ID, Title: th.Title, By: th.By, Alert: th.Alert, State: th.State, Created: th.Created, Updated: th.Updated}
}

// RunState implements bot.StateShower.
func (s *Server) RunState(t bot.Thread, running bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if th, err := s.thread(t); err == nil {
		th.running = running
		s.restate(th, th.Title)
	}
}

// AlertState implements bot.StateShower.
func (s *Server) AlertState(t bot.Thread, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if th, err := s.thread(t); err == nil && th.Alert != status {
		th.Alert, th.State = status, s.stateOf(th)
		s.tell(th)
	}
}

// maxThreads bounds the threads kept in memory; older ones stay in the
// chain (and the audit viewer).
const maxThreads = 500

// addThread registers a thread, forgetting the oldest beyond maxThreads;
// the caller holds s.mu.
func (s *Server) addThread(id, title, by string, at time.Time) *wthread {
	th := &wthread{ID: id, Title: plainTitle(title), By: by, State: "idle", Created: at, Updated: at, subs: map[chan event]struct{}{}}
	s.threads[id] = th
	s.order = append(s.order, id)
	if len(s.order) > maxThreads {
		old := s.threads[s.order[0]]
		for c := range old.subs {
			delete(old.subs, c)
			close(c)
		}
		delete(s.threads, s.order[0])
		s.order = s.order[1:]
	}
	return th
}

// newPostID is a post id unique across restarts (the process's idPrefix):
// the chain records the ids of the approval cards a restart updates, and a
// new post must never take an earlier process's id.
func (s *Server) newPostID() string {
	s.nextID++
	return s.idPrefix + strconv.FormatUint(s.nextID, 10)
}

// add appends p to th and tells its pages; the caller holds s.mu.
func (s *Server) add(th *wthread, p *wpost) {
	th.posts = append(th.posts, p)
	if len(th.posts) > maxThreadPosts {
		th.posts = th.posts[len(th.posts)-maxThreadPosts:]
	}
	th.Updated = p.Time
	s.broadcast(th, event{Type: "post", Post: p.clone()})
}

// broadcast sends ev to th's pages; the caller holds s.mu. A page that
// cannot keep up is dropped: its EventSource reconnects and gets a fresh
// snapshot.
func (s *Server) broadcast(th *wthread, ev event) {
	for c := range th.subs {
		select {
		case c <- ev:
		default:
			delete(th.subs, c)
			close(c)
		}
	}
}

func (s *Server) closeSubscribers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, th := range s.threads {
		for c := range th.subs {
			delete(th.subs, c)
			close(c)
		}
	}
}

func (p *wpost) clone() *wpost {
	c := *p
	c.Buttons = append([]button(nil), p.Buttons...)
	c.value, c.data, c.requester = "", nil, ""
	return &c
}

func (s *Server) find(th *wthread, id string) *wpost {
	for i := len(th.posts) - 1; i >= 0; i-- {
		if th.posts[i].ID == id {
			return th.posts[i]
		}
	}
	return nil
}

// Post implements bot.Adapter.
func (s *Server) Post(_ context.Context, t bot.Thread, p bot.Post) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.Root == "" && t.Platform == Platform && t.Channel == s.cfg.Channel {
		return s.openThread(p), nil
	}
	th, err := s.thread(t)
	if err != nil {
		return "", err
	}
	if n := len(th.posts); n > 0 && th.posts[n-1].restored && th.posts[n-1].Text == p.Text && (p.Text == bot.InterruptedText || p.Text == bot.LeaderLostText) {
		// The restart notice of an interrupted run (bot.Recover), which
		// the thread rebuilt from the chain already ends with.
		th.posts[n-1].restored = false
		return th.posts[n-1].ID, nil
	}
	text := p.Text
	for i := len(p.Mentions) - 1; i >= 0; i-- {
		text = "@" + p.Mentions[i] + " " + text // the console's user ids are their names
	}
	wp := &wpost{ID: s.newPostID(), Author: "thinbot", Bot: true, Text: text, Buttons: buttons(p.Buttons),
		Time: s.cfg.Now(), value: p.Value, expires: p.Expires}
	if p.Value != "" && !p.Expires.IsZero() {
		// The console's user ids are their names.
		wp.requester = p.Requester.ID
		s.pending[wp] = th
	}
	if p.File != nil {
		wp.FileName, wp.FileSize, wp.data = p.File.Name, len(p.File.Data), p.File.Data
	}
	s.add(th, wp)
	s.restate(th, th.Title)
	return wp.ID, nil
}

// Update implements bot.Adapter.
func (s *Server) Update(_ context.Context, t bot.Thread, postID string, p bot.Post) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	th, err := s.thread(t)
	if err != nil {
		return err
	}
	wp := s.find(th, postID)
	if wp == nil {
		return fmt.Errorf("web: update: no post %s in thread %s", postID, t.Root)
	}
	wp.Text, wp.Buttons, wp.Streaming = p.Text, buttons(p.Buttons), false
	wp.value, wp.expires = "", time.Time{}
	if len(p.Buttons) > 0 {
		wp.value, wp.expires = p.Value, p.Expires
	}
	if wp.value == "" || wp.expires.IsZero() {
		// Only an approval request expires; an alert card's Acknowledge
		// is not one the inbox lists.
		delete(s.pending, wp)
	} else {
		s.pending[wp] = th
	}
	s.broadcast(th, event{Type: "update", Post: wp.clone()})
	title := th.Title
	if wp.ID == th.ID {
		// The root post of a thread the bot opened (an alert's card): the
		// title follows it.
		title = plainTitle(wp.Text)
	}
	s.restate(th, title)
	return nil
}

// IsMember implements bot.Adapter: the members of the console's channel
// are the users who may write in it.
func (s *Server) IsMember(_ context.Context, channel, userID string) (bool, error) {
	if channel != s.cfg.Channel {
		return false, nil
	}
	if s.open {
		return userID == s.cfg.LocalUser, nil
	}
	for _, r := range s.cfg.Auth.Roles[userID] {
		if r == RoleUser {
			return true, nil
		}
	}
	return false, nil
}

// StartStream implements bot.Streamer.
func (s *Server) StartStream(_ context.Context, t bot.Thread) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	th, err := s.thread(t)
	if err != nil {
		return "", err
	}
	wp := &wpost{ID: s.newPostID(), Author: "thinbot", Bot: true, Streaming: true, Time: s.cfg.Now()}
	s.add(th, wp)
	return wp.ID, nil
}

// AppendStream implements bot.Streamer.
func (s *Server) AppendStream(_ context.Context, t bot.Thread, id, markdown string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	th, err := s.thread(t)
	if err != nil {
		return err
	}
	wp := s.find(th, id)
	if wp == nil || !wp.Streaming {
		return fmt.Errorf("web: append: no open stream %s", id)
	}
	wp.Text += markdown
	s.broadcast(th, event{Type: "append", Post: &wpost{ID: id}, Delta: markdown})
	return nil
}

// StopStream implements bot.Streamer.
func (s *Server) StopStream(_ context.Context, t bot.Thread, id, markdown string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	th, err := s.thread(t)
	if err != nil {
		return err
	}
	wp := s.find(th, id)
	if wp == nil {
		return fmt.Errorf("web: stop stream: no post %s", id)
	}
	wp.Text += markdown
	wp.Streaming = false
	s.broadcast(th, event{Type: "update", Post: wp.clone()})
	return nil
}

// ---- the page's API ----

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (s *Server) listThreads(w http.ResponseWriter, _ *http.Request, _ identity) {
	s.mu.Lock()
	out := make([]wthread, 0, len(s.order))
	for i := len(s.order) - 1; i >= 0; i-- {
		th := s.threads[s.order[i]]
		out = append(out, *th.meta())
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"threads": out})
}

// readText reads the message text of a POST (JSON {"text": ...}).
func readText(w http.ResponseWriter, r *http.Request) (string, bool) {
	var body struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxMessage)).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "want JSON {\"text\": ...} of at most 32 KiB")
		return "", false
	}
	text := strings.TrimSpace(body.Text)
	if text == "" {
		apiError(w, http.StatusBadRequest, "the message is empty")
		return "", false
	}
	return text, true
}

func (s *Server) newThread(w http.ResponseWriter, r *http.Request, id identity) {
	text, ok := readText(w, r)
	if !ok {
		return
	}
	if !s.Connected() {
		apiError(w, http.StatusServiceUnavailable, "thinbot is starting or stopping; try again")
		return
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	tid := s.cfg.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(rb[:])
	s.mu.Lock()
	s.addThread(tid, shorten(text, titleLen), id.Name, s.cfg.Now())
	s.mu.Unlock()
	if !s.deliver(w, r, tid, text, id) {
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": tid})
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request, id identity) {
	tid := r.PathValue("id")
	s.mu.Lock()
	_, ok := s.threads[tid]
	s.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "no such thread")
		return
	}
	text, ok := readText(w, r)
	if !ok {
		return
	}
	if s.deliver(w, r, tid, text, id) {
		writeJSON(w, http.StatusAccepted, map[string]string{"id": tid})
	}
}

// deliver shows the user's message in the thread and hands it to Run.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, tid, text string, id identity) bool {
	if !s.Connected() {
		apiError(w, http.StatusServiceUnavailable, "thinbot is starting or stopping; try again")
		return false
	}
	s.mu.Lock()
	th := s.threads[tid]
	if th == nil { // forgotten meanwhile (maxThreads)
		s.mu.Unlock()
		apiError(w, http.StatusNotFound, "no such thread")
		return false
	}
	p := &wpost{ID: s.newPostID(), Author: id.Name, Text: text, Time: s.cfg.Now()}
	s.add(th, p)
	if !strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "!") {
	}
	s.mu.Unlock()
	if s.cfg.ModelProblem != "" && !strings.HasPrefix(text, "/") && !strings.HasPrefix(text, "!") {
		// Nothing to run without a model; the in-thread commands still work.
		s.mu.Lock()
		s.add(th, &wpost{ID: s.newPostID(), Author: "thinbot", Bot: true, Time: s.cfg.Now(),
			Text: "**No model is configured**, so I cannot answer yet. " + s.cfg.ModelProblem})
		s.mu.Unlock()
		return true
	}
	// Message ids must be unique across restarts (the bot skips ids the
	// chain has seen), and post ids start again at each start.
	var rb [8]byte
	_, _ = rand.Read(rb[:])
	m := bot.Message{Thread: bot.Thread{Platform: Platform, Channel: s.cfg.Channel, Root: tid}, ID: "web-" + hex.EncodeToString(rb[:]),
		User: bot.User{ID: id.Name, Name: id.Name}, Text: text, Mentioned: true, Direct: true, Time: p.Time}
	select {
	case s.inbox <- m:
		return true
	case <-r.Context().Done():
		apiError(w, http.StatusServiceUnavailable, "thinbot is busy; try again")
		return false
	}
}

// click hands a button press to the bot. The request id is the post's own
// value, never the page's: a click decides only the request its post shows.
func (s *Server) click(w http.ResponseWriter, r *http.Request, id identity) {
	hb := s.handler.Load()
	if hb == nil {
		apiError(w, http.StatusServiceUnavailable, "thinbot is starting or stopping; try again")
		return
	}
	var body struct {
		Action string `json:"action"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1024)).Decode(&body); err != nil {
		apiError(w, http.StatusBadRequest, "want JSON {\"action\": ...}")
		return
	}
	tid, pid := r.PathValue("id"), r.PathValue("post")
	s.mu.Lock()
	th := s.threads[tid]
	var value string
	if th != nil {
		if p := s.find(th, pid); p != nil {
			value = p.value
		}
	}
	s.mu.Unlock()
	if value == "" {
		writeJSON(w, http.StatusOK, map[string]string{"ephemeral": "This post has no open request. Nothing was changed."})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	t := bot.Thread{Platform: Platform, Channel: s.cfg.Channel, Root: tid}
	res := hb.h.HandleClick(ctx, bot.Click{Thread: t, PostID: pid, ActionID: body.Action, Value: value,
		User: bot.User{ID: id.Name, Name: id.Name}})
	if res.Update != nil {
		if err := s.Update(ctx, t, pid, *res.Update); err != nil {
			s.log.Warn("update clicked post", "post", pid, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"ephemeral": res.Ephemeral, "updated": res.Update != nil})
}

func (s *Server) file(w http.ResponseWriter, r *http.Request, _ identity) {
	s.mu.Lock()
	th := s.threads[r.PathValue("id")]
	var p *wpost
	if th != nil {
		p = s.find(th, r.PathValue("post"))
	}
	var name string
	var data []byte
	if p != nil {
		name, data = p.FileName, p.data
	}
	s.mu.Unlock()
	if data == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", strings.Map(safeFileRune, name)))
	_, _ = w.Write(data)
}

func safeFileRune(r rune) rune {
	if r == '.' || r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
		return r
	}
	return '_'
}

// threadEvents streams a thread to a page: a snapshot, then every post,
// update and streamed piece of text, as Server-Sent Events.
func (s *Server) threadEvents(w http.ResponseWriter, r *http.Request, _ identity) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	tid := r.PathValue("id")
	c := make(chan event, 256)
	s.mu.Lock()
	th := s.threads[tid]
	if th == nil {
		s.mu.Unlock()
		apiError(w, http.StatusNotFound, "no such thread")
		return
	}
	snap := event{Type: "snapshot", Posts: make([]wpost, 0, len(th.posts)), Thread: th.meta()}
	for _, p := range th.posts {
		snap.Posts = append(snap.Posts, *p.clone())
	}
	th.subs[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := th.subs[c]; ok {
			delete(th.subs, c)
			close(c)
		}
		s.mu.Unlock()
	}()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if err := writeEvent(w, snap); err != nil {
		return
	}
	fl.Flush()
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				return
			}
			if err := writeEvent(w, ev); err != nil {
				return
			}
			fl.Flush()
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func writeEvent(w http.ResponseWriter, ev event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}

var _ bot.ThreadLinker = (*Server)(nil)

// ThreadLink implements bot.ThreadLinker: the thread in the console, a
// link within the page (its hash).
func (s *Server) ThreadLink(t bot.Thread) string {
	if t.Platform != Platform || t.Root == "" {
		return ""
	}
	return "#" + t.Root
}
