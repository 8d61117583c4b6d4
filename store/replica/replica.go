// Package replica replicates thinbot's event chain over raft
// (github.com/hashicorp/raft, its log in raft-boltdb's bbolt file), so that
// several nodes hold the same chain and any of them can lead.
//
// # The model
//
// Every batch of Appends on the leader becomes one raft entry (its stored
// lines, sequenced on the chain head: store.Options.Replicate is
// Node.Replicate). It is committed once a majority of the nodes has it in
// its raft log, and applied on every node, the leader included, by the
// state machine: the node's own store (journal and bbolt index,
// store.DB.ApplyLines). An Append returns once its entry is committed and
// applied on the leader; so "committed" means "in the logs of a majority",
// and each node's chain is a verifiable copy (thinbot audit verify gives the
// same head on each). A follower's Append fails (raft.ErrNotLeader): the
// layers above run on the leader only.
//
// An entry formed on a head that has moved (a new leader that had not yet
// applied the entries of the old one, or a deposed leader) is refused by
// every node alike with store.ErrStale, and the store forms the batch again.
//
// # Safety checks
//
// The raft transport is mutual TLS (each node's certificate signed by the
// cluster's CA; a peer without one fails the handshake), and the dialling
// node names its cluster id, which the listening node must share. The data
// dir remembers its cluster id and refuses another. Before raft starts,
// Open compares the raft log with the store: a store holding another event
// at a seq the log carries refuses to start, naming the first such seq (as
// restoring a snapshot does).
//
// # Snapshots
//
// A snapshot is the chain up to the head the log has built (a header line,
// then the stored lines), read from the store when raft persists it. A node
// that is new, or far behind, is sent one and appends what it lacks.
//
// # Archives
//
// The state machine applies an archive event (store.TypeArchive, recorded
// on the leader by store.DB.ArchiveReplicated) on every node with
// store.DB.ApplyArchive: the node writes the archive file from its own
// store, which must be the file recorded (or the node fails, as for any
// divergence), and its store is cut at its next start. A snapshot of a cut
// store starts after the archive; its header carries the archive event
// that vouches for that start, which an empty store needs to take it
// (store.DB.ApplyLinesAfter). A node whose store ends before the archive
// cannot take such a snapshot: it fails, saying to move its store aside.
//
// A store cut by an archive while it ran alone seeds a cluster too
// (CatchUpLog): the log's first entry names the archive event that
// vouches for the chain's start, and the state machine takes an entry
// that starts after seq 1 only so, and only as the log's first.
package replica

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/thinbot/thinbot/store"
)

// Peer is one voting member of the cluster.
type Peer struct {
	ID   string // node id, unique in the cluster
	Addr string // raft address, host:port
}

// Config configures Open. Every field but the timeouts and Logger is
// required.
type Config struct {
	ClusterID string
	ID        string // this node's id; one of Peers
	Addr      string // this node's raft address, as the others reach it
	// Bind is the address raft listens on, and whose IP its connections
	// leave from; "" means Addr (it differs behind NAT or a proxy).
	Bind string
	// Peers are the voters the cluster starts with (this node among
	// them), used only when Dir holds no raft state yet: every node of a
	// new cluster must be given the same list.
	Peers []Peer
	// Join makes a node without raft state wait to be added by the
	// leader (Node.AddVoter) instead of creating the cluster from Peers.
	Join bool
	Dir  string // raft log, stable store, snapshots, the cluster id
	// TLS is the transport's mutual TLS: Certificates (this node's),
	// RootCAs and ClientCAs (the cluster's CA), ClientAuth
	// RequireAndVerifyClientCert.
	TLS *tls.Config
	// HeartbeatTimeout and ElectionTimeout are raft's; 0 means 1s each.
	// LeaderLeaseTimeout 0 means 500ms.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// TrailingLogs is how many entries a snapshot leaves in the log; 0
	// means raft's default (10240). A node further behind is sent the
	// snapshot.
	TrailingLogs uint64
	// ApplyTimeout bounds how long Replicate waits to hand an entry to
	// raft; 0 means 10s.
	ApplyTimeout time.Duration
	Logger       *slog.Logger // nil discards
}

// ErrNotStarted is returned by Replicate before Start.
var ErrNotStarted = errors.New("replica: not started")

// Node is this process's member of the cluster. Open it, open the store
// with Replicate as its store.Options.Replicate, then Start it with the
// store. Its methods may be called concurrently.
type Node struct {
	cfg    Config
	log    *slog.Logger
	logs   *raftboltdb.BoltStore
	snaps  *raft.FileSnapshotStore
	layer  *tlsLayer
	trans  *raft.NetworkTransport
	notify chan bool

	mu     sync.Mutex
	raft   *raft.Raft
	fsm    *fsm
	db     *store.DB
	failed error
	failCh chan struct{}
}

// Open checks the data dir's cluster id, opens the raft log and starts
// listening on the raft address; nothing is sent until Start.
func Open(cfg Config) (n *Node, err error) {
	if cfg.ClusterID == "" || cfg.ID == "" || cfg.Addr == "" || cfg.Dir == "" || cfg.TLS == nil {
		return nil, errors.New("replica: cluster id, node id, raft address, data dir and TLS are required")
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = time.Second
	}
	if cfg.ElectionTimeout == 0 {
		cfg.ElectionTimeout = time.Second
	}
	if cfg.LeaderLeaseTimeout == 0 {
		cfg.LeaderLeaseTimeout = 500 * time.Millisecond
	}
	if cfg.ApplyTimeout == 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("replica: data dir: %w", err)
	}
	if err := checkClusterID(cfg.Dir, cfg.ClusterID); err != nil {
		return nil, err
	}
	n = &Node{cfg: cfg, log: log, notify: make(chan bool, 1), failCh: make(chan struct{})}
	defer func() {
		if err != nil {
			n.closeParts()
		}
	}()
	if n.logs, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(cfg.Dir, "raft.db")}); err != nil {
		return nil, fmt.Errorf("replica: raft log: %w", err)
	}
	if n.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, n.hclog("raft-snap")); err != nil {
		return nil, fmt.Errorf("replica: snapshots: %w", err)
	}
	tc := cfg.TLS.Clone()
	tc.ClientAuth = tls.RequireAndVerifyClientCert
	if n.layer, err = newTLSLayer(cfg.Addr, cfg.Bind, cfg.ClusterID, cfg.ID, tc, log); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: n.layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: n.hclog("raft-net"),
	})
	return n, nil
}

// checkClusterID records id in dir, or refuses a dir of another cluster.
func checkClusterID(dir, id string) error {
	p := filepath.Join(dir, "cluster-id")
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
			return fmt.Errorf("replica: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("replica: %w", err)
	}
	if have := strings.TrimSpace(string(b)); have != id {
		return fmt.Errorf("replica: data dir %s belongs to cluster %q, not %q", dir, have, id)
	}
	return nil
}

// Addr is the raft address the node listens on (its port chosen by the
// system where Config.Addr's is 0).
func (n *Node) Addr() string { return n.layer.Addr().String() }

// Start compares the raft log with db (a store that holds other events
// than the log's refuses to start: the error wraps a *store.DivergedError
// naming the first seq), then starts raft over db, creating the cluster
// from Config.Peers if the data dir has no raft state yet.
func (n *Node) Start(db *store.DB) error {
	f := &fsm{db: db, fail: n.setFailed, head: link{Hash: store.ZeroHash}}
	if err := n.precheck(db); err != nil {
		return err
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(n.cfg.ID)
	rc.HeartbeatTimeout = n.cfg.HeartbeatTimeout
	rc.ElectionTimeout = n.cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = n.cfg.LeaderLeaseTimeout
	rc.NotifyCh = n.notify
	if n.cfg.TrailingLogs > 0 {
		rc.TrailingLogs = n.cfg.TrailingLogs
	}
	rc.Logger = n.hclog("raft")
	has, err := raft.HasExistingState(n.logs, n.logs, n.snaps)
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	if !has && !n.cfg.Join && len(n.cfg.Peers) > 1 && db.LastSeq() > 0 {
		// A store with a chain starting a new log among other nodes: an
		// empty peer could win the first election and begin another chain
		// at seq 1, which this store then refuses as diverged. Alone it
		// leads for sure and puts its chain into the log; the others join.
		return fmt.Errorf("replica: this store holds a chain (up to seq %d) and the cluster's log is new: "+
			"start this node as the cluster's only peer, then add the others with join: true (deploy/cluster.md, \"Losing a majority\")", db.LastSeq())
	}
	if !has && !n.cfg.Join {
		var servers []raft.Server
		for _, p := range n.cfg.Peers {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(rc, n.logs, n.logs, n.snaps, n.trans, raft.Configuration{Servers: servers}); err != nil {
			return fmt.Errorf("replica: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, f, n.logs, n.logs, n.snaps, n.trans)
	if err != nil {
		return fmt.Errorf("replica: start: %w", err)
	}
	n.mu.Lock()
	n.raft, n.fsm, n.db = r, f, db
	n.mu.Unlock()
	return nil
}

// CatchUpLog puts into the log the events the leader's store holds beyond
// the head the log has built (a lone node's chain when it became a
// cluster, a survivor's when a new cluster was made from it): the same
// lines, as entries, which this store already holds and the followers
// append. Call it on the leader after Barrier, before it serves.
func (n *Node) CatchUpLog() error {
	n.mu.Lock()
	f, db := n.fsm, n.db
	n.mu.Unlock()
	if f == nil {
		return ErrNotStarted
	}
	for {
		f.mu.Lock()
		head := f.head.Seq
		f.mu.Unlock()
		if head >= db.LastSeq() {
			return nil
		}
		// A store cut by an archive starts after seq 1: the log's first
		// entry names the archive event that vouches for that start.
		var vouch []byte
		if head == 0 {
			base, _, err := db.Base()
			if err != nil {
				return fmt.Errorf("replica: catch up the log: %w", err)
			}
			if base > 0 {
				if _, vouch, err = vouchOf(db, base); err != nil {
					return fmt.Errorf("replica: catch up the log: %w", err)
				}
			}
		}
		var lines [][]byte
		for chunk, err := range db.Lines(head + 1) {
			if err != nil {
				return fmt.Errorf("replica: catch up the log: %w", err)
			}
			lines = append(lines, chunk...)
			if len(lines) >= 4096 {
				break
			}
		}
		if len(lines) == 0 {
			return nil
		}
		if err := n.replicate(vouch, lines); err != nil {
			return fmt.Errorf("replica: catch up the log from seq %d: %w", head+1, err)
		}
		n.log.Info("the log caught up with the store", "to_seq", head+uint64(len(lines)))
	}
}

// precheck walks the raft log after the newest snapshot as the state
// machine will, and compares every line it would apply at a seq the store
// already holds with the store's event there.
func (n *Node) precheck(db *store.DB) error {
	head := link{Hash: store.ZeroHash}
	var from uint64
	if metas, err := n.snaps.List(); err == nil && len(metas) > 0 {
		_, rc, err := n.snaps.Open(metas[0].ID)
		if err != nil {
			return fmt.Errorf("replica: open snapshot: %w", err)
		}
		h, err := readSnapshotHeader(bufio.NewReader(rc))
		rc.Close()
		if err != nil {
			return fmt.Errorf("replica: %w", err)
		}
		head, from = link{Seq: h.Seq, Hash: h.Hash}, metas[0].Index
	}
	first, err := n.logs.FirstIndex()
	if err != nil {
		return fmt.Errorf("replica: raft log: %w", err)
	}
	last, err := n.logs.LastIndex()
	if err != nil {
		return fmt.Errorf("replica: raft log: %w", err)
	}
	held := db.LastSeq()
	// Events up to base were archived here: the log's line at base is
	// compared with the prev of the store's first event.
	base, basePrev, err := db.Base()
	if err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	for i := max(first, from+1); i <= last && i > 0; i++ {
		var l raft.Log
		if err := n.logs.GetLog(i, &l); err != nil {
			return fmt.Errorf("replica: raft log entry %d: %w", i, err)
		}
		if l.Type != raft.LogCommand {
			continue
		}
		vouch, lines, err := decodeEntry(l.Data)
		if err != nil {
			continue
		}
		ls, err := links(lines)
		if err != nil {
			continue
		}
		if _, ok := continues(head, vouch, ls); !ok {
			continue // refused by the state machine too
		}
		for _, k := range ls {
			if k.Seq > held {
				break
			}
			if k.Seq <= base {
				if k.Seq == base && k.Hash != basePrev {
					return fmt.Errorf("replica: raft log entry %d: %w", i, &store.DivergedError{Seq: k.Seq})
				}
				continue
			}
			ev, ok, err := db.Event(k.Seq)
			if err != nil {
				return fmt.Errorf("replica: %w", err)
			}
			if !ok || ev.Hash != k.Hash {
				return fmt.Errorf("replica: raft log entry %d: %w", i, &store.DivergedError{Seq: k.Seq})
			}
		}
		head = ls[len(ls)-1]
	}
	return nil
}

// Replicate is the store's Options.Replicate: it hands lines to raft as one
// entry and waits until it is committed and applied here. It fails with
// raft.ErrNotLeader on a follower, raft.ErrLeadershipLost when the leader
// lost its majority before the entry committed (it may still commit under
// the next leader), or the state machine's answer (store.ErrStale).
func (n *Node) Replicate(lines [][]byte) error {
	return n.replicate(nil, lines)
}

// replicate is Replicate of an entry that starts after the archive event
// vouch, or an ordinary one when vouch is nil.
func (n *Node) replicate(vouch []byte, lines [][]byte) error {
	r := n.r()
	if r == nil {
		return ErrNotStarted
	}
	f := r.Apply(encodeEntry(vouch, lines), n.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return fmt.Errorf("replica: %w", err)
	}
	if err, ok := f.Response().(error); ok && err != nil {
		return err
	}
	return nil
}

func (n *Node) r() *raft.Raft {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.raft
}

// Leadership delivers true when this node becomes the leader and false when
// it stops being one, the latest change only (one reader).
func (n *Node) Leadership() <-chan bool { return n.notify }

// IsLeader says whether this node is the leader now.
func (n *Node) IsLeader() bool {
	r := n.r()
	return r != nil && r.State() == raft.Leader
}

// Leader returns the id and raft address of the leader this node knows of,
// "" for none.
func (n *Node) Leader() (id, addr string) {
	r := n.r()
	if r == nil {
		return "", ""
	}
	a, i := r.LeaderWithID()
	return string(i), string(a)
}

// Barrier blocks until every entry committed before it is applied here (a
// new leader calls it before it serves) or ctx is done.
func (n *Node) Barrier(ctx context.Context) error {
	r := n.r()
	if r == nil {
		return ErrNotStarted
	}
	timeout := time.Minute
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	done := make(chan error, 1)
	go func() { done <- r.Barrier(timeout).Error() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("replica: barrier: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// InSync says whether this node has applied everything it knows to be
// committed and knows a leader: a follower "in sync".
func (n *Node) InSync() bool {
	r := n.r()
	if r == nil {
		return false
	}
	a, _ := r.LeaderWithID()
	return a != "" && r.AppliedIndex() >= r.CommitIndex()
}

// Failed is closed when this node's store could not apply a committed
// entry (it disagrees with the log, or cannot write); Err says why. The
// process should stop: its chain no longer follows the cluster's.
func (n *Node) Failed() <-chan struct{} { return n.failCh }

// Err is the reason Failed was closed, or nil.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.failed
}

func (n *Node) setFailed(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failed == nil {
		n.failed = err
		close(n.failCh)
	}
}

// Servers lists the cluster's current members.
func (n *Node) Servers() ([]Peer, error) {
	r := n.r()
	if r == nil {
		return nil, ErrNotStarted
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("replica: %w", err)
	}
	var out []Peer
	for _, s := range f.Configuration().Servers {
		out = append(out, Peer{ID: string(s.ID), Addr: string(s.Address)})
	}
	return out, nil
}

// AddVoter adds a node to the cluster (on the leader); it catches up from a
// snapshot and the log.
func (n *Node) AddVoter(p Peer) error {
	r := n.r()
	if r == nil {
		return ErrNotStarted
	}
	if err := r.AddVoter(raft.ServerID(p.ID), raft.ServerAddress(p.Addr), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("replica: add %s: %w", p.ID, err)
	}
	return nil
}

// RemoveServer removes a node from the cluster (on the leader).
func (n *Node) RemoveServer(id string) error {
	r := n.r()
	if r == nil {
		return ErrNotStarted
	}
	if err := r.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("replica: remove %s: %w", id, err)
	}
	return nil
}

// Term is raft's current term on this node.
func (n *Node) Term() uint64 {
	r := n.r()
	if r == nil {
		return 0
	}
	t, _ := strconv.ParseUint(r.Stats()["term"], 10, 64)
	return t
}

// TransferLeadership hands the leadership to another node (a leader that
// stops calls it, so that the others need not wait out an election).
func (n *Node) TransferLeadership() error {
	r := n.r()
	if r == nil {
		return ErrNotStarted
	}
	if err := r.LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("replica: leadership transfer: %w", err)
	}
	return nil
}

// Snapshot takes a snapshot now (raft also takes them on its own).
func (n *Node) Snapshot() error {
	r := n.r()
	if r == nil {
		return ErrNotStarted
	}
	if err := r.Snapshot().Error(); err != nil {
		return fmt.Errorf("replica: snapshot: %w", err)
	}
	return nil
}

// Close stops raft (without leaving the cluster) and closes the raft log;
// close the store after it.
func (n *Node) Close() error {
	var errs []error
	if r := n.r(); r != nil {
		errs = append(errs, r.Shutdown().Error())
	}
	errs = append(errs, n.closeParts())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("replica: close: %w", err)
	}
	return nil
}

func (n *Node) closeParts() error {
	var errs []error
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	} else if n.layer != nil {
		errs = append(errs, n.layer.Close())
	}
	if n.logs != nil {
		errs = append(errs, n.logs.Close())
	}
	return errors.Join(errs...)
}

// hclog is raft's logger, writing into the node's slog logger.
func (n *Node) hclog(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: slogWriter{n.log}, Level: hclog.Info, DisableTime: true})
}

// slogWriter passes raft's log lines to slog, one record each.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}

var _ io.Writer = slogWriter{}
