package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Session summaries. Format 2 keeps each session's summary in the index
// bucket under summaryKey: right after the session's own index entries, so
// a commit that indexes a session's events rewrites its summary in the
// same leaf page instead of a page (and a branch) of a bucket of its own
// (issue #20: a quarter of the pages a commit wrote). Format 1, what an
// older thinbot wrote, kept them in bucket "sessions"; Open moves them into
// the index (migrateSummaries) when it opens such a store writable, and
// read-only it reads them where they are.

// formatV1 is the format marker of a store with bucket "sessions".
const formatV1 = "thinbot-events-1"

// bucketSessions held the summaries in format 1: key session id, value a
// sessionInfo.
var bucketSessions = []byte("sessions")

// summaryKey is the index key of a session's summary: its id + 0x01. Index
// entries (id + 0x00 + seq) always hold a NUL and summary keys never do
// (ids have none); the id's entries sort just before it, and nothing else
// between them (a key there starts with id + 0x00, so it is one of them).
func summaryKey[S string | []byte](id S) []byte {
	k := make([]byte, 0, len(id)+1)
	k = append(k, id...)
	return append(k, 1)
}

// summaries reads the session summaries of a transaction's store, in
// whichever format it has.
type summaries struct {
	b  *bolt.Bucket
	v1 bool // b is bucket "sessions"
}

func summariesOf(tx *bolt.Tx) summaries {
	if string(tx.Bucket(bucketMeta).Get(keyFormat)) == formatV1 {
		return summaries{b: tx.Bucket(bucketSessions), v1: true}
	}
	return summaries{b: tx.Bucket(bucketIndex)}
}

// get returns the stored summary of session id (nil if none).
func (s summaries) get(id []byte) []byte {
	if s.v1 {
		return s.b.Get(id)
	}
	return s.b.Get(summaryKey(id))
}

// forEach calls fn with each session id and its stored summary, in id
// order. In format 2 it steps over the index entries with one seek per
// session.
func (s summaries) forEach(fn func(id, v []byte) error) error {
	if s.v1 {
		return s.b.ForEach(fn)
	}
	c := s.b.Cursor()
	for k, v := c.First(); k != nil; {
		if i := bytes.IndexByte(k, 0); i >= 0 {
			k, v = c.Seek(summaryKey(k[:i])) // past the session's entries
			continue
		}
		if len(k) < 2 || k[len(k)-1] != 1 {
			return fmt.Errorf("malformed key %q in the session index", k)
		}
		if err := fn(k[:len(k)-1], v); err != nil {
			return err
		}
		k, v = c.Next()
	}
	return nil
}

// migrateSummaries turns a format 1 store into format 2 in tx: it moves
// the summaries from bucket "sessions" into the index. It moves them as
// they are: a damaged record (or key) stays damaged, and Verify says so as
// it did before, instead of the store not opening.
func migrateSummaries(tx *bolt.Tx) (int, error) {
	meta, index, sessions := tx.Bucket(bucketMeta), tx.Bucket(bucketIndex), tx.Bucket(bucketSessions)
	if sessions == nil {
		return 0, fmt.Errorf("bucket %s missing", bucketSessions)
	}
	n := 0
	err := sessions.ForEach(func(k, v []byte) error {
		n++
		return index.Put(summaryKey(k), bytes.Clone(v))
	})
	if err != nil {
		return 0, err
	}
	if err := tx.DeleteBucket(bucketSessions); err != nil {
		return 0, err
	}
	return n, meta.Put(keyFormat, []byte(formatVersion))
}
