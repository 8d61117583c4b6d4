// Package store is thinbot's event log: one global, append-only,
// hash-chained sequence of events, written to a JSONL journal (the audit
// export, audit.jsonl) and indexed in one bbolt file (events, a per-session
// index, session summaries).
//
// # Events and the chain
//
// Every event gets a global sequence number (gapless, from 1), a time, and
// the hash of the event before it (Prev; 64 ASCII zeros for seq 1). Its Hash
// is the SHA-256 of its canonical body, which includes Prev, so changing,
// removing, swapping or inserting any event breaks every link after it.
//
// Append and AppendBuffered are the only writers (with ApplyLines, see
// Replication). Concurrent calls are group-committed: one committer
// goroutine, owned by the DB and stopped by Close, collects the calls
// waiting at that moment into one batch. It
// writes the batch's lines to the journal and, if the batch has an Append,
// fdatasyncs it (the commit point: one sync per batch), then indexes them
// in one bbolt transaction without a sync of its own. The chain order is
// the commit order, one call's events are consecutive, and each caller
// returns once its events are readable; an Append's (and everything before
// them) are then also durable. An AppendBuffered's events are durable only
// from the next sync (an Append, Sync or Close): until then readers (All,
// Wait, the web console, thinbot audit tail on the journal) see events
// that a machine restart may lose, after which their seqs are reused by
// other events. DurableSeq says how far the chain is durable. Without an
// export (Options.AuditPath "-") bbolt commits durably itself (two
// fdatasyncs, data then meta page) and AppendBuffered is Append.
//
// # Replication
//
// With Options.Replicate (a cluster: store/replica) the committer forms
// each batch on the chain head as above and hands its lines to the
// replicated log instead of writing them; the log applies every committed
// batch, on every node and this one too, through ApplyLines, which writes
// it as a commit writes an Append's (journal, sync, bbolt, the state
// index), after checking that lines it already holds are byte-identical
// (else a DivergedError names the first seq that is not) and that the rest
// continue the head. A batch formed on a head that moved meanwhile is
// refused by the log (ErrStale) and formed again. The store knows nothing
// of raft.
//
// # Canonical encoding
//
// An event is stored (in bbolt and, followed by "\n", in the JSONL export)
// as exactly this line of UTF-8 JSON, with no whitespace between tokens:
//
//	{"seq":S,"time":"T","session":"SID","branch":B,"type":"TYPE","actor":"ACTOR","payload":P,"prev":"PREV","hash":"HASH"}
//
// where:
//
//   - S and B are base-10 integers without sign, leading zeros or exponent.
//   - T is the commit time in UTC in Go's time.RFC3339Nano layout:
//     2006-01-02T15:04:05.999999999Z (trailing zeros of the fraction, and
//     an all-zero fraction with its dot, are dropped).
//   - Strings are encoded as Python's json.dumps(s, ensure_ascii=False)
//     does: \" \\ \b \f \n \r \t, other bytes below 0x20 as \u00xx with
//     lowercase hex, everything else (including non-ASCII) verbatim.
//   - P is the payload as given by the caller after encoding/json.Compact
//     (insignificant whitespace removed, nothing else changed), or null.
//     A payload longer than Options.PayloadCap is replaced by the capped
//     marker described at CappedPayload.
//   - PREV and HASH are 64 lowercase hex digits.
//
// The body of the event is the line without its hash field, that is the
// line with the trailing `,"hash":"HASH"}` replaced by `}`:
//
//	HASH = hex(SHA-256(`{"seq":S,...,"payload":P,"prev":"PREV"}`))
//
// So an outside verifier needs no JSON canonicalisation of its own: cut the
// hash suffix, hash the bytes, and compare; then check that seq counts up
// from 1 and that prev equals the previous line's hash. Verify and
// VerifyFile additionally re-encode every event and reject a line that is
// not in the canonical form above (so no two byte strings verify as the same
// event). testdata/verify_jsonl.py is such a verifier in 26 lines of Python
// (an optional SEQ:HASH anchor checks a file that starts after it):
//
//	python3 store/testdata/verify_jsonl.py .thinbot/audit.jsonl
//
// A hash chain proves order and integrity relative to its head: someone who
// can rewrite the whole file can recompute every hash. Report.LastHash is
// the value to anchor elsewhere (a ticket, a chat message, a second host)
// to close that gap. On a running store anchor the event at DurableSeq, not
// at LastSeq: events AppendBuffered has not synced yet may be lost by a
// machine restart, and their seqs then reused by other events.
//
// # Layout of the bbolt file
//
//   - bucket "events": key 8-byte big-endian seq, value the line above.
//   - bucket "index": key session id + 0x00 + 8-byte big-endian seq, empty
//     value; one session's events are a contiguous key range. Right after
//     it, key session id + 0x01 (no NUL: never an event's key), the
//     session's summary: five big-endian uint64s, event count, first seq,
//     last seq, first and last time (Unix ns). A commit rewrites the
//     summary in the leaf page it writes the session's new entries to.
//   - bucket "meta": "format" = "thinbot-events-2"; "last" = 8-byte seq +
//     32-byte hash of the chain head (so a deleted tail is detected);
//     "audit" = the journal mark: 8-byte seq + 8-byte offset of the
//     journal's end when the events up to seq were indexed, the same two
//     again (an older thinbot synced the export in the background and
//     recorded its written and its synced point there), then the kernel's
//     boot id; "recentseq" = the seq up to which "recent" is kept;
//     "ixname", "ixseq" = the state index's name and the seq up to which it
//     is kept.
//   - bucket "recent": key 8-byte seq of a session's last event, value the
//     session id: the sessions by last activity (RecentSessions). Written
//     with the events; Verify checks it against the summaries; a store an
//     older thinbot wrote gets it rebuilt at its next writable open.
//   - format "thinbot-events-1" (thinbot before issue #20's commit work)
//     kept the summaries in a bucket "sessions" of their own, key session
//     id. A read-only open reads them there; the first writable open moves
//     them into "index" in one transaction (logged) and sets format 2,
//     which older thinbots refuse to open.
//   - bucket "archived" (after an archive): key session id, value an
//     ArchivedSession (JSON): which archive files hold its events.
//   - bucket "state": the state index (UseIndex): records a layer above
//     derives from events (agentcore: open runs, pending approvals, the
//     sessions and message ids a bot starts with, approvals and their
//     outcomes), written in the transaction that commits the events. It is
//     derived data, not evidence: rebuilt from the chain whenever it may be
//     stale (another name, or "ixseq" behind the head because a process
//     that did not keep it appended).
//
// # Verification at scale
//
// Verify reads the chain in one read transaction and hashes it in parallel
// (GOMAXPROCS workers parse and hash batches a few ahead) while one
// goroutine checks, in order, the seq, the prev links, the index and the
// summaries: the order-dependent part is the same as a one-at-a-time check.
// Lines in the canonical layout are read by their layout (decodeCanonical),
// not by a JSON decoder. VerifyOptions.From checks only the events after a
// trusted anchor (seq, hash); VerifyJournal checks the export's lines that
// are byte-identical to a store just verified by that comparison alone. About
// 5.6 s of CPU for a million events (store and export), so about 3 s on two
// idle cores.
//
// # Archives
//
// Archive moves the oldest events (base+1..S) out of the live store and
// its journal into a sealed archive file (gzip'd JSONL: a header line, the
// events' stored lines exactly as the journal held them, a seal line with
// the range, prev, head and a SHA-256 of the lines; see archive.go). First
// an archive event (type "archive", session "audit:archive") recording the
// file, its range, head and digests is appended to the live chain; then
// the cut. The live chain then starts at S+1, whose prev is the archive's
// head. Verify, VerifyFile, VerifyJournal and the rebuild from the journal
// accept a chain that starts after seq 1 only where an archive event in it
// records exactly that start (last seq S, head = the first event's prev):
// removing the first live events, or the archive event, still fails
// verification. Report.ArchivedSeq, ArchivedHash and ArchiveFile say what
// was archived. Archive checks every event it archives in full (canonical
// form and hash, as Verify does) and refuses a broken one, whose evidence
// would otherwise leave the live store; it never replaces an archive file
// of other contents (another store's, in a shared directory). The cut
// avoids sessions the caller must keep live (ArchiveOptions.Keep) and
// prefers a session boundary, of the sessions that are not logs spanning
// the chain (ArchiveOptions.Log, and the archive events'); the bucket
// "archived" (session id -> ArchivedSession) says which files hold a
// session's archived events (derived too: a rebuild from the journal
// after a machine restart does not have it, and readers then name the
// archive the chain starts after). The cut is crash-safe: the new journal and
// bbolt file are written and synced beside the live ones, a marker
// (PATH.archive-commit) is synced, then both are renamed into place and
// the marker removed; Open finishes a cut whose marker it finds, and
// removes the leftovers of one that never reached it.
//
// A replicated store (Options.Replicate) archives on every node: the
// leader records the archive (ArchiveReplicated), each node writes the
// same file from its own store as it applies the archive event
// (ApplyArchive: a file that is not the one recorded is refused with
// ErrArchiveDiffers) and lists the archive in PATH.archive-pending; the
// next writable Open makes the cut with the steps above. ApplyLines
// passes over lines at seqs a store has archived, and an empty store
// takes lines that start after seq 1 only with the archive event that
// vouches for them (ApplyLinesAfter).
//
// # The journal and recovery
//
// audit.jsonl (Options.AuditPath) holds every committed event in order, one
// stored line each, and is synced at every commit before bbolt sees the
// events, so bbolt never holds an event the journal lacks. A state file
// (PATH.state, locked while open) says "closed" after Close, which syncs
// bbolt, or "open BOOT-ID" while a process has the store. Open then:
//
//   - after Close: checks the marked line and goes on;
//   - after a crash of the process (same boot id): written bytes survive
//     in the page cache, so bbolt is consistent and at most one batch
//     behind; the journal lines past its end that continue the chain are
//     replayed into it and a cut last line is removed;
//   - after the machine went down with the store open (another or an
//     unknown boot id): bbolt's unsynced pages may be lost or torn, so the
//     bbolt file is rebuilt from the journal, whose chain is checked line by
//     line; a damaged tail (a cut line, zeros: what a power loss leaves of a
//     write that was never acknowledged) is cut. The old file is kept as
//     PATH.unsynced-TIME. This reads the whole journal: about 100,000
//     events a second on a small VM (BenchmarkRebuild100k).
//
// What a crash cannot explain is refused with ErrAuditMismatch rather than
// repaired: a journal shorter than its journal mark or than what the old
// bbolt file recorded as synced, a marked line that differs from the
// store (after a machine restart: from the old bbolt file's copy of the
// last event it recorded as synced, where that file still has it), a
// complete line past the store's end that does not continue the chain, a
// bad line with good events of the chain after it, a journal missing after
// a machine restart while the old bbolt file has events (Options.RebuildAudit
// accepts that file as it is). RebuildAudit (and
// Options.RebuildAudit) rewrites the journal from the store, keeping a
// differing old file aside. A journal that cannot be written (a full disk)
// fails the Append: nothing is committed and the bytes written are cut
// before the next batch. One failure is in doubt: when bbolt cannot index a
// batch the journal took and the journal cannot be cut back either, that
// Append and every later one fail with an error that says so, and the next
// Open replays the batch (the journal is the commit record).
//
// # Caveats
//
// bbolt locks the file: a second process opening it waits Options.Timeout
// and then fails with ErrLocked. A read-only Open (Options.ReadOnly) takes a
// shared lock, so it also fails while a daemon holds the file; follow the
// JSONL export instead with Follow (thinbot audit tail does).
//
// Readers (All, Events, Export) read in chunks of short read transactions,
// so a loop over them may Append without deadlocking bbolt's remap.
package store
