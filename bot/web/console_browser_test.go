package web

import (
	"context"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
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
