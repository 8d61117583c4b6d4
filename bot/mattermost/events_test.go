package mattermost

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mattermost/mattermost/server/public/model"

	"github.com/thinbot/thinbot/bot"
)

// wsServer is a Mattermost server reduced to GET /users/me and the
// WebSocket: it accepts the authentication challenge with the token, then
// hands the connection to serve.
func wsServer(t *testing.T, token string, serve func(*websocket.Conn)) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/users/me", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"bot1","username":"thinbot"}`))
	})
	mux.HandleFunc("GET /api/v4/websocket", func(w http.ResponseWriter, r *http.Request) {
		up := websocket.Upgrader{}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		var req struct {
			Seq    int64             `json:"seq"`
			Action string            `json:"action"`
			Data   map[string]string `json:"data"`
		}
		if err := conn.ReadJSON(&req); err != nil || req.Action != string(model.WebsocketAuthenticationChallenge) || req.Data["token"] != token {
			return // as Mattermost does with a bad token: close
		}
		conn.WriteJSON(map[string]any{"status": model.StatusOk, "seq_reply": req.Seq})
		serve(conn)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestWebSocketFrameLimit: a frame larger than maxFrame ends the
// connection instead of being read into memory whole.
func TestWebSocketFrameLimit(t *testing.T) {
	const token = "tok-frame-limit-0123456789"
	srv := wsServer(t, token, func(conn *websocket.Conn) {
		big := `{"event":"custom","data":"` + strings.Repeat("A", maxFrame) + `"}`
		conn.WriteMessage(websocket.TextMessage, []byte(big))
		// Wait (bounded) for the client to give up on the connection.
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				return
			}
		}
	})
	a, err := New(Config{URL: srv.URL, Token: token, CallbackURL: "http://127.0.0.1:1/cb", ActionSecret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connected, err := a.session(ctx, newRecorder(), &runState{seen: bot.NewDedupe(10)})
	if !connected || !errors.Is(err, websocket.ErrReadLimit) {
		t.Fatalf("session = %v, %v; want connected, %v", connected, err, websocket.ErrReadLimit)
	}
}

// TestDialEndsWithContext: model.WebSocketClient dials without a context;
// a server that accepts the connection but never answers the upgrade must
// not hold Run past its context (the handshake timeout is 30 s).
func TestDialEndsWithContext(t *testing.T) {
	const token = "tok-dial-0123456789"
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/users/me", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"bot1","username":"thinbot"}`))
	})
	mux.HandleFunc("GET /api/v4/websocket", func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select { // never answer the upgrade
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	a, err := New(Config{URL: srv.URL, Token: token, CallbackURL: "http://127.0.0.1:1/cb", ActionSecret: testSecret})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := a.session(ctx, newRecorder(), &runState{seen: bot.NewDedupe(10)})
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the upgrade request did not arrive within 10s")
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("session = nil after its context ended during the dial")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("session still dialling 15s after its context ended (it waits for the 30s handshake timeout)")
	}
}
