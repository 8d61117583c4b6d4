package replica

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// helloTimeout bounds the TLS handshake and the hello exchange of one
// raft connection.
const helloTimeout = 5 * time.Second

// helloPrefix starts the line a dialling node sends after the TLS
// handshake: helloPrefix CLUSTER-ID NODE-ID.
const helloPrefix = "thinbot-raft/1"

// tlsLayer is raft's stream layer over mutual TLS: both sides present a
// certificate of the cluster's CA (a peer without one fails the
// handshake), then the dialler names its cluster id, and a listener of
// another cluster refuses it.
type tlsLayer struct {
	ln        net.Listener // TCP
	advertise net.Addr
	local     net.Addr // the source address of dialled connections; nil: the system's
	tls       *tls.Config
	clusterID string
	id        string
	log       *slog.Logger
}

var _ raft.StreamLayer = (*tlsLayer)(nil)

// newTLSLayer listens on bind ("" means addr) and advertises addr; the
// connections it dials leave from bind's IP, if it names one.
func newTLSLayer(addr, bind, clusterID, id string, cfg *tls.Config, log *slog.Logger) (*tlsLayer, error) {
	if bind == "" {
		bind = addr
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("raft listen: %w", err)
	}
	adv, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("raft address %q: %w", addr, err)
	}
	if adv.Port == 0 {
		adv = ln.Addr().(*net.TCPAddr)
	}
	l := &tlsLayer{ln: ln, advertise: adv, tls: cfg, clusterID: clusterID, id: id, log: log}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsUnspecified() {
		l.local = &net.TCPAddr{IP: ip}
	}
	return l, nil
}

// Accept returns the next connection whose peer passed the TLS handshake
// (a client certificate of the cluster's CA) and named this cluster; others
// are closed and logged.
func (l *tlsLayer) Accept() (net.Conn, error) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return nil, err
		}
		conn, err := l.admit(c)
		if err != nil {
			l.log.Warn("raft connection refused", "remote", c.RemoteAddr().String(), "err", err)
			c.Close()
			continue
		}
		return conn, nil
	}
}

func (l *tlsLayer) admit(c net.Conn) (net.Conn, error) {
	tc := tls.Server(c, l.tls)
	if err := tc.SetDeadline(time.Now().Add(helloTimeout)); err != nil {
		return nil, err
	}
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	br := bufio.NewReaderSize(tc, 256)
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	peerCluster, peerID, err := parseHello(line)
	if err != nil {
		return nil, err
	}
	if peerCluster != l.clusterID {
		fmt.Fprintf(tc, "refused: cluster id %q is not this cluster's\n", peerCluster)
		return nil, fmt.Errorf("node %q names cluster id %q, this is %q", peerID, peerCluster, l.clusterID)
	}
	if _, err := tc.Write([]byte("ok\n")); err != nil {
		return nil, err
	}
	if err := tc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	if br.Buffered() > 0 {
		// The dialler waits for "ok" before it sends anything else.
		return nil, errors.New("hello: bytes after the hello line")
	}
	return tc, nil
}

// parseHello reads "thinbot-raft/1 CLUSTER NODE\n".
func parseHello(line string) (cluster, node string, err error) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != helloPrefix || !strings.HasSuffix(line, "\n") {
		return "", "", fmt.Errorf("hello: not a thinbot raft hello: %.80q", line)
	}
	return f[1], f[2], nil
}

// Dial connects to a peer: TLS with this node's certificate, the peer's
// checked against the cluster's CA, then the hello.
func (l *tlsLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, LocalAddr: l.local}
	cfg := l.tls.Clone()
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(string(address))
		cfg.ServerName = host
	}
	tc, err := tls.DialWithDialer(d, "tcp", string(address), cfg)
	if err != nil {
		return nil, fmt.Errorf("raft dial %s: %w", address, err)
	}
	fail := func(err error) (net.Conn, error) {
		tc.Close()
		return nil, fmt.Errorf("raft dial %s: %w", address, err)
	}
	if err := tc.SetDeadline(time.Now().Add(helloTimeout)); err != nil {
		return fail(err)
	}
	if _, err := fmt.Fprintf(tc, "%s %s %s\n", helloPrefix, l.clusterID, l.id); err != nil {
		return fail(err)
	}
	// Read the answer byte by byte: nothing of raft's may be buffered here.
	var ans []byte
	b := make([]byte, 1)
	for len(ans) < 200 {
		if _, err := tc.Read(b); err != nil {
			return fail(fmt.Errorf("hello answer: %w", err))
		}
		if b[0] == '\n' {
			break
		}
		ans = append(ans, b[0])
	}
	if string(ans) != "ok" {
		return fail(fmt.Errorf("peer refused: %.120s", ans))
	}
	if err := tc.SetDeadline(time.Time{}); err != nil {
		return fail(err)
	}
	return tc, nil
}

func (l *tlsLayer) Close() error   { return l.ln.Close() }
func (l *tlsLayer) Addr() net.Addr { return l.advertise }
