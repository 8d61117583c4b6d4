package slack

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/thinbot/thinbot/bot"
)

const (
	// maxStreamText is Slack's limit of markdown_text in one streaming
	// call (12,000 characters; bytes are counted, which is stricter).
	maxStreamText = 12000
	// maxRecipients bounds the remembered thread recipients.
	maxRecipients = 10000
)

var _ bot.Streamer = (*Adapter)(nil)

// recipient is who a streamed reply in a thread is addressed to: the user
// who last wrote there, and their team.
type recipient struct{ user, team string }

// recipients remembers the last human writer of each thread, forgetting the
// oldest threads beyond maxRecipients. The caller holds Adapter.mu.
type recipients struct {
	m     map[string]recipient
	order []string
}

func (r *recipients) set(key string, rc recipient) {
	if r.m == nil {
		r.m = map[string]recipient{}
	}
	if _, ok := r.m[key]; !ok {
		r.order = append(r.order, key)
		if len(r.order) > maxRecipients {
			delete(r.m, r.order[0])
			r.order = r.order[1:]
		}
	}
	r.m[key] = rc
}

// noteRecipient remembers the writer of an accepted message as the
// recipient of streamed replies in its thread.
func (a *Adapter) noteRecipient(ev eventCallback, m bot.Message) {
	if m.User.ID == "" || m.FromBot {
		return
	}
	team := ev.Event.UserTeam
	if team == "" {
		team = ev.Event.Team
	}
	if team == "" {
		team = ev.TeamID
	}
	a.mu.Lock()
	a.recipients.set(m.Thread.Key(), recipient{user: m.User.ID, team: team})
	a.mu.Unlock()
}

// StartStream starts a streamed reply in thread t with chat.startStream and
// returns its ts. Slack requires a recipient outside direct messages: the
// user who last wrote in the thread (as the adapter saw it) and their team
// (from the event, else the bot's own from auth.test). Without a known
// recipient in a channel it returns an error and the bot posts instead.
// Once Slack has answered that the workspace cannot stream (not_allowed,
// unknown_method, missing_scope, not_enabled, feature_not_enabled), every
// call fails at once with bot.ErrStreamingUnsupported.
func (a *Adapter) StartStream(ctx context.Context, t bot.Thread) (string, error) {
	if a.noStream.Load() {
		return "", fmt.Errorf("slack: chat.startStream: %w", bot.ErrStreamingUnsupported)
	}
	var opts []slack.MsgOption
	if t.Root != "" {
		opts = append(opts, slack.MsgOptionTS(t.Root))
	}
	a.mu.Lock()
	rc, ok := a.recipients.m[t.Key()]
	if rc.team == "" {
		rc.team = a.self.teamID
	}
	a.mu.Unlock()
	if ok && rc.team != "" {
		opts = append(opts, slack.MsgOptionRecipientUserID(rc.user), slack.MsgOptionRecipientTeamID(rc.team))
	} else if !strings.HasPrefix(t.Channel, "D") {
		return "", fmt.Errorf("slack: chat.startStream: no recipient known for thread %s", t.Key())
	}
	var ts string
	err := a.call(ctx, "chat.startStream", func() error {
		var err error
		_, ts, err = a.api.StartStreamContext(ctx, t.Channel, opts...)
		return err
	})
	if err != nil {
		return "", a.streamErr("chat.startStream", err)
	}
	if ts == "" {
		return "", errors.New("slack: chat.startStream: no ts in the answer")
	}
	return ts, nil
}

// AppendStream appends markdown to the streamed message id with
// chat.appendStream, in pieces of at most 12,000 characters. Slack renders
// the Markdown itself, so it is not converted to mrkdwn.
func (a *Adapter) AppendStream(ctx context.Context, t bot.Thread, id, markdown string) error {
	for _, piece := range streamPieces(markdown, maxStreamText) {
		if err := a.streamCall(ctx, "chat.appendStream", func() error {
			_, _, err := a.api.AppendStreamContext(ctx, t.Channel, id, slack.MsgOptionMarkdownText(piece))
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// StopStream appends markdown (if any) and ends the stream id with
// chat.stopStream. The message then stays as streamed; Update may change it.
func (a *Adapter) StopStream(ctx context.Context, t bot.Thread, id, markdown string) error {
	pieces := streamPieces(markdown, maxStreamText)
	last := ""
	if n := len(pieces); n > 0 {
		last = pieces[n-1]
		if err := a.AppendStream(ctx, t, id, strings.Join(pieces[:n-1], "")); err != nil {
			return err
		}
	}
	return a.streamCall(ctx, "chat.stopStream", func() error {
		opts := []slack.MsgOption{}
		if last != "" {
			opts = append(opts, slack.MsgOptionMarkdownText(last))
		}
		_, _, err := a.api.StopStreamContext(ctx, t.Channel, id, opts...)
		return err
	})
}

// streamCall makes one append or stop call.
func (a *Adapter) streamCall(ctx context.Context, method string, fn func() error) error {
	if a.noStream.Load() {
		return fmt.Errorf("slack: %s: %w", method, bot.ErrStreamingUnsupported)
	}
	if err := a.call(ctx, method, fn); err != nil {
		return a.streamErr(method, err)
	}
	return nil
}

// streamErr wraps a streaming method's error. An error that says the
// workspace cannot stream turns streaming off for the adapter's lifetime.
func (a *Adapter) streamErr(method string, err error) error {
	if code, ok := errors.AsType[slack.SlackErrorResponse](err); ok && streamingUnsupported(code.Err) {
		if a.noStream.CompareAndSwap(false, true) {
			a.log.Info("slack: streaming is not available in this workspace; answers are posted and updated instead", "method", method, "err", code.Err)
		}
		return fmt.Errorf("slack: %s: %w (%s)", method, bot.ErrStreamingUnsupported, code.Err)
	}
	return fmt.Errorf("slack: %s: %w", method, err)
}

// streamingUnsupported reports whether a Slack error code means the app or
// workspace cannot use the streaming methods at all.
func streamingUnsupported(code string) bool {
	switch code {
	case "not_allowed", "unknown_method", "missing_scope", "not_enabled", "feature_not_enabled":
		return true
	}
	return false
}

// streamPieces splits s into pieces of at most n bytes on rune boundaries;
// their concatenation is s. An empty s has no pieces.
func streamPieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
