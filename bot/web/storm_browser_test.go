package web

import (
	"context"
	"fmt"
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

// TestBrowserStormAndRunFirstLook: three alert groups fire at once into a
// console that runs one first look and queues one. The storm summary
// opens a thread listing the three groups with links to their threads; on
// a desktop and on a phone (390x844, no sideways scroll) the link opens the
// skipped group's thread, whose card's Run first look (at least 44 px on
// the phone) is refused for a user who may not approve and runs the first look
// for an approver, recorded in the chain. With THINBOT_SCREENSHOTS=1 it
// writes testdata/screens/{desktop-storm-summary,phone-storm-summary,phone-run-first-look,phone-first-look}.png.
func TestBrowserStormAndRunFirstLook(t *testing.T) {
	r := newRig(t, rigOpts{})
	h, err := r.bot.AlertHandler(bot.AlertsConfig{Token: []byte("alert-token-0123456789"), Platform: Platform, MaxPerChannel: 1, MaxQueued: 1,
		Routes: []bot.AlertRoute{{Name: "console", Channel: "console", Platform: Platform, Investigate: true}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"StormHold", "StormQueued", "StormSkipped"} {
		body := fmt.Sprintf(`{"version":"4","groupKey":"{}:{alertname=\"%s\"}","status":"firing","receiver":"thinbot",
			"commonLabels":{"alertname":%q,"severity":"critical"},
			"alerts":[{"status":"firing","fingerprint":%q,"labels":{"alertname":%q,"severity":"critical"},"startsAt":"2026-12-04T17:00:00Z"}]}`,
			name, name, name, name)
		req := httptest.NewRequest("POST", "/alerts", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer alert-token-0123456789")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("delivery %s: %d %s", name, w.Code, w.Body)
		}
	}
	thread := func(title string) string {
		var tid string
		waitFor(t, "the thread "+title, func() bool {
			r.srv.mu.Lock()
			defer r.srv.mu.Unlock()
			for id, th := range r.srv.threads {
				if strings.Contains(th.Title, title) {
					tid = id
				}
			}
			return tid != ""
		})
		return tid
	}
	summary, skipped := thread("Alert storm"), thread("StormSkipped")
	r.waitPost(skipped, "Skipped the automatic first look")
	run := fmt.Sprintf("#post-%s button[data-action=%q]", skipped, bot.ActionFirstLook) // on the card
	link := fmt.Sprintf(`#post-%s a.thread-link[href="#%s"]`, summary, skipped)
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
	alice, carol, bob := tab(t, bctx, "alice"), tab(t, bctx, "carol"), tab(t, bctx, "bob")
	do(t, alice, "desktop", chromedp.EmulateViewport(1280, 800))
	do(t, alice, "alice opens the storm summary", chromedp.Navigate(r.url+"/#"+summary), chromedp.WaitVisible(chromedp.CSS(link)))
	for _, want := range []string{"3 alert groups opened", "1 running, 1 queued, 1 skipped", "StormHold", "StormQueued", "StormSkipped"} {
		waitText(t, alice, "#post-"+summary, want)
	}
	save(alice, "desktop-storm-summary")

	do(t, carol, "carol, no approver, follows the link and taps Run first look", chromedp.Navigate(r.url+"/#"+summary),
		chromedp.WaitVisible(chromedp.CSS(link)), chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.CSS(run)),
		chromedp.Click(chromedp.CSS(run)))
	waitText(t, carol, "#post-"+skipped, "You cannot run this first look")

	phone(t, bob)
	do(t, bob, "bob opens the storm summary on a phone", chromedp.Navigate(r.url+"/#"+summary), chromedp.WaitVisible(chromedp.CSS(link)))
	noSideScroll(t, bob, "the storm summary")
	if w, h := box(t, bob, link); w < 44 || h < 44 {
		t.Errorf("a thread link of the storm summary is %.0f x %.0f px on a phone, want at least 44 x 44", w, h)
	}
	save(bob, "phone-storm-summary")
	do(t, bob, "bob follows the link", chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.CSS(run)))
	if got := currentThread(t, bob); got != skipped {
		t.Fatalf("the link opened thread %s, want the skipped group's %s", got, skipped)
	}
	if w, h := box(t, bob, run); w < 44 || h < 44 {
		t.Errorf("Run first look is %.0f x %.0f px on a phone, want at least 44 x 44", w, h)
	}
	noSideScroll(t, bob, "the skipped group's thread")
	save(bob, "phone-run-first-look")
	do(t, bob, "bob taps Run first look", chromedp.Click(chromedp.CSS(run)))
	waitText(t, bob, "#posts", "Run first look: started by @bob")
	waitText(t, bob, "#posts", "I only know the test script.")
	save(bob, "phone-first-look")
	if n := eval[int](t, bob, `document.querySelectorAll('`+run+`').length`); n != 0 {
		t.Errorf("the card still has %d Run first look buttons after the tap", n)
	}
	var notes []string
	for ev, err := range r.db.Events("web/console/"+skipped, 1) {
		if err == nil && ev.Type == agentcore.EvNote {
			p, _ := agentcore.Decode(ev)
			if n, ok := p.(*agentcore.NotePayload); ok {
				notes = append(notes, n.Kind+":"+n.Detail+":"+ev.Actor)
			}
		}
	}
	want := "first_look:skipped:alert:console,click_refused:run first look: you are not an approver for this channel:user:carol,first_look:requested:user:bob"
	if got := strings.Join(notes, ","); got != want {
		t.Errorf("the skipped group's notes: %s\nwant %s", got, want)
	}
}
