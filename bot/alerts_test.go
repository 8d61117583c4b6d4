package bot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
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
		if p.thread.Root == "" && !strings.HasPrefix(p.post.Text, stormHead) {
			out = append(out, p)
		}
	}
	return out
}

// offersRun reports whether a card offers Run first look.
func offersRun(p fakePost) bool {
	return slices.ContainsFunc(p.post.Buttons, func(b Button) bool { return b.ID == ActionFirstLook }) && p.post.Value != ""
}

// post is the post id as last updated.
func (f *fakeAdapter) post(id string) fakePost {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.posts {
		if p.id == id {
			return p
		}
	}
	return fakePost{}
}

// stormHead starts a storm summary (which rootPosts leaves out).
const stormHead = "⛈️ **Alert storm**"

// stormPosts are the storm summaries in the channel, as last updated.
func (f *fakeAdapter) stormPosts() []fakePost {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakePost
	for _, p := range f.posts {
		if p.thread.Root == "" && strings.HasPrefix(p.post.Text, stormHead) {
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
		"`Disk '/var' is 97% full **@\u200bchannel** [click](http://evil)`"} {
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
		if p.thread.Root != "" && len(p.post.Buttons) > 0 {
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
	r.ad.waitPost(t, th, contains("Update: `instance=db2:9100` joined; 2 alert(s) firing."))
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1"}, contains("- 🔥 `instance=db1:9100`\n- 🔥 `instance=db2:9100`\n"))
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

// TestAlertStormBounded: 20 groups fire at once in a channel that runs 2
// first looks and queues 10: 2 run, 10 queue and run as the others end, 8
// are skipped with a Run first look button; the chain records each queued
// and skipped look, and one storm summary lists the groups.
func TestAlertStormBounded(t *testing.T) {
	model := &recModel{m: cmdModel{cmd: "true"}, gate: make(chan struct{})}
	r := newRig(t, model, Channel{}, Config{MaxConcurrent: 8})
	h := r.alerts(t, AlertsConfig{MaxPerChannel: 2, MaxQueued: 10})
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
	told := func(th Thread, want string) *fakePost {
		r.ad.mu.Lock()
		defer r.ad.mu.Unlock()
		for _, q := range r.ad.posts {
			if q.thread == th && strings.Contains(q.post.Text, want) {
				return &q
			}
		}
		return nil
	}
	var queued, skipped []Thread
	for _, p := range roots {
		th := Thread{Platform: "fake", Channel: "C1", Root: p.id}
		if told(th, "Queued the automatic first look: 2 first looks are already running in this channel") != nil {
			queued = append(queued, th)
		}
		waiting := told(th, "Queued the automatic first look") != nil
		if told(th, "Skipped the automatic first look: 2 first looks are already running in this channel") != nil {
			skipped = append(skipped, th)
			waiting = true
		}
		if card := r.ad.post(p.id); offersRun(card) != waiting {
			t.Errorf("a card offers Run first look: %v; its look waits (queued or skipped): %v; %+v", offersRun(card), waiting, card.post)
		}
	}
	if len(queued) != 10 || len(skipped) != n-2-10 {
		t.Fatalf("%d first looks queued, %d skipped; want 10 and %d", len(queued), len(skipped), n-2-10)
	}
	notes := map[string]int{}
	for e, err := range r.db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		var p agentcore.NotePayload
		if e.Type == agentcore.EvNote && json.Unmarshal(e.Payload, &p) == nil && p.Kind == agentcore.NoteFirstLook {
			notes[p.Detail]++
		}
	}
	if notes[lookQueued] != 10 || notes[lookSkipped] != n-2-10 {
		t.Errorf("the chain records first looks %v; want 10 queued and %d skipped", notes, n-2-10)
	}
	close(model.gate)
	// The queue drains: every queued look runs as the running ones end.
	for _, th := range append([]Thread{{Platform: "fake", Channel: "C1", Root: roots[0].id}, {Platform: "fake", Channel: "C1", Root: roots[1].id}}, queued...) {
		r.ad.waitPost(t, th, contains("finished: exit code: 0"))
	}
	for _, th := range skipped {
		if told(th, "finished: exit code: 0") != nil {
			t.Errorf("a skipped first look ran in %s", th.Root)
		}
	}
	for _, th := range queued {
		if card := r.ad.post(th.Root); offersRun(card) {
			t.Errorf("the card of a queued look that ran still offers Run first look: %+v", card.post)
		}
	}
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1"}, func(p Post) bool {
		return strings.HasPrefix(p.Text, stormHead) && strings.Contains(p.Text, "First looks: 12 ran, 8 skipped.")
	})
	if s := r.ad.stormPosts(); len(s) != 1 || !strings.Contains(s[0].post.Text, "20 alert groups opened in this channel") {
		t.Errorf("storm summaries: %+v", s)
	}
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
		q := alertQuestion(wh, nil, false)
		if strings.Count(q, "ALERT DATA>>>") != 1 || strings.Count(q, "<<<ALERT DATA") != 1 {
			t.Fatalf("alert text forged a marker: %q", q)
		}
	})
}

// TestTimelineCommand: /timeline shows the postmortem, with the console's
// link to the session, and attaches it with the verified appendix;
// /status names the session for the CLI; /timeline appendix shows the
// appendix.
func TestTimelineCommand(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "echo hi"}, Channel{}, Config{Console: "https://thinbot.example/"})
	r.say(alice, th1, "m1", "say hi", true)
	r.ad.waitPost(t, th1, contains("finished: exit code: 0"))
	r.say(alice, th1, "m2", "/timeline", true)
	p := r.ad.waitPost(t, th1, contains("# Incident timeline"))
	postmortem := []string{"`alice` wrote: `say hi`", "`echo hi`: **exit 0**", "**Links:** [console](https://thinbot.example/audit/session?id=" + url.QueryEscape(th1.Key()) + ")"}
	appendix := []string{"**Chain verified:**", "**message** from `user:U1 (alice)`: `say hi`", "**command** `echo hi`: verdict pass", "**result** of `echo hi`: exit 0"}
	for _, want := range postmortem {
		if !strings.Contains(p.post.Text, want) {
			t.Errorf("timeline lacks %q:\n%s", want, p.post.Text)
		}
	}
	if strings.Contains(p.post.Text, "Chain verified") {
		t.Errorf("the message shows the appendix:\n%s", p.post.Text)
	}
	if p.post.File == nil || !strings.HasPrefix(string(p.post.File.Data), p.post.Text) || p.post.File.Name != "timeline-R1.md" {
		t.Fatalf("attachment = %+v", p.post.File)
	}
	for _, want := range append(postmortem, appendix...) {
		if !strings.Contains(string(p.post.File.Data), want) {
			t.Errorf("the attached timeline lacks %q:\n%s", want, p.post.File.Data)
		}
	}
	// /status names the session as the CLI takes it.
	r.say(alice, th1, "m4", "/status", true)
	r.ad.waitPost(t, th1, contains("Session: `fake/C1/R1` (on the host: `thinbot audit timeline fake/C1/R1`)"))
	// /timeline appendix shows the verified appendix.
	r.say(alice, th1, "m3", "/timeline appendix", true)
	p = r.ad.waitPost(t, th1, contains("**Chain verified:**"))
	for _, want := range appendix {
		if !strings.Contains(p.post.Text, want) {
			t.Errorf("/timeline appendix lacks %q:\n%s", want, p.post.Text)
		}
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
	if !strings.Contains(p.post.Text, "## The model's summary (the model's words, not evidence)\n\n> The disk filled; **@\u200bchannel** nothing else.") ||
		p.post.File == nil || !strings.Contains(string(p.post.File.Data), "the model wrote a summary") {
		t.Errorf("timeline:\n%s", p.post.Text)
	}
}

func TestCardLink(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"", ""},
		{"  ", ""},
		{"https://runbooks.example/disk-full", "[runbook](https://runbooks.example/disk-full)"},
		{"HTTPS://runbooks.example/x", "[runbook](https://runbooks.example/x)"},
		{"http://h/a)b](c", "[runbook](http://h/a%29b%5D%28c)"},
		{"http://h/x) [click](http://evil", "[runbook](http://h/x%29%20%5Bclick%5D%28http://evil)"},
		{"http://h/<b>_*~`|\"'\\{}", "[runbook](http://h/%3Cb%3E%5F%2A%7E%60%7C%22%27%5C%7B%7D)"},
		{"javascript:alert(1)", "runbook `javascript:alert(1)`"},
		{"JavaScript://%0aalert(1)", "runbook `JavaScript://%0aalert(1)`"},
		{"data:text/html,<script>", "runbook `data:text/html,<script>`"},
		{"file:///etc/passwd", "runbook `file:///etc/passwd`"},
		{"mattermost://x", "runbook `mattermost://x`"},
		{"https://", "runbook `https://`"},
		{"//evil.example/x", "runbook `//evil.example/x`"},
		{"runbooks/disk.md", "runbook `runbooks/disk.md`"},
		{"https://h/x\n@channel", "runbook `https://h/x @channel`"},
		{"ftp://h/x `y`", "runbook `ftp://h/x 'y'`"},
	} {
		if got := cardLink("runbook", tc.raw); got != tc.want {
			t.Errorf("cardLink(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}

// TestAlertCardLinks: a card shows an annotation's link of another scheme
// as text, and a link's ")" cannot end its Markdown early.
func TestAlertCardLinks(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "true"}, Channel{}, Config{})
	h := r.alerts(t, AlertsConfig{Routes: []AlertRoute{{Name: "ops", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}}})
	a := diskAlert("firing")
	a.Annotations = map[string]string{"summary": "x", "runbook_url": "javascript:alert(document.cookie)", "dashboard_url": "https://d.example/a)[x](javascript:y)"}
	a.GeneratorURL = "data:text/html;base64,PHNjcmlwdD4="
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", a)); w.Code != http.StatusOK {
		t.Fatalf("deliver: %d %s", w.Code, w.Body)
	}
	card := r.ad.rootPosts()[0].post.Text
	want := "**Links:** runbook `javascript:alert(document.cookie)` · source `data:text/html;base64,PHNjcmlwdD4=` · [dashboard](https://d.example/a%29%5Bx%5D%28javascript:y%29)\n"
	if !strings.Contains(card, want) {
		t.Errorf("card:\n%s\nwant the line %q", card, want)
	}
}

// TestAlertDedupeByContent: a delivery is the same delivery however its
// JSON is spaced, ordered or its alerts listed; a changed alert is another.
func TestAlertDedupeByContent(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "true"}, Channel{}, Config{})
	h := r.alerts(t, AlertsConfig{Routes: []AlertRoute{{Name: "ops", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}}})
	one, two := diskAlert("firing"), diskAlert("firing")
	two.Fingerprint = "f2"
	body := alertBody("g1", "firing", one, two)
	if w := deliver(h, testAlertToken, body); w.Code != http.StatusOK || strings.Contains(w.Body.String(), "duplicate") {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	// The same content: keys in another order (a map marshals sorted),
	// spaces added, the alerts in another order.
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	resorted, _ := json.Marshal(m)
	als := m["alerts"].([]any)
	als[0], als[1] = als[1], als[0]
	swapped, _ := json.Marshal(m)
	for name, b := range map[string][]byte{"space": append([]byte(" "), body...), "keys": resorted, "order": swapped,
		"indented": must(json.MarshalIndent(m, "", "   "))} {
		if w := deliver(h, testAlertToken, b); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "duplicate") {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	// Another content: an alert ended, or started at another time, or
	// another group.
	ended := two
	ended.EndsAt = fired.Add(time.Hour)
	later := one
	later.StartsAt = fired.Add(time.Minute)
	for name, b := range map[string][]byte{"ends": alertBody("g1", "firing", one, ended), "starts": alertBody("g1", "firing", later, two),
		"group": alertBody("g2", "firing", one, two), "fewer": alertBody("g1", "firing", one)} {
		if w := deliver(h, testAlertToken, b); w.Code != http.StatusOK || strings.Contains(w.Body.String(), "duplicate") {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
}

// countHandler counts log records at Warn and above.
type countHandler struct {
	mu *sync.Mutex
	n  *int
}

func (c countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (c countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		c.mu.Lock()
		*c.n++
		c.mu.Unlock()
	}
	return nil
}
func (c countHandler) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c countHandler) WithGroup(string) slog.Handler      { return c }

// TestAlertAuthRateLimit: requests with a wrong token are limited and
// logged at a bounded rate; the notifier's own deliveries still pass.
func TestAlertAuthRateLimit(t *testing.T) {
	var mu sync.Mutex
	warned := 0
	now := fired
	r := newRig(t, cmdModel{cmd: "true"}, Channel{}, Config{Logger: slog.New(countHandler{&mu, &warned}),
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	h := r.alerts(t, AlertsConfig{AuthRate: 1, AuthBurst: 10,
		Routes: []AlertRoute{{Name: "ops", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}}})
	codes := map[int]int{}
	for range 300 {
		w := deliver(h, "wrong-token-0123456789", alertBody("g1", "firing", diskAlert("firing")))
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if codes[http.StatusUnauthorized] != 10 || codes[http.StatusTooManyRequests] != 290 {
		t.Errorf("300 wrong tokens in an instant: %v, want 10 x 401 and 290 x 429", codes)
	}
	mu.Lock()
	if warned != 10 {
		t.Errorf("%d warnings logged for 300 refusals, want 10", warned)
	}
	now = now.Add(2 * time.Second) // two more refusals may be logged
	mu.Unlock()
	for range 3 {
		deliver(h, "", nil)
	}
	mu.Lock()
	if warned != 12 {
		t.Errorf("%d warnings after 2 s more, want 12", warned)
	}
	mu.Unlock()
	if r.ad.rootPosts() != nil {
		t.Fatal("a refused request posted")
	}
	// The notifier's own delivery is not refused for the others' sake.
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
		t.Errorf("the right token after a flood: %d %s", w.Code, w.Body)
	}
}

// TestAlertBodyReadDeadline: a body trickled slower than ReadTimeout is
// answered 408 and the connection closed, rather than held open.
func TestAlertBodyReadDeadline(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "true"}, Channel{}, Config{})
	h := r.alerts(t, AlertsConfig{ReadTimeout: 200 * time.Millisecond})
	srv := httptest.NewServer(h)
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The test's own bound: the server must answer well before it.
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /alerts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", testAlertToken)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a body that stopped coming: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %d, want 408", resp.StatusCode)
	}
}

// TestAlertRetryAfterFailure: a delivery whose handling failed (5xx) is
// not remembered, so the notifier's retry is handled; a retry that arrives
// while the first try is still under way waits for its outcome rather than
// being answered "duplicate" and lost.
func TestAlertRetryAfterFailure(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "true"}, Channel{}, Config{})
	h := r.alerts(t, AlertsConfig{Routes: []AlertRoute{{Name: "ops", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}}})
	down := errors.New("chat is down")
	r.ad.failPost = func(context.Context, Post) error { return down }
	body := alertBody("g1", "firing", diskAlert("firing"))
	if w := deliver(h, testAlertToken, body); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("with the chat down: %d %s", w.Code, w.Body)
	}
	r.ad.failPost = nil
	if w := deliver(h, testAlertToken, body); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "opened") {
		t.Fatalf("the retry: %d %s", w.Code, w.Body)
	}
	if n := len(r.ad.rootPosts()); n != 1 {
		t.Fatalf("%d cards", n)
	}

	// The first try hangs in the chat, its retry comes, then the first
	// fails.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.ad.failPost = func(_ context.Context, p Post) error {
		if !strings.Contains(p.Text, "FIRING") {
			return nil
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			return nil
		}
		close(entered)
		<-release
		return down
	}
	body2 := alertBody("g2", "firing", diskAlert("firing"))
	firstDone := make(chan *httptest.ResponseRecorder)
	go func() { firstDone <- deliver(h, testAlertToken, body2) }()
	<-entered
	retryDone := make(chan *httptest.ResponseRecorder)
	go func() { retryDone <- deliver(h, testAlertToken, body2) }()
	for waiting := false; !waiting; {
		select {
		case w := <-retryDone:
			t.Fatalf("the retry was answered while the first try was under way: %d %s", w.Code, w.Body)
		case <-time.After(time.Millisecond):
		}
		a := h.(*AlertReceiver).alerts
		a.mu.Lock()
		d := a.seen[DeliveryDigest(must(ParseWebhook(body2)))]
		waiting = d != nil && d.waiting > 0
		a.mu.Unlock()
	}
	close(release)
	if w := <-firstDone; w.Code != http.StatusServiceUnavailable {
		t.Errorf("first try: %d %s", w.Code, w.Body)
	}
	if w := <-retryDone; w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "opened") {
		t.Errorf("the retry after the first try failed: %d %s", w.Code, w.Body)
	}
	if n := len(r.ad.rootPosts()); n != 2 {
		t.Errorf("%d cards, want 2", n)
	}
}

// TestAlertSlowHandlingOutlivesReadDeadline: the read deadline is for the
// body; handling that takes longer (a slow chat) is not cut short by it
// (the request's context stays alive past the deadline).
func TestAlertSlowHandlingOutlivesReadDeadline(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "true"}, Channel{}, Config{})
	h := r.alerts(t, AlertsConfig{ReadTimeout: 100 * time.Millisecond,
		Routes: []AlertRoute{{Name: "ops", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}}})
	r.ad.failPost = func(ctx context.Context, p Post) error {
		if strings.Contains(p.Text, "FIRING") {
			time.Sleep(400 * time.Millisecond) // the chat is slow: past the read deadline
		}
		return ctx.Err()
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(string(alertBody("g1", "firing", diskAlert("firing")))))
	req.Header.Set("Authorization", "Bearer "+testAlertToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a delivery handled slowly: %s", resp.Status)
	}
}

// loopModel never answers: it asks for `true` again and again, or, with
// wait set, waits for the run to end (or wait to close: a first look is
// not cancelled when the bot stops, so a test ends it thus).
type loopModel struct{ wait chan struct{} }

func (m loopModel) Complete(ctx context.Context, _ agentcore.Request) (agentcore.Response, error) {
	if m.wait != nil {
		select {
		case <-ctx.Done():
			return agentcore.Response{}, ctx.Err()
		case <-m.wait:
			return agentcore.Response{}, errors.New("the test ended")
		}
	}
	return agentcore.Response{ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: agentcore.ToolRun, Arguments: `{"command":"true","reason":"again"}`}}}, nil
}

// A first look runs under its route's budgets of steps and time (8 steps
// and 5 minutes where the route sets none), not the channel's: a model
// that never answers is stopped there.
func TestAlertFirstLookBudgets(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wait  bool // the model waits instead of asking for commands
		route AlertRoute
		want  string
	}{
		{"the route's steps", false, AlertRoute{MaxSteps: 2}, "Stopped: the run used its budget of 2 steps."},
		{"the default steps", false, AlertRoute{}, "Stopped: the run used its budget of 8 steps."},
		{"the route's time", true, AlertRoute{MaxWall: 200 * time.Millisecond}, "Stopped: the run used its budget of 200ms wall time."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m loopModel
			if tc.wait {
				m.wait = make(chan struct{})
			}
			r := newRig(t, m, Channel{}, Config{})
			if tc.wait {
				t.Cleanup(func() { close(m.wait) }) // before the rig stops
			}
			rt := tc.route
			rt.Name, rt.Channel, rt.Investigate = "ops", "C1", true
			rt.Matchers = []Matcher{must(ParseMatcher(`severity="critical"`))}
			h := r.alerts(t, AlertsConfig{Routes: []AlertRoute{rt}})
			if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
				t.Fatalf("deliver: %d %s", w.Code, w.Body)
			}
			root := r.ad.rootPosts()[0].id
			r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: root}, contains(tc.want))
		})
	}
}

// At most the route's max_investigations first looks (2 where it sets
// none) run at once, whatever the channel allows; a group beyond them is
// told its first look was skipped.
func TestAlertFirstLooksPerRoute(t *testing.T) {
	for _, tc := range []struct {
		limit, want int // the route's setting, the first looks it lets run
	}{{1, 1}, {0, 2}, {3, 3}} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			model := &recModel{m: cmdModel{cmd: "true"}, gate: make(chan struct{})}
			r := newRig(t, model, Channel{}, Config{MaxConcurrent: 8})
			t.Cleanup(func() { close(model.gate) }) // before the rig stops
			h := r.alerts(t, AlertsConfig{MaxPerChannel: 8, MaxQueued: -1, Routes: []AlertRoute{{Name: "ops", Channel: "C1", Investigate: true,
				MaxInvestigations: tc.limit, Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}}})
			const n = 5
			for i := range n {
				a := diskAlert("firing")
				a.Fingerprint = fmt.Sprint("f", i)
				if w := deliver(h, testAlertToken, alertBody(fmt.Sprint("g", i), "firing", a)); w.Code != http.StatusOK {
					t.Fatalf("alert %d: %d %s", i, w.Code, w.Body)
				}
			}
			skip := fmt.Sprintf("Skipped the automatic first look: %d first looks of route \"ops\" are already running", tc.want)
			if got := r.ad.count(skip); got != n-tc.want {
				r.ad.mu.Lock()
				defer r.ad.mu.Unlock()
				t.Fatalf("%d groups told %q, want %d; posts: %+v", got, skip, n-tc.want, r.ad.posts)
			}
		})
	}
}

// A shutdown ends a first look under way as it ends every run, with its
// cause, instead of waiting out the look's wall time (5 minutes by
// default): the delivery's request has long ended, the bot's context is
// what the look runs under.
func TestShutdownEndsAFirstLook(t *testing.T) {
	m := &blockModel{called: make(chan struct{}, 1)}
	r := newRig(t, m, Channel{}, Config{})
	h := r.alerts(t, AlertsConfig{Routes: []AlertRoute{{Name: "ops", Channel: "C1", Investigate: true,
		Matchers: []Matcher{must(ParseMatcher(`severity="critical"`))}}}})
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
		t.Fatalf("deliver: %d %s", w.Code, w.Body)
	}
	root := r.ad.rootPosts()[0].id
	th := Thread{Platform: "fake", Channel: "C1", Root: root}
	<-m.called // the first look is under way
	r.stopWith(&agentcore.StopCause{Kind: agentcore.StopShutdown, By: "SIGTERM"})
	var fin *agentcore.RunPayload
	for ev, err := range r.db.All(1) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agentcore.EvRunFinished && ev.Session == th.Key() {
			p, err := agentcore.Decode(ev)
			if err != nil {
				t.Fatal(err)
			}
			fin = p.(*agentcore.RunPayload)
		}
	}
	if fin == nil || fin.Status != agentcore.StatusCancelled || fin.Cause != agentcore.StopShutdown || fin.CauseBy != "SIGTERM" {
		t.Fatalf("the first look's run_finished = %+v, want cancelled by the shutdown (SIGTERM)", fin)
	}
}

// blockModel waits for its call's end, saying when it was called. A call
// nothing ends fails after 20 s, so that a run the product no longer
// cancels fails its test instead of hanging it.
type blockModel struct{ called chan struct{} }

func (m *blockModel) Complete(ctx context.Context, _ agentcore.Request) (agentcore.Response, error) {
	select {
	case m.called <- struct{}{}:
	default:
	}
	select {
	case <-ctx.Done():
		return agentcore.Response{}, ctx.Err()
	case <-time.After(20 * time.Second):
		return agentcore.Response{}, errors.New("the call was never cancelled")
	}
}

// Reconfigure puts a new token and new routes in force for the deliveries
// after it; a first look under way keeps its route's budget of steps and
// still counts against the route's limit; a reconfiguration that names an
// unknown channel changes nothing.
func TestAlertReconfigure(t *testing.T) {
	model := &recModel{m: loopModel{}, gate: make(chan struct{})}
	r := newRig(t, model, Channel{}, Config{MaxConcurrent: 8})
	release := sync.OnceFunc(func() { close(model.gate) })
	t.Cleanup(release) // before the rig stops
	critical := must(ParseMatcher(`severity="critical"`))
	ops := AlertRoute{Name: "ops", Channel: "C1", Investigate: true, MaxSteps: 2, MaxInvestigations: 1, Matchers: []Matcher{critical}}
	legacy := AlertRoute{Name: "legacy", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`alertname="Legacy"`))}}
	h := r.alerts(t, AlertsConfig{MaxPerChannel: 8, Routes: []AlertRoute{ops, legacy}})
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", diskAlert("firing"))); w.Code != http.StatusOK {
		t.Fatalf("deliver: %d %s", w.Code, w.Body)
	}
	first := Thread{Platform: "fake", Channel: "C1", Root: r.ad.rootPosts()[0].id}

	const newToken = "n3w-token-0123456789abcdef"
	rcv := h.(*AlertReceiver)
	bigger := ops
	bigger.MaxSteps = 5
	cpu := AlertRoute{Name: "cpu", Channel: "C1", Matchers: []Matcher{must(ParseMatcher(`alertname="CPUHigh"`))}}
	next := AlertsConfig{Token: []byte(newToken), Platform: "fake", MaxPerChannel: 8, Routes: []AlertRoute{bigger, cpu}}
	bad := next
	bad.Routes = []AlertRoute{bigger, {Name: "nowhere", Channel: "C9"}}
	if err := rcv.Reconfigure(bad); err == nil {
		t.Fatal("Reconfigure with a route to an unknown channel: no error")
	}
	if w := deliver(h, newToken, alertBody("g0", "firing", diskAlert("firing"))); w.Code != http.StatusUnauthorized {
		t.Fatalf("after a failed Reconfigure, its token was taken: %d %s", w.Code, w.Body)
	}
	if err := rcv.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	if w := deliver(h, testAlertToken, alertBody("g2", "firing", diskAlert("firing"))); w.Code != http.StatusUnauthorized {
		t.Fatalf("the old token after Reconfigure: %d %s", w.Code, w.Body)
	}
	legacyAlert := WebhookAlert{Status: "firing", Fingerprint: "l1", StartsAt: fired, Labels: map[string]string{"alertname": "Legacy"}}
	if w := deliver(h, newToken, alertBody("g3", "firing", legacyAlert)); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "no route matches") {
		t.Errorf("an alert of the removed route: %d %s", w.Code, w.Body)
	}
	cpuAlert := WebhookAlert{Status: "firing", Fingerprint: "c1", StartsAt: fired, Labels: map[string]string{"alertname": "CPUHigh"}}
	if w := deliver(h, newToken, alertBody("g4", "firing", cpuAlert)); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "opened a thread") {
		t.Errorf("an alert of the added route: %d %s", w.Code, w.Body)
	}
	// The first look of g1 still runs: the route's one slot is taken.
	second := diskAlert("firing")
	second.Fingerprint = "f2"
	if w := deliver(h, newToken, alertBody("g5", "firing", second)); w.Code != http.StatusOK {
		t.Fatalf("deliver: %d %s", w.Code, w.Body)
	}
	roots := r.ad.rootPosts()
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: roots[len(roots)-1].id}, contains(`1 first looks of route "ops" are already running`))
	release()
	r.ad.waitPost(t, first, contains("Stopped: the run used its budget of 2 steps."))
}

// TestRunFirstLookByTap: a group whose first look was skipped (the
// channel's limit reached, no queue) offers Run first look; a tap by
// someone who may not approve is refused and recorded, an approver's tap
// runs the read-only first look in the thread, recorded as requested by
// them, and a second tap runs nothing more.
func TestRunFirstLookByTap(t *testing.T) {
	model := &recModel{m: cmdModel{cmd: "true"}, gate: make(chan struct{})}
	r := newRig(t, model, Channel{Approvers: []string{"U2"}}, Config{MaxConcurrent: 8})
	h := r.alerts(t, AlertsConfig{MaxPerChannel: 1, MaxQueued: -1})
	for i := range 2 {
		a := diskAlert("firing")
		a.Fingerprint = fmt.Sprint("f", i)
		if w := deliver(h, testAlertToken, alertBody(fmt.Sprint("g", i), "firing", a)); w.Code != http.StatusOK {
			t.Fatalf("alert %d: %d %s", i, w.Code, w.Body)
		}
	}
	roots := r.ad.rootPosts()
	th := Thread{Platform: "fake", Channel: "C1", Root: roots[1].id}
	r.ad.waitPost(t, th, contains("Skipped the automatic first look"))
	card := r.ad.post(roots[1].id)
	click := func(u User) ClickResult {
		return r.b.HandleClick(r.ctx, Click{Thread: th, PostID: card.id, ActionID: ActionFirstLook, Value: card.post.Value, User: u})
	}
	if res := click(eve); !strings.Contains(res.Ephemeral, "You cannot run this first look") || res.Update != nil {
		t.Fatalf("a non-approver's tap: %+v", res)
	}
	res := click(bob)
	if res.Update == nil || !strings.Contains(res.Update.Text, "FIRING") || slices.ContainsFunc(res.Update.Buttons, func(b Button) bool { return b.ID == ActionFirstLook }) {
		t.Fatalf("an approver's tap: %+v", res)
	}
	r.ad.waitPost(t, th, contains("Run first look: started by @bob"))
	if res := click(bob); !strings.Contains(res.Ephemeral, "already") {
		t.Errorf("a second tap: %+v", res)
	}
	close(model.gate)
	r.ad.waitPost(t, th, contains("finished: exit code: 0"))
	var kinds []string
	for e, err := range r.db.Events(th.Key(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		var p agentcore.NotePayload
		if e.Type == agentcore.EvNote && json.Unmarshal(e.Payload, &p) == nil {
			kinds = append(kinds, p.Kind+":"+p.Detail+":"+e.Actor)
		}
	}
	want := []string{"first_look:skipped:alert:ops", "click_refused:run first look: you are not an approver for this channel:user:U3 (eve)", "first_look:requested:user:U2 (bob)"}
	if !slices.Equal(kinds, want) {
		t.Errorf("the thread's notes: %q, want %q", kinds, want)
	}
}

// TestCutOutsideFence: a long timeline is cut at a line outside a command's
// output fence, so that the chat does not show the rest as code.
func TestCutOutsideFence(t *testing.T) {
	s := "- a\n\n````\nout\n```\nmore\n````\n\n- b\n"
	for _, tc := range []struct {
		limit int
		want  string
	}{
		{len(s), s},
		{len(s) - 1, "- a\n\n````\nout\n```\nmore\n````\n\n"},
		{20, "- a\n\n"},
		{3, ""},
	} {
		if got := cutOutsideFence(s, tc.limit); got != tc.want {
			t.Errorf("cutOutsideFence(%d) = %q, want %q", tc.limit, got, tc.want)
		}
	}
}

// TestRunFirstLookAfterARestart: a group skipped before a restart keeps its
// Run first look (the chain's first_look note, read back by
// agentcore.AlertGroups), and a tap after the restart runs the look.
func TestRunFirstLookAfterARestart(t *testing.T) {
	model := &recModel{m: cmdModel{cmd: "true"}, gate: make(chan struct{})}
	rr := newRestartRig(t, model, Channel{Approvers: []string{"U2"}}, time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	h := rr.r.alerts(t, AlertsConfig{MaxPerChannel: 1, MaxQueued: 1})
	for i := range 3 {
		a := diskAlert("firing")
		a.Fingerprint = fmt.Sprint("f", i)
		if w := deliver(h, testAlertToken, alertBody(fmt.Sprint("g", i), "firing", a)); w.Code != http.StatusOK {
			t.Fatalf("alert %d: %d %s", i, w.Code, w.Body)
		}
	}
	th := Thread{Platform: "fake", Channel: "C1", Root: rr.r.ad.rootPosts()[1].id}
	rr.r.ad.waitPost(t, th, contains("Queued the automatic first look"))
	rr.r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: rr.r.ad.rootPosts()[2].id}, contains("Skipped the automatic first look"))
	// The restart drops g1's queued look (g0's look holds the slot until
	// the shutdown stops it).
	rr.reopen()
	close(model.gate)
	groups, _, err := agentcore.AlertGroups(rr.db, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if g0, g1, g2 := groups["g0"].LookOffered, groups["g1"].LookOffered, groups["g2"].LookOffered; g0 || !g1 || !g2 {
		t.Fatalf("after the restart: g0, g1, g2 skipped %v, %v, %v; want false, true (queued, dropped by the restart), true", g0, g1, g2)
	}
	rr.r.alerts(t, AlertsConfig{MaxPerChannel: 1, MaxQueued: -1, Groups: groups})
	res := rr.r.b.HandleClick(rr.r.ctx, Click{Thread: th, PostID: th.Root, ActionID: ActionFirstLook, Value: ackValue("g1"), User: bob})
	if res.Update == nil {
		t.Fatalf("a tap after the restart: %+v", res)
	}
	rr.r.ad.waitPost(t, th, contains("finished: exit code: 0"))
}

// TestSkippedLookClearedWhenTheGroupFiresAgain: a group whose first look
// was skipped, then resolved, fires again with room for a look: its card
// no longer offers Run first look, and the look runs.
func TestSkippedLookClearedWhenTheGroupFiresAgain(t *testing.T) {
	model := &recModel{m: cmdModel{cmd: "true"}, gate: make(chan struct{})}
	r := newRig(t, model, Channel{Approvers: []string{"U2"}}, Config{MaxConcurrent: 8})
	h := r.alerts(t, AlertsConfig{MaxPerChannel: 1, MaxQueued: -1})
	alert := func(i int, status string) WebhookAlert {
		a := diskAlert(status)
		a.Fingerprint = fmt.Sprint("f", i)
		return a
	}
	for i := range 2 {
		if w := deliver(h, testAlertToken, alertBody(fmt.Sprint("g", i), "firing", alert(i, "firing"))); w.Code != http.StatusOK {
			t.Fatalf("alert %d: %d %s", i, w.Code, w.Body)
		}
	}
	card := r.ad.rootPosts()[1].id
	hasRun := func() bool {
		return slices.ContainsFunc(r.ad.post(card).post.Buttons, func(b Button) bool { return b.ID == ActionFirstLook })
	}
	if !hasRun() {
		t.Fatalf("the skipped group's card: %+v", r.ad.post(card).post)
	}
	close(model.gate) // g0's look ends: a slot is free
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: r.ad.rootPosts()[0].id}, contains("finished: exit code: 0"))
	if w := deliver(h, testAlertToken, alertBody("g1", "resolved", alert(1, "resolved"))); w.Code != http.StatusOK {
		t.Fatalf("resolve: %d %s", w.Code, w.Body)
	}
	again := alert(1, "firing")
	again.StartsAt = again.StartsAt.Add(time.Hour)
	if w := deliver(h, testAlertToken, alertBody("g1", "firing", again)); w.Code != http.StatusOK {
		t.Fatalf("fires again: %d %s", w.Code, w.Body)
	}
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: card}, contains("finished: exit code: 0"))
	if hasRun() {
		t.Errorf("the card of a group whose new first look ran offers Run first look: %+v", r.ad.post(card).post)
	}
}

// TestRunQueuedFirstLookByTap: a queued first look's card offers Run first
// look too; a tap runs it now and takes it out of the queue, so it runs
// once.
func TestRunQueuedFirstLookByTap(t *testing.T) {
	model := &recModel{m: cmdModel{cmd: "true"}, gate: make(chan struct{})}
	r := newRig(t, model, Channel{Approvers: []string{"U2"}}, Config{MaxConcurrent: 8})
	h := r.alerts(t, AlertsConfig{MaxPerChannel: 1, MaxQueued: 1})
	for i := range 2 {
		a := diskAlert("firing")
		a.Fingerprint = fmt.Sprint("f", i)
		if w := deliver(h, testAlertToken, alertBody(fmt.Sprint("g", i), "firing", a)); w.Code != http.StatusOK {
			t.Fatalf("alert %d: %d %s", i, w.Code, w.Body)
		}
	}
	card := r.ad.rootPosts()[1]
	th := Thread{Platform: "fake", Channel: "C1", Root: card.id}
	r.ad.waitPost(t, th, contains("Queued the automatic first look"))
	if !offersRun(r.ad.post(card.id)) {
		t.Fatalf("the queued look's card: %+v", r.ad.post(card.id).post)
	}
	res := r.b.HandleClick(r.ctx, Click{Thread: th, PostID: card.id, ActionID: ActionFirstLook, Value: r.ad.post(card.id).post.Value, User: bob})
	if res.Update == nil || slices.ContainsFunc(res.Update.Buttons, func(b Button) bool { return b.ID == ActionFirstLook }) {
		t.Fatalf("the tap: %+v", res)
	}
	close(model.gate)
	first := Thread{Platform: "fake", Channel: "C1", Root: r.ad.rootPosts()[0].id}
	r.ad.waitPost(t, first, contains("finished: exit code: 0"))
	r.ad.waitPost(t, th, contains("finished: exit code: 0"))
	// g0's end hands its slot on to the queue, which the tap emptied: no
	// look runs or waits any more (a second run of g1's would hold the
	// slot first).
	a := r.b.alerts
	deadline := time.Now().Add(20 * time.Second)
	for {
		a.mu.Lock()
		idle := a.perChan["C1"] == 0 && len(a.waiting["C1"]) == 0 && a.looks["g0"] == lookDone
		a.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the channel's first looks did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	n := 0
	r.ad.mu.Lock()
	for _, p := range r.ad.posts {
		if p.thread == th && strings.Contains(p.post.Text, "finished: exit code: 0") {
			n++
		}
	}
	r.ad.mu.Unlock()
	if n != 1 {
		t.Errorf("the tapped queued look ran %d times, want once", n)
	}
}
