package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
)

// TestBrowserAlertAcknowledge: an alert's card in the console carries an
// Acknowledge button, on a desktop and on a phone (390x844, at least 44 px,
// no sideways scroll); a user who may not approve is refused under the
// card, an approver's press redraws the card with their name, without the
// button, on every open page, and the chain records it. With
// THINBOT_SCREENSHOTS=1 it writes testdata/screens/{desktop,phone}-alert-ack.png.
func TestBrowserAlertAcknowledge(t *testing.T) {
	r := newRig(t, rigOpts{})
	h, err := r.bot.AlertHandler(bot.AlertsConfig{Token: []byte("alert-token-0123456789"), Platform: Platform,
		Routes: []bot.AlertRoute{{Name: "console", Channel: "console", Platform: Platform}}})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"version":"4","groupKey":"{}:{alertname=\"WebDown\"}","status":"firing","receiver":"thinbot",
		"commonLabels":{"alertname":"WebDown","severity":"critical"},"commonAnnotations":{"runbook_url":"https://runbooks.example/web"},
		"alerts":[{"status":"firing","fingerprint":"a1","labels":{"alertname":"WebDown","severity":"critical","instance":"web-1"},"annotations":{"summary":"web-1 answers 502","runbook_url":"https://runbooks.example/web"},"startsAt":"2026-12-04T17:00:00Z"},
		{"status":"firing","fingerprint":"a2","labels":{"alertname":"WebDown","severity":"critical","instance":"web-2"},"annotations":{"summary":"web-2 answers 502","runbook_url":"https://runbooks.example/web"},"startsAt":"2026-12-04T17:01:00Z"}]}`
	req := httptest.NewRequest("POST", "/alerts", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer alert-token-0123456789")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("delivery: %d %s", w.Code, w.Body)
	}
	var tid string
	waitFor(t, "the alert's thread", func() bool {
		r.srv.mu.Lock()
		defer r.srv.mu.Unlock()
		for id, th := range r.srv.threads {
			if strings.Contains(th.Title, "WebDown") {
				tid = id
			}
		}
		return tid != ""
	})
	ack := "#post-" + tid + ` button[data-action="ack"]`
	save := func(ctx context.Context, name string) {
		t.Helper()
		if os.Getenv("THINBOT_SCREENSHOTS") != "1" {
			return
		}
		buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "screens", name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	bctx := browser(t)
	carol, alice, bob := tab(t, bctx, "carol"), tab(t, bctx, "alice"), tab(t, bctx, "bob")
	do(t, alice, "desktop", chromedp.EmulateViewport(1280, 800))
	do(t, alice, "alice opens the card on a desktop", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(ack)))
	waitText(t, alice, "#post-"+tid, "web-2 answers 502")
	save(alice, "desktop-alert-ack")

	do(t, carol, "carol, no approver, presses Acknowledge", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(ack)),
		chromedp.Click(chromedp.CSS(ack)))
	waitText(t, carol, "#post-"+tid, "You cannot acknowledge this alert")

	phone(t, bob)
	do(t, bob, "bob opens the card on a phone", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(ack)))
	if w, h := box(t, bob, ack); w < 44 || h < 44 {
		t.Errorf("the Acknowledge button is %.0f x %.0f px on a phone, want at least 44 x 44", w, h)
	}
	noSideScroll(t, bob, "the alert card")
	do(t, bob, "bob acknowledges with a thumb", chromedp.Click(chromedp.CSS(ack)))
	waitText(t, bob, "#post-"+tid, "Acknowledged by @bob")
	save(bob, "phone-alert-ack")
	// The card changed in place on every page, and lost its button.
	waitText(t, alice, "#post-"+tid, "Acknowledged by @bob")
	if n := eval[int](t, alice, `document.querySelectorAll('#post-`+tid+` button[data-action="ack"]').length`); n != 0 {
		t.Errorf("the acknowledged card still has %d Acknowledge buttons", n)
	}
	var by []string
	for ev, err := range r.db.Events("web/console/"+tid, 1) {
		if err == nil && ev.Type == agentcore.EvAlertAck {
			p, _ := agentcore.Decode(ev)
			by = append(by, p.(*agentcore.AlertAckPayload).UserID)
		}
	}
	if len(by) != 1 || by[0] != "bob" {
		t.Errorf("the chain's acknowledgements: %v, want one by bob", by)
	}
}
