package mattermost

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mattermost/mattermost/server/public/model"

	"github.com/thinbot/thinbot/bot"
)

// Post sends p into thread t and returns the new post's id. A text longer
// than Mattermost's limit is truncated and attached in full as a file; a
// File in p is uploaded and attached to the same post.
func (a *Adapter) Post(ctx context.Context, t bot.Thread, p bot.Post) (string, error) {
	if t.Channel == "" {
		return "", errors.New("mattermost: post: thread has no channel")
	}
	text, cut := fitText(a.mentions(ctx, p.Mentions)+p.Text, truncatedNotice)
	var fileIDs model.StringArray
	upload := func(f bot.File) error {
		name := f.Name
		if name == "" {
			name = "file.txt"
		}
		ids, err := a.client.uploadFile(ctx, t.Channel, name, f.Data)
		if err != nil {
			return err
		}
		fileIDs = append(fileIDs, ids...)
		return nil
	}
	if p.File != nil {
		if err := upload(*p.File); err != nil {
			return "", err
		}
	}
	if cut {
		if err := upload(bot.File{Name: fullTextName, Data: []byte(p.Text)}); err != nil {
			return "", err
		}
	}
	np := &model.Post{ChannelId: t.Channel, RootId: t.Root, Message: text, FileIds: fileIDs}
	props := model.StringInterface{}
	if len(p.Buttons) > 0 {
		props = a.props(t.Channel, t.Root, p)
	}
	if p.Mark != "" {
		props[propMark] = p.Mark
	}
	if len(props) > 0 {
		np.SetProps(props)
	}
	created, err := a.client.createPost(ctx, np)
	if err != nil {
		return "", err
	}
	return created.Id, nil
}

// propMark is the post prop that carries a bot.Post's Mark: props that
// Mattermost does not know are kept with the post and never shown.
const propMark = "thinbot_mark"

var _ bot.PostFinder = (*Adapter)(nil)

// FindPost implements bot.PostFinder: the bot's own root posts of channel
// changed after since (GET /channels/{id}/posts?since=, collapsed threads,
// so that replies do not count against the server's page of 1000) are
// searched for the one whose props carry mark. A channel with more root
// posts than that since since is searched only in the newest 1000 (the
// miss is logged): the card is then posted again.
func (a *Adapter) FindPost(ctx context.Context, channel, mark string, since time.Time) (string, error) {
	if channel == "" || mark == "" {
		return "", errors.New("mattermost: find post: no channel or mark")
	}
	botID, _, err := a.me(ctx)
	if err != nil {
		return "", err
	}
	from := since.UnixMilli()
	list, err := a.client.getRootPostsSince(ctx, channel, from)
	if err != nil {
		return "", err
	}
	for _, p := range list.Posts {
		if p == nil || p.UserId != botID || p.RootId != "" || p.DeleteAt != 0 || p.CreateAt < from {
			continue
		}
		if m, _ := p.GetProp(propMark).(string); m == mark {
			return p.Id, nil
		}
	}
	if len(list.Posts) >= postsSinceLimit {
		a.log.Warn("mattermost: a post looked for by its mark may be older than the server's page of posts", "channel_id", channel, "posts", len(list.Posts))
	}
	return "", nil
}

// mentions writes user ids as Mattermost mentions ("@alice @bob "); an id
// whose name cannot be looked up is left out (the lookup logs why).
func (a *Adapter) mentions(ctx context.Context, ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		if name := a.userName(ctx, id); name != "" {
			b.WriteString("@" + name + " ")
		}
	}
	return b.String()
}

// Update replaces the text and buttons of the bot's post postID in t. The
// buttons' clicks keep reporting t.Root as their thread root.
func (a *Adapter) Update(ctx context.Context, t bot.Thread, postID string, p bot.Post) error {
	text, _ := fitText(p.Text, updateTruncatedNotice)
	props := a.props(t.Channel, t.Root, p)
	return a.client.patchPost(ctx, postID, &model.PostPatch{Message: &text, Props: &props})
}

// IsMember reports whether userID is a member of channel. A user or channel
// the server does not know is not a member.
func (a *Adapter) IsMember(ctx context.Context, channel, userID string) (bool, error) {
	if err := a.client.getChannelMember(ctx, channel, userID); err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// attachment is the part of a message attachment (model.MessageAttachment)
// thinbot sets: the model type has no omitempty, so a post would carry
// fifteen empty fields for every attachment.
type attachment struct {
	Fallback string              `json:"fallback,omitempty"`
	Text     string              `json:"text,omitempty"`
	Actions  []*model.PostAction `json:"actions"`
}

// props builds a post's props: one attachment holding p's buttons, or an
// empty attachment list (which removes earlier buttons) when p has none.
func (a *Adapter) props(channel, root string, p bot.Post) model.StringInterface {
	if len(p.Buttons) == 0 {
		return model.StringInterface{"attachments": []attachment{}}
	}
	actions := make([]*model.PostAction, 0, len(p.Buttons))
	used := make(map[string]bool)
	for i, b := range p.Buttons {
		style := b.Style
		if style == "" {
			style = "default"
		}
		actions = append(actions, &model.PostAction{
			Id:    actionID(b.ID, i, used),
			Type:  model.PostActionTypeButton,
			Name:  b.Label,
			Style: style,
			Integration: &model.PostActionIntegration{
				URL: a.cfg.CallbackURL,
				Context: map[string]any{
					ctxValue:  p.Value,
					ctxAction: b.ID,
					ctxRoot:   root,
					ctxMAC:    a.mac(channel, root, p.Value, b.ID),
				},
			},
		})
	}
	return model.StringInterface{"attachments": []attachment{{Fallback: "buttons", Actions: actions}}}
}

// actionID derives Mattermost's action id from a button id. Mattermost
// mishandles ids with characters other than letters and digits in some
// versions, so others are dropped; the real button id travels in the
// authenticated context.
func actionID(id string, i int, used map[string]bool) string {
	out := make([]byte, 0, len(id))
	for j := 0; j < len(id); j++ {
		c := id[j]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			out = append(out, c)
		}
	}
	s := string(out)
	if s == "" || used[s] {
		s = "button" + strconv.Itoa(i)
	}
	used[s] = true
	return s
}

// Keys of a button's integration context.
const (
	ctxValue  = "value"
	ctxAction = "action"
	ctxRoot   = "root"
	ctxMAC    = "mac"
)

// mac authenticates a button: HMAC-SHA256 over a version tag and the
// channel, thread root, value and action id, each length-prefixed so no
// two tuples share an encoding.
func (a *Adapter) mac(channel, root, value, action string) string {
	m := hmac.New(sha256.New, a.cfg.ActionSecret)
	m.Write([]byte("thinbot-mattermost-action-v1"))
	for _, s := range []string{channel, root, value, action} {
		fmt.Fprintf(m, "\x00%d:%s", len(s), s)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// validMAC checks mac in constant time.
func (a *Adapter) validMAC(channel, root, value, action, mac string) bool {
	want := a.mac(channel, root, value, action)
	return hmac.Equal([]byte(want), []byte(mac))
}
