package mattermost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mattermost/mattermost/server/public/model"

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

// incoming is a post with what the adapter knows about its channel.
type incoming struct {
	post        *model.Post
	channelType model.ChannelType
	senderName  string
	mentions    []string
}

// parsePosted reads the data of a "posted" event: the post and the
// mentions are JSON documents in strings.
func parsePosted(ev *model.WebSocketEvent) (incoming, error) {
	data := ev.GetData()
	postJSON, ok := data["post"].(string)
	if !ok {
		return incoming{}, errors.New("posted event: no post")
	}
	var p model.Post
	if err := json.Unmarshal([]byte(postJSON), &p); err != nil {
		return incoming{}, fmt.Errorf("posted event: post: %w", err)
	}
	if p.Id == "" || p.ChannelId == "" {
		return incoming{}, errors.New("posted event: post without id or channel_id")
	}
	channelType, _ := data["channel_type"].(string)
	sender, _ := data["sender_name"].(string)
	in := incoming{
		post:        &p,
		channelType: model.ChannelType(channelType),
		senderName:  strings.TrimPrefix(sender, "@"),
	}
	switch m := data["mentions"].(type) {
	case nil:
	case string:
		if m != "" {
			if err := json.Unmarshal([]byte(m), &in.mentions); err != nil {
				return incoming{}, fmt.Errorf("posted event: mentions: %w", err)
			}
		}
	default:
		return incoming{}, errors.New("posted event: mentions is not a string")
	}
	return in, nil
}

// fromBot reports whether a bot or an incoming webhook made the post.
// Mattermost sets these props to the string "true".
func fromBot(p *model.Post) bool {
	return p.GetProp(model.PostPropsFromBot) == "true" || p.GetProp(model.PostPropsFromWebhook) == "true"
}

// dial opens the event WebSocket with model.WebSocketClient, which sends
// the authentication challenge at once. The dial ends with ctx (the
// client's own dial takes no context, so the TCP connection is closed
// when ctx ends), follows no redirect, and the token travels only in the
// challenge.
func (a *Adapter) dial(ctx context.Context) (*model.WebSocketClient, error) {
	d := &websocket.Dialer{
		HandshakeTimeout: authTimeout,
		Proxy:            http.ProxyFromEnvironment,
		NetDialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			c, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			context.AfterFunc(ctx, func() { c.Close() })
			return c, nil
		},
	}
	ws, err := model.NewWebSocketClient4WithDialer(d, a.wsBase, a.cfg.Token)
	if err != nil {
		return nil, fmt.Errorf("mattermost: websocket dial: %w", err)
	}
	return ws, nil
}

// session runs one WebSocket connection: connect, authenticate, catch up,
// then deliver events until the connection or ctx ends. connected reports
// whether authentication succeeded (so Run can reset its backoff).
func (a *Adapter) session(ctx context.Context, h bot.Handler, st *runState) (connected bool, err error) {
	botID, botName, err := a.me(ctx)
	if err != nil {
		return false, err
	}
	// Ending sctx closes the connection (see dial).
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws, err := a.dial(sctx)
	if err != nil {
		return false, err
	}
	conn := ws.Conn
	// Before Listen starts the client's reader: the frame cap, and the
	// read deadline that pongs, pings and frames extend.
	conn.SetReadLimit(maxFrame)
	extend := func() { conn.SetReadDeadline(time.Now().Add(readTimeout)) }
	conn.SetPongHandler(func(string) error { extend(); return nil })
	clientPing := conn.PingHandler()
	conn.SetPingHandler(func(data string) error { extend(); return clientPing(data) })
	conn.SetReadDeadline(time.Now().Add(authTimeout))
	ws.Listen()
	done := make(chan struct{})
	defer func() {
		close(done)
		cancel()
		drain(ws)
	}()

	if err := a.authenticate(sctx, ws); err != nil {
		return false, a.checkToken(ctx, err)
	}
	extend()
	go pingLoop(conn, done)
	connectedAt := time.Now().UnixMilli()
	if st.floor == 0 {
		st.floor = connectedAt - floorSlack.Milliseconds()
	}
	a.connected.Store(true)
	defer a.connected.Store(false)
	a.log.Info("mattermost websocket connected")

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

	responses := ws.ResponseChannel
	for {
		select {
		case ev, ok := <-ws.EventChannel:
			if !ok {
				if ctx.Err() != nil {
					return true, ctx.Err()
				}
				return true, listenError(ws)
			}
			extend()
			if ev.EventType() != model.WebsocketEventPosted {
				continue
			}
			in, err := parsePosted(ev)
			if err != nil {
				a.log.Warn("mattermost: bad posted event", "err", err)
				continue
			}
			a.deliver(ctx, h, st, botID, botName, in)
			st.catchupFrom = max(st.catchupFrom, st.lastPost)
		case _, ok := <-responses:
			if !ok {
				responses = nil // EventChannel is closed too
				continue
			}
			extend()
		case <-ws.PingTimeoutChannel:
			// The client's watchdog: no ping from the server for a
			// while. Liveness is checked by pingLoop and the read
			// deadline; this channel is only kept from filling up.
		}
	}
}

// listenError is why the client's reader stopped; call it only once
// EventChannel is closed.
func listenError(ws *model.WebSocketClient) error {
	if ws.ListenError != nil {
		return fmt.Errorf("mattermost: websocket read: %w", ws.ListenError)
	}
	return errors.New("mattermost: websocket read: connection closed")
}

// drain closes the connection and reads the client's channels until its
// reader has stopped. model.WebSocketClient.Close is not used: a ping
// read while it runs makes the reader send on the closed write channel
// (a panic); closing the connection ends the reader, whose own cleanup
// stops the client's goroutines. The reader and the ping watchdog may be
// blocked on a full channel, hence the reads.
func drain(ws *model.WebSocketClient) {
	ws.Conn.Close()
	events, responses := ws.EventChannel, ws.ResponseChannel
	for events != nil || responses != nil {
		select {
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case _, ok := <-responses:
			if !ok {
				responses = nil
			}
		case <-ws.PingTimeoutChannel:
		}
	}
	select {
	case <-ws.PingTimeoutChannel:
	default:
	}
}

// authenticate waits for the reply to the authentication challenge the
// client sent (sequence 1), or the hello event.
func (a *Adapter) authenticate(ctx context.Context, ws *model.WebSocketClient) error {
	t := time.NewTimer(authTimeout)
	defer t.Stop()
	responses := ws.ResponseChannel
	for {
		select {
		case ev, ok := <-ws.EventChannel:
			if !ok {
				return fmt.Errorf("mattermost: websocket auth: %w", listenError(ws))
			}
			if ev.EventType() == model.WebsocketEventHello {
				return nil
			}
		case r, ok := <-responses:
			if !ok {
				responses = nil // EventChannel is closed too
				continue
			}
			if r.SeqReply != 1 {
				continue
			}
			if r.Status == model.StatusOk {
				return nil
			}
			msg := r.Status
			if r.Error != nil {
				msg = r.Error.Id + ": " + r.Error.Message
			}
			return fmt.Errorf("mattermost: websocket: %w: %s", errAuth, a.client.redact(msg))
		case <-ws.PingTimeoutChannel:
		case <-t.C:
			return errors.New("mattermost: websocket auth: no answer to the authentication challenge")
		case <-ctx.Done():
			return ctx.Err()
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

// pingLoop pings the server until done is closed, so a dead connection is
// noticed within readTimeout even when the server sends nothing.
// WriteControl may run beside the client's writer. A ping that cannot be
// written within 10 s closes the connection: the client's writer has no
// write deadline, and its reader waits for the writer to take each pong,
// so a server that stops reading would otherwise stall the reader where
// no read deadline reaches it.
func pingLoop(conn *websocket.Conn, done <-chan struct{}) {
	t := time.NewTicker(pingInterval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if err := conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(10*time.Second)); err != nil {
				conn.Close()
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
		list, err := a.client.getPostsSince(ctx, ch.Id, from)
		if err != nil {
			// One unreadable channel must not block the others.
			a.log.Warn("mattermost catch-up failed for channel", "channel_id", ch.Id, "err", err)
			continue
		}
		if len(list.Posts) >= postsSinceLimit {
			a.log.Warn("mattermost catch-up hit the server's page limit; older missed posts are skipped", "channel_id", ch.Id, "posts", len(list.Posts))
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
		return strings.Compare(x.post.Id, y.post.Id)
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
func (a *Adapter) memberChannels(ctx context.Context, botID string) ([]*model.Channel, error) {
	teams, err := a.client.getTeamsForUser(ctx, botID)
	if err != nil {
		return nil, err
	}
	var out []*model.Channel
	seen := make(map[string]bool)
	add := func(chs []*model.Channel) {
		for _, c := range chs {
			if c != nil && c.Id != "" && !seen[c.Id] {
				seen[c.Id] = true
				out = append(out, c)
			}
		}
	}
	for _, t := range teams {
		if t == nil {
			continue
		}
		chs, err := a.client.getChannelsForTeamForUser(ctx, t.Id, botID)
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
	case p.UserId == botID: // never answer ourselves
		return
	case p.Type != "": // system messages: joins, header changes, ...
		return
	case p.DeleteAt != 0:
		return
	}
	if !st.seen.Add(p.Id) {
		return
	}
	name := in.senderName
	if name != "" {
		a.rememberUser(p.UserId, name)
	} else {
		name = a.userNameSoon(ctx, p.UserId, nameWait)
	}
	direct := in.channelType == model.ChannelTypeDirect
	text, byName := stripMention(p.Message, botName)
	root := p.RootId
	if root == "" {
		root = p.Id
	}
	m := bot.Message{
		Thread:    bot.Thread{Platform: Platform, Channel: p.ChannelId, Root: root},
		ID:        p.Id,
		User:      bot.User{ID: p.UserId, Name: name},
		Text:      text,
		Mentioned: byName || direct || slices.Contains(in.mentions, botID),
		Direct:    direct,
		FromBot:   fromBot(p),
		Time:      time.UnixMilli(p.CreateAt),
	}
	h.HandleMessage(ctx, m)
}
