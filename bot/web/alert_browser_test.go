package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	deliver := func(body string) {
		t.Helper()
		req := httptest.NewRequest("POST", "/alerts", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alert-token-0123456789")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("delivery: %d %s", w.Code, w.Body)
		}
	}
	deliver(body)
	// A repeat notification redraws the card, its button with it: the
	// card is no approval request, in the inbox or anywhere.
	deliver(strings.Replace(body, `"startsAt":"2026-12-04T17:01:00Z"`, `"startsAt":"2026-12-04T17:01:30Z"`, 1))
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
	r.waitPost(tid, "Still firing")
	if code, inbox := r.do("alice", "GET", "/api/inbox", ""); code != http.StatusOK || strings.Contains(inbox, tid) {
		t.Errorf("the inbox lists the alert card: %d %s", code, inbox)
	}
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

// TestBrowserAlertSilence: in an alert's console thread, "/silence 1h"
// posts an approval card naming the matchers and the duration; the
// requester may not approve it (two-person rule), another approver's
// Approve on a phone creates the silence in Alertmanager (a fake of its
// v2 API here; tests/alerts_ack_test.go has the real one) and the card
// shows it. With THINBOT_SCREENSHOTS=1 it writes
// testdata/screens/phone-alert-silenced.png.
func TestBrowserAlertSilence(t *testing.T) {
	var created []string
	var mu sync.Mutex
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != "POST" || r.URL.Path != "/api/v2/silences" {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		var s struct {
			Matchers []struct{ Name, Value string }
		}
		json.NewDecoder(r.Body).Decode(&s)
		mu.Lock()
		for _, m := range s.Matchers {
			created = append(created, m.Name+"="+m.Value)
		}
		mu.Unlock()
		fmt.Fprint(w, `{"silenceID":"5f0c2b7e-silence"}`)
	}))
	defer am.Close()
	r := newRig(t, rigOpts{})
	h, err := r.bot.AlertHandler(bot.AlertsConfig{Token: []byte("alert-token-0123456789"), Platform: Platform,
		Routes:       []bot.AlertRoute{{Name: "console", Channel: "console", Platform: Platform}},
		Alertmanager: bot.Alertmanager{URL: am.URL}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "/alerts", strings.NewReader(`{"version":"4","groupKey":"g-disk","status":"firing","receiver":"thinbot",
		"groupLabels":{"alertname":"DiskFull"},"commonLabels":{"alertname":"DiskFull","severity":"critical","instance":"db1"},
		"alerts":[{"status":"firing","fingerprint":"d1","labels":{"alertname":"DiskFull","severity":"critical","instance":"db1"},"startsAt":"2026-12-04T17:00:00Z"}]}`))
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
			if strings.Contains(th.Title, "DiskFull") {
				tid = id
			}
		}
		return tid != ""
	})
	bctx := browser(t)
	alice, bob := tab(t, bctx, "alice"), tab(t, bctx, "bob")
	do(t, alice, "alice opens the alert's thread", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#text")))
	send(t, alice, "/silence 1h disk cleanup")
	ask := r.waitPost(tid, "Approval needed")
	for _, want := range []string{"asks thinbot to change Alertmanager", `alertname="DiskFull"`, "for 1h0m0s", "comment: disk cleanup"} {
		if !strings.Contains(ask.Text, want) {
			t.Errorf("the silence's approval card lacks %q:\n%s", want, ask.Text)
		}
	}
	do(t, alice, "alice approves her own silence", chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))),
		chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitText(t, alice, "#posts", "two-person rule")
	phone(t, bob)
	do(t, bob, "bob approves on a phone", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))),
		chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitText(t, bob, "#post-"+tid, "Silenced")
	waitText(t, bob, "#posts", "5f0c2b7e-silence")
	noSideScroll(t, bob, "the silenced card")
	if os.Getenv("THINBOT_SCREENSHOTS") == "1" {
		eval[bool](t, bob, `document.querySelector("#post-`+tid+`").scrollIntoView(); true`)
		buf, err := chromedp.Run(bob, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "screens", "phone-alert-silenced.png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(created) != 1 || created[0] != "alertname=DiskFull" {
		t.Errorf("Alertmanager got the matchers %v, want the group's alertname=DiskFull", created)
	}
}
