package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrClosed is returned by Append, Wait and the readers when the DB has been
// closed.
var ErrClosed = errors.New("store: closed")

// ErrLocked is returned (wrapped, with the file name) by Open when another
// process holds the database file's lock for longer than Options.Timeout.
var ErrLocked = errors.New("database file is locked")

// ErrCorrupt is returned (wrapped) by Open when the file is not a readable
// thinbot store: not a bbolt file, a damaged one, or a bbolt file of some other
// program.
var ErrCorrupt = errors.New("not a valid thinbot store")

// ErrReadOnly is returned by Append and RebuildAudit on a DB opened with
// Options.ReadOnly.
var ErrReadOnly = errors.New("store: opened read-only")

// ErrInvalid is returned (wrapped, with the reason) by Append when an event
// is not appendable: empty session or type, bad UTF-8, payload not JSON.
var ErrInvalid = errors.New("invalid event")

// ErrAuditMismatch is returned (wrapped) by Open when the existing JSONL audit
// export does not match the store: it was truncated, edited or replaced. Open
// repairs crash damage (a cut last line, missing lines) on its own; it never
// silently overwrites evidence of anything else. Open with
// Options.RebuildAudit set to rewrite the export (the old file is kept aside).
var ErrAuditMismatch = errors.New("audit export does not match the store")

// DefaultPayloadCap is the payload size above which Append stores the capped
// marker instead of the payload.
const DefaultPayloadCap = 256 << 10

// formatVersion is stored in the meta bucket; Open refuses other values
// than it and formatV1 (see summary.go), and migrates formatV1 stores it
// opens writable.
const formatVersion = "thinbot-events-2"

// maxBatchEvents bounds how many events one group commit collects.
const maxBatchEvents = 4096

var (
	bucketEvents = []byte("events")
	// bucketIndex holds each session's event seqs (indexKey) and its
	// summary (summaryKey).
	bucketIndex = []byte("index")
	// bucketRecent orders the sessions by activity: key the 8-byte seq of
	// a session's last event, value its id. Derived from the session
	// summaries (Verify checks that it agrees); stores of an older thinbot
	// get it at their first writable open.
	bucketRecent = []byte("recent")
	bucketMeta   = []byte("meta")
	keyFormat    = []byte("format")
	keyLast      = []byte("last")
	keyAudit     = []byte("audit")
	// keyRecentSeq is the seq up to which bucketRecent is kept: an older
	// thinbot that wrote to the store did not keep it, and then it is
	// rebuilt at the next writable open and not used until then.
	keyRecentSeq = []byte("recentseq")
)

// Options configures Open. A nil *Options or a zero Options consists entirely
// of defaults.
type Options struct {
	// Timeout is how long Open waits for the file lock; 0 means 1s. A lock
	// still held after it gives an error wrapping ErrLocked that names the
	// file.
	Timeout time.Duration
	// PayloadCap is the largest stored payload in bytes; 0 means
	// DefaultPayloadCap. Values below 1024 are raised to 1024.
	PayloadCap int
	// AuditPath is the JSONL export; "" means audit.jsonl next to the
	// database file, "-" disables the export.
	AuditPath string
	// Now is the clock for event times; nil means time.Now.
	Now func() time.Time
	// Logger receives warnings (audit export write failures, rebuilds); nil
	// discards them.
	Logger *slog.Logger
	// ReadOnly opens the file with a shared lock for reading and verifying:
	// Append fails with ErrReadOnly, the export is read but never written.
	ReadOnly bool
	// RebuildAudit makes Open rewrite the JSONL export from the store instead
	// of reconciling it; a differing old file is kept as PATH.replaced-TIME.
	RebuildAudit bool
	// Replicate, if set, is how a batch of Appends commits: it gets the
	// batch's stored lines, sequenced on the chain head, and returns nil
	// once they are committed and applied to this store through
	// ApplyLines (a replicated log does both, store/replica), or an error
	// if they are not committed (ErrStale: formed on an old head, and then
	// formed again). nil means the store commits alone.
	Replicate func(lines [][]byte) error

	// durable does the store's syncs, renames and removals; tests set it
	// to observe and fail them (the zero value does each directly).
	durable durable
}

// DB is an open event store. Its methods may be called concurrently. Close
// it when done; it owns one committer goroutine and the file lock.
type DB struct {
	path       string
	bolt       *bolt.DB
	log        *slog.Logger
	now        func() time.Time
	payloadCap int
	readOnly   bool

	lastSeq atomic.Uint64
	commits atomic.Uint64 // transactions committed (see Commits)
	syncs   atomic.Uint64 // durable commits (see Syncs)
	// lastHash is the chain head's hash, guarded by auditMu.
	lastHash string
	// replicate, if set, commits a batch through a replicated log
	// (Options.Replicate; replicate.go).
	replicate func(lines [][]byte) error

	reqs     chan *request
	loopDone chan struct{}

	closeMu   sync.RWMutex
	closed    bool
	closing   chan struct{} // closed first by Close
	closeOnce sync.Once

	notifyMu sync.Mutex
	notify   chan struct{}

	// auditMu guards the export state and is held by the committer for a
	// whole batch, so VerifyJournal and RebuildAudit see file == store.
	auditMu     sync.Mutex
	auditPath   string
	auditFile   *os.File
	auditOff    int64
	auditSeq    uint64
	auditBroken bool
	// auditIdent is the journal file as it was opened: the file at
	// auditPath must stay this one (journalInPlace).
	auditIdent os.FileInfo
	// bootID identifies the running kernel ("" where unknown: then any
	// stop without Close is treated as a machine restart).
	bootID string
	// state is the locked state file of a writable store with a journal
	// (see journal.go); failed, set by the committer, makes every later
	// Append fail once the journal holds events bbolt could not index.
	state  *os.File
	failed error
	fs     durable // the syncs, renames and removals (Options.durable)
	// syncedSeq and syncedOff are how far the journal is known to be on
	// disk (AppendBuffered writes without a sync). Guarded by auditMu.
	syncedSeq uint64
	syncedOff int64
	// durableSeq is syncedSeq, readable without auditMu (DurableSeq).
	durableSeq atomic.Uint64
	// indexer keeps the state index (UseIndex). Guarded by auditMu.
	indexer *Indexer
	// vouch is the stored line of the archive event that vouches for an
	// empty store's first lines (ApplyLinesAfter) until the store holds
	// it, vouchSeq its seq (0: none). Guarded by auditMu.
	vouch    []byte
	vouchSeq uint64
	// archiving serialises ArchiveReplicated; pendingMu guards the
	// pending archives' file (ApplyArchive).
	archiving sync.Mutex
	pendingMu sync.Mutex
}

type request struct {
	ctx  context.Context
	evs  []Event
	sync bool // Append; false for AppendBuffered
	err  error
	done chan struct{}
}

// Open opens or creates the store at path (directories 0700, files 0600),
// reconciles the JSONL export with it, and starts the committer. It fails
// with an error wrapping ErrLocked when another process holds the file, with
// ErrCorrupt when the file is not a thinbot store, and with ErrAuditMismatch
// when the export was tampered with.
//
// A writable Open also makes the cut of the archives a replicated store
// has applied (ApplyArchive) and not cut yet: it builds the new files,
// closes the store and opens it again, which puts them in place. A cut it
// cannot make is logged (Options.Logger); the store then opens with its
// events, and the next Open tries again.
func Open(path string, opts *Options) (*DB, error) {
	db, err := open(path, opts)
	if err != nil || db.readOnly || db.auditPath == "" {
		return db, err
	}
	cut, err := db.cutPending(context.Background(), true)
	if err != nil {
		db.log.Warn("store: the cut of an archive applied here is not made; the store keeps the archived events until it is", "err", err)
	}
	if !cut {
		return db, nil
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	if db, err = open(path, opts); err != nil {
		return nil, err
	}
	if _, err := db.cutPending(context.Background(), false); err != nil {
		db.log.Warn("store: the cut of an archive applied here is not made; the store keeps the archived events until it is", "err", err)
	} else {
		base, _, _ := db.base()
		db.log.Info("store: the archived events are out of the store and its journal", "live_from", base+1,
			"db_bytes", fileSize(db.path), "journal_bytes", fileSize(db.auditPath))
	}
	return db, nil
}

func open(path string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.PayloadCap == 0 {
		o.PayloadCap = DefaultPayloadCap
	}
	o.PayloadCap = max(o.PayloadCap, 1024)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch o.AuditPath {
	case "":
		o.AuditPath = filepath.Join(filepath.Dir(path), "audit.jsonl")
	case "-":
		o.AuditPath = ""
	}
	boot := bootID()
	if o.ReadOnly {
		if b, err := os.ReadFile(statePath(path)); err == nil && machineRestarted(string(b), boot) {
			return nil, fmt.Errorf("store: open %s: %w: the machine restarted while thinbot had it open; open it once writable (thinbot serve, or thinbot audit rebuild) to rebuild it from the audit journal", path, ErrCorrupt)
		}
		// An archive's unfinished cut: read the new files it put beside.
		path, o.AuditPath = pendingCut(path, o.AuditPath)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("store: open %s: %w", path, err)
		}
	} else {
		for _, p := range []string{path, o.AuditPath} {
			if p == "" {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return nil, fmt.Errorf("store: create directory: %w", err)
			}
		}
	}
	var state *os.File
	if !o.ReadOnly && o.AuditPath != "" {
		f, st, err := lockState(path, o.Timeout)
		if err != nil {
			return nil, err
		}
		// An archive's cut whose new files are on disk is finished first.
		if err := finishArchive(o.durable, path, o.AuditPath, nil); err != nil {
			f.Close()
			return nil, err
		}
		if machineRestarted(st, boot) {
			err = rebuildStore(path, o.AuditPath, boot, o)
		}
		if err == nil {
			// From here bbolt is written without syncs: a restart of the
			// machine before Close means a rebuild.
			err = writeState(f, stateOpen+boot+"\n")
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		state = f
	}
	bdb, err := openBolt(path, o)
	if err != nil {
		if state != nil {
			state.Close()
		}
		return nil, err
	}
	// With a journal, its sync is the commit; bbolt's own two would be
	// two more (see journal.go).
	bdb.NoSync = state != nil
	// With the large initial mapping bbolt would grow the file 16 MiB at a
	// time; 1 MiB keeps its size close to its contents.
	bdb.AllocSize = 1 << 20
	db := &DB{
		path: path, bolt: bdb, log: o.Logger, now: o.Now, payloadCap: o.PayloadCap,
		readOnly: o.ReadOnly, auditPath: o.AuditPath, bootID: boot, state: state, fs: o.durable, replicate: o.Replicate,
		closing: make(chan struct{}), notify: make(chan struct{}),
	}
	fail := func(err error) (*DB, error) {
		bdb.Close()
		if state != nil {
			state.Close()
		}
		return nil, err
	}
	if err := db.init(); err != nil {
		return fail(err)
	}
	if !o.ReadOnly {
		if err := db.addRecent(); err != nil {
			return fail(err)
		}
	}
	if !o.ReadOnly && db.auditPath != "" {
		if o.RebuildAudit {
			err = db.rebuildAudit(context.Background())
		} else {
			err = db.openAudit()
		}
		if err != nil {
			return fail(err)
		}
	}
	if !o.ReadOnly {
		db.reqs = make(chan *request, 256)
		db.loopDone = make(chan struct{})
		go db.loop()
	}
	return db, nil
}

// openBolt opens the bbolt file, turning its errors (and panics on damaged
// files) into ErrLocked and ErrCorrupt.
func openBolt(path string, o Options) (bdb *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			bdb, err = nil, fmt.Errorf("store: open %s: %w: %v", path, ErrCorrupt, r)
		}
	}()
	bdb, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:  o.Timeout,
		ReadOnly: o.ReadOnly,
		// Every commit writes the freelist: the array keeps it sorted
		// and merges each commit's freed pages in (O(n)), where the map
		// sorts all of it again (O(n log n)): about 5% less CPU per
		// commit (issue #20, BenchmarkCommitSerial). An append-only store
		// frees only the pages its commits copy, so the list stays short,
		// and the array's linear search for a run of pages (an event
		// longer than a page) stays cheap.
		FreelistType: bolt.FreelistArrayType,
		// Address space only: readers do not wait for a remap while the
		// file grows to this size.
		InitialMmapSize: initialMmap(o.ReadOnly),
	})
	switch {
	case err == nil:
		return bdb, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("store: %s is in use by another thinbot process? (%w after %v)", path, ErrLocked, o.Timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrInvalidMapping):
		return nil, fmt.Errorf("store: open %s: %w (%v)", path, ErrCorrupt, err)
	default:
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
}

// initialMmap is bbolt's initial mapping: 256 MiB for a writable store
// (about a million events), the file's own size for a read-only one.
func initialMmap(readOnly bool) int {
	if readOnly {
		return 0
	}
	return 256 << 20
}

// init creates the buckets of a new file, checks the format of an existing
// one and loads the chain head.
func (db *DB) init() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: open %s: %w: %v", db.path, ErrCorrupt, r)
		}
	}()
	v1 := false
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("store: open %s: %w (no %q format marker)", db.path, ErrCorrupt, formatVersion)
		}
		buckets := [][]byte{bucketEvents, bucketIndex}
		switch string(meta.Get(keyFormat)) {
		case formatVersion:
		case formatV1:
			v1, buckets = true, append(buckets, bucketSessions)
		default:
			return fmt.Errorf("store: open %s: %w (no %q format marker)", db.path, ErrCorrupt, formatVersion)
		}
		for _, b := range buckets {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("store: open %s: %w (bucket %s missing)", db.path, ErrCorrupt, b)
			}
		}
		db.lastHash = ZeroHash
		if v := meta.Get(keyLast); v != nil {
			if len(v) != 8+32 {
				return fmt.Errorf("store: open %s: %w (bad chain head)", db.path, ErrCorrupt)
			}
			db.lastSeq.Store(binary.BigEndian.Uint64(v))
			db.lastHash = hex.EncodeToString(v[8:])
		}
		return nil
	}
	// An existing store is only read (no write transaction, so a full disk
	// does not stop it from opening); a new file gets its buckets.
	err = db.bolt.View(check)
	switch {
	case err == nil && v1 && !db.readOnly:
		return db.migrate()
	case err == nil || db.readOnly:
		return err
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if err := createBuckets(tx); err != nil {
			return err
		}
		return check(tx)
	})
}

// migrate turns a store an older thinbot wrote (formatV1) into the current
// format, in one transaction, and logs it.
func (db *DB) migrate() error {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) (err error) {
		n, err = migrateSummaries(tx)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: open %s: move the session summaries into the index (format %s to %s): %w", db.path, formatV1, formatVersion, err)
	}
	db.log.Info("store: moved the session summaries into the index (a store an older thinbot wrote)", "path", db.path, "sessions", n, "format", formatVersion)
	return nil
}

// addRecent builds the recent bucket of a store written by an older
// thinbot, from its session summaries (logged): when it is missing, or was
// not kept for the last events (an older thinbot wrote them).
func (db *DB) addRecent() error {
	stale := false
	if err := db.bolt.View(func(tx *bolt.Tx) error { stale = !recentCurrent(tx); return nil }); err != nil || !stale {
		return err
	}
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketRecent) != nil {
			if err := tx.DeleteBucket(bucketRecent); err != nil {
				return err
			}
		}
		recent, err := tx.CreateBucket(bucketRecent)
		if err != nil {
			return err
		}
		err = summariesOf(tx).forEach(func(k, v []byte) error {
			si, ok := decodeSessionInfo(v)
			if !ok {
				return fmt.Errorf("session %q: damaged session record", k)
			}
			n++
			return recent.Put(seqKey(si.lastSeq), bytes.Clone(k))
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyRecentSeq, seqKey(db.lastSeq.Load()))
	})
	if err != nil {
		return fmt.Errorf("store: open %s: build the recent-sessions index: %w", db.path, err)
	}
	db.log.Info("store: built the recent-sessions index (a store an older thinbot wrote)", "path", db.path, "sessions", n)
	return nil
}

// recentCurrent reports whether bucketRecent is kept up to the chain's head.
func recentCurrent(tx *bolt.Tx) bool {
	meta := tx.Bucket(bucketMeta)
	var head uint64
	if v := meta.Get(keyLast); len(v) == 40 {
		head = binary.BigEndian.Uint64(v)
	}
	v := meta.Get(keyRecentSeq)
	if v == nil && head == 0 {
		return tx.Bucket(bucketRecent) != nil // a new store
	}
	return tx.Bucket(bucketRecent) != nil && len(v) == 8 && binary.BigEndian.Uint64(v) == head
}

// createBuckets sets up an empty file; it leaves any other alone.
func createBuckets(tx *bolt.Tx) error {
	empty := true
	_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
	if !empty {
		return nil
	}
	for _, b := range [][]byte{bucketEvents, bucketIndex, bucketMeta, bucketRecent} {
		if _, err := tx.CreateBucket(b); err != nil {
			return fmt.Errorf("store: create bucket: %w", err)
		}
	}
	if err := tx.Bucket(bucketMeta).Put(keyFormat, []byte(formatVersion)); err != nil {
		return fmt.Errorf("store: init: %w", err)
	}
	return nil
}

// Closing returns a channel that is closed when Close begins: long readers
// (a background verification) stop on it, so that Close does not wait for
// them.
func (db *DB) Closing() <-chan struct{} { return db.closing }

// Path returns the database file's path.
func (db *DB) Path() string { return db.path }

// AuditPath returns the JSONL export's path, or "" when the export is
// disabled.
func (db *DB) AuditPath() string { return db.auditPath }

// Syncs returns how many durable commits the DB has made since Open: syncs
// of the journal, or without one, bbolt's synced transactions. A batch of
// AppendBuffered calls alone makes none.
func (db *DB) Syncs() uint64 { return db.syncs.Load() }

// Commits returns how many batches the DB has committed since Open (one
// bbolt transaction each, synced or not).
func (db *DB) Commits() uint64 { return db.commits.Load() }

// LastSeq returns the sequence number of the last committed event (0 for an
// empty store).
func (db *DB) LastSeq() uint64 { return db.lastSeq.Load() }

// DurableSeq returns the sequence number of the last event known to be
// durable: LastSeq less the events AppendBuffered added since the last
// sync. A machine restart may lose (and the chain then reuse) the seqs
// after it, so anchor the chain head at this seq, not at LastSeq.
func (db *DB) DurableSeq() uint64 {
	if db.readOnly || db.auditPath == "" {
		return db.lastSeq.Load()
	}
	return min(db.durableSeq.Load(), db.lastSeq.Load())
}

// Close stops the committer after it has committed every Append already
// accepted, then closes the export and the database file. Appends that
// arrive later fail with ErrClosed. Close is idempotent.
func (db *DB) Close() error {
	// First release appenders waiting for room in the queue (they hold
	// closeMu's read lock, and the committer may wait for VerifyJournal,
	// which needs it too).
	db.closeOnce.Do(func() { close(db.closing) })
	db.closeMu.Lock()
	if db.closed {
		db.closeMu.Unlock()
		return nil
	}
	db.closed = true
	db.closeMu.Unlock()
	if db.reqs != nil {
		close(db.reqs)
		<-db.loopDone
	}
	var errs []error
	journalSynced := true
	db.auditMu.Lock()
	if db.auditFile != nil {
		if db.auditBroken {
			db.cutJournal()
		}
		if db.syncedOff < db.auditOff {
			err := db.fs.fdatasync(db.auditFile, db.auditPath)
			if err == nil {
				db.setSynced(db.auditSeq, db.auditOff)
			}
			journalSynced = err == nil
			errs = append(errs, err)
		}
		errs = append(errs, db.auditFile.Close())
		db.auditFile = nil
	}
	db.auditMu.Unlock()
	if db.state != nil && !db.readOnly {
		// bbolt was written without syncs: sync it, then say so, if the
		// journal is synced too. A store left "open" is checked against
		// the journal by the next Open.
		err := db.bolt.Sync()
		if err == nil && db.failed == nil && journalSynced {
			err = writeState(db.state, stateClosed)
		}
		errs = append(errs, err)
	}
	errs = append(errs, db.bolt.Close())
	if db.state != nil {
		errs = append(errs, db.state.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Append commits evs, in order and as consecutive sequence numbers, and
// returns them with Seq, Time, Prev, Hash and the stored Payload filled in.
// It returns only after the events are durably committed (in the journal,
// fdatasynced) and indexed. Concurrent callers are batched into shared
// commits; the chain order is the commit order.
//
// Validation errors wrap ErrInvalid and append nothing. If ctx is done
// before the committer takes the events, nothing is appended and ctx.Err()
// is returned; once taken, Append waits for the commit whatever ctx says, so
// a nil error always means "committed" and a non-nil one "not committed",
// with one exception: an error saying that the journal has events the store
// could not index (bbolt failed, and so did cutting the journal back) is in
// doubt, and the next Open replays them (see the package doc).
func (db *DB) Append(ctx context.Context, evs ...Event) ([]Event, error) {
	return db.append(ctx, true, evs)
}

// AppendBuffered is Append without waiting for the disk: it returns once
// the events are in the chain (sequenced, indexed, readable, written to the
// journal) but before they are synced. A crash of the process keeps them
// (written bytes are in the page cache); the next Append's sync, or Close,
// makes them durable; a crash of the machine before that loses them, and
// with them everything committed after them, so the chain never holds an
// event without those before it. Without a journal it is Append.
func (db *DB) AppendBuffered(ctx context.Context, evs ...Event) ([]Event, error) {
	return db.append(ctx, false, evs)
}

func (db *DB) append(ctx context.Context, sync bool, evs []Event) ([]Event, error) {
	if db.readOnly {
		return nil, ErrReadOnly
	}
	if len(evs) == 0 {
		return nil, nil
	}
	own := make([]Event, len(evs))
	for i, ev := range evs {
		if err := validate(&ev, db.payloadCap); err != nil {
			return nil, fmt.Errorf("store: append: event %d: %w: %v", i, ErrInvalid, err)
		}
		own[i] = ev
	}
	r := &request{ctx: ctx, evs: own, sync: sync, done: make(chan struct{})}
	db.closeMu.RLock()
	if db.closed {
		db.closeMu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case db.reqs <- r:
	case <-ctx.Done():
		db.closeMu.RUnlock()
		return nil, ctx.Err()
	case <-db.closing:
		db.closeMu.RUnlock()
		return nil, ErrClosed
	}
	db.closeMu.RUnlock()
	<-r.done
	if r.err != nil {
		return nil, r.err
	}
	return r.evs, nil
}

// loop is the committer: it collects waiting requests into one batch and
// commits it, until Close closes reqs.
func (db *DB) loop() {
	defer close(db.loopDone)
	batch := make([]*request, 0, 64)
	for r := range db.reqs {
		batch = append(batch[:0], r)
		n := len(r.evs)
	collect:
		for n < maxBatchEvents {
			select {
			case r2, ok := <-db.reqs:
				if !ok {
					break collect
				}
				batch = append(batch, r2)
				n += len(r2.evs)
			default:
				break collect
			}
		}
		db.commit(batch)
	}
}

// commit writes one batch in one transaction, extends the export, and
// answers each caller.
func (db *DB) commit(batch []*request) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	if db.replicate != nil {
		db.commitReplicated(live)
		return
	}
	db.auditMu.Lock()
	defer db.auditMu.Unlock()

	if db.failed != nil {
		db.answer(live, db.failed)
		return
	}
	evs, lines, sync := db.sequence(live)
	db.answer(live, db.writeBatch(evs, lines, sync))
}

// sequence gives the events of live their places after the chain head (seq,
// time, prev, hash) and returns them with their stored lines, and whether
// one of the callers asked for a sync. The caller holds auditMu.
func (db *DB) sequence(live []*request) (evs []*Event, lines [][]byte, sync bool) {
	now := db.now().UTC().Round(0)
	seq, prev := db.lastSeq.Load(), db.lastHash
	for _, r := range live {
		sync = sync || r.sync
		for i := range r.evs {
			ev := &r.evs[i]
			seq++
			ev.Seq, ev.Time, ev.Prev = seq, now, prev
			line, h := encodeLine(ev)
			ev.Hash, prev = h, h
			evs, lines = append(evs, ev), append(lines, line)
		}
	}
	return evs, lines, sync
}

// writeBatch commits evs, whose stored lines are lines and which continue
// the chain head, to the journal and bbolt, and moves the head. The
// caller holds auditMu. Its error means "not committed", except the one
// that also sets db.failed (see commit).
func (db *DB) writeBatch(evs []*Event, lines [][]byte, sync bool) error {
	first, seq, prev := evs[0].Seq, evs[len(evs)-1].Seq, evs[len(evs)-1].Hash
	journal := db.auditFile != nil
	off0, seq0 := db.auditOff, db.auditSeq
	if journal {
		// The journal first: once it is on disk the events are committed
		// (the store is rebuilt from it if need be); bbolt only indexes.
		if err := db.appendJournal(first, lines, sync); err != nil {
			return fmt.Errorf("store: append: %w", err)
		}
	}
	var mark []byte
	if journal {
		mark = db.journalMark()
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		if err := putEvents(tx, evs, lines, mark); err != nil {
			return err
		}
		return applyIndex(tx, db.indexer, evs)
	})
	if err != nil {
		err = fmt.Errorf("store: append: commit: %w", err)
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			err = ErrClosed
		}
		if journal {
			// bbolt rolled back: take the batch out of the journal too, so
			// that it is not committed. If that fails, the journal holds
			// events bbolt lacks, and nothing may commit after them until a
			// restart replays them.
			if terr := db.uncommitJournal(off0, seq0); terr != nil {
				db.failed = fmt.Errorf("%w; the audit journal has events up to seq %d that the store could not index (%v): restart thinbot to replay them", err, seq, terr)
				err = db.failed
			}
		}
		return err
	}
	db.lastSeq.Store(seq)
	db.lastHash = prev
	db.commits.Add(1)
	if !journal {
		db.syncs.Add(1) // bbolt's own
	}
	db.notifyMu.Lock()
	close(db.notify)
	db.notify = make(chan struct{})
	db.notifyMu.Unlock()
	return nil
}

// answer ends the callers' waits with err (nil: committed).
func (db *DB) answer(live []*request, err error) {
	for _, r := range live {
		r.err = err
		close(r.done)
	}
}

// putEvents indexes events (their stored lines) in tx: the events, the
// per-session index and summaries, the chain head and the journal mark.
func putEvents(tx *bolt.Tx, evs []*Event, lines [][]byte, mark []byte) error {
	events, index, meta := tx.Bucket(bucketEvents), tx.Bucket(bucketIndex), tx.Bucket(bucketMeta)
	events.FillPercent = 1.0
	touched := map[string]*sessionInfo{}
	wasLast := map[string]uint64{} // each touched session's last seq before
	for i, ev := range evs {
		if err := events.Put(seqKey(ev.Seq), lines[i]); err != nil {
			return err
		}
		if err := index.Put(indexKey(ev.Session, ev.Seq), nil); err != nil {
			return err
		}
		si := touched[ev.Session]
		if si == nil {
			si = &sessionInfo{}
			if v := index.Get(summaryKey(ev.Session)); v != nil {
				var ok bool
				if *si, ok = decodeSessionInfo(v); !ok {
					return fmt.Errorf("session %q: damaged session record", ev.Session)
				}
				wasLast[ev.Session] = si.lastSeq
			}
			touched[ev.Session] = si
		}
		si.add(ev.Seq, ev.Time)
	}
	recent := tx.Bucket(bucketRecent)
	if recent != nil && len(evs) > 0 && !recentCurrent(tx) {
		recent = nil // stale: rebuilt at the next writable open
	}
	for id, si := range touched {
		if err := index.Put(summaryKey(id), si.encode()); err != nil {
			return err
		}
		if recent == nil {
			continue
		}
		if old, ok := wasLast[id]; ok {
			if err := recent.Delete(seqKey(old)); err != nil {
				return err
			}
		}
		if err := recent.Put(seqKey(si.lastSeq), []byte(id)); err != nil {
			return err
		}
	}
	if len(evs) > 0 {
		last := evs[len(evs)-1]
		head := make([]byte, 8, 8+32)
		binary.BigEndian.PutUint64(head, last.Seq)
		head, _ = hex.AppendDecode(head, []byte(last.Hash))
		if err := meta.Put(keyLast, head); err != nil {
			return err
		}
		if recent != nil {
			if err := meta.Put(keyRecentSeq, seqKey(last.Seq)); err != nil {
				return err
			}
		}
	}
	if mark == nil {
		return nil
	}
	return meta.Put(keyAudit, mark)
}

// Wait blocks until LastSeq() > afterSeq, ctx is done (returns ctx.Err()) or
// the DB is closed (returns ErrClosed). On a read-only DB nothing commits, so
// it returns only for an already-satisfied afterSeq, ctx or Close.
func (db *DB) Wait(ctx context.Context, afterSeq uint64) error {
	for {
		db.notifyMu.Lock()
		ch := db.notify
		db.notifyMu.Unlock()
		if db.lastSeq.Load() > afterSeq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-db.closing:
			return ErrClosed
		}
	}
}

func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

// indexKey is session + 0x00 + 8-byte big-endian seq; session ids hold no NUL,
// so one session's keys are contiguous and in seq order.
func indexKey(session string, seq uint64) []byte {
	k := make([]byte, 0, len(session)+9)
	k = append(k, session...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// sessionInfo is the stored per-session summary: five big-endian uint64s.
type sessionInfo struct {
	events, firstSeq, lastSeq uint64
	first, last               int64 // unix nanoseconds
}

func (si *sessionInfo) add(seq uint64, t time.Time) {
	if si.events == 0 {
		si.firstSeq, si.first = seq, t.UnixNano()
	}
	si.events++
	si.lastSeq, si.last = seq, t.UnixNano()
}

func (si *sessionInfo) encode() []byte {
	b := make([]byte, 0, 40)
	for _, v := range []uint64{si.events, si.firstSeq, si.lastSeq, uint64(si.first), uint64(si.last)} {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func decodeSessionInfo(b []byte) (sessionInfo, bool) {
	if len(b) != 40 {
		return sessionInfo{}, false
	}
	u := func(i int) uint64 { return binary.BigEndian.Uint64(b[i*8:]) }
	return sessionInfo{events: u(0), firstSeq: u(1), lastSeq: u(2), first: int64(u(3)), last: int64(u(4))}, true
}

// view runs fn in a read transaction, mapping a closed database to ErrClosed.
func (db *DB) view(fn func(tx *bolt.Tx) error) error {
	db.closeMu.RLock()
	defer db.closeMu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	return db.bolt.View(fn)
}
