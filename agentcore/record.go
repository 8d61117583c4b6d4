package agentcore

import (
	"context"
	"fmt"

	"github.com/thinbot/thinbot/store"
)

// append commits the run's pending events and evs to the session's current
// branch, durably, and applies them to the projection. It returns the
// committed evs (without the pending ones). The caller holds r.s.mu.
func (r *run) append(evs ...store.Event) ([]store.Event, error) {
	return r.appendRun(true, evs)
}

// appendBuffered is append without waiting for the disk: the events are in
// the chain (readable, shown) at once and durable with the run's next
// append (store.DB.AppendBuffered).
func (r *run) appendBuffered(evs ...store.Event) ([]store.Event, error) {
	return r.appendRun(false, evs)
}

func (r *run) appendRun(durable bool, evs []store.Event) ([]store.Event, error) {
	all := append(r.pending, evs...)
	r.pending = nil
	if len(all) == 0 {
		return nil, nil
	}
	out, err := r.commit(r.t.Session, r.s, durable, all)
	if err != nil {
		return nil, err
	}
	r.unsynced = !durable
	return out[len(out)-len(evs):], nil
}

func (a *Agent) appendTo(id string, s *session, evs ...store.Event) ([]store.Event, error) {
	return a.commit(id, s, true, evs)
}

func (a *Agent) commit(id string, s *session, durable bool, evs []store.Event) ([]store.Event, error) {
	for i := range evs {
		evs[i].Session = id
		if evs[i].Type != EvClear {
			evs[i].Branch = s.proj.Branch()
		}
	}
	// Never a cancellable ctx: Append gives up on a done ctx before the
	// commit takes the events, and the record of a cancelled run (its
	// refusals, its run_finished) must still be written.
	appendFn := a.cfg.Store.Append
	if !durable {
		appendFn = a.cfg.Store.AppendBuffered
	}
	out, err := appendFn(context.Background(), evs...)
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", evs[0].Type, err)
	}
	for _, e := range out {
		s.proj.Apply(e)
		s.last = e.Seq
	}
	return out, nil
}

// flushPending records a model reply still pending when the next request
// goes out (a step without a gate decision or tool result, such as a
// malformed call), so that the chain holds what the model answered before
// what it answers next.
func (r *run) flushPending() error {
	_, err := r.appendBuffered()
	return err
}
