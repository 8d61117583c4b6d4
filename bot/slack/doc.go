// Package slack is thinbot's Slack adapter: it implements bot.Adapter over
// github.com/slack-go/slack, the only package of thinbot that imports it.
//
// # Modes
//
// In Socket Mode (the default) the adapter opens a WebSocket with an
// app-level token (xapp-…) through apps.connections.open, acknowledges every
// envelope as soon as it is read, and reconnects with backoff when the
// socket drops or Slack asks it to ("disconnect"). No public URL is needed.
// In HTTP mode the adapter serves the Events API and interactivity endpoints
// (Adapter.HTTPHandler) and refuses any request whose v0 signature does not
// match the signing secret or whose timestamp is more than five minutes off.
//
// # Behaviour
//
// Events are deduplicated by event_id and by message ts, so a redelivered
// envelope, an HTTP retry, or the app_mention and message events of one post
// reach the bot once. The bot's own posts, edits and deletions are dropped.
// Button values carry an HMAC bound to the channel and action, so a forged
// or moved value is refused before it reaches the bot. Every Web API call
// honours 429 Retry-After a bounded number of times.
//
// # Streaming
//
// The adapter is a bot.Streamer: answers stream into the thread with
// chat.startStream, chat.appendStream and chat.stopStream, as Markdown
// (markdown_text, which Slack renders; no mrkdwn conversion). Outside direct
// messages Slack requires a recipient, so the adapter remembers the last
// human writer of each thread and their team. A workspace that refuses the
// methods (not_allowed, unknown_method, missing_scope, not_enabled) turns
// streaming off for the adapter's lifetime, and the bot falls back to
// chat.postMessage and throttled chat.update.
package slack
