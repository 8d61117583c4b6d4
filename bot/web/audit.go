package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// fullVerifyEvery is how often the background verifier re-checks the whole
// chain; between full checks it checks new events as they commit. A full
// check recorded in the chain (agentcore.RecordChainVerified) counts across
// restarts.
const fullVerifyEvery = agentcore.FullVerifyEvery

// defaultCheckpointMin is Config.CheckpointMin's default.
const defaultCheckpointMin = 10000

// verifyCache is the state of the background verification of the chain
// (guarded by Server.verifyMu; Server.verifying says the verifier runs).
// The chain is verified in full when the verifier starts (and every
// fullVerifyEvery), then new events are checked as they commit, from the
// verified checkpoint (seq, hash) on (store.VerifyOptions.From), so a page shows
// the state at once and never verifies inside its request (issue #23: a
// year of events made the Chain page take 25 s). A good full verification
// is recorded in the chain as a checkpoint; a restart within a day of it
// verifies only the events after it (resume), and the full check waits
// until the day is over (see agentcore/checkpoint.go for why that is safe).
type verifyCache struct {
	// seq and hash are the checkpoint: the chain up to seq verified good.
	seq  uint64
	hash string
	at   time.Time // when the checkpoint last moved or was confirmed
	// full is the last complete full verification, fullAt when it ended.
	full     store.Report
	fullAt   time.Time
	fullTook time.Duration
	fulls    int // full verifications done
	// recorded is the newest full verification recorded in the chain (by
	// this process or an earlier one); resumed says this process started
	// from it instead of verifying in full.
	recorded *agentcore.ChainCheckpoint
	resumed  bool
	// bad is the first break found (full or incremental); it stays until
	// a full verification finds the chain good.
	bad *store.Report
	err error // the last verification that could not run
	// running: a full verification is under way, at progress of target.
	running          bool
	progress, target uint64
	// export is the JSONL export's state as the last full check found it.
	export   string
	exportOK bool
}

// checked reports whether the chain was verified in full, by this process
// or by one whose recorded checkpoint it resumed from.
func (v *verifyCache) checked() bool { return v.fulls > 0 || v.resumed }

// startVerifier starts the background verifier once; it stops when the
// store closes.
func (s *Server) startVerifier() {
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	if s.verifying || s.cfg.Chain == nil {
		return
	}
	s.verifying = true
	s.verified.running, s.verified.target = true, s.cfg.Chain.LastSeq()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-s.cfg.Chain.Closing():
		case <-ctx.Done():
		}
		cancel()
	}()
	go func() {
		defer cancel()
		s.verifyLoop(ctx)
	}()
}

// verifyDelay is how long after start the first full verification waits,
// so that it does not compete with the daemon's start-up (a small chain is
// verified by the first page request meanwhile, see catchUp).
const verifyDelay = 2 * time.Second

func (s *Server) verifyLoop(ctx context.Context) {
	db := s.cfg.Chain
	if due, ok := s.resume(ctx); ok {
		s.followChain(ctx, due)
	} else if !sleepCtx(ctx, verifyDelay) {
		return
	}
	for ctx.Err() == nil {
		s.verifyMu.Lock()
		s.verified.running, s.verified.progress, s.verified.target = true, 0, db.LastSeq()
		s.verifyMu.Unlock()
		start := time.Now()
		// The store, its checkpoints (a rewrite that recomputed the hashes
		// does not agree with them) and its journal.
		res, err := agentcore.Verify(ctx, db, agentcore.VerifyOptions{Workers: 1, Journal: db.AuditPath() != "", Progress: func(seq uint64) {
			s.verifyMu.Lock()
			s.verified.progress = seq
			s.verifyMu.Unlock()
		}})
		rep := res.Chain
		took := time.Since(start)
		export, exportOK := "", false
		if err == nil && db.AuditPath() != "" {
			arep := res.Journal
			switch {
			case arep == nil:
				export = "could not check the JSONL export: " + res.JournalErr.Error()
			case arep.OK:
				export, exportOK = fmt.Sprintf("%s: identical to the chain (%d events)", db.AuditPath(), arep.Events), true
			default:
				export = fmt.Sprintf("%s: broken at seq %d: %s", db.AuditPath(), arep.BadSeq, arep.Problem)
			}
		}
		if ctx.Err() != nil {
			return
		}
		var recorded *agentcore.ChainCheckpoint
		if err == nil && rep.OK && (exportOK || db.AuditPath() == "") {
			recorded = s.record(rep, took, export)
		}
		s.verifyMu.Lock()
		v := &s.verified
		v.running = false
		if errors.Is(err, store.ErrClosed) {
			s.verifyMu.Unlock()
			return // the store closed before the watcher cancelled ctx
		}
		if err != nil {
			v.err = err
			s.verifyMu.Unlock()
			s.log.Warn("verify chain", "err", err)
			if !sleepCtx(ctx, time.Minute) {
				return
			}
			continue
		}
		v.err = nil
		v.full, v.fullAt, v.fullTook, v.fulls = rep, s.cfg.Now(), took, v.fulls+1
		v.export, v.exportOK = export, exportOK
		v.at = v.fullAt
		if recorded != nil {
			v.recorded = recorded
		}
		if rep.OK {
			v.bad = nil
			if rep.LastSeq >= v.seq {
				v.seq, v.hash = rep.LastSeq, rep.LastHash
			}
		} else {
			v.bad = &rep
		}
		s.verifyMu.Unlock()
		s.followChain(ctx, start.Add(fullVerifyEvery))
	}
}

// record writes a good full verification into the chain as the checkpoint
// the next start verifies from, when the chain is long enough for that to
// matter (Config.CheckpointMin). Every good full check is recorded, also on
// an idle chain: a checkpoint older than a day is not resumed from, so
// skipping it would make every later start verify in full. A failure is
// logged: the next start then verifies in full.
func (s *Server) record(rep store.Report, took time.Duration, export string) *agentcore.ChainCheckpoint {
	db := s.cfg.Chain
	if rep.LastSeq < uint64(s.cfg.CheckpointMin) {
		return nil
	}
	cp, err := agentcore.RecordChainVerified(db, rep, took, export)
	if err != nil {
		s.log.Warn("record the verified checkpoint (the next start verifies in full)", "err", err)
		return nil
	}
	s.log.Info("chain verified in full; checkpoint recorded", "seq", cp.EventSeq, "verified_seq", cp.Seq, "took", took.Round(time.Millisecond))
	return &cp
}

// resume starts from the newest checkpoint recorded in the chain when it
// is younger than fullVerifyEvery: it verifies the events after it (the
// checkpoint's own event among them) and returns when the next full
// verification is due. ok is false when there is no usable checkpoint, or
// it is older: then the whole chain is verified now. A break found after
// the checkpoint is shown at once, and the full verification runs now to
// say where the chain stands.
func (s *Server) resume(ctx context.Context) (due time.Time, ok bool) {
	db := s.cfg.Chain
	cp, found, err := agentcore.LastChainCheckpoint(db)
	if err != nil {
		s.log.Warn("read the verified checkpoint (verifying the whole chain)", "err", err)
		return time.Time{}, false
	}
	if !found {
		return time.Time{}, false
	}
	// Older than a day: the full check is due now (resuming would only
	// verify part of the chain first). A checkpoint from the future (a
	// clock stepped back, or a forged time) is not trusted.
	age := s.cfg.Now().Sub(cp.At)
	if age < 0 || age >= fullVerifyEvery {
		return time.Time{}, false
	}
	// A checkpoint inside an archive (thinbot audit archive) vouches for
	// events the live chain no longer holds: the whole live chain is
	// verified now, from the archive's head.
	if arch, _, ok, err := db.ArchivedBefore(); err != nil || ok && cp.Seq < arch.Last {
		return time.Time{}, false
	}
	rep, err := db.Verify(ctx, &store.VerifyOptions{From: cp.Seq, FromHash: cp.Hash})
	if err != nil {
		s.log.Warn("verify from the recorded checkpoint (verifying the whole chain)", "seq", cp.Seq, "err", err)
		return time.Time{}, false
	}
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	v := &s.verified
	v.running = false
	v.recorded = &cp
	if !rep.OK || rep.LastSeq < cp.EventSeq {
		if rep.OK {
			rep.OK, rep.BadSeq, rep.Problem = false, cp.EventSeq, fmt.Sprintf("the recorded checkpoint at seq %d is not in the chain", cp.EventSeq)
		}
		v.bad, v.at = &rep, s.cfg.Now()
		s.log.Warn("the chain is broken after its verified checkpoint", "checkpoint_seq", cp.Seq, "bad_seq", rep.BadSeq, "problem", rep.Problem)
		return time.Time{}, false
	}
	v.resumed = true
	v.seq, v.hash, v.at = rep.LastSeq, rep.LastHash, s.cfg.Now()
	if cp.Export != "" {
		v.export, v.exportOK = cp.Export+" (at the last full verification)", true
	}
	s.log.Info("chain verified from its recorded checkpoint", "checkpoint_seq", cp.Seq, "events", rep.Events, "full_verification_due", cp.At.Add(fullVerifyEvery))
	return time.Now().Add(fullVerifyEvery - age), true
}

// followChain checks new events from the checkpoint as they commit, until
// the next full verification is due or an auditor asks for one (POST
// /audit/verify).
func (s *Server) followChain(ctx context.Context, until time.Time) {
	db := s.cfg.Chain
	for {
		s.verifyMu.Lock()
		seq, hash, bad := s.verified.seq, s.verified.hash, s.verified.bad != nil
		s.verifyMu.Unlock()
		wctx, cancel := context.WithDeadline(ctx, until)
		var asked atomic.Bool
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-s.verifyNow:
				asked.Store(true)
				cancel()
			case <-wctx.Done():
			}
		}()
		var err error
		if bad {
			<-wctx.Done() // a broken chain is not followed: the next full check says where it stands
		} else {
			err = db.Wait(wctx, seq)
		}
		cancel()
		<-watched
		if asked.Load() || err != nil || bad || ctx.Err() != nil || !time.Now().Before(until) {
			return
		}
		rep, err := db.Verify(ctx, &store.VerifyOptions{From: seq, FromHash: hash})
		if ctx.Err() != nil {
			return
		}
		s.verifyMu.Lock()
		switch {
		case err != nil:
			s.verified.err = err
		case rep.OK && rep.LastSeq >= s.verified.seq:
			s.verified.seq, s.verified.hash, s.verified.at, s.verified.err = rep.LastSeq, rep.LastHash, s.cfg.Now(), nil
		case rep.OK:
		default:
			s.verified.bad = &rep
		}
		s.verifyMu.Unlock()
		if err != nil {
			s.log.Warn("verify new events", "err", err)
		}
		// At most a check per verifyPause: a busy chain is checked in
		// batches.
		if !sleepCtx(ctx, verifyPause) {
			return
		}
	}
}

// auditVerifyNow is an auditor's "Verify the whole chain now": the
// background verifier starts a full verification (unless one runs), and
// the Chain page shows its progress.
func (s *Server) auditVerifyNow(w http.ResponseWriter, r *http.Request, id identity) {
	s.startVerifier()
	select {
	case s.verifyNow <- struct{}{}:
		s.log.Info("full chain verification requested", "user", id.Name)
	default: // already asked
	}
	http.Redirect(w, r, "/audit/verify", http.StatusSeeOther)
}

// verifyPause spaces the incremental checks of a busy chain.
const verifyPause = 200 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// verification returns the state of the background verification (starting
// the verifier if need be). It never verifies.
func (s *Server) verification(ctx context.Context) verifyCache {
	s.startVerifier()
	s.verifyMu.Lock()
	defer s.verifyMu.Unlock()
	s.catchUp(ctx)
	return s.verified
}

// inlineVerify is how many events a page request may verify itself so
// that its banner is exact: a small chain not yet verified at all, or the
// events committed since the checkpoint. Beyond it the page shows the
// background verifier's state.
const inlineVerify = 2000

// catchUp verifies a few events inline (see inlineVerify). Callers hold
// verifyMu.
func (s *Server) catchUp(ctx context.Context) {
	v := &s.verified
	head := s.cfg.Chain.LastSeq()
	switch {
	case v.bad != nil:
	case !v.checked() && head <= inlineVerify:
		start := time.Now()
		rep, err := s.cfg.Chain.Verify(ctx, nil)
		if err != nil {
			return
		}
		v.full, v.fullAt, v.fullTook, v.fulls, v.at = rep, s.cfg.Now(), time.Since(start), v.fulls+1, s.cfg.Now()
		if !rep.OK {
			v.bad = &rep
		} else if rep.LastSeq >= v.seq {
			v.seq, v.hash = rep.LastSeq, rep.LastHash
		}
	case v.checked() && head > v.seq && head-v.seq <= inlineVerify:
		rep, err := s.cfg.Chain.Verify(ctx, &store.VerifyOptions{From: v.seq, FromHash: v.hash})
		switch {
		case err != nil:
		case !rep.OK:
			v.bad = &rep
		case rep.LastSeq >= v.seq:
			v.seq, v.hash, v.at = rep.LastSeq, rep.LastHash, s.cfg.Now()
		}
	}
}

// chainStatus is the verification banner of every audit page.
type chainStatus struct {
	OK      bool
	Text    string
	Checked time.Time
}

func (s *Server) status(ctx context.Context) chainStatus {
	v := s.verification(ctx)
	running := ""
	if v.running && v.target > 0 {
		running = fmt.Sprintf("; full re-verification running: %d%% (seq %d of %d)", v.progress*100/v.target, v.progress, v.target)
	}
	switch {
	case v.bad != nil:
		return chainStatus{Text: fmt.Sprintf("broken at seq %d: %s", v.bad.BadSeq, v.bad.Problem), Checked: v.at}
	case !v.checked() && v.err != nil:
		return chainStatus{Text: "could not verify the chain (see the log)", Checked: s.cfg.Now()}
	case !v.checked() && v.running && v.progress == 0:
		return chainStatus{OK: true, Text: fmt.Sprintf("not verified yet: the verification of %d events starts in a moment", v.target), Checked: s.cfg.Now()}
	case !v.checked() && v.running:
		return chainStatus{OK: true, Text: fmt.Sprintf("not verified yet: verification running, %d%% (seq %d of %d)", v.progress*100/max(v.target, 1), v.progress, v.target), Checked: s.cfg.Now()}
	case !v.checked():
		return chainStatus{OK: true, Text: "not verified yet", Checked: s.cfg.Now()}
	case v.seq == 0:
		return chainStatus{OK: true, Text: "is empty: nothing to verify yet", Checked: v.at}
	}
	return chainStatus{OK: true, Text: fmt.Sprintf("verified up to seq %d%s", v.seq, running), Checked: v.at}
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
		if ev.Type == agentcore.EvUserMessage {
			if p, err := agentcore.Decode(ev); err == nil {
				return strings.Join(strings.Fields(p.(*agentcore.UserMessagePayload).Text), " ")
			}
		}
	}
	return ""
}

const sessionsPerPage = 100

// sessionScan bounds how many sessions one page reads looking for matches
// (a selective filter pages on from where it stopped).
const sessionScan = 20000

// auditSessions lists the sessions most recently active first, a page at a
// time keyed by seq (?before=SEQ: sessions whose last event is older),
// filtered by source, by text (in the id or the first message), and by
// date (active since / active until). It reads the store's recent-sessions
// index and the state index's topics, so a page costs the same whatever
// the chain's length.
func (s *Server) auditSessions(w http.ResponseWriter, r *http.Request, _ identity) {
	q := r.URL.Query()
	kind, text := q.Get("kind"), strings.TrimSpace(q.Get("q"))
	since, _ := time.Parse("2006-01-02", q.Get("since"))
	until, _ := time.Parse("2006-01-02", q.Get("until"))
	before, _ := strconv.ParseUint(q.Get("before"), 10, 64)
	if !until.IsZero() && before == 0 {
		// Active until the end of that day: start below the first event after it.
		seq, err := s.cfg.Chain.SeqAt(until.Add(24*time.Hour - time.Nanosecond))
		if err != nil {
			s.log.Error("audit: find date", "err", err)
		}
		before = seq + 1
	}
	current := agentcore.IndexIsCurrent(s.cfg.Chain)
	topic := func(si store.SessionInfo) string {
		if t, ok := agentcore.IndexedTopic(s.cfg.Chain, si.ID, current); ok {
			return t
		}
		return s.topic(si.ID, si.FirstSeq)
	}
	lower := strings.ToLower(text)
	var rows []sessionRow
	scanned := 0
	var last uint64
	more := false
	for si, err := range s.cfg.Chain.RecentSessions(before) {
		if err != nil {
			s.log.Error("audit: list sessions", "err", err)
			http.Error(w, "could not read the sessions; operators can see the details in the log", http.StatusInternalServerError)
			return
		}
		if !since.IsZero() && si.Last.Before(since) {
			break // the rest were active earlier still
		}
		if len(rows) == sessionsPerPage || scanned == sessionScan {
			more = true
			break
		}
		scanned++
		last = si.LastSeq
		k := sessionKind(si.ID)
		if kind != "" && k != kind {
			continue
		}
		row := sessionRow{SessionInfo: si, Kind: k, Link: "/audit/session?id=" + url.QueryEscape(si.ID)}
		if text != "" && !strings.Contains(strings.ToLower(si.ID), lower) {
			row.Topic = topic(si)
			if !strings.Contains(strings.ToLower(row.Topic), lower) {
				continue
			}
		}
		rows = append(rows, row)
	}
	for i := range rows {
		if rows[i].Topic == "" {
			rows[i].Topic = topic(rows[i].SessionInfo)
		}
	}
	next := ""
	if more {
		nq := r.URL.Query()
		nq.Set("before", strconv.FormatUint(last, 10))
		if len(rows) == sessionsPerPage {
			nq.Set("before", strconv.FormatUint(rows[len(rows)-1].LastSeq, 10))
		}
		next = "/audit?" + nq.Encode()
	}
	s.page(w, r, "sessions.html", map[string]any{"Tab": "sessions", "Status": s.status(r.Context()), "Rows": rows,
		"Total": len(rows), "Kind": kind, "Q": text, "Since": q.Get("since"), "Until": q.Get("until"), "Paged": before > 0,
		"Kinds": []string{"web", "mattermost", "slack", "terminal", "system"}, "Next": next})
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
	// Times are the facts that hold a time, shown after Meta in the
	// console's rule for times (the "time" template function).
	Times []metaTime
}

// metaTime is a fact of a row around a time: Before, the time, After.
type metaTime struct {
	Before string
	At     time.Time
	After  string
}

// timelineRow renders one row of agentcore's timeline.
func timelineRow(tr agentcore.TimelineRow) trow {
	ev := tr.Event
	r := trow{Seq: ev.Seq, Time: ev.Time, Type: ev.Type, Actor: ev.Actor, Branch: ev.Branch, Class: "misc", Title: ev.Type}
	if tr.Problem != "" {
		r.Meta = append(r.Meta, tr.Problem)
		if _, capped := store.Capped(ev.Payload); !capped {
			r.Output = string(ev.Payload)
		}
		return r
	}
	switch p := tr.Payload.(type) {
	case *agentcore.UserMessagePayload:
		r.Class, r.Title, r.Text = "msg", "Message from "+strings.TrimPrefix(ev.Actor, "user:"), p.Text
		if tr.FirstLook {
			r.Title = "First look (read-only): the alert's question"
		}
	case *agentcore.AlertPayload:
		r.Class, r.Title, r.Badge, r.BadgeClass = "run", "Alert notification ("+p.Kind+")", p.Status, "v-confirm"
		if p.Status == "resolved" {
			r.BadgeClass = "v-pass"
		}
		for _, a := range tr.Joined {
			r.Times = append(r.Times, alertMeta("new", a, a.StartsAt))
		}
		for _, a := range tr.Resolved {
			r.Times = append(r.Times, alertMeta("resolved", a, a.EndsAt))
		}
	case *agentcore.AssistantPayload:
		r.Class, r.Title, r.Text = "answer", "Model", p.Content
		if tr.Findings {
			r.Title = "Model: the first look's findings"
		}
		for _, tc := range p.ToolCalls {
			r.Meta = append(r.Meta, "calls "+tc.Name)
		}
		if p.Model != "" {
			r.Meta = append(r.Meta, p.Model)
		}
		if p.LatencyMS > 0 {
			r.Meta = append(r.Meta, fmt.Sprintf("%d ms", p.LatencyMS))
		}
	case *agentcore.GatePayload:
		r.Class, r.Title = "cmd", "Command"
		r.Code = p.Command
		if p.Tool != agentcore.ToolRun && p.Tool != "" {
			r.Title, r.Code = p.Tool, strings.TrimSpace(p.Command+" "+p.Path)
		}
		r.Badge, r.BadgeClass = p.Verdict, "v-"+p.Verdict
		r.Meta = append(r.Meta, "action: "+p.Action, "rule: "+p.Rule)
		if p.Reason != "" {
			r.Meta = append(r.Meta, "reason: "+p.Reason)
		}
	case *agentcore.ApprovalAskedPayload:
		r.Class, r.Title, r.Code = "approval", "Approval requested", p.Command
		r.Badge, r.BadgeClass = "waiting", "v-confirm"
		r.Meta = append(r.Meta, "request "+p.RequestID, fmt.Sprintf("sha256 %.12s…", p.SHA256))
		if p.Requester != "" {
			r.Meta = append(r.Meta, "requested for "+p.Requester)
		}
	case *agentcore.ApprovalDecidedPayload:
		r.Class, r.Title, r.Code = "approval", "Approval decision", tr.Command
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
	case *agentcore.ToolResultPayload:
		r.Class, r.Title, r.Output = "result", "Result of "+p.Tool, p.Content
		if tr.Command != "" {
			r.Code = tr.Command
		}
		if r.Badge, r.BadgeClass = tr.Result, "v-deny"; tr.Result == "exit 0" {
			r.BadgeClass = "v-pass"
		} else if tr.Result == "done" {
			r.Badge = ""
		}
		if p.DurationMS > 0 {
			r.Meta = append(r.Meta, fmt.Sprintf("%d ms", p.DurationMS))
		}
		if p.OutputSize > 0 {
			r.Meta = append(r.Meta, fmt.Sprintf("%d bytes of output", p.OutputSize))
		}
		if p.Cause != "" {
			r.Meta = append(r.Meta, stopMeta(p.Cause, p.CauseBy))
		}
	case *agentcore.RunPayload:
		if ev.Type == agentcore.EvRunStarted {
			r.Class, r.Title = "run", "Run started"
			break
		}
		r.Class, r.Title, r.Badge, r.BadgeClass = "run", "Run finished", p.Status, "v-"+p.Status
		if p.Detail != "" {
			r.Text = p.Detail
		}
		if p.Cause != "" {
			r.Meta = append(r.Meta, stopMeta(p.Cause, p.CauseBy))
		}
	case *agentcore.DatasourcePayload:
		r.Class, r.Title, r.Code = "cmd", "Datasource query ("+p.Datasource+")", strings.TrimSpace(p.Endpoint+" "+p.Query)
		if p.Error != "" {
			r.Badge, r.BadgeClass = "error", "v-deny"
			r.Text = p.Error
		}
		r.Meta = append(r.Meta, p.Tool, fmt.Sprintf("%d series, %d bytes", p.Series, p.ResultSize), fmt.Sprintf("%d ms", p.DurationMS))
		if p.Start != "" {
			r.Meta = append(r.Meta, p.Start+" .. "+p.End)
		}
	case *agentcore.AlertAckPayload:
		r.Class, r.Title, r.Text = "approval", "Acknowledged", "by "+ev.Actor
		r.Meta = append(r.Meta, p.Alerts...)
	case *agentcore.AlertSilencePayload:
		r.Class, r.Title, r.Badge, r.BadgeClass = "approval", "Silence in Alertmanager", p.Action, "v-confirm"
		r.Text = strings.Join(p.Matchers, " ")
		r.Meta = append(r.Meta, nonEmpty("request "+p.RequestID, p.SilenceID, p.Error)...)
		if !p.EndsAt.IsZero() {
			r.Times = append(r.Times, metaTime{Before: "until ", At: p.EndsAt})
		}
	case *agentcore.ApprovalReminderPayload:
		r.Class, r.Title, r.Code = "approval", "Approval reminder ("+p.Stage+")", tr.Command
		r.Meta = append(r.Meta, "request "+p.RequestID, fmt.Sprintf("%d user(s) mentioned", len(p.Mentioned)))
	case *agentcore.ClearPayload:
		r.Class, r.Title = "run", "New topic (/clear)"
	case *agentcore.CompactedPayload:
		r.Class, r.Title, r.Text = "run", "Compacted", p.Summary
	case *agentcore.NotePayload:
		r.Title = "Note: " + strings.ReplaceAll(p.Kind, "_", " ")
		r.Text = strings.TrimSpace(strings.Join(nonEmpty(p.RequestID, p.User, p.Detail), " · "))
		if p.Kind == agentcore.NoteClickRefused {
			r.Class, r.Badge, r.BadgeClass = "approval", "refused click", "v-deny"
		}
	case *agentcore.SystemPromptPayload:
		r.Title, r.Output = "System prompt", p.Text
	case *agentcore.ProtocolSwitchPayload:
		r.Title, r.Text = "Protocol switch", p.From+" → "+p.To+": "+p.Reason
	default:
		r.Output = string(ev.Payload)
	}
	return r
}

// alertMeta is one alert of a notification: what happened to it, its
// name and labels, and the alerting system's own time of it.
func alertMeta(what string, a *agentcore.TimelineAlert, at time.Time) metaTime {
	m := metaTime{Before: what + ": " + strings.TrimSpace(a.Name+" "+strings.Join(a.Labels, " "))}
	if !at.IsZero() {
		m.Before += " (" + map[string]string{"new": "started", "resolved": "ended"}[what] + " "
		m.At, m.After = at, ")"
	}
	return m
}

// stopMeta says why a run or a command was stopped: a shutdown and its
// signal, or who stopped it.
func stopMeta(kind, by string) string {
	return "cause: " + (&agentcore.StopCause{Kind: kind, By: by}).Error()
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
	if si, ok, err := s.cfg.Chain.Session(sid); err != nil {
		s.log.Error("audit: read session", "conv", sid, "err", err)
	} else if ok {
		info = &si
	}
	// A session whose events (or earlier events) were archived is
	// reported as such, with where they are, not as missing.
	var archived *store.ArchivedSession
	if a, ok, err := s.cfg.Chain.Archived(sid); err != nil {
		s.log.Error("audit: read session", "conv", sid, "err", err)
	} else if ok {
		archived = &a
	}
	if info == nil {
		data := map[string]any{"Tab": "sessions", "Status": s.status(r.Context()), "Missing": sid, "Archived": archived}
		if archived == nil {
			w.WriteHeader(http.StatusNotFound)
			// Without a record of the session (a store rebuilt from its
			// journal has none), name the archive the live chain follows.
			if rec, _, ok, err := s.cfg.Chain.ArchivedBefore(); err == nil && ok {
				data["Before"] = rec
			}
		}
		s.page(w, r, "session.html", data)
		return
	}
	var last uint64
	more := false
	tl, err := agentcore.ReadTimeline(sid, func(yield func(store.Event, error) bool) {
		n := 0
		for ev, err := range s.cfg.Chain.Events(sid, after+1) {
			if err == nil && n == s.cfg.PageSize {
				more = true
				return
			}
			n++
			if !yield(ev, err) {
				return
			}
		}
	})
	if err != nil {
		s.log.Error("audit: read session", "conv", sid, "err", err)
		http.Error(w, "could not read the session; operators can see the details in the log", http.StatusInternalServerError)
		return
	}
	rows := make([]trow, 0, len(tl.Rows))
	for _, tr := range tl.Rows {
		rows = append(rows, timelineRow(tr))
		last = tr.Seq
	}
	link := func(a uint64) string {
		return "/audit/session?id=" + url.QueryEscape(sid) + "&after=" + strconv.FormatUint(a, 10)
	}
	next := ""
	if more {
		next = link(last)
	}
	s.page(w, r, "session.html", map[string]any{"Tab": "sessions", "Status": s.status(r.Context()), "Info": info,
		"Kind": sessionKind(sid), "Rows": rows, "Next": next, "First": link(0), "Paged": after > 0, "Archived": archived,
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
	if s.cfg.Chain.IndexCurrent(agentcore.StateIndex.Name) {
		s.indexedApprovals(w, r)
		return
	}
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
		if ev.Type != agentcore.EvApprovalAsked && ev.Type != agentcore.EvApprovalDecided && ev.Type != agentcore.EvNote {
			continue // decoded only what the page shows
		}
		pl, err := agentcore.Decode(ev)
		if err != nil {
			continue
		}
		switch p := pl.(type) {
		case *agentcore.ApprovalAskedPayload:
			if ev.Seq >= before {
				continue
			}
			a := &approvalRow{Seq: ev.Seq, Time: ev.Time, Session: ev.Session, RequestID: p.RequestID, Command: p.Command,
				Requester: p.Requester, Decision: "open", Class: "v-confirm",
				Link: "/audit/session?id=" + url.QueryEscape(ev.Session) + "&after=" + strconv.FormatUint(ev.Seq-1, 10)}
			byID[ev.Session+"\x00"+p.RequestID] = a
			rows = append(rows, a)
		case *agentcore.ApprovalDecidedPayload:
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
		case *agentcore.NotePayload:
			if a := byID[ev.Session+"\x00"+p.RequestID]; a != nil && p.Kind == agentcore.NoteClickRefused {
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
	s.page(w, r, "approvals.html", map[string]any{"Tab": "approvals", "Status": s.status(r.Context()), "Rows": rows, "Total": total,
		"From": from, "Before": before - 1, "Older": older})
}

// approvalsPerPage is how many requests an indexed approvals page shows;
// approvalScan bounds how many it reads looking for them (a selective
// filter pages on from where it stopped).
const (
	approvalsPerPage = 100
	approvalScan     = 20000
)

// approvalStates are the approvals page's state filter values.
var approvalStates = []string{"open", "approved", "denied", "expired"}

// indexedApprovals is the approvals page read from the state index, newest
// first, filtered by state, approver, source and channel, in pages keyed
// by seq (?before=SEQ): its cost does not grow with the chain.
func (s *Server) indexedApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state, by, kind, channel := q.Get("state"), strings.TrimSpace(q.Get("by")), q.Get("kind"), strings.TrimSpace(q.Get("channel"))
	before, _ := strconv.ParseUint(q.Get("before"), 10, 64)
	entries, ok := agentcore.IndexedApprovals(s.cfg.Chain, before)
	if !ok {
		http.Error(w, "the approvals index changed; reload the page", http.StatusServiceUnavailable)
		return
	}
	var rows []*approvalRow
	scanned := 0
	var last uint64
	more := false
	for a, err := range entries {
		if err != nil {
			s.log.Error("audit: read the approvals index", "err", err)
			http.Error(w, "could not read the approvals; operators can see the details in the log", http.StatusInternalServerError)
			return
		}
		if len(rows) == approvalsPerPage || scanned == approvalScan {
			more = true
			break
		}
		scanned++
		last = a.Seq
		row := &approvalRow{Seq: a.Seq, Time: a.Time, Session: a.Session, RequestID: a.RequestID, Command: a.Command,
			Requester: a.Requester, Decision: "open", Class: "v-confirm", Refused: a.Refused,
			Link: "/audit/session?id=" + url.QueryEscape(a.Session) + "&after=" + strconv.FormatUint(a.Seq-1, 10)}
		if a.Decided {
			row.By, row.Why, row.Decided = a.By, a.Why, a.DecidedAt
			row.Decision, row.Class = "denied", "v-deny"
			switch {
			case a.Approved:
				row.Decision, row.Class = "approved", "v-pass"
			case a.By == "expiry":
				row.Decision = "expired"
			}
		}
		if (state != "" && row.Decision != state) || (by != "" && !strings.Contains(strings.ToLower(row.By), strings.ToLower(by))) ||
			(kind != "" && sessionKind(a.Session) != kind) || (channel != "" && !strings.HasPrefix(a.Session, channel)) {
			continue
		}
		rows = append(rows, row)
	}
	older := ""
	if more {
		nq := r.URL.Query()
		nq.Set("before", strconv.FormatUint(last, 10))
		if len(rows) == approvalsPerPage {
			nq.Set("before", strconv.FormatUint(rows[len(rows)-1].Seq, 10))
		}
		older = "/audit/approvals?" + nq.Encode()
	}
	s.page(w, r, "approvals.html", map[string]any{"Tab": "approvals", "Status": s.status(r.Context()), "Rows": rows, "Total": len(rows),
		"Indexed": true, "State": state, "States": approvalStates, "By": by, "Kind": kind, "Channel": channel,
		"Kinds": []string{"web", "mattermost", "slack", "terminal", "system"}, "Before": before, "Older": older})
}

func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request, _ identity) {
	st := s.status(r.Context())
	v := s.verification(r.Context())
	data := map[string]any{"Tab": "verify", "Status": st, "Path": s.cfg.Chain.Path(), "Head": s.cfg.Chain.LastSeq(),
		"Checkpoint": v.seq, "CheckpointHash": v.hash, "Running": v.running, "Progress": v.progress, "Target": v.target}
	if v.running && v.target > 0 {
		data["Percent"] = v.progress * 100 / v.target
	}
	if v.fulls > 0 {
		data["Report"] = v.full
		data["FullAt"], data["FullTook"] = v.fullAt, v.fullTook.Round(time.Millisecond).String()
	}
	data["CanVerify"] = !v.running
	if v.fulls > 0 {
		data["NextFull"] = v.fullAt.Add(fullVerifyEvery)
	}
	if cp := v.recorded; cp != nil {
		data["Recorded"] = *cp
		data["NextFull"] = cp.At.Add(fullVerifyEvery)
		if v.fulls == 0 {
			// Resumed: the last full verification is the recorded one.
			data["FullAt"], data["FullTook"] = cp.At, cp.Took.String()
		}
	}
	if v.bad != nil {
		data["Report"] = *v.bad
	}
	if v.export != "" {
		data["Export"], data["ExportOK"] = v.export, v.exportOK
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
	// The JSONL is the live events; where archived ones are goes in a
	// header (the body stays events only).
	if a, ok, err := s.cfg.Chain.Archived(sid); err == nil && ok {
		w.Header().Set("X-Thinbot-Archived", fmt.Sprintf("%d earlier events (seq %d-%d) in %s", a.Events, a.FirstSeq, a.LastSeq, strings.Join(a.Files, ", ")))
	}
	if err := s.cfg.Chain.Export(r.Context(), w, sid, 0); err != nil {
		s.log.Warn("audit export", "conv", sid, "err", err)
	}
}
