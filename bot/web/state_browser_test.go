package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/thinbot/thinbot/bot"
)

// These tests show the person on call which thread is which: plain titles
// with a live state badge, and alert threads that come back after a
// restart as they were shown.

// nginxAlert is an Alertmanager webhook (version 4) for the NginxDown
// group, firing or resolved, with a runbook and a source link.
func nginxAlert(status string) string {
	ends := "0001-01-01T00:00:00Z"
	if status == "resolved" {
		ends = "2026-12-04T10:07:30Z"
	}
	return fmt.Sprintf(`{"version":"4","groupKey":"{}:{alertname=\"NginxDown\"}","status":%q,"receiver":"thinbot",
		"groupLabels":{"alertname":"NginxDown"},
		"commonLabels":{"alertname":"NginxDown","severity":"critical","instance":"web-1:9113","job":"nginx"},
		"commonAnnotations":{"summary":"nginx on web-1 is down","runbook_url":"https://runbooks.example.com/nginx/down-and-out-of-workers-on-the-frontend-fleet"},
		"externalURL":"http://alertmanager.example:9093",
		"alerts":[{"status":%q,"labels":{"alertname":"NginxDown","severity":"critical","instance":"web-1:9113","job":"nginx"},
		"annotations":{"summary":"nginx on web-1 is down","runbook_url":"https://runbooks.example.com/nginx/down-and-out-of-workers-on-the-frontend-fleet"},
		"startsAt":"2026-12-04T10:00:00Z","endsAt":%q,
		"generatorURL":"http://prometheus.example:9090/graph?g0.expr=nginx_up%%7Bjob%%3D%%22nginx%%22%%7D+%%3D%%3D+0&g0.tab=1",
		"fingerprint":"4f1e2c3d"}]}`, status, status, ends)
}

// dark switches a tab to the dark system setting (or back).
func dark(t *testing.T, ctx context.Context, on bool) {
	t.Helper()
	v := "light"
	if on {
		v = "dark"
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}}); err != nil {
		t.Fatal(err)
	}
}

// threadMeta is a thread's title and badges as a part of the page shows
// them: the list ("list") or the header ("head").
func threadMeta(t *testing.T, ctx context.Context, where, tid string) string {
	t.Helper()
	sel := fmt.Sprintf(`#thread-list a[data-id=%q]`, tid)
	if where == "head" {
		sel = ".thread-head"
	}
	return eval[string](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return "";
		const title = e.querySelector(".t-title, #thread-title").textContent;
		return title + " [" + [...e.querySelectorAll(".state")].map(b => b.textContent).join(", ") + "]"; })()`, sel))
}

// waitMeta waits until the list and the header show want for tid.
func waitMeta(t *testing.T, ctx context.Context, tid, want string) {
	t.Helper()
	for _, where := range []string{"list", "head"} {
		var got string
		deadline := time.Now().Add(browserWait)
		for got = threadMeta(t, ctx, where, tid); got != want; got = threadMeta(t, ctx, where, tid) {
			if time.Now().After(deadline) {
				shot(t, ctx, "failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
				t.Fatalf("the thread's %s shows %q, want %q", where, got, want)
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
}

// alertThread waits for the thread the rig's alert opened and returns
// its id.
func (r *rig) alertThread() string {
	r.t.Helper()
	var tid string
	waitFor(r.t, "the alert's thread", func() bool {
		r.srv.mu.Lock()
		defer r.srv.mu.Unlock()
		for id, th := range r.srv.threads {
			if th.By == "thinbot" {
				tid = id
			}
		}
		return tid != ""
	})
	return tid
}

// saveScreen writes a screenshot of the tab's viewport to testdata/screens
// when THINBOT_SCREENSHOTS=1 (see TestBrowserScreens).
func saveScreen(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("THINBOT_SCREENSHOTS") != "1" {
		return
	}
	c, cancel := context.WithTimeout(ctx, browserWait)
	defer cancel()
	buf, err := chromedp.Run(c, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join("testdata", "screens", name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

const nginxTitle = "NginxDown · severity critical · 1 of 1 alert(s) firing"

// TestBrowserThreadStates: an alert's thread is titled in plain text (no
// Markdown marks, no FIRING in the words) with a badge that follows the
// thread live, in the list and in the header, at a desk and on a phone, in
// light and dark: firing, waiting for approval, running, resolved.
func TestBrowserThreadStates(t *testing.T) {
	for _, v := range []struct {
		name        string
		phone, dark bool
	}{{"desktop-light", false, false}, {"phone-dark", true, true}} {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			bctx := browser(t)
			alice, bob := tab(t, bctx, "alice"), tab(t, bctx, "bob")
			if v.phone {
				phone(t, alice)
			}
			dark(t, alice, v.dark)
			r.alert(nginxAlert("firing"))
			tid := r.alertThread()
			do(t, alice, "open the alert's thread", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#composer")))
			waitText(t, alice, "#post-"+tid, "nginx on web-1 is down")
			waitMeta(t, alice, tid, nginxTitle+" [firing]")
			for _, raw := range []string{"**", "`", "🔥", "FIRING"} {
				if got := threadMeta(t, alice, "list", tid); strings.Contains(got, raw) {
					t.Errorf("the title %q shows %q", got, raw)
				}
			}
			if v.phone {
				noSideScroll(t, alice, "an alert's thread")
			}
			saveScreen(t, alice, "states-"+v.name+"-firing")

			send(t, alice, "please create the marker")
			waitText(t, alice, "#posts", "Approval needed")
			waitMeta(t, alice, tid, nginxTitle+" [firing, waiting for approval]")
			saveScreen(t, alice, "states-"+v.name+"-waiting")
			ask := r.waitPost(tid, "Approval needed")
			if card := eval[string](t, alice, `document.querySelector("#post-`+ask.ID+`").textContent`); !strings.Contains(card, "Why it needs approval: ") ||
				strings.Contains(card, "syntax.") || strings.Contains(card, "Gate rule") {
				t.Errorf("the approval card says why in the gate's rule names: %s", card)
			}
			do(t, bob, "bob approves", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))),
				chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
			waitText(t, alice, "#posts", "Created approved.txt")
			waitMeta(t, alice, tid, nginxTitle+" [firing]")

			send(t, alice, "wait a minute")
			ask = r.waitPost(tid, "Approval needed")
			do(t, bob, "bob approves the wait", chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))),
				chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
			waitFor(t, "the command to run", func() bool { return processRunning(sleepCmd) })
			waitMeta(t, alice, tid, nginxTitle+" [firing, running]")
			saveScreen(t, alice, "states-"+v.name+"-running")
			send(t, alice, "/stop")
			waitMeta(t, alice, tid, nginxTitle+" [firing]")

			r.alert(nginxAlert("resolved"))
			waitText(t, alice, "#posts", "Resolved")
			waitMeta(t, alice, tid, "NginxDown · severity critical · 0 of 1 alert(s) firing [resolved]")
			saveScreen(t, alice, "states-"+v.name+"-resolved")

			// A thread a person started: their words, idle when nothing runs.
			if v.phone {
				do(t, alice, "back to the threads", chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#new-thread")))
			}
			do(t, alice, "new thread", chromedp.Click(chromedp.CSS("#new-thread")))
			send(t, alice, "please check the disk **now** in `/var`")
			waitText(t, alice, "#posts", "plenty of room left")
			mine := currentThread(t, alice)
			waitMeta(t, alice, mine, "please check the disk now in /var [idle]")
		})
	}
}

// TestBrowserLinks: the alert card's runbook and source links and the
// links in an answer are tappable (they open in a new tab) and wrap at
// 390 px; a javascript: or data: link, or a URL in a code span, is text.
func TestBrowserLinks(t *testing.T) {
	for _, v := range []struct {
		name        string
		phone, dark bool
	}{{"desktop-dark", false, true}, {"phone-light", true, false}} {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			bctx := browser(t)
			alice := tab(t, bctx, "alice")
			if v.phone {
				phone(t, alice)
			}
			dark(t, alice, v.dark)
			r.alert(nginxAlert("firing"))
			tid := r.alertThread()
			do(t, alice, "open the alert's thread", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
			links := eval[[]string](t, alice, `[...document.querySelectorAll("#post-`+tid+` a")].map(a => a.textContent + " " + a.href + " " + a.target + " " + a.rel)`)
			want := []string{
				"runbook https://runbooks.example.com/nginx/down-and-out-of-workers-on-the-frontend-fleet _blank noopener noreferrer",
				"source http://prometheus.example:9090/graph?g0.expr=nginx%5Fup%7Bjob%3D%22nginx%22%7D+%3D%3D+0&g0.tab=1 _blank noopener noreferrer",
			}
			if strings.Join(links, "\n") != strings.Join(want, "\n") {
				t.Errorf("the card's links:\n%s\nwant:\n%s", strings.Join(links, "\n"), strings.Join(want, "\n"))
			}
			if txt := eval[string](t, alice, `document.querySelector("#post-`+tid+`").textContent`); strings.Contains(txt, "](") {
				t.Errorf("the card shows Markdown link syntax: %s", txt)
			}
			send(t, alice, "show me the links")
			waitText(t, alice, "#posts", "Not links")
			got := eval[[]string](t, alice, `[...document.querySelectorAll("#posts .post:last-child a")].map(a => a.textContent + " " + a.href)`)
			want = []string{"runbook https://runbooks.example.com/nginx/down",
				"https://grafana.example.com/d/nginx-overview-for-the-whole-frontend-fleet-and-its-upstreams?orgId=1&from=now-6h https://grafana.example.com/d/nginx-overview-for-the-whole-frontend-fleet-and-its-upstreams?orgId=1&from=now-6h"}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("the answer's links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if n := eval[int](t, alice, `[...document.querySelectorAll("a")].filter(a => !/^https?:/.test(a.href)).length`); n != 0 {
				t.Errorf("%d link(s) to something other than http(s)", n)
			}
			if v.phone {
				noSideScroll(t, alice, "a thread with long links")
				if w := eval[float64](t, alice, `Math.max(...[...document.querySelectorAll("#posts a.ext")].map(a => a.getBoundingClientRect().right))`); w > 390 {
					t.Errorf("a link runs off the screen: its right edge is at %.0f px", w)
				}
			}
			eval[bool](t, alice, `document.querySelector("#post-`+tid+`").scrollIntoView(); true`)
			saveScreen(t, alice, "links-"+v.name+"-card")
			eval[bool](t, alice, `document.querySelector("#posts .post:last-child").scrollIntoView(); true`)
			saveScreen(t, alice, "links-"+v.name+"-answer")
		})
	}
}

// waitEvent waits until the chain holds an event of session sid whose
// type is typ and whose payload contains want.
func (r *rig) waitEvent(sid, typ, want string) {
	r.t.Helper()
	waitFor(r.t, typ+" "+want+" in the chain", func() bool {
		for ev, err := range r.db.Events(sid, 1) {
			if err == nil && ev.Type == typ && strings.Contains(string(ev.Payload), want) {
				return true
			}
		}
		return false
	})
}

// TestBrowserAlertThreadAfterRestart: an alert's thread comes back after a
// restart as it was shown: its title, its badge, and the card as its root
// post, which the next delivery still rewrites. A run that a killed
// process left waiting for approval shows as interrupted, not as "Working
// on it… waiting for approval", and the restart's notice shows once; a
// second restart shows the same page.
func TestBrowserAlertThreadAfterRestart(t *testing.T) {
	for _, v := range []struct {
		name        string
		phone, dark bool
	}{{"desktop-light", false, false}, {"phone-dark", true, true}} {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			bctx := browser(t)
			alice := tab(t, bctx, "alice")
			if v.phone {
				phone(t, alice)
			}
			dark(t, alice, v.dark)
			r.alert(nginxAlert("firing"))
			tid := r.alertThread()
			do(t, alice, "open the alert's thread", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
			send(t, alice, "please create the marker")
			waitText(t, alice, "#posts", "Approval needed")
			r.waitEvent("web/console/"+tid, "note", "approval_posted")
			card := eval[string](t, alice, `document.querySelector("#post-`+tid+` .md").outerHTML`)
			waitMeta(t, alice, tid, nginxTitle+" [firing, waiting for approval]")

			// The files as a killed process leaves them: the run waits.
			crashed := t.TempDir()
			copyDir(t, r.state, crashed)

			// A restart (SIGTERM): the run is stopped, nothing waits.
			r.restart(t)
			do(t, alice, "reopen after the restart", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
			waitText(t, alice, "#posts", "shutting down")
			waitMeta(t, alice, tid, nginxTitle+" [firing]")
			if got := eval[string](t, alice, `document.querySelector("#post-`+tid+` .md").outerHTML`); got != card {
				t.Errorf("the card after a restart:\n%s\nwant as before:\n%s", got, card)
			}
			for _, p := range postTexts(t, alice) {
				if strings.Contains(p, "Working on it") || strings.Contains(p, "waiting for approval") {
					t.Errorf("after a restart a post still says %q", p)
				}
			}
			saveScreen(t, alice, "restart-"+v.name+"-stopped")

			// The killed process's files: the run was interrupted.
			k := newRig(t, rigOpts{StateDir: crashed})
			do(t, alice, "open the thread over the killed process's files", chromedp.Navigate(k.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
			waitText(t, alice, "#posts", "so that run was interrupted")
			waitMeta(t, alice, tid, nginxTitle+" [firing]")
			if got := eval[string](t, alice, `document.querySelector("#post-`+tid+` .md").outerHTML`); got != card {
				t.Errorf("the card after the kill:\n%s\nwant as before:\n%s", got, card)
			}
			after := postTexts(t, alice)
			all := strings.Join(after, "\n")
			for _, bad := range []string{"Working on it", "waiting for approval"} {
				if strings.Contains(all, bad) {
					t.Errorf("after the kill the thread still says %q:\n%s", bad, all)
				}
			}
			for _, want := range []string{"Interrupted by a restart of thinbot after 1 step(s).",
				"echo ran >>approved.txt — not run: expired: thinbot restarted before a decision (confirm)",
				"Expired — thinbot restarted before anyone decided. Nothing was run."} {
				if !strings.Contains(all, want) {
					t.Errorf("after the kill the thread lacks %q:\n%s", want, all)
				}
			}
			if n := strings.Count(all, "so that run was interrupted"); n != 1 {
				t.Errorf("the restart's notice shows %d times:\n%s", n, all)
			}
			saveScreen(t, alice, "restart-"+v.name+"-interrupted")

			// Once more: the same page, post for post.
			k.restart(t)
			do(t, alice, "reopen after a second restart", chromedp.Navigate(k.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
			waitText(t, alice, "#posts", "so that run was interrupted")
			if again := postTexts(t, alice); strings.Join(again, "\n") != all {
				t.Errorf("a second restart shows another page.\nfirst:\n%s\n\nsecond:\n%s", all, strings.Join(again, "\n"))
			}
			waitMeta(t, alice, tid, nginxTitle+" [firing]")

			// The restored card keeps its Acknowledge, which still works,
			// and a restart keeps who acknowledged.
			ackBtn := "#post-" + tid + ` button[data-action="ack"]`
			do(t, alice, "alice acknowledges on the restored card", chromedp.WaitVisible(chromedp.CSS(ackBtn)), chromedp.Click(chromedp.CSS(ackBtn)))
			waitText(t, alice, "#post-"+tid, "Acknowledged by @alice")
			k.restart(t)
			do(t, alice, "reopen after the acknowledgement", chromedp.Navigate(k.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
			waitText(t, alice, "#post-"+tid, "Acknowledged by @alice")
			if eval[bool](t, alice, `!!document.querySelector(`+"`"+ackBtn+"`"+`)`) {
				t.Error("after a restart the acknowledged card offers Acknowledge again")
			}

			// The restored card is the thread's root post: the resolve rewrites it.
			k.alert(nginxAlert("resolved"))
			waitText(t, alice, "#post-"+tid, "RESOLVED")
			waitMeta(t, alice, tid, "NginxDown · severity critical · 0 of 1 alert(s) firing [resolved]")
			saveScreen(t, alice, "restart-"+v.name+"-resolved")
		})
	}
}

// TestBrowserSignInKeepsTheThread: a link to a thread opened by someone
// not signed in leads, through the sign-in, to that thread, at a desk and
// on a phone; a page of the audit viewer too.
func TestBrowserSignInKeepsTheThread(t *testing.T) {
	for _, v := range []struct {
		name        string
		phone, dark bool
	}{{"desktop-dark", false, true}, {"phone-light", true, false}} {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			r.alert(nginxAlert("firing"))
			tid := r.alertThread()
			bctx := browser(t)
			guest := tab(t, bctx, "")
			if v.phone {
				phone(t, guest)
			}
			dark(t, guest, v.dark)
			do(t, guest, "open the thread's link unsigned", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#token")))
			saveScreen(t, guest, "signin-"+v.name+"-login")
			do(t, guest, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), "carol-token-0123456789"),
				chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("#composer")))
			if got := currentThread(t, guest); got != tid {
				t.Errorf("after the sign-in the page shows thread %q, want %q", got, tid)
			}
			waitText(t, guest, "#post-"+tid, "nginx on web-1 is down")
			waitMeta(t, guest, tid, nginxTitle+" [firing]")
			if v.phone && !eval[bool](t, guest, `document.querySelector("#posts").checkVisibility()`) {
				t.Error("on the phone the sign-in leads to the threads list, not the thread")
			}
			saveScreen(t, guest, "signin-"+v.name+"-thread")
			if !v.phone {
				return
			}
			// Thumb-sized: the header's links and buttons, and Copy.
			send(t, guest, "please create the marker")
			waitText(t, guest, "#posts", "Approval needed")
			small := eval[[]string](t, guest, `[...document.querySelectorAll("header a, header button, .code button.copy")]
				.filter(e => e.checkVisibility()).map(e => [e, e.getBoundingClientRect()])
				.filter(([e, r]) => r.width < 44 || r.height < 44).map(([e, r]) => e.textContent.trim() + " " + Math.round(r.width) + "x" + Math.round(r.height))`)
			if len(small) > 0 {
				t.Errorf("controls under 44 x 44 px on a phone: %q", small)
			}
			if n := eval[int](t, guest, `document.querySelectorAll("header a, header button, .code button.copy").length`); n < 5 {
				t.Errorf("only %d header controls and Copy buttons to measure", n)
			}
			noSideScroll(t, guest, "a signed-in phone thread with an approval")
			eval[bool](t, guest, `document.querySelector("#posts .post:last-child").scrollIntoView(); true`)
			saveScreen(t, guest, "signin-"+v.name+"-targets")
		})
	}
}

// TestSignInReturnsOnlyHere: the sign-in sends the browser back to the
// console page it asked for, with its query, and never to another site.
func TestSignInReturnsOnlyHere(t *testing.T) {
	r := newRig(t, rigOpts{})
	req, _ := http.NewRequest("GET", r.url+"/audit/session?id=web/console/x&after=5", nil)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); loc != "/login?next="+url.QueryEscape("/audit/session?id=web/console/x&after=5") {
		t.Errorf("an unsigned page redirects to %q", loc)
	}
	for next, want := range map[string]string{
		"/audit/session?id=web/console/x&after=5": "/audit/session?id=web/console/x&after=5",
		"/":                               "/",
		"":                                "/",
		"//evil.example/x":                "/",
		"/\\evil.example":                 "/",
		"https://evil.example/":           "/",
		"javascript:alert(1)":             "/",
		"/%0d%0aSet-Cookie:x=1":           "/%0d%0aSet-Cookie:x=1",
		"\t//evil.example":                "/",
		"/ok\r\nLocation: //evil.example": "/",
	} {
		form := url.Values{"token": {"carol-token-0123456789"}, "next": {next}}
		req, _ := http.NewRequest("POST", r.url+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", r.url)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != want {
			t.Errorf("sign-in with next %q: %d to %q, want %q", next, resp.StatusCode, loc, want)
		}
	}
}

// TestBrowserFirstLookLinksStayText: the links in an alert's first look,
// which no human watched and which the alert's text can steer, are text
// in the console, live and after a restart.
func TestBrowserFirstLookLinksStayText(t *testing.T) {
	r := newRig(t, rigOpts{Investigate: true})
	bctx := browser(t)
	alice := tab(t, bctx, "alice")
	r.alert(nginxAlert("firing"))
	tid := r.alertThread()
	check := func(when string) {
		t.Helper()
		do(t, alice, "open the alert's thread "+when, chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
		waitText(t, alice, "#posts", "Looked around.")
		if got := eval[[]string](t, alice, `[...document.querySelectorAll("#posts a")].map(a => a.href)`); len(got) != 2 || strings.Contains(strings.Join(got, " "), "evil") {
			t.Errorf("%s: the thread's links are %q, want only the card's runbook and source", when, got)
		}
		waitText(t, alice, "#posts", "evil.example/run-this")
	}
	check("live")
	// What the person on call reads about the refused command: plain words.
	waitText(t, alice, "#posts", "Ask me in this thread to run one")
	page := eval[string](t, alice, `document.querySelector("#posts").textContent`)
	for _, want := range []string{"is not a read-only subcommand", "this automatic first look cannot ask for one"} {
		if !strings.Contains(page, want) {
			t.Errorf("the first look's thread lacks %q:\n%s", want, page)
		}
	}
	for _, bad := range []string{"--allow-all", "verb.unknown", "Mention me", "mention me"} {
		if strings.Contains(page, bad) {
			t.Errorf("the first look's thread says %q:\n%s", bad, page)
		}
	}
	saveScreen(t, alice, "plain-words-first-look")
	r.restart(t)
	check("after a restart")
	saveScreen(t, alice, "links-first-look-after-restart")
}

// utcLeft is the text of what sel shows, code and hover titles left out,
// that still reads as a UTC time: none, when every time is in the
// viewer's zone.
func utcLeft(t *testing.T, ctx context.Context, sel string) []string {
	t.Helper()
	return eval[[]string](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return ["no " + %q];
		const c = e.cloneNode(true); for (const x of c.querySelectorAll("pre, code, script")) x.remove();
		return c.textContent.match(/\d\d:\d\d(:\d\d)? UTC/g) || []; })()`, sel, sel))
}

// TestBrowserOneTimeZone: one rule for every time the console and the
// audit pages show, cards and posts alike: the viewer's zone, named, with
// UTC on hover. The viewer here is in Kolkata (UTC+5:30).
func TestBrowserOneTimeZone(t *testing.T) {
	for _, v := range []struct {
		name        string
		phone, dark bool
	}{{"desktop-light", false, false}, {"phone-dark", true, true}} {
		t.Run(v.name, func(t *testing.T) {
			r := newRig(t, rigOpts{})
			bctx := browser(t)
			alice, bob, audrey := tab(t, bctx, "alice"), tab(t, bctx, "bob"), tab(t, bctx, "audrey")
			for _, c := range []context.Context{alice, bob, audrey} {
				if _, err := chromedp.Call(c, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
					t.Fatal(err)
				}
				if v.phone {
					phone(t, c)
				}
				dark(t, c, v.dark)
			}
			r.alert(nginxAlert("firing"))
			tid := r.alertThread()
			do(t, alice, "open the alert's thread", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#post-"+tid+" a.ext")))
			z := eval[string](t, alice, `new Intl.DateTimeFormat(undefined, {timeZoneName: "short"}).formatToParts(new Date()).find(x => x.type === "timeZoneName").value`)
			if z == "" || z == "UTC" {
				t.Fatalf("the viewer's zone is named %q", z)
			}
			// The card: its start in Kolkata, UTC on hover.
			started := eval[[]string](t, alice, `(() => { const e = document.querySelector("#post-`+tid+` time.tz"); return e ? [e.textContent, e.title] : []; })()`)
			if want := []string{"2026-12-04 15:30:00 " + z, "2026-12-04 10:00:00 UTC"}; strings.Join(started, "|") != strings.Join(want, "|") {
				t.Errorf("the card's start shows %q, want %q", started, want)
			}
			// A post's own time, the list's, an approval's expiry and its decision.
			send(t, alice, "please create the marker")
			ask := r.waitPost(tid, "Approval needed")
			waitText(t, alice, "#post-"+ask.ID, "expires ")
			head := eval[[]string](t, alice, `(() => { const e = document.querySelector("#post-`+ask.ID+` .post-head time"); return [e.textContent, e.title]; })()`)
			if !strings.HasSuffix(head[0], " "+z) || !strings.HasSuffix(head[1], " UTC") {
				t.Errorf("a post's time shows %q (hover %q), want it in %s with UTC on hover", head[0], head[1], z)
			}
			waitText(t, alice, "#thread-list", z)
			waitText(t, alice, "#inbox-count", "1")
			do(t, alice, "open the inbox", chromedp.Click(chromedp.CSS("#inbox-open")), chromedp.WaitVisible(chromedp.CSS("#inbox-list li.item")))
			waitText(t, alice, "#inbox-list .expires", z)
			for _, sel := range []string{"#posts", "#thread-list", "#inbox-list"} {
				if left := utcLeft(t, alice, sel); len(left) > 0 {
					t.Errorf("%s still shows UTC times: %q", sel, left)
				}
			}
			saveScreen(t, alice, "zone-"+v.name+"-inbox")
			do(t, alice, "close the inbox", chromedp.Click(chromedp.CSS("#inbox-close")))
			do(t, bob, "bob approves", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))),
				chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
			waitText(t, alice, "#posts", "Created approved.txt")
			r.alert(nginxAlert("resolved"))
			waitText(t, alice, "#posts", "Resolved")
			waitText(t, alice, "#posts", "2026-12-04 15:37:30 "+z)
			if left := utcLeft(t, alice, "#posts"); len(left) > 0 {
				t.Errorf("the thread still shows UTC times: %q", left)
			}
			saveScreen(t, alice, "zone-"+v.name+"-thread")

			// The audit pages: the same rule.
			for _, page := range []string{"/audit", "/audit/session?id=web/console/" + tid, "/audit/approvals", "/audit/verify"} {
				do(t, audrey, "open "+page, chromedp.Navigate(r.url+page), chromedp.WaitVisible(chromedp.CSS("main")))
				got := eval[[]string](t, audrey, `[...document.querySelectorAll("time")].map(e => e.className + "|" + e.textContent + "|" + e.title)`)
				if len(got) == 0 {
					t.Errorf("%s shows no times", page)
				}
				for _, g := range got {
					if p := strings.Split(g, "|"); p[0] != "local" || !strings.HasSuffix(p[1], " "+z) || !strings.HasSuffix(p[2], " UTC") {
						t.Errorf("%s shows a time as %q, want it in %s with UTC on hover", page, g, z)
					}
				}
				if left := utcLeft(t, audrey, "main"); len(left) > 0 {
					t.Errorf("%s still shows UTC times: %q", page, left)
				}
			}
			do(t, audrey, "the timeline", chromedp.Navigate(r.url+"/audit/session?id=web/console/"+tid), chromedp.WaitVisible(chromedp.CSS("#timeline")))
			saveScreen(t, audrey, "zone-"+v.name+"-audit")
		})
	}
}

// TestBrowserStoppedWhileWaiting: a run stopped while its command waits
// for an approval ends with a status that says the command did not run,
// not "waiting for approval", live and after a restart alike.
func TestBrowserStoppedWhileWaiting(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice := tab(t, bctx, "alice")
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#composer")))
	send(t, alice, "please create the marker")
	waitText(t, alice, "#posts", "Approval needed")
	tid := currentThread(t, alice)
	send(t, alice, "/stop")
	waitText(t, alice, "#posts", "Done: 1 step(s).")
	waitText(t, alice, "#posts", "cancelled before a decision: stopped by user:alice")
	live := postTexts(t, alice)
	if all := strings.Join(live, "\n"); strings.Contains(all, "waiting for approval") {
		t.Errorf("the stopped run's thread still says waiting for approval:\n%s", all)
	}
	r.restart(t)
	do(t, alice, "reopen after a restart", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#composer")))
	waitText(t, alice, "#posts", "cancelled before a decision: stopped by user:alice")
	if after := postTexts(t, alice); strings.Join(after, "\n") != strings.Join(live, "\n") {
		t.Errorf("the thread differs after a restart.\nlive:\n%s\n\nafter:\n%s", strings.Join(live, "\n"), strings.Join(after, "\n"))
	}
	saveScreen(t, alice, "stopped-while-waiting")
}

// TestStormThreadsAfterRestart: the thirty threads of a storm come back
// after a restart each with its card as its root post, its plain title and
// its badge, not empty or titled "Earlier thread".
func TestStormThreadsAfterRestart(t *testing.T) {
	r := newRig(t, rigOpts{})
	const n = 30
	for i := range n {
		body := strings.ReplaceAll(strings.ReplaceAll(nginxAlert("firing"), "NginxDown", fmt.Sprintf("Storm%02d", i)), "4f1e2c3d", fmt.Sprintf("fp%02d", i))
		r.alert(body)
	}
	type shown struct{ title, alert, card string }
	read := func() map[string]shown {
		r.srv.mu.Lock()
		defer r.srv.mu.Unlock()
		out := map[string]shown{}
		for id, th := range r.srv.threads {
			if len(th.posts) > 0 && th.posts[0].ID == id {
				out[id] = shown{th.Title, th.Alert, th.posts[0].Text}
			} else {
				out[id] = shown{th.Title, th.Alert, ""}
			}
		}
		return out
	}
	before := read()
	if len(before) != n {
		t.Fatalf("%d threads for %d groups", len(before), n)
	}
	r.restart(t)
	after := read()
	for id, b := range before {
		a := after[id]
		if a != b {
			t.Errorf("thread %s after a restart:\n%+v\nwant as before:\n%+v", id, a, b)
		}
		if !strings.HasPrefix(a.title, "Storm") || a.alert != "firing" || !strings.Contains(a.card, "nginx on web-1 is down") {
			t.Errorf("thread %s after a restart: %+v", id, a)
		}
	}
}

// TestSkippedLookAfterRestart: a storm's skipped first look comes back
// after a restart with its notice and its Run first look, which still
// runs the look; a tap's outcome comes back too, without the button.
// lookCard waits until thread tid's alert card (its root post) offers Run
// first look (want) or no longer does, and returns the card.
func (r *rig) lookCard(tid string, want bool) wpost {
	r.t.Helper()
	var card wpost
	waitFor(r.t, fmt.Sprintf("the card with Run first look %v", want), func() bool {
		for _, p := range r.posts(tid) {
			if p.ID != tid {
				continue
			}
			has := slices.ContainsFunc(p.Buttons, func(b button) bool { return b.ID == bot.ActionFirstLook })
			card = p
			return has == want
		}
		return false
	})
	return card
}

func TestSkippedLookAfterRestart(t *testing.T) {
	r := newRig(t, rigOpts{Storm: true})
	for _, name := range []string{"HoldsTheLook", "WaitsInQueue", "SkippedLook"} {
		r.alert(strings.ReplaceAll(strings.ReplaceAll(nginxAlert("firing"), "NginxDown", name), "4f1e2c3d", "fp"+name))
	}
	var tid string
	waitFor(t, "the skipped group's thread", func() bool {
		r.srv.mu.Lock()
		defer r.srv.mu.Unlock()
		for id, th := range r.srv.threads {
			if strings.HasPrefix(th.Title, "SkippedLook") {
				tid = id
			}
		}
		return tid != ""
	})
	notice := r.waitPost(tid, "Skipped the automatic first look")
	card := r.lookCard(tid, true)
	r.restart(t)
	if again := r.waitPost(tid, "Skipped the automatic first look"); again.Text != notice.Text || len(again.Buttons) != 0 {
		t.Errorf("after a restart the notice is %+v\nwant as live: %+v", again, notice)
	}
	again := r.lookCard(tid, true)
	if again.Text != card.Text || again.value != card.value || !slices.Equal(again.Buttons, card.Buttons) {
		t.Fatalf("after a restart the card is %+v\nwant as live: %+v", again, card)
	}
	code, body := r.do("bob", "POST", "/api/threads/"+tid+"/posts/"+again.ID+"/click", `{"action":"`+bot.ActionFirstLook+`"}`)
	if code != http.StatusOK || !strings.Contains(body, `"updated":true`) {
		t.Fatalf("Run first look after a restart: %d %s", code, body)
	}
	r.waitPost(tid, "Run first look: started by @bob")
	r.waitPost(tid, "I only know the test script.")
	r.lookCard(tid, false)
	r.restart(t)
	r.waitPost(tid, "Run first look: started by @bob")
	r.lookCard(tid, false)
}
