package agentcore

import (
	"encoding/json"
	"fmt"
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
//     restart's check from the checkpoint (store.DB.VerifyFrom from its
//     seq and hash) covers the checkpoint event too: an edited checkpoint
//     breaks its own hash or the next event's link, exactly as any edited
//     event does. A checkpoint that does not vouch for events before
//     itself is not used (LastChainCheckpoint).
//   - VerifyFrom starts from the checkpoint's hash, not from whatever the
//     store holds at its seq: a history rewritten before the checkpoint
//     (hashes recomputed) no longer continues from that hash and is
//     reported as a break right after it.
//   - An event edited before the checkpoint without recomputing the hashes
//     is not seen by the restart's check; it is seen by the next full
//     verification, which runs at least once every day
//     (FullVerifyEvery) and whenever an auditor asks (`thinbot audit
//     verify`, or the viewer's Chain page). A full verification also
//     checks every recorded checkpoint against the chain
//     (CheckChainCheckpoints): a rewrite that recomputed every hash but
//     left the checkpoints' payloads is caught there.
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

type chainVerifiedPayload struct {
	Seq      uint64 `json:"seq"`
	Hash     string `json:"hash"`
	Sessions int    `json:"sessions"`
	TookMS   int64  `json:"took_ms"`
	// Export is what the check of the JSONL export found ("" when not
	// checked).
	Export string `json:"export,omitempty"`
}

// RecordChainVerified records a good full verification (rep, which must be
// OK and come from a full Verify or VerifyBackground) as a checkpoint
// event, durably, and returns it.
func RecordChainVerified(db *store.DB, rep store.Report, took time.Duration, export string) (ChainCheckpoint, error) {
	if !rep.OK || rep.LastSeq == 0 {
		return ChainCheckpoint{}, fmt.Errorf("record checkpoint: the verification found no good chain to vouch for")
	}
	evs, err := write(db, durable, []store.Event{{Session: CheckpointSession, Type: EvChainVerified, Actor: "system",
		Payload: mustJSON(chainVerifiedPayload{Seq: rep.LastSeq, Hash: rep.LastHash, Sessions: rep.Sessions, TookMS: took.Milliseconds(), Export: export})}})
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
	var p chainVerifiedPayload
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
// (store.DB.VerifyFrom(cp.Seq, cp.Hash)), which also checks the
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

// CheckChainCheckpoints compares every checkpoint recorded in db with the
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
// longer in db.
func CheckChainCheckpoints(db *store.DB) (problem string, bad uint64, err error) {
	arch, _, archived, err := db.ArchivedBefore()
	if err != nil {
		return "", 0, err
	}
	for ev, err := range db.Events(CheckpointSession, 1) {
		if err != nil {
			return "", 0, err
		}
		cp, ok := checkpointOf(ev)
		if ok && archived && cp.Seq <= arch.Last {
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
		at, found, err := db.Event(cp.Seq)
		if err != nil {
			return "", 0, err
		}
		switch {
		case !found:
			return fmt.Sprintf("the checkpoint at seq %d vouches for seq %d, which is missing", cp.EventSeq, cp.Seq), cp.Seq, nil
		case at.Hash != cp.Hash:
			return fmt.Sprintf("the checkpoint at seq %d recorded hash %.12s… for seq %d, which now has %.12s…: the history up to it was rewritten", cp.EventSeq, cp.Hash, cp.Seq, at.Hash), cp.Seq, nil
		}
	}
	return "", 0, nil
}
