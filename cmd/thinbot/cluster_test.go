package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigCheckCluster: the cluster section's mistakes are each named:
// a node that is not among the peers, two nodes (which cannot outvote each
// other), a raft address without a port, a missing TLS file and key.
func TestConfigCheckCluster(t *testing.T) {
	out, err := checkConfig(t, `  - {id: "*", workspace: "WS", approvers: [k9xq3bobbobbobbobbobbobbob]}
cluster:
  id: prod
  node_id: n9
  peers:
    - {id: n1, raft_address: "127.0.0.1", http_address: "http://127.0.0.1:8081"}
    - {id: n2, raft_address: "127.0.0.1:7302", http_address: "ftp://x"}
`)
	if err == nil {
		t.Fatal("config check passed")
	}
	for _, want := range []string{
		`cluster.node_id "n9" is not one of cluster.peers`,
		"two nodes cannot outvote each other",
		`cluster.peers[0]: raft_address "127.0.0.1" is not a unique host:port`,
		`cluster.peers[1]: http_address "ftp://x" is not an http(s) URL`,
		"cluster.tls.key_file is required",
		"cluster.action_key_file is required",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestArchiveRefusesAClusterNode: audit archive does not cut a cluster
// node's store (the cut is not replicated).
func TestArchiveRefusesAClusterNode(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "events.db")
	os.WriteFile(clusterMark(db), []byte("cluster c1 node n1 data_dir x\n"), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"audit", "archive", "--db", db, "--upto", "5", "--dir", dir})
	if err == nil || !strings.Contains(err.Error(), "cluster node") {
		t.Fatalf("audit archive of a cluster node's store = %v", err)
	}
	if _, serr := os.Stat(db); serr == nil {
		t.Error("the store was opened")
	}
}

// TestLeaderOnlyChatClient: the chat client of a node that is not the
// leader refuses writes (and lets reads through); the leader's passes
// both. A lone node's client is not wrapped.
func TestLeaderOnlyChatClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Method) }))
	defer srv.Close()
	leading := false
	hc := clusterChat{leader: func() bool { return leading }}.client(srv.Client())
	if _, err := hc.Post(srv.URL, "text/plain", strings.NewReader("x")); !errors.Is(err, errNotLeader) {
		t.Errorf("a follower's POST = %v, want errNotLeader", err)
	}
	if resp, err := hc.Get(srv.URL); err != nil {
		t.Errorf("a follower's GET: %v", err)
	} else {
		resp.Body.Close()
	}
	leading = true
	resp, err := hc.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatalf("the leader's POST: %v", err)
	}
	resp.Body.Close()
	if c := (clusterChat{}).client(srv.Client()); c != srv.Client() {
		t.Error("a lone node's client was wrapped")
	}
	if (clusterChat{}).slackClient() != nil {
		t.Error("a lone node's Slack client is not the adapter's own")
	}
}

// TestClusterDataDirIsProtected: a raft data dir outside the state dir is
// hidden from commands like the state dir (it holds the chain too).
func TestClusterDataDirIsProtected(t *testing.T) {
	c := &daemonConfig{StateDir: "/var/lib/thinbot"}
	c.Cluster.ID, c.Cluster.DataDir = "c1", "/srv/raft"
	if p := c.protectedPaths("/etc/thinbot/thinbot.yaml"); !slices.Contains(p, "/srv/raft") {
		t.Errorf("protected paths %v lack the raft data dir", p)
	}
}
