package slack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"

	"github.com/thinbot/thinbot/bot"
)

// Platform is the bot.Thread.Platform of Slack threads.
const Platform = "slack"

const (
	defaultAPIURL = "https://slack.com/api/"
	// maxRetries bounds the 429 retries of one Web API call.
	maxRetries = 5
	// maxTextLen keeps a message under Slack's 40,000-character text limit.
	maxTextLen = 39000
	// maxSectionLen is Slack's limit for a section block's text.
	maxSectionLen = 3000
	// memberTTL is how long a channel's member list is cached.
	memberTTL = 30 * time.Second
	// inboxSize is the number of received events waiting for the handler.
	inboxSize = 256
	// callTimeout bounds every Web API call (the default client has none:
	// one hung call would hang its caller for ever).
	callTimeout = 30 * time.Second
	// nameWait is how long the dispatch loop waits for a user's name when
	// it is not cached; the lookup goes on without it, and the message is
	// delivered with the id alone.
	nameWait = 2 * time.Second
	// nameRetry is how long a failed users.info is not retried.
	nameRetry = 5 * time.Minute
	// namesMax bounds the id -> name cache; it is cleared when full.
	namesMax = 4096
)

// Config configures an Adapter. The zero value is not usable: BotToken is
// required, and so is AppToken in socket mode or SigningSecret in HTTP mode.
type Config struct {
	// BotToken is the bot user OAuth token (xoxb-…).
	BotToken string
	// AppToken is the app-level token (xapp-…) with connections:write,
	// used in socket mode.
	AppToken string
	// SigningSecret verifies HTTP-mode requests; it also keys the HMAC of
	// button values when set.
	SigningSecret string
	// Mode is "socket" (the default when empty) or "http".
	Mode string
	// APIURL is the Web API base URL, ending in "/"; "" means
	// https://slack.com/api/. Tests point it at a fake; proxies may too.
	APIURL string
	// HTTPClient makes Web API calls; nil means a client with a timeout. A
	// client without a Timeout gets one: no call may hang.
	HTTPClient *http.Client
	// CallTimeout bounds each Web API call (the HTTP client's Timeout)
	// when HTTPClient has none; 0 means 30s.
	CallTimeout time.Duration
	// Logger receives the adapter's logs; nil discards them.
	Logger *slog.Logger
	// Backoff bounds the reconnect (and first auth.test) delays; the zero
	// value means 1s..1m, at most 5s for the first 2 minutes after the
	// socket was lost, so a short outage ends with a quick reconnect.
	Backoff bot.Backoff
	// Now is the clock for signature timestamps; nil means time.Now.
	Now func() time.Time
}

// Adapter is the Slack implementation of bot.Adapter. Create it with New.
// All methods may be called concurrently. Post, Update and IsMember work
// before Run; Run may be called once.
type Adapter struct {
	cfg    Config
	api    *slack.Client
	log    *slog.Logger
	now    func() time.Time
	btnKey []byte

	inbox     chan inbound
	connected atomic.Bool
	running   atomic.Bool
	// noStream is set once Slack said the workspace cannot stream.
	noStream atomic.Bool
	seen     *bot.Dedupe

	// lookups are the users.info calls started by the dispatch loop; Run
	// waits for them before it returns.
	lookups sync.WaitGroup

	mu         sync.Mutex
	self       identity
	names      map[string]*nameEntry // user id -> name (or a lookup in flight)
	members    map[string]memberList
	recipients recipients // thread key -> recipient of streamed replies
}

// identity is who the bot is, from auth.test.
// identity is the bot's as auth.test tells it; url is the workspace's
// ("https://team.slack.com/"), for permalinks.
type identity struct{ userID, botID, teamID, url string }

// nameEntry is a user's name, or its lookup while done is open. A failed
// lookup leaves name "" and is retried after nameRetry.
type nameEntry struct {
	done    chan struct{}
	name    string
	started time.Time // when the lookup started
	at      time.Time // when the lookup ended
}

type memberList struct {
	ids     map[string]bool
	fetched time.Time
}

var _ bot.Adapter = (*Adapter)(nil)

// New validates cfg and returns an Adapter. It makes no network calls.
func New(cfg Config) (*Adapter, error) {
	if cfg.BotToken == "" {
		return nil, errors.New("slack: bot token is required")
	}
	switch cfg.Mode {
	case "", "socket":
		cfg.Mode = "socket"
		if cfg.AppToken == "" {
			return nil, errors.New("slack: socket mode needs an app-level token (xapp-…)")
		}
	case "http":
		if cfg.SigningSecret == "" {
			return nil, errors.New("slack: http mode needs the signing secret")
		}
	default:
		return nil, fmt.Errorf("slack: unknown mode %q (want socket or http)", cfg.Mode)
	}
	if cfg.APIURL == "" {
		cfg.APIURL = defaultAPIURL
	}
	if !strings.HasSuffix(cfg.APIURL, "/") {
		cfg.APIURL += "/"
	}
	cfg.Backoff = cfg.Backoff.WithDefaults()
	a := &Adapter{
		cfg:     cfg,
		log:     cfg.Logger,
		now:     cfg.Now,
		inbox:   make(chan inbound, inboxSize),
		seen:    bot.NewDedupe(4096),
		names:   map[string]*nameEntry{},
		members: map[string]memberList{},
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.btnKey = buttonKey(cfg.BotToken, cfg.SigningSecret)
	opts := []slack.Option{slack.OptionAPIURL(cfg.APIURL)}
	if cfg.AppToken != "" {
		opts = append(opts, slack.OptionAppLevelToken(cfg.AppToken))
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = callTimeout
	}
	hc := &http.Client{Timeout: cfg.CallTimeout}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		if c.Timeout <= 0 {
			c.Timeout = cfg.CallTimeout
		}
		hc = &c
	}
	opts = append(opts, slack.OptionHTTPClient(hc))
	a.api = slack.New(cfg.BotToken, opts...)
	return a, nil
}

// Connected reports whether the adapter is receiving events: in socket mode,
// a socket is open and Slack said hello; in HTTP mode, Run is serving.
func (a *Adapter) Connected() bool { return a.connected.Load() }

// Run authenticates with auth.test, then receives events until ctx is done
// and passes them to h one at a time, in order of arrival; clicks are
// handled concurrently. It reconnects with backoff by itself and returns
// ctx.Err() on shutdown, or an error when the token is refused.
func (a *Adapter) Run(ctx context.Context, h bot.Handler) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("slack: Run called twice")
	}
	if err := a.authenticate(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer a.lookups.Wait()
	defer wg.Wait()
	defer cancel()
	errc := make(chan error, 1)
	if a.cfg.Mode == "socket" {
		wg.Go(func() { errc <- a.runSocket(ctx) })
	} else {
		a.connected.Store(true)
		defer a.connected.Store(false)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			return err
		case in := <-a.inbox:
			switch {
			case in.click != nil && in.refusal != "":
				wg.Go(func() { a.refuseClick(ctx, *in.click, in.refusal) })
			case in.click != nil:
				wg.Go(func() { a.handleClick(ctx, h, *in.click) })
			default:
				in.msg.User.Name = a.userName(ctx, in.msg.User.ID, nameWait)
				h.HandleMessage(ctx, in.msg)
			}
		}
	}
}

// authenticate learns the bot's own ids, retrying with backoff until the
// token is accepted, refused, or ctx is done.
func (a *Adapter) authenticate(ctx context.Context) error {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		var res *slack.AuthTestResponse
		err := a.call(ctx, "auth.test", func() error {
			var err error
			res, err = a.api.AuthTestContext(ctx)
			return err
		})
		if err == nil {
			a.mu.Lock()
			a.self = identity{userID: res.UserID, botID: res.BotID, teamID: res.TeamID, url: res.URL}
			a.mu.Unlock()
			a.log.Info("slack: authenticated", "user_id", res.UserID, "bot_id", res.BotID, "team", res.Team)
			return nil
		}
		if fatalAuth(err) || ctx.Err() != nil {
			return fmt.Errorf("slack: auth.test: %w", err)
		}
		delay := a.cfg.Backoff.Delay(attempt, time.Since(start))
		a.log.Warn("slack: auth.test failed, retrying", "err", err, "in", delay)
		if err := sleep(ctx, delay); err != nil {
			return err
		}
	}
}

// fatalAuth reports whether err means the token itself is refused.
func fatalAuth(err error) bool {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
			return true
		}
	}
	switch err.Error() {
	case "invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type":
		return true
	}
	return false
}

// call runs one Web API call, retrying after Retry-After when Slack answers
// 429, at most maxRetries times.
func (a *Adapter) call(ctx context.Context, method string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		wait, limited := retryAfter(err)
		if !limited || attempt >= maxRetries {
			return err
		}
		a.log.Warn("slack: rate limited", "method", method, "retry_after", wait, "attempt", attempt+1)
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// retryAfter reports whether err is a 429 and how long to wait.
func retryAfter(err error) (time.Duration, bool) {
	if rl, ok := errors.AsType[*slack.RateLimitedError](err); ok {
		return max(rl.RetryAfter, 100*time.Millisecond), true
	}
	if sc, ok := errors.AsType[slack.StatusCodeError](err); ok && sc.Code == http.StatusTooManyRequests {
		return time.Second, true // 429 without Retry-After
	}
	return 0, false
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Post sends p into thread t (a new top-level post when t.Root is "") and
// returns the new message's ts. Text is converted to mrkdwn and truncated to
// Slack's limit; buttons become a Block Kit actions block; a File is
// uploaded into the thread after the message.
func (a *Adapter) Post(ctx context.Context, t bot.Thread, p bot.Post) (string, error) {
	text := p.Text
	if strings.TrimSpace(text) == "" && p.File != nil {
		text = "Attached: " + p.File.Name
	}
	opts := a.msgOptions(t.Channel, text, p, false)
	if t.Root != "" {
		opts = append(opts, slack.MsgOptionTS(t.Root))
	}
	if p.Mark != "" {
		opts = append(opts, slack.MsgOptionMetadata(slack.SlackMetadata{EventType: markEvent, EventPayload: map[string]any{"mark": p.Mark}}))
	}
	var ts string
	err := a.call(ctx, "chat.postMessage", func() error {
		var err error
		_, ts, err = a.api.PostMessageContext(ctx, t.Channel, opts...)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("slack: chat.postMessage: %w", err)
	}
	if p.File != nil {
		root := t.Root
		if root == "" {
			root = ts
		}
		if err := a.upload(ctx, t.Channel, root, *p.File); err != nil {
			return ts, err
		}
	}
	return ts, nil
}

// markEvent is the metadata event type of a message that carries a
// bot.Post's Mark (message metadata: chat.postMessage's metadata, never
// shown; chat.update keeps it when it sends none).
const markEvent = "thinbot_mark"

// findPages bounds the conversations.history pages FindPost reads.
const findPages = 20

var _ bot.PostFinder = (*Adapter)(nil)

// FindPost implements bot.PostFinder: the channel's top-level messages
// since since (conversations.history with oldest and
// include_all_metadata, newest first, 200 a page, at most findPages pages)
// are searched for the bot's own message whose metadata carries mark. It
// needs the history scope of the channel's kind (channels:history,
// groups:history), which the manifest asks for.
func (a *Adapter) FindPost(ctx context.Context, channel, mark string, since time.Time) (string, error) {
	if channel == "" || mark == "" {
		return "", errors.New("slack: find post: no channel or mark")
	}
	self, err := a.identity(ctx)
	if err != nil {
		return "", err
	}
	oldest := fmt.Sprintf("%d.%06d", since.Unix(), since.Nanosecond()/1000)
	if since.Unix() <= 0 {
		oldest = "0"
	}
	cursor := ""
	for range findPages {
		var res *slack.GetConversationHistoryResponse
		err := a.call(ctx, "conversations.history", func() error {
			var err error
			res, err = a.api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: channel,
				Oldest: oldest, Limit: 200, Cursor: cursor, IncludeAllMetadata: true})
			return err
		})
		if err != nil {
			return "", fmt.Errorf("slack: conversations.history: %w", err)
		}
		for _, m := range res.Messages {
			mine := (self.userID != "" && m.User == self.userID) || (self.botID != "" && m.BotID == self.botID)
			top := m.ThreadTimestamp == "" || m.ThreadTimestamp == m.Timestamp
			if got, _ := m.Metadata.EventPayload["mark"].(string); mine && top && m.Metadata.EventType == markEvent && got == mark {
				return m.Timestamp, nil
			}
		}
		cursor = res.ResponseMetaData.NextCursor
		if !res.HasMore || cursor == "" {
			return "", nil
		}
	}
	a.log.Warn("slack: a message looked for by its mark may be older than the pages read", "channel", channel, "pages", findPages)
	return "", nil
}

// identity returns the bot's ids, asking auth.test when Run has not yet.
func (a *Adapter) identity(ctx context.Context) (identity, error) {
	a.mu.Lock()
	self := a.self
	a.mu.Unlock()
	if self.userID != "" {
		return self, nil
	}
	var res *slack.AuthTestResponse
	err := a.call(ctx, "auth.test", func() error {
		var err error
		res, err = a.api.AuthTestContext(ctx)
		return err
	})
	if err != nil {
		return identity{}, fmt.Errorf("slack: auth.test: %w", err)
	}
	return identity{userID: res.UserID, botID: res.BotID, teamID: res.TeamID, url: res.URL}, nil
}

// Update replaces the text and buttons of the bot's message postID with
// chat.update. A File in p is ignored.
func (a *Adapter) Update(ctx context.Context, t bot.Thread, postID string, p bot.Post) error {
	opts := a.msgOptions(t.Channel, p.Text, p, true)
	err := a.call(ctx, "chat.update", func() error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, t.Channel, postID, opts...)
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: chat.update: %w", err)
	}
	return nil
}

// msgOptions renders a post. Updates always carry blocks so that an update
// without buttons removes the old ones.
func (a *Adapter) msgOptions(channel, markdown string, p bot.Post, update bool) []slack.MsgOption {
	text := Mrkdwn(markdown)
	if !update {
		text = mentions(p.Mentions) + text
	}
	text = truncate(text, maxTextLen)
	opts := []slack.MsgOption{slack.MsgOptionText(text, false), slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl()}
	if len(p.Buttons) > 0 || update {
		opts = append(opts, slack.MsgOptionBlocks(a.blocks(channel, text, p)...))
	}
	return opts
}

// mentions writes user ids as Slack mentions ("<@U1> <@U2> "); what is
// no Slack id is left out, so that it cannot write markup.
func mentions(ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		if id != "" && strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == "" {
			b.WriteString("<@" + id + "> ")
		}
	}
	return b.String()
}

// truncate cuts s to at most n bytes on a rune boundary, closing an open
// code block and saying that it did.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const note = "\n… (truncated)"
	cut := n - len(note) - 4
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	s = s[:cut]
	if strings.Count(s, "```")%2 == 1 {
		s += "\n```"
	}
	return s + note
}

// upload shares f into the thread with the current upload flow:
// files.getUploadURLExternal, a POST of the bytes, files.completeUploadExternal.
func (a *Adapter) upload(ctx context.Context, channel, threadTS string, f bot.File) error {
	if len(f.Data) == 0 {
		return fmt.Errorf("slack: upload %q: empty file", f.Name)
	}
	var u *slack.GetUploadURLExternalResponse
	err := a.call(ctx, "files.getUploadURLExternal", func() error {
		var err error
		u, err = a.api.GetUploadURLExternalContext(ctx, slack.GetUploadURLExternalParameters{FileName: f.Name, FileSize: len(f.Data)})
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: files.getUploadURLExternal: %w", err)
	}
	err = a.call(ctx, "upload", func() error {
		return a.api.UploadToURL(ctx, slack.UploadToURLParameters{UploadURL: u.UploadURL, Reader: bytes.NewReader(f.Data), Filename: f.Name})
	})
	if err != nil {
		return fmt.Errorf("slack: upload %q: %w", f.Name, err)
	}
	err = a.call(ctx, "files.completeUploadExternal", func() error {
		_, err := a.api.CompleteUploadExternalContext(ctx, slack.CompleteUploadExternalParameters{
			Files:           []slack.FileSummary{{ID: u.FileID, Title: f.Name}},
			Channel:         channel,
			ThreadTimestamp: threadTS,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("slack: files.completeUploadExternal: %w", err)
	}
	return nil
}

// IsMember reports whether userID is a member of channel, from
// conversations.members (all pages), cached for 30 seconds per channel.
func (a *Adapter) IsMember(ctx context.Context, channel, userID string) (bool, error) {
	a.mu.Lock()
	ml, ok := a.members[channel]
	a.mu.Unlock()
	if ok && a.now().Sub(ml.fetched) < memberTTL {
		return ml.ids[userID], nil
	}
	ids := map[string]bool{}
	cursor := ""
	for {
		var page []string
		var next string
		err := a.call(ctx, "conversations.members", func() error {
			var err error
			page, next, err = a.api.GetUsersInConversationContext(ctx, &slack.GetUsersInConversationParameters{ChannelID: channel, Cursor: cursor, Limit: 200})
			return err
		})
		if err != nil {
			return false, fmt.Errorf("slack: conversations.members: %w", err)
		}
		for _, id := range page {
			ids[id] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	a.mu.Lock()
	a.members[channel] = memberList{ids: ids, fetched: a.now()}
	a.mu.Unlock()
	return ids[userID], nil
}

// userName returns the user's name from a cache filled by users.info. A
// lookup runs on its own goroutine: the caller (Run's dispatch loop) waits
// for it at most wait, then goes on with "" (the id stands in), so that a
// slow or hung users.info never stops event delivery. A failed lookup is
// not retried for nameRetry.
func (a *Adapter) userName(ctx context.Context, id string, wait time.Duration) string {
	if id == "" {
		return ""
	}
	a.mu.Lock()
	e := a.names[id]
	if e != nil {
		select {
		case <-e.done:
			if e.name != "" || time.Now().Sub(e.at) < nameRetry {
				a.mu.Unlock()
				return e.name
			}
			e = nil // retry a failed lookup
		default:
			if time.Now().Sub(e.started) >= wait {
				a.mu.Unlock()
				return "" // an earlier message already waited for this one
			}
		}
	}
	if e == nil {
		if len(a.names) >= namesMax {
			clear(a.names)
		}
		e = &nameEntry{done: make(chan struct{}), started: time.Now()}
		a.names[id] = e
		a.lookups.Go(func() { a.lookupName(ctx, id, e) })
	}
	a.mu.Unlock()
	t := time.NewTimer(wait - time.Now().Sub(e.started))
	defer t.Stop()
	select {
	case <-e.done:
		return e.name
	case <-t.C:
		a.log.Debug("slack: users.info is slow; going on without the name", "user", id)
		return ""
	case <-ctx.Done():
		return ""
	}
}

// lookupName calls users.info for id and completes e.
func (a *Adapter) lookupName(ctx context.Context, id string, e *nameEntry) {
	var u *slack.User
	err := a.call(ctx, "users.info", func() error {
		var err error
		u, err = a.api.GetUserInfoContext(ctx, id)
		return err
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.log.Debug("slack: users.info failed", "user", id, "err", err)
	} else {
		e.name = u.Name
	}
	e.at = time.Now()
	close(e.done)
}

// parseTS converts a Slack ts ("1712345678.000200") to a time.
func parseTS(ts string) time.Time {
	sec, frac, _ := strings.Cut(ts, ".")
	s, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}
	}
	us, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	return time.Unix(s, us*1000).UTC()
}

var _ bot.ChannelResolver = (*Adapter)(nil)

// CheckChannel implements bot.ChannelResolver: it returns an error unless
// the bot user is a member of the channel id (conversations.members), so
// that a channel configured by id but never joined stops the start.
func (a *Adapter) CheckChannel(ctx context.Context, id string) error {
	me, err := a.identity(ctx)
	if err != nil {
		return err
	}
	ok, err := a.IsMember(ctx, id, me.userID)
	if err != nil {
		if se, isSE := errors.AsType[slack.SlackErrorResponse](err); isSE && se.Err == "channel_not_found" {
			return fmt.Errorf("slack: channel %s: not found, or private and the bot is not in it (invite the bot with /invite @thinbot)", id)
		}
		return err
	}
	if !ok {
		return fmt.Errorf("slack: the bot is not a member of channel %s (invite it with /invite @thinbot)", id)
	}
	return nil
}

// ChannelID implements bot.ChannelResolver: name is a channel's name ("#"
// optional) among the public and private channels the bot is a member of
// (users.conversations).
func (a *Adapter) ChannelID(ctx context.Context, name string) (string, error) {
	name = strings.TrimPrefix(strings.TrimSpace(name), "#")
	params := &slack.GetConversationsForUserParameters{Types: []string{"public_channel", "private_channel"}, Limit: 200}
	for page := 0; page < 100; page++ {
		var chs []slack.Channel
		var next string
		err := a.call(ctx, "users.conversations", func() error {
			var err error
			chs, next, err = a.api.GetConversationsForUserContext(ctx, params)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("slack: users.conversations: %w", err)
		}
		for _, c := range chs {
			if c.Name == name {
				return c.ID, nil
			}
		}
		if next == "" {
			break
		}
		params.Cursor = next
	}
	return "", fmt.Errorf("slack: the bot is a member of no channel named %q (invite it with /invite, or give the channel id)", name)
}

var _ bot.ThreadLinker = (*Adapter)(nil)

// ThreadLink implements bot.ThreadLinker: the thread's permalink in the
// workspace auth.test named ("" before it did), as Slack writes them.
func (a *Adapter) ThreadLink(t bot.Thread) string {
	a.mu.Lock()
	base := a.self.url
	a.mu.Unlock()
	if base == "" || t.Root == "" || t.Channel == "" {
		return ""
	}
	return strings.TrimRight(base, "/") + "/archives/" + url.PathEscape(t.Channel) + "/p" + strings.ReplaceAll(t.Root, ".", "")
}
