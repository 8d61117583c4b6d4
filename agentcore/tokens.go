package agentcore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"strconv"
	"time"

	"github.com/thinbot/thinbot/store"
)

// Token tallies from the chain. Every model call of a run is an assistant
// event with the usage the server reported and, where it reported none,
// the kernel's estimate (AssistantPayload.Estimated): together they are
// what the run counted against its budgets. The state index keeps two
// small records per call that counted tokens, in the commit of the event,
// so that a front end's per-thread and per-day tallies survive a restart
// without a second state file and without reading the chain:
//
//	U/SEQ              -> time, tokens, session (tokensValue): newest first, the calls of a day
//	u/SESSION\0SEQ     -> tokens (decimal): the calls of one session
//
// Assistant events recorded before the estimate was (thinbot before
// agentcore-state-3, the index that brought these records) carry no estimate: a call whose server reported no
// usage then counts nothing. Guessing it now would need the call's prompt,
// the session's projection at that point, which the index cannot afford
// to rebuild; the upgrade is a restart, which used to forget every tally
// anyway.

// tokensValue is a U/ record's value: the event's time (unix nanoseconds,
// 8 bytes big-endian), the tokens (uvarint), the session (the rest).
// Binary, not JSON: the index is rebuilt from every assistant event of the
// chain at an upgrade, and encoding it is part of that cost.
func tokensValue(e *store.Event, n int) []byte {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+binary.MaxVarintLen64+len(e.Session)), uint64(e.Time.UnixNano()))
	v = binary.AppendUvarint(v, uint64(n))
	return append(v, e.Session...)
}

// readTokensValue reads what tokensValue wrote.
func readTokensValue(seq uint64, v []byte) (TokenUse, bool) {
	if len(v) < 9 {
		return TokenUse{}, false
	}
	n, w := binary.Uvarint(v[8:])
	if w <= 0 || n > math.MaxInt32 {
		return TokenUse{}, false
	}
	return TokenUse{Seq: seq, Time: time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC(), Tokens: int(n), Session: string(v[8+w:])}, true
}

// usageFields are the parts of an assistant event the tallies read.
type usageFields struct {
	Usage     Usage  `json:"usage"`
	Estimated *Usage `json:"estimated_usage"`
}

// tokens is what the call counted: the server's usage, or the estimate.
func (u usageFields) tokens() int {
	n := u.Usage.PromptTokens + u.Usage.CompletionTokens
	if n == 0 && u.Estimated != nil {
		n = u.Estimated.PromptTokens + u.Estimated.CompletionTokens
	}
	return n
}

// tokenOps are the index records of an assistant event.
func tokenOps(e *store.Event) []store.IndexOp {
	var u usageFields
	if json.Unmarshal(e.Payload, &u) != nil {
		return nil
	}
	n := u.tokens()
	if n <= 0 {
		return nil
	}
	return []store.IndexOp{
		{Key: append([]byte("U/"), seqBytes(e.Seq)...), Value: tokensValue(e, n)},
		{Key: append(ixKey("u/", e.Session+"\x00"), seqBytes(e.Seq)...), Value: []byte(strconv.Itoa(n))},
	}
}

// TokenUse is one model call's tokens as the chain records them.
type TokenUse struct {
	Seq     uint64
	Time    time.Time
	Session string
	// Tokens is prompt plus completion: the server's usage, or the
	// kernel's estimate where the server reported none.
	Tokens int
}

// TokenUses yields the model calls of the agent's store that counted
// tokens, newest first (in seq order, which is time order), from the state
// index: a caller reads as far back as it needs (today's calls) and stops.
// Every call up to seq upTo (the chain's last event when it was called) is
// among them, and perhaps calls committed since. It reads 4,096 records a
// time, about a millisecond; to follow the calls as they come, use
// TokenUsesAfter. The first call of either brings the index up to date
// and has every later commit keep it (see Recover). A read of the index
// that fails is yielded as the last element: the calls before it are not
// all there are.
func (a *Agent) TokenUses() (uses iter.Seq2[TokenUse, error], upTo uint64, err error) {
	if err := a.useStateIndex(); err != nil {
		return nil, 0, err
	}
	db := a.cfg.Store
	upTo = db.LastSeq() // committed, so indexed
	return func(yield func(TokenUse, error) bool) {
		for r, err := range db.IndexScanBack([]byte("U/"), nil) {
			if err != nil {
				yield(TokenUse{}, fmt.Errorf("token tally: %w", err))
				return
			}
			if len(r.Key) != 10 {
				continue
			}
			u, ok := readTokensValue(binary.BigEndian.Uint64(r.Key[2:]), r.Value)
			if ok && !yield(u, nil) {
				return
			}
		}
	}, upTo, nil
}

// TokenUsesAfter yields the model calls after seq, oldest first, from the
// state index. It reads the index in blocks of 256 seqs (U/ keys sharing
// all but their last byte), so a caller that looks often reads a block or
// two; TokenUses's newest-first scan reads thousands of records a time.
// Every call up to seq upTo (the chain's last event when it was called) is
// among them, and perhaps calls committed since: a caller that read them
// all goes on from upTo or the last seq it got, whichever is later, and
// so never reads a stretch of the chain without calls twice. A read that
// fails is yielded as for TokenUses.
func (a *Agent) TokenUsesAfter(seq uint64) (uses iter.Seq2[TokenUse, error], upTo uint64, err error) {
	if err := a.useStateIndex(); err != nil {
		return nil, 0, err
	}
	db := a.cfg.Store
	upTo = db.LastSeq() // committed, so indexed
	return func(yield func(TokenUse, error) bool) {
		for blk := (seq + 1) >> 8; blk <= upTo>>8; blk++ {
			prefix := append([]byte("U/"), seqBytes(blk << 8)[:7]...)
			for r, err := range db.IndexScan(prefix) {
				if err != nil {
					yield(TokenUse{}, fmt.Errorf("token tally: %w", err))
					return
				}
				if len(r.Key) != 10 {
					continue
				}
				s := binary.BigEndian.Uint64(r.Key[2:])
				if s <= seq {
					continue
				}
				if u, ok := readTokensValue(s, r.Value); ok && !yield(u, nil) {
					return
				}
			}
		}
	}, upTo, nil
}

// SessionTokens returns the tokens of session's model calls recorded at
// or before seq upTo, from the state index (one record per call).
func (a *Agent) SessionTokens(session string, upTo uint64) (int, error) {
	if err := a.useStateIndex(); err != nil {
		return 0, err
	}
	prefix := ixKey("u/", session+"\x00")
	n := 0
	for r, err := range a.cfg.Store.IndexScan(prefix) {
		if err != nil {
			return 0, fmt.Errorf("token tally of %s: %w", session, err)
		}
		if len(r.Key) != len(prefix)+8 {
			continue // another session's, whose id has this one's as a prefix and a NUL
		}
		if binary.BigEndian.Uint64(r.Key[len(prefix):]) > upTo {
			break
		}
		t, err := strconv.Atoi(string(r.Value))
		if err != nil {
			return 0, fmt.Errorf("state index: bad record %q", r.Key)
		}
		n += t
	}
	return n, nil
}

// useStateIndex makes sure the store keeps the state index: once per
// Agent (UseIndex waits for the committer, which holds its lock through a
// sync).
func (a *Agent) useStateIndex() error {
	a.imu.Lock()
	defer a.imu.Unlock()
	if a.indexed {
		return nil
	}
	if err := useIndex(a.cfg.Store); err != nil {
		return err
	}
	a.indexed = true
	return nil
}
