package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

const (
	// maxSkew is how far a request's timestamp may be from now.
	maxSkew = 5 * time.Minute
	// maxBody bounds an HTTP-mode request body.
	maxBody = 1 << 20
)

// HTTPHandler serves Slack's HTTP mode: POST /slack/events (Events API,
// including the url_verification challenge) and POST /slack/interactivity
// (button clicks). Every request must carry a valid v0 signature made with
// the signing secret and a timestamp within five minutes; others get 401
// and are logged. Events are answered at once and reach the bot through
// Run; until Run is serving, requests get 503 so that Slack retries.
func (a *Adapter) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /slack/events", a.serveEvents)
	mux.HandleFunc("POST /slack/interactivity", a.serveInteractivity)
	return mux
}

func (a *Adapter) serveEvents(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	ev, err := parseEventCallback(body)
	if err != nil {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	if ev.Type == "url_verification" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"challenge": ev.Challenge})
		return
	}
	if !a.connected.Load() {
		http.Error(w, "not running", http.StatusServiceUnavailable)
		return
	}
	if m, ok := a.acceptEvent(ev); ok {
		if err := a.enqueue(r.Context(), inbound{msg: m}); err != nil {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (a *Adapter) serveInteractivity(w http.ResponseWriter, r *http.Request) {
	body, ok := a.verified(w, r)
	if !ok {
		return
	}
	if !a.connected.Load() {
		http.Error(w, "not running", http.StatusServiceUnavailable)
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || form.Get("payload") == "" {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	// A replayed click inside the signature window is dropped: the same
	// signature over the same body is the same request.
	if !a.seen.Add("sig/" + r.Header.Get("X-Slack-Signature")) {
		w.WriteHeader(http.StatusOK)
		return
	}
	if err := a.receiveInteraction(r.Context(), []byte(form.Get("payload"))); err != nil {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// verified reads the body and checks its signature, answering the request
// itself when the check fails.
func (a *Adapter) verified(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		http.Error(w, "read error", http.StatusBadRequest)
		return nil, false
	}
	if len(body) > maxBody {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	if err := verifySignature(a.cfg.SigningSecret, r.Header, body, a.now()); err != nil {
		a.log.Warn("slack: refused request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		http.Error(w, "invalid signature", http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

// verifySignature checks Slack's v0 request signature: X-Slack-Signature is
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)) and
// X-Slack-Request-Timestamp is within maxSkew of now.
func verifySignature(secret string, h http.Header, body []byte, now time.Time) error {
	tsHeader := h.Get("X-Slack-Request-Timestamp")
	sig := h.Get("X-Slack-Signature")
	if tsHeader == "" || sig == "" {
		return errors.New("slack: unsigned request")
	}
	ts, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return fmt.Errorf("slack: bad timestamp %q", tsHeader)
	}
	if skew := now.Sub(time.Unix(ts, 0)); skew > maxSkew || skew < -maxSkew {
		return fmt.Errorf("slack: stale timestamp (%s off)", skew.Round(time.Second))
	}
	want := Sign(secret, tsHeader, body)
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return errors.New("slack: signature mismatch")
	}
	return nil
}

// Sign returns the X-Slack-Signature Slack sends for body at timestamp ts
// (Unix seconds, as in X-Slack-Request-Timestamp).
func Sign(secret, ts string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}
