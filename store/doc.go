// Package store is thinbot's event log: one bbolt file holding one global,
// append-only, hash-chained sequence of events, a per-session index, and a
// JSONL audit export written next to it as events commit.
//
// # Events and the chain
//
// Every event gets a global sequence number (gapless, from 1), a time, and
// the hash of the event before it (Prev; 64 ASCII zeros for seq 1). Its Hash
// is the SHA-256 of its canonical body, which includes Prev, so changing,
// removing, swapping or inserting any event breaks every link after it.
//
// Append is the only writer. Concurrent Append calls are group-committed:
// one committer goroutine, owned by the DB and stopped by Close, collects
// the calls waiting at that moment into one bbolt transaction (one fsync
// pair for many callers: bbolt's fdatasync of the data pages, then of the
// meta page). The chain order is the commit order, one call's events are
// consecutive, and each caller returns once its events are durable; the
// committer then writes them to the export (without an fsync) before it
// starts the next batch.
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
// VerifyJSONL additionally re-encode every event and reject a line that is
// not in the canonical form above (so no two byte strings verify as the same
// event). testdata/verify_jsonl.py is such a verifier in 25 lines of Python:
//
//	python3 store/testdata/verify_jsonl.py .thinbot/audit.jsonl
//
// A hash chain proves order and integrity relative to its head: someone who
// can rewrite the whole file can recompute every hash. Report.LastHash is
// the value to anchor elsewhere (a ticket, a chat message, a second host)
// to close that gap.
//
// # Layout of the bbolt file
//
//   - bucket "events": key 8-byte big-endian seq, value the line above.
//   - bucket "index": key session id + 0x00 + 8-byte big-endian seq, empty
//     value; one session's events are a contiguous key range.
//   - bucket "sessions": key session id, value five big-endian uint64s:
//     event count, first seq, last seq, first and last time (Unix ns).
//   - bucket "meta": "format" = "thinbot-events-1"; "last" = 8-byte seq +
//     32-byte hash of the chain head (so a deleted tail is detected);
//     "audit" = the export's crash checkpoint: 8-byte seq + 8-byte offset
//     up to which the export was written before this commit, 8-byte seq +
//     8-byte offset up to which it was fsynced, then the kernel's boot id.
//     (A 16-byte value, from before the export stopped syncing at every
//     commit, is both.)
//
// # The JSONL export
//
// audit.jsonl (Options.AuditPath) holds every committed event in order, one
// stored line each. It is derived from the store: after each commit the
// batch's lines are appended but not fsynced (one sync per commit is
// bbolt's; the export's would be a third), and a background goroutine
// fsyncs it at most once a second, off the commit path, and at Close. On
// Open the file is reconciled with the store from the last checkpoint: a cut
// last line is removed and missing lines are appended from the store, so a
// crash leaves no gap and no duplicate. Written bytes survive a crash of
// the process, so in the same boot a file that was truncated behind its
// written checkpoint, or edited, is not repaired silently: Open fails with
// ErrAuditMismatch. After a reboot (the boot id differs; a power loss can
// drop unsynced writes) the fsynced checkpoint is the one the file must
// reach, and its tail is rebuilt from the store. Where the boot id is
// unknown the export is fsynced at every commit, as before. RebuildAudit (and Options.RebuildAudit) rewrites the
// file from the store, keeping a differing old file aside.
//
// # Caveats
//
// bbolt locks the file: a second process opening it waits Options.Timeout
// and then fails with ErrLocked. A read-only Open (Options.ReadOnly) takes a
// shared lock, so it also fails while a daemon holds the file; follow the
// JSONL export instead (thinbot audit tail does).
//
// Readers (All, Events, Export) read in chunks of short read transactions,
// so a loop over them may Append without deadlocking bbolt's remap.
package store
