package bot

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones without /usr/share/zoneinfo
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestChatTimesInTheConfiguredZone: the times the bot writes into a
// thread (approval expiry, in the card and in /status; who approved and
// when; the alert card's start and end; the timeline's days) are in
// Config.Location, or the channel's Location where it has one, with the
// zone's abbreviation; without either, UTC as before.
func TestChatTimesInTheConfiguredZone(t *testing.T) {
	kolkata, newYork := mustZone(t, "Asia/Kolkata"), mustZone(t, "America/New_York")
	// Far ahead, so that the approval never expires under the test.
	now := time.Date(2030, 1, 15, 2, 12, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                   string
		cfg, ch                *time.Location
		expires, approved      string
		started, resolved, day string
	}{
		{"default UTC", nil, nil, "expires 02:27 UTC", "at 02:12:00 UTC",
			"**Started:** 2026-12-01 03:12:00 UTC", "**Resolved** at 2026-12-01 03:54:00 UTC", `^\*\*\d{4}-\d\d-\d\d\*\*$`},
		{"global zone", kolkata, nil, "expires 07:57 IST", "at 07:42:00 IST",
			"**Started:** 2026-12-01 08:42:00 IST", "**Resolved** at 2026-12-01 09:24:00 IST", `^\*\*\d{4}-\d\d-\d\d\*\* \(IST, UTC\+05:30\)$`},
		{"channel's zone first", kolkata, newYork, "expires 21:27 EST", "at 21:12:00 EST",
			"**Started:** 2026-11-30 22:12:00 EST", "**Resolved** at 2026-11-30 22:54:00 EST", `^\*\*\d{4}-\d\d-\d\d\*\* \(E[SD]T, UTC-0[45]:00\)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, cmdModel{cmd: "touch x"}, Channel{Approvers: []string{"U2"}, Location: tc.ch},
				Config{Location: tc.cfg, Now: func() time.Time { return now }})
			r.say(alice, th1, "m1", "go", true)
			req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
			if !strings.Contains(req.post.Text, tc.expires) {
				t.Errorf("approval card lacks %q:\n%s", tc.expires, req.post.Text)
			}
			r.say(alice, th1, "m2", "/status", true)
			r.ad.waitPost(t, th1, contains("Waiting for approval: `touch x` (request `"))
			r.ad.waitPost(t, th1, contains(tc.expires+")"))
			res := r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: req.id, ActionID: ActionApprove, Value: req.post.Value, User: bob})
			if res.Update == nil || !strings.Contains(res.Update.Text, "**Approved** by @bob "+tc.approved+" — running.") {
				t.Fatalf("approve click = %+v, want %q", res, tc.approved)
			}
			r.ad.waitPost(t, th1, contains("finished: exit code: 0"))

			m, _ := ParseMatcher(`severity="critical"`)
			h := r.alerts(t, AlertsConfig{Routes: []AlertRoute{{Name: "ops", Matchers: []Matcher{m}, Channel: "C1"}}})
			if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
				t.Fatalf("firing: %d %s", w.Code, w.Body)
			}
			if w := deliver(h, testAlertToken, alertBody("g1", "resolved", diskAlert("resolved"))); w.Code != http.StatusOK {
				t.Fatalf("resolved: %d %s", w.Code, w.Body)
			}
			var card fakePost
			for _, p := range r.ad.rootPosts() {
				if strings.Contains(p.post.Text, "DiskFull") {
					card = p
				}
			}
			// The card, updated on resolve, shows both ends.
			for _, want := range []string{tc.started, " · **Resolved:** " + strings.TrimPrefix(tc.resolved, "**Resolved** at ") + " after 42m0s"} {
				if !strings.Contains(card.post.Text, want) {
					t.Errorf("alert card lacks %q:\n%s", want, card.post.Text)
				}
			}
			r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: card.id}, contains(tc.resolved+": fired for 42m0s."))

			r.say(alice, th1, "m3", "/timeline", true)
			tl := r.ad.waitPost(t, th1, contains("# Incident timeline")).post.Text
			day := regexp.MustCompile(tc.day)
			days := 0
			for _, l := range strings.Split(tl, "\n") {
				if strings.HasPrefix(l, "**20") {
					days++
					if !day.MatchString(l) {
						t.Errorf("timeline day heading %q, want it to match %s", l, tc.day)
					}
				}
			}
			if days == 0 {
				t.Errorf("timeline has no day heading:\n%s", tl)
			}
		})
	}
}
