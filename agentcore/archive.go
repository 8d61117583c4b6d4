package agentcore

import (
	"slices"

	"github.com/thinbot/thinbot/store"
)

// OpenSessions lists the sessions of db that an archive must leave live:
// those with a run that never finished, an approval request without a
// decision or a queued message no run handled (what Recover closes at the
// next start). It reads the state index (building it first where it is
// not current) and appends no event. Use it as store.ArchiveOptions.Keep.
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
	slices.Sort(out)
	return slices.Compact(out), nil
}
