package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"iter"
	"os"
)

// Follower reads a JSONL journal (audit.jsonl) as it grows: what `thinbot
// audit tail` prints. It reads the file rather than the store because a
// running daemon holds the store's lock. It follows a rebuilt (replaced)
// or truncated file without passing an event twice, and waits for a file
// that does not exist yet. A Follower is for one goroutine; Close releases
// its file.
type Follower struct {
	path    string
	f       *os.File
	off     int64
	pending []byte
	last    uint64 // highest seq passed (or skipped)
	// skip: the first read only records where the file ends.
	skip bool
	err  error
}

// Follow returns a Follower of the journal at path. With since 0 it passes
// only the events appended from its first Events on; with since > 0 it
// passes the events from seq since on, those already in the file first.
func Follow(path string, since uint64) *Follower {
	t := &Follower{path: path, skip: since == 0}
	if since > 0 {
		t.last = since - 1
	}
	return t
}

// Events yields each event appended since the last call, in order, with
// its line (valid until the next iteration). Lines that are not events,
// and events not after the last one passed, are left out. A read error
// ends the sequence; Err returns it.
func (t *Follower) Events() iter.Seq2[Event, []byte] {
	return func(yield func(Event, []byte) bool) {
		t.err = nil
		if t.f != nil {
			// A rebuild renames a new file into place; a truncation shrinks it.
			cur, err1 := os.Stat(t.path)
			open, err2 := t.f.Stat()
			if err1 == nil && err2 == nil && (!os.SameFile(cur, open) || cur.Size() < t.off) {
				t.Close()
			}
		}
		if t.f == nil {
			f, err := os.Open(t.path)
			if errors.Is(err, fs.ErrNotExist) {
				t.skip = false
				return
			}
			if err != nil {
				t.err = err
				return
			}
			t.f, t.off, t.pending = f, 0, nil
		}
		buf := make([]byte, 1<<16)
		for {
			n, err := t.f.ReadAt(buf, t.off)
			t.off += int64(n)
			t.pending = append(t.pending, buf[:n]...)
			for {
				i := bytes.IndexByte(t.pending, '\n')
				if i < 0 {
					break
				}
				line := t.pending[:i]
				t.pending = t.pending[i+1:]
				var ev Event
				if json.Unmarshal(line, &ev) == nil && ev.Seq > t.last {
					t.last = ev.Seq
					if !t.skip && !yield(ev, line) {
						return
					}
				}
			}
			if err == io.EOF || n == 0 {
				break
			}
			if err != nil {
				t.err = err
				return
			}
		}
		t.skip = false
	}
}

// Err is the read error that ended the last Events, nil if none.
func (t *Follower) Err() error { return t.err }

// Close closes the file. A later Events opens it again.
func (t *Follower) Close() error {
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}
