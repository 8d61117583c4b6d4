package agentcore

import (
	"context"
	"fmt"

	"github.com/thinbot/thinbot/store"
)

// Events reach the chain one way, bbolt-style: a run writes through
// run.record; everything else changes a session only inside Agent.update
// (session lock held, projection loaded) with Agent.commit; both end in
// write, the one call of store.DB.Append and AppendBuffered. NoteUnlocked
// and Recover, which must not wait for a running turn, call write alone.

// How a write waits: durable returns once the events are on disk
// (store.DB.Append); buffered once they are in the chain, readable and
// shown, and durable with the next durable write (store.DB.AppendBuffered).
const (
	buffered = false
	durable  = true
)

// write appends evs to db, durably or buffered, with every string in
// their payloads scrubbed by x (see scrubber; nil for the kernel's own
// records, which hold no text from outside). It is the only call of the
// store's append functions in agentcore, so nothing reaches the chain
// unscrubbed.
func write(db *store.DB, x *scrubber, sync bool, evs []store.Event) ([]store.Event, error) {
	for i := range evs {
		evs[i].Payload = x.payload(evs[i].Payload)
	}
	// Never a cancellable ctx: Append gives up on a done ctx before the
	// commit takes the events, and the record of a cancelled run (its
	// refusals, its run_finished) must still be written.
	appendFn := db.Append
	if !sync {
		appendFn = db.AppendBuffered
	}
	out, err := appendFn(context.Background(), evs...)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", evs[0].Type, err)
	}
	return out, nil
}

// update runs fn with the session's lock held and its projection up to
// date with the chain: the way to change a session outside a run (fn
// writes with commit). A run holds the same lock for its whole length.
func (a *Agent) update(id string, fn func(s *session) error) error {
	s := a.session(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(id, s); err != nil {
		return err
	}
	return fn(s)
}

// commit writes evs to the session's current branch (an EvClear keeps the
// branch it names) and applies them to the projection. The caller holds
// s.mu: inside update, or during a run.
func (a *Agent) commit(id string, s *session, sync bool, evs []store.Event) ([]store.Event, error) {
	for i := range evs {
		evs[i].Session = id
		if evs[i].Type != EvClear {
			evs[i].Branch = s.proj.Branch()
		}
	}
	out, err := write(a.cfg.Store, a.scrub, sync, evs)
	if err != nil {
		return nil, err
	}
	for _, e := range out {
		s.proj.Apply(e)
		s.last = e.Seq
	}
	return out, nil
}

// record is the run's one way to write: it commits the run's pending
// events (see run.pending) and evs, durable or buffered, and returns the
// committed evs (without the pending ones). With no evs it commits what is
// pending, if anything: a model reply still pending when the next request
// goes out (a step without a gate decision or tool result, such as a
// malformed call) is recorded before what the model answers next.
//
// A step is one durable commit, made just before its command runs: the
// model reply that asked for the command and its gate decision go to the
// store together (run.record with the run's pending reply), and the
// journal is synced. The command's result is appended buffered as soon as
// it is known (store.DB.AppendBuffered: in the chain and readable at once,
// synced by the next commit). The invariants: (1) a command runs only after
// its decision, and everything the run did before it, is durable; (2) a
// model reply is never in the chain without the results it read, which come
// before it. A crash of the process keeps a buffered result; a crash of the
// machine before the next commit loses it together with everything after
// it, and the chain then shows the decision without a result (the
// projection closes the call as interrupted, as for a crash while the
// command ran). Steps without a gate decision record their reply before
// the next request: buffered for a malformed call, durably with
// skill_opened for a skill; the run's end
// commits whatever is left. The run's start (a changed system prompt,
// run_started, the user's message) is buffered too: the first decision, or
// the run's end before the answer is posted, syncs it, so an answer without
// commands costs one sync. Streamed text (Hooks.Text, which the bot shows in
// the chat while the model writes) is an answer posted too: the first delta
// after a buffered append syncs the chain (store.DB.Sync) before it is
// shown, so a streamed answer costs that sync as well.
func (r *run) record(sync bool, evs ...store.Event) ([]store.Event, error) {
	all := append(r.pending, evs...)
	r.pending = nil
	if len(all) == 0 {
		return nil, nil
	}
	out, err := r.commit(r.t.Session, r.s, sync, all)
	if err != nil {
		return nil, err
	}
	r.unsynced = !sync
	return out[len(out)-len(evs):], nil
}
