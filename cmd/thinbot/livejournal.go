package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// liveJournal is the journal (audit.jsonl) of a store a running thinbot
// holds, read in the store's place by the read-only audit commands (export,
// sessions list, timeline): bbolt's lock keeps every other process out of
// the store, but the journal is a plain file the daemon only appends to and
// syncs, and it holds every event of the live chain, line for line as the
// store would export them.
//
// A read takes a snapshot: the complete lines present when it opened the
// file (a line the daemon is writing at that moment is left out, not read
// half), verified as a chain with its checkpoints (agentcore.Verify)
// before anything is shown. The file at the journal's path must be the one
// the daemon writes (daemonWrites): a journal rotated away and replaced
// would verify on its own as a shorter chain.
type liveJournal struct {
	path string
	f    *os.File
	end  int64 // the snapshot: the complete lines in [0, end)
	rep  store.Report
}

// openLiveJournal opens and verifies the journal beside the store at
// dbPath, which a running thinbot holds. A journal that is not the daemon's
// or does not verify is a brokenError (exit 2), naming the first bad seq.
func openLiveJournal(ctx context.Context, dbPath string) (*liveJournal, error) {
	path := filepath.Join(filepath.Dir(dbPath), "audit.jsonl")
	if err := daemonWrites(dbPath, path); err != nil {
		return nil, brokenError{fmt.Sprintf("%s is NOT the running thinbot's journal: %v", path, err)}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("the running thinbot's journal: %w", err)
	}
	end, err := completeLines(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	v, err := agentcore.Verify(ctx, nil, agentcore.VerifyOptions{JSONL: io.NewSectionReader(f, 0, end)})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	rep := *v.JSONL
	if !rep.OK {
		f.Close()
		return nil, brokenError{fmt.Sprintf("journal %s: BROKEN at seq %d: %s (%d good events before it); nothing read from it", path, rep.BadSeq, rep.Problem, rep.Events)}
	}
	return &liveJournal{path: path, f: f, end: end, rep: rep}, nil
}

// completeLines returns the offset just past the last newline of f: where
// its complete lines end when it is opened.
func completeLines(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 64<<10)
	for end := st.Size(); end > 0; {
		n := min(end, int64(len(buf)))
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, err
		}
		for i := n - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				return end - n + i + 1, nil
			}
		}
		end -= n
	}
	return 0, nil
}

// Close closes the file.
func (j *liveJournal) Close() error { return j.f.Close() }

// note is the line that says where the events come from.
func (j *liveJournal) note(dbPath string) string {
	return fmt.Sprintf("store %s is held by the running thinbot: reading its journal %s instead (verified: %d events, head seq %d hash %s)",
		dbPath, j.path, j.rep.Events, j.rep.LastSeq, j.rep.LastHash)
}

// each calls fn with every event of the verified snapshot and its line,
// in order, and stops at fn's first error. The lines are read a second
// time, after the verification: each checks that they still link up to
// the verified head, so a file changed in between is an error, never a
// different chain shown as the verified one.
func (j *liveJournal) each(ctx context.Context, fn func(ev store.Event, line []byte) error) error {
	sc := bufio.NewScanner(io.NewSectionReader(j.f, 0, j.end))
	sc.Buffer(make([]byte, 1<<16), 256<<20)
	var prev store.Event
	for n := 0; sc.Scan(); n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		var ev store.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("journal %s: %w", j.path, errChangedUnder)
		}
		if prev.Seq != 0 && (ev.Seq != prev.Seq+1 || ev.Prev != prev.Hash) || ev.Seq > j.rep.LastSeq {
			return fmt.Errorf("journal %s: seq %d: %w", j.path, ev.Seq, errChangedUnder)
		}
		if err := fn(ev, sc.Bytes()); err != nil {
			return err
		}
		prev = ev
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	if prev.Seq != j.rep.LastSeq || prev.Hash != j.rep.LastHash {
		return fmt.Errorf("journal %s: ends at seq %d, not at the verified head %d: %w", j.path, prev.Seq, j.rep.LastSeq, errChangedUnder)
	}
	return nil
}

// errChangedUnder is a journal whose lines differ from those just verified.
var errChangedUnder = errors.New("the file changed while it was read (rotated or rewritten?): read it again")

// sessions lists the snapshot's sessions as store.DB.Sessions does,
// least recently active first.
func (j *liveJournal) sessions(ctx context.Context) ([]store.SessionInfo, error) {
	byID := map[string]*store.SessionInfo{}
	var order []*store.SessionInfo
	err := j.each(ctx, func(ev store.Event, _ []byte) error {
		s := byID[ev.Session]
		if s == nil {
			s = &store.SessionInfo{ID: ev.Session, First: ev.Time.UTC(), FirstSeq: ev.Seq}
			byID[ev.Session] = s
			order = append(order, s)
		}
		s.Events++
		s.Last, s.LastSeq = ev.Time.UTC(), ev.Seq
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.SessionInfo, 0, len(order))
	for _, s := range order {
		out = append(out, *s)
	}
	// By the last event, as the store orders them.
	slices.SortFunc(out, func(a, b store.SessionInfo) int { return cmp.Compare(a.LastSeq, b.LastSeq) })
	return out, nil
}

// archivedBefore is store.DB.ArchivedBefore for the snapshot: the archive
// event that records the events before the journal's first.
func (j *liveJournal) archivedBefore(ctx context.Context) (rec store.ArchiveRecord, seq uint64, ok bool, err error) {
	if j.rep.ArchivedSeq == 0 {
		return rec, 0, false, nil
	}
	err = j.each(ctx, func(ev store.Event, _ []byte) error {
		if r, isRec := store.ArchiveRecordOf(ev); isRec && r.Last == j.rep.ArchivedSeq && r.Head == j.rep.ArchivedHash {
			rec, seq, ok = r, ev.Seq, true
		}
		return nil
	})
	return rec, seq, ok, err
}
