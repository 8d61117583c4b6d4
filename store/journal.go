package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The journal: with an export (Options.AuditPath), audit.jsonl is the
// write-ahead log. A commit writes the batch's lines to it and fdatasyncs it
// (the commit point: one sync), then indexes the events in bbolt without a
// sync of its own. Written bytes survive a crash of the process, so bbolt is
// then at most one batch behind the journal, and Open replays that batch. A
// crash of the machine can leave bbolt's unsynced pages in any state, so
// after one Open rebuilds the bbolt file from the journal (see
// rebuildStore). The state file says which case applies.

// State file contents: the store is closed cleanly (bbolt synced), or open
// under the boot id that follows.
const (
	stateClosed = "closed\n"
	stateOpen   = "open "
)

// statePath is the state file of the store at path.
func statePath(path string) string { return path + ".state" }

// lockState opens (creating) the state file, takes its exclusive lock
// within timeout and returns it with its contents.
func lockState(path string, timeout time.Duration) (*os.File, string, error) {
	_, statErr := os.Lstat(statePath(path))
	f, err := os.OpenFile(statePath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("store: open %s: %w", statePath(path), err)
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// A new state file: its name must survive a machine restart too.
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, "", fmt.Errorf("store: create %s: %w", statePath(path), err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, "", fmt.Errorf("store: %s is in use by another thinbot process? (%w after %v)", path, ErrLocked, timeout)
			}
			return nil, "", fmt.Errorf("store: lock %s: %w", statePath(path), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("store: read %s: %w", statePath(path), err)
	}
	return f, string(b), nil
}

// stateHeld reports whether a process holds the store's state file lock
// (lockState): a daemon, or another writable open. It takes no lock it
// keeps: a shared one, tried and released.
func stateHeld(path string) bool {
	f, err := os.Open(statePath(path))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// syncDir syncs a directory, so that the names created in it are on disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeState replaces the state file's contents and syncs it. It writes
// over the old contents before cutting them, so the file keeps its block
// and this works on a full disk.
func writeState(f *os.File, s string) error {
	if _, err := f.WriteAt([]byte(s), 0); err != nil {
		return fmt.Errorf("store: state: %w", err)
	}
	if err := f.Truncate(int64(len(s))); err != nil {
		return fmt.Errorf("store: state: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("store: state: sync: %w", err)
	}
	return nil
}

// machineRestarted reports whether state was left by a process that had the
// store open under another boot (or an unknown one): the machine went down
// with the store open, and bbolt's unsynced pages may be lost or torn.
func machineRestarted(state, boot string) bool {
	id, open := strings.CutPrefix(state, stateOpen)
	return open && (boot == "" || strings.TrimSpace(id) != boot)
}

// fdatasync flushes f's data (and its size) to the disk.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if !errors.Is(serr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// appendJournal writes one batch's lines (seqs first, first+1, ...) at the
// journal's end and, with sync, syncs them (and any written before): the
// commit point. On failure the batch is not committed and the bytes written
// are cut before the next batch. Callers hold auditMu.
func (db *DB) appendJournal(first uint64, lines [][]byte, sync bool) error {
	if err := db.journalInPlace(); err != nil {
		return err
	}
	if db.auditBroken || db.auditSeq+1 != first {
		if err := db.catchUpAudit(); err != nil {
			return err
		}
	}
	size := len(lines)
	for _, l := range lines {
		size += len(l)
	}
	buf := make([]byte, 0, size)
	for _, l := range lines {
		buf = append(append(buf, l...), '\n')
	}
	if _, err := db.auditFile.WriteAt(buf, db.auditOff); err != nil {
		db.cutJournal()
		return fmt.Errorf("audit journal %s: write: %w", db.auditPath, err)
	}
	if sync {
		if err := db.fs.fdatasync(db.auditFile, db.auditPath); err != nil {
			db.cutJournal()
			return db.syncFailed(err)
		}
	}
	db.auditOff += int64(len(buf))
	db.auditSeq += uint64(len(lines))
	if sync {
		db.setSynced(db.auditSeq, db.auditOff)
		db.syncs.Add(1)
	}
	return nil
}

// ErrJournalMoved is returned (wrapped) by every commit while the audit
// journal the store writes is not the file at its path: moved, replaced
// or deleted (logrotate's rename-and-create), or cut below what the store
// wrote (copytruncate). The journal is the chain's commit point, not a log
// to rotate: nothing is committed, so nothing runs, until the file is put
// back (a cut file needs a restart once it is restored).
var ErrJournalMoved = errors.New("audit journal moved or replaced while the store was open")

// journalInPlace checks that the file the store writes is still the
// journal at its path, at its full length: one stat per commit. A
// journal cut below what was written fails for good (the lines are gone
// from the file the store writes); a moved one fails until it is back.
// Callers hold auditMu.
func (db *DB) journalInPlace() error {
	if db.auditFile == nil || db.auditIdent == nil {
		return nil
	}
	if db.failed != nil {
		return db.failed
	}
	pi, err := os.Stat(db.auditPath)
	if err != nil || !os.SameFile(db.auditIdent, pi) {
		return fmt.Errorf("store: audit journal %s was moved, replaced or deleted while thinbot runs (log rotation?): %w; it is the audit chain, not a log to rotate (`thinbot audit archive` trims it). Nothing is committed until the file thinbot wrote is back at %s", db.auditPath, ErrJournalMoved, db.auditPath)
	}
	if pi.Size() < db.auditOff {
		db.failed = fmt.Errorf("store: audit journal %s was cut from %d to %d bytes while thinbot ran (copytruncate?): %w; it is the audit chain, not a log to rotate (`thinbot audit archive` trims it). Nothing more is committed: restore its lines from the copy, then restart thinbot", db.auditPath, db.auditOff, pi.Size(), ErrJournalMoved)
		return db.failed
	}
	return nil
}

// Check reports what stops the store from committing now: a failed sync,
// or a journal moved, replaced or cut under it (ErrJournalMoved). nil on a
// store that can commit; ErrReadOnly on a read-only one.
func (db *DB) Check() error {
	if db.readOnly {
		return ErrReadOnly
	}
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	if db.failed != nil {
		return db.failed
	}
	return db.journalInPlace()
}

// setSynced records that the journal is on disk up to (seq, off). Callers
// hold auditMu or own the DB exclusively (Open).
func (db *DB) setSynced(seq uint64, off int64) {
	db.syncedSeq, db.syncedOff = seq, off
	db.durableSeq.Store(seq)
}

// Sync makes every event already in the chain durable: it syncs the
// journal if AppendBuffered left events unsynced. Call it before an effect
// outside the process that must not run ahead of the record (showing what
// a buffered event led to). It returns ErrReadOnly on a read-only DB and
// ErrClosed after Close.
func (db *DB) Sync() error {
	if db.readOnly {
		return ErrReadOnly
	}
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	return db.syncLocked()
}

// syncLocked is Sync for callers that hold auditMu.
func (db *DB) syncLocked() error {
	if db.failed != nil {
		return db.failed
	}
	if db.auditFile == nil {
		if db.auditPath != "" {
			return ErrClosed
		}
		return nil // bbolt synced every commit
	}
	if db.syncedOff >= db.auditOff {
		return nil
	}
	if err := db.fs.fdatasync(db.auditFile, db.auditPath); err != nil {
		return db.syncFailed(err)
	}
	db.setSynced(db.auditSeq, db.auditOff)
	db.syncs.Add(1)
	return nil
}

// syncFailed makes a failed journal sync final for this DB: after one, the
// kernel may have dropped the written pages and cleared the error, so a
// later sync that succeeds proves nothing. Every later Append fails; the
// store is left "open", and the next Open checks the journal against it.
// Callers hold auditMu.
func (db *DB) syncFailed(err error) error {
	if db.failed == nil {
		db.failed = fmt.Errorf("store: audit journal %s: sync failed, nothing more is committed until thinbot restarts: %w", db.auditPath, err)
	}
	return db.failed
}

// cutJournal removes what a failed batch wrote past the journal's end, so
// that no later Open replays events whose Append failed. If that fails
// too, the next batch tries again first (catchUpAudit).
func (db *DB) cutJournal() {
	db.auditBroken = true
	if err := db.auditFile.Truncate(db.auditOff); err == nil {
		db.auditBroken = false
	}
}

// uncommitJournal cuts the journal back to (off, seq), before a batch that
// bbolt could not take, and syncs the cut.
func (db *DB) uncommitJournal(off int64, seq uint64) error {
	if err := db.auditFile.Truncate(off); err != nil {
		return err
	}
	if err := fdatasync(db.auditFile); err != nil {
		return err
	}
	db.auditOff, db.auditSeq = off, seq
	db.setSynced(seq, off)
	return nil
}

// rebuildStore replaces the bbolt file at path with one built from the
// journal, after the machine went down with the store open. The journal's
// lines are checked as a chain; a damaged tail (what a power loss can leave
// of the last, unacknowledged write: a cut line, zeros) is cut, but a bad
// line with a good event of the chain after it is tampering and fails with
// ErrAuditMismatch, as does a journal shorter than what the old bbolt file
// records as committed. The old file is kept as PATH.unsynced-TIME.
func rebuildStore(path, journal, boot string, o Options) error {
	jf, err := os.OpenFile(journal, os.O_RDWR, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// The journal was the only synced copy of what was committed.
		if old := readOldStore(path, o); old.head > 0 && !o.RebuildAudit {
			return fmt.Errorf("store: %s: %w: it is missing, and the machine restarted while the store (written without syncs, %d events) was open, so committed events may be lost; 'thinbot audit rebuild' accepts the store as it is",
				journal, ErrAuditMismatch, old.head)
		}
		o.Logger.Warn("store was not closed before the machine restarted, and its audit journal is missing: keeping the store as it is",
			"path", path, "journal", journal)
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	defer jf.Close()
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("store: %s: %w: %s; see 'thinbot audit verify'", journal, ErrAuditMismatch, fmt.Sprintf(format, args...))
	}
	tmpPath := path + ".rebuild"
	os.Remove(tmpPath)
	bdb, err := bolt.Open(tmpPath, 0o600, &bolt.Options{Timeout: o.Timeout, FreelistType: bolt.FreelistMapType, NoSync: true})
	if err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	fail := func(err error) error {
		bdb.Close()
		os.Remove(tmpPath)
		return err
	}
	if err := bdb.Update(createBuckets); err != nil {
		return fail(fmt.Errorf("store: rebuild: %w", err))
	}
	// What the old file recorded as synced: the journal must still have
	// that event, byte for byte (a power loss cannot change synced lines).
	oldStore := readOldStore(path, o)
	old, oldLine, oldOK := oldStore.synced, oldStore.line, oldStore.ok
	oldDiffers := false
	c := newChain()
	var (
		off     int64 // end of the last good line
		badSeq  uint64
		problem string
		evs     []*Event
		lines   [][]byte
	)
	flush := func() error {
		if len(evs) == 0 {
			return nil
		}
		mark := journalMarkValue(c.rep.LastSeq, off, c.rep.LastSeq, off, boot)
		err := bdb.Update(func(tx *bolt.Tx) error { return putEvents(tx, evs, lines, mark) })
		evs, lines = evs[:0], lines[:0]
		return err
	}
	var flushErr error
	err = eachLine(context.Background(), jf, func(line []byte, complete bool) bool {
		if problem != "" {
			// After a bad line: is there a good event of the chain later on?
			if ev, err := parseLine(line); complete && err == nil && ev.Seq >= badSeq {
				problem = fmt.Sprintf("%s, yet seq %d follows it", problem, ev.Seq)
				badSeq = 0
				return false
			}
			return true
		}
		if !complete {
			problem, badSeq = fmt.Sprintf("the last line (%d bytes) is cut", len(line)), c.rep.LastSeq+1
			return true
		}
		ev, ok := c.check(line)
		if !ok {
			problem, badSeq = c.rep.Problem, c.rep.LastSeq+1
			return true
		}
		if oldLine != nil && ev.Seq == old && !bytes.Equal(line, oldLine) {
			oldDiffers = true
		}
		evs, lines = append(evs, &ev), append(lines, bytes.Clone(line))
		off += int64(len(line)) + 1
		if len(evs) >= 10_000 {
			if flushErr = flush(); flushErr != nil {
				return false
			}
		}
		return true
	})
	if err == nil {
		err = flushErr
	}
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fail(fmt.Errorf("store: rebuild: %w", err))
	}
	if problem != "" && badSeq == 0 {
		return fail(mismatch("%s", problem))
	}
	if p := c.unvouched(); p != "" {
		return fail(mismatch("%s", p))
	}
	if oldOK && old > c.rep.LastSeq {
		return fail(mismatch("the store recorded seq %d as committed, the journal ends at seq %d", old, c.rep.LastSeq))
	}
	if oldDiffers {
		return fail(mismatch("the journal's event %d differs from the one the store recorded as committed", old))
	}
	if err := o.durable.syncBolt(bdb, tmpPath); err != nil {
		return fail(fmt.Errorf("store: rebuild: sync: %w", err))
	}
	if err := bdb.Close(); err != nil {
		os.Remove(tmpPath)
		return fmt.Errorf("store: rebuild: %w", err)
	}
	if st, err := jf.Stat(); err == nil && st.Size() > off {
		o.Logger.Warn("audit journal: cutting the damaged tail a machine restart left", "path", journal,
			"seq", c.rep.LastSeq, "bytes", st.Size()-off, "problem", problem)
		if err := jf.Truncate(off); err != nil {
			return fmt.Errorf("store: rebuild: %w", err)
		}
		if err := o.durable.fsync(jf, journal); err != nil {
			return fmt.Errorf("store: rebuild: %w", err)
		}
	}
	kept := ""
	if _, err := os.Stat(path); err == nil {
		kept = path + ".unsynced-" + time.Now().UTC().Format("20060102T150405.000000000Z")
		if err := o.durable.rename(path, kept); err != nil {
			return fmt.Errorf("store: rebuild: %w", err)
		}
	}
	if err := o.durable.rename(tmpPath, path); err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	if err := o.durable.syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	o.Logger.Warn("the machine restarted while the store was open: rebuilt it from the audit journal",
		"path", path, "events", c.rep.LastSeq, "old_file", kept)
	return nil
}

// oldStore is what a bbolt file left by a machine restart records, as far
// as it can be read (its unsynced pages may be stale or torn).
type oldStore struct {
	ok     bool   // the journal mark could be read
	synced uint64 // the last seq the journal mark records as synced
	// line is the stored line of synced where the file still has it as a
	// well-formed event of that seq, else nil.
	line []byte
	head uint64 // the chain head's seq (0 if none or unreadable)
}

// readOldStore reads the old bbolt file at path, which may be damaged.
func readOldStore(path string, o Options) (old oldStore) {
	if _, err := os.Stat(path); err != nil {
		return oldStore{}
	}
	bdb, err := openBolt(path, Options{Timeout: o.Timeout, ReadOnly: true})
	if err != nil {
		return oldStore{}
	}
	defer bdb.Close()
	defer func() {
		if recover() != nil {
			old = oldStore{}
		}
	}()
	_ = bdb.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return nil
		}
		if v := meta.Get(keyLast); len(v) == 8+32 {
			old.head = binary.BigEndian.Uint64(v)
		}
		// What was synced: written bytes after it may be lost.
		if v := meta.Get(keyAudit); len(v) >= 32 {
			old.synced, old.ok = binary.BigEndian.Uint64(v[16:]), true
		}
		if events := tx.Bucket(bucketEvents); old.ok && old.synced > 0 && events != nil {
			if v := events.Get(seqKey(old.synced)); v != nil {
				if ev, err := parseLine(v); err == nil && ev.Seq == old.synced {
					old.line = bytes.Clone(v)
				}
			}
		}
		return nil
	})
	return old
}
