package web

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/thinbot/thinbot/agentcore"
)

// These tests drive the console as the person on call uses it: on a
// phone, from the pending-approvals inbox, stopping a model mid-answer.

// phone makes a tab 390 by 844 CSS pixels, an ordinary phone's size.
func phone(t *testing.T, ctx context.Context) {
	t.Helper()
	do(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844))
}

// noSideScroll fails the test when the page is wider than the phone.
func noSideScroll(t *testing.T, ctx context.Context, where string) {
	t.Helper()
	if w := eval[int](t, ctx, `document.scrollingElement.scrollWidth`); w > 390 {
		t.Errorf("%s: the page is %d px wide at 390 px: it scrolls sideways", where, w)
	}
}

// box is an element's size in CSS pixels (0 when absent or hidden).
func box(t *testing.T, ctx context.Context, sel string) (w, h float64) {
	t.Helper()
	r := eval[[]float64](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q);
		if (!e) return [0, 0]; const r = e.getBoundingClientRect(); return [r.width, r.height]; })()`, sel))
	return r[0], r[1]
}

// TestBrowserPhone: at 390 px the page never scrolls sideways, the threads
// list and the thread are two views with a back button, the message box
// and the approval buttons are at least 44 px (a thumb), and an approval
// given there is recorded with its approver.
func TestBrowserPhone(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice, bob := tab(t, bctx, "alice"), tab(t, bctx, "bob")
	phone(t, alice)
	phone(t, bob)
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#thread-list")))
	noSideScroll(t, alice, "the threads list")
	if eval[bool](t, alice, `document.querySelector("#posts").checkVisibility()`) {
		t.Error("at 390 px the threads list and the thread show side by side")
	}
	do(t, alice, "start a thread", chromedp.Click(chromedp.CSS("#new-thread")), chromedp.WaitVisible(chromedp.CSS("#text")))
	if eval[bool](t, alice, `document.querySelector("#thread-list").checkVisibility()`) {
		t.Error("the thread view still shows the threads list")
	}
	if w, h := box(t, alice, "#text"); h < 44 || w < 200 {
		t.Errorf("the message box is %.0f x %.0f px, want at least 200 x 44", w, h)
	}
	send(t, alice, "please create the marker")
	waitText(t, alice, "#posts", "Approval needed")
	noSideScroll(t, alice, "a thread with an approval card")
	tid := currentThread(t, alice)
	ask := r.waitPost(tid, "Approval needed")
	shot(t, alice, "20-phone-thread")

	do(t, alice, "back to the threads", chromedp.Click(chromedp.CSS("#back")), chromedp.WaitVisible(chromedp.CSS("#thread-list")))
	if eval[bool](t, alice, `document.querySelector("#posts").checkVisibility()`) {
		t.Error("after Back the thread still shows")
	}
	waitText(t, alice, "#thread-list", "please create the marker")
	noSideScroll(t, alice, "the threads list with a thread")

	do(t, bob, "open the thread as bob", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	for _, a := range []string{"approve", "deny"} {
		if w, h := box(t, bob, approvalButton(ask.ID, a)); w < 44 || h < 44 {
			t.Errorf("the %s button is %.0f x %.0f px, want at least 44 x 44", a, w, h)
		}
	}
	if w, h := box(t, bob, "#back"); w < 44 || h < 44 {
		t.Errorf("the back button is %.0f x %.0f px, want at least 44 x 44", w, h)
	}
	noSideScroll(t, bob, "the approver's thread")
	do(t, bob, "bob approves with a thumb", chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitText(t, bob, "#post-"+ask.ID, "Approved by @bob")
	waitText(t, bob, "#posts", "Created approved.txt")
}

// stubNotifications replaces the page's Notification API with one that
// grants permission and records each notification's title in
// window.notes (headless Chromium shows none).
const stubNotifications = `window.notes = []; window.Notification = class {
	constructor(title) { window.notes.push(title); }
	static get permission() { return window.granted ? "granted" : "default"; }
	static requestPermission() { window.granted = true; return Promise.resolve("granted"); }
}; true`

// TestBrowserInbox: a request waits in every viewer's inbox with a count
// in the header, its age and expiry; an approver who opted in is notified
// when it arrives; the requester's approve from the inbox is refused by the
// two-person rule as in the thread; the other approver's approve from the
// inbox runs the command and is recorded with the approver.
func TestBrowserInbox(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice, bob, carol := tab(t, bctx, "alice"), tab(t, bctx, "bob"), tab(t, bctx, "carol")
	for _, c := range []context.Context{alice, bob, carol} {
		do(t, c, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#inbox-open")))
		waitText(t, c, "#inbox-count", "0")
	}
	eval[bool](t, bob, stubNotifications)
	do(t, bob, "bob opens the inbox and opts in to notifications", chromedp.Click(chromedp.CSS("#inbox-open")),
		chromedp.WaitVisible(chromedp.CSS("#notify")), chromedp.Click(chromedp.CSS("#notify")),
		chromedp.WaitNotVisible(chromedp.CSS("#notify")))

	send(t, alice, "please create the marker")
	waitText(t, alice, "#posts", "Approval needed")
	tid := currentThread(t, alice)
	ask := r.waitPost(tid, "Approval needed")
	item := fmt.Sprintf("#inbox-list li[data-post=%q]", ask.ID)
	for _, c := range []context.Context{alice, bob, carol} {
		waitText(t, c, "#inbox-count", "1")
	}
	waitText(t, bob, item, "asked by alice")
	waitText(t, bob, item, "waiting ")
	waitText(t, bob, item, "expires ")
	waitText(t, bob, item, "echo ran >>approved.txt")
	if title := eval[string](t, bob, `document.title`); title[:4] != "(1) " {
		t.Errorf("the tab's title is %q, want the count first", title)
	}
	waitFor(t, "bob's notification", func() bool { return eval[int](t, bob, `window.notes.length`) == 1 })
	if n := eval[string](t, bob, `window.notes[0]`); n != "Approval needed: please create the marker" {
		t.Errorf("notification %q", n)
	}
	shot(t, bob, "21-inbox")
	// carol may not decide: the inbox shows no buttons to her.
	do(t, carol, "carol opens the inbox", chromedp.Click(chromedp.CSS("#inbox-open")), chromedp.WaitVisible(chromedp.CSS(item)))
	waitText(t, carol, item, "Deciding needs the approver role")
	if n := eval[int](t, carol, `document.querySelectorAll("#inbox-list button[data-action]").length`); n != 0 {
		t.Errorf("carol's inbox has %d buttons", n)
	}
	// alice asked: the two-person rule refuses her, from the inbox too.
	do(t, alice, "alice approves her own request from the inbox", chromedp.Click(chromedp.CSS("#inbox-open")),
		chromedp.WaitVisible(chromedp.CSS(item+" button[data-action=approve]")), chromedp.Click(chromedp.CSS(item+" button[data-action=approve]")))
	waitText(t, alice, "#inbox-note", "two-person rule")
	waitText(t, alice, "#inbox-count", "1")
	// A refresh (every 4 s, and at each event) keeps the item's elements:
	// a button replaced between its press and release would lose the
	// click, and the keyboard focus would drop.
	approve := fmt.Sprintf("document.querySelector(%q)", item+" button[data-action=approve]")
	age := fmt.Sprintf("document.querySelector(%q).textContent", item+" .age")
	eval[bool](t, bob, "window.keptAge = "+age+"; window.kept = "+approve+"; window.kept.focus(); true")
	waitFor(t, "an inbox refresh", func() bool { return eval[bool](t, bob, age+" !== window.keptAge") })
	if !eval[bool](t, bob, "window.kept.isConnected && window.kept === "+approve) {
		t.Error("an inbox refresh replaced the Approve button")
	}
	if !eval[bool](t, bob, "document.activeElement === window.kept") {
		t.Error("an inbox refresh took the keyboard focus off the Approve button")
	}
	// bob approves from the inbox, without opening the thread.
	do(t, bob, "bob approves from the inbox", chromedp.Click(chromedp.CSS(item+" button[data-action=approve]")))
	waitText(t, bob, "#inbox-count", "0")
	waitText(t, alice, "#posts", "Created approved.txt")
	waitText(t, alice, "#post-"+ask.ID, "Approved by @bob")
	shot(t, bob, "22-inbox-after-approve")
	var by []string
	for ev, err := range r.db.Events("web/console/"+tid, 1) {
		if err == nil && ev.Type == "approval_decision" {
			var p agentcore.ApprovalDecidedPayload
			if json.Unmarshal(ev.Payload, &p) == nil && p.Approved {
				by = append(by, p.By)
			}
		}
	}
	if len(by) != 1 || by[0] != "user:bob" {
		t.Errorf("the chain's approvals of the thread: %v, want one by user:bob", by)
	}
}

// TestBrowserStopWhileTheModelWorks: between a message and the model's
// first word the thread shows "thinking"; the Stop button is there while
// the model thinks and while it writes, and it ends the run at once.
func TestBrowserStopWhileTheModelWorks(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice := tab(t, bctx, "alice")
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#composer")))
	if eval[bool](t, alice, `document.querySelector("#stop").checkVisibility()`) {
		t.Error("a Stop button with nothing running")
	}

	// The model thinks (it would for an hour): "thinking" and Stop show.
	send(t, alice, "think hard")
	do(t, alice, "thinking shows", chromedp.WaitVisible(chromedp.CSS("#thinking")), chromedp.WaitVisible(chromedp.CSS("#stop")))
	waitText(t, alice, "#thinking", "thinking")
	shot(t, alice, "23-thinking")
	do(t, alice, "stop the thinking model", chromedp.Click(chromedp.CSS("#stop")))
	waitText(t, alice, "#posts", "/stop")
	do(t, alice, "the run ends", chromedp.WaitNotPresent(chromedp.CSS("#thinking")), chromedp.WaitNotVisible(chromedp.CSS("#stop")))
	tid := currentThread(t, alice)
	waitFor(t, "the cancelled run in the chain", func() bool { return cancelledRuns(r, tid) == 1 })

	// The model writes (for 20 s): Stop is there and ends the answer.
	send(t, alice, "write slowly")
	waitText(t, alice, "#posts", "First words.")
	do(t, alice, "Stop shows while the model writes", chromedp.WaitVisible(chromedp.CSS("#stop")))
	if eval[bool](t, alice, `!!document.querySelector("#thinking")`) {
		t.Error("still thinking after the first words")
	}
	shot(t, alice, "24-writing-stop")
	do(t, alice, "stop the writing model", chromedp.Click(chromedp.CSS("#stop")))
	waitFor(t, "the second cancelled run in the chain", func() bool { return cancelledRuns(r, tid) == 2 })
	do(t, alice, "the stream ends", chromedp.WaitNotPresent(chromedp.CSS("#posts .post.streaming")), chromedp.WaitNotVisible(chromedp.CSS("#stop")))
	if eval[bool](t, alice, `document.querySelector("#posts").textContent.includes("THE END.")`) {
		t.Error("the whole answer arrived: Stop did not stop the model")
	}
}

// cancelledRuns counts the thread's cancelled runs in the chain.
func cancelledRuns(r *rig, tid string) int {
	n := 0
	for ev, err := range r.db.Events("web/console/"+tid, 1) {
		if err == nil && ev.Type == "run_finished" && strings.Contains(string(ev.Payload), `"cancelled"`) {
			n++
		}
	}
	return n
}

// TestBrowserFullOutputAndCopy: a command's output cut to its first lines
// opens in full, read from the chain, and a code block's Copy button puts
// its text on the clipboard.
func TestBrowserFullOutputAndCopy(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice := tab(t, bctx, "alice")
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#composer")))
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(alice, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
			Permission: &cdpbrowser.PermissionDescriptor{Name: name}, Setting: cdpbrowser.PermissionSettingGranted, Origin: r.url}); err != nil {
			t.Fatalf("allow %s: %v", name, err)
		}
	}
	send(t, alice, "show the big log")
	waitText(t, alice, "#posts", "That was long.")
	do(t, alice, "the cut output", chromedp.WaitVisible(chromedp.CSS("#posts button.more")))
	more := `document.querySelector("#posts button.more")`
	label := eval[string](t, alice, more+`.textContent`)
	pre := more + `.parentElement.querySelector("pre")`
	if n := eval[int](t, alice, pre+`.textContent.split("\n").length`); n >= 2000 {
		t.Fatalf("the output shows %d lines before the click (%s)", n, label)
	}
	eval[bool](t, alice, more+`.click() || true`)
	waitText(t, alice, "#posts", "Show less")
	lines := eval[[]string](t, alice, pre+`.textContent.split("\n")`)
	if len(lines) != 2000 || lines[0] != "1" || lines[1999] != "2000" {
		t.Errorf("the whole output has %d lines (%q ... %q), want 1 to 2000", len(lines), lines[0], lines[len(lines)-1])
	}
	shot(t, alice, "25-full-output")
	eval[bool](t, alice, pre+`.parentElement.querySelector("button.copy").click() || true`)
	waitText(t, alice, "#posts", "Copied")
	got := eval[string](t, alice, `navigator.clipboard.readText()`)
	if strings.Count(got, "\n") != 1999 || !strings.HasSuffix(got, "\n2000") {
		t.Errorf("the clipboard holds %d bytes, %d lines; want the whole output", len(got), strings.Count(got, "\n")+1)
	}
	// The API reads the chain: an unknown command is a JSON 404.
	tid := currentThread(t, alice)
	res := eval[string](t, alice, `fetch("/api/threads/`+tid+`/output?command=nope&after=2000-01-01T00:00:00Z&n=0").then(r => r.status + " " + r.headers.get("Content-Type"))`)
	if res != "404 application/json" {
		t.Errorf("output of an unknown command: %s", res)
	}
}

// TestBrowserOnCallDetails: times in local time with UTC on hover; /help
// written for the console; /api/ errors as JSON the page shows; a model's
// HTTP 500 said as such; the message box labelled and the posts a live
// region; dark mode when the system asks for it.
func TestBrowserOnCallDetails(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice, audrey := tab(t, bctx, "alice"), tab(t, bctx, "audrey")
	// A time zone far from UTC, and the dark system setting.
	if _, err := chromedp.Call(alice, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(alice, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#composer")))
	if bg := eval[string](t, alice, `getComputedStyle(document.body).backgroundColor`); bg != "rgb(15, 19, 24)" {
		t.Errorf("dark system setting: the page's background is %s", bg)
	}
	if l := eval[string](t, alice, `document.querySelector("#text").getAttribute("aria-label") || ""`); l == "" {
		t.Error("the message box has no label")
	}
	if l := eval[string](t, alice, `document.querySelector("#posts").getAttribute("aria-live") || ""`); l != "polite" {
		t.Errorf("the posts' aria-live is %q, want polite", l)
	}

	send(t, alice, "/help")
	waitText(t, alice, "#posts", "write a task in the box below")
	if eval[bool](t, alice, `document.querySelector("#posts").textContent.includes("mention me")`) {
		t.Error("/help in the console speaks of mentions")
	}
	// 2026-12-01T10:00:00Z is 15:30:00 in Kolkata.
	tm := eval[[]string](t, alice, `(() => { const e = document.querySelector("#posts .post time");
		const d = new Date(e.dateTime); return [e.textContent, e.title, String(d.getUTCHours()), String(d.getUTCMinutes()), String(d.getUTCSeconds())]; })()`)
	h, m, sec := atoi(tm[2]), atoi(tm[3]), atoi(tm[4])
	mins := (h*60 + m + 330) % (24 * 60)
	if want := fmt.Sprintf("%02d:%02d:%02d GMT+5:30", mins/60, mins%60, sec); tm[0] != want {
		t.Errorf("a post's time reads %q, want the local %q, the zone named", tm[0], want)
	}
	if want := fmt.Sprintf("%02d:%02d:%02d UTC", h, m, sec); !strings.HasSuffix(tm[1], want) {
		t.Errorf("a post's time's title is %q, want it to end in %q", tm[1], want)
	}

	send(t, alice, "break the model")
	waitText(t, alice, "#posts", "HTTP 500 Internal Server Error")
	if eval[bool](t, alice, `document.querySelector("#posts").textContent.includes("could not reach")`) {
		t.Error("a model's HTTP 500 is reported as unreachable")
	}
	shot(t, alice, "26-dark-help-500")

	// /api/ errors are JSON: the role check, an unknown post's file.
	do(t, audrey, "open the viewer", chromedp.Navigate(r.url+"/audit"), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	res := eval[[]string](t, audrey, `fetch("/api/threads", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({text: "hello"})}).then(async r => [String(r.status), r.headers.get("Content-Type"), (await r.json()).error])`)
	if res[0] != "403" || res[1] != "application/json" || !strings.Contains(res[2], "needs the user role") {
		t.Errorf("an auditor's message: %q, want a JSON 403 naming the role", res)
	}
	tid := currentThread(t, alice)
	res = eval[[]string](t, alice, `fetch("/api/threads/`+tid+`/posts/nope/file").then(async r => [String(r.status), r.headers.get("Content-Type"), (await r.json()).error])`)
	if res[0] != "404" || res[1] != "application/json" || res[2] == "" {
		t.Errorf("an unknown file: %q, want a JSON 404", res)
	}
	// The page shows an API error's text: a message to a forgotten thread.
	eval[bool](t, alice, `history.replaceState(null, "", "/#gone"); dispatchEvent(new HashChangeEvent("hashchange")); true`)
	send(t, alice, "hello?")
	waitText(t, alice, "#posts", "Not sent: no such thread")
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// TestBrowserScreens writes the screenshots a reviewer looks at, desktop
// (1280x800) and phone (390x844), to testdata/screens, when
// THINBOT_SCREENSHOTS=1 (so that ordinary runs leave the tree clean):
//
//	THINBOT_SCREENSHOTS=1 go test -run TestBrowserScreens ./bot/web
func TestBrowserScreens(t *testing.T) {
	if os.Getenv("THINBOT_SCREENSHOTS") != "1" {
		t.Skip("set THINBOT_SCREENSHOTS=1 to write testdata/screens")
	}
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice, bob := tab(t, bctx, "alice"), tab(t, bctx, "bob")
	save := func(ctx context.Context, name string) {
		t.Helper()
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
	if err := os.MkdirAll(filepath.Join("testdata", "screens"), 0o755); err != nil {
		t.Fatal(err)
	}
	do(t, alice, "desktop", chromedp.EmulateViewport(1280, 800))
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#composer")))
	send(t, alice, "please check the disk")
	waitText(t, alice, "#posts", "plenty of room left for the logs.")
	do(t, alice, "new thread", chromedp.Click(chromedp.CSS("#new-thread")))
	send(t, alice, "show the big log")
	waitText(t, alice, "#posts", "That was long.")
	do(t, alice, "new thread", chromedp.Click(chromedp.CSS("#new-thread")))
	send(t, alice, "please create the marker")
	waitText(t, alice, "#posts", "Approval needed")
	tid := currentThread(t, alice)
	ask := r.waitPost(tid, "Approval needed")
	waitText(t, alice, "#inbox-count", "1")
	save(alice, "desktop-approval")
	do(t, alice, "open the inbox", chromedp.Click(chromedp.CSS("#inbox-open")), chromedp.WaitVisible(chromedp.CSS("#inbox-list li.item")))
	save(alice, "desktop-inbox")

	phone(t, bob)
	do(t, bob, "bob's phone: the threads", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#thread-list")))
	waitText(t, bob, "#inbox-count", "1")
	waitText(t, bob, "#thread-list", "please create the marker")
	save(bob, "phone-threads")
	do(t, bob, "bob's phone: the inbox", chromedp.Click(chromedp.CSS("#inbox-open")), chromedp.WaitVisible(chromedp.CSS("#inbox-list li.item")))
	save(bob, "phone-inbox")
	do(t, bob, "bob's phone: the thread", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	eval[bool](t, bob, `document.querySelector("#post-`+ask.ID+`").scrollIntoView(); true`)
	save(bob, "phone-approval")
	do(t, bob, "approve", chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitText(t, bob, "#posts", "Created approved.txt")
	save(bob, "phone-approved")
	if _, err := chromedp.Call(bob, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	save(bob, "phone-approved-dark")
}
