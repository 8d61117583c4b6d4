package mattermost

import (
	"encoding/json"
	"net/http"

	"github.com/mattermost/mattermost/server/public/model"

	"github.com/thinbot/thinbot/bot"
)

// maxCallbackBody caps the JSON Mattermost posts to the integration URL.
const maxCallbackBody = 64 << 10

// CallbackHandler returns the handler for Config.CallbackURL; cmd mounts it
// at that URL's path on thinbot's HTTP listener. It verifies each button
// context's MAC, resolves the clicker, calls the Handler given to Run and
// answers with Mattermost's integration response. Forged or malformed
// calls get 403 (and a log line); calls while Run is not active get 503.
// The handler may be called concurrently.
func (a *Adapter) CallbackHandler() http.Handler {
	return http.HandlerFunc(a.serveCallback)
}

func (a *Adapter) serveCallback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// Mattermost's PostActionIntegrationRequest; user_name exists on
	// newer servers only.
	var req model.PostActionIntegrationRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCallbackBody))
	if err := dec.Decode(&req); err != nil {
		a.log.Warn("mattermost callback refused: bad body", "remote", r.RemoteAddr, "err", err)
		writeAction(w, http.StatusBadRequest, model.PostActionIntegrationResponse{EphemeralText: "This button request could not be read."})
		return
	}
	str := func(k string) string { s, _ := req.Context[k].(string); return s }
	value, action, root, mac := str(ctxValue), str(ctxAction), str(ctxRoot), str(ctxMAC)
	if req.UserId == "" || req.ChannelId == "" || req.PostId == "" || mac == "" ||
		!a.validMAC(req.ChannelId, root, value, action, mac) {
		a.log.Warn("mattermost callback refused: bad signature", "remote", r.RemoteAddr,
			"user_id", req.UserId, "channel_id", req.ChannelId, "post_id", req.PostId)
		writeAction(w, http.StatusForbidden, model.PostActionIntegrationResponse{EphemeralText: "This button is not valid: it was not made by this bot."})
		return
	}
	box := a.handler.Load()
	if box == nil {
		writeAction(w, http.StatusServiceUnavailable, model.PostActionIntegrationResponse{EphemeralText: "The bot is not running; try again in a moment."})
		return
	}
	name := req.UserName
	if name == "" {
		name = a.userName(r.Context(), req.UserId)
	} else {
		a.rememberUser(req.UserId, name)
	}
	thread := bot.Thread{Platform: Platform, Channel: req.ChannelId, Root: root}
	if thread.Root == "" {
		thread.Root = req.PostId // the button post started the thread
	}
	res := box.h.HandleClick(r.Context(), bot.Click{
		Thread:   thread,
		PostID:   req.PostId,
		ActionID: action,
		Value:    value,
		User:     bot.User{ID: req.UserId, Name: name},
	})
	out := model.PostActionIntegrationResponse{EphemeralText: res.Ephemeral, SkipSlackParsing: true}
	if res.Update != nil {
		text, _ := fitText(res.Update.Text, updateTruncatedNotice)
		// Mattermost replaces the clicked post's message and props with
		// these (UpdatePost); the other fields are not read.
		out.Update = &model.Post{Message: text}
		out.Update.SetProps(a.props(req.ChannelId, root, *res.Update))
	}
	writeAction(w, http.StatusOK, out)
}

func writeAction(w http.ResponseWriter, status int, res model.PostActionIntegrationResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(res)
}
