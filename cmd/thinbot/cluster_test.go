package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
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

// TestArchiveRefusesAClusterNodeStore: audit archive --db does not cut a
// cluster node's store alone (the cut would not be replicated); it says
// to go through the running cluster with the node's config.
func TestArchiveRefusesAClusterNodeStore(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "events.db")
	os.WriteFile(clusterMark(db), []byte("cluster c1 node n1 data_dir x\n"), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"audit", "archive", "--db", db, "--upto", "5", "--dir", dir})
	if err == nil || !strings.Contains(err.Error(), "cluster node") || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("audit archive of a cluster node's store = %v", err)
	}
	if _, serr := os.Stat(db); serr == nil {
		t.Error("the store was opened")
	}
}

// clusterNodeConfig writes a cluster node's config whose listener is
// listen, with a reload_token_file of tokens ("name token" lines).
func clusterNodeConfig(t *testing.T, listen, tokens string) string {
	t.Helper()
	dir := t.TempDir()
	tf := filepath.Join(dir, "admin.tokens")
	if err := os.WriteFile(tf, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "thinbot.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`state_dir: %s
listen: %s
reload_token_file: %s
cluster:
  id: c1
  node_id: n1
  peers:
    - {id: n1, raft_address: "127.0.0.1:7301", http_address: "http://%s"}
`, filepath.Join(dir, "state"), listen, tf, listen)), 0o600)
	return cfg
}

// TestArchiveClusterAsksTheRunningNode: audit archive --config of a
// cluster node sends the admin request to the node's own listener with the
// token of reload_token_file and prints the cluster's answer; --dir is
// refused, and without a daemon on the listener it says to start one.
func TestArchiveClusterAsksTheRunningNode(t *testing.T) {
	var got clusterArchiveRequest
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/-/cluster/archive" {
			http.NotFound(w, r)
			return
		}
		auth = r.Header.Get("Authorization")
		json.NewDecoder(r.Body).Decode(&got)
		json.NewEncoder(w).Encode(clusterArchiveAnswer{Node: "n2", Path: "/var/lib/thinbot/archive/archive-000000000001-000000000020.jsonl.gz", EventSeq: 51,
			Record: store.ArchiveRecord{File: "archive-000000000001-000000000020.jsonl.gz", First: 1, Last: 20, Count: 20, Sessions: 2, FileSHA256: strings.Repeat("f", 64)}})
	}))
	defer srv.Close()
	listen := strings.TrimPrefix(srv.URL, "http://")
	cfg := clusterNodeConfig(t, listen, "ops 0123456789abcdef0123456789abcdef\n")
	out, errb, code := runAudit(t, "archive", "--config", cfg, "--upto", "25", "--before", "2025-01-02")
	if code != 0 || !strings.Contains(out, "archived events 1..20 (20 events, 2 sessions) cluster-wide: leader n2") ||
		!strings.Contains(out, "recorded by event 51") || !strings.Contains(out, "starts at seq 21 after its next restart") {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	if auth != "Bearer 0123456789abcdef0123456789abcdef" || got.UpTo != 25 || got.Before != "2025-01-02" {
		t.Errorf("the request: %q, %+v", auth, got)
	}
	if _, errb, code := runAudit(t, "archive", "--config", cfg, "--upto", "25", "--dir", t.TempDir()); code == 0 || !strings.Contains(errb, "--dir") {
		t.Errorf("--dir on a cluster node: exit %d: %s", code, errb)
	}
	two := clusterNodeConfig(t, listen, "ops 0123456789abcdef0123456789abcdef\nbob 0123456789abcdef-bob-0123456789\n")
	if _, errb, code := runAudit(t, "archive", "--config", two, "--upto", "25"); code == 0 || !strings.Contains(errb, "--as NAME") {
		t.Errorf("two tokens, no --as: exit %d: %s", code, errb)
	}
	if out, errb, code := runAudit(t, "archive", "--config", two, "--upto", "25", "--as", "bob"); code != 0 || auth != "Bearer 0123456789abcdef-bob-0123456789" {
		t.Errorf("--as bob: exit %d, %q\n%s%s", code, auth, out, errb)
	}
	down := clusterNodeConfig(t, freeAddr(t), "ops 0123456789abcdef0123456789abcdef\n")
	if _, errb, code := runAudit(t, "archive", "--config", down, "--upto", "25"); code == 0 || !strings.Contains(errb, "no thinbot answers") ||
		!strings.Contains(errb, "thinbot serve --config") {
		t.Errorf("no daemon: exit %d: %s", code, errb)
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
