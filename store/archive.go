package store

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Archiving: Archive moves a prefix of the chain (events base+1..S, cut at
// a session boundary) into a sealed archive file and out of the live store
// and its journal. The live chain then starts at S+1, whose prev is the
// hash of event S (the archive's head), and an archive event in the live
// chain records the file, its range, head and digest: that event is what
// lets a verifier accept a chain that does not start at seq 1 (see
// chain.unvouched), so a removed prefix of the live chain is still
// detected.
//
// An archive file is gzip'd JSONL, self-describing:
//
//	{"format":"thinbot-archive-1","first":F,"last":L,"count":N,"prev":"P"}
//	... the N stored lines of events F..L, exactly as the journal held them ...
//	{"seal":"thinbot-archive-1","first":F,"last":L,"count":N,"prev":"P","head":"H","sha256":"D","sessions":K}
//
// where P is the hash of event F-1 (ZeroHash for F = 1: the previous
// archive's head), H the hash of event L and D the SHA-256 of the N lines,
// each followed by "\n" (what `sed '1d;$d'` of the decompressed file
// gives). Gzip's own CRC catches a cut file; VerifyFile checks the rest.

// TypeArchive is the type of the event that records an archive in the live
// chain; its payload is an ArchiveRecord. Like every event type it lives in
// the chain forever: never rename it.
const TypeArchive = "archive"

// ArchiveSession is the session id of archive events.
const ArchiveSession = "audit:archive"

// archiveFormat names the archive file format (header and seal).
const archiveFormat = "thinbot-archive-1"

// ErrNothingToArchive is returned by Archive when no event can be
// archived: none is older than the cut, or every one before it belongs to a
// session that must stay live.
var ErrNothingToArchive = errors.New("nothing to archive")

// ArchiveRecord describes one archive file: its seal (File and FileSHA256
// empty), or the payload of the archive event that records it in the live
// chain.
type ArchiveRecord struct {
	Format string `json:"format,omitempty"` // header only
	Seal   string `json:"seal,omitempty"`   // seal only
	// File is the archive's file name (the archive event only).
	File string `json:"file,omitempty"`
	// First and Last are the seqs of the first and the last archived
	// event; Count = Last-First+1.
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
	Count uint64 `json:"count"`
	// Prev is the hash of event First-1 (ZeroHash for First 1): the head
	// of the archive before this one.
	Prev string `json:"prev"`
	// Head is the hash of event Last (seal and event).
	Head string `json:"head,omitempty"`
	// SHA256 is the digest of the archived lines, each with its "\n".
	SHA256 string `json:"sha256,omitempty"`
	// FileSHA256 is the digest of the archive file's bytes (the event
	// only), what sha256sum prints for it.
	FileSHA256 string `json:"file_sha256,omitempty"`
	// Sessions is how many sessions have events in the archive.
	Sessions int `json:"sessions,omitempty"`
}

// parseArchiveLine decodes a header or seal line (or an archive event's
// payload) strictly: known fields only, a consistent range, well-formed
// hashes.
func parseArchiveLine(line []byte) (ArchiveRecord, error) {
	var r ArchiveRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return ArchiveRecord{}, fmt.Errorf("archive record: %w", err)
	}
	if dec.More() {
		return ArchiveRecord{}, errors.New("archive record: data after the object")
	}
	switch {
	case r.First == 0 || r.Last < r.First:
		return r, fmt.Errorf("archive record: bad range %d..%d", r.First, r.Last)
	case r.Count != r.Last-r.First+1:
		return r, fmt.Errorf("archive record: count %d does not match range %d..%d", r.Count, r.First, r.Last)
	case !isHex64(r.Prev):
		return r, errors.New("archive record: prev is not 64 lowercase hex digits")
	case r.First == 1 && r.Prev != ZeroHash:
		return r, errors.New("archive record: an archive from seq 1 must have the zero prev")
	case r.Head != "" && !isHex64(r.Head), r.SHA256 != "" && !isHex64(r.SHA256), r.FileSHA256 != "" && !isHex64(r.FileSHA256):
		return r, errors.New("archive record: a hash is not 64 lowercase hex digits")
	case r.Sessions < 0:
		return r, errors.New("archive record: negative session count")
	}
	return r, nil
}

// parseArchiveRecord decodes an archive event's payload.
func parseArchiveRecord(p json.RawMessage) (ArchiveRecord, error) {
	r, err := parseArchiveLine(p)
	if err == nil && (r.Head == "" || r.SHA256 == "" || r.File == "") {
		err = errors.New("archive record: head, sha256 or file missing")
	}
	return r, err
}

// ArchiveRecordOf returns the record of an archive event (ok false for any
// other event, one outside ArchiveSession, or a malformed payload). It is
// the one test of what vouches for a chain's start: the verifiers,
// ArchivedBefore and the readers above agree on it.
func ArchiveRecordOf(ev Event) (ArchiveRecord, bool) {
	if ev.Type != TypeArchive || ev.Session != ArchiveSession {
		return ArchiveRecord{}, false
	}
	r, err := parseArchiveRecord(ev.Payload)
	return r, err == nil
}

// ArchiveOptions says what Archive cuts. The cut is the last seq S at or
// before both UpTo and Before such that no session has events on both
// sides of it and none of Keep's sessions has an event at or before it.
type ArchiveOptions struct {
	// Dir is where the archive file is written; "" means "archive" next
	// to the database file.
	Dir string
	// UpTo is the highest seq to archive; 0 means no limit.
	UpTo uint64
	// Before archives only events timed before it; zero means no limit.
	Before time.Time
	// Keep returns the sessions that must stay live (open runs, pending
	// approvals, queued messages), read from the opened store; nil means
	// none.
	Keep func(db *DB) ([]string, error)
	// Actor is the archive event's actor; "" means "operator".
	Actor string
	// Log reports the sessions that are logs of standalone events (the
	// daemon's daily verification checkpoints, its notes), which the cut
	// may split without looking for their boundary: such a session spans
	// the whole chain, so no cut would ever be at a session boundary.
	// ArchiveSession is one whatever Log says; nil means no other.
	Log func(session string) bool

	// crash, in tests, is called after each step; an error stops Archive
	// there, as a crash would (nothing is cleaned up).
	crash func(step string) error
}

// ArchiveResult says what Archive did.
type ArchiveResult struct {
	Path   string        // the archive file
	Record ArchiveRecord // as the archive event records it
	Event  Event         // the archive event
	// DBBefore, DBAfter, JournalBefore and JournalAfter are the file sizes
	// in bytes before and after.
	DBBefore, DBAfter, JournalBefore, JournalAfter int64
}

// The files of an archive's cut: the new bbolt file and journal, complete
// and synced, and the marker whose presence says they replace the live
// ones (see finishArchive); and the archive file's name.
func archiveNewDB(path string) string    { return path + ".archive-new" }
func archiveNewJournal(jp string) string { return jp + ".archive-new" }
func archiveMarker(path string) string   { return path + ".archive-commit" }
func archiveName(first, last uint64) string {
	return fmt.Sprintf("archive-%012d-%012d.jsonl.gz", first, last)
}

// Archive moves the oldest events of the store at path (see ArchiveOptions
// for the cut) into a sealed archive file and out of the store and its
// journal, which both shrink. It needs the store to itself (a daemon holds
// it: stop the daemon first; Open's lock timeout applies) and a journal
// (Options.AuditPath not "-").
//
// Steps, each crash-safe: (1) the archive file is written, synced and
// renamed into place; (2) an archive event recording it is appended
// durably to the live chain; (3) a new journal and bbolt file holding only
// the events after the cut are written and synced beside the live ones;
// (4) a marker file is synced, then both are renamed over the live ones
// and the marker removed. A crash before (4) leaves the old store (with
// the archive event, if (2) was reached: still a complete chain); from the
// marker on, the next Open finishes the renames. The bbolt file is built
// anew, so it has no free pages; the state index of the layer above is not
// copied and is rebuilt from the live chain at its next start.
func Archive(ctx context.Context, path string, opts *Options, ao ArchiveOptions) (ArchiveResult, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.AuditPath == "-" || o.ReadOnly {
		return ArchiveResult{}, errors.New("store: archive: needs a writable store with its journal")
	}
	if _, err := os.Stat(path); err != nil {
		// Open would create an empty store there (a mistyped path).
		return ArchiveResult{}, fmt.Errorf("store: archive: no store at %s: %w", path, err)
	}
	crash := ao.crash
	if crash == nil {
		crash = func(string) error { return nil }
	}
	db, err := Open(path, &o)
	if err != nil {
		return ArchiveResult{}, err
	}
	res, err := db.archive(ctx, ao, crash)
	if err != nil {
		if errors.Is(err, errCrash) {
			// A simulated crash: leave the files as a dead process would.
			db.abandon()
			return res, err
		}
		return res, errors.Join(err, db.Close())
	}
	if err := db.Close(); err != nil {
		return res, err
	}
	// Take the store back for the renames (a daemon that started in
	// between has finished them itself in its Open).
	f, _, err := lockState(path, max(o.Timeout, 10*time.Second))
	if err != nil {
		return res, fmt.Errorf("store: archive: recorded and built; the next open finishes the cut (a daemon that started meanwhile has): %w", err)
	}
	defer f.Close()
	if err := finishArchive(o.durable, path, db.auditPath, crash); err != nil {
		return res, err
	}
	res.DBAfter, res.JournalAfter = fileSize(path), fileSize(db.auditPath)
	return res, nil
}

// errCrash wraps the error of ArchiveOptions.crash.
var errCrash = errors.New("simulated crash")

// abandon releases the DB's files without syncing or marking it closed,
// as a crash would (tests only).
func (db *DB) abandon() {
	db.closeOnce.Do(func() { close(db.closing) })
	db.closeMu.Lock()
	db.closed = true
	db.closeMu.Unlock()
	close(db.reqs)
	<-db.loopDone
	db.auditMu.Lock()
	if db.auditFile != nil {
		db.auditFile.Close()
		db.auditFile = nil
	}
	db.auditMu.Unlock()
	db.bolt.Close()
	if db.state != nil {
		db.state.Close()
	}
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

func (db *DB) archive(ctx context.Context, ao ArchiveOptions, crash func(string) error) (ArchiveResult, error) {
	step := func(name string) error {
		if err := crash(name); err != nil {
			return fmt.Errorf("store: archive: %w at %s: %w", errCrash, name, err)
		}
		return nil
	}
	if err := db.Sync(); err != nil {
		return ArchiveResult{}, fmt.Errorf("store: archive: %w", err)
	}
	if pending, err := readPending(db.path); err != nil || len(pending) > 0 {
		// A cluster node's archive, applied but not cut yet: the next
		// writable Open cuts it (and said why it did not, if it did not).
		return ArchiveResult{}, fmt.Errorf("store: archive: the cut of an archive already recorded is pending (%s); open the store once writable (thinbot audit rebuild) and see its log: %v", archivePending(db.path), err)
	}
	res, sessions, err := db.recordArchive(ctx, ao, step)
	if err != nil {
		return res, err
	}
	if err := db.buildCut(ctx, res.Record.Last, sessions); err != nil {
		return res, err
	}
	if err := step("built"); err != nil {
		return res, err
	}
	if err := writeSynced(db.fs, archiveMarker(db.path), []byte(archiveFormat+"\n")); err != nil {
		return res, fmt.Errorf("store: archive: %w", err)
	}
	if err := step("marked"); err != nil {
		return res, err
	}
	return res, nil
}

// recordArchive is the first half of an archive, a lone store's and a
// replicated one's: the cut (after the archives already recorded), the
// archive file, and the archive event that records it, appended (once: a
// run that crashed after recording this very file finds its event). It
// returns the sessions the archive took, which the cut records.
func (db *DB) recordArchive(ctx context.Context, ao ArchiveOptions, step func(string) error) (ArchiveResult, map[string]*ArchivedSession, error) {
	res := ArchiveResult{DBBefore: fileSize(db.path), JournalBefore: fileSize(db.auditPath)}
	var keep []string
	if ao.Keep != nil {
		var err error
		if keep, err = ao.Keep(db); err != nil {
			return res, nil, fmt.Errorf("store: archive: %w", err)
		}
	}
	base, baseHash, err := db.archiveBase()
	if err != nil {
		return res, nil, err
	}
	cut, err := db.archiveCut(ao, keep, base)
	if err != nil {
		return res, nil, err
	}
	if cut <= base {
		return res, nil, fmt.Errorf("store: archive: %w (the live chain starts at seq %d; the cut is at seq %d)", ErrNothingToArchive, base+1, cut)
	}
	dir := ao.Dir
	if dir == "" {
		dir = archiveDir(db.path)
	}
	if err := mkdirAllSynced(db.fs, dir); err != nil {
		return res, nil, fmt.Errorf("store: archive: %w", err)
	}
	rec, sessions, err := db.writeArchive(ctx, filepath.Join(dir, archiveName(base+1, cut)), base, baseHash, cut, nil)
	if err != nil {
		return res, nil, err
	}
	res.Path = filepath.Join(dir, rec.File)
	if err := step("archive-written"); err != nil {
		return res, nil, err
	}
	// A run that crashed after recording this very file (the same bytes:
	// the file is deterministic) is finished, not recorded twice.
	recorded, ok, err := db.recorded(rec)
	if err != nil {
		return res, nil, err
	}
	if !ok {
		actor := cmp.Or(ao.Actor, "operator")
		evs, err := db.Append(ctx, Event{Session: ArchiveSession, Type: TypeArchive, Actor: actor, Payload: mustMarshal(rec)})
		if err != nil {
			return res, nil, fmt.Errorf("store: archive: record: %w", err)
		}
		recorded = evs[0]
	}
	res.Record, res.Event = rec, recorded
	if err := step("recorded"); err != nil {
		return res, nil, err
	}
	return res, sessions, nil
}

// archiveDir is the default archive dir of the store at path: "archive"
// beside it.
func archiveDir(path string) string { return filepath.Join(filepath.Dir(path), "archive") }

// recorded returns the live chain's archive event that records rec, if
// there is one.
func (db *DB) recorded(rec ArchiveRecord) (Event, bool, error) {
	for ev, err := range db.Events(ArchiveSession, 0) {
		if err != nil {
			return Event{}, false, err
		}
		if r, ok := ArchiveRecordOf(ev); ok && r == rec {
			return ev, true, nil
		}
	}
	return Event{}, false, nil
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a struct of strings and numbers
	}
	return b
}

// Base returns the seq before the live chain's first event and that
// event's prev: 0 and ZeroHash for a chain from seq 1 (or an empty one);
// after an archive's cut, the archive's last seq and head.
func (db *DB) Base() (seq uint64, prev string, err error) { return db.base() }

// base returns the seq before the live chain's first event and that
// event's prev (0 and ZeroHash for a chain from seq 1).
func (db *DB) base() (seq uint64, prev string, err error) {
	seq, prev = 0, ZeroHash
	err = db.view(func(tx *bolt.Tx) error {
		_, v := tx.Bucket(bucketEvents).Cursor().First()
		if v == nil {
			return nil
		}
		ev, err := decodeLine(v)
		if err != nil {
			return fmt.Errorf("first event: %w", err)
		}
		seq, prev = ev.Seq-1, ev.Prev
		return nil
	})
	if err != nil {
		return 0, "", fmt.Errorf("store: read: %w", err)
	}
	return seq, prev, nil
}

// liveBase is the seq before the first event in tx (0 for a chain from
// seq 1 or an empty one).
func liveBase(tx *bolt.Tx) uint64 {
	k, _ := tx.Bucket(bucketEvents).Cursor().First()
	if len(k) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k) - 1
}

// archiveCut returns the cut: the highest seq within ao's limits at which
// no session of keep has an event at or before it, and, if there is one
// close below the limit (within 1% of the events to archive, or 1,000),
// no session but a log (ao.Log) has events on both sides of it. A busy
// bot always has sessions in flight, so there may be none: then the cut is
// the limit and the sessions across it keep their later events live
// (Archived says where the earlier ones are).
func (db *DB) archiveCut(ao ArchiveOptions, keep []string, base uint64) (uint64, error) {
	limit := db.LastSeq()
	if ao.UpTo > 0 {
		limit = min(limit, ao.UpTo)
	}
	if !ao.Before.IsZero() {
		s, err := db.SeqAt(ao.Before.Add(-1))
		if err != nil {
			return 0, fmt.Errorf("store: archive: %w", err)
		}
		limit = min(limit, s)
	}
	kept := map[string]bool{}
	for _, s := range keep {
		kept[s] = true
	}
	type span struct{ lo, hi uint64 } // a cut in [lo, hi] splits a session
	var spans []span
	err := db.view(func(tx *bolt.Tx) error {
		return summariesOf(tx).forEach(func(k, v []byte) error {
			si, ok := decodeSessionInfo(v)
			if !ok {
				return fmt.Errorf("session %q: damaged session record", k)
			}
			if si.firstSeq > limit {
				return nil
			}
			if kept[string(k)] {
				limit = min(limit, si.firstSeq-1)
				return nil
			}
			if si.lastSeq > si.firstSeq && string(k) != ArchiveSession && (ao.Log == nil || !ao.Log(string(k))) {
				spans = append(spans, span{si.firstSeq, si.lastSeq - 1})
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("store: archive: %w", err)
	}
	// Walk down from limit past every span that contains the cut.
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(b.hi, a.hi) })
	cut := limit
	for moved := true; moved && cut > 0; {
		moved = false
		for _, s := range spans {
			if s.lo <= cut && cut <= s.hi {
				cut, moved = s.lo-1, true
			}
		}
	}
	if window := max(1000, (limit-min(limit, base))/100); cut+window < limit {
		return limit, nil
	}
	return cut, nil
}

// mkdirAllSynced is os.MkdirAll (mode 0700) whose new directories' names
// are synced in their parents: the archive file in a --dir created here
// must survive a machine restart, as the live events it replaces are gone
// once the cut is done (the default dir, beside the store, is synced with
// the cut's marker; another is not).
func mkdirAllSynced(d durable, dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		created = append(created, d)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, c := range created {
		if err := d.syncDir(filepath.Dir(c)); err != nil {
			return err
		}
	}
	return nil
}

// writeSynced writes a new file atomically: a temporary file, synced,
// renamed into place, the directory synced.
func writeSynced(d durable, path string, b []byte) error {
	return writeFileSynced(d, path, func(w io.Writer) error { _, err := w.Write(b); return err })
}

func writeFileSynced(d durable, path string, fill func(w io.Writer) error) error {
	return writeFileChecked(d, path, fill, nil)
}

// writeFileChecked is writeFileSynced that calls check, if not nil, with
// the file complete and synced, before it replaces whatever is at path: an
// error from check stops it there.
func writeFileChecked(d durable, path string, fill func(w io.Writer) error, check func() error) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = fill(f)
	if err == nil {
		err = d.fsync(f, tmp)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		err = d.rename(tmp, path)
	}
	if err == nil {
		err = d.syncDir(filepath.Dir(path))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// writeArchive writes events base+1..last to the archive file at p and
// returns its record. With want (an archive event's record of this file)
// the file must be the one want records, or it is not put in place and the
// error wraps ErrArchiveDiffers.
func (db *DB) writeArchive(ctx context.Context, p string, base uint64, baseHash string, last uint64, want *ArchiveRecord) (ArchiveRecord, map[string]*ArchivedSession, error) {
	rec := ArchiveRecord{File: filepath.Base(p), First: base + 1, Last: last, Count: last - base, Prev: baseHash}
	sessions := map[string]*ArchivedSession{}
	fileSum := sha256.New()
	// A file of that name is replaced only by the same bytes (this
	// archive written again after a crash): one of other contents is
	// another store's archive (a --dir two stores share), or another
	// history's, and would be lost.
	noClobber := func() error {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		if !bytes.Equal(h.Sum(nil), fileSum.Sum(nil)) {
			return fmt.Errorf("%s exists and holds another archive (file sha256 %x): move it away, or archive into another --dir", p, h.Sum(nil))
		}
		return nil
	}
	// The file is deterministic: a store that holds the events the record
	// was made from writes it byte for byte (head, digests, sessions).
	same := func() error {
		got := rec
		got.FileSHA256 = hex.EncodeToString(fileSum.Sum(nil))
		if got != *want {
			return fmt.Errorf("%w: this store's events %d..%d make head %.12s…, digest %.12s…, file sha256 %.12s…, %d sessions; the archive event records head %.12s…, digest %.12s…, file sha256 %.12s…, %d sessions",
				ErrArchiveDiffers, got.First, got.Last, got.Head, got.SHA256, got.FileSHA256, got.Sessions, want.Head, want.SHA256, want.FileSHA256, want.Sessions)
		}
		return nil
	}
	check := noClobber
	if want != nil {
		check = func() error { return errors.Join(same(), noClobber()) }
	}
	err := writeFileChecked(db.fs, p, func(w io.Writer) error {
		zw, err := gzip.NewWriterLevel(io.MultiWriter(w, fileSum), gzip.BestSpeed)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(zw, 1<<16)
		hdr := rec
		hdr.File, hdr.Format = "", archiveFormat
		bw.Write(append(mustMarshal(hdr), '\n'))
		sum := sha256.New()
		seq, head := base, baseHash
	read:
		for lines, err := range db.allLines(base + 1) {
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			for _, l := range lines {
				// Each event is checked in full (canonical form and
				// hash), not only linked: an edit archived here would be
				// gone from the live store, whose verification would then
				// pass.
				ev, err := parseLine(l)
				if err != nil {
					return fmt.Errorf("event %d: %w: run thinbot audit verify", seq+1, err)
				}
				if ev.Seq != seq+1 || ev.Prev != head {
					return fmt.Errorf("event %d does not continue the chain: run thinbot audit verify", seq+1)
				}
				seq, head = ev.Seq, ev.Hash
				a := sessions[ev.Session]
				if a == nil {
					a = &ArchivedSession{Files: []string{rec.File}, FirstSeq: ev.Seq, First: ev.Time}
					sessions[ev.Session] = a
				}
				a.LastSeq, a.Last = ev.Seq, ev.Time
				a.Events++
				sum.Write(l)
				sum.Write([]byte{'\n'})
				bw.Write(l)
				bw.WriteByte('\n')
				if seq == last {
					break read
				}
			}
		}
		if seq != last {
			return fmt.Errorf("the store ends at seq %d, before the cut at %d", seq, last)
		}
		rec.Head, rec.SHA256, rec.Sessions = head, hex.EncodeToString(sum.Sum(nil)), len(sessions)
		seal := rec
		seal.File, seal.Seal = "", archiveFormat
		bw.Write(append(mustMarshal(seal), '\n'))
		if err := bw.Flush(); err != nil {
			return err
		}
		return zw.Close()
	}, check)
	if err != nil {
		return ArchiveRecord{}, nil, fmt.Errorf("store: archive: write %s: %w", p, err)
	}
	rec.FileSHA256 = hex.EncodeToString(fileSum.Sum(nil))
	return rec, sessions, nil
}

// buildCut writes, beside the live files, a journal and a bbolt file that
// hold only the events after cut, both synced. The bbolt file records
// which sessions the archive took (bucket "archived").
func (db *DB) buildCut(ctx context.Context, cut uint64, sessions map[string]*ArchivedSession) error {
	newJ, newDB := archiveNewJournal(db.auditPath), archiveNewDB(db.path)
	os.Remove(newJ)
	os.Remove(newDB)
	db.auditMu.Lock()
	defer db.auditMu.Unlock()
	// The journal: its bytes from the line of seq cut+1 on.
	jf, err := os.Open(db.auditPath)
	if err != nil {
		return fmt.Errorf("store: archive: %w", err)
	}
	defer jf.Close()
	// The lines the cut drops must be the store's (archived above): a
	// journal edited there would lose the evidence of it.
	var off int64
	found := false
	var differs uint64
	err = db.view(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		return eachLine(ctx, jf, func(line []byte, complete bool) bool {
			ev, ok := decodeFields(line, false)
			if !ok {
				var err error
				if ev, err = decodeLine(line); err != nil {
					ev.Seq = 0
				}
			}
			if !complete || ev.Seq == 0 {
				return false
			}
			if ev.Seq == cut+1 {
				found = true
				return false
			}
			if !bytes.Equal(events.Get(seqKey(ev.Seq)), line) {
				differs = ev.Seq
				return false
			}
			off += int64(len(line)) + 1
			return true
		})
	})
	switch {
	case err != nil:
		return fmt.Errorf("store: archive: read the journal: %w", err)
	case differs > 0:
		return fmt.Errorf("store: archive: the journal's line for seq %d differs from the stored event: run thinbot audit verify", differs)
	case !found:
		return fmt.Errorf("store: archive: the journal has no line for seq %d: run thinbot audit verify", cut+1)
	}
	out, err := os.OpenFile(newJ, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("store: archive: %w", err)
	}
	size := db.auditOff - off
	_, err = io.Copy(out, io.NewSectionReader(jf, off, size))
	if err == nil {
		err = db.fs.fsync(out, newJ)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: archive: write %s: %w", newJ, err)
	}
	// The bbolt file, from the store's events after the cut.
	bdb, err := bolt.Open(newDB, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType, NoSync: true})
	if err != nil {
		return fmt.Errorf("store: archive: %w", err)
	}
	fail := func(err error) error {
		bdb.Close()
		return fmt.Errorf("store: archive: build %s: %w", newDB, err)
	}
	if err := bdb.Update(createBuckets); err != nil {
		return fail(err)
	}
	last := db.lastSeq.Load()
	var evs []*Event
	var lines [][]byte
	flush := func() error {
		if len(evs) == 0 {
			return nil
		}
		mark := journalMarkValue(last, size, last, size, db.bootID)
		err := bdb.Update(func(tx *bolt.Tx) error { return putEvents(tx, evs, lines, mark) })
		evs, lines = evs[:0], lines[:0]
		return err
	}
	for chunk, err := range db.allLines(cut + 1) {
		if err != nil {
			return fail(err)
		}
		for _, l := range chunk {
			ev, err := decodeLine(l)
			if err != nil {
				return fail(err)
			}
			evs, lines = append(evs, &ev), append(lines, bytes.Clone(l))
		}
		if len(evs) >= 10_000 {
			if err := flush(); err != nil {
				return fail(err)
			}
		}
	}
	if err := flush(); err != nil {
		return fail(err)
	}
	// Which sessions are archived where: the old store's list, and the
	// sessions this archive took.
	err = db.view(func(tx *bolt.Tx) error {
		return bdb.Update(func(ntx *bolt.Tx) error {
			nb, err := ntx.CreateBucketIfNotExists(bucketArchived)
			if err != nil {
				return err
			}
			if old := tx.Bucket(bucketArchived); old != nil {
				if err := old.ForEach(func(k, v []byte) error { return nb.Put(bytes.Clone(k), bytes.Clone(v)) }); err != nil {
					return err
				}
			}
			for id, a := range sessions {
				if prev := nb.Get([]byte(id)); prev != nil {
					var p ArchivedSession
					if json.Unmarshal(prev, &p) == nil {
						a.Files = append(p.Files, a.Files...)
						a.FirstSeq, a.First, a.Events = p.FirstSeq, p.First, a.Events+p.Events
					}
				}
				if err := nb.Put([]byte(id), mustMarshal(a)); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return fail(err)
	}
	if err := db.fs.syncBolt(bdb, newDB); err != nil {
		return fail(err)
	}
	if err := bdb.Close(); err != nil {
		return fmt.Errorf("store: archive: %w", err)
	}
	return nil
}

// bucketArchived: key session id, value an ArchivedSession (JSON): the
// sessions whose events (all, or the earlier ones) were archived.
var bucketArchived = []byte("archived")

// ArchivedSession says where a session's archived events are.
type ArchivedSession struct {
	Files    []string  `json:"files"` // the archives with events of it, oldest first
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Events   uint64    `json:"events"`
	First    time.Time `json:"first"` // time of its first archived event
	Last     time.Time `json:"last"`  // and of its last
}

// Archived returns where session's archived events are (ok false if none
// of its events were archived).
func (db *DB) Archived(session string) (a ArchivedSession, ok bool, err error) {
	err = db.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArchived)
		if b == nil {
			return nil
		}
		v := b.Get([]byte(session))
		if v == nil {
			return nil
		}
		ok = json.Unmarshal(v, &a) == nil
		return nil
	})
	return a, ok, err
}

// finishArchive completes an archive's cut whose marker is on disk (the
// new files are complete and synced): it renames them over the live ones,
// then removes the marker. Without a marker it removes leftovers of a cut
// that never reached it. Callers hold the state file's lock.
func finishArchive(d durable, path, journal string, crash func(string) error) error {
	newJ, newDB, marker := archiveNewJournal(journal), archiveNewDB(path), archiveMarker(path)
	if _, err := os.Stat(marker); errors.Is(err, fs.ErrNotExist) {
		os.Remove(newJ)
		os.Remove(newDB)
		return nil
	}
	fail := func(err error) error { return fmt.Errorf("store: finish the archive's cut: %w", err) }
	if _, err := os.Stat(newJ); err == nil {
		if err := d.rename(newJ, journal); err != nil {
			return fail(err)
		}
	}
	if crash != nil {
		if err := crash("journal-swapped"); err != nil {
			return fmt.Errorf("store: archive: %w at journal-swapped: %w", errCrash, err)
		}
	}
	if _, err := os.Stat(newDB); err == nil {
		if err := d.rename(newDB, path); err != nil {
			return fail(err)
		}
	}
	if err := d.syncDir(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	if filepath.Dir(journal) != filepath.Dir(path) {
		if err := d.syncDir(filepath.Dir(journal)); err != nil {
			return fail(err)
		}
	}
	if err := d.remove(marker); err != nil {
		return fail(err)
	}
	if err := d.syncDir(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	return nil
}

// pendingCut returns the files a read-only Open reads: the live ones, or,
// while an archive's cut is unfinished (its marker is on disk; the next
// writable Open finishes it), the new ones not renamed yet.
func pendingCut(path, journal string) (string, string) {
	if _, err := os.Stat(archiveMarker(path)); err != nil {
		return path, journal
	}
	// A process that holds the store finished any cut when it opened it
	// (an archive holds it only until it writes the marker): a marker
	// then was not left by an archive, and the live files are the store.
	if stateHeld(path) {
		return path, journal
	}
	if _, err := os.Stat(archiveNewDB(path)); err == nil {
		path = archiveNewDB(path)
	}
	if journal != "" {
		if _, err := os.Stat(archiveNewJournal(journal)); err == nil {
			journal = archiveNewJournal(journal)
		}
	}
	return path, journal
}

// verifyArchive is VerifyFile of an archive file.
func verifyArchive(ctx context.Context, r io.Reader, each func(Event)) (FileReport, error) {
	fileSum := sha256.New()
	var out FileReport
	c := newChain()
	c.noBase = true
	bad := func(seq uint64, format string, args ...any) (FileReport, error) {
		c.fail(seq, fmt.Sprintf(format, args...))
		out.Report = c.rep
		return out, nil
	}
	tb := bufio.NewReader(io.TeeReader(r, fileSum))
	zr, err := gzip.NewReader(tb)
	if err != nil {
		return bad(1, "not a gzip file: %v", err)
	}
	zr.Multistream(false)
	br := bufio.NewReaderSize(zr, 1<<16)
	readLine := func() ([]byte, error) {
		line, err := br.ReadBytes('\n')
		if err == nil {
			line = line[:len(line)-1]
		}
		return line, err
	}
	hl, err := readLine()
	if err != nil {
		return bad(1, "no header line: %v", err)
	}
	hdr, err := parseArchiveLine(hl)
	if err != nil || hdr.Format != archiveFormat || hdr.Seal != "" || hdr.Head != "" || hdr.SHA256 != "" || hdr.File != "" {
		return bad(1, "bad header line (want format %q): %v", archiveFormat, err)
	}
	c.rep.LastSeq, c.rep.LastHash = hdr.First-1, hdr.Prev
	sum := sha256.New()
	for n := uint64(0); n < hdr.Count; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return out, err
			}
		}
		line, err := readLine()
		if err != nil {
			return bad(c.rep.LastSeq+1, "the archive ends after seq %d, its header says %d: %v", c.rep.LastSeq, hdr.Last, gzipProblem(err))
		}
		ev, ok := c.check(line)
		if !ok {
			out.Report = c.rep
			return out, nil
		}
		if each != nil {
			each(ev)
		}
		sum.Write(line)
		sum.Write([]byte{'\n'})
	}
	sl, err := readLine()
	if err != nil {
		return bad(hdr.Last+1, "no seal after seq %d: %v", hdr.Last, gzipProblem(err))
	}
	seal, err := parseArchiveLine(sl)
	if err != nil || seal.Seal != archiveFormat || seal.Format != "" || seal.File != "" {
		return bad(hdr.Last+1, "bad seal line after seq %d: %v", hdr.Last, err)
	}
	out.Seal = seal
	switch {
	case seal.First != hdr.First || seal.Last != hdr.Last || seal.Prev != hdr.Prev:
		return bad(hdr.First, "the seal (%d..%d, prev %.12s…) does not match the header (%d..%d, prev %.12s…)", seal.First, seal.Last, seal.Prev, hdr.First, hdr.Last, hdr.Prev)
	case seal.Head != c.rep.LastHash:
		return bad(hdr.Last, "the seal's head %.12s… is not the hash of seq %d (%.12s…)", seal.Head, hdr.Last, c.rep.LastHash)
	case seal.SHA256 != hex.EncodeToString(sum.Sum(nil)):
		return bad(hdr.Last, "the seal's digest does not match the archived lines")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err == nil {
			return bad(hdr.Last+1, "data after the seal")
		}
		return bad(hdr.Last+1, "after the seal: %v", gzipProblem(err))
	}
	// Read the rest of the file, so that the digest covers it all.
	if n, _ := io.Copy(io.Discard, tb); n > 0 {
		return bad(hdr.Last+1, "%d bytes after the gzip stream", n)
	}
	out.FileSHA256 = hex.EncodeToString(fileSum.Sum(nil))
	out.Report = c.rep
	return out, nil
}

func gzipProblem(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "the file is cut"
	}
	return err.Error()
}

// verifyArchivePath is VerifyFile of the archive file at p.
func verifyArchivePath(ctx context.Context, p string) (FileReport, error) {
	f, err := os.Open(p)
	if err != nil {
		return FileReport{}, fmt.Errorf("store: verify archive: %w", err)
	}
	defer f.Close()
	rep, err := verifyArchive(ctx, f, nil)
	if err != nil {
		return rep, fmt.Errorf("store: verify archive %s: %w", p, err)
	}
	return rep, nil
}

// archiveHashes is FileHashes of an archive file: the events up to seq
// last of those it holds.
func archiveHashes(ctx context.Context, r io.Reader, seqs []uint64, last uint64) (map[uint64]string, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("store: archive hashes: %w", err)
	}
	zr.Multistream(false)
	br := bufio.NewReaderSize(zr, 1<<16)
	hl, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("store: archive hashes: the header: %w", err)
	}
	hdr, err := parseArchiveLine(hl[:len(hl)-1])
	if err != nil {
		return nil, fmt.Errorf("store: archive hashes: the header: %w", err)
	}
	// The seal line after the events does not start with a seq: the read
	// stops there.
	return jsonlHashes(ctx, br, seqs, min(last, hdr.Last))
}

// Restore writes the events of the archive files (in chain order, each
// continuing the one before) into a new store at path, with its journal:
// a store that thinbot's readers open like any other. Each file is checked
// first (VerifyFile) and so is the continuity of the files; the restored
// store starts where the first file starts, and when that is not seq 1 its
// chain is verified from that archive's Prev (VerifyOptions.From), as
// Restore returns it. path must not exist yet.
func Restore(ctx context.Context, path string, files []string) (first ArchiveRecord, last ArchiveRecord, err error) {
	if _, err := os.Stat(path); err == nil {
		return first, last, fmt.Errorf("store: restore: %s exists", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return first, last, fmt.Errorf("store: restore: %w", err)
	}
	journal := filepath.Join(filepath.Dir(path), "audit.jsonl")
	if _, err := os.Stat(journal); err == nil {
		return first, last, fmt.Errorf("store: restore: %s exists", journal)
	}
	for i, p := range files {
		rep, err := verifyArchivePath(ctx, p)
		if err != nil {
			return first, last, err
		}
		if !rep.OK {
			return first, last, fmt.Errorf("store: restore: %s does not verify: seq %d: %s", p, rep.BadSeq, rep.Problem)
		}
		if i == 0 {
			first = rep.Seal
		} else if rep.Seal.First != last.Last+1 || rep.Seal.Prev != last.Head {
			return first, last, fmt.Errorf("store: restore: %s (from seq %d, prev %.12s…) does not continue the file before it (to seq %d, head %.12s…)",
				p, rep.Seal.First, rep.Seal.Prev, last.Last, last.Head)
		}
		last = rep.Seal
	}
	if len(files) == 0 {
		return first, last, errors.New("store: restore: no archive files")
	}
	err = writeFileSynced(durable{}, journal, func(w io.Writer) error {
		for _, p := range files {
			if err := copyArchiveLines(p, w); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return first, last, fmt.Errorf("store: restore: %w", err)
	}
	// Open replays the journal into the empty store.
	db, err := Open(path, &Options{AuditPath: journal})
	if err != nil {
		return first, last, err
	}
	return first, last, db.Close()
}

// copyArchiveLines writes the event lines of a verified archive file to w.
func copyArchiveLines(p string, w io.Writer) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(zr, 1<<16)
	hl, err := br.ReadBytes('\n')
	if err != nil {
		return err
	}
	hdr, err := parseArchiveLine(hl[:len(hl)-1])
	if err != nil {
		return err
	}
	for range hdr.Count {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return err
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// ArchivedBefore returns the record of the archive that holds the events
// before the live chain's first (ok false for a chain from seq 1, or when
// no archive event of the chain records its start: Verify reports that).
func (db *DB) ArchivedBefore() (rec ArchiveRecord, seq uint64, ok bool, err error) {
	base, prev, err := db.base()
	if err != nil || base == 0 {
		return rec, 0, false, err
	}
	for ev, err := range db.Events(ArchiveSession, 0) {
		if err != nil {
			return rec, 0, false, err
		}
		if r, isRec := ArchiveRecordOf(ev); isRec && r.Last == base && r.Head == prev {
			return r, ev.Seq, true, nil
		}
	}
	return rec, 0, false, nil
}
