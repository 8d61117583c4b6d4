// Package mattermost connects the bot to a Mattermost server. It implements
// bot.Adapter over the REST API v4 (github.com/mattermost/mattermost/server/public/model)
// and the WebSocket event stream, and it serves the integration URL that
// Mattermost calls when someone presses a button on one of the bot's posts.
//
// # Events
//
// Run logs in with a bot access token (GET /api/v4/users/me), opens
// /api/v4/websocket, answers the authentication challenge and delivers
// "posted" events as bot.Message values, one at a time. The bot's own posts
// and system posts are never delivered; posts by other bots and webhooks are
// delivered with FromBot set. When the connection drops, Run reconnects with
// exponential backoff and jitter and then catches up on the posts created
// while it was away (GET /api/v4/channels/{id}/posts?since=), in creation
// order. Every delivered post id goes through a bounded deduplication set, so
// a post seen both live and in a catch-up is delivered once.
//
// # Buttons
//
// Buttons become interactive message actions whose integration URL is
// Config.CallbackURL. Mattermost does not sign its calls to that URL, so each
// action's context carries an HMAC-SHA256 (keyed with Config.ActionSecret)
// over the channel, thread root, value and action id; CallbackHandler refuses
// any call whose MAC does not verify. The clicker's identity is the user_id
// Mattermost puts in the request, so the listener must only be reachable from
// the Mattermost server. Refusals go back as the integration response's
// ephemeral_text, which needs no extra permission.
//
// # Compatibility
//
// Only API v4 calls that Mattermost 6.0 already has are used. Requests that
// receive 429 Too Many Requests are retried a bounded number of times after
// the delay given by Retry-After or X-Ratelimit-Reset.
//
// # Long messages
//
// Mattermost refuses posts longer than 16383 runes. Post truncates such a
// text, says so at the end of the post, and attaches the full text as a
// Markdown file to the same post, so a thread keeps one post per answer.
// Update truncates with the same notice but cannot attach a file.
//
// # Start-up cost
//
// The Mattermost client (server/public/model) brings 99 packages into
// every thinbot process that this one alone needs, go-plugin and gRPC
// among them; their init functions cost about 3.7 ms of the ~9 ms that
// `thinbot version` takes (GODEBUG=inittrace=1; prometheus with protobuf
// adds 1.2 ms), and the sandbox helpers, the same binary re-executed, pay
// it too. Only a client of our own for the ten API v4 calls and the
// WebSocket used here would remove it.
package mattermost
