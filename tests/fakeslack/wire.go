package fakeslack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(code string) map[string]any { return map[string]any{"ok": false, "error": code} }

// params reads a Web API request's parameters from a form or JSON body.
// JSON values that are not strings are kept as their JSON text.
func params(r *http.Request) (map[string]string, error) {
	out := map[string]string{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		var body map[string]json.RawMessage
		if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&body); err != nil && err != io.EOF {
			return nil, err
		}
		for k, v := range body {
			var s string
			if json.Unmarshal(v, &s) == nil {
				out[k] = s
			} else {
				out[k] = string(v)
			}
		}
	default:
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.Form {
			out[k] = v[0]
		}
	}
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		out["token"] = auth
	}
	return out, nil
}

func (f *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	p, err := params(r)
	if err != nil {
		writeJSON(w, http.StatusOK, fail("invalid_form_data"))
		return
	}
	f.mu.Lock()
	if f.hang[method] {
		f.requests = append(f.requests, Request{Method: method, Params: p, Status: 0})
		f.notifyLocked()
		f.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
		return
	}
	defer f.mu.Unlock()
	rec := Request{Method: method, Params: p, Status: http.StatusOK}
	defer func() { f.requests = append(f.requests, rec); f.notifyLocked() }()
	if secs, ok := f.rateLimit[method]; ok {
		delete(f.rateLimit, method)
		rec.Status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeJSON(w, http.StatusTooManyRequests, fail("ratelimited"))
		return
	}
	if fl := f.failures[method]; fl != nil {
		if fl.n > 0 {
			if fl.n--; fl.n == 0 {
				delete(f.failures, method)
			}
		}
		writeJSON(w, http.StatusOK, fail(fl.code))
		return
	}
	want := BotToken
	if method == "apps.connections.open" {
		want = AppToken
	}
	if p["token"] == "" {
		writeJSON(w, http.StatusOK, fail("not_authed"))
		return
	}
	if p["token"] != want {
		writeJSON(w, http.StatusOK, fail("invalid_auth"))
		return
	}
	var res map[string]any
	switch method {
	case "auth.test":
		res = map[string]any{"ok": true, "url": "https://fake.slack.com/", "team": "Fake", "user": "thinbot", "team_id": TeamID, "user_id": BotUserID, "bot_id": BotID}
	case "apps.connections.open":
		ticket := f.idLocked("ticket")
		f.tickets[ticket] = true
		res = map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/link/?ticket=" + ticket}
	case "chat.postMessage":
		res = f.postMessageLocked(p)
	case "chat.update":
		res = f.updateLocked(p)
	case "chat.startStream":
		res = f.startStreamLocked(p)
	case "chat.appendStream":
		res = f.appendStreamLocked(p, false)
	case "chat.stopStream":
		res = f.appendStreamLocked(p, true)
	case "chat.postEphemeral":
		res = f.postEphemeralLocked(p)
	case "conversations.members":
		res = f.membersLocked(p)
	case "conversations.history":
		res = f.historyLocked(p)
	case "users.conversations":
		res = f.userConversationsLocked(p)
	case "users.info":
		name, ok := f.users[p["user"]]
		if !ok {
			res = fail("user_not_found")
			break
		}
		res = map[string]any{"ok": true, "user": map[string]any{"id": p["user"], "name": name, "real_name": name, "is_bot": f.bots[p["user"]]}}
	case "files.getUploadURLExternal":
		n, err := strconv.Atoi(p["length"])
		if p["filename"] == "" || err != nil || n <= 0 {
			res = fail("invalid_arguments")
			break
		}
		id := f.idLocked("F")
		f.uploads[id] = &upload{name: p["filename"], size: n}
		res = map[string]any{"ok": true, "upload_url": f.srv.URL + "/upload/" + id, "file_id": id}
	case "files.completeUploadExternal":
		res = f.completeUploadLocked(p)
	default:
		f.t.Errorf("fakeslack: unknown Web API method %q", method)
		res = fail("unknown_method")
	}
	writeJSON(w, http.StatusOK, res)
}

func (f *Server) postMessageLocked(p map[string]string) map[string]any {
	ch, ok := f.channels[p["channel"]]
	if !ok {
		return fail("channel_not_found")
	}
	if p["text"] == "" && p["blocks"] == "" {
		return fail("no_text")
	}
	if p["thread_ts"] != "" && f.findLocked(ch, p["thread_ts"]) == nil {
		return fail("thread_not_found")
	}
	md, ok := metadata(p["metadata"])
	if !ok {
		return fail("invalid_metadata_format")
	}
	m := &Message{Channel: ch.id, TS: f.tsLocked(), ThreadTS: p["thread_ts"], User: BotUserID, BotID: BotID, Text: p["text"], Metadata: md}
	if p["blocks"] != "" {
		m.Blocks = json.RawMessage(p["blocks"])
	}
	ch.messages = append(ch.messages, m)
	f.emitMessageLocked(ch, m) // Slack echoes the bot's own posts
	return map[string]any{"ok": true, "channel": ch.id, "ts": m.TS, "message": map[string]any{"type": "message", "text": m.Text, "user": m.User, "bot_id": m.BotID, "ts": m.TS, "thread_ts": m.ThreadTS}}
}

// metadata checks a metadata parameter as Slack does: an object with an
// event_type and an event_payload object, or an empty object (none).
func metadata(v string) (json.RawMessage, bool) {
	if v == "" {
		return nil, true
	}
	var md struct {
		EventType    *string         `json:"event_type"`
		EventPayload json.RawMessage `json:"event_payload"`
	}
	if err := json.Unmarshal([]byte(v), &md); err != nil {
		return nil, false
	}
	if md.EventType == nil && md.EventPayload == nil {
		return nil, true
	}
	var payload map[string]any
	if md.EventType == nil || *md.EventType == "" || json.Unmarshal(md.EventPayload, &payload) != nil || payload == nil {
		return nil, false
	}
	return json.RawMessage(v), true
}

// historyLocked is conversations.history: a channel's top-level messages,
// newest first, after oldest and before latest (both exclusive unless
// inclusive), limit a page (default 100, at most 999) with an opaque
// cursor, each message's metadata only with include_all_metadata. The bot
// must be a member of the channel.
func (f *Server) historyLocked(p map[string]string) map[string]any {
	ch, ok := f.channels[p["channel"]]
	if !ok {
		return fail("channel_not_found")
	}
	if !slices.Contains(ch.members, BotUserID) {
		return fail("not_in_channel")
	}
	limit, err := strconv.Atoi(p["limit"])
	if err != nil || limit <= 0 {
		limit = 100
	}
	limit = min(limit, 999)
	inclusive := p["inclusive"] == "1" || p["inclusive"] == "true"
	withMeta := p["include_all_metadata"] == "1" || p["include_all_metadata"] == "true"
	in := func(ts string) bool {
		t, _ := strconv.ParseFloat(ts, 64)
		if o := p["oldest"]; o != "" {
			ot, _ := strconv.ParseFloat(o, 64)
			if t < ot || (t == ot && !inclusive) {
				return false
			}
		}
		if l := p["latest"]; l != "" && l != "now" {
			lt, _ := strconv.ParseFloat(l, 64)
			if t > lt || (t == lt && !inclusive) {
				return false
			}
		}
		return true
	}
	var list []*Message
	for i := len(ch.messages) - 1; i >= 0; i-- {
		if m := ch.messages[i]; (m.ThreadTS == "" || m.ThreadTS == m.TS) && in(m.TS) {
			list = append(list, m)
		}
	}
	start := 0
	if c := p["cursor"]; c != "" {
		if start, err = strconv.Atoi(strings.TrimPrefix(c, "h")); err != nil || start > len(list) {
			return fail("invalid_cursor")
		}
	}
	end := min(start+limit, len(list))
	msgs := make([]map[string]any, 0, end-start)
	for _, m := range list[start:end] {
		js := f.eventLocked(ch, m)
		delete(js, "channel")
		delete(js, "event_ts")
		delete(js, "channel_type")
		if m.Blocks != nil {
			js["blocks"] = m.Blocks
		}
		if withMeta && m.Metadata != nil {
			js["metadata"] = m.Metadata
		}
		msgs = append(msgs, js)
	}
	next := ""
	if end < len(list) {
		next = "h" + strconv.Itoa(end)
	}
	return map[string]any{"ok": true, "messages": msgs, "has_more": next != "", "pin_count": 0,
		"response_metadata": map[string]any{"next_cursor": next}}
}

func (f *Server) updateLocked(p map[string]string) map[string]any {
	ch, ok := f.channels[p["channel"]]
	if !ok {
		return fail("channel_not_found")
	}
	m := f.findLocked(ch, p["ts"])
	if m == nil {
		return fail("message_not_found")
	}
	if m.User != BotUserID || m.Streaming {
		return fail("cant_update_message")
	}
	if p["text"] == "" && p["blocks"] == "" {
		return fail("no_text")
	}
	// chat.update keeps the message's metadata unless it sends some; an
	// empty object removes it.
	if v, sent := p["metadata"]; sent {
		md, ok := metadata(v)
		if !ok {
			return fail("invalid_metadata_format")
		}
		m.Metadata = md
	}
	m.Text, m.Edited = p["text"], true
	if p["blocks"] != "" {
		m.Blocks = json.RawMessage(p["blocks"])
	}
	f.emitChangedLocked(ch, m)
	return map[string]any{"ok": true, "channel": ch.id, "ts": m.TS, "text": m.Text}
}

// startStreamLocked starts a streamed message, as chat.startStream: outside
// direct messages it needs recipient_user_id and recipient_team_id, and the
// recipient must be a member of the channel.
func (f *Server) startStreamLocked(p map[string]string) map[string]any {
	ch, ok := f.channels[p["channel"]]
	if !ok {
		return fail("channel_not_found")
	}
	if p["thread_ts"] != "" && f.findLocked(ch, p["thread_ts"]) == nil {
		return fail("thread_not_found")
	}
	user := p["recipient_user_id"]
	if !ch.im {
		if user == "" || p["recipient_team_id"] == "" {
			return fail("invalid_arguments")
		}
		if p["recipient_team_id"] != TeamID {
			return fail("team_not_found")
		}
		if !slices.Contains(ch.members, user) {
			return fail("user_not_in_channel")
		}
	}
	if len(p["markdown_text"]) > 12000 {
		return fail("msg_too_long")
	}
	m := &Message{Channel: ch.id, TS: f.tsLocked(), ThreadTS: p["thread_ts"], User: BotUserID, BotID: BotID,
		Text: p["markdown_text"], Streaming: true, Streamed: true, Recipient: user}
	ch.messages = append(ch.messages, m)
	f.emitMessageLocked(ch, m)
	return map[string]any{"ok": true, "channel": ch.id, "ts": m.TS}
}

// appendStreamLocked appends markdown_text to a streaming message, as
// chat.appendStream (which requires it) and chat.stopStream (which then
// ends the stream) do.
func (f *Server) appendStreamLocked(p map[string]string, stop bool) map[string]any {
	ch, ok := f.channels[p["channel"]]
	if !ok {
		return fail("channel_not_found")
	}
	m := f.findLocked(ch, p["ts"])
	if m == nil {
		return fail("message_not_found")
	}
	if !m.Streaming {
		return fail("message_not_in_streaming_state")
	}
	if !stop && p["markdown_text"] == "" {
		return fail("invalid_arguments")
	}
	if len(p["markdown_text"]) > 12000 {
		return fail("msg_too_long")
	}
	m.Text += p["markdown_text"]
	if stop {
		m.Streaming = false
		f.emitChangedLocked(ch, m)
	}
	return map[string]any{"ok": true, "channel": ch.id, "ts": m.TS}
}

func (f *Server) postEphemeralLocked(p map[string]string) map[string]any {
	ch, ok := f.channels[p["channel"]]
	if !ok {
		return fail("channel_not_found")
	}
	if !slices.Contains(ch.members, p["user"]) {
		return fail("user_not_in_channel")
	}
	if p["text"] == "" && p["blocks"] == "" {
		return fail("no_text")
	}
	f.ephemerals = append(f.ephemerals, Ephemeral{Channel: ch.id, User: p["user"], ThreadTS: p["thread_ts"], Text: p["text"]})
	return map[string]any{"ok": true, "message_ts": f.tsLocked()}
}

func (f *Server) membersLocked(p map[string]string) map[string]any {
	ch, ok := f.channels[p["channel"]]
	if !ok {
		return fail("channel_not_found")
	}
	limit, err := strconv.Atoi(p["limit"])
	if err != nil || limit <= 0 {
		limit = 100
	}
	start := 0
	if p["cursor"] != "" {
		if start, err = strconv.Atoi(strings.TrimPrefix(p["cursor"], "c")); err != nil || start > len(ch.members) {
			return fail("invalid_cursor")
		}
	}
	end := min(start+limit, len(ch.members))
	next := ""
	if end < len(ch.members) {
		next = "c" + strconv.Itoa(end)
	}
	return map[string]any{"ok": true, "members": ch.members[start:end], "response_metadata": map[string]any{"next_cursor": next}}
}

func (f *Server) completeUploadLocked(p map[string]string) map[string]any {
	var files []struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	if err := json.Unmarshal([]byte(p["files"]), &files); err != nil || len(files) == 0 {
		return fail("invalid_arguments")
	}
	ch := p["channel_id"]
	if _, ok := f.channels[ch]; ch != "" && !ok {
		return fail("channel_not_found")
	}
	var out []map[string]any
	for _, fl := range files {
		u, ok := f.uploads[fl.ID]
		if !ok || u.data == nil {
			return fail("file_not_found")
		}
		if len(u.data) != u.size {
			return fail("file_upload_size_mismatch")
		}
		delete(f.uploads, fl.ID)
		f.files = append(f.files, File{ID: fl.ID, Name: u.name, Channel: ch, ThreadTS: p["thread_ts"], Data: u.data})
		out = append(out, map[string]any{"id": fl.ID, "title": fl.Title})
	}
	return map[string]any{"ok": true, "files": out}
}

// serveUpload takes the bytes of an upload URL, raw or as multipart "file".
func (f *Server) serveUpload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var data []byte
	ct, prm, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "multipart/form-data" {
		mr := multipart.NewReader(r.Body, prm["boundary"])
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			if part.FormName() == "file" {
				data, _ = io.ReadAll(part)
			}
		}
	} else {
		data, _ = io.ReadAll(r.Body)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.uploads[r.PathValue("id")]
	if !ok || data == nil {
		http.Error(w, "unknown upload", http.StatusNotFound)
		return
	}
	u.data = data
	fmt.Fprintf(w, "OK - %d", len(data))
}

// Sign returns the X-Slack-Signature for body at timestamp ts (Unix seconds).
func Sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// SignedRequest builds a request as Slack's HTTP mode sends it: body signed
// with secret at time at. contentType is "application/json" for events and
// "application/x-www-form-urlencoded" for interactivity.
func SignedRequest(ctx context.Context, target, contentType string, body []byte, secret string, at time.Time) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", Sign(secret, ts, body))
	return req, nil
}

// URLVerification is the body of Slack's url_verification request.
func URLVerification(challenge string) []byte {
	b, _ := json.Marshal(map[string]string{"token": "legacy-verification-token", "challenge": challenge, "type": "url_verification"})
	return b
}

// MessageEvent stores a user's message like UserMessage but, instead of
// delivering it, returns its event_callback body for a test to send.
func (f *Server) MessageEvent(user, channel, threadTS, text string) []byte {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.channelLocked(channel)
	m := &Message{Channel: channel, TS: f.tsLocked(), ThreadTS: threadTS, User: user, Text: text}
	ch.messages = append(ch.messages, m)
	f.notifyLocked()
	return f.callbackLocked(f.eventLocked(ch, m))
}

// DeliverHTTP switches event delivery from Socket Mode to HTTP mode: every
// event and interaction, including those still pending, is POSTed, signed
// with secret, to baseURL+"/slack/events" or baseURL+"/slack/interactivity",
// in order. A non-200 answer is retried up to MaxRetries times with
// X-Slack-Retry-Num and X-Slack-Retry-Reason.
func (f *Server) DeliverHTTP(baseURL, secret string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.httpTarget, f.httpSecret = strings.TrimSuffix(baseURL, "/"), secret
	if !f.httpRunning {
		f.httpRunning = true
		f.wg.Go(f.httpLoop)
	}
	f.kickHTTP()
}

func (f *Server) kickHTTP() {
	select {
	case f.httpKick <- struct{}{}:
	default:
	}
}

func (f *Server) httpLoop() {
	client := &http.Client{Timeout: 10 * time.Second}
	for {
		select {
		case <-f.done:
			return
		case <-f.httpKick:
		}
		for {
			f.mu.Lock()
			if len(f.pending) == 0 || f.closed {
				f.mu.Unlock()
				break
			}
			e := f.pending[0]
			f.pending = f.pending[1:]
			target, secret := f.httpTarget, f.httpSecret
			f.mu.Unlock()
			f.deliverHTTP(client, target, secret, e)
		}
	}
}

func (f *Server) deliverHTTP(client *http.Client, target, secret string, e *envelope) {
	path, ct, body := "/slack/events", "application/json", []byte(e.payload)
	if e.typ == "interactive" {
		path, ct = "/slack/interactivity", "application/x-www-form-urlencoded"
		body = []byte(url.Values{"payload": {string(e.payload)}}.Encode())
	}
	for attempt := 0; attempt <= f.MaxRetries; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, err := SignedRequest(ctx, target+path, ct, body, secret, time.Now())
		if err != nil {
			cancel()
			f.t.Errorf("fakeslack: %v", err)
			return
		}
		if attempt > 0 {
			select { // Slack's spacing, scaled down (HTTPRetryDelay)
			case <-time.After(f.HTTPRetryDelay << (attempt - 1)):
			case <-f.done:
				cancel()
				return
			}
			req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(attempt))
			req.Header.Set("X-Slack-Retry-Reason", "http_error")
		}
		resp, err := client.Do(req)
		status := 0
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		cancel()
		f.mu.Lock()
		e.attempt, e.acked = attempt, status == http.StatusOK
		if attempt > 0 {
			e.reason = "http_error"
		}
		closed := f.closed
		f.notifyLocked()
		f.mu.Unlock()
		if status == http.StatusOK || closed {
			return
		}
	}
}

// enqueueLocked queues an envelope for delivery by socket or HTTP.
func (f *Server) enqueueLocked(typ string, payload json.RawMessage) {
	e := &envelope{id: f.idLocked("env-"), typ: typ, payload: payload}
	f.envelopes = append(f.envelopes, e)
	f.pending = append(f.pending, e)
	if f.httpTarget != "" {
		f.kickHTTP()
		return
	}
	f.flushLocked()
}

// activeLocked returns the newest socket not told to disconnect, or nil.
func (f *Server) activeLocked() *conn {
	for i := len(f.conns) - 1; i >= 0; i-- {
		if !f.conns[i].draining {
			return f.conns[i]
		}
	}
	return nil
}

// flushLocked sends pending envelopes over the active socket.
func (f *Server) flushLocked() {
	c := f.activeLocked()
	if c == nil || f.httpTarget != "" || f.closed {
		return
	}
	for len(f.pending) > 0 {
		e := f.pending[0]
		msg, _ := json.Marshal(map[string]any{
			"envelope_id": e.id, "type": e.typ, "payload": e.payload,
			"accepts_response_payload": false, "retry_attempt": e.attempt, "retry_reason": e.reason,
		})
		select {
		case c.send <- msg:
		default:
			return // the writer is behind; the rest goes later
		}
		f.pending = f.pending[1:]
		e.onConn, e.inflight = c, true
		e.timer = time.AfterFunc(f.AckTimeout, func() { f.ackTimeout(e) })
	}
}

// ackTimeout redelivers e if it is still unacked, as Slack does.
func (f *Server) ackTimeout(e *envelope) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.acked || !e.inflight || f.closed {
		return
	}
	f.retryLocked(e)
	f.flushLocked()
	f.notifyLocked()
}

func (f *Server) retryLocked(e *envelope) {
	e.inflight, e.onConn = false, nil
	if e.attempt >= f.MaxRetries {
		return // Slack gives up
	}
	e.attempt++
	e.reason = "timeout"
	f.pending = append(f.pending, e)
}

func (f *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	ticket := r.URL.Query().Get("ticket")
	ok := f.tickets[ticket]
	delete(f.tickets, ticket)
	f.mu.Unlock()
	if !ok {
		http.Error(w, "invalid ticket", http.StatusUnauthorized)
		return
	}
	up := websocket.Upgrader{}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws, send: make(chan []byte, 1024), closed: make(chan struct{})}
	hello, _ := json.Marshal(map[string]any{
		"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": AppID},
		"debug_info":      map[string]any{"host": "fakeslack", "build_number": 1, "approximate_connection_time": 18060},
	})
	c.send <- hello
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		ws.Close()
		return
	}
	f.conns = append(f.conns, c)
	f.connCount++
	f.flushLocked()
	f.notifyLocked()
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		f.writeLoop(c)
	}()
	f.readLoop(c)
}

func (f *Server) writeLoop(c *conn) {
	defer c.close()
	ping := time.NewTicker(f.PingInterval)
	defer ping.Stop()
	for {
		select {
		case <-c.closed:
			return
		case msg := <-c.send:
			_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, []byte("ping"), time.Now().Add(5*time.Second)); err != nil {
				return
			}
		}
	}
}

func (f *Server) readLoop(c *conn) {
	defer func() {
		c.close()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.conns = slices.DeleteFunc(f.conns, func(x *conn) bool { return x == c })
		for _, e := range f.envelopes {
			if e.onConn == c && e.inflight && !e.acked {
				e.timer.Stop()
				f.retryLocked(e)
			}
		}
		f.flushLocked()
		f.notifyLocked()
	}()
	for {
		_, data, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err := json.Unmarshal(data, &ack); err != nil || ack.EnvelopeID == "" {
			f.t.Errorf("fakeslack: bad message from client: %q", data)
			continue
		}
		f.mu.Lock()
		if f.dropAcks > 0 {
			// The ack is lost. Slack would redeliver once its ack timeout
			// passed; the fake redelivers now, so that tests wait for the
			// redelivery as an event instead of racing a short timeout.
			f.dropAcks--
			for _, e := range f.envelopes {
				if e.id == ack.EnvelopeID && !e.acked && e.inflight {
					e.timer.Stop()
					f.retryLocked(e)
				}
			}
			f.flushLocked()
		} else {
			for _, e := range f.envelopes {
				if e.id != ack.EnvelopeID || e.acked {
					continue
				}
				// A late ack still counts, even after a redelivery was queued.
				if e.inflight {
					e.timer.Stop()
				}
				e.acked, e.inflight = true, false
				f.pending = slices.DeleteFunc(f.pending, func(x *envelope) bool { return x == e })
			}
		}
		f.notifyLocked()
		f.mu.Unlock()
	}
}

// userConversationsLocked lists the channels (not IMs) the bot is a member
// of, one per page when limit is 1, in id order.
func (f *Server) userConversationsLocked(p map[string]string) map[string]any {
	var ids []string
	for id, ch := range f.channels {
		if !ch.im && slices.Contains(ch.members, BotUserID) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	limit, err := strconv.Atoi(p["limit"])
	if err != nil || limit <= 0 {
		limit = 100
	}
	start := 0
	if p["cursor"] != "" {
		if start, err = strconv.Atoi(strings.TrimPrefix(p["cursor"], "c")); err != nil || start > len(ids) {
			return fail("invalid_cursor")
		}
	}
	end := min(start+limit, len(ids))
	next := ""
	if end < len(ids) {
		next = "c" + strconv.Itoa(end)
	}
	var chans []map[string]any
	for _, id := range ids[start:end] {
		chans = append(chans, map[string]any{"id": id, "name": f.channels[id].name, "is_channel": true, "is_member": true})
	}
	return map[string]any{"ok": true, "channels": chans, "response_metadata": map[string]any{"next_cursor": next}}
}
