package replica

import (
	"bufio"
	"bytes"
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
	if err := f.db.ApplyLines(lines); err != nil {
		err = fmt.Errorf("raft entry %d: %w", l.Index, err)
		f.fail(err)
		return err
	}
	f.head = ls[len(ls)-1]
	return nil
}

// snapshotHeader is a snapshot's first line; the chain's lines up to Seq
// follow.
type snapshotHeader struct {
	Format string `json:"format"`
	Seq    uint64 `json:"seq"`
	Hash   string `json:"hash"`
}

const snapshotFormat = "thinbot-chain-snapshot/1"

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &snapshot{db: f.db, head: f.head}, nil
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
	var batch [][]byte
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := f.db.ApplyLines(batch)
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
	h, _ := json.Marshal(snapshotHeader{Format: snapshotFormat, Seq: s.head.Seq, Hash: s.head.Hash})
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
