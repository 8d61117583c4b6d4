package replica

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/thinbot/thinbot/store"
)

// entryMagic starts every raft entry that carries chain lines; the lines
// follow, each ended by "\n".
const entryMagic = "thinbot-chain/1\n"

// encodeEntry is the raft entry of one batch of stored lines.
func encodeEntry(lines [][]byte) []byte {
	n := len(entryMagic)
	for _, l := range lines {
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, entryMagic...)
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	return b
}

// decodeEntry splits an entry into its lines.
func decodeEntry(b []byte) ([][]byte, error) {
	rest, ok := bytes.CutPrefix(b, []byte(entryMagic))
	if !ok {
		return nil, errors.New("not a thinbot chain entry")
	}
	if len(rest) == 0 || rest[len(rest)-1] != '\n' {
		return nil, errors.New("chain entry: no line, or the last one unended")
	}
	return bytes.Split(rest[:len(rest)-1], []byte("\n")), nil
}

// link is where one stored line sits in the chain.
type link struct {
	Seq  uint64 `json:"seq"`
	Prev string `json:"prev"`
	Hash string `json:"hash"`
}

// links reads seq, prev and hash of each line and checks that they follow
// each other.
func links(lines [][]byte) ([]link, error) {
	out := make([]link, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal(l, &out[i]); err != nil {
			return nil, fmt.Errorf("chain entry: line %d: %w", i, err)
		}
		if i > 0 && (out[i].Seq != out[i-1].Seq+1 || out[i].Prev != out[i-1].Hash) {
			return nil, fmt.Errorf("chain entry: line %d does not follow line %d", i, i-1)
		}
	}
	return out, nil
}

// fsm is the raft state machine: the store. It keeps the chain head the
// log has built so far (cursor): an entry that does not continue it was
// formed on an old head (by a leader that had not yet applied every
// committed entry, or had lost its leadership) and is refused with
// store.ErrStale on every node alike; one that does is applied to the store
// (store.ApplyLines), which compares what it already holds.
type fsm struct {
	db   *store.DB
	fail func(error) // this node's store cannot follow the log

	mu   sync.Mutex
	head link // Seq, Hash: the cursor
}

func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	lines, err := decodeEntry(l.Data)
	if err != nil {
		return err
	}
	ls, err := links(lines)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if ls[0].Seq != f.head.Seq+1 || ls[0].Prev != f.head.Hash {
		return fmt.Errorf("raft entry %d: seq %d after head %d: %w", l.Index, ls[0].Seq, f.head.Seq, store.ErrStale)
	}
	err = f.db.ApplyLines(lines)
	if err == nil {
		err = f.applyArchives(lines)
	}
	if err != nil {
		err = fmt.Errorf("raft entry %d: %w", l.Index, err)
		f.fail(err)
		return err
	}
	f.head = ls[len(ls)-1]
	return nil
}

// archiveMark is in the stored line of every archive event (its session).
var archiveMark = []byte(`"session":"` + store.ArchiveSession + `"`)

// applyArchives applies the archive events among lines, which the store
// holds: the node writes the archive file from its own store, which must
// be the file recorded (store.ErrArchiveDiffers: its store is not the
// log's), and its cut is due at its next start (store.DB.ApplyArchive).
func (f *fsm) applyArchives(lines [][]byte) error {
	for _, l := range lines {
		if !bytes.Contains(l, archiveMark) {
			continue
		}
		var ev store.Event
		if err := json.Unmarshal(l, &ev); err != nil {
			return fmt.Errorf("archive event: %w", err)
		}
		if err := f.db.ApplyArchive(context.Background(), ev); err != nil {
			return err
		}
	}
	return nil
}

// snapshotHeader is a snapshot's first line; the chain's lines up to Seq
// follow.
type snapshotHeader struct {
	Format string `json:"format"`
	Seq    uint64 `json:"seq"`
	Hash   string `json:"hash"`
	// Base is set when the lines start after seq 1 (the store was cut
	// after an archive): the seq before the first line; Vouch is then the
	// stored line of the archive event that records the events up to it
	// (a node with an empty store needs it to take the lines:
	// store.DB.ApplyLinesAfter).
	Base  uint64 `json:"base,omitempty"`
	Vouch string `json:"vouch,omitempty"`
}

const snapshotFormat = "thinbot-chain-snapshot/1"

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &snapshot{db: f.db, head: f.head}
	base, _, err := f.db.Base()
	if err != nil || base == 0 {
		return s, err
	}
	// The store was cut after an archive: the snapshot carries the archive
	// event that vouches for its start, which the log must have reached.
	_, seq, ok, err := f.db.ArchivedBefore()
	switch {
	case err != nil:
		return nil, fmt.Errorf("snapshot: %w", err)
	case !ok:
		return nil, fmt.Errorf("snapshot: no archive event of the store records the events before its first (seq %d)", base+1)
	case seq > f.head.Seq:
		return nil, fmt.Errorf("snapshot: the log has not reached the archive event (seq %d) the store's start needs yet", seq)
	}
	for chunk, err := range f.db.Lines(seq) {
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		s.base, s.vouch = base, string(chunk[0])
		break
	}
	return s, nil
}

// Restore makes the store hold the snapshot's chain: the lines it already
// holds are compared (a store that differs refuses, naming the seq), the
// rest appended.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 1<<20)
	h, err := readSnapshotHeader(br)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.Base > 0 {
		if held := f.db.LastSeq(); held > 0 && held < h.Base {
			// Its store lacks events the cluster has archived: it cannot
			// catch up from this snapshot, nor from the log.
			err := fmt.Errorf("restore snapshot: this node's store ends at seq %d; the cluster archived the events up to seq %d and its snapshot starts after them: "+
				"stop the node, move its store (events.db, audit.jsonl) aside and start it again: it catches up from the snapshot", held, h.Base)
			f.fail(err)
			return err
		}
	}
	var batch [][]byte
	after := h.Base > 0 && f.db.LastSeq() == 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var err error
		if after {
			err, after = f.db.ApplyLinesAfter([]byte(h.Vouch), batch), false
		} else {
			err = f.db.ApplyLines(batch)
		}
		if err == nil {
			err = f.applyArchives(batch)
		}
		batch = batch[:0]
		return err
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			batch = append(batch, bytes.TrimSuffix(line, []byte("\n")))
			if len(batch) == 4096 {
				if err := flush(); err != nil {
					return fmt.Errorf("restore snapshot: %w", err)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("restore snapshot: %w", err)
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	if h.Base > 0 {
		// The archive event that vouches for the store's start is in it.
		var v link
		if err := json.Unmarshal([]byte(h.Vouch), &v); err != nil {
			return fmt.Errorf("restore snapshot: the archive event: %w", err)
		}
		if ev, ok, err := f.db.Event(v.Seq); err != nil || !ok || ev.Hash != v.Hash {
			err = fmt.Errorf("restore snapshot: the store's event %d is not the archive event the snapshot names (%v)", v.Seq, err)
			f.fail(err)
			return err
		}
	}
	f.head = link{Seq: h.Seq, Hash: h.Hash}
	return nil
}

func readSnapshotHeader(br *bufio.Reader) (snapshotHeader, error) {
	var h snapshotHeader
	line, err := br.ReadBytes('\n')
	if err != nil {
		return h, fmt.Errorf("snapshot header: %w", err)
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Format != snapshotFormat {
		return h, fmt.Errorf("snapshot header: not a %s", snapshotFormat)
	}
	return h, nil
}

// snapshot is the chain up to head: its lines are read from the store when
// raft persists it (the chain is append-only, so they stay as they were).
type snapshot struct {
	db   *store.DB
	head link
	// base and vouch: see snapshotHeader.
	base  uint64
	vouch string
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	err := s.write(sink)
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *snapshot) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	h, _ := json.Marshal(snapshotHeader{Format: snapshotFormat, Seq: s.head.Seq, Hash: s.head.Hash, Base: s.base, Vouch: s.vouch})
	bw.Write(append(h, '\n'))
	if s.head.Seq > 0 {
	read:
		for chunk, err := range s.db.Lines(0) {
			if err != nil {
				return fmt.Errorf("snapshot: %w", err)
			}
			for _, l := range chunk {
				var k link
				if err := json.Unmarshal(l, &k); err != nil {
					return fmt.Errorf("snapshot: %w", err)
				}
				if k.Seq > s.head.Seq {
					break read
				}
				bw.Write(append(l, '\n'))
				if k.Seq == s.head.Seq && k.Hash != s.head.Hash {
					return fmt.Errorf("snapshot: the store's seq %d is not the log's", k.Seq)
				}
			}
		}
	}
	return bw.Flush()
}

func (s *snapshot) Release() {}
