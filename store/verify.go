package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Report is the result of a verification. When OK is false, BadSeq is the
// first sequence number found bad (or missing) and Problem says why; Events
// then counts the good events before it.
type Report struct {
	Events   uint64 // events checked and found good
	OK       bool
	BadSeq   uint64
	Problem  string
	LastSeq  uint64 // seq of the last good event
	LastHash string // hash of the last good event (ZeroHash if none): anchor it elsewhere to detect a rewritten chain
	Sessions int    // sessions in the store (Verify only)
	Beyond   uint64 // VerifyJournal: events the store has past the end of the journal
	// Warnings are findings that do not break the chain but deserve an
	// auditor's look: an event timed earlier than the one before it (a
	// clock stepped back, or events written with a forged clock). At most
	// maxWarnings are kept; WarningCount counts them all.
	Warnings     []string
	WarningCount int
	// ArchivedSeq is set when the chain does not start at seq 1 because
	// events 1..ArchivedSeq were archived (thinbot audit archive): the
	// chain is checked from that anchor, ArchivedHash (the hash of event
	// ArchivedSeq, the archive's head), which an archive event in the
	// chain itself must record (ArchiveFile is the file it names).
	ArchivedSeq  uint64
	ArchivedHash string
	ArchiveFile  string
	// ArchiveFirst is the first seq that file holds: events before it
	// are in the archives before it.
	ArchiveFirst uint64
}

const maxWarnings = 10

// chain checks lines one after another: seq gapless from 1, prev links,
// canonical form and hash.
type chain struct {
	rep  Report
	last Event // the last good event, for the time check
	// noBase refuses a chain that starts after seq 1 (an archive's events
	// are checked from its own seal instead).
	noBase bool
	// vouched: an archive event of the chain records the base
	// (rep.ArchivedSeq, rep.ArchivedHash); see unvouched.
	vouched bool
}

func newChain() *chain { return &chain{rep: Report{OK: true, LastHash: ZeroHash}} }

// adoptsBase reports whether the next event, parsed as (ev, err), starts a
// chain whose earlier events were archived: the first event checked, with
// no anchor given, has a seq above 1. The chain is then checked from
// (ev.Seq-1, ev.Prev), which an archive event in it must vouch for.
func (c *chain) adoptsBase(ev Event, err error) bool {
	return !c.noBase && err == nil && c.rep.Events == 0 && c.rep.LastSeq == 0 && c.rep.ArchivedSeq == 0 && ev.Seq > 1
}

// unvouched returns why the chain's base is not vouched for ("" if it
// starts at seq 1 or an archive event in it records the base).
func (c *chain) unvouched() string {
	if c.rep.ArchivedSeq == 0 || c.vouched {
		return ""
	}
	return fmt.Sprintf("the chain starts at seq %d, and no archive event in it records events up to seq %d with head %.12s…: events before it were removed",
		c.rep.ArchivedSeq+1, c.rep.ArchivedSeq, c.rep.ArchivedHash)
}

// finish fails the report if the chain's base is not vouched for.
func (c *chain) finish() {
	if p := c.unvouched(); p != "" {
		c.fail(c.rep.ArchivedSeq, p)
	}
}

// check verifies the next line and returns its event; on a problem it marks
// the report bad and returns false.
func (c *chain) check(line []byte) (Event, bool) {
	ev, err := parseLine(line)
	return c.checkParsed(ev, err)
}

// checkParsed is check with the line already parsed (parseLine's results).
func (c *chain) checkParsed(ev Event, err error) (Event, bool) {
	if c.adoptsBase(ev, err) {
		c.rep.ArchivedSeq, c.rep.ArchivedHash = ev.Seq-1, ev.Prev
		c.rep.LastSeq, c.rep.LastHash = ev.Seq-1, ev.Prev
	}
	want := c.rep.LastSeq + 1
	switch {
	case err != nil && ev.Seq != 0 && ev.Seq != want:
		return ev, c.fail(want, fmt.Sprintf("expected seq %d, found seq %d (%v)", want, ev.Seq, err))
	case err != nil:
		return ev, c.fail(want, err.Error())
	case ev.Seq != want:
		return ev, c.fail(want, fmt.Sprintf("expected seq %d, found seq %d: an event is missing, swapped or inserted", want, ev.Seq))
	case ev.Prev != c.rep.LastHash:
		return ev, c.fail(want, fmt.Sprintf("prev %.12s… does not match the hash of seq %d (%.12s…): an event before it was removed, replaced or inserted", ev.Prev, want-1, c.rep.LastHash))
	}
	if c.rep.Events > 0 && ev.Time.Before(c.last.Time) {
		c.warn(fmt.Sprintf("time goes backwards at seq %d: %s is %s earlier than seq %d (%s)",
			ev.Seq, ev.Time.UTC().Format(time.RFC3339Nano), c.last.Time.Sub(ev.Time), c.last.Seq, c.last.Time.UTC().Format(time.RFC3339Nano)))
	}
	c.last = ev
	c.rep.Events++
	c.rep.LastSeq, c.rep.LastHash = ev.Seq, ev.Hash
	if c.rep.ArchivedSeq > 0 && !c.vouched && ev.Type == TypeArchive {
		if r, ok := ArchiveRecordOf(ev); ok && r.Last == c.rep.ArchivedSeq && r.Head == c.rep.ArchivedHash {
			c.vouched, c.rep.ArchiveFile, c.rep.ArchiveFirst = true, r.File, r.First
		}
	}
	return ev, true
}

// warn records a warning (the chain stays OK).
func (c *chain) warn(w string) {
	c.rep.WarningCount++
	if len(c.rep.Warnings) < maxWarnings {
		c.rep.Warnings = append(c.rep.Warnings, w)
	}
}

func (c *chain) fail(seq uint64, problem string) bool {
	if c.rep.OK {
		c.rep.OK, c.rep.BadSeq, c.rep.Problem = false, seq, problem
	}
	return false
}

// VerifyOptions says what Verify checks. The zero value (or a nil
// *VerifyOptions) checks the whole store.
type VerifyOptions struct {
	// From and FromHash are a trusted anchor: the event at seq From had
	// hash FromHash when it was last verified (a head that `thinbot audit
	// verify` printed, kept elsewhere). Verify then checks only the events
	// after it, in time proportional to their number: every later event's
	// canonical form and hash, the gapless seq and prev links from the
	// anchor on, that each is in its session's index, and the recorded
	// chain head. It does not re-check the events up to the anchor, nor the
	// session summaries (a whole verification does): it is the daily check
	// between whole ones. An anchor the chain does not continue (a
	// rewritten history) is reported as a break at From+1. From 0 means
	// the whole store.
	From     uint64
	FromHash string
	// Progress, if not nil, is called with the seq checked so far every
	// thousand events or so (from Verify's goroutine).
	Progress func(seq uint64)
	// Workers is how many goroutines hash the events: 0 means GOMAXPROCS.
	// A daemon's background check uses 1, leaving the other cores to the
	// daemon's work.
	Workers int
}

// Verify checks the store in one read transaction: every event's
// canonical form and hash, the gapless seq and prev links, the chain head
// recorded in the meta bucket (a deleted tail), the per-session index (each
// event indexed, no entry pointing at nothing) and the session summaries;
// opt narrows the check to the events after an anchor (see VerifyOptions).
// It reports the first problem; the error is non-nil only if it could not
// check (closed DB, ctx done, unreadable file, an anchor hash that is not
// 64 lowercase hex digits) or, on a writable DB, could not sync the journal
// so that the reported head is durable. A damaged bbolt page that makes
// bbolt panic is reported as an error wrapping ErrCorrupt.
func (db *DB) Verify(ctx context.Context, opt *VerifyOptions) (rep Report, err error) {
	var o VerifyOptions
	if opt != nil {
		o = *opt
	}
	if o.From == 0 {
		o.FromHash = ZeroHash
	} else if !isHex64(o.FromHash) {
		return Report{}, fmt.Errorf("store: verify: anchor hash %q is not 64 lowercase hex digits", o.FromHash)
	}
	return db.verify(ctx, o.From, o.FromHash, o.Progress, o.Workers)
}

// verify checks the chain after (fromSeq, fromHash), hashing with workers
// goroutines (0: GOMAXPROCS).
func (db *DB) verify(ctx context.Context, fromSeq uint64, fromHash string, progress func(seq uint64), workers int) (rep Report, err error) {
	defer func() {
		if r := recover(); r != nil {
			rep, err = Report{}, fmt.Errorf("store: verify: %w: %v", ErrCorrupt, r)
		}
	}()
	c := newChain()
	c.rep.LastSeq = fromSeq
	if fromSeq > 0 {
		c.rep.LastHash = fromHash
	}
	err = db.view(func(tx *bolt.Tx) error {
		index := tx.Bucket(bucketIndex)
		sums := map[string]*sessionInfo{}
		cur := tx.Bucket(bucketEvents).Cursor()
		p := newParser(workers)
		defer p.close()
		k, v := cur.Seek(seqKey(fromSeq + 1))
		for {
			for k != nil && !p.full() {
				var keys, lines [][]byte
				for ; k != nil && len(lines) < verifyBatch; k, v = cur.Next() {
					keys, lines = append(keys, k), append(lines, v)
				}
				p.submit(keys, lines)
			}
			b := p.next()
			if b == nil {
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			for i, k := range b.keys {
				want := c.rep.LastSeq + 1
				if len(k) != 8 {
					c.fail(want, fmt.Sprintf("malformed key %x in the events bucket", k))
					return nil
				}
				if got := binary.BigEndian.Uint64(k); got != want && !(c.adoptsBase(b.evs[i], b.errs[i]) && b.evs[i].Seq == got) {
					if fromSeq > 0 && c.rep.Events == 0 && got > want && liveBase(tx) == got-1 {
						// Archived only if an archive event records
						// that start; else the prefix was removed.
						if file, ok := archiveRecordIn(tx, got-1, b.evs[i].Prev); ok {
							c.fail(want, fmt.Sprintf("events up to seq %d were archived in %s (the live chain starts at seq %d): give an anchor at or after seq %d, or verify without one", got-1, file, got, got-1))
						} else {
							c.fail(want, fmt.Sprintf("the chain starts at seq %d, after the anchor (seq %d), and no archive event in it records events up to seq %d: they were removed (or this store was restored from an archive that starts there)", got, fromSeq, got-1))
						}
						return nil
					}
					c.fail(want, fmt.Sprintf("event %d is missing (the next stored key is %d)", want, got))
					return nil
				}
				ev, ok := c.checkParsed(b.evs[i], b.errs[i])
				if !ok {
					return nil
				}
				if index.Get(indexKey(ev.Session, ev.Seq)) == nil {
					c.fail(ev.Seq, fmt.Sprintf("event %d is missing from session %q's index", ev.Seq, ev.Session))
					return nil
				}
				si := sums[ev.Session]
				if si == nil {
					si = &sessionInfo{}
					sums[ev.Session] = si
				}
				si.add(ev.Seq, ev.Time)
			}
			if progress != nil {
				progress(c.rep.LastSeq)
			}
		}
		if c.finish(); !c.rep.OK {
			return nil
		}
		meta := tx.Bucket(bucketMeta)
		headSeq, headHash := uint64(0), ZeroHash
		if v := meta.Get(keyLast); len(v) == 40 {
			headSeq, headHash = binary.BigEndian.Uint64(v), hex.EncodeToString(v[8:])
		}
		switch {
		case headSeq > c.rep.LastSeq:
			c.fail(c.rep.LastSeq+1, fmt.Sprintf("the chain ends at seq %d but its recorded head is seq %d: events %d-%d were deleted", c.rep.LastSeq, headSeq, c.rep.LastSeq+1, headSeq))
			return nil
		case headSeq < c.rep.LastSeq || headHash != c.rep.LastHash:
			c.fail(headSeq+1, fmt.Sprintf("the recorded chain head (seq %d, %.12s…) does not match the last event (seq %d, %.12s…)", headSeq, headHash, c.rep.LastSeq, c.rep.LastHash))
			return nil
		}
		if fromSeq > 0 {
			return nil
		}
		if problem, seq := checkIndex(tx, sums, c.rep.Events); problem != "" {
			c.fail(seq, problem)
			return nil
		}
		problem, seq := checkSessions(tx, sums)
		if problem != "" {
			c.fail(seq, problem)
		}
		c.rep.Sessions = len(sums)
		return nil
	})
	if err != nil {
		return Report{}, fmt.Errorf("store: verify: %w", err)
	}
	// Every event read is in the journal: sync it, so that the head
	// reported (the value to anchor) is durable.
	if !db.readOnly {
		if err := db.Sync(); err != nil {
			return Report{}, fmt.Errorf("store: verify: %w", err)
		}
	}
	return c.rep, nil
}

// archiveRecordIn returns the file of the archive event in tx that records
// events up to seq with head (ok false if none does).
func archiveRecordIn(tx *bolt.Tx, seq uint64, head string) (file string, ok bool) {
	prefix := indexKey(ArchiveSession, 0)[:len(ArchiveSession)+1]
	events := tx.Bucket(bucketEvents)
	c := tx.Bucket(bucketIndex).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, _ = c.Next() {
		ev, err := decodeLine(events.Get(k[len(prefix):]))
		if err != nil {
			continue
		}
		if r, isRec := ArchiveRecordOf(ev); isRec && r.Last == seq && r.Head == head {
			return r.File, true
		}
	}
	return "", false
}

// checkIndex looks for index entries that point at nothing. Every event was
// found in the index, so if the counts agree there are none: the index
// holds an entry per event and (format 2) a summary per session, which
// checkSessions then checks one for one.
func checkIndex(tx *bolt.Tx, sums map[string]*sessionInfo, events uint64) (string, uint64) {
	index, v1 := tx.Bucket(bucketIndex), summariesOf(tx).v1
	want := events
	if !v1 {
		want += uint64(len(sums))
	}
	if n := uint64(index.Stats().KeyN); n == want {
		return "", 0
	}
	evb := tx.Bucket(bucketEvents)
	c := index.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		i := bytes.IndexByte(k, 0)
		if i < 0 && !v1 && len(k) > 1 && k[len(k)-1] == 1 {
			continue // a summary: checkSessions checks them
		}
		if i < 0 || len(k) != i+9 {
			return fmt.Sprintf("malformed session index key %q", k), 0
		}
		session, seq := string(k[:i]), binary.BigEndian.Uint64(k[i+1:])
		v := evb.Get(seqKey(seq))
		if v == nil {
			return fmt.Sprintf("session %q's index points at event %d, which does not exist", session, seq), seq
		}
		if ev, err := decodeLine(v); err != nil || ev.Session != session {
			return fmt.Sprintf("session %q's index points at event %d of another session", session, seq), seq
		}
	}
	if !v1 {
		// Every entry is an event's: the extra keys are summaries.
		return "", 0
	}
	return "the session index has more entries than the chain has events", 0
}

// errStop ends a ForEach early.
var errStop = errors.New("stop")

// checkSessions compares the stored session summaries with the chain.
func checkSessions(tx *bolt.Tx, sums map[string]*sessionInfo) (string, uint64) {
	seen := 0
	var problem string
	var bad uint64
	stored := summariesOf(tx)
	err := stored.forEach(func(k, v []byte) error {
		si, ok := decodeSessionInfo(v)
		want := sums[string(k)]
		switch {
		case !ok:
			problem = fmt.Sprintf("session %q: damaged session record", k)
		case want == nil:
			problem, bad = fmt.Sprintf("session %q is recorded (%d events from seq %d) but has no events in the chain: they were deleted", k, si.events, si.firstSeq), si.firstSeq
		case si != *want:
			problem, bad = fmt.Sprintf("session %q: recorded summary (%d events, seq %d-%d) does not match the chain (%d events, seq %d-%d)",
				k, si.events, si.firstSeq, si.lastSeq, want.events, want.firstSeq, want.lastSeq), min(si.firstSeq, want.firstSeq)
		default:
			seen++
			return nil
		}
		return errStop
	})
	if err != nil && err != errStop {
		return err.Error(), 0
	}
	// The recent index is checked where it is used: when kept up to the head
	// (a stale one is rebuilt before use).
	if recent := tx.Bucket(bucketRecent); problem == "" && recent != nil && recentCurrent(tx) {
		n := 0
		_ = recent.ForEach(func(k, v []byte) error {
			n++
			want := sums[string(v)]
			if len(k) != 8 || want == nil || want.lastSeq != binary.BigEndian.Uint64(k) {
				problem, bad = fmt.Sprintf("the recent-sessions index lists %q at %x, which is not that session's last event", v, k), 0
				return errStop
			}
			return nil
		})
		if problem == "" && n != len(sums) {
			problem = fmt.Sprintf("the recent-sessions index lists %d sessions, the chain has %d: a session is hidden from the list", n, len(sums))
		}
	}
	if problem == "" && seen != len(sums) {
		for id, si := range sums {
			if stored.get([]byte(id)) == nil {
				return fmt.Sprintf("session %q has events but no session record", id), si.firstSeq
			}
		}
	}
	return problem, bad
}

// FileOptions says how VerifyFile reads a file. The zero value (or a nil
// *FileOptions) reads a JSONL export.
type FileOptions struct {
	// Archive says the file is an archive file (Archive writes them: gzip,
	// a header line, the events, a seal line), not a JSONL export.
	Archive bool
	// Each, if not nil, is called with every event found good, in order:
	// a caller that checks more than the chain (agentcore's checkpoints)
	// reads the file once for both.
	Each func(Event)
}

// FileReport is the result of VerifyFile.
type FileReport struct {
	// Report is the check of the file's events: when not OK, BadSeq and
	// Problem say where. An archive's events are checked from its seal's
	// (First-1, Prev).
	Report
	// Seal is an archive's seal as read (zero for a JSONL export, and for
	// an archive whose seal was not reached).
	Seal ArchiveRecord
	// FileSHA256 is the digest of an archive file's bytes ("" for a JSONL
	// export).
	FileSHA256 string
}

// VerifyFile checks a file read from r on its own, without the store: a
// JSONL export (audit.jsonl, or a file an auditor was sent), or an archive
// file when opt.Archive is set.
//
// Of a JSONL export it checks the canonical form and hash of every line,
// the gapless seq from 1 (or from the head of archived events that an
// archive event in it records) and the prev links. A last line without its
// newline is reported as a cut line. A cut-off tail of whole lines cannot
// be seen from the file alone: compare LastSeq and LastHash with the store
// (VerifyJournal does) or with an anchor kept elsewhere.
//
// Of an archive file it checks that the gzip stream is intact, that the
// header and the seal are well-formed and equal, every event's canonical
// form and hash, the links from the seal's Prev to its Head, the count and
// the digest. A problem with an event is reported by its seq (BadSeq); one
// with the file itself by the seq where it shows (the first event for the
// header, the last one past the events for the seal).
//
// The error is non-nil only if r fails or ctx is done.
func VerifyFile(ctx context.Context, r io.Reader, opt *FileOptions) (FileReport, error) {
	var o FileOptions
	if opt != nil {
		o = *opt
	}
	if o.Archive {
		return verifyArchive(ctx, r, o.Each)
	}
	rep, err := verifyJSONL(ctx, r, o.Each)
	return FileReport{Report: rep}, err
}

// verifyJSONL is VerifyFile of a JSONL export.
func verifyJSONL(ctx context.Context, r io.Reader, each func(Event)) (Report, error) {
	c := newChain()
	err := eachLine(ctx, r, func(line []byte, complete bool) bool {
		if !complete {
			return c.fail(c.rep.LastSeq+1, fmt.Sprintf("the last line (%d bytes) is cut: it has no newline", len(line)))
		}
		ev, ok := c.check(line)
		if ok && each != nil {
			each(ev)
		}
		return ok
	})
	if err != nil {
		return Report{}, fmt.Errorf("store: verify jsonl: %w", err)
	}
	c.finish()
	return c.rep, nil
}

// FileHashes returns the hashes of the events at seqs (at most up to seq
// last) in a file read from r, which VerifyFile, with the same opt, found
// good up to last: a second read of a file too long to keep every hash of
// in memory (an archive's gzip stream is decompressed again; opt.Each is
// not called). It reads each line's seq from its start and fully checks
// (canonical form, hash) only the lines it returns; it stops at the first
// line past last (or not starting with a seq) or once it has them all. A
// seq it did not find is absent from the map. A line at a wanted seq that
// no longer verifies (the file changed since it was verified) is an error,
// as is a failing r or a done ctx.
func FileHashes(ctx context.Context, r io.Reader, seqs []uint64, last uint64, opt *FileOptions) (map[uint64]string, error) {
	if opt != nil && opt.Archive {
		return archiveHashes(ctx, r, seqs, last)
	}
	return jsonlHashes(ctx, r, seqs, last)
}

// jsonlHashes is FileHashes of a JSONL export.
func jsonlHashes(ctx context.Context, r io.Reader, seqs []uint64, last uint64) (map[uint64]string, error) {
	want := map[uint64]bool{}
	for _, s := range seqs {
		if s <= last {
			want[s] = true
		}
	}
	found := make(map[uint64]string, len(want))
	if len(want) == 0 {
		return found, nil
	}
	var bad error
	err := eachLine(ctx, r, func(line []byte, complete bool) bool {
		seq, ok := lineSeq(line)
		switch {
		case !ok || seq > last || !complete:
			return false // past the lines VerifyFile found good
		case !want[seq]:
			return true
		}
		ev, err := parseLine(line)
		if err != nil || ev.Seq != seq {
			bad = fmt.Errorf("seq %d no longer verifies (%v): the file changed while it was read", seq, err)
			return false
		}
		found[seq] = ev.Hash
		return len(found) < len(want)
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return nil, fmt.Errorf("store: jsonl hashes: %w", err)
	}
	return found, nil
}

// lineSeq reads the seq at the start of a line in canonical form
// (`{"seq":N,`); ok is false for any other start.
func lineSeq(line []byte) (seq uint64, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(`{"seq":`))
	i := bytes.IndexByte(rest, ',')
	if !found || i < 1 || i > 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	return seq, err == nil
}

// eachLine calls fn for each line of r without its newline; complete is
// false for a last line with no newline. It stops when fn returns false.
func eachLine(ctx context.Context, r io.Reader, fn func(line []byte, complete bool) bool) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long := bytes.Clone(line)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		switch {
		case err == io.EOF:
			if len(line) > 0 {
				fn(line, false)
			}
			return nil
		case err != nil:
			return err
		}
		if !fn(line[:len(line)-1], true) {
			return nil
		}
	}
}

// VerifyJournal checks the JSONL journal (the export, audit.jsonl)
// against the store: the file's own chain, that each line is
// byte-identical to the stored event, and that the file is not behind the
// store. A truncated journal is reported with BadSeq the first missing seq
// and Beyond the number of events the store has past its end. On a
// writable DB, appends wait while it reads the file.
//
// storeRep is a verification of the store just made (Verify's report,
// from the same DB), or a zero Report: the journal's lines up to
// storeRep.LastSeq that are byte-identical to the stored events it found
// good are checked by that comparison alone, which is what makes them the
// verified chain (a line is its event's stored bytes, hash included); the
// lines after them, and any that differ, get the full check. A report
// that is not OK trusts nothing.
func (db *DB) VerifyJournal(ctx context.Context, storeRep Report) (Report, error) {
	var trusted uint64
	if storeRep.OK {
		trusted = storeRep.LastSeq
	}
	if db.auditPath == "" {
		return Report{}, errors.New("store: verify audit: the export is disabled")
	}
	if !db.readOnly {
		db.auditMu.Lock()
		defer db.auditMu.Unlock()
	}
	f, err := os.Open(db.auditPath)
	if errors.Is(err, fs.ErrNotExist) {
		last := db.lastSeq.Load()
		rep := Report{OK: last == 0, LastHash: ZeroHash, Beyond: last}
		if last > 0 {
			rep.BadSeq, rep.Problem = 1, fmt.Sprintf("%s does not exist; the store has %d events", db.auditPath, last)
		}
		return rep, nil
	}
	if err != nil {
		return Report{}, fmt.Errorf("store: verify audit: %w", err)
	}
	defer f.Close()
	c := newChain()
	var storeLast uint64
	var unindexed uint64 // lines past the store's end that continue the chain
	cut := 0             // bytes of a cut last line past the store's end
	err = db.view(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		if v := tx.Bucket(bucketMeta).Get(keyLast); len(v) == 40 {
			storeLast = binary.BigEndian.Uint64(v)
		}
		return eachLine(ctx, f, func(line []byte, complete bool) bool {
			want, prevHash := c.rep.LastSeq+1, c.rep.LastHash
			if !complete && want > storeLast {
				cut = len(line) // what a process that died mid-write leaves
				return false
			}
			if !complete {
				return c.fail(want, fmt.Sprintf("the last line (%d bytes) is cut: it has no newline", len(line)))
			}
			if n := len(line); want <= trusted && n > hashSuffixLen && bytes.Equal(events.Get(seqKey(want)), line) {
				c.rep.Events++
				c.rep.LastSeq, c.rep.LastHash = want, string(line[n-hashSuffixLen+9:n-2])
				return true
			}
			ev, ok := c.check(line)
			if !ok {
				return false
			}
			if ev.Seq != want { // the first event after archived ones
				want, prevHash = ev.Seq, ev.Prev
			}
			problem := ""
			stored := events.Get(seqKey(want))
			switch {
			case stored == nil && want > storeLast:
				// The journal took it and the process stopped before
				// bbolt indexed it: the next writable Open replays it.
				unindexed++
				return true
			case !bytes.Equal(stored, line):
				problem = fmt.Sprintf("line for seq %d differs from the stored event", want)
			default:
				return true
			}
			c.rep.Events--
			c.rep.LastSeq, c.rep.LastHash = want-1, prevHash
			return c.fail(want, problem)
		})
	})
	if err != nil {
		return Report{}, fmt.Errorf("store: verify audit: %w", err)
	}
	// The head reported (the value to anchor) must be durable.
	if !db.readOnly {
		if err := db.syncLocked(); err != nil {
			return Report{}, fmt.Errorf("store: verify audit: %w", err)
		}
	}
	if storeRep.OK && storeRep.ArchiveFile != "" && c.rep.OK && c.rep.LastSeq >= storeRep.LastSeq &&
		c.rep.ArchivedSeq == storeRep.ArchivedSeq && c.rep.ArchivedHash == storeRep.ArchivedHash {
		// The archive event that vouches for the base was among the lines
		// trusted for being the store's verified ones.
		c.vouched, c.rep.ArchiveFile, c.rep.ArchiveFirst = true, storeRep.ArchiveFile, storeRep.ArchiveFirst
	}
	c.finish()
	if c.rep.OK && unindexed > 0 {
		c.warn(fmt.Sprintf("the journal has %d events past the store's last (seq %d-%d) that continue the chain: a process stopped before the store indexed them, and its next writable open replays them",
			unindexed, storeLast+1, c.rep.LastSeq))
	}
	if c.rep.OK && cut > 0 {
		c.warn(fmt.Sprintf("the journal ends with a cut line (%d bytes) past the store's last event: a process stopped while writing it, and the next writable open removes it", cut))
	}
	if c.rep.OK && c.rep.LastSeq < storeLast {
		c.rep.OK, c.rep.BadSeq = false, c.rep.LastSeq+1
		c.rep.Beyond = storeLast - c.rep.LastSeq
		c.rep.Problem = fmt.Sprintf("the export ends at seq %d; the store has %d more events (seq %d-%d)", c.rep.LastSeq, c.rep.Beyond, c.rep.LastSeq+1, storeLast)
	} else if storeLast > c.rep.LastSeq {
		c.rep.Beyond = storeLast - c.rep.LastSeq
	}
	return c.rep, nil
}
