package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/slack-go/slack"

	"github.com/thinbot/thinbot/bot"
)

// inbound is one received item for Run's dispatch loop: a message or a click.
type inbound struct {
	msg   bot.Message
	click *click
	// refusal, with click, is why the click was refused before the bot.
	refusal string
}

// click is a verified block_actions press, not yet passed to the bot.
type click struct {
	c        bot.Click
	threadTS string // for the ephemeral answer
}

// eventCallback is the part of an Events API payload ("event_callback" or
// "url_verification") that the adapter reads.
type eventCallback struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
	EventID   string `json:"event_id"`
	APIAppID  string `json:"api_app_id"`
	TeamID    string `json:"team_id"`
	Event     struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		User        string `json:"user"`
		BotID       string `json:"bot_id"`
		Text        string `json:"text"`
		TS          string `json:"ts"`
		ThreadTS    string `json:"thread_ts"`
		Channel     string `json:"channel"`
		ChannelType string `json:"channel_type"`
		Hidden      bool   `json:"hidden"`
		Team        string `json:"team"`
		UserTeam    string `json:"user_team"`
	} `json:"event"`
}

// parseEventCallback decodes an Events API payload.
func parseEventCallback(data []byte) (eventCallback, error) {
	var ev eventCallback
	if err := json.Unmarshal(data, &ev); err != nil {
		return eventCallback{}, fmt.Errorf("slack: decode event: %w", err)
	}
	if ev.Type == "" {
		return eventCallback{}, fmt.Errorf("slack: decode event: no type")
	}
	return ev, nil
}

// blockActions is the part of a block_actions payload the adapter reads.
type blockActions struct {
	Type string `json:"type"`
	User struct {
		ID       string `json:"id"`
		Username string `json:"username"`
		Name     string `json:"name"`
	} `json:"user"`
	Channel struct {
		ID string `json:"id"`
	} `json:"channel"`
	Container struct {
		ChannelID string `json:"channel_id"`
		MessageTS string `json:"message_ts"`
		ThreadTS  string `json:"thread_ts"`
	} `json:"container"`
	Message struct {
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
	} `json:"message"`
	Actions []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// parseBlockActions decodes an interactivity payload.
func parseBlockActions(data []byte) (blockActions, error) {
	var ba blockActions
	if err := json.Unmarshal(data, &ba); err != nil {
		return blockActions{}, fmt.Errorf("slack: decode interaction: %w", err)
	}
	return ba, nil
}

// mentionRe matches a user mention "<@U123>" or "<@U123|name>".
var mentionRe = regexp.MustCompile(`<@([A-Z0-9]+)(?:\|[^>]*)?>`)

// acceptEvent turns an event callback into a message for the bot, or
// reports false when it must not reach the bot: not a message, an edit or
// deletion, the bot's own post, or a duplicate.
func (a *Adapter) acceptEvent(ev eventCallback) (bot.Message, bool) {
	if ev.Type != "event_callback" {
		return bot.Message{}, false
	}
	e := ev.Event
	if e.Type != "message" && e.Type != "app_mention" {
		return bot.Message{}, false
	}
	switch e.Subtype {
	case "", "bot_message", "thread_broadcast", "file_share", "me_message":
	default: // message_changed, message_deleted, channel_join, …
		return bot.Message{}, false
	}
	if e.Hidden || e.TS == "" || e.Channel == "" {
		return bot.Message{}, false
	}
	a.mu.Lock()
	self := a.self
	a.mu.Unlock()
	if (self.botID != "" && e.BotID == self.botID) || (self.userID != "" && e.User == self.userID) {
		return bot.Message{}, false
	}
	// An event redelivered (socket retry, HTTP retry) repeats its event_id;
	// a post's app_mention and message events share channel and ts.
	if ev.EventID != "" && !a.seen.Add("event/"+ev.EventID) {
		return bot.Message{}, false
	}
	if !a.seen.Add("msg/" + e.Channel + "/" + e.TS) {
		return bot.Message{}, false
	}
	mentioned := false
	text := e.Text
	if self.userID != "" {
		text = mentionRe.ReplaceAllStringFunc(text, func(m string) string {
			if mentionRe.FindStringSubmatch(m)[1] == self.userID {
				mentioned = true
				return ""
			}
			return m
		})
	}
	root := e.ThreadTS
	if root == "" {
		root = e.TS
	}
	m := bot.Message{
		Thread:    bot.Thread{Platform: Platform, Channel: e.Channel, Root: root},
		ID:        e.TS,
		User:      bot.User{ID: e.User}, // Run looks the name up
		Text:      strings.TrimSpace(strings.Join(strings.Fields(unescape(text)), " ")),
		Mentioned: mentioned || e.Type == "app_mention",
		Direct:    e.ChannelType == "im" || strings.HasPrefix(e.Channel, "D"),
		FromBot:   e.BotID != "" || e.Subtype == "bot_message",
		Time:      parseTS(e.TS),
	}
	a.noteRecipient(ev, m)
	return m, true
}

// enqueue passes in to Run's dispatch loop.
func (a *Adapter) enqueue(ctx context.Context, in inbound) error {
	select {
	case a.inbox <- in:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// receiveEvent handles an Events API payload from either mode.
func (a *Adapter) receiveEvent(ctx context.Context, payload []byte) error {
	ev, err := parseEventCallback(payload)
	if err != nil {
		return err
	}
	if m, ok := a.acceptEvent(ev); ok {
		return a.enqueue(ctx, inbound{msg: m})
	}
	return nil
}

// receiveInteraction handles an interactivity payload from either mode.
func (a *Adapter) receiveInteraction(ctx context.Context, payload []byte) error {
	ba, err := parseBlockActions(payload)
	if err != nil {
		return err
	}
	if ba.Type != "block_actions" {
		return nil // shortcuts, view submissions: not used by thinbot
	}
	c, refusal := a.acceptClick(ba)
	return a.enqueue(ctx, inbound{click: &c, refusal: refusal})
}

// refuseClick logs a click refused before the bot and tells the clicker.
func (a *Adapter) refuseClick(ctx context.Context, c click, reason string) {
	a.log.Warn("slack: refused button click", "reason", reason, "channel", c.c.Thread.Channel, "user", c.c.User.ID)
	if c.c.Thread.Channel == "" || c.c.User.ID == "" {
		return
	}
	if err := a.ephemeral(ctx, c.c.Thread.Channel, c.threadTS, c.c.User.ID, "This button could not be verified, so nothing was done."); err != nil {
		a.log.Error("slack: ephemeral refusal failed", "err", err)
	}
}

// acceptClick checks a block_actions payload and its button value's HMAC.
// It returns the click and "" or, for a refused click, the reason.
func (a *Adapter) acceptClick(ba blockActions) (click, string) {
	if ba.Type != "block_actions" || len(ba.Actions) == 0 {
		return click{}, "not a button press"
	}
	channel := ba.Channel.ID
	if channel == "" {
		channel = ba.Container.ChannelID
	}
	ts := ba.Container.MessageTS
	if ts == "" {
		ts = ba.Message.TS
	}
	threadTS := ba.Container.ThreadTS
	if threadTS == "" {
		threadTS = ba.Message.ThreadTS
	}
	if channel == "" || ts == "" || ba.User.ID == "" {
		return click{}, "incomplete payload"
	}
	act := ba.Actions[0]
	value, ok := a.verifyValue(channel, act.ActionID, act.Value)
	if !ok {
		return click{c: bot.Click{Thread: bot.Thread{Platform: Platform, Channel: channel}, User: bot.User{ID: ba.User.ID}}, threadTS: threadTS}, "bad button signature"
	}
	root := threadTS
	if root == "" {
		root = ts
	}
	name := ba.User.Username
	if name == "" {
		name = ba.User.Name
	}
	return click{
		c: bot.Click{
			Thread:   bot.Thread{Platform: Platform, Channel: channel, Root: root},
			PostID:   ts,
			ActionID: act.ActionID,
			Value:    value,
			User:     bot.User{ID: ba.User.ID, Name: name},
		},
		threadTS: root,
	}, ""
}

// handleClick passes a click to the bot and applies its answer: the clicked
// message is updated and the ephemeral text goes to the clicker.
func (a *Adapter) handleClick(ctx context.Context, h bot.Handler, c click) {
	res := h.HandleClick(ctx, c.c)
	t := c.c.Thread
	if res.Update != nil {
		if err := a.Update(ctx, t, c.c.PostID, *res.Update); err != nil {
			a.log.Error("slack: update after click failed", "channel", t.Channel, "ts", c.c.PostID, "err", err)
		}
	}
	if res.Ephemeral != "" {
		if err := a.ephemeral(ctx, t.Channel, c.threadTS, c.c.User.ID, res.Ephemeral); err != nil {
			a.log.Error("slack: ephemeral after click failed", "channel", t.Channel, "user", c.c.User.ID, "err", err)
		}
	}
}

// ephemeral shows text to one user in the channel (in the thread if set).
func (a *Adapter) ephemeral(ctx context.Context, channel, threadTS, user, text string) error {
	opts := []slack.MsgOption{slack.MsgOptionText(truncate(Mrkdwn(text), maxTextLen), false)}
	if threadTS != "" {
		opts = append(opts, slack.MsgOptionTS(threadTS))
	}
	err := a.call(ctx, "chat.postEphemeral", func() error {
		_, err := a.api.PostEphemeralContext(ctx, channel, user, opts...)
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: chat.postEphemeral: %w", err)
	}
	return nil
}

// blocks renders mrkdwn text as section blocks (Slack allows 3,000
// characters each) followed by the post's buttons.
func (a *Adapter) blocks(channel, text string, p bot.Post) []slack.Block {
	var out []slack.Block
	for _, chunk := range chunks(text, maxSectionLen) {
		out = append(out, slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, chunk, false, false), nil, nil))
	}
	if len(p.Buttons) == 0 {
		return out
	}
	var els []slack.BlockElement
	for _, b := range p.Buttons {
		btn := slack.NewButtonBlockElement(b.ID, a.signValue(channel, b.ID, p.Value), slack.NewTextBlockObject(slack.PlainTextType, b.Label, false, false))
		switch b.Style {
		case "primary":
			btn = btn.WithStyle(slack.StylePrimary)
		case "danger":
			btn = btn.WithStyle(slack.StyleDanger)
		}
		els = append(els, btn)
	}
	return append(out, slack.NewActionBlock("thinbot_actions", els...))
}

// chunks splits s into pieces of at most n bytes, preferring line breaks.
func chunks(s string, n int) []string {
	if s == "" {
		return []string{" "}
	}
	var out []string
	for len(s) > n {
		cut := strings.LastIndexByte(s[:n], '\n')
		if cut <= 0 {
			cut = n
			for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
				cut--
			}
		}
		out = append(out, s[:cut])
		s = strings.TrimPrefix(s[cut:], "\n")
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// buttonKey derives the HMAC key of button values from the adapter's secrets,
// so values stay valid across restarts.
func buttonKey(botToken, signingSecret string) []byte {
	m := hmac.New(sha256.New, []byte("thinbot slack button value"))
	m.Write([]byte(botToken))
	m.Write([]byte{0})
	m.Write([]byte(signingSecret))
	return m.Sum(nil)
}

func (a *Adapter) mac(channel, actionID, value string) string {
	m := hmac.New(sha256.New, a.btnKey)
	for _, s := range []string{channel, actionID, value} {
		m.Write([]byte(s))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// signValue binds value to the channel and action: "value.mac".
func (a *Adapter) signValue(channel, actionID, value string) string {
	return value + "." + a.mac(channel, actionID, value)
}

// verifyValue checks a signed button value and returns the bare value.
func (a *Adapter) verifyValue(channel, actionID, signed string) (string, bool) {
	i := strings.LastIndexByte(signed, '.')
	if i < 0 {
		return "", false
	}
	value, sum := signed[:i], signed[i+1:]
	if !hmac.Equal([]byte(sum), []byte(a.mac(channel, actionID, value))) {
		return "", false
	}
	return value, true
}
