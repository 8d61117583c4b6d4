package main

import (
	"strings"
	"testing"

	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/mattermost"
	"github.com/thinbot/thinbot/tests/fakemattermost"
)

func TestResolveChannelNames(t *testing.T) {
	mm := fakemattermost.New(t)
	ops := mm.AddChannel("ops", mm.Bot.ID)
	mm.AddChannel("hidden") // the bot is not a member
	a, err := mattermost.New(mattermost.Config{URL: mm.URL, Token: mm.Bot.Token,
		CallbackURL: "http://127.0.0.1:1/cb", ActionSecret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	channels := map[string]bot.Channel{}
	if err := resolveChannels(t.Context(), a, []namedChannel{{name: "#ops", ch: bot.Channel{Workspace: "/srv/ops"}}}, channels); err != nil {
		t.Fatal(err)
	}
	if channels[ops].Workspace != "/srv/ops" {
		t.Errorf("channels = %+v, want %s configured", channels, ops)
	}
	err = resolveChannels(t.Context(), a, []namedChannel{{name: "hidden"}}, map[string]bot.Channel{})
	if err == nil || !strings.Contains(err.Error(), `channel "hidden"`) {
		t.Errorf("an unresolvable name = %v", err)
	}
	err = resolveChannels(t.Context(), a, []namedChannel{{name: "ops"}}, map[string]bot.Channel{ops: {}})
	if err == nil || !strings.Contains(err.Error(), "also configured by its id") {
		t.Errorf("a channel configured twice = %v", err)
	}
}
