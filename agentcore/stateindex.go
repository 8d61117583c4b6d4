package agentcore

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

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
//	m/SEQ      -> the chat message id of the user message at SEQ
//	b/SESSION  -> the session's branch, when not 0
//
// Change stateIndexName whenever the ops change: the store then rebuilds
// the index from the chain once.
const stateIndexName = "agentcore-state-1"

// StateIndex is the store.Indexer Recover and Sessions use.
var StateIndex = store.Indexer{Name: stateIndexName, Ops: stateOps}

type indexedApproval struct {
	Seq     uint64 `json:"seq"`
	Session string `json:"session"`
	Command string `json:"command"`
	SHA256  string `json:"sha256"`
	CallID  string `json:"call_id"`
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
		var p approvalAskedPayload
		if json.Unmarshal(e.Payload, &p) == nil {
			v, _ := json.Marshal(indexedApproval{Seq: e.Seq, Session: e.Session, Command: p.Command, SHA256: p.SHA256, CallID: p.CallID})
			ops = append(ops, store.IndexOp{Key: ixKey("a/", p.RequestID), Value: v})
		}
	case EvApprovalDecided:
		var p approvalDecidedPayload
		if json.Unmarshal(e.Payload, &p) == nil {
			ops = append(ops, store.IndexOp{Key: ixKey("a/", p.RequestID), Delete: true}, store.IndexOp{Key: ixKey("p/", p.RequestID), Delete: true})
		}
	case EvNote:
		var p NotePayload
		if json.Unmarshal(e.Payload, &p) != nil {
			break
		}
		switch p.Kind {
		case NoteApprovalPosted:
			if p.RequestID != "" {
				ops = append(ops, store.IndexOp{Key: ixKey("p/", p.RequestID), Value: []byte(p.PostID)})
			}
		case NoteMessageQueued:
			if p.PostID != "" {
				v, _ := json.Marshal(indexedQueued{Seq: e.Seq, Session: e.Session, User: p.User, UserName: p.Name, Text: p.Detail})
				ops = append(ops, store.IndexOp{Key: ixKey("q/", p.PostID), Value: v, IfAbsent: true})
			}
		}
	case EvUserMessage:
		ops = append(ops, store.IndexOp{Key: ixKey("s/", e.Session), Value: seqBytes(e.Seq), IfAbsent: true})
		var p userMessagePayload
		if json.Unmarshal(e.Payload, &p) == nil && p.MessageID != "" {
			ops = append(ops, store.IndexOp{Key: ixKey("q/", p.MessageID), Delete: true},
				store.IndexOp{Key: append([]byte("m/"), seqBytes(e.Seq)...), Value: []byte(p.MessageID)})
		}
	}
	return ops
}

// unfinished reads what the index says is open.
func unfinished(db *store.DB) (u Unfinished, pend []indexedApproval, branch map[string]int, err error) {
	type seqd[T any] struct {
		seq uint64
		v   T
	}
	var runs []seqd[string]
	for k, v := range db.IndexScan([]byte("r/")) {
		if len(v) == 8 {
			runs = append(runs, seqd[string]{binary.BigEndian.Uint64(v), string(k[2:])})
		}
	}
	slices.SortFunc(runs, func(a, b seqd[string]) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range runs {
		u.Runs = append(u.Runs, r.v)
	}
	var pa []seqd[PendingApproval]
	for k, v := range db.IndexScan([]byte("a/")) {
		var a indexedApproval
		if json.Unmarshal(v, &a) != nil {
			return u, nil, nil, fmt.Errorf("state index: bad record %q", k)
		}
		pend = append(pend, a)
		pa = append(pa, seqd[PendingApproval]{a.Seq, PendingApproval{Session: a.Session, RequestID: string(k[2:]), Command: a.Command}})
	}
	slices.SortFunc(pa, func(a, b seqd[PendingApproval]) int { return cmp.Compare(a.seq, b.seq) })
	slices.SortFunc(pend, func(a, b indexedApproval) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, a := range pa {
		for k, v := range db.IndexScan(ixKey("p/", a.v.RequestID)) {
			if string(k[2:]) == a.v.RequestID {
				a.v.PostID = string(v)
			}
		}
		u.Approvals = append(u.Approvals, a.v)
	}
	var qs []seqd[QueuedMessage]
	for k, v := range db.IndexScan([]byte("q/")) {
		var q indexedQueued
		if json.Unmarshal(v, &q) != nil {
			return u, nil, nil, fmt.Errorf("state index: bad record %q", k)
		}
		qs = append(qs, seqd[QueuedMessage]{q.Seq, QueuedMessage{Session: q.Session, MessageID: string(k[2:]), UserID: q.User, UserName: q.UserName, Text: q.Text}})
	}
	slices.SortFunc(qs, func(a, b seqd[QueuedMessage]) int { return cmp.Compare(a.seq, b.seq) })
	for _, q := range qs {
		u.Queued = append(u.Queued, q.v)
	}
	branch = map[string]int{}
	for _, s := range append(append([]string{}, u.Runs...), sessionsOf(u.Approvals)...) {
		for k, v := range db.IndexScan(ixKey("b/", s)) {
			if string(k[2:]) == s {
				branch[s], _ = strconv.Atoi(string(v))
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
