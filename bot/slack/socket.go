package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

const (
	// readTimeout closes a socket on which Slack sent nothing, not even a
	// ping, for this long.
	readTimeout = 90 * time.Second
	// writeTimeout bounds one acknowledgement write.
	writeTimeout = 10 * time.Second
	// maxFrame bounds one Socket Mode message.
	maxFrame = 8 << 20
)

// errDisconnect is returned by socketOnce when Slack asked for a reconnect.
var errDisconnect = errors.New("slack: disconnect requested")

// envelope is one Socket Mode message from Slack.
type envelope struct {
	Type         string          `json:"type"`
	EnvelopeID   string          `json:"envelope_id"`
	Payload      json.RawMessage `json:"payload"`
	Reason       string          `json:"reason"`
	RetryAttempt int             `json:"retry_attempt"`
	RetryReason  string          `json:"retry_reason"`
}

// runSocket keeps a Socket Mode connection open until ctx is done. It
// reconnects at once when Slack asks to and with backoff when the socket
// fails; it returns early only when a token is refused.
func (a *Adapter) runSocket(ctx context.Context) error {
	attempt := 0
	lostAt := time.Now()
	for {
		helloed, err := a.socketOnce(ctx)
		a.connected.Store(false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if fatalAuth(err) {
			return fmt.Errorf("slack: apps.connections.open: %w", err)
		}
		if helloed {
			attempt = 0
			lostAt = time.Now()
		}
		if errors.Is(err, errDisconnect) {
			continue
		}
		delay := a.cfg.Backoff.Delay(attempt, time.Since(lostAt))
		attempt++
		a.log.Warn("slack: socket lost, reconnecting", "err", err, "in", delay)
		if err := sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// socketOnce opens one connection and reads from it until it fails, Slack
// asks for a reconnect, or ctx is done. It reports whether Slack said hello.
func (a *Adapter) socketOnce(ctx context.Context) (bool, error) {
	var url string
	err := a.call(ctx, "apps.connections.open", func() error {
		var err error
		_, url, err = a.api.StartSocketModeContext(ctx)
		return err
	})
	if err != nil {
		return false, err
	}
	dialer := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 30 * time.Second}
	conn, resp, err := dialer.DialContext(ctx, url, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return false, fmt.Errorf("slack: dial socket: %w", err)
	}
	defer conn.Close()
	// Close unblocks the read below when ctx ends.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetReadLimit(maxFrame)
	conn.SetPingHandler(func(data string) error {
		_ = conn.SetReadDeadline(time.Now().Add(readTimeout))
		err := conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(writeTimeout))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	helloed := false
	for {
		if err := conn.SetReadDeadline(time.Now().Add(readTimeout)); err != nil {
			return helloed, fmt.Errorf("slack: socket: %w", err)
		}
		_, data, err := conn.ReadMessage()
		if err != nil {
			return helloed, fmt.Errorf("slack: socket read: %w", err)
		}
		var env envelope
		if err := json.Unmarshal(data, &env); err != nil {
			a.log.Warn("slack: bad socket message", "err", err)
			continue
		}
		if env.EnvelopeID != "" {
			// Acknowledge first: Slack redelivers what is not acked within
			// seconds, and the event is deduplicated anyway.
			if err := ack(conn, env.EnvelopeID); err != nil {
				return helloed, err
			}
		}
		switch env.Type {
		case "hello":
			helloed = true
			a.connected.Store(true)
			a.log.Info("slack: socket connected")
		case "disconnect":
			a.log.Info("slack: disconnect requested", "reason", env.Reason)
			return helloed, errDisconnect
		case "events_api":
			if env.RetryAttempt > 0 {
				a.log.Debug("slack: redelivered envelope", "envelope_id", env.EnvelopeID, "retry_attempt", env.RetryAttempt, "retry_reason", env.RetryReason)
			}
			err = a.receiveEvent(ctx, env.Payload)
		case "interactive":
			err = a.receiveInteraction(ctx, env.Payload)
		default:
			a.log.Debug("slack: ignored socket message", "type", env.Type)
		}
		if err != nil {
			if ctx.Err() != nil {
				return helloed, ctx.Err()
			}
			a.log.Warn("slack: bad socket payload", "type", env.Type, "err", err)
		}
	}
}

// ack acknowledges an envelope. Only socketOnce's goroutine writes messages.
func ack(conn *websocket.Conn, id string) error {
	if err := conn.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return fmt.Errorf("slack: ack: %w", err)
	}
	if err := conn.WriteJSON(map[string]string{"envelope_id": id}); err != nil {
		return fmt.Errorf("slack: ack: %w", err)
	}
	return nil
}
