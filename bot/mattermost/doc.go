// Package mattermost connects the bot to a Mattermost server. It implements
// bot.Adapter over the REST API v4 and the WebSocket event stream with
// Mattermost's own client, github.com/mattermost/mattermost/server/public/model,
// and it serves the integration URL that Mattermost calls when someone
// presses a button on one of the bot's posts.
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
// # What comes from server/public
//
// The REST calls are model.Client4's (GetMe, GetUser, GetTeamsForUser,
// GetChannelsForTeamForUser, GetChannelsForUserWithLastDeleteAt,
// GetChannelMember, GetPostsSince, CreatePost, PatchPost, UploadFile),
// and what travels is the model's types: Post, PostPatch, PostList, User,
// Team, Channel, AppError, PostAction and PostActionIntegration in a
// post's props, PostActionIntegrationRequest and PostActionIntegrationResponse
// at the integration URL, WebSocketEvent and WebSocketResponse on the
// socket. Two things are this package's own: a button attachment is a
// small struct holding []*model.PostAction (model.MessageAttachment has no
// omitempty, so each post would carry fifteen empty fields), and the
// failure type, *APIError, which carries the HTTP status and the
// AppError's id, message and request id, never the token.
//
// Client4 trusts the server: it follows redirects with the token, reads
// every answer whole, and puts a whole error body into its error. So the
// http.Client that New gives it carries the protections:
//
//   - no redirect is followed (net/http would send the Authorization
//     header to another port or to plain http on the same host name); a
//     3xx is an *APIError naming the target;
//   - limitTransport caps each answer by what it can hold: 4 MiB for one
//     user, post or upload, 32 MiB for a list of teams or channels, 256 MiB
//     for a catch-up page of 1000 posts, 64 KiB for an error body, which it
//     reads at once, removing the token should the server have echoed it
//     (Client4's error text is dropped; a body that is not an AppError
//     reaches the *APIError shortened to 200 bytes);
//   - retryTransport retries a 429 at most three times after the delay of
//     Retry-After or X-Ratelimit-Reset (at most a minute), replaying the
//     body;
//   - New refuses a server URL with user:password@, a ?query or a
//     #fragment, and never echoes the URL whole.
//
// The token is sent in the Authorization header (Client4 writes the scheme
// "BEARER", which Mattermost reads case-insensitively) and in the
// WebSocket's authentication challenge, never in a URL.
//
// # The WebSocket
//
// Events come through model.WebSocketClient, made safe as follows. Its
// dial takes no context: the Dialer given to it closes the TCP connection
// when Run's context (or the session) ends. Before its reader starts
// (Listen), the adapter sets on its connection the 8 MiB frame cap (the
// client sets none; a larger frame ends the connection and the
// reconnect's catch-up reads its post over REST), a read deadline that
// every frame, ping and pong extends, and pings of its own every 30 s, so
// a dead connection is noticed within 90 s (the client only reports a
// missing server ping on a channel); a ping that cannot be written within
// 10 s closes the connection, since the client's writer has no write
// deadline and its reader waits on the writer for each pong. WebSocketClient.Close is never
// called: a ping read while it runs makes the client send on a closed
// channel, a panic; closing the connection ends the reader, whose own
// cleanup stops the client's goroutines, and the adapter drains the
// client's channels until then. The authentication is the client's
// challenge (sequence 1), answered by OK or the hello event; Mattermost
// closes the connection on a bad token, so a failed challenge asks GET
// /users/me again, and a 401 there (a token revoked while the bot runs)
// stops Run instead of reconnecting forever. A frame that is not JSON is
// dropped by the client with a line on standard error (its mlog default
// logger).
//
// Each frame is decoded once by the client (model.WebSocketEventFromJSON);
// the post inside a "posted" event (a JSON document in a string) is
// decoded once more, into a model.Post.
//
// # Cost
//
// server/public brings about 100 packages into the binary (go-plugin,
// gRPC, protobuf and semver under it) whose package inits every thinbot
// process pays at start, terminal commands and sandbox helpers included;
// the card names the package, and a daemon's start-up is not a cost
// anyone feels. ARCHITECTURE.md has the measured figures.
package mattermost
