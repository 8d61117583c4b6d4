package bot

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// Silences: in an alert group's thread, "/silence 2h [comment]" asks
// Alertmanager for a silence of the group and "/unsilence" expires it.
// Either is a write, so it waits for an approval as a command does: the
// request (approval_requested: what will be silenced, for how long, bound
// by a SHA-256), its card with Approve and Deny, the decision
// (approval_decision), then Alertmanager's answer (alert_silence: the
// silence's id, or why it failed) are recorded in the thread's session,
// and the card shows the silence. The silence matches the group's labels
// (Alertmanager's group_by labels; else the labels all its alerts share),
// each name="value"; it starts when approved.

// Alertmanager is where silences are created: its base URL and the
// credentials thinbot sends (the commands thinbot runs never see them).
// The zero value creates none.
type Alertmanager struct {
	// URL is Alertmanager's base URL ("http://127.0.0.1:9093").
	URL string
	// BearerToken, or BasicUser and BasicPassword, if set, authenticate.
	BearerToken   []byte
	BasicUser     string
	BasicPassword []byte
	// Client is the HTTP client; nil means one with a 10 s timeout.
	Client *http.Client
}

// maxSilence bounds a silence's duration: a longer one is a config
// change, not an incident's.
const maxSilence = 7 * 24 * time.Hour

// silenceRule is the rule an approval card names for a silence.
const silenceRule = "alertmanager-silence"

// ParseSilence reads the arguments of /silence: a duration (Go's form, or
// days: "2h", "90m", "1d") and an optional comment.
func ParseSilence(args string) (time.Duration, string, error) {
	f := strings.Fields(args)
	if len(f) == 0 {
		return 0, "", errors.New("say for how long: /silence 2h [comment]")
	}
	s := f[0]
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		days, err = strconv.Atoi(n)
		if days > 365 {
			days = 365
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return 0, "", fmt.Errorf("%q is not a duration: write 30m, 2h or 1d", s)
	case d < time.Minute:
		return 0, "", fmt.Errorf("%s is too short: a silence lasts at least a minute", s)
	case d > maxSilence:
		return 0, "", fmt.Errorf("%s is longer than %s: a longer silence belongs in Alertmanager's config", s, "7 days")
	}
	comment := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(args), s))
	return d, textfmt.OneLine(comment, 500), nil
}

// amMatcher is one matcher of Alertmanager's v2 silence.
type amMatcher struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	IsRegex bool   `json:"isRegex"`
	IsEqual bool   `json:"isEqual"`
}

// amSilence is Alertmanager's v2 PostableSilence.
type amSilence struct {
	ID        string      `json:"id,omitempty"`
	Matchers  []amMatcher `json:"matchers"`
	StartsAt  time.Time   `json:"startsAt"`
	EndsAt    time.Time   `json:"endsAt"`
	CreatedBy string      `json:"createdBy"`
	Comment   string      `json:"comment"`
}

// silenceMatchers are the matchers of a silence of g: its group labels,
// else the labels all its alerts share.
func silenceMatchers(g agentcore.AlertGroup) []amMatcher {
	labels := g.Last.GroupLabels
	if len(labels) == 0 {
		labels = sharedLabels(g.Last.Alerts)
	}
	var out []amMatcher
	for _, k := range sortedKeys(labels) {
		out = append(out, amMatcher{Name: k, Value: labels[k], IsEqual: true})
	}
	return out
}

func matcherTexts(ms []amMatcher) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name + "=" + strconv.Quote(m.Value)
	}
	return out
}

// silenceCommand handles /silence and /unsilence in thread m.Thread: it
// asks for the approval and, approved, asks Alertmanager; it blocks until
// then (the caller runs it on a goroutine of its own).
func (b *Bot) silenceCommand(ctx context.Context, m Message, ch Channel, name string) {
	key := m.Thread.Key()
	say := func(text string) { b.post(ctx, m.Thread, Post{Text: text}) }
	b.mu.Lock()
	a := b.alerts
	b.mu.Unlock()
	var gk string
	var g agentcore.AlertGroup
	if a != nil {
		gk, g = a.groupBySession(key)
	}
	if gk == "" {
		say("`/" + name + "` works in an alert's thread only.")
		return
	}
	am := a.cfg.Load().Alertmanager
	if am.URL == "" {
		say("No Alertmanager is configured (`alerts.alertmanager.url`), so I cannot silence alerts; silence them in Alertmanager.")
		return
	}
	loc := b.zone(ch)
	var ap agentcore.Approval
	var sil amSilence
	var dur time.Duration
	switch name {
	case "silence":
		var comment string
		var err error
		args := strings.TrimSpace(m.Text)
		if f := strings.Fields(args); len(f) > 0 {
			args = strings.TrimSpace(strings.TrimPrefix(args, f[0])) // "/silence" or "!silence"
		}
		dur, comment, err = ParseSilence(args)
		if err != nil {
			say("Not silenced: " + err.Error() + ".")
			return
		}
		ms := silenceMatchers(g)
		if len(ms) == 0 {
			say("Not silenced: this group's alerts share no label to match.")
			return
		}
		if comment == "" {
			comment = "silenced from thinbot thread " + key
		}
		sil = amSilence{Matchers: ms, CreatedBy: displayName(m.User) + " (thinbot)", Comment: comment}
		desc := fmt.Sprintf("silence in Alertmanager for %s (from the approval)\nmatchers: %s\ncomment: %s", dur, strings.Join(matcherTexts(ms), " "), comment)
		ap = agentcore.Approval{Command: desc, Reason: "an alert silence asked for in the thread"}
	default:
		if g.Silence == nil {
			say("This group has no silence made here to expire.")
			return
		}
		ap = agentcore.Approval{Command: fmt.Sprintf("expire silence %s in Alertmanager: %s", g.Silence.SilenceID, strings.Join(g.Silence.Matchers, " ")),
			Reason: "an alert silence's removal asked for in the thread"}
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	ap.Session, ap.RequestID, ap.Rule, ap.Requester = key, "s"+hex.EncodeToString(rb[:]), silenceRule, actor(m.User)
	bind, _ := json.Marshal(struct {
		Command  string
		Matchers []amMatcher
		Duration time.Duration
	}{ap.Command, sil.Matchers, dur})
	sum := sha256.Sum256(bind)
	ap.SHA256 = hex.EncodeToString(sum[:])

	d, ok := b.askAction(ctx, m.Thread, ch, m.User, ap)
	if !ok || !d.Approved {
		return
	}
	rec := agentcore.AlertSilencePayload{GroupKey: gk, RequestID: ap.RequestID, By: d.By}
	var err error
	if name == "silence" {
		now := b.cfg.Now().UTC()
		sil.StartsAt, sil.EndsAt = now, now.Add(dur)
		rec.Matchers, rec.StartsAt, rec.EndsAt, rec.CreatedBy, rec.Comment = matcherTexts(sil.Matchers), sil.StartsAt, sil.EndsAt, sil.CreatedBy, sil.Comment
		rec.SilenceID, err = am.create(ctx, sil)
		rec.Action = "created"
	} else {
		rec.SilenceID, rec.Matchers = g.Silence.SilenceID, g.Silence.Matchers
		err = am.expire(ctx, g.Silence.SilenceID)
		rec.Action = "expired"
	}
	if err != nil {
		rec.Action, rec.Error = "failed", err.Error()
	}
	ev, rerr := ch.Agent.NoteUnlocked(key, agentcore.EvAlertSilence, "bot", rec)
	switch {
	case rerr != nil:
		b.cfg.Metrics.error("store")
		b.log.Error("record alert silence", "conv", key, "silence", rec.SilenceID, "err", rerr)
		say(fmt.Sprintf("Alertmanager's answer could not be written to the audit log (silence `%s`); operators can see the details in the log.", rec.SilenceID))
		return
	case err != nil:
		b.log.Warn("alert silence failed", "conv", key, "request", ap.RequestID, "err", err)
		say(fmt.Sprintf("Alertmanager did not take it: %s (ref %d).", textfmt.CodeSpan(err.Error(), 200), ev.Seq))
		return
	}
	unlock := a.lock(gk)
	a.mu.Lock()
	g = a.groups[gk]
	if rec.Action == "created" {
		g.Silence = &rec
	} else {
		g.Silence = nil
	}
	a.groups[gk] = g
	a.mu.Unlock()
	b.update(ctx, m.Thread, g.PostID, cardPost(g, payloadWebhook(g.Last), g.Last, b.cfg.Now(), g.StartsAt, loc))
	unlock()
	b.log.Info("alert silence", "conv", key, "action", rec.Action, "silence", rec.SilenceID)
	if rec.Action == "created" {
		say(fmt.Sprintf("🔕 Silenced in Alertmanager until %s: silence `%s`. `/unsilence` expires it.", textfmt.Clock(rec.EndsAt, loc, "2006-01-02 15:04"), rec.SilenceID))
	} else {
		say(fmt.Sprintf("🔔 Silence `%s` expired in Alertmanager.", rec.SilenceID))
	}
}

// silenceLine is the card's line for a group's silence.
func silenceLine(s *agentcore.AlertSilencePayload, loc *time.Location) string {
	return fmt.Sprintf("🔕 **Silenced** until %s · silence %s · approved by @%s", textfmt.Clock(s.EndsAt, loc, "2006-01-02 15:04"),
		textfmt.CodeSpan(s.SilenceID, 60), deciderName(s.By))
}

// groupBySession finds the group whose thread is session.
func (a *alerts) groupBySession(session string) (string, agentcore.AlertGroup) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, g := range a.groups {
		if g.Session == session {
			return k, g
		}
	}
	return "", agentcore.AlertGroup{}
}

// askAction asks the approvers of ch, in thread t, to allow ap, an action
// of the bot's own (not a command of a run): it records the request,
// posts its card, waits as a run's request waits (reminders, expiry as a
// deny, ctx's end as a cancel) and records the decision. ok is false when
// it could not be asked or recorded; nothing may then be done.
func (b *Bot) askAction(ctx context.Context, t Thread, ch Channel, requester User, ap agentcore.Approval) (agentcore.ApprovalDecision, bool) {
	if _, err := ch.Agent.NoteUnlocked(ap.Session, agentcore.EvApprovalAsked, "bot", agentcore.ApprovalAskedPayload{
		RequestID: ap.RequestID, Command: ap.Command, SHA256: ap.SHA256, Reason: ap.Reason, Requester: ap.Requester}); err != nil {
		b.cfg.Metrics.error("store")
		b.log.Error("record approval request", "conv", ap.Session, "err", err)
		b.post(ctx, t, Post{Text: "The request could not be written to the audit log, so I cannot ask for it. Nothing was changed."})
		return agentcore.ApprovalDecision{}, false
	}
	acc := b.access.Load()
	req := &request{ap: ap, th: &thread{t: t, ch: ch}, ch: ch, requester: requester, expires: b.cfg.Now().Add(acc.ApprovalTimeout),
		timeout: acc.ApprovalTimeout, reminders: acc.Reminders,
		decided: make(chan agentcore.ApprovalDecision, 1), committed: make(chan error, 1), ready: make(chan struct{})}
	b.mu.Lock()
	b.pending[ap.RequestID] = req
	b.mu.Unlock()
	decide := func(d agentcore.ApprovalDecision) error {
		by := d.By
		if by == "" {
			by = "system"
		}
		_, err := ch.Agent.NoteUnlocked(ap.Session, agentcore.EvApprovalDecided, by, agentcore.ApprovalDecidedPayload{
			RequestID: ap.RequestID, Approved: d.Approved, By: d.By, Why: d.Why, SHA256: ap.SHA256})
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	postID, err := b.cfg.Adapter.Post(pctx, t, quiet(Post{
		Text:      approvalText(req, b.zone(ch)),
		Buttons:   []Button{{ID: ActionApprove, Label: "Approve", Style: "primary"}, {ID: ActionDeny, Label: "Deny", Style: "danger"}},
		Value:     ap.RequestID,
		Expires:   req.expires,
		Requester: requester,
	}))
	cancel()
	if err == nil {
		_, err = ch.Agent.NoteUnlocked(ap.Session, agentcore.EvNote, "bot", agentcore.NotePayload{Kind: agentcore.NoteApprovalPosted, RequestID: ap.RequestID, PostID: postID})
	}
	if err != nil {
		b.take(ap.RequestID)
		req.setReady()
		b.log.Error("post approval request", "conv", ap.Session, "request", ap.RequestID, "err", err)
		if rerr := decide(agentcore.ApprovalDecision{By: "system", Why: "the request could not be posted or recorded"}); rerr != nil {
			b.log.Error("record approval decision", "conv", ap.Session, "err", rerr)
		}
		b.update(ctx, t, postID, Post{Text: "**Cancelled** — the request could not be recorded. Nothing was changed."})
		return agentcore.ApprovalDecision{}, false
	}
	b.mu.Lock()
	req.postID = postID
	b.mu.Unlock()
	d, werr := b.await(ctx, req)
	if werr != nil {
		d = agentcore.ApprovalDecision{By: "system", Why: "cancelled before a decision"}
	}
	err = decide(d)
	if req.expired {
		b.update(ctx, t, postID, Post{Text: decidedText(req, "**Expired** — nobody decided within "+req.timeout.String()+". Nothing was changed.")})
	}
	req.committed <- err // the click that decided shows the decision now
	if err != nil {
		b.cfg.Metrics.error("store")
		b.log.Error("record approval decision", "conv", ap.Session, "request", ap.RequestID, "err", err)
		return agentcore.ApprovalDecision{}, false
	}
	return d, werr == nil
}

// create posts a silence and returns its id.
func (am Alertmanager) create(ctx context.Context, s amSilence) (string, error) {
	body, _ := json.Marshal(s) // cannot fail: strings and times
	var out struct {
		SilenceID string `json:"silenceID"`
	}
	if err := am.do(ctx, "POST", "/api/v2/silences", body, &out); err != nil {
		return "", err
	}
	if out.SilenceID == "" {
		return "", errors.New("alertmanager: POST /api/v2/silences: no silenceID in the answer")
	}
	return out.SilenceID, nil
}

// expire expires the silence id.
func (am Alertmanager) expire(ctx context.Context, id string) error {
	return am.do(ctx, "DELETE", "/api/v2/silence/"+url.PathEscape(id), nil, nil)
}

// do sends one request to Alertmanager's API and decodes a JSON answer
// into out (if not nil).
func (am Alertmanager) do(ctx context.Context, method, path string, body []byte, out any) error {
	hc := am.Client
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(am.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("alertmanager: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case len(am.BearerToken) > 0:
		req.Header.Set("Authorization", "Bearer "+string(am.BearerToken))
	case am.BasicUser != "":
		req.SetBasicAuth(am.BasicUser, string(am.BasicPassword))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("alertmanager: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("alertmanager: %s %s: %s: %s", method, path, resp.Status, textfmt.OneLine(string(data), 300))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("alertmanager: %s %s: %w", method, path, err)
		}
	}
	return nil
}
