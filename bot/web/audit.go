package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/thinbot/thinbot/store"
)

// verifyTTL is how long a verification of an unchanged chain is reused.
const verifyTTL = 30 * time.Second

// verifyCache is the last verification of the chain.
type verifyCache struct {
	at     time.Time
	head   uint64
	took   time.Duration
	report store.Report
	err    error
}

// verification verifies the whole chain, reusing a recent result: for
// verifyTTL while the chain's head has not moved, and while it moves, for 20
// times as long as the verification took (so that a big, busy chain is not
// verified on every page: checking then costs at most 5% of the time). One
// request at a time verifies; the others meanwhile get the last result, so
// only the request that found it stale waits. fresh forces a new check.
func (s *Server) verification(r *http.Request, fresh bool) (store.Report, error) {
	s.verifyMu.Lock()
	v := s.verified
	head := s.cfg.Chain.LastSeq()
	age := s.cfg.Now().Sub(v.at)
	reuse := (v.head == head && age < verifyTTL) || age < 20*v.took
	if !v.at.IsZero() && !fresh && (s.verifying || reuse) {
		s.verifyMu.Unlock()
		return v.report, v.err
	}
	s.verifying = true
	s.verifyMu.Unlock()
	start := s.cfg.Now()
	rep, err := s.cfg.Chain.Verify(r.Context())
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	s.verifying = false
	if err == nil || s.verified.at.IsZero() {
		s.verified = verifyCache{at: s.cfg.Now(), head: head, took: s.cfg.Now().Sub(start), report: rep, err: err}
	}
	return rep, err
}

// chainStatus is the verification banner of every audit page.
type chainStatus struct {
	OK      bool
	Text    string
	Checked time.Time
}

func (s *Server) status(r *http.Request, fresh bool) chainStatus {
	rep, err := s.verification(r, fresh)
	s.verifyMu.Lock()
	checked := s.verified.at
	s.verifyMu.Unlock()
	switch {
	case err != nil:
		s.log.Warn("verify chain", "err", err)
		return chainStatus{Text: "could not verify the chain (see the log)", Checked: s.cfg.Now()}
	case rep.OK && rep.LastSeq == 0:
		return chainStatus{OK: true, Text: "is empty: nothing to verify yet", Checked: checked}
	case rep.OK:
		return chainStatus{OK: true, Text: fmt.Sprintf("verified up to seq %d", rep.LastSeq), Checked: checked}
	}
	return chainStatus{Text: fmt.Sprintf("broken at seq %d: %s", rep.BadSeq, rep.Problem), Checked: checked}
}

// sessionKind names the front end of a session id.
func sessionKind(id string) string {
	switch {
	case strings.HasPrefix(id, "web/"):
		return "web"
	case strings.HasPrefix(id, "mattermost/"):
		return "mattermost"
	case strings.HasPrefix(id, "slack/"):
		return "slack"
	case strings.HasPrefix(id, "system:"):
		return "system"
	}
	return "terminal"
}

// sessionRow is one line of the sessions list.
type sessionRow struct {
	store.SessionInfo
	Kind  string
	Link  string
	Topic string // the first message, shortened
}

// topicLookahead is how many of a session's first events topic reads.
const topicLookahead = 8

// topic is the first user message among a session's first events.
func (s *Server) topic(session string, from uint64) string {
	n := 0
	for ev, err := range s.cfg.Chain.Events(session, from) {
		if err != nil || n == topicLookahead {
			break
		}
		n++
		if ev.Type == "user_message" {
			var p payload
			if json.Unmarshal(ev.Payload, &p) == nil {
				return strings.Join(strings.Fields(p.Text), " ")
			}
		}
	}
	return ""
}

const sessionsPerPage = 100

func (s *Server) auditSessions(w http.ResponseWriter, r *http.Request, _ identity) {
	q := r.URL.Query()
	kind, text := q.Get("kind"), strings.TrimSpace(q.Get("q"))
	since, _ := time.Parse("2006-01-02", q.Get("since"))
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	infos, err := s.cfg.Chain.Sessions()
	if err != nil {
		s.log.Error("audit: list sessions", "err", err)
		http.Error(w, "could not read the sessions; operators can see the details in the log", http.StatusInternalServerError)
		return
	}
	counts := map[string]int{}
	var rows []sessionRow
	for _, si := range slices.Backward(infos) { // most recently active first
		k := sessionKind(si.ID)
		counts[k]++
		if (kind != "" && k != kind) || (text != "" && !strings.Contains(strings.ToLower(si.ID), strings.ToLower(text))) ||
			(!since.IsZero() && si.Last.Before(since)) {
			continue
		}
		rows = append(rows, sessionRow{SessionInfo: si, Kind: k, Link: "/audit/session?id=" + url.QueryEscape(si.ID)})
	}
	total := len(rows)
	from := min((page-1)*sessionsPerPage, total)
	rows = rows[from:min(from+sessionsPerPage, total)]
	for i := range rows {
		rows[i].Topic = s.topic(rows[i].ID, rows[i].FirstSeq)
	}
	next := ""
	if from+sessionsPerPage < total {
		nq := r.URL.Query()
		nq.Set("page", strconv.Itoa(page+1))
		next = "/audit?" + nq.Encode()
	}
	s.page(w, r, "sessions.html", map[string]any{"Tab": "sessions", "Status": s.status(r, false), "Rows": rows,
		"Total": total, "All": len(infos), "Counts": counts, "Kind": kind, "Q": text, "Since": q.Get("since"),
		"Kinds": []string{"web", "mattermost", "slack", "terminal", "system"}, "Next": next, "Page": page})
}

// trow is one event of a session's timeline, as the page shows it.
type trow struct {
	Seq    uint64
	Time   time.Time
	Type   string
	Actor  string
	Branch int
	// Class styles the row: msg, answer, cmd, approval, result, run, misc.
	Class string
	Title string
	// Badge is a short status: a verdict, a decision, an exit code.
	Badge, BadgeClass string
	Text              string   // prose (a message, an answer)
	Code              string   // a command
	Output            string   // a tool's output, folded
	Meta              []string // small facts: rule, reason, duration, hashes
}

// payload is every field of the payloads the timeline reads (agentcore's
// event payloads, as the chain stores them).
type payload struct {
	Text      string `json:"text"`
	Content   string `json:"content"`
	Reasoning string `json:"reasoning"`
	ToolCalls []struct {
		Name string `json:"name"`
		Args string `json:"arguments"`
	} `json:"tool_calls"`
	Model      string `json:"model"`
	LatencyMS  int64  `json:"latency_ms"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Command    string `json:"command"`
	Path       string `json:"path"`
	Verdict    string `json:"verdict"`
	Reason     string `json:"reason"`
	Rule       string `json:"rule"`
	Action     string `json:"action"`
	RequestID  string `json:"request_id"`
	SHA256     string `json:"sha256"`
	Requester  string `json:"requester"`
	Approved   bool   `json:"approved"`
	By         string `json:"by"`
	Why        string `json:"why"`
	IsError    bool   `json:"is_error"`
	ExitCode   *int   `json:"exit_code"`
	OutputSize int64  `json:"output_size"`
	DurationMS int64  `json:"duration_ms"`
	TimedOut   bool   `json:"timed_out"`
	Status     string `json:"status"`
	Steps      int    `json:"steps"`
	Detail     string `json:"detail"`
	Kind       string `json:"kind"`
	User       string `json:"user"`
	Summary    string `json:"summary"`
	From       string `json:"from"`
	To         string `json:"to"`
	Name       string `json:"name"`
}

// timelineRow renders one event.
func timelineRow(ev store.Event) trow {
	r := trow{Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Actor: ev.Actor, Branch: ev.Branch, Class: "misc", Title: ev.Type}
	if c, ok := store.Capped(ev.Payload); ok {
		r.Meta = append(r.Meta, fmt.Sprintf("payload capped: %d bytes, sha256 %.12s…", c.Size, c.SHA256))
		return r
	}
	var p payload
	_ = json.Unmarshal(ev.Payload, &p)
	switch ev.Type {
	case "user_message":
		r.Class, r.Title, r.Text = "msg", "Message from "+strings.TrimPrefix(ev.Actor, "user:"), p.Text
	case "assistant_message":
		r.Class, r.Title, r.Text = "answer", "Model", p.Content
		for _, tc := range p.ToolCalls {
			r.Meta = append(r.Meta, "calls "+tc.Name)
		}
		if p.Model != "" {
			r.Meta = append(r.Meta, p.Model)
		}
		if p.LatencyMS > 0 {
			r.Meta = append(r.Meta, fmt.Sprintf("%d ms", p.LatencyMS))
		}
	case "gate_decision":
		r.Class, r.Title = "cmd", "Command"
		r.Code = p.Command
		if p.Tool != "run" && p.Tool != "" {
			r.Title, r.Code = p.Tool, strings.TrimSpace(p.Command+" "+p.Path)
		}
		r.Badge, r.BadgeClass = p.Verdict, "v-"+p.Verdict
		r.Meta = append(r.Meta, "action: "+p.Action, "rule: "+p.Rule)
		if p.Reason != "" {
			r.Meta = append(r.Meta, "reason: "+p.Reason)
		}
	case "approval_requested":
		r.Class, r.Title, r.Code = "approval", "Approval requested", p.Command
		r.Badge, r.BadgeClass = "waiting", "v-confirm"
		r.Meta = append(r.Meta, "request "+p.RequestID, fmt.Sprintf("sha256 %.12s…", p.SHA256))
		if p.Requester != "" {
			r.Meta = append(r.Meta, "requested for "+p.Requester)
		}
	case "approval_decision":
		r.Class, r.Title = "approval", "Approval decision"
		if p.Approved {
			r.Badge, r.BadgeClass = "approved", "v-pass"
		} else {
			r.Badge, r.BadgeClass = "refused", "v-deny"
		}
		r.Text = "by " + p.By
		if p.Why != "" {
			r.Text += " — " + p.Why
		}
		r.Meta = append(r.Meta, "request "+p.RequestID)
	case "tool_result":
		r.Class, r.Title, r.Output = "result", "Result of "+p.Tool, p.Content
		switch {
		case p.TimedOut:
			r.Badge, r.BadgeClass = "timed out", "v-deny"
		case p.ExitCode != nil:
			r.Badge, r.BadgeClass = fmt.Sprintf("exit %d", *p.ExitCode), "v-pass"
			if *p.ExitCode != 0 {
				r.BadgeClass = "v-deny"
			}
		case p.IsError:
			r.Badge, r.BadgeClass = "not run", "v-deny"
		}
		if p.DurationMS > 0 {
			r.Meta = append(r.Meta, fmt.Sprintf("%d ms", p.DurationMS))
		}
		if p.OutputSize > 0 {
			r.Meta = append(r.Meta, fmt.Sprintf("%d bytes of output", p.OutputSize))
		}
	case "run_started":
		r.Class, r.Title = "run", "Run started"
	case "run_finished":
		r.Class, r.Title, r.Badge, r.BadgeClass = "run", "Run finished", p.Status, "v-"+p.Status
		if p.Detail != "" {
			r.Text = p.Detail
		}
	case "clear":
		r.Class, r.Title = "run", "New topic (/clear)"
	case "compacted":
		r.Class, r.Title, r.Text = "run", "Compacted", p.Summary
	case "note":
		r.Title = "Note: " + strings.ReplaceAll(p.Kind, "_", " ")
		r.Text = strings.TrimSpace(strings.Join(nonEmpty(p.RequestID, p.User, p.Detail), " · "))
		if p.Kind == "click_refused" {
			r.Class, r.Badge, r.BadgeClass = "approval", "refused click", "v-deny"
		}
	case "system_prompt":
		r.Title, r.Output = "System prompt", p.Text
	case "protocol_switch":
		r.Title, r.Text = "Protocol switch", p.From+" → "+p.To+": "+p.Reason
	default:
		r.Output = string(ev.Payload)
	}
	return r
}

func nonEmpty(xs ...string) []string {
	var out []string
	for _, x := range xs {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

func (s *Server) auditSession(w http.ResponseWriter, r *http.Request, _ identity) {
	q := r.URL.Query()
	sid := q.Get("id")
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	var info *store.SessionInfo
	infos, err := s.cfg.Chain.Sessions()
	if err == nil {
		for i := range infos {
			if infos[i].ID == sid {
				info = &infos[i]
			}
		}
	}
	if info == nil {
		w.WriteHeader(http.StatusNotFound)
		s.page(w, r, "session.html", map[string]any{"Tab": "sessions", "Status": s.status(r, false), "Missing": sid})
		return
	}
	rows := make([]trow, 0, s.cfg.PageSize)
	var last uint64
	more := false
	for ev, err := range s.cfg.Chain.Events(sid, after+1) {
		if err != nil {
			s.log.Error("audit: read session", "conv", sid, "err", err)
			http.Error(w, "could not read the session; operators can see the details in the log", http.StatusInternalServerError)
			return
		}
		if len(rows) == s.cfg.PageSize {
			more = true
			break
		}
		rows = append(rows, timelineRow(ev))
		last = ev.Seq
	}
	link := func(a uint64) string {
		return "/audit/session?id=" + url.QueryEscape(sid) + "&after=" + strconv.FormatUint(a, 10)
	}
	next := ""
	if more {
		next = link(last)
	}
	s.page(w, r, "session.html", map[string]any{"Tab": "sessions", "Status": s.status(r, false), "Info": info,
		"Kind": sessionKind(sid), "Rows": rows, "Next": next, "First": link(0), "Paged": after > 0,
		"Export": "/audit/export?session=" + url.QueryEscape(sid), "Timeline": s.timelineLink(sid)})
}

// approvalRow is one approval request with its outcome.
type approvalRow struct {
	Seq       uint64
	Time      time.Time
	Session   string
	Link      string
	RequestID string
	Command   string
	Requester string
	Decision  string
	Class     string
	By        string
	Why       string
	Decided   time.Time
	Refused   []string // refused clicks: who and why
}

const approvalsShown = 500

// approvalWindow is how many events of the chain one approvals page reads
// requests from, so that the page costs the same on a chain of any length.
const approvalWindow = 50000

// auditApprovals lists the approval requests of a window of the chain,
// newest first: the last approvalWindow events, or those before ?before=SEQ.
// Decisions are read up to the head, so a request's outcome shows even when
// it came after the window.
func (s *Server) auditApprovals(w http.ResponseWriter, r *http.Request, _ identity) {
	head := s.cfg.Chain.LastSeq()
	before := head + 1
	if b, err := strconv.ParseUint(r.URL.Query().Get("before"), 10, 64); err == nil && b > 0 && b <= head {
		before = b
	}
	from := uint64(1)
	if before > s.approvalWindow {
		from = before - s.approvalWindow
	}
	byID := map[string]*approvalRow{}
	var rows []*approvalRow
	for ev, err := range s.cfg.Chain.All(from) {
		if err != nil {
			s.log.Error("audit: read chain", "err", err)
			http.Error(w, "could not read the chain; operators can see the details in the log", http.StatusInternalServerError)
			return
		}
		if ev.Type != "approval_requested" && ev.Type != "approval_decision" && ev.Type != "note" {
			continue
		}
		var p payload
		if json.Unmarshal(ev.Payload, &p) != nil {
			continue
		}
		switch ev.Type {
		case "approval_requested":
			if ev.Seq >= before {
				continue
			}
			a := &approvalRow{Seq: ev.Seq, Time: ev.Time, Session: ev.Session, RequestID: p.RequestID, Command: p.Command,
				Requester: p.Requester, Decision: "open", Class: "v-confirm",
				Link: "/audit/session?id=" + url.QueryEscape(ev.Session) + "&after=" + strconv.FormatUint(ev.Seq-1, 10)}
			byID[ev.Session+"\x00"+p.RequestID] = a
			rows = append(rows, a)
		case "approval_decision":
			if a := byID[ev.Session+"\x00"+p.RequestID]; a != nil {
				a.By, a.Why, a.Decided = p.By, p.Why, ev.Time
				a.Decision, a.Class = "denied", "v-deny"
				switch {
				case p.Approved:
					a.Decision, a.Class = "approved", "v-pass"
				case p.By == "expiry":
					a.Decision = "expired"
				}
			}
		case "note":
			if a := byID[ev.Session+"\x00"+p.RequestID]; a != nil && p.Kind == "click_refused" {
				a.Refused = append(a.Refused, strings.TrimPrefix(ev.Actor, "user:")+": "+p.Detail)
			}
		}
	}
	slices.Reverse(rows)
	total := len(rows)
	if len(rows) > approvalsShown {
		rows = rows[:approvalsShown]
	}
	older := ""
	if from > 1 {
		older = "/audit/approvals?before=" + strconv.FormatUint(from, 10)
	}
	s.page(w, r, "approvals.html", map[string]any{"Tab": "approvals", "Status": s.status(r, false), "Rows": rows, "Total": total,
		"From": from, "Before": before - 1, "Older": older})
}

func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request, _ identity) {
	st := s.status(r, true)
	data := map[string]any{"Tab": "verify", "Status": st, "Path": s.cfg.Chain.Path(), "Head": s.cfg.Chain.LastSeq()}
	if rep, err := s.verification(r, false); err == nil {
		data["Report"] = rep
	}
	if s.cfg.Chain.AuditPath() != "" {
		arep, err := s.cfg.Chain.VerifyAudit(r.Context())
		switch {
		case err != nil:
			data["Export"] = "could not check the JSONL export: " + err.Error()
		case arep.OK:
			data["Export"] = fmt.Sprintf("%s: identical to the chain (%d events)", s.cfg.Chain.AuditPath(), arep.Events)
			data["ExportOK"] = true
		default:
			data["Export"] = fmt.Sprintf("%s: broken at seq %d: %s", s.cfg.Chain.AuditPath(), arep.BadSeq, arep.Problem)
		}
	}
	s.page(w, r, "verify.html", data)
}

func (s *Server) auditExport(w http.ResponseWriter, r *http.Request, id identity) {
	sid := r.URL.Query().Get("session")
	if sid == "" {
		http.Error(w, "which session? (?session=ID)", http.StatusBadRequest)
		return
	}
	s.log.Info("audit export", "user", id.Name, "conv", sid)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", strings.Map(safeFileRune, sid)+".jsonl"))
	if err := s.cfg.Chain.Export(r.Context(), w, sid, 0); err != nil {
		s.log.Warn("audit export", "conv", sid, "err", err)
	}
}
