package store

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
)

// ErrStale is returned (wrapped) by an Options.Replicate function when the
// batch it was given was formed on a chain head that another batch has
// since moved: the batch was not applied, and the committer forms it again
// on the new head.
var ErrStale = errors.New("store: batch formed on an old chain head")

// DivergedError is returned by ApplyLines when the store already holds an
// event at a seq the lines carry, and it is another one: the store and the
// log it replicates disagree from Seq on.
type DivergedError struct {
	Seq uint64
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("store: the chain disagrees with the replicated log from seq %d on", e.Seq)
}

// staleRetries is how often a replicated batch is formed again after
// ErrStale before its callers get the error.
const staleRetries = 3

// commitReplicated is commit with Options.Replicate: the batch is
// sequenced on the head, handed to the replicated log without holding
// auditMu (the log applies it through ApplyLines, on this node too, before
// Replicate returns), and the callers get Replicate's answer.
func (db *DB) commitReplicated(live []*request) {
	var err error
	for range staleRetries {
		db.auditMu.Lock()
		if db.failed != nil {
			db.auditMu.Unlock()
			db.answer(live, db.failed)
			return
		}
		_, lines, _ := db.sequence(live)
		db.auditMu.Unlock()
		if err = db.replicate(lines); !errors.Is(err, ErrStale) {
			break
		}
	}
	if err != nil {
		err = fmt.Errorf("store: append: %w", err)
	}
	db.answer(live, err)
}

// ApplyLines commits stored lines (the canonical lines of a chain's events,
// in seq order, each with a good hash) that a replicated log carries. Lines
// at seqs the store already holds must be byte-identical to its own, or it
// returns a *DivergedError naming the first that is not; the rest must
// continue the chain head (seq and prev), or it wraps ErrInvalid. Those are
// committed like an Append's events (journal, sync, bbolt, the state
// index). Of the lines already held only the last is compared unless it
// differs: the chain's hashes link every earlier one to it. Lines before
// the live chain's first event (archived here) are passed over, the one
// just before it checked against its prev.
func (db *DB) ApplyLines(lines [][]byte) error {
	return db.applyLines(lines, nil)
}

// ApplyLinesAfter is ApplyLines for an empty store whose lines start after
// seq 1: a replicated log's snapshot of a chain whose earlier events were
// archived. vouch is the stored line of the archive event, later in the
// chain, that records the events before the first line (ArchiveRecordOf:
// its Last is the first line's seq - 1, its Head that line's prev), as
// Verify requires of a chain that starts after seq 1. Until the store
// holds vouch's seq, this and later calls refuse any other line there
// (*DivergedError).
func (db *DB) ApplyLinesAfter(vouch []byte, lines [][]byte) error {
	return db.applyLines(lines, vouch)
}

func (db *DB) applyLines(lines [][]byte, vouch []byte) error {
	if db.readOnly {
		return ErrReadOnly
	}
	evs := make([]*Event, len(lines))
	for i, l := range lines {
		ev, err := parseLine(l)
		if err != nil {
			return fmt.Errorf("store: apply: line %d: %w: %v", i, ErrInvalid, err)
		}
		evs[i] = &ev
	}
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	if db.failed != nil {
		return db.failed
	}
	head := db.lastSeq.Load()
	seq, prev := head, db.lastHash
	if vouch != nil {
		if head != 0 || len(evs) == 0 {
			return fmt.Errorf("store: apply: %w: lines that start after an archive go only into an empty store", ErrInvalid)
		}
		v, err := parseLine(vouch)
		if err != nil {
			return fmt.Errorf("store: apply: the archive event: %w: %v", ErrInvalid, err)
		}
		r, ok := ArchiveRecordOf(v)
		if !ok || r.Last != evs[0].Seq-1 || r.Head != evs[0].Prev || v.Seq <= r.Last {
			return fmt.Errorf("store: apply: %w: the archive event given does not record the events before seq %d", ErrInvalid, evs[0].Seq)
		}
		seq, prev = r.Last, r.Head
		db.vouch, db.vouchSeq = bytes.Clone(vouch), v.Seq
		if db.auditFile != nil && db.auditOff == 0 {
			db.auditSeq = r.Last // the journal starts after the archive too
		}
	}
	held := 0
	for held < len(evs) && evs[held].Seq <= head {
		held++
	}
	if held > 0 {
		base, basePrev, err := db.base()
		if err != nil {
			return err
		}
		skip := 0
		for skip < held && evs[skip].Seq <= base {
			skip++
		}
		if skip > 0 && evs[skip-1].Seq == base && evs[skip-1].Hash != basePrev {
			return &DivergedError{Seq: base}
		}
		if skip < held {
			if err := db.sameLines(evs[skip:held], lines[skip:held]); err != nil {
				return err
			}
		}
	}
	for i := held; i < len(evs); i += maxBatchEvents {
		end := min(i+maxBatchEvents, len(evs))
		vouched := false
		for j, ev := range evs[i:end] {
			if ev.Seq != seq+1 || ev.Prev != prev {
				return fmt.Errorf("store: apply: seq %d: %w: does not continue the chain at seq %d", ev.Seq, ErrInvalid, seq)
			}
			if ev.Seq == db.vouchSeq {
				if !bytes.Equal(lines[i+j], db.vouch) {
					return &DivergedError{Seq: ev.Seq}
				}
				vouched = true
			}
			seq, prev = ev.Seq, ev.Hash
		}
		if err := db.writeBatch(evs[i:end], lines[i:end], true); err != nil {
			return err
		}
		if vouched {
			db.vouch, db.vouchSeq = nil, 0
		}
	}
	return nil
}

// sameLines checks that the store holds lines at their events' seqs: the
// last one first, then, if it differs, each in order to name the first
// that differs. The caller holds auditMu.
func (db *DB) sameLines(evs []*Event, lines [][]byte) error {
	last := len(evs) - 1
	have, err := db.line(evs[last].Seq)
	if err != nil {
		return err
	}
	if bytes.Equal(have, lines[last]) {
		return nil
	}
	for i, ev := range evs[:last] {
		have, err := db.line(ev.Seq)
		if err != nil {
			return err
		}
		if !bytes.Equal(have, lines[i]) {
			return &DivergedError{Seq: ev.Seq}
		}
	}
	return &DivergedError{Seq: evs[last].Seq}
}

// Head returns the seq and hash of the chain's last event: 0 and ZeroHash
// for an empty chain.
func (db *DB) Head() (seq uint64, hash string) {
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	return db.lastSeq.Load(), db.lastHash
}

// Lines yields the stored lines of the events from fromSeq on, in chunks of
// one short read transaction each (as All does).
func (db *DB) Lines(fromSeq uint64) iter.Seq2[[][]byte, error] {
	return db.allLines(fromSeq)
}
