package agentcore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/thinbot/thinbot/store"
)

// ConsoleSession is the session a cluster's web console records its
// logins and logouts in (EvConsoleLogin, EvConsoleLogout), so that the
// next leader checks the same logins. Like the other "system:" sessions it
// has no user message and never becomes a chat thread.
const ConsoleSession = "system:console"

// RecordConsoleLogin records durably a login to the console, as
// "user:"+p.User.
func RecordConsoleLogin(db *store.DB, p ConsoleLoginPayload) error {
	_, err := write(db, nil, durable, []store.Event{{Session: ConsoleSession, Type: EvConsoleLogin, Actor: "user:" + p.User, Payload: mustJSON(p)}})
	return err
}

// RecordConsoleLogout records durably the end of a console login, as
// "user:"+p.User for a logout, "system" otherwise.
func RecordConsoleLogout(db *store.DB, p ConsoleLogoutPayload) error {
	actor := "system"
	if p.Why == LogoutByUser {
		actor = "user:" + p.User
	}
	_, err := write(db, nil, durable, []store.Event{{Session: ConsoleSession, Type: EvConsoleLogout, Actor: actor, Payload: mustJSON(p)}})
	return err
}

// ConsoleLogins returns the console logins recorded in db that are live at
// now (their Until after it) and not ended by a later EvConsoleLogout, by
// session key. It reads ConsoleSession through the session index from the
// chain's event at now-within: a login is recorded no longer than within
// before it expires (the console's login length), so earlier events cannot
// matter.
func ConsoleLogins(db *store.DB, now time.Time, within time.Duration) (map[string]ConsoleLoginPayload, error) {
	from, err := db.SeqAt(now.Add(-within))
	if err != nil {
		return nil, err
	}
	out := map[string]ConsoleLoginPayload{}
	for ev, err := range db.Events(ConsoleSession, from) {
		if err != nil {
			return nil, err
		}
		switch ev.Type {
		case EvConsoleLogin:
			var p ConsoleLoginPayload
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				return nil, fmt.Errorf("agentcore: decode %s event %d: %w", ev.Type, ev.Seq, err)
			}
			out[p.Key] = p
		case EvConsoleLogout:
			var p ConsoleLogoutPayload
			if err := json.Unmarshal(ev.Payload, &p); err != nil {
				return nil, fmt.Errorf("agentcore: decode %s event %d: %w", ev.Type, ev.Seq, err)
			}
			delete(out, p.Key)
		}
	}
	for k, p := range out {
		if !now.Before(p.Until) {
			delete(out, k)
		}
	}
	return out, nil
}
