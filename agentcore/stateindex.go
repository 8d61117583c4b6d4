package agentcore

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/store"
)

// The state index (store.Indexer) holds what start-up needs, kept as
// events commit, so that Recover and Sessions read a few records instead
// of the whole chain (issue #23: a year of events made start-up take 20 s).
// Keys, by prefix:
//
//	r/SESSION  -> seq of the run_started of a run without run_finished
//	a/REQUEST  -> a pending approval (indexedApproval, JSON)
//	p/REQUEST  -> the chat post that carries its buttons
//	q/POST     -> a queued message no user_message handled (indexedQueued, JSON)
//	s/SESSION  -> seq of the session's first user message
//	m/SEQ      -> the chat message id of the user message (or the
//	              run_refused note) at SEQ
//	b/SESSION  -> the session's branch, when not 0
//	t/SESSION  -> the session's first user message, shortened (its topic)
//	A/SEQ      -> every approval request (indexedRequest, JSON), for the audit viewer
//	D/SESSION\0REQUEST -> its decision (indexedDecision, JSON)
//	C/SESSION\0REQUEST\0SEQ -> a refused click on it (indexedClick, JSON)
//	U/SEQ      -> a model call's time, tokens and session (tokensValue; tokens.go)
//	u/SESSION\0SEQ -> the same call's tokens, by session (decimal)
//
// Change stateIndexName whenever the ops change: the store then rebuilds
// the index from the chain once.
const stateIndexName = "agentcore-state-4"

// StateIndex is the store.Indexer Recover and Sessions use.
var StateIndex = store.Indexer{Name: stateIndexName, Ops: stateOps}

type indexedApproval struct {
	Seq     uint64 `json:"seq"`
	Session string `json:"session"`
	Command string `json:"command"`
	SHA256  string `json:"sha256"`
	CallID  string `json:"call_id"`
}

type indexedRequest struct {
	Session   string `json:"session"`
	RequestID string `json:"request_id"`
	Command   string `json:"command"`
	Requester string `json:"requester,omitempty"`
	Time      int64  `json:"time"`
}

type indexedDecision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	Why      string `json:"why,omitempty"`
	Time     int64  `json:"time"`
}

type indexedClick struct {
	Actor  string `json:"actor"`
	Detail string `json:"detail,omitempty"`
}

type indexedQueued struct {
	Seq      uint64 `json:"seq"`
	Session  string `json:"session"`
	User     string `json:"user,omitempty"`
	UserName string `json:"name,omitempty"`
	Text     string `json:"text,omitempty"`
}

func ixKey(prefix, rest string) []byte { return []byte(prefix + rest) }

func seqBytes(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func stateOps(e *store.Event) []store.IndexOp {
	var ops []store.IndexOp
	if e.Branch > 0 {
		ops = append(ops, store.IndexOp{Key: ixKey("b/", e.Session), Value: []byte(strconv.Itoa(e.Branch))})
	}
	switch e.Type {
	case EvRunStarted:
		ops = append(ops, store.IndexOp{Key: ixKey("r/", e.Session), Value: seqBytes(e.Seq)})
	case EvRunFinished:
		ops = append(ops, store.IndexOp{Key: ixKey("r/", e.Session), Delete: true})
	case EvApprovalAsked:
		var p ApprovalAskedPayload
		if json.Unmarshal(e.Payload, &p) == nil {
			v, _ := json.Marshal(indexedApproval{Seq: e.Seq, Session: e.Session, Command: p.Command, SHA256: p.SHA256, CallID: p.CallID})
			r, _ := json.Marshal(indexedRequest{Session: e.Session, RequestID: p.RequestID, Command: p.Command, Requester: p.Requester, Time: e.Time.UnixNano()})
			ops = append(ops, store.IndexOp{Key: ixKey("a/", p.RequestID), Value: v},
				store.IndexOp{Key: append([]byte("A/"), seqBytes(e.Seq)...), Value: r})
		}
	case EvApprovalDecided:
		var p ApprovalDecidedPayload
		if json.Unmarshal(e.Payload, &p) == nil {
			d, _ := json.Marshal(indexedDecision{Approved: p.Approved, By: p.By, Why: p.Why, Time: e.Time.UnixNano()})
			ops = append(ops, store.IndexOp{Key: ixKey("a/", p.RequestID), Delete: true}, store.IndexOp{Key: ixKey("p/", p.RequestID), Delete: true},
				store.IndexOp{Key: ixKey("D/", e.Session+"\x00"+p.RequestID), Value: d, IfAbsent: true})
		}
	case EvNote:
		var p NotePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			break
		}
		switch p.Kind {
		case NoteClickRefused:
			if p.RequestID != "" {
				c, _ := json.Marshal(indexedClick{Actor: e.Actor, Detail: p.Detail})
				ops = append(ops, store.IndexOp{Key: append(ixKey("C/", e.Session+"\x00"+p.RequestID+"\x00"), seqBytes(e.Seq)...), Value: c})
			}
		case NoteApprovalPosted:
			if p.RequestID != "" {
				ops = append(ops, store.IndexOp{Key: ixKey("p/", p.RequestID), Value: []byte(p.PostID)})
			}
		case NoteMessageQueued:
			if p.PostID != "" {
				v, _ := json.Marshal(indexedQueued{Seq: e.Seq, Session: e.Session, User: p.User, UserName: p.Name, Text: p.Detail})
				ops = append(ops, store.IndexOp{Key: ixKey("q/", p.PostID), Value: v, IfAbsent: true})
			}
		case NoteRunRefused:
			if p.PostID != "" {
				ops = append(ops, handledOps(e.Seq, p.PostID)...)
			}
		}
	case EvAssistantMessage:
		ops = append(ops, tokenOps(e)...)
	case EvUserMessage:
		ops = append(ops, store.IndexOp{Key: ixKey("s/", e.Session), Value: seqBytes(e.Seq), IfAbsent: true})
		var p UserMessagePayload
		if json.Unmarshal(e.Payload, &p) == nil {
			ops = append(ops, store.IndexOp{Key: ixKey("t/", e.Session), Value: []byte(shortTopic(p.Text)), IfAbsent: true})
		}
		if p.MessageID != "" {
			ops = append(ops, handledOps(e.Seq, p.MessageID)...)
		}
	}
	return ops
}

// handledOps mark the chat message id as handled at seq (a user message,
// or a refusal): no longer waiting, and among the seen ids.
func handledOps(seq uint64, id string) []store.IndexOp {
	return []store.IndexOp{{Key: ixKey("q/", id), Delete: true},
		{Key: append([]byte("m/"), seqBytes(seq)...), Value: []byte(id)}}
}

// unfinished reads what the index says is open. A read that fails is an
// error, not an index with less open: Recover would leave a run open and
// an archive would cut a session that is not done.
func unfinished(db *store.DB) (u Unfinished, pend []indexedApproval, branch map[string]int, err error) {
	type seqd[T any] struct {
		seq uint64
		v   T
	}
	fail := func(err error) (Unfinished, []indexedApproval, map[string]int, error) {
		return Unfinished{}, nil, nil, fmt.Errorf("state index: %w", err)
	}
	var runs []seqd[string]
	for r, err := range db.IndexScan([]byte("r/")) {
		if err != nil {
			return fail(err)
		}
		if len(r.Value) == 8 {
			runs = append(runs, seqd[string]{binary.BigEndian.Uint64(r.Value), string(r.Key[2:])})
		}
	}
	slices.SortFunc(runs, func(a, b seqd[string]) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range runs {
		u.Runs = append(u.Runs, r.v)
	}
	var pa []seqd[PendingApproval]
	for r, err := range db.IndexScan([]byte("a/")) {
		if err != nil {
			return fail(err)
		}
		var a indexedApproval
		if json.Unmarshal(r.Value, &a) != nil {
			return u, nil, nil, fmt.Errorf("state index: bad record %q", r.Key)
		}
		pend = append(pend, a)
		pa = append(pa, seqd[PendingApproval]{a.Seq, PendingApproval{Session: a.Session, RequestID: string(r.Key[2:]), Command: a.Command}})
	}
	slices.SortFunc(pa, func(a, b seqd[PendingApproval]) int { return cmp.Compare(a.seq, b.seq) })
	slices.SortFunc(pend, func(a, b indexedApproval) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, a := range pa {
		for r, err := range db.IndexScan(ixKey("p/", a.v.RequestID)) {
			if err != nil {
				return fail(err)
			}
			if string(r.Key[2:]) == a.v.RequestID {
				a.v.PostID = string(r.Value)
			}
		}
		u.Approvals = append(u.Approvals, a.v)
	}
	var qs []seqd[QueuedMessage]
	for r, err := range db.IndexScan([]byte("q/")) {
		if err != nil {
			return fail(err)
		}
		var q indexedQueued
		if json.Unmarshal(r.Value, &q) != nil {
			return u, nil, nil, fmt.Errorf("state index: bad record %q", r.Key)
		}
		qs = append(qs, seqd[QueuedMessage]{q.Seq, QueuedMessage{Session: q.Session, MessageID: string(r.Key[2:]), UserID: q.User, UserName: q.UserName, Text: q.Text}})
	}
	slices.SortFunc(qs, func(a, b seqd[QueuedMessage]) int { return cmp.Compare(a.seq, b.seq) })
	for _, q := range qs {
		u.Queued = append(u.Queued, q.v)
	}
	branch = map[string]int{}
	for _, s := range append(append([]string{}, u.Runs...), sessionsOf(u.Approvals)...) {
		for r, err := range db.IndexScan(ixKey("b/", s)) {
			if err != nil {
				return fail(err)
			}
			if string(r.Key[2:]) == s {
				branch[s], _ = strconv.Atoi(string(r.Value))
			}
		}
	}
	return u, pend, branch, nil
}

func sessionsOf(as []PendingApproval) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Session)
	}
	return out
}

// useIndex brings the state index up to date (building it once on a store
// that lacks it).
func useIndex(db *store.DB) error {
	if err := db.UseIndex(context.Background(), StateIndex); err != nil {
		return fmt.Errorf("state index: %w", err)
	}
	return nil
}

// ApprovalEntry is one approval request of the chain with its outcome, as
// the state index keeps it for the audit viewer.
type ApprovalEntry struct {
	Seq       uint64
	Time      time.Time
	Session   string
	RequestID string
	Command   string
	Requester string
	Decided   bool
	Approved  bool
	By, Why   string
	DecidedAt time.Time
	// Refused are the refused clicks on its buttons: "who: why".
	Refused []string
}

// IndexedApprovals yields the approval requests with seq < before (all if
// before is 0), newest first, with their outcomes, from the state index.
// ok is false when db's index is not current (a store no daemon has opened
// since it was written without one): the caller then reads the chain. A
// read that fails is yielded as the last element: an auditor is not shown
// a decided request as open, nor a page that ends early as the last.
func IndexedApprovals(db *store.DB, before uint64) (entries iter.Seq2[ApprovalEntry, error], ok bool) {
	if !db.IndexCurrent(stateIndexName) {
		return nil, false
	}
	var end []byte
	if before > 0 {
		end = append([]byte("A/"), seqBytes(before)...)
	}
	return func(yield func(ApprovalEntry, error) bool) {
		fail := func(err error) { yield(ApprovalEntry{}, fmt.Errorf("approvals index: %w", err)) }
		for rec, err := range db.IndexScanBack([]byte("A/"), end) {
			if err != nil {
				fail(err)
				return
			}
			var r indexedRequest
			if len(rec.Key) != 10 || json.Unmarshal(rec.Value, &r) != nil {
				continue
			}
			a := ApprovalEntry{Seq: binary.BigEndian.Uint64(rec.Key[2:]), Time: time.Unix(0, r.Time).UTC(), Session: r.Session,
				RequestID: r.RequestID, Command: r.Command, Requester: r.Requester}
			dv, err := db.IndexGet(ixKey("D/", r.Session+"\x00"+r.RequestID))
			if err != nil {
				fail(err)
				return
			}
			var d indexedDecision
			if dv != nil && json.Unmarshal(dv, &d) == nil {
				a.Decided, a.Approved, a.By, a.Why, a.DecidedAt = true, d.Approved, d.By, d.Why, time.Unix(0, d.Time).UTC()
			}
			for cr, err := range db.IndexScan(ixKey("C/", r.Session+"\x00"+r.RequestID+"\x00")) {
				if err != nil {
					fail(err)
					return
				}
				var c indexedClick
				if json.Unmarshal(cr.Value, &c) == nil {
					a.Refused = append(a.Refused, strings.TrimPrefix(c.Actor, "user:")+": "+c.Detail)
				}
			}
			if !yield(a, nil) {
				return
			}
		}
	}, true
}

// topicLen is how much of a session's first message the index keeps.
const topicLen = 200

// shortTopic is text on one line, cut to topicLen bytes at a rune boundary.
func shortTopic(text string) string {
	t, _ := textfmt.Ends(strings.Join(strings.Fields(text), " "), topicLen, 0)
	return t
}

// IndexedTopic returns a session's first user message (shortened) from the
// state index; ok is false when the index is not current or cannot be
// read (read the chain). A session without a user message has "", true.
func IndexedTopic(db *store.DB, session string, current bool) (topic string, ok bool) {
	if !current {
		return "", false
	}
	t, err := db.IndexGet(ixKey("t/", session))
	if err != nil {
		return "", false
	}
	return string(t), true
}

// IndexIsCurrent reports whether db's state index is kept up to its last
// event (see store.DB.IndexCurrent).
func IndexIsCurrent(db *store.DB) bool { return db.IndexCurrent(stateIndexName) }
