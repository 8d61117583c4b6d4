package fakemattermost

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn is one event connection.
type wsConn struct {
	conn   *websocket.Conn
	send   chan []byte
	userID string // set once authenticated; guarded by Server.mu
	seq    int64  // guarded by Server.mu
}

// sendEvent queues an event. A connection that cannot keep up is cut, as
// Mattermost's hub does. Server.mu is held.
func (wc *wsConn) sendEvent(event string, data, broadcast map[string]any) {
	msg, _ := json.Marshal(map[string]any{"event": event, "data": data, "broadcast": broadcast, "seq": wc.seq})
	wc.seq++
	wc.queue(msg)
}

func (wc *wsConn) queue(msg []byte) {
	select {
	case wc.send <- msg:
	default:
		wc.conn.Close()
	}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// serveWebSocket is GET /api/v4/websocket: hello after authentication (by
// header or authentication_challenge; a challenge with a bad token closes
// the connection, as Mattermost does), then events.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	blocked := s.blockWS || s.closed
	s.mu.Unlock()
	if blocked {
		writeErr(w, newErr(http.StatusServiceUnavailable, "fake.websocket_blocked", "WebSocket connections are blocked by the test."))
		return
	}
	preauth := s.authUser(r)
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	wc := &wsConn{conn: conn, send: make(chan []byte, 256)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		conn.Close()
		return
	}
	s.conns[wc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for msg := range wc.send {
			conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				conn.Close()
				for range wc.send {
				}
				return
			}
		}
	}()
	defer func() {
		s.mu.Lock()
		if _, ok := s.conns[wc]; ok {
			delete(s.conns, wc)
			s.notify()
		}
		s.mu.Unlock()
		conn.Close()
		close(wc.send)
		<-writerDone
	}()

	if preauth != nil {
		s.authenticated(wc, preauth.ID)
	}
	for {
		var req struct {
			Seq    int64             `json:"seq"`
			Action string            `json:"action"`
			Data   map[string]string `json:"data"`
		}
		if err := conn.ReadJSON(&req); err != nil {
			return
		}
		s.mu.Lock()
		authed := wc.userID != ""
		s.mu.Unlock()
		if req.Action == "authentication_challenge" && !authed {
			s.mu.Lock()
			u := s.byToken[req.Data["token"]]
			s.mu.Unlock()
			if u == nil {
				// Like Mattermost (WebSocketRouter.ServeWebSocket), a
				// challenge with a bad token gets no reply: the server
				// closes the connection.
				return
			}
			reply, _ := json.Marshal(map[string]any{"status": "OK", "seq_reply": req.Seq})
			s.mu.Lock()
			wc.queue(reply)
			s.mu.Unlock()
			s.authenticated(wc, u.ID)
			continue
		}
		if !authed {
			continue // the real server ignores requests before authentication
		}
		reply, _ := json.Marshal(map[string]any{"status": "OK", "seq_reply": req.Seq})
		s.mu.Lock()
		wc.queue(reply)
		s.mu.Unlock()
	}
}

// authenticated binds the connection to a user and sends hello.
func (s *Server) authenticated(wc *wsConn, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[wc]; !ok {
		return // dropped meanwhile
	}
	wc.userID = userID
	wc.sendEvent("hello", map[string]any{"connection_id": newID(), "server_version": ServerVersion},
		map[string]any{"omit_users": nil, "user_id": userID, "channel_id": "", "team_id": "", "connection_id": "", "omit_connection_id": ""})
	s.notify()
}
