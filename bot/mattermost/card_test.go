package mattermost

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/storetest"
)

// crashAfterPost is the adapter of a daemon that dies between a card's
// post and the commit of its alert event: the card reaches the chat, its
// answer never comes back, and nothing after it happens. A card of a
// group in lost is lost before it reaches the chat.
type crashAfterPost struct {
	*Adapter
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

// failFirstList fails the first listing of a channel's posts, as a
// network that drops a request does.
type failFirstList struct {
	base   http.RoundTripper
	failed atomic.Bool
}

func (f *failFirstList) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/posts") && f.failed.CompareAndSwap(false, true) {
		return nil, errors.New("connection reset by peer")
	}
	return f.base.RoundTrip(r)
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
	h, err := b.AlertHandler(bot.AlertsConfig{Token: []byte(cardToken), Platform: Platform,
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

// TestAlertCardAdoptedAfterCrash: a daemon dies after posting each card
// of an alert storm and before committing the alert event that names it
// (one card is lost on its way instead). The next daemon over the same
// store gets Alertmanager's retries: it finds each card by the mark its
// props carry (FindPost) and adopts it, and posts anew only the card that
// never arrived: one card per group, each the thread the chain names. A
// look for a card that fails is answered 503 (the notifier retries), not
// taken for "not there", which would post a second card.
func TestAlertCardAdoptedAfterCrash(t *testing.T) {
	e := newEnv(t, nil)
	path := filepath.Join(t.TempDir(), "events.db")
	groups := []string{"DiskFull", "HighLoad", "Lost", "Unreachable"}
	db, deliver := cardLife(t, path, crashAfterPost{Adapter: e.a, lost: "Lost"}, e.ch)
	for _, g := range groups {
		if code := deliver(g); code != http.StatusServiceUnavailable {
			t.Fatalf("%s: the dying daemon answered %d, want 503", g, code)
		}
	}
	cards, err := agentcore.AlertCards(db)
	if err != nil || len(cards) != len(groups) {
		t.Fatalf("alert_card events: %d, %v; want one per group (%d)", len(cards), err, len(groups))
	}
	if gs, _, _ := agentcore.AlertGroups(db, time.Time{}); len(gs) != 0 {
		t.Fatalf("the dying daemon recorded %d groups' threads", len(gs))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The next daemon's adapter, over the same server; its first look for
	// a card fails.
	cfg := e.a.cfg
	fail := &failFirstList{base: http.DefaultTransport}
	cfg.HTTPClient = &http.Client{Transport: fail}
	a2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db, deliver = cardLife(t, path, a2, e.ch)
	storetest.CloseChecked(t, db, agentcore.Decode)
	before := len(e.mm.Posts(e.ch))
	if code := deliver(groups[0]); code != http.StatusServiceUnavailable || !fail.failed.Load() {
		t.Fatalf("%s: a retry whose look for the card failed answered %d, want 503", groups[0], code)
	}
	if n := len(e.mm.Posts(e.ch)); n != before {
		t.Fatalf("a retry whose look for the card failed posted %d posts; a failed look is not \"not there\"", n-before)
	}
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
		for _, p := range e.mm.Posts(e.ch) {
			if p.UserID == e.mm.Bot.ID && p.RootID == "" && strings.Contains(p.Message, g) {
				ids = append(ids, p.ID)
			}
		}
		rec := recorded["{}:{alertname=\""+g+"\"}"]
		if len(ids) != 1 || rec.PostID != ids[0] {
			t.Errorf("%s: cards %v, the chain's thread is on %q; want one card, the thread's", g, ids, rec.PostID)
		}
	}
}
