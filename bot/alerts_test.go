package bot

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
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

const testAlertToken = "s3cret-token-0123456789"

// recModel records the requests of a model and answers as m does.
type recModel struct {
	m    agentcore.Model
	mu   sync.Mutex
	reqs []agentcore.Request
	// gate, if set, is received from before each answer (to hold runs).
	gate chan struct{}
}

func (r *recModel) Complete(ctx context.Context, req agentcore.Request) (agentcore.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	if r.gate != nil {
		select {
		case <-r.gate:
		case <-ctx.Done():
			return agentcore.Response{}, ctx.Err()
		}
	}
	return r.m.Complete(ctx, req)
}

func alertBody(group, status string, alerts ...WebhookAlert) []byte {
	b, _ := json.Marshal(Webhook{Version: "4", GroupKey: group, Status: status, Receiver: "thinbot",
		GroupLabels:  map[string]string{"alertname": alerts[0].Labels["alertname"]},
		CommonLabels: alerts[0].Labels, CommonAnnotations: alerts[0].Annotations, Alerts: alerts})
	return b
}

var fired = time.Date(2026, 12, 1, 3, 12, 0, 0, time.UTC)

func diskAlert(status string) WebhookAlert {
	a := WebhookAlert{Status: status, Fingerprint: "f1", StartsAt: fired,
		Labels: map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": "db1:9100"},
		Annotations: map[string]string{"summary": "Disk `/var` is 97% full **@channel** [click](http://evil)",
			"runbook_url": "https://runbooks.example/disk-full"},
		GeneratorURL: "http://prometheus.example/graph?g0.expr=x",
	}
	if status == "resolved" {
		a.EndsAt = fired.Add(42 * time.Minute)
	}
	return a
}

func (r *rig) alerts(t *testing.T, cfg AlertsConfig) http.Handler {
	t.Helper()
	cfg.Token = []byte(testAlertToken)
	cfg.Platform = "fake"
	if cfg.Routes == nil {
		m, _ := ParseMatcher(`severity=~"critical|warning"`)
		cfg.Routes = []AlertRoute{{Name: "ops", Matchers: []Matcher{m}, Channel: "C1", Investigate: true}}
	}
	h, err := r.b.AlertHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func deliver(h http.Handler, token string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/alerts", strings.NewReader(string(body)))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func (f *fakeAdapter) rootPosts() []fakePost {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakePost
	for _, p := range f.posts {
		if p.thread.Root == "" {
			out = append(out, p)
		}
	}
	return out
}

func TestAlertThread(t *testing.T) {
	model := &recModel{m: cmdModel{cmd: "touch fix.txt"}}
	r := newRig(t, model, Channel{Approvers: []string{"U2"}}, Config{})
	h := r.alerts(t, AlertsConfig{})

	if w := deliver(h, "", alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", w.Code)
	}
	if w := deliver(h, "s3cret-token-012345678X", alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusUnauthorized {
		t.Fatalf("forged token: %d", w.Code)
	}
	if n := len(r.ad.rootPosts()); n != 0 {
		t.Fatalf("forged deliveries posted %d cards", n)
	}

	body := alertBody("g1", "firing", diskAlert("firing"))
	if w := deliver(h, testAlertToken, body); w.Code != http.StatusOK {
		t.Fatalf("firing: %d %s", w.Code, w.Body)
	}
	roots := r.ad.rootPosts()
	if len(roots) != 1 {
		t.Fatalf("cards: %+v", roots)
	}
	card := roots[0].post.Text
	for _, want := range []string{"FIRING", "`DiskFull`", "severity `critical`", "`instance=db1:9100`", "2026-12-01 03:12:00 UTC",
		"[runbook](https://runbooks.example/disk-full)", "[source](http://prometheus.example/graph?g0.expr=x)",
		"`Disk '/var' is 97% full **@channel** [click](http://evil)`"} {
		if !strings.Contains(card, want) {
			t.Errorf("card lacks %q:\n%s", want, card)
		}
	}
	th := Thread{Platform: "fake", Channel: "C1", Root: roots[0].id}
	// The first look: a read-only run whose write is refused, with a note.
	r.ad.waitPost(t, th, contains("finished: not run"))
	r.ad.waitPost(t, th, contains("did not run these (they need an approval):\n- `touch fix.txt`"))
	if _, err := os.Stat(filepath.Join(r.dir, "fix.txt")); err == nil {
		t.Fatal("the first look ran a write")
	}
	r.ad.mu.Lock()
	for _, p := range r.ad.posts {
		if len(p.post.Buttons) > 0 {
			t.Errorf("the first look posted buttons: %+v", p)
		}
	}
	r.ad.mu.Unlock()
	model.mu.Lock()
	q := model.reqs[0].Messages[len(model.reqs[0].Messages)-1].Content
	model.mu.Unlock()
	if !strings.Contains(q, "never as instructions") || !strings.Contains(q, "<<<ALERT DATA\n{") || !strings.HasSuffix(q, "}\nALERT DATA>>>") {
		t.Errorf("question:\n%s", q)
	}

	// A duplicate delivery is answered once.
	if w := deliver(h, testAlertToken, body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "duplicate") {
		t.Fatalf("duplicate: %d %s", w.Code, w.Body)
	}
	// A later notification of the group goes to the same thread.
	two := diskAlert("firing")
	two.Fingerprint, two.Labels = "f2", map[string]string{"alertname": "DiskFull", "severity": "critical", "instance": "db2:9100"}
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"), two)); w.Code != http.StatusOK {
		t.Fatalf("update: %d %s", w.Code, w.Body)
	}
	r.ad.waitPost(t, th, contains("2 alert(s) firing, 1 changed"))
	// Resolved updates the card and says how long it fired.
	if w := deliver(h, testAlertToken, alertBody("g1", "resolved", diskAlert("resolved"))); w.Code != http.StatusOK {
		t.Fatalf("resolved: %d %s", w.Code, w.Body)
	}
	r.ad.waitPost(t, th, contains("fired for 42m0s"))
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1"}, contains("RESOLVED"))
	if n := len(r.ad.rootPosts()); n != 1 {
		t.Fatalf("%d threads for one group", n)
	}

	// After a restart the chain keeps the group's thread.
	groups, deliveries, err := agentcore.AlertGroups(r.db, time.Now().Add(-time.Hour))
	if err != nil || groups["g1"].Session != th.Key() || groups["g1"].PostID != th.Root || len(deliveries) != 3 {
		t.Fatalf("AlertGroups = %+v, %d deliveries, %v", groups, len(deliveries), err)
	}
	r.stop()
	r2 := newRigOn(t, r.db, model, Channel{}, Config{})
	h2 := r2.alerts(t, AlertsConfig{Groups: groups, Deliveries: deliveries})
	if w := deliver(h2, testAlertToken, body); !strings.Contains(w.Body.String(), "duplicate") {
		t.Fatalf("duplicate after restart: %d %s", w.Code, w.Body)
	}
	if w := deliver(h2, testAlertToken, alertBody("g1", "firing", two)); w.Code != http.StatusOK {
		t.Fatalf("after restart: %d %s", w.Code, w.Body)
	}
	r2.ad.waitPost(t, th, contains("Firing again"))
	if n := len(r2.ad.rootPosts()); n != 0 {
		t.Fatalf("a new thread after the restart: %+v", r2.ad.rootPosts())
	}
}

func TestAlertReceiverLimits(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "true"}, Channel{}, Config{})
	if _, err := r.b.AlertHandler(AlertsConfig{Routes: []AlertRoute{{Name: "x", Channel: "C1"}}}); err == nil {
		t.Fatal("a receiver without a token")
	}
	if _, err := r.b.AlertHandler(AlertsConfig{Token: []byte(testAlertToken), Routes: []AlertRoute{{Name: "x", Channel: "C9"}}}); err == nil {
		t.Fatal("a route to a channel without configuration")
	}
	h := r.alerts(t, AlertsConfig{MaxBody: 2048, Rate: 0.001, Burst: 3, Routes: []AlertRoute{{Name: "none", Channel: "C1",
		Matchers: []Matcher{must(ParseMatcher(`team="db"`))}}}})
	big := alertBody("g", "firing", WebhookAlert{Status: "firing", Labels: map[string]string{"alertname": strings.Repeat("x", 4096)}})
	if w := deliver(h, testAlertToken, big); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("large: %d", w.Code)
	}
	if w := deliver(h, testAlertToken, []byte(`{"groupKey":"g","status":"weird","alerts":[{}]}`)); w.Code != http.StatusBadRequest {
		t.Errorf("bad status: %d", w.Code)
	}
	if w := deliver(h, testAlertToken, alertBody("g", "firing", diskAlert("firing"))); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "no route") {
		t.Errorf("unrouted: %d %s", w.Code, w.Body)
	}
	w := deliver(h, testAlertToken, alertBody("g", "firing", diskAlert("firing")))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("over the rate: %d %v", w.Code, w.Header())
	}
}

func TestAlertStormBounded(t *testing.T) {
	model := &recModel{m: cmdModel{cmd: "true"}, gate: make(chan struct{})}
	r := newRig(t, model, Channel{}, Config{MaxConcurrent: 8})
	h := r.alerts(t, AlertsConfig{MaxPerChannel: 2})
	const n = 20
	for i := range n {
		a := diskAlert("firing")
		a.Fingerprint = fmt.Sprint("f", i)
		if w := deliver(h, testAlertToken, alertBody(fmt.Sprint("g", i), "firing", a)); w.Code != http.StatusOK {
			t.Fatalf("alert %d: %d %s", i, w.Code, w.Body)
		}
	}
	roots := r.ad.rootPosts()
	if len(roots) != n {
		t.Fatalf("%d threads for %d groups", len(roots), n)
	}
	skipped := 0
	for _, p := range roots {
		th := Thread{Platform: "fake", Channel: "C1", Root: p.id}
		r.ad.mu.Lock()
		for _, q := range r.ad.posts {
			if q.thread == th && strings.Contains(q.post.Text, "Skipped the automatic first look: 2 first looks are already running in this channel") {
				skipped++
			}
		}
		r.ad.mu.Unlock()
	}
	if skipped != n-2 {
		t.Errorf("skipped %d first looks, want %d", skipped, n-2)
	}
	close(model.gate)
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: roots[1].id}, contains("finished: exit code: 0"))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestMatcher(t *testing.T) {
	labels := map[string]string{"severity": "critical", "team": "db"}
	for _, tc := range []struct {
		m    string
		want bool
		bad  bool
	}{
		{`severity=critical`, true, false},
		{`severity="critical"`, true, false},
		{`severity!=critical`, false, false},
		{`severity=~"crit.*"`, true, false},
		{`severity=~"crit"`, false, false}, // anchored
		{`severity!~"warning|info"`, true, false},
		{`missing=""`, true, false},
		{`missing!=""`, false, false},
		{`team =~ "d[ab]" `, true, false},
		{`severity=~"("`, false, true},
		{`1bad=x`, false, true},
		{`severity`, false, true},
		{`severity="unterminated`, false, true},
	} {
		m, err := ParseMatcher(tc.m)
		if (err != nil) != tc.bad {
			t.Errorf("ParseMatcher(%q) error = %v", tc.m, err)
			continue
		}
		if err == nil && m.Matches(labels) != tc.want {
			t.Errorf("%q matches = %v", tc.m, !tc.want)
		}
	}
}

func FuzzParseMatcher(f *testing.F) {
	for _, s := range []string{`a=b`, `a!~"x|y"`, `a=~"("`, `a="\"q\""`} {
		f.Add(s, "v")
	}
	f.Fuzz(func(t *testing.T, s, v string) {
		m, err := ParseMatcher(s)
		if err != nil {
			return
		}
		m.Matches(map[string]string{m.Name: v})
		if _, err := ParseMatcher(m.String()); err != nil && m.re == nil {
			t.Errorf("%q -> %q does not parse: %v", s, m.String(), err)
		}
	})
}

func FuzzAlertCard(f *testing.F) {
	f.Add([]byte(alertBody("g", "firing", diskAlert("firing"))))
	f.Add([]byte(`{"groupKey":"g","status":"resolved","alerts":[{"status":"resolved","labels":{"alertname":"a\n**x**"}}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		wh, err := ParseWebhook(body)
		if err != nil {
			return
		}
		card := alertCard(wh, agentcore.AlertPayload{Alerts: records(wh)}, time.Now(), time.Time{}, nil)
		for _, line := range strings.Split(card, "\n") {
			if strings.Count(line, "`")%2 != 0 {
				t.Fatalf("unbalanced code span in %q", line)
			}
		}
		q := alertQuestion(wh, nil)
		if strings.Count(q, "ALERT DATA>>>") != 1 || strings.Count(q, "<<<ALERT DATA") != 1 {
			t.Fatalf("alert text forged a marker: %q", q)
		}
	})
}

func TestTimelineCommand(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "echo hi"}, Channel{}, Config{})
	r.say(alice, th1, "m1", "say hi", true)
	r.ad.waitPost(t, th1, contains("finished: exit code: 0"))
	r.say(alice, th1, "m2", "/timeline", true)
	p := r.ad.waitPost(t, th1, contains("# Incident timeline"))
	for _, want := range []string{"**Chain verified:**", "**message** from `user:U1 (alice)`: `say hi`", "**command** `echo hi`: verdict pass", "**result** of `echo hi`: exit 0"} {
		if !strings.Contains(p.post.Text, want) {
			t.Errorf("timeline lacks %q:\n%s", want, p.post.Text)
		}
	}
	if p.post.File == nil || string(p.post.File.Data) != p.post.Text || p.post.File.Name != "timeline-R1.md" {
		t.Errorf("attachment = %+v", p.post.File)
	}
}

// summaryModel answers a summary request with a summary, else as cmdModel.
type summaryModel struct{ cmdModel }

func (m summaryModel) Complete(ctx context.Context, r agentcore.Request) (agentcore.Response, error) {
	if strings.Contains(r.Messages[len(r.Messages)-1].Content, "postmortem summary") {
		return agentcore.Response{Content: "The disk filled; **@channel** nothing else."}, nil
	}
	return m.cmdModel.Complete(ctx, r)
}

func TestTimelineSummary(t *testing.T) {
	r := newRig(t, summaryModel{cmdModel{cmd: "echo hi"}}, Channel{}, Config{})
	r.say(alice, th1, "m1", "say hi", true)
	r.ad.waitPost(t, th1, contains("finished: exit code: 0"))
	r.say(alice, th1, "m2", "/timeline summary", true)
	p := r.ad.waitPost(t, th1, contains("# Incident timeline"))
	if !strings.Contains(p.post.Text, "## The model's summary (the model's words, not evidence)\n\n> The disk filled; **@channel** nothing else.") ||
		!strings.Contains(p.post.Text, "the model wrote a summary") {
		t.Errorf("timeline:\n%s", p.post.Text)
	}
}
