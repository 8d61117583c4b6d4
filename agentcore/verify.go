package agentcore

import (
	"context"
	"errors"
	"io"

	"github.com/thinbot/thinbot/store"
)

// VerifyOptions says what Verify checks. The zero value checks the whole
// store and the checkpoints recorded in it.
type VerifyOptions struct {
	// From and FromHash are a trusted anchor (store.VerifyOptions): only
	// the store's events after it are checked, and not the checkpoints
	// (a whole verification checks them).
	From     uint64
	FromHash string
	// Progress and Workers are store.VerifyOptions': a daemon's background
	// check reports its progress and hashes with one worker.
	Progress func(seq uint64)
	Workers  int
	// Journal also checks the store's journal against the store
	// (Verification.Journal). After a whole verification, the journal's
	// lines byte-identical to the events found good are checked by that
	// comparison alone; after one from an anchor every line gets the full
	// check.
	Journal bool
	// JSONL, if not nil, is a JSONL export to check on its own, with the
	// checkpoints recorded in it (Verification.JSONL). It is read from
	// where it is and, when its checkpoints vouch for events in it, seeked
	// back there for a second read of those events' hashes only: a chain
	// of a million events is not held in memory. An r that cannot seek (a
	// pipe) is then an error, not an unchecked report.
	JSONL io.ReadSeeker
	// Archives are archive files to check on their own, each with the
	// checkpoints it holds (Verification.Archives, in the same order).
	// That each continues the one before is the caller's to check, from
	// their seals.
	Archives []string
}

// Verification is what Verify found. A report that is not OK names the
// first bad seq and the problem.
type Verification struct {
	// Chain is the store's check, a break of the checkpoints included
	// (zero when Verify had no store).
	Chain store.Report
	// Journal is the journal's check (VerifyOptions.Journal), nil when it
	// was not asked for or could not be made; JournalErr says why it could
	// not. The journal is checked after the chain, and the chain's result
	// stands without it: a daemon records it all the same.
	Journal    *store.Report
	JournalErr error
	// JSONL is the check of VerifyOptions.JSONL (nil without one).
	JSONL *store.Report
	// Archives are the checks of VerifyOptions.Archives.
	Archives []store.FileReport
}

// Verify checks, in this order: the chain in db (store.DB.Verify); then,
// when that was a whole verification and found the chain good, every
// checkpoint recorded in it (each must vouch for an event that still has
// the hash it recorded: a rewrite that recomputed every hash does not);
// then, as opt asks, the journal against the store, a JSONL export and
// archive files on their own, each held to the checkpoints it records by
// the same rule. db may be nil when only files are checked.
//
// Verify is what `thinbot audit verify` and the web console's background
// verifier run. The error is non-nil only when a check could not be made
// (the Verification then holds the checks done before it), except the
// journal's (Verification.JournalErr). It stops when ctx is done.
func Verify(ctx context.Context, db *store.DB, opt VerifyOptions) (Verification, error) {
	var v Verification
	if db != nil {
		rep, err := db.Verify(ctx, &store.VerifyOptions{From: opt.From, FromHash: opt.FromHash, Progress: opt.Progress, Workers: opt.Workers})
		if err != nil {
			return v, err
		}
		if opt.From == 0 && rep.OK {
			// Every event's hash and link is good: the recorded
			// checkpoints must still agree with it.
			problem, bad, err := checkChainCheckpoints(db)
			if err != nil {
				return v, err
			}
			if problem != "" {
				rep.OK, rep.BadSeq, rep.Problem = false, bad, problem
			}
		}
		v.Chain = rep
	}
	if opt.Journal {
		trusted := v.Chain
		if opt.From != 0 {
			trusted = store.Report{}
		}
		switch {
		case db == nil:
			v.JournalErr = errors.New("verify: the journal is checked against a store, and there is none")
		default:
			rep, err := db.VerifyJournal(ctx, trusted)
			if err != nil {
				v.JournalErr = err
			} else {
				v.Journal = &rep
			}
		}
	}
	if opt.JSONL != nil {
		rep, err := verifyJSONL(ctx, opt.JSONL)
		if err != nil {
			return v, err
		}
		v.JSONL = &rep
	}
	for _, p := range opt.Archives {
		rep, err := verifyArchiveFile(ctx, p)
		if err != nil {
			return v, err
		}
		v.Archives = append(v.Archives, rep)
	}
	return v, nil
}
