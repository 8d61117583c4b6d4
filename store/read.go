package store

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// readChunk is how many events a reader takes per read transaction. Readers
// never hold a transaction while yielding, so a loop body may Append.
const readChunk = 512

// SessionInfo summarises one session of the chain.
type SessionInfo struct {
	ID       string
	Events   int
	First    time.Time // time of the first event
	Last     time.Time // time of the last event
	FirstSeq uint64
	LastSeq  uint64
}

// All returns the whole chain from fromSeq (1 if 0) in order, as committed
// when each chunk is read. Iteration stops at the first error, which is
// yielded with a zero Event. It may run concurrently with Append.
func (db *DB) All(fromSeq uint64) iter.Seq2[Event, error] {
	return decodeChunks(db.allLines(fromSeq))
}

// decodeChunks turns chunks of stored lines into events, stopping at the
// first error.
func decodeChunks(chunks iter.Seq2[[][]byte, error]) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for lines, err := range chunks {
			if err != nil {
				yield(Event{}, err)
				return
			}
			for _, l := range lines {
				// Nearly every line is canonical: read its fields where
				// the layout puts them (a console restoring its threads at
				// start-up spent a sixth of its CPU in the JSON decoder).
				ev, ok := decodeCanonical(l)
				var err error
				if !ok {
					ev, err = decodeLine(l)
				}
				if err != nil {
					yield(Event{}, fmt.Errorf("store: read: %w", err))
					return
				}
				if !yield(ev, nil) {
					return
				}
			}
		}
	}
}

// allLines yields stored lines in chunks, from fromSeq on.
func (db *DB) allLines(fromSeq uint64) iter.Seq2[[][]byte, error] {
	return func(yield func([][]byte, error) bool) {
		next := max(fromSeq, 1)
		db.readChunks(yield, func(tx *bolt.Tx) (lines [][]byte, err error) {
			c := tx.Bucket(bucketEvents).Cursor()
			for k, v := c.Seek(seqKey(next)); k != nil && len(lines) < readChunk; k, v = c.Next() {
				lines = append(lines, bytes.Clone(v))
				next = binary.BigEndian.Uint64(k) + 1
			}
			return lines, nil
		})
	}
}

// readChunks yields the chunks of lines read returns, one read transaction
// each (read keeps its own position), until a chunk is empty, the consumer
// stops, or read fails: then the error is yielded and reading ends.
func (db *DB) readChunks(yield func([][]byte, error) bool, read func(tx *bolt.Tx) ([][]byte, error)) {
	for {
		var lines [][]byte
		err := db.view(func(tx *bolt.Tx) (err error) {
			lines, err = read(tx)
			return err
		})
		if err != nil {
			yield(nil, fmt.Errorf("store: read: %w", err))
			return
		}
		if len(lines) == 0 || !yield(lines, nil) {
			return
		}
	}
}

// Event returns the event at seq; ok is false when the chain has none
// there.
func (db *DB) Event(seq uint64) (ev Event, ok bool, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketEvents).Get(seqKey(seq))
		if v == nil {
			return nil
		}
		ev, err = decodeLine(v)
		ok = err == nil
		return err
	})
	if err != nil {
		return Event{}, false, fmt.Errorf("store: read event %d: %w", seq, err)
	}
	return ev, ok, nil
}

// Events returns session's events with Seq >= fromSeq, in order, read through
// the per-session index (no scan of other sessions). Errors are yielded as
// for All; an index entry without its event is an error.
func (db *DB) Events(session string, fromSeq uint64) iter.Seq2[Event, error] {
	return decodeChunks(db.sessionLines(session, fromSeq))
}

func (db *DB) sessionLines(session string, fromSeq uint64) iter.Seq2[[][]byte, error] {
	return func(yield func([][]byte, error) bool) {
		prefix := append([]byte(session), 0)
		next := max(fromSeq, 1)
		db.readChunks(yield, func(tx *bolt.Tx) (lines [][]byte, err error) {
			events := tx.Bucket(bucketEvents)
			c := tx.Bucket(bucketIndex).Cursor()
			for k, _ := c.Seek(indexKey(session, next)); k != nil && len(lines) < readChunk; k, _ = c.Next() {
				if len(k) != len(prefix)+8 || !bytes.HasPrefix(k, prefix) {
					break
				}
				seq := binary.BigEndian.Uint64(k[len(prefix):])
				v := events.Get(seqKey(seq))
				if v == nil {
					return nil, fmt.Errorf("session %q index points at missing event %d", session, seq)
				}
				lines = append(lines, bytes.Clone(v))
				next = seq + 1
			}
			return lines, nil
		})
	}
}

// Sessions lists the sessions of the chain, least recently active first
// (ordered by LastSeq).
func (db *DB) Sessions() ([]SessionInfo, error) {
	var out []SessionInfo
	err := db.view(func(tx *bolt.Tx) error {
		return summariesOf(tx).forEach(func(k, v []byte) error {
			si, ok := decodeSessionInfo(v)
			if !ok {
				return fmt.Errorf("session %q: damaged session record", k)
			}
			out = append(out, SessionInfo{
				ID: string(k), Events: int(si.events),
				First: time.Unix(0, si.first).UTC(), Last: time.Unix(0, si.last).UTC(),
				FirstSeq: si.firstSeq, LastSeq: si.lastSeq,
			})
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: sessions: %w", err)
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return cmp.Compare(a.LastSeq, b.LastSeq) })
	return out, nil
}

// Export writes events with Seq >= sinceSeq as JSONL, one stored line per
// event: the whole chain when session is "", else that session's events.
// The whole-chain export from seq 1 is byte-identical to the audit file and
// verifies with VerifyFile; a one-session export has gaps by design and
// only its hashes can be checked. It stops when ctx is done.
func (db *DB) Export(ctx context.Context, w io.Writer, session string, sinceSeq uint64) error {
	chunks := db.allLines(sinceSeq)
	if session != "" {
		chunks = db.sessionLines(session, sinceSeq)
	}
	var buf []byte
	for lines, err := range chunks {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		buf = buf[:0]
		for _, l := range lines {
			buf = append(append(buf, l...), '\n')
		}
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("store: export: %w", err)
		}
	}
	return nil
}

// Session returns one session's summary, read by its id; ok is false when
// the chain has no such session.
func (db *DB) Session(id string) (info SessionInfo, ok bool, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		v := summariesOf(tx).get([]byte(id))
		if v == nil {
			return nil
		}
		si, good := decodeSessionInfo(v)
		if !good {
			return fmt.Errorf("session %q: damaged session record", id)
		}
		info, ok = SessionInfo{
			ID: id, Events: int(si.events),
			First: time.Unix(0, si.first).UTC(), Last: time.Unix(0, si.last).UTC(),
			FirstSeq: si.firstSeq, LastSeq: si.lastSeq,
		}, true
		return nil
	})
	if err != nil {
		return SessionInfo{}, false, fmt.Errorf("store: session: %w", err)
	}
	return info, ok, nil
}

// RecentSessions yields the sessions whose last event has a seq below
// beforeSeq (all if 0), most recently active first, reading the recent
// index: a page of them costs the same whatever the chain's length. On a
// read-only store whose index an older thinbot did not keep, it reads
// every session summary instead. No transaction is held while yielding.
func (db *DB) RecentSessions(beforeSeq uint64) iter.Seq2[SessionInfo, error] {
	return func(yield func(SessionInfo, error) bool) {
		if beforeSeq == 0 {
			beforeSeq = ^uint64(0)
		}
		for {
			var out []SessionInfo
			missing := false
			err := db.view(func(tx *bolt.Tx) error {
				recent := tx.Bucket(bucketRecent)
				if recent == nil || !recentCurrent(tx) {
					missing = true
					return nil
				}
				c := recent.Cursor()
				k, v := c.Seek(seqKey(beforeSeq))
				if k == nil {
					k, v = c.Last()
				}
				for k != nil && binary.BigEndian.Uint64(k) >= beforeSeq {
					k, v = c.Prev()
				}
				sums := summariesOf(tx)
				for ; k != nil && len(out) < readChunk; k, v = c.Prev() {
					si, ok := decodeSessionInfo(sums.get(v))
					if !ok {
						return fmt.Errorf("session %q: damaged or missing session record", v)
					}
					out = append(out, SessionInfo{ID: string(v), Events: int(si.events),
						First: time.Unix(0, si.first).UTC(), Last: time.Unix(0, si.last).UTC(), FirstSeq: si.firstSeq, LastSeq: si.lastSeq})
				}
				return nil
			})
			if err == nil && missing {
				all, err := db.Sessions()
				if err != nil {
					yield(SessionInfo{}, err)
					return
				}
				for _, si := range slices.Backward(all) {
					if si.LastSeq < beforeSeq && !yield(si, nil) {
						return
					}
				}
				return
			}
			if err != nil {
				yield(SessionInfo{}, fmt.Errorf("store: sessions: %w", err))
				return
			}
			for _, si := range out {
				if !yield(si, nil) {
					return
				}
			}
			if len(out) < readChunk {
				return
			}
			beforeSeq = out[len(out)-1].LastSeq
		}
	}
}

// SeqAt returns the seq of the last event at or before t (0 if none; on a
// chain whose first events were archived, the seq before its first if
// none of the live ones), by a binary search over the chain (event times
// are in commit order; a clock stepped back makes the answer approximate
// around the step).
func (db *DB) SeqAt(t time.Time) (uint64, error) {
	base, _, err := db.base()
	if err != nil {
		return 0, err
	}
	lo, hi := base, db.lastSeq.Load() // answer in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		line, err := db.line(mid)
		if err != nil {
			return 0, err
		}
		ev, err := decodeLine(line)
		if err != nil {
			return 0, fmt.Errorf("store: read: %w", err)
		}
		if ev.Time.After(t) {
			hi = mid - 1
		} else {
			lo = mid
		}
	}
	return lo, nil
}
