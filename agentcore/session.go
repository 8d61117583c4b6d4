package agentcore

import (
	"context"
	"fmt"

	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// Clear starts a new branch of the session: older events stay in the chain
// but leave the projection.
func (a *Agent) Clear(session, actor string) error {
	s := a.session(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(session, s); err != nil {
		return err
	}
	_, err := a.appendTo(session, s, store.Event{Type: EvClear, Branch: s.proj.Branch() + 1, Actor: actor, Payload: mustJSON(map[string]int{"branch": s.proj.Branch() + 1})})
	return err
}

// Note records an event on behalf of a front end (approval message posted,
// click refused, run interrupted by a restart). Type is usually EvNote.
func (a *Agent) Note(session, typ, actor string, payload any) (store.Event, error) {
	evs, err := a.appendSession(session, store.Event{Type: typ, Actor: actor, Payload: mustJSON(payload)})
	if err != nil {
		return store.Event{}, err
	}
	return evs[0], nil
}

// NoteSync records an event without waiting for a running turn of the
// session (Note waits for it). Use it from click handlers while the turn
// blocks on an approval.
func (a *Agent) NoteSync(session, typ, actor string, payload any) (store.Event, error) {
	evs, err := a.cfg.Store.Append(context.Background(), store.Event{Session: session, Type: typ, Actor: actor, Payload: mustJSON(payload)})
	if err != nil {
		return store.Event{}, fmt.Errorf("record %s: %w", typ, err)
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
	defer s.smu.Unlock()
	return s.status
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
