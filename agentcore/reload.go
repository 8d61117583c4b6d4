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

// EvConfigReloadRefused is a configuration reload the daemon was asked for
// (by SIGHUP, or by an authenticated POST /-/reload) and did not apply: a
// key that needs a restart changed, or the file did not load. The running
// configuration stayed in force. It answers an auditor's "who tried to
// change the configuration, and when" as EvConfigReloaded answers "who
// changed it". It lives in the chain forever: never rename it.
const EvConfigReloadRefused = "config_reload_refused"

// ConfigReload is what EvConfigReloaded and EvConfigReloadRefused record.
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
	// Error says why a refused reload was not applied (the keys that need
	// a restart, or why the file did not load); empty in EvConfigReloaded.
	// SHA256 is then "" when the file could not be read.
	Error string `json:"error,omitempty"`
}

// RecordConfigReload records an applied reload durably, as actor
// ("system", or "user:NAME" for an authenticated request), and returns the
// event. A daemon records it before the new config takes effect: a reload
// the chain could not record is not applied.
func RecordConfigReload(db *store.DB, actor string, r ConfigReload) (store.Event, error) {
	return recordConfig(db, EvConfigReloaded, actor, r)
}

// RecordConfigReloadRefused records a reload that was asked for and not
// applied, durably, as actor; r.Error says why.
func RecordConfigReloadRefused(db *store.DB, actor string, r ConfigReload) (store.Event, error) {
	return recordConfig(db, EvConfigReloadRefused, actor, r)
}

func recordConfig(db *store.DB, typ, actor string, r ConfigReload) (store.Event, error) {
	if r.Changed == nil {
		r.Changed = []string{}
	}
	evs, err := write(db, nil, durable, []store.Event{{Session: ConfigSession, Type: typ, Actor: actor, Payload: mustJSON(r)}})
	if err != nil {
		return store.Event{}, err // it names the event type
	}
	return evs[0], nil
}
