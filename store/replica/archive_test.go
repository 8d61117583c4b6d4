package replica

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
)

// archiveFile reads node m's archive file name.
func archiveFile(t *testing.T, m *member, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.dir, "archive", name))
	if err != nil {
		t.Fatalf("%s: %v", m.id, err)
	}
	return b
}

// TestClusterArchives: the leader of three nodes records an archive; every
// node writes the same archive file from its own store as it applies the
// archive event, and keeps the events until it starts again, one node at a
// time: then each store starts after the archive and all verify to one
// head. A node added afterwards catches up from a snapshot that starts
// after the archive (it carries the archive event that vouches for it) and
// verifies to the same head; a node whose store ends before the archive
// cannot take that snapshot and fails, saying what to do.
func TestClusterArchives(t *testing.T) {
	ca := newCA(t)
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{ID: fmt.Sprintf("n%d", i+1), Addr: freeAddr(t)})
	}
	cfgs := map[string]Config{}
	var ms []*member
	for _, p := range peers {
		// A snapshot keeps one entry in the log: a node added later is
		// sent the snapshot.
		cfgs[p.ID] = Config{ClusterID: "c1", ID: p.ID, Addr: p.Addr, Peers: peers, TLS: ca.tlsFor(t, p.ID), TrailingLogs: 1}
		m, err := startMember(t, cfgs[p.ID], t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	l := leader(t, ms)
	for _, s := range []string{"s1", "s2", "s3"} {
		appendN(t, l.db, 10, s) // 1..30
	}
	f := ms[0]
	if f == l {
		f = ms[1]
	}
	if _, err := f.db.ArchiveReplicated(t.Context(), store.ArchiveOptions{UpTo: 25}); err == nil {
		t.Errorf("follower %s recorded an archive", f.id)
	}
	res, err := l.db.ArchiveReplicated(t.Context(), store.ArchiveOptions{UpTo: 25})
	if err != nil {
		t.Fatal(err)
	}
	rec := res.Record
	if rec.First != 1 || rec.Last != 20 || res.Event.Seq != 31 {
		t.Fatalf("archive: %+v, event %d", rec, res.Event.Seq)
	}
	want := archiveFile(t, l, rec.File)
	for _, m := range ms {
		waitHead(t, m, 31)
		// Applied on the follower once its store holds the event: the
		// file is written in the same apply, before the next entry.
		appendN(t, l.db, 1, "tick")
	}
	for _, m := range ms {
		waitHead(t, m, 34)
		if got := archiveFile(t, m, rec.File); !bytes.Equal(got, want) {
			t.Errorf("%s: its archive file differs from the leader's", m.id)
		}
		if base, _, _ := m.db.Base(); base != 0 {
			t.Errorf("%s: cut while it runs (base %d)", m.id, base)
		}
	}
	// Each node starts again in turn; its store is cut at its start.
	for i := range ms {
		dir := ms[i].dir
		ms[i].stop()
		m, err := startMember(t, cfgs[ms[i].id], dir)
		if err != nil {
			t.Fatalf("restart %s: %v", ms[i].id, err)
		}
		ms[i] = m
		t.Cleanup(func() {
			if t.Failed() {
				m.logs.mu.Lock()
				t.Logf("%s log:\n%s", m.id, strings.Join(m.logs.lines, ""))
				m.logs.mu.Unlock()
			}
		})
		l = leader(t, ms)
		appendN(t, l.db, 1, "after-restart")
	}
	head := uint64(34 + len(ms))
	var heads []string
	for _, m := range ms {
		waitHead(t, m, head)
		rep, err := m.db.Verify(t.Context(), nil)
		if err != nil || !rep.OK || rep.ArchivedSeq != 20 || rep.ArchiveFile != rec.File || rep.LastSeq != head {
			t.Fatalf("%s after its restart: %+v, %v", m.id, rep, err)
		}
		heads = append(heads, rep.LastHash)
		frep, err := store.VerifyFile(t.Context(), bytes.NewReader(archiveFile(t, m, rec.File)), &store.FileOptions{Archive: true})
		if err != nil || !frep.OK || frep.FileSHA256 != rec.FileSHA256 {
			t.Errorf("%s: its archive file: %+v, %v", m.id, frep, err)
		}
	}
	if heads[0] != heads[1] || heads[1] != heads[2] {
		t.Fatalf("heads differ: %v", heads)
	}

	// A new node, after a snapshot of the cut chain.
	if err := l.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l.db, 1, "after-snapshot")
	head++
	d := Peer{ID: "n4", Addr: freeAddr(t)}
	md, err := startMember(t, Config{ClusterID: "c1", ID: d.ID, Addr: d.Addr, Join: true, TLS: ca.tlsFor(t, d.ID)}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.node.AddVoter(d); err != nil {
		t.Fatal(err)
	}
	waitHead(t, md, head)
	if !md.logs.has("snapshot restore progress") {
		t.Error("n4 did not install a snapshot")
	}
	rep, err := md.db.Verify(t.Context(), nil)
	if err != nil || !rep.OK || rep.ArchivedSeq != 20 || rep.LastSeq != head {
		t.Fatalf("n4: %+v, %v", rep, err)
	}
	lrep, _ := l.db.Verify(t.Context(), nil)
	if rep.LastHash != lrep.LastHash {
		t.Fatalf("n4's head %s, the leader's %s", rep.LastHash, lrep.LastHash)
	}

	// A node whose store ends before the archive: it must not take the
	// snapshot (its chain would have a hole).
	behind := t.TempDir()
	db, err := store.Open(filepath.Join(behind, "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, db, 5, "s1") // five events: fewer than the archive took
	db.Close()
	e := Peer{ID: "n5", Addr: freeAddr(t)}
	me, err := startMember(t, Config{ClusterID: "c1", ID: e.ID, Addr: e.Addr, Join: true, TLS: ca.tlsFor(t, e.ID)}, behind)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.node.AddVoter(e); err != nil {
		t.Fatal(err)
	}
	<-me.node.Failed()
	if err := me.node.Err(); err == nil || !strings.Contains(err.Error(), "move its store") {
		t.Errorf("a node behind the archive: %v", err)
	}
	if me.db.LastSeq() != 5 {
		t.Errorf("the node behind the archive took events: head %d", me.db.LastSeq())
	}
}

// TestArchivedLoneNodeSeedsCluster: a lone store archived by `thinbot audit
// archive` (its chain starts after seq 1) becomes a cluster's chain as a
// lone store does: its leader puts its events into the log, the first
// entry naming the archive event that vouches for the start. A node added
// next copies them from the log, one added after a snapshot from the
// snapshot; the three verify to the same head, each saying where the
// archive ends.
func TestArchivedLoneNodeSeedsCluster(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	seed, _, rec := archivedLone(t, dir)
	seed.Close()

	a := Peer{ID: "a", Addr: freeAddr(t)}
	// A snapshot keeps one entry in the log: c must be sent the snapshot.
	ma, err := startMember(t, Config{ClusterID: "c1", ID: "a", Addr: a.Addr, Peers: []Peer{a}, TLS: ca.tlsFor(t, "a"), TrailingLogs: 1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	leader(t, []*member{ma})
	if err := ma.node.CatchUpLog(); err != nil {
		t.Fatal(err)
	}
	if !ma.logs.has("the log caught up with the store") {
		t.Error("a did not put its store into the log")
	}
	appendN(t, ma.db, 2, "after") // 21, 22

	join := func(id string) *member {
		t.Helper()
		p := Peer{ID: id, Addr: freeAddr(t)}
		m, err := startMember(t, Config{ClusterID: "c1", ID: id, Addr: p.Addr, Join: true, TLS: ca.tlsFor(t, id)}, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := ma.node.AddVoter(p); err != nil {
			t.Fatal(err)
		}
		return m
	}
	mb := join("b")
	appendN(t, ma.db, 1, "two nodes") // 23: b's configuration is committed
	waitHead(t, mb, 23)
	if mb.logs.has("snapshot restore progress") {
		t.Error("b installed a snapshot; it should have replayed the log")
	}
	if err := ma.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	appendN(t, ma.db, 1, "after-snapshot") // 24
	mc := join("c")
	waitHead(t, mc, 24)
	if !mc.logs.has("snapshot restore progress") {
		t.Error("c did not install a snapshot")
	}
	appendN(t, ma.db, 1, "three nodes") // 25
	var heads []string
	for _, m := range []*member{ma, mb, mc} {
		waitHead(t, m, 25)
		rep, err := m.db.Verify(t.Context(), nil)
		if err != nil || !rep.OK || rep.ArchivedSeq != rec.Last || rep.LastSeq != 25 {
			t.Fatalf("%s: %+v, %v", m.id, rep, err)
		}
		if m.node.Err() != nil {
			t.Errorf("%s failed: %v", m.id, m.node.Err())
		}
		heads = append(heads, rep.LastHash)
	}
	if heads[0] != heads[1] || heads[1] != heads[2] {
		t.Fatalf("heads differ: %v", heads)
	}
	servers, err := ma.node.Servers()
	if err != nil || len(servers) != 3 {
		t.Fatalf("Servers = %v, %v", servers, err)
	}

	// b starts again: it replays the log over its store, which starts
	// after the archive too.
	bdir, baddr := mb.dir, mb.node.Addr()
	mb.stop()
	mb, err = startMember(t, Config{ClusterID: "c1", ID: "b", Addr: baddr, Join: true, TLS: ca.tlsFor(t, "b")}, bdir)
	if err != nil {
		t.Fatalf("restart b: %v", err)
	}
	l := leader(t, []*member{ma, mb, mc})
	appendN(t, l.db, 1, "after b's restart") // 26
	waitHead(t, mb, 26)
	if s, h := verified(t, mb); s != 26 {
		t.Fatalf("b after its restart: %d %s", s, h)
	}
}
