package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// startCluster starts three daemons of one cluster against the fakes, each
// in dir/nK: raft over mutual TLS on loopback with a CA made here, one
// shared button key. Which one leads is found by waitLeader.
func startCluster(dir, bin string, f *fakes, cfg Config) ([]*daemon, error) {
	files, err := clusterFiles(dir, 3)
	if err != nil {
		return nil, err
	}
	var listen, raftAddr []string
	var peers []any
	for k := range 3 {
		l, err := freeAddr()
		if err != nil {
			return nil, err
		}
		r, err := freeAddr()
		if err != nil {
			return nil, err
		}
		listen, raftAddr = append(listen, l), append(raftAddr, r)
		peers = append(peers, map[string]any{"id": fmt.Sprintf("n%d", k+1), "raft_address": r, "http_address": "http://" + l})
	}
	var nodes []*daemon
	for k := range 3 {
		nd := filepath.Join(dir, fmt.Sprintf("n%d", k+1))
		if err := os.MkdirAll(nd, 0o700); err != nil {
			return nodes, fmt.Errorf("loadtest: %w", err)
		}
		extra := map[string]any{"cluster": map[string]any{
			"id": "loadtest", "node_id": fmt.Sprintf("n%d", k+1), "peers": peers, "action_key_file": files.actionKey,
			"tls": map[string]any{"cert_file": files.certs[k], "key_file": files.keys[k], "ca_file": files.ca},
		}}
		d, err := startDaemon(nd, bin, f, cfg, listen[k], extra)
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, d)
	}
	return nodes, nil
}

// clusterPKI are the files of a cluster's mutual TLS and its button key.
type clusterPKI struct {
	ca, actionKey string
	certs, keys   []string
}

// clusterFiles makes a CA, n node certificates for 127.0.0.1 and a
// button key in dir.
func clusterFiles(dir string, n int) (clusterPKI, error) {
	var out clusterPKI
	write := func(name, typ string, der []byte) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return out, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "loadtest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return out, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	if out.ca, err = write("ca.pem", "CERTIFICATE", caDER); err != nil {
		return out, err
	}
	for k := range n {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return out, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(k + 2)), Subject: pkix.Name{CommonName: fmt.Sprintf("n%d", k+1)},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return out, err
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		c, err := write(fmt.Sprintf("n%d.pem", k+1), "CERTIFICATE", der)
		if err != nil {
			return out, err
		}
		kp, err := write(fmt.Sprintf("n%d.key", k+1), "EC PRIVATE KEY", kder)
		if err != nil {
			return out, err
		}
		out.certs, out.keys = append(out.certs, c), append(out.keys, kp)
	}
	b := make([]byte, 32)
	rand.Read(b)
	out.actionKey = filepath.Join(dir, "action.key")
	return out, os.WriteFile(out.actionKey, b, 0o600)
}

// waitLeader returns the node that logged "thinbot serving" (it leads); on
// failure it returns the first node, for its log.
func waitLeader(ctx context.Context, nodes []*daemon) (*daemon, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, n := range nodes {
			if b, _ := os.ReadFile(n.logPath); strings.Contains(string(b), `"msg":"thinbot serving"`) {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return nodes[0], ctx.Err()
		case <-tick.C:
		}
	}
}

// journalHead is the last line's seq and hash of a node's journal.
func journalHead(n *daemon) string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "state", "audit.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var ev struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	json.Unmarshal([]byte(lines[len(lines)-1]), &ev)
	return fmt.Sprintf("%d:%s", ev.Seq, ev.Hash)
}

// waitSameHeads waits (within ctx) until every node's journal ends at the
// same event.
func waitSameHeads(ctx context.Context, nodes []*daemon) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		same := true
		for _, n := range nodes[1:] {
			same = same && journalHead(n) == journalHead(nodes[0])
		}
		if same {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// sameChains runs thinbot audit verify on every node's store and checks
// that each verifies to the leader's head (in want, its output).
func sameChains(ctx context.Context, bin string, nodes []*daemon, want string) error {
	headRE := regexp.MustCompile(`head seq \d+ hash [0-9a-f]{64}`)
	head := headRE.FindString(want)
	var errs []error
	for _, n := range nodes {
		out, err := auditVerify(ctx, bin, filepath.Join(n.dir, "state", "events.db"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if got := headRE.FindString(out); got == "" || got != head {
			errs = append(errs, fmt.Errorf("loadtest: node %s verifies to %q, the leader to %q", filepath.Base(n.dir), got, head))
		}
	}
	return errors.Join(errs...)
}
