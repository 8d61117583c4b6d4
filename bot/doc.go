// Package bot is the chat-agnostic daemon: it routes chat threads to agent
// sessions, queues runs, turns confirm verdicts into approval buttons,
// handles in-thread commands and renders progress. Platform code lives in
// bot/mattermost and bot/slack, which implement Adapter.
package bot
