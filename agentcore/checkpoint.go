package agentcore

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"os"
	"time"

	"github.com/thinbot/thinbot/store"
)

// Verification checkpoints (issue #23). A full verification of a year of
// events costs seconds of CPU; a daemon that verified the whole chain after
// every restart would spend them during the start of an incident. So the
// end of a good full verification is recorded, and a restart verifies only
// the events after it.
//
// Where the checkpoint lives decides what it proves. A record in a bucket
// beside the chain would be no proof: whoever can edit an event can edit
// that record too, and a checkpoint moved past an edited event would make
// the restart skip it. So the checkpoint is an event of the chain itself
// (EvChainVerified in the session CheckpointSession), holding the seq and
// hash of the last event the verification found good:
//
//   - The checkpoint event comes after the events it vouches for, so the
//     restart's check from the checkpoint (store.DB.Verify from its seq
//     and hash) covers the checkpoint event too: an edited checkpoint
//     breaks its own hash or the next event's link, exactly as any edited
//     event does. A checkpoint that does not vouch for events before
//     itself is not used (LastChainCheckpoint).
//   - That check starts from the checkpoint's hash, not from whatever the
//     store holds at its seq: a history rewritten before the checkpoint
//     (hashes recomputed) no longer continues from that hash and is
//     reported as a break right after it.
//   - An event edited before the checkpoint without recomputing the hashes
//     is not seen by the restart's check; it is seen by the next full
//     verification, which runs at least once every day
//     (FullVerifyEvery) and whenever an auditor asks (`thinbot audit
//     verify`, or the viewer's Chain page). A full verification also
//     checks every recorded checkpoint against the chain
//     (Verify): a rewrite that recomputed every hash but left the
//     checkpoints' payloads is caught there. An auditor with a JSONL
//     export or an archive file alone gets the same check, by the same
//     rule (VerifyOptions.JSONL and Archives).
//   - What no record inside the store can catch is a rewrite of the whole
//     chain with its checkpoints recomputed: that is what the chain head
//     the daemon logs every 10 minutes, kept elsewhere, is for.
//
// The session of the checkpoints has no user message, so it never becomes
// a chat thread; the audit viewer lists it as a system session, one line a
// day.

// CheckpointSession is the session the verification checkpoints are
// recorded in.
const CheckpointSession = "system:verify"

// FullVerifyEvery is how long a recorded full verification stands in for
// one: after it, the next start (or the running daemon) verifies the whole
// chain again.
const FullVerifyEvery = 24 * time.Hour

// ChainCheckpoint is a good full verification of the chain, as recorded in
// it.
type ChainCheckpoint struct {
	// Seq and Hash are the last event the verification found good: every
	// event up to Seq verified, and Seq's hash was Hash.
	Seq  uint64
	Hash string
	// EventSeq is the seq of the event that records the checkpoint, At its
	// time.
	EventSeq uint64
	At       time.Time
	Took     time.Duration // how long the verification took
	Sessions int           // sessions it checked
	Export   string        // what it found of the JSONL export ("" when not checked)
}

// ChainVerifiedPayload is an EvChainVerified's: a good full verification
// up to Seq, whose hash was Hash.
type ChainVerifiedPayload struct {
	Seq      uint64 `json:"seq"`
	Hash     string `json:"hash"`
	Sessions int    `json:"sessions"`
	TookMS   int64  `json:"took_ms"`
	// Export is what the check of the JSONL export found ("" when not
	// checked).
	Export string `json:"export,omitempty"`
}

// RecordChainVerified records a good full verification (rep, which must be
// OK and come from a verification of the whole store) as a checkpoint
// event, durably, and returns it.
func RecordChainVerified(db *store.DB, rep store.Report, took time.Duration, export string) (ChainCheckpoint, error) {
	if !rep.OK || rep.LastSeq == 0 {
		return ChainCheckpoint{}, fmt.Errorf("record checkpoint: the verification found no good chain to vouch for")
	}
	evs, err := write(db, nil, durable, []store.Event{{Session: CheckpointSession, Type: EvChainVerified, Actor: "system",
		Payload: mustJSON(ChainVerifiedPayload{Seq: rep.LastSeq, Hash: rep.LastHash, Sessions: rep.Sessions, TookMS: took.Milliseconds(), Export: export})}})
	if err != nil {
		return ChainCheckpoint{}, err
	}
	cp, ok := checkpointOf(evs[0])
	if !ok {
		return ChainCheckpoint{}, fmt.Errorf("record checkpoint: seq %d does not read back as a checkpoint", evs[0].Seq)
	}
	return cp, nil
}

// checkpointOf reads a checkpoint event; ok is false for any other event
// and for a checkpoint that does not vouch for events before itself.
func checkpointOf(ev store.Event) (ChainCheckpoint, bool) {
	if ev.Session != CheckpointSession || ev.Type != EvChainVerified {
		return ChainCheckpoint{}, false
	}
	var p ChainVerifiedPayload
	if json.Unmarshal(ev.Payload, &p) != nil || p.Seq == 0 || p.Seq >= ev.Seq || !isHash(p.Hash) {
		return ChainCheckpoint{}, false
	}
	return ChainCheckpoint{Seq: p.Seq, Hash: p.Hash, EventSeq: ev.Seq, At: ev.Time, Took: time.Duration(p.TookMS) * time.Millisecond, Sessions: p.Sessions, Export: p.Export}, true
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// LastChainCheckpoint returns the newest checkpoint recorded in db (found
// through the session summary of CheckpointSession: a few reads, whatever
// the chain's length); ok is false when there is none or the newest is
// unusable. It is a claim until checked: verify the chain from it
// (store.DB.Verify from cp.Seq, cp.Hash), which also checks the
// checkpoint's own event, before trusting it.
func LastChainCheckpoint(db *store.DB) (cp ChainCheckpoint, ok bool, err error) {
	info, found, err := db.Session(CheckpointSession)
	if err != nil || !found {
		return ChainCheckpoint{}, false, err
	}
	ev, found, err := db.Event(info.LastSeq)
	if err != nil || !found {
		return ChainCheckpoint{}, false, err
	}
	cp, ok = checkpointOf(ev)
	return cp, ok, nil
}

// checkChainCheckpoints compares every checkpoint recorded in db with the
// chain: the event each vouches for must still have the hash it recorded.
// Run it after a full verification found the chain good (each event's own
// hash and links already checked): a mismatch then means the history
// before that checkpoint was rewritten with every hash recomputed. problem
// is "" when all agree; bad is the seq of the event found rewritten.
//
// A checkpoint may vouch for an event since moved into an archive (thinbot
// audit archive): for the archive's last event it is compared with the head
// the live chain's archive event recorded; earlier ones are the archive
// file's to prove (audit verify --archive), since their events are no
// longer in db. verifyJSONL applies the same rule to a JSONL export.
func checkChainCheckpoints(db *store.DB) (problem string, bad uint64, err error) {
	rec, _, archived, err := db.ArchivedBefore()
	if err != nil {
		return "", 0, err
	}
	var arch archivedHead
	if archived {
		arch = archivedHead{Last: rec.Last, Head: rec.Head, File: rec.File}
	}
	return checkCheckpoints(db.Events(CheckpointSession, 1), arch, func(seq uint64) (string, bool, error) {
		ev, found, err := db.Event(seq)
		return ev.Hash, found, err
	})
}

// verifyJSONL is store.VerifyFile of a JSONL export (a daemon's
// audit.jsonl, or a file an auditor was sent) with the check
// checkChainCheckpoints makes of a store: every checkpoint recorded in the
// part of the file that verified must vouch for an event the file holds
// with that hash (one for the archive's last event, in an export that
// starts after archived events, for the archive's head). A mismatch is
// reported as the chain's break (rep.OK false, BadSeq the seq found
// rewritten), as Verify does for a store.
//
// The file is read once for the chain, which collects the checkpoints (a
// few: one a day), and, when they vouch for events in it, a second time
// for those events' hashes only: a chain of a million events is not held
// in memory. So r is read from where it is and, when there is a second
// read, seeked back there: an r that cannot seek (a pipe) is then an
// error, not an unchecked report. The error is non-nil only when it could
// not check.
func verifyJSONL(ctx context.Context, r io.ReadSeeker) (store.Report, error) {
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		start = -1 // a pipe: fine unless a second read is needed
	}
	var cps []store.Event
	frep, err := store.VerifyFile(ctx, r, &store.FileOptions{Each: collectCheckpoints(&cps)})
	rep := frep.Report
	if err != nil || !rep.OK {
		return rep, err
	}
	var arch archivedHead
	if rep.ArchivedSeq > 0 {
		arch = archivedHead{Last: rep.ArchivedSeq, Head: rep.ArchivedHash, File: rep.ArchiveFile}
	}
	err = checkFileCheckpoints(&rep, cps, arch, func(seqs []uint64) (map[uint64]string, error) {
		if start < 0 {
			return nil, fmt.Errorf("its checkpoints (%d) need a second read, and it cannot seek (a pipe?): save it to a file and verify that", len(seqs))
		}
		if _, err := r.Seek(start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("the checkpoints need a second read: %w", err)
		}
		return store.FileHashes(ctx, r, seqs, rep.LastSeq, nil)
	})
	if err != nil {
		return rep, fmt.Errorf("verify jsonl: %w", err)
	}
	return rep, nil
}

// verifyArchiveFile is store.VerifyFile of the archive file at path with
// the check of the checkpoints the archive holds, as verifyJSONL checks an
// export's: each
// must vouch for an event of the archive with that hash, or, for the event
// before its first, for its prev (the head of the archive before it).
// Those further back are the earlier archives' to prove: each archive's
// head is what the next one's prev and the live chain's archive event
// record (audit verify --archive with them checks that).
func verifyArchiveFile(ctx context.Context, path string) (store.FileReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return store.FileReport{}, fmt.Errorf("verify archive: %w", err)
	}
	defer f.Close()
	var cps []store.Event
	opt := &store.FileOptions{Archive: true, Each: collectCheckpoints(&cps)}
	rep, err := store.VerifyFile(ctx, f, opt)
	if err != nil || !rep.OK {
		return rep, err
	}
	var arch archivedHead
	if rep.Seal.First > 1 {
		arch = archivedHead{Last: rep.Seal.First - 1, Head: rep.Seal.Prev, File: "before it"}
	}
	err = checkFileCheckpoints(&rep.Report, cps, arch, func(seqs []uint64) (map[uint64]string, error) {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return store.FileHashes(ctx, f, seqs, rep.LastSeq, opt)
	})
	if err != nil {
		return rep, fmt.Errorf("verify archive %s: %w", path, err)
	}
	return rep, nil
}

// collectCheckpoints returns a store.FileOptions.Each callback that keeps
// the events of CheckpointSession in *cps.
func collectCheckpoints(cps *[]store.Event) func(store.Event) {
	return func(ev store.Event) {
		if ev.Session == CheckpointSession {
			*cps = append(*cps, ev)
		}
	}
}

// checkFileCheckpoints applies checkCheckpoints to the checkpoint events
// cps of a file whose chain verified (rep, set to the break a mismatch
// is), with the hashes of the seqs they vouch for after arch read again by
// reread.
func checkFileCheckpoints(rep *store.Report, cps []store.Event, arch archivedHead, reread func(seqs []uint64) (map[uint64]string, error)) error {
	var seqs []uint64
	for _, ev := range cps {
		if cp, ok := checkpointOf(ev); ok && cp.Seq > arch.Last {
			seqs = append(seqs, cp.Seq)
		}
	}
	var hashes map[uint64]string
	if len(seqs) > 0 {
		var err error
		if hashes, err = reread(seqs); err != nil {
			return err
		}
	}
	events := func(yield func(store.Event, error) bool) {
		for _, ev := range cps {
			if !yield(ev, nil) {
				return
			}
		}
	}
	problem, bad, err := checkCheckpoints(events, arch, func(seq uint64) (string, bool, error) {
		h, found := hashes[seq]
		if !found {
			// The first read found every seq after the archived ones
			// up to rep.LastSeq, which a checkpoint's seq is within.
			return "", false, fmt.Errorf("seq %d, which the first read found, is gone: the file changed while it was read", seq)
		}
		return h, true, nil
	})
	if err != nil {
		return err
	}
	if problem != "" {
		rep.OK, rep.BadSeq, rep.Problem = false, bad, problem
	}
	return nil
}

// archivedHead is where the archived events before a chain end: the chain
// starts after seq Last, whose hash, Head, the archive File holds. Last is
// 0 for a chain from seq 1.
type archivedHead struct {
	Last       uint64
	Head, File string
}

// checkCheckpoints is the rule checkChainCheckpoints and verifyJSONL share:
// each of the events of CheckpointSession (in chain order) that is a
// checkpoint must vouch for an event whose hash, as hashAt finds it in the
// verified chain, is the one it recorded; a checkpoint for an archived event
// is compared with the archive's head if it is the archive's last event
// and left to the archive file otherwise. hashAt's found is false for a seq
// the chain does not hold.
func checkCheckpoints(events iter.Seq2[store.Event, error], arch archivedHead, hashAt func(seq uint64) (hash string, found bool, err error)) (problem string, bad uint64, err error) {
	for ev, err := range events {
		if err != nil {
			return "", 0, err
		}
		cp, ok := checkpointOf(ev)
		if ok && arch.Last > 0 && cp.Seq <= arch.Last {
			if cp.Seq == arch.Last && cp.Hash != arch.Head {
				return fmt.Sprintf("the checkpoint at seq %d recorded hash %.12s… for seq %d, which the archive %s holds with head %.12s…: the history up to it was rewritten", cp.EventSeq, cp.Hash, cp.Seq, arch.File, arch.Head), cp.Seq, nil
			}
			continue
		}
		if !ok {
			if ev.Type == EvChainVerified {
				return fmt.Sprintf("the checkpoint at seq %d is malformed (it must vouch for an earlier event by its seq and hash)", ev.Seq), ev.Seq, nil
			}
			continue
		}
		hash, found, err := hashAt(cp.Seq)
		if err != nil {
			return "", 0, err
		}
		switch {
		case !found:
			return fmt.Sprintf("the checkpoint at seq %d vouches for seq %d, which is missing", cp.EventSeq, cp.Seq), cp.Seq, nil
		case hash != cp.Hash:
			return fmt.Sprintf("the checkpoint at seq %d recorded hash %.12s… for seq %d, which now has %.12s…: the history up to it was rewritten", cp.EventSeq, cp.Hash, cp.Seq, hash), cp.Seq, nil
		}
	}
	return "", 0, nil
}
