package agentcore

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/thinbot/thinbot/store"
)

// StatusInterrupted is recorded for a run that a crash or restart cut short.
const StatusInterrupted = "interrupted"

// Kinds of EvNote events. Like event types they live in the chain forever:
// never rename one, only add.
const (
	// NoteApprovalPosted records the chat post that carries an approval
	// request's buttons (where Approver.Ask showed it); Recover reports it
	// so that a restart can update the message.
	NoteApprovalPosted = "approval_posted"
	// NoteMessageQueued records a chat message that waits behind a run;
	// Recover reports it until a user_message records its id.
	NoteMessageQueued = "message_queued"
	// NoteClickRefused records a click on an approval button by someone who
	// may not decide it.
	NoteClickRefused = "click_refused"
	// NoteCommandReply records an in-thread command (Command, by the
	// note's actor) and the bot's reply to it (Detail), which no other
	// event holds, so that a front end can rebuild the thread from the
	// chain.
	NoteCommandReply = "command_reply"
	// NoteRunRefused records a chat message no run was started for (a
	// token budget spent): PostID is the message's id, User and Name its
	// author, Detail the bot's reply. The message counts as handled: a
	// restart neither requeues it nor takes it again when the platform
	// delivers it again, so it is not refused twice.
	NoteRunRefused = "run_refused"
	// NoteScheduleResult records a scheduled check's outcome (Detail:
	// ScheduleOK, ScheduleFailed or ScheduleNotRun) and the digest of what
	// is compared from one run to the next (Text, hex), so that a restart
	// knows the last result (LastNote).
	NoteScheduleResult = "schedule_result"
	// NoteFirstLook records what became of an alert group's automatic
	// first look when it did not start at once (Detail: "queued",
	// "started" out of the queue, "skipped", "dropped" when its group
	// resolved while queued, or "requested" by a person's tap), and the
	// text the thread showed (Text).
	NoteFirstLook = "first_look"
)

// The outcomes a NoteScheduleResult records.
const (
	ScheduleOK     = "ok"
	ScheduleFailed = "failed"
	// ScheduleNotRun is a check that could not run: refused by a budget
	// or the gate, a skill command that is missing, a model that failed.
	ScheduleNotRun = "not_run"
)

// NotePayload is the payload of EvNote events that front ends record.
type NotePayload struct {
	// Kind says what happened: one of the Note constants.
	Kind      string `json:"kind"`
	RequestID string `json:"request_id,omitempty"`
	PostID    string `json:"post_id,omitempty"`
	User      string `json:"user,omitempty"`
	// Name is the user's name, when User is an id.
	Name   string `json:"name,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Command is the in-thread command a NoteCommandReply answers.
	Command string `json:"command,omitempty"`
	// Text is the chat message a NoteRunRefused started no run for, as
	// the person wrote it (a user_message keeps it so for a run).
	Text string `json:"text,omitempty"`
}

// QueuedMessage is a chat message that waited behind a run and was never
// handled (no user_message records its id).
type QueuedMessage struct {
	Session   string
	MessageID string
	UserID    string
	UserName  string
	Text      string
}

// PendingApproval is an approval request left without a decision.
type PendingApproval struct {
	Session   string
	RequestID string
	Command   string
	// PostID is the chat message that carries the buttons, if one was
	// recorded with a NoteApprovalPosted note.
	PostID string
}

// Unfinished is what a previous process left open.
type Unfinished struct {
	Approvals []PendingApproval
	// Runs are the sessions whose last run started but never finished.
	Runs []string
	// Queued are messages recorded as queued (NoteMessageQueued notes) that
	// no run handled, in chain order. Recover records nothing for them:
	// the front end handles them, which records them.
	Queued []QueuedMessage
	// LeaderLost says that a cluster's new leader closed them: the node
	// that left them open lost its leadership (RecoverLeaderLost).
	LeaderLost bool
	// Carried are the approval requests RecoverLeaderLost left open, and
	// with them their runs, for the new leader to go on with (Resume).
	Carried []CarriedApproval
}

// Recover closes what a previous process left open in db: every approval
// request without a decision gets a refusal (expired by the restart), and
// every run without an end gets a run_finished event with
// StatusInterrupted, each on its session's current branch. It returns what
// it closed so that front ends can update their messages and tell the
// threads. Call it once at start, before any Agent over db runs.
func Recover(db *store.DB) (Unfinished, error) {
	return recoverAs(db, false)
}

// RecoverLeaderLost is Recover for a node that takes over a cluster's
// leadership: what the old leader left open is closed the same way, and
// recorded as left by the leader's loss ("interrupted: leader lost"),
// except the approval requests whose buttons were posted for a command of
// this host (Unfinished.Carried): those, and their runs, stay open for the
// new leader to go on with (Agent.Resume), at most one per session.
func RecoverLeaderLost(db *store.DB) (Unfinished, error) {
	return recoverAs(db, true)
}

func recoverAs(db *store.DB, leaderLost bool) (Unfinished, error) {
	approvalWhy, runDetail := "expired: thinbot restarted before a decision", "the process ended before the run finished"
	if leaderLost {
		approvalWhy, runDetail = "expired: the cluster's leader was lost before a decision", "interrupted: leader lost"
	}
	if err := useIndex(db); err != nil {
		return Unfinished{}, err
	}
	open, pend, branch, err := unfinished(db)
	if err != nil {
		return Unfinished{}, err
	}
	record := func(session string, e store.Event) error {
		e.Session, e.Branch = session, branch[session]
		_, err := write(db, nil, durable, []store.Event{e})
		return err
	}
	u := Unfinished{Queued: open.Queued, LeaderLost: leaderLost}
	goesOn := map[string]bool{} // sessions whose run a carried request keeps open
	for i, pa := range open.Approvals {
		p := pend[i]
		if leaderLost && !goesOn[pa.Session] {
			c, ok, err := carried(db, pa)
			if err != nil {
				return u, err
			}
			if ok {
				u.Carried = append(u.Carried, c)
				goesOn[pa.Session] = true
				continue
			}
		}
		if err := record(pa.Session, store.Event{Type: EvApprovalDecided, Actor: "system", Payload: mustJSON(ApprovalDecidedPayload{
			CallID: p.CallID, RequestID: pa.RequestID, Approved: false, By: "system", Why: approvalWhy, SHA256: p.SHA256})}); err != nil {
			return u, err
		}
		u.Approvals = append(u.Approvals, pa)
	}
	for _, sid := range open.Runs {
		if goesOn[sid] {
			continue
		}
		if err := record(sid, store.Event{Type: EvRunFinished, Actor: "system", Payload: mustJSON(RunPayload{
			Status: StatusInterrupted, Detail: runDetail})}); err != nil {
			return u, err
		}
		u.Runs = append(u.Runs, sid)
	}
	return u, nil
}

// maxSeenIDs is how many handled message ids Sessions returns: the newest.
// They serve to drop a message a chat platform delivers again after a
// restart (a redelivery of recent messages, within minutes); a year of
// them would cost start-up time for nothing.
const maxSeenIDs = 10000

// KnownSession returns a function that reports whether db has a session of
// that id with a user message, from the state index (one read): what
// bot.Config.Known wants, instead of the list Sessions builds. Call it
// after Recover or Sessions (which bring the index up to date); every
// commit keeps the index after that. err is a read that failed.
func KnownSession(db *store.DB) func(id string) (bool, error) {
	return func(id string) (bool, error) {
		v, err := db.IndexGet(ixKey("s/", id))
		if err != nil {
			return false, fmt.Errorf("state index: %w", err)
		}
		return v != nil, nil
	}
}

// SeenMessages returns the newest maxSeenIDs (10,000) chat message ids
// already handled, in chain order, from the state index: Sessions without
// the list of sessions (see KnownSession).
func SeenMessages(db *store.DB) ([]string, error) {
	if err := useIndex(db); err != nil {
		return nil, err
	}
	return seenMessages(db)
}

// seenMessages reads the newest maxSeenIDs handled message ids. A read
// that fails is an error, not fewer ids: a front end would run a
// redelivered message a second time.
func seenMessages(db *store.DB) ([]string, error) {
	var ids []string
	for r, err := range db.IndexScanBack([]byte("m/"), nil) {
		if err != nil {
			return nil, fmt.Errorf("state index: %w", err)
		}
		if len(ids) == maxSeenIDs {
			break
		}
		ids = append(ids, string(r.Value))
	}
	slices.Reverse(ids) // chain order
	return ids, nil
}

// Sessions lists the ids of sessions in db that have a user message, in
// the order of their first, with the newest maxSeenIDs (10,000) chat message ids
// already handled (for deduplication after a restart), from the state
// index.
func Sessions(db *store.DB) (sessions []string, messageIDs []string, err error) {
	if err := useIndex(db); err != nil {
		return nil, nil, err
	}
	type first struct {
		seq uint64
		id  string
	}
	var fs []first
	for r, err := range db.IndexScan([]byte("s/")) {
		if err != nil {
			return nil, nil, fmt.Errorf("state index: %w", err)
		}
		if len(r.Value) == 8 {
			fs = append(fs, first{binary.BigEndian.Uint64(r.Value), string(r.Key[2:])})
		}
	}
	slices.SortFunc(fs, func(a, b first) int { return cmp.Compare(a.seq, b.seq) })
	for _, f := range fs {
		sessions = append(sessions, f.id)
	}
	if messageIDs, err = seenMessages(db); err != nil {
		return nil, nil, err
	}
	return sessions, messageIDs, nil
}

// AuditRow is one command or file read of a session as the chain recorded
// it.
type AuditRow struct {
	Seq uint64 // the gate decision's sequence number
	// What is the command, or "read_file PATH".
	What    string
	Verdict string
	// Approval is "approved by WHO" or "refused: WHY" when a human was
	// asked, else "".
	Approval string
	// Result is ToolResultPayload.Outcome; "" while no result is
	// recorded.
	Result string
}

// Audit lists the session's last n commands and file reads as the chain
// recorded them: verdict, who approved, exit code, oldest first. It is what
// the in-thread /audit command shows; the chain itself stays the record.
// What it lists goes to the chat, so it first syncs what a running turn
// appended buffered (store.DB.Sync).
func (a *Agent) Audit(session string, n int) ([]AuditRow, error) {
	if err := a.cfg.Store.Sync(); err != nil && !errors.Is(err, store.ErrReadOnly) {
		return nil, fmt.Errorf("read session %s: %w", session, err)
	}
	var rows []*AuditRow
	byCall := map[string]*AuditRow{}
	for e, err := range a.cfg.Store.Events(session, 1) {
		if err != nil {
			return nil, fmt.Errorf("read session %s: %w", session, err)
		}
		switch e.Type {
		case EvGateDecision:
			var p GatePayload
			if json.Unmarshal(e.Payload, &p) != nil {
				continue
			}
			r := &AuditRow{What: p.what(), Verdict: p.Verdict, Seq: e.Seq}
			rows = append(rows, r)
			byCall[p.CallID] = r
		case EvApprovalDecided:
			var p ApprovalDecidedPayload
			if json.Unmarshal(e.Payload, &p) == nil && byCall[p.CallID] != nil {
				if p.Approved {
					byCall[p.CallID].Approval = "approved by " + p.By
				} else {
					byCall[p.CallID].Approval = "refused: " + p.Why
				}
			}
		case EvToolResult:
			var p ToolResultPayload
			if json.Unmarshal(e.Payload, &p) == nil && byCall[p.CallID] != nil {
				byCall[p.CallID].Result = p.Outcome()
			}
		}
	}
	if len(rows) > n {
		rows = rows[len(rows)-n:]
	}
	out := make([]AuditRow, len(rows))
	for i, r := range rows {
		out[i] = *r
	}
	return out, nil
}
