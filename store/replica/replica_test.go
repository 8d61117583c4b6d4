package replica

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/thinbot/thinbot/store"
)

// testCA is a certificate authority for a test cluster.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "thinbot test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// tlsFor is a node's TLS config: a certificate of ca for 127.0.0.1, and ca
// as the roots of both sides.
func (ca *testCA) tlsFor(t testing.TB, name string) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      ca.pool, ClientCAs: ca.pool, MinVersion: tls.VersionTLS13,
	}
}

// freeAddr reserves a loopback port.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// member is one node of a test cluster: its raft node and its store.
type member struct {
	id   string
	dir  string
	node *Node
	db   *store.DB
	logs *logLines
}

// logLines collects a node's log messages.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// testTimeouts are short raft timeouts, so that a test cluster elects fast.
func testConfig(c Config) Config {
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 300*time.Millisecond, 300*time.Millisecond, 200*time.Millisecond
	return c
}

// startMember opens a node and its store in dir and starts it, with the
// short test timeouts.
func startMember(t testing.TB, cfg Config, dir string) (*member, error) {
	return startMemberWith(t, testConfig(cfg), dir)
}

// startMemberWith is startMember with cfg's timeouts as they are.
func startMemberWith(t testing.TB, cfg Config, dir string) (*member, error) {
	t.Helper()
	ll := &logLines{}
	cfg.Dir = filepath.Join(dir, "raft")
	cfg.Logger = slogTo(ll)
	n, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(filepath.Join(dir, "events.db"), &store.Options{Replicate: n.Replicate})
	if err != nil {
		n.Close()
		return nil, err
	}
	if err := n.Start(db); err != nil {
		n.Close()
		db.Close()
		return nil, err
	}
	m := &member{id: cfg.ID, dir: dir, node: n, db: db, logs: ll}
	t.Cleanup(m.stop)
	return m, nil
}

func (m *member) stop() {
	if m.node != nil {
		m.node.Close()
		m.db.Close()
		m.node = nil
	}
}

// newCluster starts n members of one cluster on loopback, with the short
// test timeouts.
func newCluster(t testing.TB, ca *testCA, n int) []*member {
	return newClusterWith(t, ca, n, testConfig)
}

// newClusterWith is newCluster with each member's Config passed through
// conf.
func newClusterWith(t testing.TB, ca *testCA, n int, conf func(Config) Config) []*member {
	t.Helper()
	var peers []Peer
	for i := range n {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: freeAddr(t)})
	}
	var ms []*member
	for _, p := range peers {
		m, err := startMemberWith(t, conf(Config{ClusterID: "c1", ID: p.ID, Addr: p.Addr, Peers: peers, TLS: ca.tlsFor(t, p.ID)}), t.TempDir())
		if err != nil {
			t.Fatalf("start %s: %v", p.ID, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// leader waits for one of ms to lead and returns it.
func leader(t testing.TB, ms []*member) *member {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		for _, m := range ms {
			if m.node != nil && m.node.IsLeader() {
				if err := m.node.Barrier(ctx); err == nil {
					return m
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("no leader within 30s")
		case <-time.After(20 * time.Millisecond): // polling raft's state; no event to wait on across nodes
		}
	}
}

// waitHead waits until m's store reaches seq.
func waitHead(t testing.TB, m *member, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := m.db.Wait(ctx, seq-1); err != nil {
		t.Fatalf("%s: waiting for seq %d (at %d): %v", m.id, seq, m.db.LastSeq(), err)
	}
}

func appendN(t testing.TB, db *store.DB, n int, session string) {
	t.Helper()
	for i := range n {
		if _, err := db.Append(t.Context(), store.Event{Session: session, Type: "user_message", Actor: "user:alice",
			Payload: []byte(fmt.Sprintf(`{"text":"m%d"}`, i))}); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
}

func verified(t testing.TB, m *member) (uint64, string) {
	t.Helper()
	rep, err := m.db.Verify(t.Context(), nil)
	if err != nil || !rep.OK {
		t.Fatalf("%s: verify: %v %+v", m.id, err, rep)
	}
	return rep.LastSeq, rep.LastHash
}

// TestClusterReplicatesTheChain: three nodes over TLS; the leader's Appends
// reach every store, which verify to the same head; a follower's Append is
// refused; after the leader stops, another leads and the chain goes on.
func TestClusterReplicatesTheChain(t *testing.T) {
	ms := newCluster(t, newCA(t), 3)
	l := leader(t, ms)
	appendN(t, l.db, 20, "s1")
	for _, m := range ms {
		waitHead(t, m, 20)
	}
	var heads []string
	for _, m := range ms {
		seq, h := verified(t, m)
		heads = append(heads, fmt.Sprintf("%d:%s", seq, h))
	}
	if heads[0] != heads[1] || heads[1] != heads[2] {
		t.Fatalf("heads differ: %v", heads)
	}
	for _, m := range ms {
		if m == l {
			continue
		}
		_, err := m.db.Append(t.Context(), store.Event{Session: "s1", Type: "user_message", Actor: "user:a"})
		if !errors.Is(err, raft.ErrNotLeader) {
			t.Errorf("%s (follower): Append = %v, want ErrNotLeader", m.id, err)
		}
	}
	// The leader goes; the two others elect one and go on.
	l.stop()
	var rest []*member
	for _, m := range ms {
		if m != l {
			rest = append(rest, m)
		}
	}
	l2 := leader(t, rest)
	appendN(t, l2.db, 5, "s2")
	for _, m := range rest {
		waitHead(t, m, 25)
	}
	s1, h1 := verified(t, rest[0])
	s2, h2 := verified(t, rest[1])
	if s1 != 25 || s1 != s2 || h1 != h2 {
		t.Fatalf("after failover: %d:%s vs %d:%s", s1, h1, s2, h2)
	}
}

// TestClusterRefusesStrangers: a node of another cluster id, and a node
// whose certificate is not of the cluster's CA, get no connection; a data
// dir of another cluster refuses to open.
func TestClusterRefusesStrangers(t *testing.T) {
	ca := newCA(t)
	ms := newCluster(t, ca, 1)
	l := leader(t, ms)
	target := raft.ServerAddress(l.node.Addr())

	other, err := newTLSLayer("127.0.0.1:0", "", "c2", "intruder", ca.tlsFor(t, "intruder"), slogTo(&logLines{}))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if c, err := other.Dial(target, 5*time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
		if c != nil {
			c.Close()
		}
		t.Errorf("dial with cluster id c2 = %v, want refused", err)
	}
	// The forger trusts any server; the cluster must not trust it.
	forgedTLS := newCA(t).tlsFor(t, "forged")
	forgedTLS.InsecureSkipVerify = true
	forged, err := newTLSLayer("127.0.0.1:0", "", "c1", "forged", forgedTLS, slogTo(&logLines{}))
	if err != nil {
		t.Fatal(err)
	}
	defer forged.Close()
	if c, err := forged.Dial(target, 5*time.Second); err == nil {
		c.Close()
		t.Error("a peer with a certificate of another CA was let in")
	}
	same, err := newTLSLayer("127.0.0.1:0", "", "c1", "n9", ca.tlsFor(t, "n9"), slogTo(&logLines{}))
	if err != nil {
		t.Fatal(err)
	}
	defer same.Close()
	c, err := same.Dial(target, 5*time.Second)
	if err != nil {
		t.Fatalf("a peer of the cluster: %v", err)
	}
	c.Close()
	for _, want := range []string{`names cluster id \"c2\"`, "tls:"} {
		if !l.logs.has(want) {
			t.Errorf("no log line with %q", want)
		}
	}

	dir := t.TempDir()
	if _, err := Open(Config{ClusterID: "c1", ID: "a", Addr: "127.0.0.1:0", Dir: dir, TLS: ca.tlsFor(t, "a")}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Config{ClusterID: "c2", ID: "a", Addr: "127.0.0.1:0", Dir: dir, TLS: ca.tlsFor(t, "a")})
	if err == nil || !strings.Contains(err.Error(), `belongs to cluster "c1"`) {
		t.Errorf("Open of c1's data dir as c2 = %v", err)
	}
}

// TestStartRefusesDivergedStore: a node whose store holds another event
// than the raft log at some seq refuses to start and names that seq.
func TestStartRefusesDivergedStore(t *testing.T) {
	ca := newCA(t)
	addr := freeAddr(t)
	cfg := Config{ClusterID: "c1", ID: "n1", Addr: addr, Peers: []Peer{{ID: "n1", Addr: addr}}, TLS: ca.tlsFor(t, "n1")}
	dir := t.TempDir()
	m, err := startMember(t, cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, []*member{m})
	appendN(t, m.db, 6, "s")
	m.stop()

	// Someone rewrites the store from seq 4 on (a store of its own, put in
	// place of the node's).
	db, err := store.Open(filepath.Join(dir, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for chunk, err := range db.Lines(0) {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, chunk...)
	}
	db.Close()
	forgedDir := t.TempDir()
	fdb, err := store.Open(filepath.Join(forgedDir, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fdb.ApplyLines(lines[:3]); err != nil {
		t.Fatal(err)
	}
	appendN(t, fdb, 3, "mallory")
	fdb.Close()

	_, err = startMember(t, cfg, dirWithRaftOf(t, dir, forgedDir))
	var de *store.DivergedError
	if !errors.As(err, &de) || de.Seq != 4 {
		t.Fatalf("start over a rewritten store = %v, want a DivergedError at seq 4", err)
	}
}

// dirWithRaftOf is a new node dir with the raft state of raftDir and the
// store of storeDir.
func dirWithRaftOf(t *testing.T, raftDir, storeDir string) string {
	t.Helper()
	out := t.TempDir()
	if err := os.CopyFS(filepath.Join(out, "raft"), os.DirFS(filepath.Join(raftDir, "raft"))); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"events.db", "events.db.state", "audit.jsonl"} {
		b, err := os.ReadFile(filepath.Join(storeDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// slogTo is a logger writing text lines to w.
func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestLoneNodeBecomesClusterAndGrows: a store written by a lone thinbot
// becomes a cluster's chain (its leader puts the events into the log), and
// a node added later catches up from a snapshot and the log, to the same
// verified head.
func TestLoneNodeBecomesClusterAndGrows(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	lone, err := store.Open(filepath.Join(dir, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, lone, 5, "before")
	lone.Close()

	a := Peer{ID: "a", Addr: freeAddr(t)}
	// A snapshot keeps one entry in the log: b must be sent the snapshot.
	ma, err := startMember(t, Config{ClusterID: "c1", ID: "a", Addr: a.Addr, Peers: []Peer{a}, TLS: ca.tlsFor(t, "a"), TrailingLogs: 1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, []*member{ma})
	if err := ma.node.CatchUpLog(); err != nil {
		t.Fatal(err)
	}
	appendN(t, ma.db, 2, "after")
	if err := ma.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	appendN(t, ma.db, 1, "after-snapshot")

	b := Peer{ID: "b", Addr: freeAddr(t)}
	mb, err := startMember(t, Config{ClusterID: "c1", ID: "b", Addr: b.Addr, Join: true, TLS: ca.tlsFor(t, "b")}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := ma.node.AddVoter(b); err != nil {
		t.Fatal(err)
	}
	waitHead(t, mb, 8)
	appendN(t, ma.db, 1, "two nodes")
	waitHead(t, mb, 9)
	sa, ha := verified(t, ma)
	sb, hb := verified(t, mb)
	if sa != 9 || sa != sb || ha != hb {
		t.Fatalf("heads: a %d:%s, b %d:%s", sa, ha, sb, hb)
	}
	servers, err := ma.node.Servers()
	if err != nil || len(servers) != 2 {
		t.Fatalf("Servers = %v, %v", servers, err)
	}
	if !mb.logs.has("snapshot restore progress") {
		t.Error("b did not install a snapshot")
	}
}

// TestChainSeedsOnlyAlone: a store that holds a chain does not start a new
// log among several peers (an empty peer could lead first and begin
// another chain); it says to start it alone and add the others.
func TestChainSeedsOnlyAlone(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	lone, err := store.Open(filepath.Join(dir, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, lone, 3, "before")
	lone.Close()
	a, b := Peer{ID: "a", Addr: freeAddr(t)}, Peer{ID: "b", Addr: freeAddr(t)}
	_, err = startMember(t, Config{ClusterID: "c1", ID: "a", Addr: a.Addr, Peers: []Peer{a, b}, TLS: ca.tlsFor(t, "a")}, dir)
	if err == nil || !strings.Contains(err.Error(), "only peer") || !strings.Contains(err.Error(), "seq 3") {
		t.Fatalf("start with a chain among two peers = %v; want the only-peer refusal", err)
	}
	// Alone it starts, and leads.
	m, err := startMember(t, Config{ClusterID: "c1", ID: "a", Addr: a.Addr, Peers: []Peer{a}, TLS: ca.tlsFor(t, "a")}, dir)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, []*member{m})
}
