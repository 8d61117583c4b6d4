package bot

import (
	"context"
	"errors"
	"time"
)

// Thread identifies one chat thread; a thread is one agent session.
type Thread struct {
	// Platform is "mattermost", "slack" or "web".
	Platform string
	// Channel is the platform's channel id.
	Channel string
	// Root is the id of the thread's root post (Slack: thread_ts). When a
	// top-level post mentions the bot, Root is that post's own id.
	Root string
}

// Key is the session key of the thread: "platform/channel/root".
func (t Thread) Key() string { return t.Platform + "/" + t.Channel + "/" + t.Root }

// channelKey is "platform/channel": what the threads of one channel share.
func (t Thread) channelKey() string { return t.Platform + "/" + t.Channel }

// User is a chat user as the platform reports them.
type User struct {
	ID   string
	Name string // user name without "@"; may be empty if unknown
}

// Message is one incoming chat message.
type Message struct {
	Thread Thread
	// ID is the platform's message id (Mattermost post id, Slack ts); the bot
	// deduplicates on it.
	ID   string
	User User
	// Text is the message text with the bot's own mention removed and
	// surrounding space trimmed.
	Text string
	// Mentioned reports whether the message mentioned the bot.
	Mentioned bool
	// Direct reports whether the message is in a direct-message channel with the bot.
	Direct bool
	// FromBot reports whether the author is a bot account (never the bot
	// itself: adapters drop their own posts).
	FromBot bool
	Time    time.Time
}

// Button is an interactive button on a post.
type Button struct {
	// ID is the action id reported back in a Click ("approve", "deny").
	ID    string
	Label string
	// Style is "primary", "danger" or "" (default).
	Style string
}

// File is an attachment uploaded with a post.
type File struct {
	Name string
	Data []byte
}

// Post is an outgoing message. Text is Markdown; adapters convert it to the
// platform's dialect and split or truncate it to the platform's limits.
type Post struct {
	Text string
	// Buttons, if any, are shown under the text; a click reaches
	// Handler.HandleClick with Value.
	Buttons []Button
	// Value is carried by every button click (the approval request id).
	// Adapters authenticate it (HMAC) so forged callbacks are refused.
	Value string
	// Expires, if set, is when the request the buttons decide expires
	// (the web console's inbox shows it).
	Expires time.Time
	// Requester, if set, is who asked for what the buttons decide (the
	// web console's inbox shows it and hides Approve from them).
	Requester User
	// File, if set, is uploaded into the thread with this post.
	File *File
	// Mentions, if set, are the user ids the post notifies: the adapter
	// writes each in front of the text in its platform's form (Mattermost
	// @username, Slack <@ID>, the console @name). Update ignores them.
	Mentions []string
	// Mark, if set, is carried with a new post where the platform keeps
	// it unseen (Mattermost post props, Slack message metadata), so that
	// a PostFinder finds the post by it. Update ignores it (and may drop
	// it: Mattermost replaces a post's props whole).
	Mark string
}

// Click is a press of a post's button.
type Click struct {
	Thread   Thread
	PostID   string
	ActionID string // Button.ID
	Value    string // Post.Value, authenticated by the adapter
	User     User
}

// ClickResult is the bot's answer to a Click.
type ClickResult struct {
	// Ephemeral, if set, is shown only to the clicker (refusals).
	Ephemeral string
	// Update, if set, replaces the clicked post (its buttons removed unless
	// Update has some).
	Update *Post
}

// Handler receives what an adapter reads from the platform.
type Handler interface {
	// HandleMessage is called once per incoming message, in order of arrival.
	// It never waits for a run (runs are queued), but it does some work
	// inline before it returns: a message that waits behind a running turn
	// is recorded in the chain first (one durable commit), and short
	// replies are posted from it (a refusal, the answer to /help, /status,
	// /skills or /audit, the "Queued" notice; each chat call is bounded by
	// 30 s). Adapters that call it from their read loop delay the next
	// message by that much.
	HandleMessage(ctx context.Context, m Message)
	// HandleClick is called for each button press and returns what the
	// platform should show. It returns within a few seconds (platforms time
	// interactive callbacks out).
	HandleClick(ctx context.Context, c Click) ClickResult
}

// Adapter connects the bot to one chat platform. Implementations live in
// bot/mattermost, bot/slack and bot/web. All methods may be called concurrently.
type Adapter interface {
	// Run connects, calls h for incoming messages and clicks until ctx is
	// done, reconnecting with backoff by itself. It returns ctx.Err() on
	// shutdown, or an error only when it cannot work at all (bad token).
	Run(ctx context.Context, h Handler) error
	// Post sends p into the thread t and returns the new post's id.
	Post(ctx context.Context, t Thread, p Post) (string, error)
	// Update replaces the text (and buttons) of a post the bot made. A
	// File in p is ignored.
	Update(ctx context.Context, t Thread, postID string, p Post) error
	// IsMember reports whether user is a member of channel (for the
	// "any member of this channel" approver rule).
	IsMember(ctx context.Context, channel, userID string) (bool, error)
}

// ErrStreamingUnsupported is returned (wrapped) by a Streamer that has
// learnt that its workspace cannot stream messages; the bot then renders
// as if the adapter were no Streamer, without logging each run.
var ErrStreamingUnsupported = errors.New("streaming is not available")

// Streamer is implemented by adapters that can stream text into a new
// message (Slack's chat.startStream, chat.appendStream, chat.stopStream).
// The bot uses it, when the adapter has it, to show the model's answer as it
// is written; any error makes the bot fall back to Post and Update for the
// rest of the run. The id is a post id: Update works on it once the stream
// is stopped. All methods may be called concurrently for different streams;
// one stream's calls come from one goroutine, in order.
type Streamer interface {
	// StartStream starts an empty streamed message in the thread t,
	// addressed to the user who last wrote in t, and returns its id.
	StartStream(ctx context.Context, t Thread) (id string, err error)
	// AppendStream appends Markdown to the streamed message id.
	AppendStream(ctx context.Context, t Thread, id, markdown string) error
	// StopStream appends markdown (which may be "") and ends the stream;
	// the message then stays as it was streamed.
	StopStream(ctx context.Context, t Thread, id, markdown string) error
}

// ChannelResolver is implemented by adapters that can find the id of a
// channel the bot is a member of by its name, so that a config file may name
// channels ("ops", "#ops") instead of giving ids, and check at start that
// the bot is a member of a channel given by id.
type ChannelResolver interface {
	// ChannelID returns the id of the channel named name; an error says
	// why there is none (not a member, ambiguous, API failure).
	ChannelID(ctx context.Context, name string) (string, error)
	// CheckChannel returns an error unless the bot is a member of the
	// channel id (it would never see the channel's messages otherwise).
	CheckChannel(ctx context.Context, id string) error
}

// PostFinder is an optional Adapter interface for a platform that keeps a
// post's Post.Mark and can list a channel's recent posts: the alert
// receiver commits a new group's card (agentcore.EvAlertCard, with a
// random mark) before it posts it, and when the group's alert event that
// names the card was never committed (the daemon died, or the chat's
// answer to the post was lost), the group's next delivery asks FindPost
// for the card and adopts it instead of posting a second card. An adapter
// without it (the web console, whose threads are rebuilt from the chain
// alone, so that a card the chain does not name is gone after a restart)
// gets a new card in that case.
type PostFinder interface {
	// FindPost returns the id of the bot's own top-level post in channel
	// that carries mark and was posted at or after since (which allows for
	// the clocks of thinbot and the chat server to differ by a little),
	// or "" when there is none. An error means that the channel could not
	// be searched.
	FindPost(ctx context.Context, channel, mark string, since time.Time) (string, error)
}

// HelpWriter is an optional Adapter interface for an adapter whose users
// reach thinbot differently (the web console has no mentions and no chat
// client slash commands): Help returns the whole /help text around
// commands, the list of in-thread commands (HelpCommands).
type HelpWriter interface {
	Help(commands string) string
}

// StateShower is an optional Adapter interface for a front end that shows a
// thread's state beside its title (the web console's badge). The bot calls
// it as the state changes; implementations must not block. Mattermost and
// Slack have no place for such a badge on a thread a user started (the bot
// may edit only its own posts), so their adapters do not implement it: an
// alert thread's root post there is the card, which the bot edits from
// FIRING to RESOLVED, and the run's status post says what runs and what
// waits for approval.
type StateShower interface {
	// RunState says that a run started (running) or ended in t.
	RunState(t Thread, running bool)
	// AlertState says that the alert group whose thread t is is now
	// status ("firing" or "resolved").
	AlertState(t Thread, status string)
}
