// Package mattermost connects the bot to a Mattermost server. It implements
// bot.Adapter over the REST API v4 and the WebSocket event stream
// (github.com/gorilla/websocket), and it serves the integration URL that
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
// # The API client
//
// The REST client is this package's own (api.go, net/http and
// encoding/json): the ten API v4 calls the adapter makes and only the
// fields it reads, rather than Mattermost's server/public/model, whose
// package inits (with go-plugin, gRPC, protobuf and semver under it) cost
// about 3 ms of every thinbot start, terminal commands and sandbox helpers
// included, and whose ~100 packages a security review had to cover. It
// sends the token only in the Authorization header (Bearer) and the
// WebSocket's authentication challenge, never in a URL; a failed
// call is an *APIError with the HTTP status and the id, message and
// request id of Mattermost's AppError body, or the start of a body that is
// not one, with the token removed should the server echo it.
//
// Each WebSocket frame is decoded once, the data of a "posted" event with
// it; the post inside (a JSON document in a string) is decoded once more.
// A frame may be at most 8 MiB (a larger one ends the connection, and the
// reconnect's catch-up reads its post over the REST API). A REST answer may
// be at most 4 MiB (one user, post or upload), 32 MiB (a list of teams or
// channels) or 256 MiB (a catch-up page of 1000 posts); an error 64 KiB.
package mattermost
