package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bootID returns the running kernel's boot id, or "" where it is unknown.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// journalMark is the meta "audit" value a commit records, the journal
// mark: how far the journal is written and how far it is synced, each as
// (seq, offset), then the boot id. Callers hold auditMu.
func (db *DB) journalMark() []byte {
	return journalMarkValue(db.auditSeq, db.auditOff, db.syncedSeq, db.syncedOff, db.bootID)
}

func journalMarkValue(seq uint64, off int64, syncedSeq uint64, syncedOff int64, boot string) []byte {
	mark := make([]byte, 32, 32+len(boot))
	binary.BigEndian.PutUint64(mark, seq)
	binary.BigEndian.PutUint64(mark[8:], uint64(off))
	binary.BigEndian.PutUint64(mark[16:], syncedSeq)
	binary.BigEndian.PutUint64(mark[24:], uint64(syncedOff))
	return append(mark, boot...)
}

// openAudit opens the journal (the export) and reconciles it with the store.
//
// Every commit records in the meta bucket a journal mark (journalMark):
// the journal was written and synced up to that event and byte offset
// when the commit indexed it. Written bytes survive a crash of the process (they are
// in the page cache), so after one only the bytes past the journal mark can
// differ: openAudit checks the marked line, keeps the lines after it
// that equal the store's, replays into the store the lines past its end
// that continue the chain (a batch the journal took and bbolt did not),
// cuts a cut last line, and appends from the store what the file lacks (an
// export written by an older thinbot, which synced it in the background). A
// file shorter than its journal mark, one whose marked line differs from
// the store, or a complete line past the store's end that does not continue
// the chain, was tampered with: ErrAuditMismatch. (A machine restart is
// handled before, by rebuildStore.)
func (db *DB) openAudit() error {
	var markSeq, syncSeq uint64
	var markOff, syncOff int64
	var boot string
	if err := db.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keyAudit)
		if len(v) >= 16 {
			markSeq, markOff = binary.BigEndian.Uint64(v), int64(binary.BigEndian.Uint64(v[8:]))
			syncSeq, syncOff = markSeq, markOff
		}
		if len(v) >= 32 {
			syncSeq, syncOff = binary.BigEndian.Uint64(v[16:]), int64(binary.BigEndian.Uint64(v[24:]))
			boot = string(v[32:])
		}
		return nil
	}); err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	if _, err := os.Stat(db.auditPath); errors.Is(err, fs.ErrNotExist) {
		if db.lastSeq.Load() > 0 {
			db.log.Warn("audit journal missing; rebuilding it from the store", "path", db.auditPath, "events", db.lastSeq.Load())
		}
		return db.rebuildAudit(context.Background())
	}
	f, err := os.OpenFile(db.auditPath, os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("store: audit: %w", err)
	}
	// Only a journal mark of an older thinbot can be synced behind where it
	// was written.
	if st, err := f.Stat(); err == nil && st.Size() < markOff && boot != db.bootID && st.Size() >= syncOff {
		db.log.Warn("audit export: the machine restarted and lost its unsynced tail; rebuilding the tail from the store",
			"path", db.auditPath, "synced_seq", syncSeq, "written_seq", markSeq)
		markSeq, markOff = syncSeq, syncOff
	}
	off, seq, err := db.reconcile(f, markSeq, markOff)
	if err == nil {
		db.auditFile, db.auditOff, db.auditSeq = f, off, seq
		db.auditIdent, err = f.Stat()
	}
	if err == nil {
		err = db.catchUpAudit()
	}
	if err == nil {
		// One sync at open: from here on the file is the journal.
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("store: audit: sync: %w", err)
		}
		db.setSynced(db.auditSeq, db.auditOff)
	}
	if err != nil {
		f.Close()
		db.auditFile = nil
		return err
	}
	return nil
}

// reconcile returns the offset and seq of the end of the export's good
// prefix, having replayed into the store the journal's lines past its end
// and cut everything after them.
func (db *DB) reconcile(f *os.File, markSeq uint64, markOff int64) (int64, uint64, error) {
	mismatch := func(format string, args ...any) error {
		return fmt.Errorf("store: %s: %w: %s; see 'thinbot audit verify', and 'thinbot audit rebuild' rewrites it keeping the old file",
			db.auditPath, ErrAuditMismatch, fmt.Sprintf(format, args...))
	}
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("store: audit: %w", err)
	}
	if st.Size() < markOff {
		return 0, 0, mismatch("it is %d bytes, shorter than its journal mark at seq %d (%d bytes)", st.Size(), markSeq, markOff)
	}
	if markSeq > db.lastSeq.Load() {
		return 0, 0, mismatch("the journal mark's seq %d is beyond the store's last event %d", markSeq, db.lastSeq.Load())
	}
	if markSeq > 0 {
		want, err := db.line(markSeq)
		if err != nil {
			return 0, 0, err
		}
		want = append(want, '\n')
		got := make([]byte, len(want))
		if int64(len(want)) > markOff {
			return 0, 0, mismatch("marked line %d does not match the store", markSeq)
		}
		if _, err := f.ReadAt(got, markOff-int64(len(want))); err != nil {
			return 0, 0, fmt.Errorf("store: audit: %w", err)
		}
		if !bytes.Equal(got, want) {
			return 0, 0, mismatch("marked line %d does not match the store", markSeq)
		}
	}
	off, seq := markOff, markSeq
	br := bufio.NewReader(io.NewSectionReader(f, markOff, st.Size()-markOff))
	for seq < db.lastSeq.Load() {
		got, err := br.ReadBytes('\n')
		if err != nil {
			break // partial or no line: cut below
		}
		want, err := db.line(seq + 1)
		if err != nil {
			return 0, 0, err
		}
		if !bytes.Equal(got[:len(got)-1], want) {
			break
		}
		off += int64(len(got))
		seq++
	}
	if seq == db.lastSeq.Load() {
		n, err := db.replay(f, br, &off)
		if errors.Is(err, errNotChain) {
			return 0, 0, mismatch("%v", err)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("store: audit: %w", err)
		}
		if n > 0 {
			// The replay's last event: not seq+n where an empty store took
			// a journal that starts after archived events.
			seq = db.lastSeq.Load()
		}
	}
	if st.Size() > off {
		db.log.Warn("audit export: cutting bytes past the last line that matches the store", "path", db.auditPath, "seq", seq, "bytes", st.Size()-off)
		if err := f.Truncate(off); err != nil {
			return 0, 0, fmt.Errorf("store: audit: %w", err)
		}
	}
	return off, seq, nil
}

// errNotChain marks a journal line that does not continue the chain.
var errNotChain = errors.New("not the next event of the chain")

// replay indexes the journal's complete lines from br, which continue the
// store's chain, advancing *off past them. A complete line that does not
// continue the chain is an error; a cut last line is left to be cut.
func (db *DB) replay(f *os.File, br *bufio.Reader, off *int64) (uint64, error) {
	c := newChain()
	c.rep.Events, c.rep.LastSeq, c.rep.LastHash = db.lastSeq.Load(), db.lastSeq.Load(), db.lastHash
	var evs []*Event
	var lines [][]byte
	var n uint64
	first, end := c.rep.LastSeq+1, *off
	synced := false
	// index commits what was read, in chunks (a journal restored into an
	// empty state dir is replayed whole).
	index := func() error {
		if len(evs) == 0 {
			return nil
		}
		if !synced {
			// The dead process may not have synced them (AppendBuffered):
			// sync before a journal mark says so.
			if err := fdatasync(f); err != nil {
				return fmt.Errorf("replay: sync: %w", err)
			}
			synced = true
		}
		last := evs[len(evs)-1]
		if err := db.bolt.Update(func(tx *bolt.Tx) error {
			if err := putEvents(tx, evs, lines, journalMarkValue(last.Seq, end, last.Seq, end, db.bootID)); err != nil {
				return err
			}
			return applyIndex(tx, db.indexer, evs)
		}); err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		db.lastSeq.Store(last.Seq)
		db.lastHash = last.Hash
		*off = end
		n += uint64(len(evs))
		evs, lines = evs[:0], lines[:0]
		return nil
	}
	for {
		got, err := br.ReadBytes('\n')
		if err != nil {
			break
		}
		ev, ok := c.check(got[:len(got)-1])
		if !ok {
			if err := index(); err != nil {
				return n, err
			}
			return n, fmt.Errorf("the line after seq %d is %w: %s", c.rep.LastSeq, errNotChain, c.rep.Problem)
		}
		evs, lines = append(evs, &ev), append(lines, got[:len(got)-1])
		end += int64(len(got))
		if len(evs) >= 10_000 {
			if err := index(); err != nil {
				return n, err
			}
		}
	}
	if err := index(); err != nil {
		return n, err
	}
	if n > 0 {
		db.log.Warn("store: indexed events the audit journal had and the store had not (the last process died between the two, or the journal was restored alone)",
			"path", db.path, "from_seq", first, "to_seq", c.rep.LastSeq)
	}
	return n, nil
}

// line returns the stored line of seq.
func (db *DB) line(seq uint64) ([]byte, error) {
	var out []byte
	err := db.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketEvents).Get(seqKey(seq))
		if v == nil {
			return fmt.Errorf("event %d missing", seq)
		}
		out = bytes.Clone(v)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read: %w", err)
	}
	return out, nil
}

// catchUpAudit appends the store's events after auditSeq to the export.
// Callers hold auditMu or own the DB exclusively (Open).
func (db *DB) catchUpAudit() error {
	if db.auditBroken {
		if err := db.auditFile.Truncate(db.auditOff); err != nil {
			return fmt.Errorf("store: audit: %w", err)
		}
		db.auditBroken = false
	}
	var buf []byte
	last := db.lastSeq.Load()
	for lines, err := range db.allLines(db.auditSeq + 1) {
		if err != nil {
			return err
		}
		buf = buf[:0]
		n := 0
		for _, l := range lines {
			if db.auditSeq+uint64(n) >= last {
				break
			}
			buf = append(append(buf, l...), '\n')
			n++
		}
		if err := db.writeAt(buf, uint64(n)); err != nil {
			return err
		}
		if db.auditSeq >= last {
			break
		}
	}
	return nil
}

// writeAt appends buf (n whole lines) at auditOff, without a sync (the
// caller syncs).
func (db *DB) writeAt(buf []byte, n uint64) error {
	if len(buf) == 0 {
		return nil
	}
	if _, err := db.auditFile.WriteAt(buf, db.auditOff); err != nil {
		db.auditBroken = true
		return fmt.Errorf("store: audit: write: %w", err)
	}
	db.auditOff += int64(len(buf))
	db.auditSeq += n
	return nil
}

// RebuildAudit rewrites the JSONL export from the store. If an old export
// exists and differs from the rebuilt one, it is kept as
// PATH.replaced-YYYYMMDDTHHMMSSZ and its name is logged. Appends wait while
// it runs. It returns ErrReadOnly on a read-only DB.
func (db *DB) RebuildAudit(ctx context.Context) error {
	if db.readOnly {
		return ErrReadOnly
	}
	if db.auditPath == "" {
		return errors.New("store: rebuild audit: the export is disabled")
	}
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	return db.rebuildAudit(ctx)
}

func (db *DB) rebuildAudit(ctx context.Context) error {
	tmpPath := db.auditPath + ".rebuild"
	tmp, err := os.OpenFile(tmpPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("store: rebuild audit: %w", err)
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmpPath)
		return fmt.Errorf("store: rebuild audit: %w", err)
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	if err := db.Export(ctx, bw, "", 1); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if err := db.fs.fsync(tmp, tmpPath); err != nil {
		return fail(err)
	}
	off, err := tmp.Seek(0, io.SeekEnd)
	if err != nil {
		return fail(err)
	}
	same, err := sameContent(db.auditPath, tmp)
	if err != nil {
		return fail(err)
	}
	if !same {
		if _, err := os.Stat(db.auditPath); err == nil {
			kept := db.auditPath + ".replaced-" + time.Now().UTC().Format("20060102T150405.000000000Z")
			if err := db.fs.rename(db.auditPath, kept); err != nil {
				return fail(err)
			}
			db.log.Warn("audit export rebuilt; the old file differed and was kept", "path", db.auditPath, "kept", kept)
		}
	}
	if err := db.fs.rename(tmpPath, db.auditPath); err != nil {
		return fail(err)
	}
	if err := db.fs.syncDir(filepath.Dir(db.auditPath)); err != nil {
		return fmt.Errorf("store: rebuild: %w", err)
	}
	if db.auditFile != nil {
		db.auditFile.Close()
	}
	// The export and the store hold the same events; the journal mark's
	// offsets stay valid because a line is the stored bytes.
	db.auditFile, db.auditOff, db.auditSeq, db.auditBroken = tmp, off, db.lastSeq.Load(), false
	db.setSynced(db.auditSeq, db.auditOff)
	if st, err := tmp.Stat(); err == nil {
		db.auditIdent = st
	}
	return nil
}

// sameContent reports whether the file at path exists and has tmp's bytes.
func sameContent(path string, tmp *os.File) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	a, b := bufio.NewReaderSize(f, 1<<16), bufio.NewReaderSize(io.NewSectionReader(tmp, 0, 1<<62), 1<<16)
	bufA, bufB := make([]byte, 1<<16), make([]byte, 1<<16)
	for {
		na, errA := io.ReadFull(a, bufA)
		nb, errB := io.ReadFull(b, bufB)
		if na != nb || !bytes.Equal(bufA[:na], bufB[:nb]) {
			return false, nil
		}
		if errA != nil || errB != nil {
			if (errA == io.EOF || errA == io.ErrUnexpectedEOF) && (errB == io.EOF || errB == io.ErrUnexpectedEOF) {
				return true, nil
			}
			if errA != nil && errA != io.EOF && errA != io.ErrUnexpectedEOF {
				return false, errA
			}
			if errB != nil && errB != io.EOF && errB != io.ErrUnexpectedEOF {
				return false, errB
			}
			return false, nil
		}
	}
}
