package mattermost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/thinbot/thinbot/bot"
)

const (
	// readTimeout is how long a connection may stay silent; the adapter
	// pings every pingInterval, and the server answers with a pong.
	readTimeout  = 90 * time.Second
	pingInterval = 30 * time.Second
	authTimeout  = 30 * time.Second
	// catchupOverlap is how far before the last known point a reconnect
	// catch-up starts, to absorb clock skew and posts committed out of
	// order; the id set removes what was already delivered.
	catchupOverlap = 2 * time.Minute
	// postsSinceLimit is the server's cap on one /posts?since= answer.
	postsSinceLimit = 1000
	// floorSlack is how far before the first connection the catch-up floor
	// lies: server and thinbot clocks differ a little, and a post can be
	// created in the very millisecond the connection came up. Minutes-old
	// posts (from before thinbot ran) stay out.
	floorSlack = 5 * time.Second
	// maxFrame caps one WebSocket frame the server sends. The largest a
	// server makes is a "posted" event whose post has 800000 runes of
	// props and a 64 KiB message, JSON-escaped twice (the post is a string
	// in the event): about 6 MiB. A larger frame ends the connection; the
	// reconnect's catch-up then fetches its post over the REST API.
	maxFrame = 8 << 20
)

// runState is what Run keeps across connections.
type runState struct {
	seen *bot.Dedupe
	// catchupFrom is the time (Unix ms) after which posts must be fetched
	// at the next connection; 0 means no catch-up.
	catchupFrom int64
	// strict is true while catchupFrom is Config.Since, which is exact (no
	// overlap).
	strict bool
	// floor is the earliest a catch-up ever reaches (Unix ms): Config.Since
	// when given, else the first connection's start (less floorSlack). The
	// overlap must not reach before it: posts from before thinbot ran are
	// not its to answer.
	floor int64
	// lastPost is the newest create_at seen on any post.
	lastPost int64
}

// Names and values of the WebSocket protocol.
const (
	eventPosted         = "posted"
	eventHello          = "hello"
	actionAuthChallenge = "authentication_challenge"
	statusOK            = "OK"
)

// wsFrame is one frame of the Mattermost WebSocket: an event (Event set)
// or a reply to a request we sent (SeqReply set). parseFrame decodes it in
// one pass, data included: Data has the fields of the one event the
// adapter reads, "posted".
type wsFrame struct {
	Event    string     `json:"event"`
	Data     postedData `json:"data"`
	Status   string     `json:"status"`
	SeqReply int64      `json:"seq_reply"`
	Error    *struct {
		ID      string `json:"id"`
		Message string `json:"message"`
	} `json:"error"`
}

// postedData is the data of a "posted" event. post and mentions are JSON
// documents encoded as strings.
type postedData struct {
	ChannelType string `json:"channel_type"`
	Post        string `json:"post"`
	SenderName  string `json:"sender_name"`
	Mentions    string `json:"mentions"`
}

// parseFrame decodes one WebSocket frame. Other events than "posted" may
// carry data fields of the same names with other types; a type error is an
// error for a "posted" event only (the others' data is not read).
func parseFrame(b []byte) (wsFrame, error) {
	var f wsFrame
	err := json.Unmarshal(b, &f)
	var te *json.UnmarshalTypeError
	if err != nil && f.Event != eventPosted && errors.As(err, &te) {
		err = nil
	}
	if err != nil {
		return f, fmt.Errorf("websocket frame: %w", err)
	}
	return f, nil
}

// incoming is a post with what the adapter knows about its channel.
type incoming struct {
	post        *post
	channelType string
	senderName  string
	mentions    []string
}

// parse decodes the post and mentions of a "posted" event, each a JSON
// document in a string.
func (d *postedData) parse() (incoming, error) {
	var p post
	if err := json.Unmarshal([]byte(d.Post), &p); err != nil {
		return incoming{}, fmt.Errorf("posted event: post: %w", err)
	}
	if p.ID == "" || p.ChannelID == "" {
		return incoming{}, errors.New("posted event: post without id or channel_id")
	}
	in := incoming{
		post:        &p,
		channelType: d.ChannelType,
		senderName:  strings.TrimPrefix(d.SenderName, "@"),
	}
	if d.Mentions != "" {
		if err := json.Unmarshal([]byte(d.Mentions), &in.mentions); err != nil {
			return incoming{}, fmt.Errorf("posted event: mentions: %w", err)
		}
	}
	return in, nil
}

// session runs one WebSocket connection: connect, authenticate, catch up,
// then deliver events until the connection or ctx ends. connected reports
// whether authentication succeeded (so Run can reset its backoff).
func (a *Adapter) session(ctx context.Context, h bot.Handler, st *runState) (connected bool, err error) {
	botID, botName, err := a.me(ctx)
	if err != nil {
		return false, err
	}
	dialer := websocket.Dialer{HandshakeTimeout: authTimeout, Proxy: http.ProxyFromEnvironment}
	conn, resp, err := dialer.DialContext(ctx, a.wsURL, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		return false, fmt.Errorf("mattermost: websocket dial (HTTP %d): %w", status, err)
	}
	defer conn.Close()
	conn.SetReadLimit(maxFrame)
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if err := a.authenticate(conn); err != nil {
		return false, a.checkToken(ctx, err)
	}
	connectedAt := time.Now().UnixMilli()
	if st.floor == 0 {
		st.floor = connectedAt - floorSlack.Milliseconds()
	}
	a.connected.Store(true)
	defer a.connected.Store(false)
	a.log.Info("mattermost websocket connected")

	frames := make(chan wsFrame, 256)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	go a.readFrames(conn, frames, readErr)
	go pingLoop(conn, done)
	defer func() {
		close(done)
		conn.Close()
		for range frames { // wait for the reader to stop
		}
	}()

	if st.catchupFrom > 0 {
		from := st.catchupFrom
		if !st.strict {
			from = max(from-catchupOverlap.Milliseconds(), st.floor)
		}
		if err := a.catchUp(ctx, h, st, botID, botName, from); err != nil {
			return true, err
		}
	}
	// From now on a reconnect catches up from this connection's start or
	// the newest post seen, whichever is later.
	st.strict = false
	st.catchupFrom = max(connectedAt, st.lastPost)

	for f := range frames {
		if f.Event != eventPosted {
			continue
		}
		in, err := f.Data.parse()
		if err != nil {
			a.log.Warn("mattermost: bad posted event", "err", err)
			continue
		}
		a.deliver(ctx, h, st, botID, botName, in)
		st.catchupFrom = max(st.catchupFrom, st.lastPost)
	}
	if ctx.Err() != nil {
		return true, ctx.Err()
	}
	return true, <-readErr
}

// authenticate answers the server's authentication challenge on a fresh
// connection and waits for the OK (or the hello event).
func (a *Adapter) authenticate(conn *websocket.Conn) error {
	conn.SetWriteDeadline(time.Now().Add(authTimeout))
	challenge := map[string]any{
		"seq":    1,
		"action": actionAuthChallenge,
		"data":   map[string]string{"token": a.cfg.Token},
	}
	if err := conn.WriteJSON(challenge); err != nil {
		return fmt.Errorf("mattermost: websocket auth: %w", err)
	}
	conn.SetWriteDeadline(time.Time{})
	conn.SetReadDeadline(time.Now().Add(authTimeout))
	defer conn.SetReadDeadline(time.Time{})
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return fmt.Errorf("mattermost: websocket auth: %w", err)
		}
		m, err := parseFrame(data)
		if err != nil {
			continue // not a frame we understand; the reply is still to come
		}
		switch {
		case m.Event == eventHello:
			return nil
		case m.SeqReply == 1 && m.Status == statusOK:
			return nil
		case m.SeqReply == 1:
			msg := m.Status
			if m.Error != nil {
				msg = m.Error.ID + ": " + m.Error.Message
			}
			return fmt.Errorf("mattermost: websocket: %w: %s", errAuth, a.client.redact(msg))
		}
	}
}

// checkToken tells why the WebSocket authentication failed. Mattermost
// answers a challenge with a bad token by closing the connection, which
// looks like any other network failure; and the bot's user is fetched
// only once per Run, so a token revoked since would make Run reconnect
// forever. So the token is tried on the REST API again: if it is refused
// (401), the error is an errAuth, which stops Run; else err is returned.
func (a *Adapter) checkToken(ctx context.Context, err error) error {
	if errors.Is(err, errAuth) || ctx.Err() != nil {
		return err
	}
	_, _, merr := a.client.getMe(ctx)
	var ae *APIError
	if errors.As(merr, &ae) && ae.Status == http.StatusUnauthorized {
		return fmt.Errorf("%w: %w", errAuth, merr)
	}
	return err
}

// readFrames reads and decodes frames until the connection fails, then
// reports the error and closes frames.
func (a *Adapter) readFrames(conn *websocket.Conn, frames chan<- wsFrame, readErr chan<- error) {
	defer close(frames)
	extend := func(string) error { return conn.SetReadDeadline(time.Now().Add(readTimeout)) }
	conn.SetPongHandler(extend)
	conn.SetPingHandler(func(data string) error {
		extend(data)
		err := conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		return err
	})
	extend("")
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			readErr <- fmt.Errorf("mattermost: websocket read: %w", err)
			return
		}
		extend("")
		m, err := parseFrame(data)
		if err != nil {
			if m.Event == eventPosted {
				a.log.Warn("mattermost: bad posted event", "err", err)
			}
			continue // not an event we understand; the server sends only JSON
		}
		frames <- m
	}
}

// pingLoop pings the server until done is closed, so a dead connection is
// noticed within readTimeout even when the server sends nothing.
func pingLoop(conn *websocket.Conn, done <-chan struct{}) {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second)); err != nil {
				return
			}
		}
	}
}

// catchUp fetches the posts created after from (Unix ms) in every channel
// the bot is a member of and delivers them in creation order.
func (a *Adapter) catchUp(ctx context.Context, h bot.Handler, st *runState, botID, botName string, from int64) error {
	channels, err := a.memberChannels(ctx, botID)
	if err != nil {
		return err
	}
	var posts []incoming
	for _, ch := range channels {
		list, err := a.client.getPostsSince(ctx, ch.ID, from)
		if err != nil {
			// One unreadable channel must not block the others.
			a.log.Warn("mattermost catch-up failed for channel", "channel_id", ch.ID, "err", err)
			continue
		}
		if len(list.Posts) >= postsSinceLimit {
			a.log.Warn("mattermost catch-up hit the server's page limit; older missed posts are skipped", "channel_id", ch.ID, "posts", len(list.Posts))
		}
		for _, p := range list.Posts {
			if p == nil || p.CreateAt <= from || p.DeleteAt != 0 {
				continue
			}
			posts = append(posts, incoming{post: p, channelType: ch.Type})
		}
	}
	slices.SortFunc(posts, func(x, y incoming) int {
		if c := x.post.CreateAt - y.post.CreateAt; c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
		return strings.Compare(x.post.ID, y.post.ID)
	})
	a.log.Info("mattermost catch-up", "since", time.UnixMilli(from).UTC().Format(time.RFC3339), "channels", len(channels), "posts", len(posts))
	for _, in := range posts {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.deliver(ctx, h, st, botID, botName, in)
	}
	return nil
}

// memberChannels lists the channels (direct ones included) the bot is a
// member of, over every team it belongs to. A bot in no team falls back to
// GET /users/{id}/channels, which servers before 6.2 may lack.
func (a *Adapter) memberChannels(ctx context.Context, botID string) ([]channel, error) {
	teams, err := a.client.getTeamsForUser(ctx, botID)
	if err != nil {
		return nil, err
	}
	var out []channel
	seen := make(map[string]bool)
	add := func(chs []channel) {
		for _, c := range chs {
			if c.ID != "" && !seen[c.ID] {
				seen[c.ID] = true
				out = append(out, c)
			}
		}
	}
	for _, t := range teams {
		chs, err := a.client.getChannelsForTeamForUser(ctx, t.ID, botID)
		if err != nil {
			return nil, err
		}
		add(chs)
	}
	if len(teams) == 0 {
		chs, err := a.client.getChannelsForUser(ctx, botID)
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusNotImplemented) {
				a.log.Warn("mattermost: bot is in no team and the server cannot list its channels; catch-up skipped")
				return nil, nil
			}
			return nil, err
		}
		add(chs)
	}
	return out, nil
}

// deliver filters one post and hands it to h as a bot.Message.
func (a *Adapter) deliver(ctx context.Context, h bot.Handler, st *runState, botID, botName string, in incoming) {
	p := in.post
	st.lastPost = max(st.lastPost, p.CreateAt)
	switch {
	case p.UserID == botID: // never answer ourselves
		return
	case p.Type != "": // system messages: joins, header changes, ...
		return
	case p.DeleteAt != 0:
		return
	}
	if !st.seen.Add(p.ID) {
		return
	}
	name := in.senderName
	if name != "" {
		a.rememberUser(p.UserID, name)
	} else {
		name = a.userNameSoon(ctx, p.UserID, nameWait)
	}
	direct := in.channelType == channelTypeDirect
	text, byName := stripMention(p.Message, botName)
	root := p.RootID
	if root == "" {
		root = p.ID
	}
	m := bot.Message{
		Thread:    bot.Thread{Platform: Platform, Channel: p.ChannelID, Root: root},
		ID:        p.ID,
		User:      bot.User{ID: p.UserID, Name: name},
		Text:      text,
		Mentioned: byName || direct || slices.Contains(in.mentions, botID),
		Direct:    direct,
		FromBot:   p.fromBot(),
		Time:      time.UnixMilli(p.CreateAt),
	}
	h.HandleMessage(ctx, m)
}
