package agentcore

import "github.com/thinbot/thinbot/store"

// ClusterSession is the session a cluster's leader changes are recorded in
// (EvLeaderElected). Like the other "system:" sessions it has no user
// message and never becomes a chat thread.
const ClusterSession = "system:cluster"

// RecordLeaderElected records durably that this node took over as the
// cluster's leader, as "system", and returns the event.
func RecordLeaderElected(db *store.DB, p LeaderElectedPayload) (store.Event, error) {
	if p.Interrupted == nil {
		p.Interrupted = []string{}
	}
	if p.Approvals == nil {
		p.Approvals = []string{}
	}
	if p.Expired == nil {
		p.Expired = []string{}
	}
	evs, err := write(db, nil, durable, []store.Event{{Session: ClusterSession, Type: EvLeaderElected, Actor: "system", Payload: mustJSON(p)}})
	if err != nil {
		return store.Event{}, err
	}
	return evs[0], nil
}

// RecordClusterMembership records durably an administrator's change of the
// cluster's members, as "user:"+p.By, and returns the event.
func RecordClusterMembership(db *store.DB, p ClusterMembershipPayload) (store.Event, error) {
	if p.Members == nil {
		p.Members = []string{}
	}
	evs, err := write(db, nil, durable, []store.Event{{Session: ClusterSession, Type: EvClusterMembership, Actor: "user:" + p.By, Payload: mustJSON(p)}})
	if err != nil {
		return store.Event{}, err
	}
	return evs[0], nil
}
