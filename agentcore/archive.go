package agentcore

import (
	"slices"
	"strings"
	"time"

	"github.com/thinbot/thinbot/store"
)

// OpenSessions lists the sessions of db that an archive must leave live:
// those with a run that never finished, an approval request without a
// decision or a queued message no run handled (what Recover closes at the
// next start), and the thread of every alert group still firing, whose
// alert events are what maps the group's next notification (its resolve)
// to that thread (AlertGroups). It reads the state index (building it
// first where it is not current) and the chain's alert events, and
// appends no event. Use it as store.ArchiveOptions.Keep.
func OpenSessions(db *store.DB) ([]string, error) {
	if err := useIndex(db); err != nil {
		return nil, err
	}
	u, _, _, err := unfinished(db)
	if err != nil {
		return nil, err
	}
	out := append([]string{}, u.Runs...)
	out = append(out, sessionsOf(u.Approvals)...)
	for _, q := range u.Queued {
		out = append(out, q.Session)
	}
	groups, _, err := AlertGroups(db, time.Now())
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.Status != "resolved" {
			out = append(out, g.Session)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// LogSession reports whether a session is a log of the kernel's standalone
// events (system:verify's daily checkpoints, system:skills' notes: the
// "system:" sessions), which span the whole chain and which an archive's
// cut may split. Use it as store.ArchiveOptions.Log.
func LogSession(id string) bool { return strings.HasPrefix(id, "system:") }
