package agentcore

import "github.com/thinbot/thinbot/store"

// ConfigSession is the session a daemon records its configuration
// reloads in (EvConfigReloaded). Like the other "system:" sessions it has
// no user message and never becomes a chat thread.
const ConfigSession = "system:config"

// EvConfigReloaded is a configuration reload the daemon applied: who asked,
// which sections changed, and the SHA-256 of the file before and after.
// It lives in the chain forever: never rename it.
const EvConfigReloaded = "config_reloaded"

// ConfigReload is what EvConfigReloaded records.
type ConfigReload struct {
	// By is who asked: "SIGHUP", or the name an authenticated POST
	// /-/reload gave.
	By string `json:"by"`
	// File is the config file's path.
	File string `json:"file"`
	// SHA256 is the hash of the file's bytes now in force; Previous that
	// of the config it replaced.
	SHA256   string `json:"sha256"`
	Previous string `json:"previous_sha256"`
	// Changed are the sections that changed: top-level keys of the file,
	// and "policy", "instructions" or "skills" when the files they name
	// changed under the same keys. Empty when nothing changed.
	Changed []string `json:"changed"`
}

// RecordConfigReload records an applied reload durably, as actor
// ("system", or "user:NAME" for an authenticated request), and returns the
// event. A daemon records it before the new config takes effect: a reload
// the chain could not record is not applied.
func RecordConfigReload(db *store.DB, actor string, r ConfigReload) (store.Event, error) {
	if r.Changed == nil {
		r.Changed = []string{}
	}
	evs, err := write(db, nil, durable, []store.Event{{Session: ConfigSession, Type: EvConfigReloaded, Actor: actor, Payload: mustJSON(r)}})
	if err != nil {
		return store.Event{}, err // it names the event type
	}
	return evs[0], nil
}
