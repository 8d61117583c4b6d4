package bot

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// fakeAM is an Alertmanager's v2 silence API: it keeps the silences it
// was given and the Authorization headers it saw.
type fakeAM struct {
	mu       sync.Mutex
	silences map[string]amSilence
	expired  []string
	auth     []string
	n        int
}

func (f *fakeAM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	switch {
	case r.Method == "POST" && r.URL.Path == "/api/v2/silences":
		var s amSilence
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil || len(s.Matchers) == 0 || s.CreatedBy == "" || s.Comment == "" {
			http.Error(w, `"bad silence"`, http.StatusBadRequest)
			return
		}
		f.n++
		id := "sil-" + string(rune('0'+f.n))
		f.silences[id] = s
		json.NewEncoder(w).Encode(map[string]string{"silenceID": id})
	case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/api/v2/silence/"):
		id := strings.TrimPrefix(r.URL.Path, "/api/v2/silence/")
		if _, ok := f.silences[id]; !ok {
			http.Error(w, `"silence not found"`, http.StatusNotFound)
			return
		}
		delete(f.silences, id)
		f.expired = append(f.expired, id)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusTeapot)
	}
}

func (f *fakeAM) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.silences)
}

// TestAlertSilence: /silence in an alert's thread asks for an approval
// showing what will be silenced for how long; denied, Alertmanager gets
// nothing; approved, it gets exactly the group's matchers for that long,
// with the configured credentials, and the chain holds the request, the
// decision and Alertmanager's silence id, which the card shows;
// /unsilence, approved, expires it.
func TestAlertSilence(t *testing.T) {
	am := &fakeAM{silences: map[string]amSilence{}}
	srv := httptest.NewServer(am)
	defer srv.Close()
	r := newRig(t, cmdModel{cmd: "true"}, Channel{Approvers: []string{"U2"}, TwoPerson: true}, Config{})
	h := r.alerts(t, AlertsConfig{Routes: []AlertRoute{{Name: "ops", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}},
		Alertmanager: Alertmanager{URL: srv.URL, BearerToken: []byte("am-secret")}})
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
		t.Fatalf("deliver: %d %s", w.Code, w.Body)
	}
	card := r.ad.rootPosts()[0]
	th := Thread{Platform: "fake", Channel: "C1", Root: card.id}
	seen := map[string]bool{}
	ask := func(id, text string) fakePost {
		t.Helper()
		r.say(alice, th, id, text, true)
		p := r.ad.waitPost(t, th, func(p Post) bool { return len(p.Buttons) == 2 && !seen[p.Value] })
		seen[p.post.Value] = true
		return p
	}
	click := func(req fakePost, u User, action string) ClickResult {
		return r.b.HandleClick(r.ctx, Click{Thread: th, PostID: req.id, ActionID: action, Value: req.post.Value, User: u})
	}

	// Denied: nothing reaches Alertmanager.
	req := ask("m1", "/silence 2h m1 cleanup under way")
	for _, want := range []string{"request asks thinbot to change Alertmanager:", "silence in Alertmanager for 2h0m0s", `alertname="DiskFull"`, "comment: m1 cleanup under way", "alertmanager-silence"} {
		if !strings.Contains(req.post.Text, want) {
			t.Errorf("approval card lacks %q:\n%s", want, req.post.Text)
		}
	}
	if res := click(req, alice, ActionApprove); !strings.Contains(res.Ephemeral, "two-person") {
		t.Fatalf("the requester's own approve = %+v", res)
	}
	if res := click(req, bob, ActionDeny); res.Update == nil || !strings.Contains(res.Update.Text, "Denied") {
		t.Fatalf("deny = %+v", res)
	}
	waitFor(t, "the denial in the chain", func() bool {
		return len(sessionEvents[agentcore.ApprovalDecidedPayload](t, r.db, th.Key(), agentcore.EvApprovalDecided)) == 1
	})
	if n := am.count(); n != 0 {
		t.Fatalf("a denied silence reached Alertmanager: %d silences", n)
	}

	// Approved: the silence is created for the group, for 2h.
	req = ask("m2", "/silence 2h m2 disk cleanup")
	if res := click(req, bob, ActionApprove); res.Update == nil || !strings.Contains(res.Update.Text, "Approved") {
		t.Fatalf("approve = %+v", res)
	}
	r.ad.waitPost(t, th, contains("🔕 Silenced in Alertmanager until"))
	am.mu.Lock()
	s, ok := am.silences["sil-1"]
	auth := am.auth
	am.mu.Unlock()
	if !ok || len(s.Matchers) != 1 || s.Matchers[0] != (amMatcher{Name: "alertname", Value: "DiskFull", IsEqual: true}) ||
		s.EndsAt.Sub(s.StartsAt) != 2*time.Hour || s.CreatedBy != "alice (thinbot)" || s.Comment != "m2 disk cleanup" {
		t.Fatalf("Alertmanager's silence = %+v (%v)", s, ok)
	}
	if auth[len(auth)-1] != "Bearer am-secret" {
		t.Errorf("Alertmanager saw Authorization %q", auth[len(auth)-1])
	}
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1"}, contains("🔕 **Silenced** until"))
	sil := sessionEvents[agentcore.AlertSilencePayload](t, r.db, th.Key(), agentcore.EvAlertSilence)
	if len(sil) != 1 || sil[0].Action != "created" || sil[0].SilenceID != "sil-1" || sil[0].By != "user:U2 (bob)" || sil[0].GroupKey != "g1" {
		t.Fatalf("silence records = %+v", sil)
	}
	asked := sessionEvents[agentcore.ApprovalAskedPayload](t, r.db, th.Key(), agentcore.EvApprovalAsked)
	if len(asked) != 2 || asked[1].RequestID != sil[0].RequestID || !strings.Contains(asked[1].Command, `alertname="DiskFull"`) || asked[1].SHA256 == "" {
		t.Fatalf("approval requests = %+v", asked)
	}

	// /unsilence, approved, expires it.
	req = ask("m3", "/unsilence")
	if !strings.Contains(req.post.Text, "expire silence sil-1") {
		t.Errorf("unsilence card:\n%s", req.post.Text)
	}
	click(req, bob, ActionApprove)
	r.ad.waitPost(t, th, contains("Silence `sil-1` expired"))
	if n := am.count(); n != 0 {
		t.Fatalf("%d silences left after /unsilence", n)
	}
	groups, _, err := agentcore.AlertGroups(r.db, time.Now().Add(-time.Hour))
	if err != nil || groups["g1"].Silence != nil {
		t.Fatalf("AlertGroups after /unsilence = %+v, %v", groups["g1"], err)
	}
}

func TestParseSilence(t *testing.T) {
	for _, tc := range []struct {
		in      string
		d       time.Duration
		comment string
		bad     bool
	}{
		{"2h", 2 * time.Hour, "", false},
		{"90m  the disk is being cleaned ", 90 * time.Minute, "the disk is being cleaned", false},
		{"1d", 24 * time.Hour, "", false},
		{"7d", 7 * 24 * time.Hour, "", false},
		{"8d", 0, "", true},
		{"30s", 0, "", true},
		{"", 0, "", true},
		{"soon", 0, "", true},
		{"-2h", 0, "", true},
		{"1000000000d", 0, "", true},
	} {
		d, c, err := ParseSilence(tc.in)
		if (err != nil) != tc.bad || d != tc.d || c != tc.comment {
			t.Errorf("ParseSilence(%q) = %v, %q, %v", tc.in, d, c, err)
		}
	}
}

func FuzzParseSilence(f *testing.F) {
	for _, s := range []string{"2h", "1d why", "9999999999999d", "-1d", "1.5h x\ny"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, c, err := ParseSilence(s)
		if err != nil {
			return
		}
		if d < time.Minute || d > maxSilence || strings.ContainsAny(c, "\n\r") {
			t.Errorf("ParseSilence(%q) = %v, %q", s, d, c)
		}
	})
}
