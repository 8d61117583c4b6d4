// Package bot is the chat-agnostic daemon: it routes chat threads to agent
// sessions, queues runs, turns confirm verdicts into approval buttons,
// handles in-thread commands and renders progress. Platform code lives in
// bot/mattermost, bot/slack and bot/web (the web console), which implement
// Adapter (and optionally Streamer); bot never imports them and never touches the store (agentcore
// records everything, including the notes bot asks it to keep).
//
// # Threads and runs
//
// A thread (platform, channel, root post) is one session. A mention or a
// direct message starts one; later replies in the thread continue it. One
// run per thread at a time: messages that arrive meanwhile queue in order.
// A global limit caps concurrent runs; waiting threads are told. /stop acts
// at once, ahead of the queue, and cancels the run (its command's process
// group is killed); the session stays.
//
// # Approvals
//
// A confirm verdict becomes a post with Approve and Deny buttons carrying the
// request id. Only the channel's approvers (or, if configured, any channel
// member) may decide, never the requester under the two-person rule;
// refusals go to the clicker alone and are recorded. Taking a request out of
// the pending set is what makes a decision final, so a second click cannot
// decide twice. The post shows the decision once it is committed. An
// unanswered request expires as a deny; after a restart, requests left
// pending are expired (see Recover).
package bot
