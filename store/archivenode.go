package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Archives of a replicated store (store/replica): the leader records an
// archive (ArchiveReplicated: the cut, its file, and the archive event,
// appended through the replicated log), and every node, as it applies the
// archive event, writes the same file from its own store and checks that
// it is the one recorded (ApplyArchive). The cut itself (a new journal and
// bbolt file without the archived events) waits for the node's next
// writable Open: it replaces the store's files, which a running daemon and
// its readers hold. Until then the archive is pending: a file beside the
// store (PATH.archive-pending, one archive record a line) lists the
// archives whose cut is due; the store still holds their events, a
// complete chain that the verifiers accept as before.

// ErrArchiveDiffers is returned (wrapped) by ApplyArchive when the archive
// file this store makes of the events an archive event records is not the
// file it records: the store's events are not the cluster's.
var ErrArchiveDiffers = errors.New("store: this store's archive is not the one its archive event records")

// archivePending is the file of the archives applied whose cut is due.
func archivePending(path string) string { return path + ".archive-pending" }

// readPending returns the records of the pending archives of the store at
// path, oldest first (none without the file).
func readPending(path string) ([]ArchiveRecord, error) {
	b, err := os.ReadFile(archivePending(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: pending archives: %w", err)
	}
	var out []ArchiveRecord
	for i, l := range bytes.Split(b, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		r, err := parseArchiveRecord(l)
		if err != nil {
			return nil, fmt.Errorf("store: %s line %d: %w", archivePending(path), i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// archiveBase is base for the next archive: the seq before the first event
// it may take and that event's prev, after the live chain's base and the
// pending archives.
func (db *DB) archiveBase() (uint64, string, error) {
	db.pendingMu.Lock()
	defer db.pendingMu.Unlock()
	return db.archiveBaseLocked()
}

func (db *DB) archiveBaseLocked() (uint64, string, error) {
	base, prev, err := db.base()
	if err != nil {
		return 0, "", err
	}
	recs, err := readPending(db.path)
	if err != nil {
		return 0, "", err
	}
	for _, r := range recs {
		if r.Last <= base {
			continue // cut already
		}
		if r.First != base+1 || r.Prev != prev {
			return 0, "", fmt.Errorf("store: %s: the archive of events %d..%d does not continue the store's archives at seq %d", archivePending(db.path), r.First, r.Last, base)
		}
		base, prev = r.Last, r.Head
	}
	return base, prev, nil
}

// ArchiveReplicated records an archive of a replicated store
// (Options.Replicate) on the node that leads: the cut as Archive makes it
// (after the archives already recorded, cut or pending), the archive file
// in the archive dir beside the store, and the archive event, appended
// through the replicated log. Every node applies that event with
// ApplyArchive (this one before the event's Append returns); each node's
// files shrink at its next writable Open. ao.Dir must be "": each node
// writes the file into its own archive dir. Calls are serialised.
func (db *DB) ArchiveReplicated(ctx context.Context, ao ArchiveOptions) (ArchiveResult, error) {
	switch {
	case db.replicate == nil:
		return ArchiveResult{}, errors.New("store: archive: not a replicated store (use Archive)")
	case ao.Dir != "":
		return ArchiveResult{}, errors.New("store: archive: a replicated store's archives go into the archive dir beside it, on every node")
	}
	db.archiving.Lock()
	defer db.archiving.Unlock()
	res, _, err := db.recordArchive(ctx, ao, func(string) error { return nil })
	if err == nil {
		res.DBAfter, res.JournalAfter = fileSize(db.path), fileSize(db.auditPath)
	}
	return res, err
}

// ApplyArchive does on this store what the archive event ev records, once
// the store holds ev (a replicated log applies an archive event with it,
// store/replica): it writes the archive file of the events ev records from
// this store's own events, into the archive dir beside the store, and
// marks its cut pending (PATH.archive-pending, synced): the next writable
// Open takes those events out of the store and its journal, as Archive
// does. The file is deterministic: one that is not the file ev records
// (its head, digests and sessions) is not put in place, and the error
// wraps ErrArchiveDiffers. Any other event, an archive this store has
// already applied, and one whose range does not continue the store's
// archives (the same on every node that holds the chain: logged) are left
// alone.
func (db *DB) ApplyArchive(ctx context.Context, ev Event) error {
	rec, ok := ArchiveRecordOf(ev)
	if !ok {
		return nil
	}
	if db.readOnly || db.auditPath == "" {
		return errors.New("store: apply an archive: needs a writable store with its journal")
	}
	db.pendingMu.Lock()
	defer db.pendingMu.Unlock()
	base, prev, err := db.archiveBaseLocked()
	if err != nil {
		return err
	}
	switch {
	case rec.Last <= base:
		return nil
	case rec.First != base+1 || rec.Prev != prev || ev.Seq <= rec.Last || rec.File != archiveName(rec.First, rec.Last):
		db.log.Warn("an archive event records events that do not follow the store's archives: no file written, nothing cut",
			"seq", ev.Seq, "first", rec.First, "last", rec.Last, "file", rec.File, "archived_to", base)
		return nil
	}
	dir := archiveDir(db.path)
	if err := mkdirAllSynced(db.fs, dir); err != nil {
		return fmt.Errorf("store: apply archive event %d: %w", ev.Seq, err)
	}
	if _, _, err := db.writeArchive(ctx, filepath.Join(dir, rec.File), base, prev, rec.Last, &rec); err != nil {
		return fmt.Errorf("store: apply archive event %d: %w", ev.Seq, err)
	}
	recs, err := readPending(db.path)
	if err != nil {
		return err
	}
	var buf []byte
	for _, r := range append(recs, rec) {
		buf = append(append(buf, mustMarshal(r)...), '\n')
	}
	if err := writeSynced(db.fs, archivePending(db.path), buf); err != nil {
		return fmt.Errorf("store: apply archive event %d: %w", ev.Seq, err)
	}
	return nil
}

// cutPending builds the cut of the pending archives, as Archive's steps 3
// and 4 do (the new journal and bbolt file beside the live ones, then the
// marker), and reports whether it did: the store must then be closed and
// opened again, which renames them into place. Without an archive pending
// beyond the live chain's base it drops the pending file; with mayCut
// false it only says that a cut is due.
func (db *DB) cutPending(ctx context.Context, mayCut bool) (bool, error) {
	db.pendingMu.Lock()
	defer db.pendingMu.Unlock()
	recs, err := readPending(db.path)
	if err != nil || len(recs) == 0 {
		return false, err
	}
	base, _, err := db.base()
	if err != nil {
		return false, err
	}
	var due []ArchiveRecord
	for _, r := range recs {
		if r.Last > base {
			due = append(due, r)
		}
	}
	if len(due) == 0 {
		if err := db.fs.remove(archivePending(db.path)); err != nil {
			return false, err
		}
		return false, db.fs.syncDir(filepath.Dir(db.path))
	}
	if !mayCut {
		return false, fmt.Errorf("store: the cut of the archives to seq %d is still due", due[len(due)-1].Last)
	}
	if _, _, err := db.archiveBaseLocked(); err != nil {
		return false, err
	}
	// The archive files are the only copy of their events on this node
	// once it is cut: each must be in place, the file recorded.
	for _, r := range due {
		p := filepath.Join(archiveDir(db.path), r.File)
		if sum, err := fileSHA256(p); err != nil || sum != r.FileSHA256 {
			return false, fmt.Errorf("store: the archive file %s is missing or not the one recorded (sha256 %s, want %s): the cut waits for it (%v)", p, sum, r.FileSHA256, err)
		}
	}
	sessions, err := db.archivedSessions(ctx, due)
	if err != nil {
		return false, err
	}
	if err := db.Sync(); err != nil {
		return false, fmt.Errorf("store: archive: %w", err)
	}
	if err := db.buildCut(ctx, due[len(due)-1].Last, sessions); err != nil {
		return false, err
	}
	if err := writeSynced(db.fs, archiveMarker(db.path), []byte(archiveFormat+"\n")); err != nil {
		return false, fmt.Errorf("store: archive: %w", err)
	}
	return true, nil
}

// fileSHA256 is the hex SHA-256 of the file at p.
func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// archivedSessions is what writeArchive returns of each of recs (which
// follow each other), for their events together: where each session's
// archived events are.
func (db *DB) archivedSessions(ctx context.Context, recs []ArchiveRecord) (map[string]*ArchivedSession, error) {
	sessions := map[string]*ArchivedSession{}
	last := recs[len(recs)-1].Last
	i := 0
	for ev, err := range db.All(recs[0].First) {
		if err != nil {
			return nil, err
		}
		if ev.Seq > last {
			break
		}
		if ev.Seq%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		for ev.Seq > recs[i].Last {
			i++
		}
		file := recs[i].File
		a := sessions[ev.Session]
		if a == nil {
			a = &ArchivedSession{FirstSeq: ev.Seq, First: ev.Time}
			sessions[ev.Session] = a
		}
		if len(a.Files) == 0 || a.Files[len(a.Files)-1] != file {
			a.Files = append(a.Files, file)
		}
		a.LastSeq, a.Last = ev.Seq, ev.Time
		a.Events++
	}
	return sessions, nil
}
