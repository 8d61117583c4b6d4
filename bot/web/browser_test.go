package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/thinbot/thinbot/store"
)

// These tests drive the console in headless Chromium. CI installs Debian's
// chromium (.ci/run); elsewhere they are skipped when it is missing.

// screenshotDir is where the tests write screenshots of the main pages
// (ignored by git).
const screenshotDir = "../../tests/screenshots"

// browserWait bounds each wait for the page.
const browserWait = 30 * time.Second

// browser starts a headless Chromium for the test and returns its first
// tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed, and CI must run the browser tests (.ci/run installs Debian's chromium)")
		}
		t.Skip("browser tests skipped: chromium is not installed (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 820),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
	})
	if err := chromedp.Do(bctx); err != nil { // starts the browser, without a timeout
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// tab opens a tab in which every request carries the proxy's user header
// (user "" sends none: the loopback operator).
func tab(t *testing.T, bctx context.Context, user string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(bctx)
	t.Cleanup(cancel)
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if user != "" {
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"X-Forwarded-User": user}}); err != nil {
			t.Fatal(err)
		}
	}
	return ctx
}

// do runs steps in a tab, failing the test after browserWait.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		shot(t, ctx, "failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JS expression (awaiting a promise) in a tab.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, browserWait)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitText waits until the element sel contains want.
func waitText(t *testing.T, ctx context.Context, sel, want string) {
	t.Helper()
	expr := fmt.Sprintf(`new Promise((ok) => { const f = () => { const e = document.querySelector(%q);
		if (e && e.textContent.includes(%q)) ok(true); else setTimeout(f, 25); }; f(); })`, sel, want)
	c, cancel := context.WithTimeout(ctx, browserWait)
	defer cancel()
	if _, err := chromedp.Run(c, chromedp.Evaluate[bool](expr, chromedp.EvalAwaitPromise)); err != nil {
		shot(t, ctx, "failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||document.body).textContent`, sel)))
		t.Fatalf("waiting for %q in %s: %v\npage text: %s", want, sel, err, text)
	}
}

// shot writes a PNG screenshot of the tab's whole page.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	screenshot(t, ctx, name, chromedp.FullScreenshot(100))
}

// screenshot writes a PNG screenshot taken by capture.
func screenshot(t *testing.T, ctx context.Context, name string, capture chromedp.Action[[]byte]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, browserWait)
	defer cancel()
	buf, err := chromedp.Run(c, capture)
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Logf("screenshot dir: %v", err)
		return
	}
	p := filepath.Join(screenshotDir, name+".png")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
}

// send types a message in the composer and sends it.
func send(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	do(t, ctx, "send "+text,
		chromedp.WaitVisible(chromedp.CSS("#text")),
		chromedp.SendKeys(chromedp.CSS("#text"), text),
		chromedp.WaitEnabled(chromedp.CSS("#send")), // the previous message is sent
		chromedp.Click(chromedp.CSS("#send")),
	)
}

// currentThread is the thread the tab shows.
func currentThread(t *testing.T, ctx context.Context) string {
	t.Helper()
	var id string
	waitFor(t, "the page to open its thread", func() bool {
		id = eval[string](t, ctx, `decodeURIComponent(location.hash.slice(1))`)
		return id != ""
	})
	return id
}

// approvalButton is the CSS selector of an approval post's button.
func approvalButton(postID, action string) string {
	return fmt.Sprintf("#post-%s button[data-action=%q]", postID, action)
}

func TestBrowserConsole(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice, bob, carol := tab(t, bctx, "alice"), tab(t, bctx, "bob"), tab(t, bctx, "carol")

	// A thread: the scripted model's answer streams in, and shows once.
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#composer")))
	paint := eval[float64](t, alice, `new Promise((ok) => { const f = () => {
		const p = performance.getEntriesByName("first-contentful-paint")[0]; if (p) ok(p.startTime); else setTimeout(f, 20); }; f(); })`)
	t.Logf("console first contentful paint: %.0f ms after navigation start", paint)
	shot(t, alice, "01-console-empty")
	send(t, alice, "please check the disk")
	waitText(t, alice, "#posts", "plenty of room left for the logs.")
	if n := eval[int](t, alice, `[...document.querySelectorAll("#posts .post.bot")].filter(p => p.textContent.includes("The disk is fine")).length`); n != 1 {
		t.Errorf("the answer shows %d times in the page, want once", n)
	}
	if eval[int](t, alice, `document.querySelectorAll("#posts .post.bot strong").length`) == 0 {
		t.Errorf("the answer's **bold** was not rendered")
	}
	do(t, alice, "wait for the answer to settle", chromedp.WaitNotPresent(chromedp.CSS(".post.streaming")))
	shot(t, alice, "02-console-answer")

	// An approval: carol (no approver) is refused, alice (the requester,
	// two-person rule) is refused, bob approves and the command runs once;
	// a second click is refused.
	do(t, alice, "new thread", chromedp.Click(chromedp.CSS("#new-thread")))
	send(t, alice, "please create the marker")
	waitText(t, alice, "#posts", "Approval needed")
	tid := currentThread(t, alice)
	ask := r.waitPost(tid, "Approval needed")
	do(t, carol, "open the thread as carol", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	do(t, carol, "carol clicks Approve", chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitText(t, carol, "#post-"+ask.ID, "you are not an approver for this channel")
	shot(t, carol, "03-approval-refused-carol")
	do(t, alice, "alice clicks Approve", chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitText(t, alice, "#post-"+ask.ID, "two-person rule")
	do(t, bob, "open the thread as bob", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	shot(t, bob, "04-approval-request")
	do(t, bob, "bob clicks Approve", chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitText(t, bob, "#post-"+ask.ID, "Approved")
	waitText(t, bob, "#posts", "Created approved.txt")
	do(t, bob, "the buttons are gone", chromedp.WaitNotPresent(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	shot(t, bob, "05-approval-approved")
	again := eval[string](t, bob, fmt.Sprintf(`fetch("/api/threads/%s/posts/%s/click", {method: "POST",
		headers: {"Content-Type": "application/json"}, body: JSON.stringify({action: "approve"})}).then(r => r.text())`, tid, ask.ID))
	if !strings.Contains(again, "no open request") {
		t.Errorf("a second click answered %s, want refused", again)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "approved.txt")); err != nil || string(b) != "ran\n" {
		t.Errorf("approved.txt = %q, %v; want the command run exactly once", b, err)
	}

	// /stop kills a running command.
	do(t, alice, "new thread", chromedp.Click(chromedp.CSS("#new-thread")))
	send(t, alice, "wait a minute")
	waitText(t, alice, "#posts", "Approval needed")
	tid2 := currentThread(t, alice)
	ask2 := r.waitPost(tid2, "Approval needed")
	do(t, bob, "open the second thread", chromedp.Navigate(r.url+"/#"+tid2), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask2.ID, "approve"))),
		chromedp.Click(chromedp.CSS(approvalButton(ask2.ID, "approve"))))
	waitFor(t, "the command to run", func() bool { return processRunning(sleepCmd) })
	send(t, alice, "/stop")
	waitText(t, alice, "#posts", "Stopped by /stop")
	waitText(t, alice, "#posts", "the process group was killed")
	waitFor(t, "the command's process to be gone", func() bool { return !processRunning(sleepCmd) })
	shot(t, alice, "06-console-stopped")
	var cancelled bool
	for ev, err := range r.db.Events("web/console/"+tid2, 1) {
		if err == nil && ev.Type == "run_finished" && strings.Contains(string(ev.Payload), `"cancelled"`) {
			cancelled = true
		}
	}
	if !cancelled {
		t.Errorf("the chain has no cancelled run for the stopped thread")
	}

	// The audit viewer: sessions, a timeline, approvals; the chain verifies.
	audrey := tab(t, bctx, "audrey")
	do(t, audrey, "open the audit viewer", chromedp.Navigate(r.url+"/audit"), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	waitText(t, audrey, "#chain-status", fmt.Sprintf("verified up to seq %d", r.db.LastSeq()))
	shot(t, audrey, "07-audit-sessions")
	do(t, audrey, "open the approval thread's timeline", chromedp.Navigate(r.url+"/audit/session?id=web/console/"+tid),
		chromedp.WaitVisible(chromedp.CSS("#timeline")))
	for _, want := range []string{"echo ran >>approved.txt", "confirm", "approved", "by user:bob", "exit 0", "refused click"} {
		waitText(t, audrey, "#timeline", want)
	}
	shot(t, audrey, "08-audit-timeline")
	do(t, audrey, "open the approvals", chromedp.Navigate(r.url+"/audit/approvals"), chromedp.WaitVisible(chromedp.CSS("#approvals")))
	waitText(t, audrey, "#approvals", "user:bob")
	shot(t, audrey, "09-audit-approvals")
	export := eval[string](t, audrey, `fetch("/audit/export?session=web/console/`+tid+`").then(r => r.text())`)
	lines := strings.Split(strings.TrimSpace(export), "\n")
	for _, l := range lines {
		var ev store.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Session != "web/console/"+tid || ev.Hash == "" {
			t.Fatalf("export line %q: %v", l, err)
		}
	}
	if len(lines) < 8 {
		t.Errorf("export has %d lines", len(lines))
	}
	// The auditor is read-only: no console, no clicks.
	status := eval[int](t, audrey, fmt.Sprintf(`fetch("/api/threads/%s/messages", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({text: "hello"})}).then(r => r.status)`, tid))
	if status != 403 {
		t.Errorf("an auditor's message: status %d, want 403", status)
	}

	// Token login in the browser: the login page, then the console as carol.
	guest := tab(t, bctx, "")
	do(t, guest, "open the console unsigned", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	shot(t, guest, "00-login")
	do(t, guest, "sign in with a token", chromedp.SendKeys(chromedp.CSS("#token"), "carol-token-0123456789"),
		chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("#composer")))
	waitText(t, guest, ".who", "carol")
	do(t, guest, "sign out", chromedp.Click(chromedp.CSS(".who form button")), chromedp.WaitVisible(chromedp.CSS("#token")))

	// A tampered copy of the store: the viewer says where it breaks.
	bad, badSeq := tamperedCopy(t, r.db, "plenty of room left", "PLENTY OF ROOM LEFT")
	viewer, err := New(Config{Listen: "127.0.0.1:0", Chain: bad})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(viewer.Handler())
	t.Cleanup(hs.Close)
	local := tab(t, bctx, "")
	do(t, local, "open the tampered copy", chromedp.Navigate(hs.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS("#chain-status")))
	waitText(t, local, "#chain-status", fmt.Sprintf("broken at seq %d:", badSeq))
	shot(t, local, "10-audit-broken")
	do(t, local, "open the verification page", chromedp.Navigate(hs.URL+"/audit/verify"), chromedp.WaitVisible(chromedp.CSS("dl.facts")))
	waitText(t, local, "dl.facts", fmt.Sprintf("%d:", badSeq))
	shot(t, local, "11-audit-verify-broken")
}

// tamperedCopy copies the store's file, replaces old with new (same length)
// wherever it occurs in it, and opens the copy read-only. It returns the
// copy and the seq of the event that held old.
func tamperedCopy(t *testing.T, db *store.DB, old, repl string) (*store.DB, uint64) {
	t.Helper()
	var seq uint64
	for ev, err := range db.All(1) {
		if err == nil && seq == 0 && bytes.Contains(ev.Payload, []byte(old)) {
			seq = ev.Seq
		}
	}
	if seq == 0 {
		t.Fatalf("no event holds %q", old)
	}
	b, err := os.ReadFile(db.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("the store file does not hold %q", old)
	}
	p := filepath.Join(t.TempDir(), "events.db")
	if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte(old), []byte(repl)), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := store.Open(p, &store.Options{ReadOnly: true, AuditPath: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cp.Close() })
	return cp, seq
}

// TestBrowserBigSessionFirstPaint opens a page of a 10,000-event session's
// timeline and logs the browser's figures: server response time and first
// contentful paint (Performance API). It asserts nothing about time.
func TestBrowserBigSessionFirstPaint(t *testing.T) {
	db := fillBig(t, 10000)
	viewer, err := New(Config{Listen: "127.0.0.1:0", Chain: db})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(viewer.Handler())
	t.Cleanup(hs.Close)
	bctx := browser(t)
	local := tab(t, bctx, "")
	// Warm the verification cache, as any earlier page view does.
	do(t, local, "open the sessions", chromedp.Navigate(hs.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS("#sessions")))
	do(t, local, "open the big session", chromedp.Navigate(hs.URL+"/audit/session?id="+bigSession+"&after=5000"),
		chromedp.WaitVisible(chromedp.CSS("#next-page")))
	fig := eval[map[string]float64](t, local, `new Promise((ok) => { const f = () => {
		const p = performance.getEntriesByName("first-contentful-paint")[0]; const n = performance.getEntriesByType("navigation")[0];
		if (p && n) ok({fcp: p.startTime, ttfb: n.responseStart - n.requestStart, html: n.responseEnd - n.requestStart, dom: n.domContentLoadedEventEnd});
		else setTimeout(f, 20); }; f(); })`)
	t.Logf("10,000-event session, page of 200 events: server %.0f ms to first byte, %.0f ms to the whole page, DOM ready at %.0f ms, first contentful paint at %.0f ms",
		fig["ttfb"], fig["html"], fig["dom"], fig["fcp"])
	if n := eval[int](t, local, `document.querySelectorAll("#timeline li.ev").length`); n != 200 {
		t.Errorf("the page shows %d events, want 200", n)
	}
	screenshot(t, local, "12-audit-10k-session", chromedp.CaptureScreenshot()) // the viewport: the page is long
}

// postTexts is the text of every post the tab shows, without the time of
// day (a rebuilt post carries its event's time).
func postTexts(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `[...document.querySelectorAll("#posts .post")].map(p =>
		p.querySelector(".post-head strong").textContent + ": " + p.querySelector(".md").textContent.replace(/ at \d\d:\d\d:\d\d UTC/g, " at T") +
		(p.querySelector(".bubble > a") ? " [" + p.querySelector(".bubble > a").textContent + "]" : ""))`)
}

// TestBrowserIntentRunningAndRestart: the model's words before a command
// show above it; after Approve the status says the command runs and who
// approved it while it runs; after a restart the page shows the same
// thread, post for post: cards, approver, outputs, the /audit reply.
func TestBrowserIntentRunningAndRestart(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	alice, bob := tab(t, bctx, "alice"), tab(t, bctx, "bob")
	do(t, alice, "open the console", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#composer")))
	send(t, alice, "wait a minute")
	waitText(t, alice, "#posts", "Approval needed")
	// The intent arrived with the tool call, in one update interval.
	waitText(t, alice, "#posts", "💬 Let me do that.")
	tid := currentThread(t, alice)
	ask := r.waitPost(tid, "Approval needed")
	shot(t, alice, "13-intent-before-approval")
	do(t, bob, "bob approves", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS(approvalButton(ask.ID, "approve"))),
		chromedp.Click(chromedp.CSS(approvalButton(ask.ID, "approve"))))
	waitFor(t, "the command to run", func() bool { return processRunning(sleepCmd) })
	waitText(t, alice, "#posts", sleepCmd+" — running, approved by @bob (confirm)")
	if !processRunning(sleepCmd) {
		t.Error("the command ended before the page said it runs")
	}
	if n := eval[int](t, alice, `[...document.querySelectorAll("#posts .post")].filter(p => p.textContent.includes("waiting for approval")).length`); n != 0 {
		t.Errorf("%d post(s) still say waiting for approval", n)
	}
	shot(t, alice, "14-running-approved-by")
	send(t, alice, "/stop")
	waitText(t, alice, "#posts", "Stopped by /stop")
	waitText(t, alice, "#posts", "Done: 1 step(s).")
	send(t, alice, "/audit")
	waitText(t, alice, "#posts", "approved by user:bob")
	send(t, alice, "show the big log")
	waitText(t, alice, "#posts", "That was long.")
	waitFor(t, "both runs' final status", func() bool {
		return eval[int](t, alice, `[...document.querySelectorAll("#posts .post")].filter(p => p.textContent.includes("Done: 1 step(s).")).length`) == 2
	})
	before := postTexts(t, alice)
	shot(t, alice, "15-thread-before-restart")

	r.restart(t)
	do(t, alice, "reopen the thread on the restarted console", chromedp.Navigate(r.url+"/#"+tid), chromedp.WaitVisible(chromedp.CSS("#composer")))
	waitText(t, alice, "#posts", "That was long.")
	after := postTexts(t, alice)
	shot(t, alice, "16-thread-after-restart")
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("the page differs after a restart.\nbefore (%d posts):\n%s\n\nafter (%d posts):\n%s",
			len(before), strings.Join(before, "\n"), len(after), strings.Join(after, "\n"))
	}
	for _, want := range []string{"Approved by @bob", "💬 Let me do that.", "approved by user:bob", "Full output of seq 1 2000 attached", "output.txt"} {
		if !strings.Contains(strings.Join(after, "\n"), want) {
			t.Errorf("the restored page lacks %q:\n%s", want, strings.Join(after, "\n"))
		}
	}
}

// TestBrowserSignOutEndsTheLogin: a token login made in the browser, whose
// cookie was saved elsewhere, stops working when the browser signs out, and
// a login whose user is removed from the tokens ends at once.
func TestBrowserSignOutEndsTheLogin(t *testing.T) {
	r := newRig(t, rigOpts{})
	bctx := browser(t)
	cookieOf := func(ctx context.Context) *http.Cookie {
		t.Helper()
		res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{r.url}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Cookies {
			if c.Name == sessionCookie {
				return &http.Cookie{Name: c.Name, Value: c.Value}
			}
		}
		t.Fatal("no login cookie in the browser")
		return nil
	}
	replay := func(c *http.Cookie) int {
		req, _ := http.NewRequest("GET", r.url+"/api/threads", nil)
		req.AddCookie(c)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	login := func() (context.Context, *http.Cookie) {
		guest := tab(t, bctx, "")
		do(t, guest, "sign in with a token", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), "carol-token-0123456789"),
			chromedp.Click(chromedp.CSS("main form button")), chromedp.WaitVisible(chromedp.CSS("#composer")))
		c := cookieOf(guest)
		if code := replay(c); code != http.StatusOK {
			t.Fatalf("the saved cookie while signed in: %d", code)
		}
		return guest, c
	}
	guest, saved := login()
	do(t, guest, "sign out", chromedp.Click(chromedp.CSS(".who form button")), chromedp.WaitVisible(chromedp.CSS("#token")))
	if code := replay(saved); code != http.StatusUnauthorized {
		t.Errorf("the saved cookie after signing out: %d, want 401", code)
	}
	// Removed from the tokens file: the open page loses its login.
	guest, _ = login()
	r.srv.SetTokens(map[string]string{"other-token-0123456789": "dave"})
	do(t, guest, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#token")))
	shot(t, guest, "17-signed-out-after-removal")
}
