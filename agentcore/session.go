package agentcore

import (
	"encoding/json"
	"fmt"

	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// Clear starts a new branch of the session: older events stay in the chain
// but leave the projection.
func (a *Agent) Clear(id, actor string) error {
	return a.update(id, func(s *session) error {
		next := s.proj.Branch() + 1
		_, err := a.commit(id, s, durable, []store.Event{{Type: EvClear, Branch: next, Actor: actor, Payload: mustJSON(ClearPayload{Branch: next})}})
		return err
	})
}

// Note records an event on behalf of a front end (approval message posted,
// click refused, run interrupted by a restart), durably, once a running
// turn of the session has ended (it takes the session's lock). Type is
// usually EvNote.
func (a *Agent) Note(id, typ, actor string, payload any) (store.Event, error) {
	var ev store.Event
	err := a.update(id, func(s *session) error {
		evs, err := a.commit(id, s, durable, []store.Event{{Type: typ, Actor: actor, Payload: mustJSON(payload)}})
		if err == nil {
			ev = evs[0]
		}
		return err
	})
	return ev, err
}

// NoteUnlocked records an event durably without waiting for a running turn
// of the session: it bypasses the session's lock and its cached projection,
// so the event is stamped on branch 0 whatever the session's branch (a
// note is read by Recover and the audit views, never projected). Use it
// from click handlers and message queues while the turn blocks on an
// approval or a model call. It was called NoteSync, which it never meant:
// both Note and NoteUnlocked are durable.
func (a *Agent) NoteUnlocked(id, typ, actor string, payload any) (store.Event, error) {
	evs, err := write(a.cfg.Store, a.scrub, durable, []store.Event{{Session: id, Type: typ, Actor: actor, Payload: mustJSON(payload)}})
	if err != nil {
		return store.Event{}, err
	}
	return evs[0], nil
}

// SessionStatus reports what the session is doing.
func (a *Agent) SessionStatus(session string) Status {
	a.mu.Lock()
	s := a.state[session]
	a.mu.Unlock()
	if s == nil {
		return Status{}
	}
	s.smu.Lock()
	st := s.status
	s.smu.Unlock()
	st.Current = a.scrub.scrub(st.Current)
	return st
}

// Messages returns the session's current projection (what the next model
// call would see, before the next user message).
func (a *Agent) Messages(session string) ([]Message, error) {
	s := a.session(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(session, s); err != nil {
		return nil, err
	}
	return s.proj.Messages(), nil
}

// Policy is the gate policy the agent uses (with skills' read-only scripts).
func (a *Agent) Policy() *gate.Policy { return a.cfg.Policy }

// LastNote returns the session's last EvNote of kind, reading the session's
// events from its start (a scheduled check asks once after a start). ok is
// false when there is none; an error is a failed read of the store.
func (a *Agent) LastNote(session, kind string) (p NotePayload, ok bool, err error) {
	for e, err := range a.cfg.Store.Events(session, 1) {
		if err != nil {
			return NotePayload{}, false, fmt.Errorf("read session %s: %w", session, err)
		}
		var n NotePayload
		if e.Type == EvNote && json.Unmarshal(e.Payload, &n) == nil && n.Kind == kind {
			p, ok = n, true
		}
	}
	return p, ok, nil
}
