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

// entryAfterMagic starts the entry that puts into an empty log a chain
// whose earlier events were archived (CatchUpLog on a store cut by an
// archive): its first line is the stored line of the archive event, later
// in the chain, that records the events before the chain's first line
// (the vouch); the chain's lines follow, each ended by "\n".
const entryAfterMagic = "thinbot-chain-after/1\n"

// encodeEntry is the raft entry of one batch of stored lines, after the
// archive event vouch if it is not nil.
func encodeEntry(vouch []byte, lines [][]byte) []byte {
	magic := entryMagic
	if vouch != nil {
		magic = entryAfterMagic
		lines = append([][]byte{vouch}, lines...)
	}
	n := len(magic)
	for _, l := range lines {
		n += len(l) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, magic...)
	for _, l := range lines {
		b = append(append(b, l...), '\n')
	}
	return b
}

// decodeEntry splits an entry into its vouch (nil but in an entry that
// starts after an archive) and its lines.
func decodeEntry(b []byte) (vouch []byte, lines [][]byte, err error) {
	rest, ok := bytes.CutPrefix(b, []byte(entryMagic))
	after := false
	if !ok {
		if rest, after = bytes.CutPrefix(b, []byte(entryAfterMagic)); !after {
			return nil, nil, errors.New("not a thinbot chain entry")
		}
	}
	if len(rest) == 0 || rest[len(rest)-1] != '\n' {
		return nil, nil, errors.New("chain entry: no line, or the last one unended")
	}
	lines = bytes.Split(rest[:len(rest)-1], []byte("\n"))
	if after {
		if len(lines) < 2 {
			return nil, nil, errors.New("chain entry: an archive event and no line after it")
		}
		return lines[0], lines[1:], nil
	}
	return nil, lines, nil
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

// continues says whether an entry (its vouch and its lines' links)
// continues the head the log has built: it starts at the next seq, on the
// head's hash. Before anything is applied (head 0) an entry may instead
// start after seq 1 when it names the archive event that vouches for that
// start (vouch: its record ends at the seq before the first line, on the
// first line's prev, and it comes later in the chain); after is then that
// event's link, which the log must carry at its seq. A vouch is taken at
// head 0 only, an entry without one only on the head: the answer depends
// on the entry and the head alone, the same on every node.
func continues(head link, vouch []byte, ls []link) (after *link, ok bool) {
	if vouch == nil {
		return nil, ls[0].Seq == head.Seq+1 && ls[0].Prev == head.Hash
	}
	if head.Seq != 0 || ls[0].Seq < 2 {
		return nil, false
	}
	var ev store.Event
	if err := json.Unmarshal(vouch, &ev); err != nil {
		return nil, false
	}
	r, isRec := store.ArchiveRecordOf(ev)
	if !isRec || r.Last != ls[0].Seq-1 || r.Head != ls[0].Prev || ev.Seq <= r.Last {
		return nil, false
	}
	return &link{Seq: ev.Seq, Prev: ev.Prev, Hash: ev.Hash}, true
}

// fsm is the raft state machine: the store. It keeps the chain head the
// log has built so far (cursor): an entry that does not continue it
// (continues) was formed on an old head (by a leader that had not yet
// applied every committed entry, or had lost its leadership) and is
// refused with store.ErrStale on every node alike; one that does is
// applied to the store (store.ApplyLines), which compares what it already
// holds.
type fsm struct {
	db   *store.DB
	fail func(error) // this node's store cannot follow the log

	mu   sync.Mutex
	head link // Seq, Hash: the cursor
	// vouch is the archive event the log's first entry named (it started
	// after an archive) until the log reaches its seq: the log's line there
	// must be it.
	vouch *link
}

func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	vouch, lines, err := decodeEntry(l.Data)
	if err != nil {
		return err
	}
	ls, err := links(lines)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	after, ok := continues(f.head, vouch, ls)
	if !ok {
		return fmt.Errorf("raft entry %d: seq %d after head %d: %w", l.Index, ls[0].Seq, f.head.Seq, store.ErrStale)
	}
	if after != nil {
		f.vouch = after
	}
	if v := f.vouch; v != nil && v.Seq >= ls[0].Seq && v.Seq <= ls[len(ls)-1].Seq {
		if k := ls[v.Seq-ls[0].Seq]; k.Hash != v.Hash {
			err = fmt.Errorf("raft entry %d: the log's event %d is not the archive event its first entry named: %w", l.Index, v.Seq, &store.DivergedError{Seq: v.Seq})
			f.fail(err)
			return err
		}
	}
	switch {
	case after != nil && f.db.LastSeq() == 0:
		err = f.db.ApplyLinesAfter(vouch, lines)
	default:
		err = f.db.ApplyLines(lines)
	}
	if err == nil {
		err = f.applyArchives(lines)
	}
	if err != nil {
		err = fmt.Errorf("raft entry %d: %w", l.Index, err)
		f.fail(err)
		return err
	}
	f.head = ls[len(ls)-1]
	if f.vouch != nil && f.vouch.Seq <= f.head.Seq {
		f.vouch = nil
	}
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
	seq, line, err := vouchOf(f.db, base)
	switch {
	case err != nil:
		return nil, fmt.Errorf("snapshot: %w", err)
	case seq > f.head.Seq:
		return nil, fmt.Errorf("snapshot: the log has not reached the archive event (seq %d) the store's start needs yet", seq)
	}
	s.base, s.vouch = base, string(line)
	return s, nil
}

// vouchOf returns the seq and stored line of the archive event of db's
// chain that records the events before its first, which is after base.
func vouchOf(db *store.DB, base uint64) (uint64, []byte, error) {
	_, seq, ok, err := db.ArchivedBefore()
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, fmt.Errorf("no archive event of the store records the events before its first (seq %d)", base+1)
	}
	for chunk, err := range db.Lines(seq) {
		if err != nil {
			return 0, nil, err
		}
		return seq, chunk[0], nil
	}
	return 0, nil, fmt.Errorf("the store lost its archive event (seq %d)", seq)
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
	f.head, f.vouch = link{Seq: h.Seq, Hash: h.Hash}, nil
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
