package slack_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/bot/slack"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/storetest"
	"github.com/thinbot/thinbot/tests/fakeslack"
)

// crashAfterPost is the adapter of a daemon that dies between a card's
// post and the commit of its alert event: the card reaches the chat, its
// answer never comes back, and nothing after it happens. A card of a
// group in lost is lost before it reaches the chat.
type crashAfterPost struct {
	*slack.Adapter
	lost string
}

func (c crashAfterPost) Post(ctx context.Context, t bot.Thread, p bot.Post) (string, error) {
	if p.Mark == "" {
		return c.Adapter.Post(ctx, t, p)
	}
	if strings.Contains(p.Text, c.lost) {
		return "", errors.New("connection refused")
	}
	if _, err := c.Adapter.Post(ctx, t, p); err != nil {
		return "", err
	}
	return "", errors.New("connection reset by peer") // killed here
}

type noModel struct{}

func (noModel) Complete(context.Context, agentcore.Request) (agentcore.Response, error) {
	return agentcore.Response{}, errors.New("no model in this test")
}

const cardToken = "card-test-token-0123456789"

// cardLife is one daemon over the store at path: its bot posts through
// ad into channel, and its alert receiver knows what the chain says, read
// as serve reads it at start (agentcore.AlertGroups, agentcore.AlertCards).
func cardLife(t *testing.T, path string, ad bot.Adapter, channel string) (*store.DB, func(group string) int) {
	t.Helper()
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agentcore.New(agentcore.Config{Store: db, Model: noModel{}, Policy: gate.DefaultPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	ch := bot.Channel{Agent: ag, Workspace: t.TempDir()}
	b, err := bot.New(bot.Config{Adapter: ad, Channel: func(id string) (bot.Channel, bool) { return ch, id == channel }})
	if err != nil {
		t.Fatal(err)
	}
	groups, deliveries, err := agentcore.AlertGroups(db, time.Now().Add(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cards, err := agentcore.AlertCards(db)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.AlertHandler(bot.AlertsConfig{Token: []byte(cardToken), Platform: slack.Platform,
		Routes: []bot.AlertRoute{{Name: "ops", Channel: channel}}, Groups: groups, Deliveries: deliveries, Cards: cards})
	if err != nil {
		t.Fatal(err)
	}
	return db, func(group string) int {
		body, _ := json.Marshal(bot.Webhook{Version: "4", GroupKey: "{}:{alertname=\"" + group + "\"}", Status: "firing",
			GroupLabels: map[string]string{"alertname": group}, CommonLabels: map[string]string{"alertname": group, "severity": "critical"},
			Alerts: []bot.WebhookAlert{{Status: "firing", Fingerprint: group, StartsAt: time.Now().Add(-time.Minute),
				Labels: map[string]string{"alertname": group, "severity": "critical"}}}})
		req := httptest.NewRequest(http.MethodPost, "/alerts", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+cardToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
}

func newCardAdapter(t *testing.T, f *fakeslack.Server) *slack.Adapter {
	t.Helper()
	a, err := slack.New(slack.Config{BotToken: fakeslack.BotToken, AppToken: fakeslack.AppToken, SigningSecret: secret,
		Mode: "socket", APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAlertCardAdoptedAfterCrash: a daemon dies after posting each card
// of an alert storm and before committing the alert event that names it
// (one card is lost on its way instead). The next daemon over the same
// store gets Alertmanager's retries: it finds each card by the mark its
// message metadata carries (FindPost: conversations.history with
// include_all_metadata) and adopts it, and posts anew only the card that
// never arrived: one card per group, each the thread the chain names.
func TestAlertCardAdoptedAfterCrash(t *testing.T) {
	f := fakeslack.New(t)
	f.AddUser("U1", "alice")
	f.AddChannel("C1", "ops", "U1")
	f.UserMessage("U1", "C1", "", "before the storm")
	path := filepath.Join(t.TempDir(), "events.db")
	groups := []string{"DiskFull", "HighLoad", "Lost", "Unreachable"}
	db, deliver := cardLife(t, path, crashAfterPost{Adapter: newCardAdapter(t, f), lost: "Lost"}, "C1")
	for _, g := range groups {
		if code := deliver(g); code != http.StatusServiceUnavailable {
			t.Fatalf("%s: the dying daemon answered %d, want 503", g, code)
		}
	}
	cards, err := agentcore.AlertCards(db)
	if err != nil || len(cards) != len(groups) {
		t.Fatalf("alert_card events: %d, %v; want one per group (%d)", len(cards), err, len(groups))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, deliver = cardLife(t, path, newCardAdapter(t, f), "C1")
	storetest.CloseChecked(t, db, agentcore.Decode)
	for _, g := range append(groups, "NewAfterRestart") {
		if code := deliver(g); code != http.StatusOK {
			t.Fatalf("%s: the retry answered %d, want 200", g, code)
		}
	}
	recorded, _, err := agentcore.AlertGroups(db, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range append(groups, "NewAfterRestart") {
		var ids []string
		for _, m := range f.Messages("C1") {
			if m.User == fakeslack.BotUserID && m.ThreadTS == "" && strings.Contains(m.Text, g) {
				ids = append(ids, m.TS)
			}
		}
		rec := recorded["{}:{alertname=\""+g+"\"}"]
		if len(ids) != 1 || rec.PostID != ids[0] {
			t.Errorf("%s: cards %v, the chain's thread is on %q; want one card, the thread's", g, ids, rec.PostID)
		}
	}
	// An adopted card was redrawn for the retry, and chat.update kept its
	// metadata.
	for _, m := range f.Messages("C1") {
		if strings.Contains(m.Text, "DiskFull") && (!m.Edited || !strings.Contains(string(m.Metadata), `"thinbot_mark"`)) {
			t.Errorf("the adopted card: edited %v, metadata %s", m.Edited, m.Metadata)
		}
	}
}
