package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/store/replica"
)

// clusterConfig is the config's cluster section (deploy/cluster.md): with
// it, the chain is replicated over raft among the peers, and this node
// serves chat only while it leads. Without it thinbot runs alone.
type clusterConfig struct {
	// ID names the cluster; a node of another cluster is refused.
	ID string `yaml:"id"`
	// NodeID is this node's id: one of Peers.
	NodeID string        `yaml:"node_id"`
	Peers  []clusterPeer `yaml:"peers"`
	TLS    struct {
		CertFile string `yaml:"cert_file" secret:"no"`
		KeyFile  string `yaml:"key_file" secret:"file"`
		CAFile   string `yaml:"ca_file" secret:"no"`
	} `yaml:"tls"`
	// DataDir holds the raft log and snapshots; "" means STATE_DIR/raft.
	DataDir string `yaml:"data_dir"`
	// ActionKeyFile is the key that signs the chat buttons, the same file
	// on every node, so that a button the old leader posted works on the
	// new one.
	ActionKeyFile string `yaml:"action_key_file" secret:"file"`
	// Join makes a node without raft state wait to be added to a running
	// cluster (POST /-/cluster/members on any node) instead of creating
	// one from peers.
	Join bool `yaml:"join"`
	// HeartbeatTimeout and ElectionTimeout are raft's; unset means 1s.
	HeartbeatTimeout duration `yaml:"heartbeat_timeout"`
	ElectionTimeout  duration `yaml:"election_timeout"`
}

// clusterPeer is one node of the cluster.
type clusterPeer struct {
	ID          string `yaml:"id"`
	RaftAddress string `yaml:"raft_address"`
	// HTTPAddress is the URL of the node's listener (listen), as the
	// other nodes reach it: followers forward to the leader's.
	HTTPAddress string `yaml:"http_address"`
	// RaftBind is where the node listens for raft, when raft_address is
	// not its own (NAT, a proxy); "" means raft_address.
	RaftBind string `yaml:"raft_bind"`
	// ConsoleAddress is the URL of the node's web console (web.listen),
	// as the others reach it: a follower's console listener forwards to
	// the leader's. Required when the config has web.listen.
	ConsoleAddress string `yaml:"console_address"`
}

func (cc *clusterConfig) configured() bool {
	return cc.ID != "" || cc.NodeID != "" || len(cc.Peers) > 0
}

func (cc *clusterConfig) resolvePaths(base string) {
	for _, p := range []*string{&cc.TLS.CertFile, &cc.TLS.KeyFile, &cc.TLS.CAFile, &cc.DataDir, &cc.ActionKeyFile} {
		*p = rel(base, *p)
	}
}

// dataDir is the raft data dir of a node whose state dir is stateDir.
func (cc *clusterConfig) dataDir(stateDir string) string {
	if cc.DataDir != "" {
		return cc.DataDir
	}
	return filepath.Join(stateDir, "raft")
}

// self is this node's peer entry.
func (cc *clusterConfig) self() (clusterPeer, bool) {
	for _, p := range cc.Peers {
		if p.ID == cc.NodeID {
			return p, true
		}
	}
	return clusterPeer{}, false
}

// check checks the cluster section.
func (cc *clusterConfig) check(bad func(string, ...any), who daemonUser, consoleListen string) {
	if !cc.configured() {
		return
	}
	if cc.ID == "" {
		bad("cluster.id is required (a name every node of the cluster shares)")
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	for i, p := range cc.Peers {
		if p.ID == "" || ids[p.ID] {
			bad("cluster.peers[%d]: id %q is empty or not unique", i, p.ID)
		}
		ids[p.ID] = true
		if _, port, err := net.SplitHostPort(p.RaftAddress); err != nil || port == "0" || addrs[p.RaftAddress] {
			bad("cluster.peers[%d]: raft_address %q is not a unique host:port", i, p.RaftAddress)
		}
		addrs[p.RaftAddress] = true
		if u, err := url.Parse(p.HTTPAddress); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("cluster.peers[%d]: http_address %q is not an http(s) URL", i, p.HTTPAddress)
		}
		if u, err := url.Parse(p.ConsoleAddress); consoleListen != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			bad("cluster.peers[%d]: console_address %q is not an http(s) URL (web.listen is set: followers forward the console to the leader's)", i, p.ConsoleAddress)
		}
	}
	if _, ok := cc.self(); !ok {
		bad("cluster.node_id %q is not one of cluster.peers", cc.NodeID)
	}
	if len(cc.Peers) == 2 {
		bad("cluster.peers: two nodes cannot outvote each other: a cluster of two stops when either fails; use three (deploy/cluster.md)")
	}
	for key, p := range map[string]string{"cluster.tls.cert_file": cc.TLS.CertFile, "cluster.tls.key_file": cc.TLS.KeyFile,
		"cluster.tls.ca_file": cc.TLS.CAFile, "cluster.action_key_file": cc.ActionKeyFile} {
		if p == "" {
			bad("%s is required", key)
		}
	}
	for key, p := range map[string]string{"cluster.tls.key_file": cc.TLS.KeyFile, "cluster.action_key_file": cc.ActionKeyFile} {
		if p != "" {
			if err := checkSecretFileAs(p, who); err != nil {
				bad("%s: %v", key, err)
			}
		}
	}
	if cc.TLS.CertFile != "" && cc.TLS.KeyFile != "" && cc.TLS.CAFile != "" {
		if _, err := cc.tlsConfig(); err != nil {
			bad("cluster.tls: %v", err)
		}
	}
}

// tlsConfig is the raft transport's mutual TLS from the files.
func (cc *clusterConfig) tlsConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cc.TLS.CertFile, cc.TLS.KeyFile)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(cc.TLS.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", cc.TLS.CAFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// errStopped ends serve without an error: it was stopped while following.
var errStopped = errors.New("stopped while following")

// errLeadershipLost ends serve with an error, so that the service manager
// starts it again, as a follower: a node that lost its leadership stops
// everything it led (chat, runs, schedules) at once.
var errLeadershipLost = errors.New("this node lost the cluster's leadership: exiting, to start again as a follower")

// openStore opens the daemon's store: alone, or (cluster) replicated
// through d.node.
func (d *daemon) openStore() (*store.DB, error) {
	c := d.c
	path := filepath.Join(c.StateDir, "events.db")
	if !c.Cluster.configured() {
		return store.Open(path, &store.Options{Logger: d.logger})
	}
	cc := &c.Cluster
	// The mark that tells thinbot audit archive this store is a cluster's.
	mark := fmt.Sprintf("cluster %s node %s data_dir %s\n", cc.ID, cc.NodeID, cc.dataDir(c.StateDir))
	if err := os.WriteFile(clusterMark(path), []byte(mark), 0o600); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	tc, err := cc.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster tls: %w", err)
	}
	self, _ := cc.self()
	var peers []replica.Peer
	for _, p := range cc.Peers {
		peers = append(peers, replica.Peer{ID: p.ID, Addr: p.RaftAddress})
	}
	if d.node, err = replica.Open(replica.Config{ClusterID: cc.ID, ID: cc.NodeID, Addr: self.RaftAddress, Bind: self.RaftBind, Peers: peers, Join: cc.Join,
		Dir: cc.dataDir(c.StateDir), TLS: tc, HeartbeatTimeout: cc.HeartbeatTimeout.Duration, ElectionTimeout: cc.ElectionTimeout.Duration,
		Logger: d.logger.With("component", "raft")}); err != nil {
		return nil, err
	}
	db, err := store.Open(path, &store.Options{Logger: d.logger, Replicate: d.node.Replicate})
	if err != nil {
		return nil, err
	}
	if err := d.node.Start(db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// follow serves as a follower until this node leads (it returns nil once
// every entry committed before is applied here) or ctx is done
// (errStopped). A follower's listener answers /healthz and /readyz
// ("follower, in sync" once it has applied what it knows to be committed)
// and forwards every other request to the leader's listener.
func (d *daemon) follow(ctx context.Context) error {
	if d.node == nil {
		return nil
	}
	logger := d.logger
	mux := http.NewServeMux()
	healthz(mux)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		id, _ := d.node.Leader()
		if !d.node.InSync() {
			http.Error(w, "follower, not in sync (leader: "+strconv.Quote(id)+")", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "follower, in sync (leader: %s)\n", id)
	})
	mux.Handle("/", d.forwarder(func(p clusterPeer) string { return p.HTTPAddress }))
	srvCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	addr, wait, err := listenAndServe(srvCtx, d.c.Listen, mux, logger)
	if err != nil {
		stop()
		return fmt.Errorf("listen: %w", err)
	}
	waitConsole := func() {}
	defer func() { stop(); wait(); waitConsole() }()
	if d.c.Web.Listen != "" {
		// The console: logins and everything else, at the leader's.
		if _, waitConsole, err = listenAndServe(srvCtx, d.c.Web.Listen, d.forwarder(func(p clusterPeer) string { return p.ConsoleAddress }), logger); err != nil {
			waitConsole = func() {}
			return fmt.Errorf("web console listen: %w", err)
		}
	}
	logger.Info("thinbot following", "node", d.c.Cluster.NodeID, "listen", addr.String())
	for {
		select {
		case <-ctx.Done():
			return errStopped
		case <-d.node.Failed():
			return d.node.Err()
		case leading := <-d.node.Leadership():
			if !leading {
				continue
			}
		}
		if !d.prepareToLead(ctx) {
			continue
		}
		d.leaderSince = time.Now()
		// The chat's catch-up starts at the old leader's last event: the
		// new leader's own (recovery, leader_elected) would hide the
		// messages that arrived in between.
		if seq := d.db.LastSeq(); seq > 0 {
			if ev, ok, err := d.db.Event(seq); err == nil && ok {
				d.catchUpFrom = ev.Time
			}
		}
		logger.Info("this node leads the cluster", "node", d.c.Cluster.NodeID)
		return nil
	}
}

// prepareToLead applies every committed entry (a barrier) and puts what the
// store holds beyond the log into it (CatchUpLog), retrying each second
// while this node leads: a leader that gave up would lead without serving.
// It reports whether the node is ready to serve as the leader.
func (d *daemon) prepareToLead(ctx context.Context) bool {
	for d.node.IsLeader() {
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := d.node.Barrier(bctx)
		cancel()
		if err == nil {
			err = d.node.CatchUpLog()
		}
		if err == nil {
			return true
		}
		d.logger.Warn("new leader could not apply the log before serving; trying again", "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
	return false
}

// forwarder sends a follower's requests to the leader's listener at the
// address addr gives of a peer: alert webhooks, chat callbacks (button
// clicks), reloads and admin requests on the main listener; logins and the
// rest on the console's.
func (d *daemon) forwarder(addr func(clusterPeer) string) http.Handler {
	peers := map[string]*url.URL{}
	for _, p := range d.c.Cluster.Peers {
		if u, err := url.Parse(addr(p)); err == nil && u.Host != "" {
			peers[p.ID] = u
		}
	}
	fail := func(w http.ResponseWriter, r *http.Request, err error) {
		d.logger.Warn("forward to the leader", "path", r.URL.Path, "err", err)
		http.Error(w, "no cluster leader reachable; try again", http.StatusServiceUnavailable)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := d.node.Leader()
		target := peers[id]
		if target == nil || id == d.c.Cluster.NodeID {
			fail(w, r, fmt.Errorf("no leader known (leader id %q)", id))
			return
		}
		p := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
				pr.Out.Host = pr.In.Host
			},
			ErrorHandler: fail,
		}
		p.ServeHTTP(w, r)
	})
}

// leading returns ctx, cancelled also when this node stops leading or its
// store stops following the log, and the function that stops watching and
// says which (errLeadershipLost, the node's error, or nil).
func (d *daemon) leading(ctx context.Context) (context.Context, func() error) {
	if d.node == nil {
		return ctx, func() error { return nil }
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-d.node.Failed():
				d.logger.Error("this node's store stopped following the cluster", "err", d.node.Err())
				cancel()
				done <- d.node.Err()
				return
			case l := <-d.node.Leadership():
				if !l {
					d.logger.Error("lost the cluster's leadership: stopping chat, runs and schedules", "node", d.c.Cluster.NodeID)
					cancel()
					done <- errLeadershipLost
					return
				}
			}
		}
	}()
	return ctx, func() error { cancel(); return <-done }
}

// recordLeader records this node's takeover (leader_elected) with what it
// closed (recoverChain), once it leads.
func (d *daemon) recordLeader() error {
	if d.node == nil {
		return nil
	}
	p := agentcore.LeaderElectedPayload{Node: d.c.Cluster.NodeID, Term: d.node.Term(), Interrupted: d.unfinished.Runs}
	for _, a := range d.unfinished.Carried {
		p.Approvals = append(p.Approvals, a.RequestID)
	}
	for _, a := range d.unfinished.Approvals {
		p.Expired = append(p.Expired, a.RequestID)
	}
	ev, err := agentcore.RecordLeaderElected(d.db, p)
	if err != nil {
		return fmt.Errorf("record leader_elected: %w", err)
	}
	d.logger.Info("leader_elected recorded", "seq", ev.Seq, "node", p.Node, "term", p.Term,
		"took_ms", time.Since(d.leaderSince).Milliseconds())
	return nil
}

// closeNode stops raft before the store closes; a leader that stops hands
// its leadership over first, so that the others need not wait for an
// election timeout.
func (d *daemon) closeNode() error {
	if d.node == nil {
		return nil
	}
	if d.node.IsLeader() {
		if err := d.node.TransferLeadership(); err != nil {
			d.logger.Warn("hand over the leadership", "err", err)
		}
	}
	return d.node.Close()
}

// clusterActionKey reads the cluster's shared button key (at least 32
// bytes); unlike a lone node's it is never made here: every node must have
// the same.
func clusterActionKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster action key: %w", err)
	}
	if len(b) < 32 {
		return nil, fmt.Errorf("cluster action key %s: %d bytes, want at least 32 (head -c 32 /dev/urandom > FILE, copied to every node)", path, len(b))
	}
	return b, nil
}

// consoleLoginKey is the key of a cluster's console logins, nil for a lone
// daemon: an HMAC of the cluster's action key (the same file on every
// node) under a label of its own, so that every node's console checks the
// cookies the others signed (and the session keys the chain records match)
// while the key that signs chat buttons signs nothing else.
func (d *daemon) consoleLoginKey() ([]byte, error) {
	if !d.c.Cluster.configured() || d.c.Web.Listen == "" {
		return nil, nil
	}
	k, err := clusterActionKey(d.c.Cluster.ActionKeyFile)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte("thinbot console login v1"))
	return m.Sum(nil), nil
}

// recoverChain is the package's recoverChain, for a cluster's new leader:
// what the old one left open is closed as "leader lost", but for the
// approval requests it carries over (agentcore.RecoverLeaderLost).
func (d *daemon) recoverChain() (u agentcore.Unfinished, sessions, seen []string, err error) {
	if d.node == nil {
		return recoverChain(d.db)
	}
	if u, err = agentcore.RecoverLeaderLost(d.db); err != nil {
		return u, nil, nil, err
	}
	seen, err = agentcore.SeenMessages(d.db)
	return u, nil, seen, err
}

// clusterChat is what a cluster's node changes in the chat adapter: where
// its catch-up starts (the zero time: after the chain's last event) and a
// gate on the chat client's writes (nil: none).
type clusterChat struct {
	since  time.Time
	leader func() bool
}

func (d *daemon) clusterChat() clusterChat {
	if d.node == nil {
		return clusterChat{}
	}
	return clusterChat{since: d.catchUpFrom, leader: d.node.IsLeader}
}

// client returns hc, its writes refused once this node is not the
// cluster's leader: a node that lost its leadership posts nothing (an
// error notice about the append its loss failed, say) before it exits.
func (cl clusterChat) client(hc *http.Client) *http.Client {
	if cl.leader == nil {
		return hc
	}
	out := *hc
	out.Transport = leaderOnly{base: hc.Transport, leader: cl.leader}
	return &out
}

// leaderOnly refuses every request but GET and HEAD while this node is not
// the leader.
type leaderOnly struct {
	base   http.RoundTripper
	leader func() bool
}

// errNotLeader is what a refused chat write returns.
var errNotLeader = errors.New("this node is not the cluster's leader: chat writes are refused")

func (l leaderOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !l.leader() {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errNotLeader
	}
	base := l.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(r)
}

// slackClient is the Slack adapter's Web API client: nil (the adapter's
// own) alone, the leader-only gate in a cluster. Slack's Web API is POST
// throughout, so a node that is not the leader makes no call at all.
func (cl clusterChat) slackClient() *http.Client {
	if cl.leader == nil {
		return nil
	}
	return cl.client(&http.Client{})
}

// mountCluster mounts the leader's membership admin endpoints on mux (in a
// cluster): GET /-/cluster/members lists the members; POST (JSON {"id",
// "raft_address"}) adds a node, which catches up from a snapshot and the
// log; DELETE /-/cluster/members/{id} removes one. Each needs a token of
// reload_token_file (Authorization: Bearer), and each change, applied or
// refused, is recorded (cluster_membership) with the token's name.
func (d *daemon) mountCluster(mux *http.ServeMux) {
	if d.node == nil {
		return
	}
	mux.HandleFunc("GET /-/cluster/members", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := d.clusterAdmin(w, r); !ok {
			return
		}
		members, err := d.members()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		for _, m := range members {
			fmt.Fprintln(w, m)
		}
	})
	mux.HandleFunc("POST /-/cluster/members", func(w http.ResponseWriter, r *http.Request) {
		by, ok := d.clusterAdmin(w, r)
		if !ok {
			return
		}
		var p replica.Peer
		var body struct {
			ID          string `json:"id"`
			RaftAddress string `json:"raft_address"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil || body.ID == "" || body.RaftAddress == "" {
			http.Error(w, `send JSON {"id": "n4", "raft_address": "host:port"}`, http.StatusBadRequest)
			return
		}
		p.ID, p.Addr = body.ID, body.RaftAddress
		d.changeMembers(w, agentcore.ClusterMembershipPayload{Op: "add", Node: p.ID, RaftAddress: p.Addr, By: by}, func() error { return d.node.AddVoter(p) })
	})
	mux.HandleFunc("DELETE /-/cluster/members/{id}", func(w http.ResponseWriter, r *http.Request) {
		by, ok := d.clusterAdmin(w, r)
		if !ok {
			return
		}
		id := r.PathValue("id")
		if id == d.c.Cluster.NodeID {
			http.Error(w, "this node leads: remove it from another leader (stop it first, or move the leadership)", http.StatusConflict)
			return
		}
		d.changeMembers(w, agentcore.ClusterMembershipPayload{Op: "remove", Node: id, By: by}, func() error { return d.node.RemoveServer(id) })
	})
	mux.HandleFunc("POST /-/cluster/archive", d.serveClusterArchive)
}

// clusterArchiveRequest is POST /-/cluster/archive's body: the cut's
// limits, as thinbot audit archive's --upto and --before.
type clusterArchiveRequest struct {
	UpTo   uint64 `json:"upto,omitempty"`
	Before string `json:"before,omitempty"`
}

// clusterArchiveAnswer is its answer: the archive event's record, the
// event's seq, and the file on the leader.
type clusterArchiveAnswer struct {
	Record   store.ArchiveRecord `json:"record"`
	EventSeq uint64              `json:"event_seq"`
	Path     string              `json:"path"`
	Node     string              `json:"node"`
}

// serveClusterArchive is POST /-/cluster/archive (on the leader; a
// follower forwards it): with a token of reload_token_file, it archives
// the oldest events cluster-wide (store.DB.ArchiveReplicated: the cut as
// thinbot audit archive makes it, the archive file, the archive event as a
// raft entry). Every node writes the same file into STATE_DIR/archive as
// it applies the event; each node's store shrinks at its next start. It
// answers 200 with a clusterArchiveAnswer, 409 when there is nothing to
// archive.
func (d *daemon) serveClusterArchive(w http.ResponseWriter, r *http.Request) {
	by, ok := d.clusterAdmin(w, r)
	if !ok {
		return
	}
	var body clusterArchiveRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&body); err != nil || (body.UpTo == 0 && body.Before == "") {
		http.Error(w, `send JSON {"upto": SEQ} or {"before": "2006-01-02"} (or both)`, http.StatusBadRequest)
		return
	}
	ao := store.ArchiveOptions{UpTo: body.UpTo, Keep: agentcore.OpenSessions, Log: agentcore.LogSession, Actor: "user:" + by}
	if body.Before != "" {
		t, err := parseDate(body.Before)
		if err != nil {
			http.Error(w, "before: "+err.Error(), http.StatusBadRequest)
			return
		}
		ao.Before = t
	}
	res, err := d.db.ArchiveReplicated(r.Context(), ao)
	switch {
	case errors.Is(err, store.ErrNothingToArchive):
		http.Error(w, err.Error(), http.StatusConflict)
		return
	case err != nil:
		d.logger.Error("cluster archive", "by", by, "err", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	rec := res.Record
	d.logger.Info("cluster archive recorded", "by", by, "first", rec.First, "last", rec.Last, "file", rec.File,
		"file_sha256", rec.FileSHA256, "event_seq", res.Event.Seq)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(clusterArchiveAnswer{Record: rec, EventSeq: res.Event.Seq, Path: res.Path, Node: d.c.Cluster.NodeID})
}

// clusterAdmin authenticates an admin request with reload_token_file's
// tokens and returns the token's name.
func (d *daemon) clusterAdmin(w http.ResponseWriter, r *http.Request) (string, bool) {
	file := d.reload.tokenFile()
	if file == "" {
		http.Error(w, "cluster administration over HTTP is off: set reload_token_file in the config", http.StatusForbidden)
		return "", false
	}
	name, err := reloadCaller(file, r.Header.Get("Authorization"))
	if err != nil {
		d.logger.Warn("cluster administration refused", "remote", r.RemoteAddr, "why", err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="thinbot cluster"`)
		http.Error(w, "unauthorised: "+err.Error(), http.StatusUnauthorized)
		return "", false
	}
	return name, true
}

// changeMembers applies a membership change and records it, applied or
// refused; it answers with the members after it.
func (d *daemon) changeMembers(w http.ResponseWriter, p agentcore.ClusterMembershipPayload, apply func() error) {
	err := apply()
	if err != nil {
		p.Error = err.Error()
	}
	p.Members, _ = d.members()
	if _, rerr := agentcore.RecordClusterMembership(d.db, p); rerr != nil {
		d.logger.Error("record the cluster membership change", "op", p.Op, "node", p.Node, "err", rerr)
		err = errors.Join(err, rerr)
	}
	d.logger.Info("cluster membership", "op", p.Op, "node", p.Node, "by", p.By, "error", p.Error, "members", p.Members)
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	for _, m := range p.Members {
		fmt.Fprintln(w, m)
	}
}

// members are the cluster's members as "id=raft_address".
func (d *daemon) members() ([]string, error) {
	servers, err := d.node.Servers()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.ID+"="+s.Addr)
	}
	return out, nil
}

// clusterMark is the file beside a cluster node's store that says so.
func clusterMark(dbPath string) string { return filepath.Join(filepath.Dir(dbPath), "cluster-node") }

// refuseClusterArchive refuses to archive a cluster node's store alone
// (thinbot audit archive --db): the cut would not be replicated, so the
// node's chain would start where the others' and the log's do not. The
// cluster archives through its running daemons (--config).
func refuseClusterArchive(dbPath string) error {
	b, err := os.ReadFile(clusterMark(dbPath))
	if err != nil {
		return nil
	}
	return fmt.Errorf("%s is the store of a cluster node (%s): archive the cluster's chain through its running nodes, with thinbot audit archive --config FILE (this node's config); see deploy/cluster.md", dbPath, strings.TrimSpace(string(b)))
}
