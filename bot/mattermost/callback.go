package mattermost

import (
	"encoding/json"
	"net/http"

	"github.com/thinbot/thinbot/bot"
)

// maxCallbackBody caps the JSON Mattermost posts to the integration URL.
const maxCallbackBody = 64 << 10

// actionRequest is what Mattermost posts to a button's integration URL
// (Mattermost's PostActionIntegrationRequest). user_name exists on newer
// servers only.
type actionRequest struct {
	UserID    string         `json:"user_id"`
	UserName  string         `json:"user_name"`
	ChannelID string         `json:"channel_id"`
	TeamID    string         `json:"team_id"`
	PostID    string         `json:"post_id"`
	TriggerID string         `json:"trigger_id"`
	Type      string         `json:"type"`
	Context   map[string]any `json:"context"`
}

// actionResponse is the integration response
// (Mattermost's PostActionIntegrationResponse): Update replaces the clicked post's
// message and props; EphemeralText is shown to the clicker only.
type actionResponse struct {
	Update           *updatedPost `json:"update,omitempty"`
	EphemeralText    string       `json:"ephemeral_text,omitempty"`
	SkipSlackParsing bool         `json:"skip_slack_parsing,omitempty"`
}

type updatedPost struct {
	Message string         `json:"message"`
	Props   map[string]any `json:"props"`
}

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
	var req actionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCallbackBody))
	if err := dec.Decode(&req); err != nil {
		a.log.Warn("mattermost callback refused: bad body", "remote", r.RemoteAddr, "err", err)
		writeAction(w, http.StatusBadRequest, actionResponse{EphemeralText: "This button request could not be read."})
		return
	}
	str := func(k string) string { s, _ := req.Context[k].(string); return s }
	value, action, root, mac := str(ctxValue), str(ctxAction), str(ctxRoot), str(ctxMAC)
	if req.UserID == "" || req.ChannelID == "" || req.PostID == "" || mac == "" ||
		!a.validMAC(req.ChannelID, root, value, action, mac) {
		a.log.Warn("mattermost callback refused: bad signature", "remote", r.RemoteAddr,
			"user_id", req.UserID, "channel_id", req.ChannelID, "post_id", req.PostID)
		writeAction(w, http.StatusForbidden, actionResponse{EphemeralText: "This button is not valid: it was not made by this bot."})
		return
	}
	box := a.handler.Load()
	if box == nil {
		writeAction(w, http.StatusServiceUnavailable, actionResponse{EphemeralText: "The bot is not running; try again in a moment."})
		return
	}
	name := req.UserName
	if name == "" {
		name = a.userName(r.Context(), req.UserID)
	} else {
		a.rememberUser(req.UserID, name)
	}
	thread := bot.Thread{Platform: Platform, Channel: req.ChannelID, Root: root}
	if thread.Root == "" {
		thread.Root = req.PostID // the button post started the thread
	}
	res := box.h.HandleClick(r.Context(), bot.Click{
		Thread:   thread,
		PostID:   req.PostID,
		ActionID: action,
		Value:    value,
		User:     bot.User{ID: req.UserID, Name: name},
	})
	out := actionResponse{EphemeralText: res.Ephemeral, SkipSlackParsing: true}
	if res.Update != nil {
		text, _ := fitText(res.Update.Text, updateTruncatedNotice)
		out.Update = &updatedPost{Message: text, Props: a.props(req.ChannelID, root, *res.Update)}
	}
	writeAction(w, http.StatusOK, out)
}

func writeAction(w http.ResponseWriter, status int, res actionResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(res)
}
