// Package web is thinbot's web console: a third chat adapter beside
// bot/mattermost and bot/slack, and an audit viewer over the event chain.
//
// # The console
//
// A Server implements bot.Adapter and bot.Streamer. Its threads are
// sessions (keys "web/console/<id>"); a message typed in the page reaches the
// bot as a direct message, so every message addresses the bot and the
// in-thread commands (/stop, /clear, /audit, ...) work as in chat. Posts,
// updates and streamed text reach the page over Server-Sent Events; the
// Approve and Deny buttons of an approval request go through the bot's
// HandleClick, so the approver list, the two-person rule and the expiry are
// the bot's, and the click names the request by the post it was made on
// (the page never sends the request id itself).
//
// # The audit viewer
//
// Under /audit, users with the auditor role read the chain: sessions with
// filters, one session's timeline (paginated by sequence number, so a
// session of 10,000 events costs one page's reads), the approvals, the
// chain's verification status, and a session's JSONL export. The viewer is
// read-only: it has no handler that writes.
//
// # Authentication
//
// With no Auth configured the console serves the local operator, and only
// on a loopback address: New refuses any other listen address, requests must
// come from a loopback address, and the Host header must name a loopback
// host (so a DNS-rebinding page cannot reach it). Otherwise a user is named
// by a trusted reverse proxy (X-Forwarded-User or X-Auth-Request-Email, read
// only from Auth.TrustedProxies) or logs in with a token, and their roles
// (user, approver, auditor) come from Auth.Roles.
//
// Every state-changing request must carry an Origin header naming the
// console itself (cross-origin POSTs are refused), cookies are SameSite
// Strict and HttpOnly, and every page is served with a strict
// Content-Security-Policy: no inline script or style, everything from
// 'self'. The page's assets are embedded in the binary.
package web
