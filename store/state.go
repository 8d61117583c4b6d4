package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The state index: small keyed records that a layer above derives from
// events (what is open: runs, approvals, queued messages; the sessions and
// message ids a bot starts with), so that start-up reads them instead of
// the chain. They live in the "state" bucket beside the chain and are
// written in the transaction that commits the events they come from, so
// they are never ahead of or behind the chain they describe. They are
// derived data, not evidence: the chain stays the record, and the index is
// rebuilt from it whenever it could be stale (see UseIndex).

var (
	bucketState = []byte("state")
	keyIxName   = []byte("ixname")
	keyIxSeq    = []byte("ixseq")
)

// IndexOp is one change an Indexer makes for an event: put Key=Value, or
// delete Key. IfAbsent puts only when Key is not there yet.
type IndexOp struct {
	Key, Value []byte
	Delete     bool
	IfAbsent   bool
}

// Indexer derives IndexOps from events. Ops must depend on the event alone
// (not on the index's contents, beyond IfAbsent), so that indexing the
// chain from seq 1 always gives the same index.
type Indexer struct {
	// Name identifies the indexer and its version: an index built under
	// another name is dropped and rebuilt. Change it whenever Ops changes.
	Name string
	Ops  func(ev *Event) []IndexOp
}

// UseIndex makes every later commit keep ix's index, first bringing it up
// to date: it indexes the events committed since the index was last kept
// (by a process that did not use it: `thinbot ask`, an older thinbot, a
// store rebuilt from its journal), or the whole chain when the store has
// no index of that name yet (a one-time migration, logged). Appends wait
// while it runs. Calling it again with the same name is cheap.
func (db *DB) UseIndex(ctx context.Context, ix Indexer) error {
	if db.readOnly {
		return ErrReadOnly
	}
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	if db.indexer != nil && db.indexer.Name == ix.Name {
		return nil
	}
	var from uint64
	err := db.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if tx.Bucket(bucketState) != nil && string(meta.Get(keyIxName)) == ix.Name {
			if v := meta.Get(keyIxSeq); len(v) == 8 {
				from = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: index: %w", err)
	}
	last := db.lastSeq.Load()
	if from == 0 {
		// (Re)build: drop whatever another name left.
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			if tx.Bucket(bucketState) != nil {
				if err := tx.DeleteBucket(bucketState); err != nil {
					return err
				}
			}
			if _, err := tx.CreateBucket(bucketState); err != nil {
				return err
			}
			meta := tx.Bucket(bucketMeta)
			if err := meta.Put(keyIxName, []byte(ix.Name)); err != nil {
				return err
			}
			// From the live chain's first event (archived ones are gone).
			from = liveBase(tx)
			return meta.Put(keyIxSeq, seqKey(from))
		})
		if err != nil {
			return fmt.Errorf("store: index: %w", err)
		}
	}
	if from < last {
		start := time.Now()
		if last-from > 10_000 {
			db.log.Info("store: building the state index from the chain (once)", "index", ix.Name, "from_seq", from+1, "to_seq", last)
		}
		if err := db.catchUpIndex(ctx, &ix, from, last); err != nil {
			return err
		}
		if last-from > 10_000 {
			db.log.Info("store: state index built", "index", ix.Name, "events", last-from, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	db.indexer = &ix
	return nil
}

// catchUpIndex indexes events from+1..last, in transactions of a few
// thousand events.
func (db *DB) catchUpIndex(ctx context.Context, ix *Indexer, from, last uint64) error {
	for from < last {
		if err := ctx.Err(); err != nil {
			return err
		}
		var evs []*Event
		err := db.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketEvents).Cursor()
			for k, v := c.Seek(seqKey(from + 1)); k != nil && len(evs) < 8192; k, v = c.Next() {
				// The fields where the canonical layout puts them, not a
				// JSON decoder over the line, nor a validation of each
				// payload: that was four fifths of the first start of a
				// store without the index (issue #23).
				ev, ok := decodeFields(v, false)
				if !ok {
					var err error
					if ev, err = decodeLine(v); err != nil {
						return fmt.Errorf("event %d: %w", binary.BigEndian.Uint64(k), err)
					}
				}
				evs = append(evs, &ev)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: index: %w", err)
		}
		if len(evs) == 0 {
			return fmt.Errorf("store: index: event %d missing", from+1)
		}
		if err := db.bolt.Update(func(tx *bolt.Tx) error { return applyIndex(tx, ix, evs) }); err != nil {
			return fmt.Errorf("store: index: %w", err)
		}
		from = evs[len(evs)-1].Seq
	}
	return nil
}

// applyIndex applies ix's ops for evs (consecutive, the next after the
// index's seq) in tx and advances the index's seq.
func applyIndex(tx *bolt.Tx, ix *Indexer, evs []*Event) error {
	if ix == nil || len(evs) == 0 {
		return nil
	}
	b, meta := tx.Bucket(bucketState), tx.Bucket(bucketMeta)
	if b == nil {
		return nil
	}
	if v := meta.Get(keyIxSeq); len(v) != 8 || binary.BigEndian.Uint64(v)+1 != evs[0].Seq {
		// Not contiguous (cannot happen while UseIndex owns the
		// committer): leave the index behind; UseIndex catches up.
		return nil
	}
	for _, ev := range evs {
		for _, op := range ix.Ops(ev) {
			var err error
			switch {
			case op.Delete:
				err = b.Delete(op.Key)
			case op.IfAbsent && b.Get(op.Key) != nil:
			case unchanged(b, op):
				// Rewriting an equal value would still rewrite its page
				// (agentcore puts a session's branch at each of its
				// events).
			default:
				err = b.Put(op.Key, op.Value)
			}
			if err != nil {
				return err
			}
		}
	}
	return meta.Put(keyIxSeq, seqKey(evs[len(evs)-1].Seq))
}

// unchanged reports whether op puts the value b already holds.
func unchanged(b *bolt.Bucket, op IndexOp) bool {
	v := b.Get(op.Key)
	return v != nil && bytes.Equal(v, op.Value)
}

// scanChunk is how many index records IndexScan reads per transaction.
const scanChunk = 4096

// IndexRecord is one record of the state index: copies, the caller's to
// keep.
type IndexRecord struct {
	Key, Value []byte
}

// IndexScan yields the state index's records whose keys start with prefix,
// in key order (copies; no transaction is held while yielding). On a store
// without an index it yields nothing. A read that fails (the store closed,
// an I/O error) is yielded as the last element, with a zero record, as All
// yields its errors: a scan that ends without one has seen every record,
// so a caller that counts (a token budget) or collects what is open
// (Recover) never takes a failed read for the end of the records.
func (db *DB) IndexScan(prefix []byte) iter.Seq2[IndexRecord, error] {
	return db.scanState(prefix, func(c *bolt.Cursor, after []byte) ([]byte, []byte) {
		k, v := c.Seek(prefix)
		if after != nil {
			if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		return k, v
	}, (*bolt.Cursor).Next)
}

// scanState yields the state index's records with keys starting with prefix
// in the order a cursor walks them: start puts the cursor on the first
// record after last, the last key yielded (nil at first), and step moves it
// on. It reads scanChunk records in a short read transaction of their own,
// yields them with no transaction held, and reads on from the last one. A
// read that fails ends the scan with its error.
func (db *DB) scanState(prefix []byte, start func(c *bolt.Cursor, last []byte) ([]byte, []byte), step func(*bolt.Cursor) ([]byte, []byte)) iter.Seq2[IndexRecord, error] {
	return func(yield func(IndexRecord, error) bool) {
		var last []byte
		for {
			var recs []IndexRecord
			err := db.view(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketState)
				if b == nil {
					return nil
				}
				c := b.Cursor()
				for k, v := start(c, last); k != nil && bytes.HasPrefix(k, prefix) && len(recs) < scanChunk; k, v = step(c) {
					recs = append(recs, IndexRecord{Key: bytes.Clone(k), Value: bytes.Clone(v)})
				}
				return nil
			})
			if err != nil {
				yield(IndexRecord{}, fmt.Errorf("store: index scan: %w", err))
				return
			}
			for _, r := range recs {
				if !yield(r, nil) {
					return
				}
			}
			if len(recs) < scanChunk {
				return
			}
			last = recs[len(recs)-1].Key
		}
	}
}

// IndexCurrent reports whether the store holds the state index of that name
// up to its last event: kept by every commit so far, so a reader may trust
// it instead of the chain. A store that cannot be read has no current
// index: false sends the caller to the chain, whose read reports the
// failure.
func (db *DB) IndexCurrent(name string) bool {
	ok := false
	_ = db.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		v := meta.Get(keyIxSeq)
		ok = tx.Bucket(bucketState) != nil && string(meta.Get(keyIxName)) == name && len(v) == 8 &&
			binary.BigEndian.Uint64(v) >= db.lastSeq.Load() // >=: a commit in flight updates lastSeq just after its transaction
		return nil
	})
	return ok
}

// IndexGet returns a copy of the state index's value for key, or nil if
// it has none; err is a read that failed.
func (db *DB) IndexGet(key []byte) (value []byte, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketState); b != nil {
			value = bytes.Clone(b.Get(key))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: index get: %w", err)
	}
	return value, nil
}

// IndexScanBack yields the state index's records whose keys start with
// prefix and sort before before (all of them if before is nil), in
// descending key order: newest first for keys that end in a big-endian
// seq. Like IndexScan it holds no transaction while yielding and ends with
// the error of a read that fails.
func (db *DB) IndexScanBack(prefix, before []byte) iter.Seq2[IndexRecord, error] {
	end := before
	if end == nil || !bytes.HasPrefix(end, prefix) {
		// Just past the prefix's range.
		end = append(bytes.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	}
	return db.scanState(prefix, func(c *bolt.Cursor, last []byte) ([]byte, []byte) {
		e := end
		if last != nil {
			e = last
		}
		k, v := c.Seek(e)
		if k == nil {
			k, v = c.Last()
		}
		for k != nil && bytes.Compare(k, e) >= 0 {
			k, v = c.Prev()
		}
		return k, v
	}, (*bolt.Cursor).Prev)
}
