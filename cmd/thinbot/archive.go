package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// cmdAuditArchive archives the oldest events and brings archives back:
//
//	thinbot audit archive (--before DATE | --upto SEQ) [--db PATH | --config FILE] [--dir DIR] [--as NAME]
//	thinbot audit restore FILE... --to DIR
//
// archive of a lone store needs the store to itself: stop the daemon first
// (it takes the store's lock and says so if a daemon holds it). A cluster
// node's config (--config with a cluster section) archives the cluster's
// chain instead, through the node's running daemon (POST
// /-/cluster/archive on its listener, with a token of reload_token_file:
// --as names it when the file has several).
func cmdAuditArchive(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("audit "+args[0], flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	db := fs.String("db", defaultDB, "event store `PATH`")
	config := fs.String("config", "", "a daemon's config `FILE`: the event store in its state_dir")
	var before, dir, to, as *string
	var upto *uint64
	if args[0] == "archive" {
		before = fs.String("before", "", "archive the events before this `DATE` (2006-01-02 or RFC 3339, UTC)")
		upto = fs.Uint64("upto", 0, "archive the events up to this `SEQ`")
		dir = fs.String("dir", "", "write the archive file into `DIR` (default: archive/ beside the store)")
		as = fs.String("as", "", "a cluster node: send reload_token_file's token of this `NAME` (default: its only one)")
	} else {
		to = fs.String("to", "", "restore into this new `DIR` (events.db and audit.jsonl)")
	}
	// restore takes its files before or after its flags.
	var files []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		if fs.NArg() == 0 {
			break
		}
		files, rest = append(files, fs.Arg(0)), fs.Args()[1:]
	}
	if args[0] == "restore" {
		if len(files) == 0 || *to == "" {
			return fmt.Errorf("%w: thinbot audit restore FILE... --to DIR", errUsage)
		}
		return restoreArchives(ctx, e, files, *to)
	}
	if len(files) > 0 {
		return fmt.Errorf("%w: audit archive takes no arguments, got %q", errUsage, files)
	}
	var cluster *daemonConfig
	if *config != "" {
		c, err := stateConfig(*config, e.getenv)
		if err != nil {
			return err
		}
		*db = filepath.Join(c.StateDir, "events.db")
		if c.Cluster.configured() {
			cluster = c
		}
	}
	ao := store.ArchiveOptions{Dir: *dir, UpTo: *upto, Keep: agentcore.OpenSessions, Log: agentcore.LogSession, Actor: "operator:thinbot audit archive"}
	if *before != "" {
		t, err := parseDate(*before)
		if err != nil {
			return fmt.Errorf("%w: audit archive --before: %w", errUsage, err)
		}
		ao.Before = t
	}
	if ao.Before.IsZero() && ao.UpTo == 0 {
		return fmt.Errorf("%w: audit archive needs --before DATE or --upto SEQ", errUsage)
	}
	if cluster != nil {
		if *dir != "" {
			return fmt.Errorf("%w: audit archive --dir: a cluster node's archives go into archive/ in each node's state_dir", errUsage)
		}
		return archiveCluster(ctx, e, cluster, *config, clusterArchiveRequest{UpTo: *upto, Before: *before}, *as)
	}
	if err := refuseClusterArchive(*db); err != nil {
		return err
	}
	start := time.Now()
	opts := &store.Options{Logger: slog.New(slog.NewTextHandler(e.stderr, nil))}
	res, err := store.Archive(ctx, *db, opts, ao)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w; stop the daemon first: archiving needs the store to itself", err)
	}
	if err != nil {
		return err
	}

	r := res.Record
	fmt.Fprintf(e.stdout, "archived events %d..%d (%d events, %d sessions) into %s (%s)\n", r.First, r.Last, r.Count, r.Sessions, res.Path, size(fileSize(res.Path)))
	fmt.Fprintf(e.stdout, "  head seq %d hash %s\n  file sha256 %s\n", r.Last, r.Head, r.FileSHA256)
	fmt.Fprintf(e.stdout, "  recorded by event %d of the live chain, which now starts at seq %d\n", res.Event.Seq, r.Last+1)
	fmt.Fprintf(e.stdout, "  %s: %s -> %s; %s: %s -> %s; took %s\n", filepath.Base(*db), size(res.DBBefore), size(res.DBAfter),
		"audit.jsonl", size(res.JournalBefore), size(res.JournalAfter), time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(e.stdout, "copy the file off this host and check it there: thinbot audit verify --archive %s\n", filepath.Base(res.Path))
	// The new store's state index, which the next start would otherwise
	// build from the live chain first. Derived data: a failure here is
	// said, and leaves that to the next start.
	if err := indexStore(ctx, *db, opts); err != nil {
		fmt.Fprintf(e.stderr, "thinbot: warning: the state index was not built (the next start builds it): %v\n", err)
	}
	return nil
}

// archiveCluster archives a cluster's chain through the running daemon of
// the node whose config c is (read from path): its listener forwards the
// request to the leader, which records the archive; every node writes the
// file as it applies the archive event.
func archiveCluster(ctx context.Context, e *env, c *daemonConfig, path string, body clusterArchiveRequest, as string) error {
	if c.ReloadTokenFile == "" {
		return fmt.Errorf("config %s has no reload_token_file: a cluster's archive is an admin request to its running nodes, which need one (deploy/cluster.md)", path)
	}
	token, err := adminToken(c.ReloadTokenFile, as)
	if err != nil {
		return err
	}
	addr := localAddr(c.Listen)
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/-/cluster/archive", bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no thinbot answers on %s, this node's listen address (%w): a cluster's chain is archived through its running nodes: start this node (thinbot serve --config %s), or run this with the config of a node that runs", addr, err, path)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the cluster refused the archive (%s): %s", resp.Status, strings.TrimSpace(string(raw)))
	}
	var a clusterArchiveAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return fmt.Errorf("the cluster's answer: %w", err)
	}
	r := a.Record
	fmt.Fprintf(e.stdout, "archived events %d..%d (%d events, %d sessions) cluster-wide: leader %s wrote %s; every node writes it into archive/ in its state_dir as it applies the record\n",
		r.First, r.Last, r.Count, r.Sessions, a.Node, a.Path)
	fmt.Fprintf(e.stdout, "  head seq %d hash %s\n  file sha256 %s\n", r.Last, r.Head, r.FileSHA256)
	fmt.Fprintf(e.stdout, "  recorded by event %d of the cluster's chain; took %s\n", a.EventSeq, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(e.stdout, "each node's store starts at seq %d after its next restart (restart the nodes one at a time to get the space back)\n", r.Last+1)
	fmt.Fprintf(e.stdout, "copy a node's file off the cluster and check it there: thinbot audit verify --archive %s (file sha256 %s on every node)\n", r.File, r.FileSHA256)
	return nil
}

// adminToken is reload_token_file's token of name, or its only one.
func adminToken(file, name string) (string, error) {
	tokens, err := readTokenFile("reload_token_file", file, currentUser())
	if err != nil {
		return "", err
	}
	var names []string
	for tok, n := range tokens {
		if name == "" && len(tokens) == 1 || n == name {
			return tok, nil
		}
		names = append(names, n)
	}
	slices.Sort(names)
	if name != "" {
		return "", fmt.Errorf("reload_token_file %s has no token of %q (it has %s)", file, name, strings.Join(names, ", "))
	}
	return "", fmt.Errorf("reload_token_file %s has %d tokens (%s): name one with --as NAME", file, len(tokens), strings.Join(names, ", "))
}

// localAddr is where this host reaches a listen address: its own loopback
// for an address of every interface.
func localAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}

// indexStore builds the state index of the store at path.
func indexStore(ctx context.Context, path string, opts *store.Options) error {
	db, err := store.Open(path, opts)
	if err != nil {
		return err
	}
	return errors.Join(db.UseIndex(ctx, agentcore.StateIndex), db.Close())
}

// parseDate reads --before: a date (midnight UTC) or an RFC 3339 time.
func parseDate(s string) (time.Time, error) {
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want 2006-01-02 or 2006-01-02T15:04:05Z", s)
	}
	return t, nil
}

func size(n int64) string {
	switch {
	case n >= 10<<20:
		return fmt.Sprintf("%.0f MB", float64(n)/1e6)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	default:
		return fmt.Sprintf("%.0f kB", float64(n)/1e3)
	}
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

func restoreArchives(ctx context.Context, e *env, files []string, dir string) error {
	path := filepath.Join(dir, "events.db")
	first, last, err := store.Restore(ctx, path, files)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "restored events %d..%d from %d archive file(s) into %s (each verified, and that each continues the one before)\n",
		first.First, last.Last, len(files), path)
	if first.First == 1 {
		fmt.Fprintf(e.stdout, "read it with: thinbot audit export --db %s, thinbot audit timeline SESSION --db %s; check it again with thinbot audit verify --db %s\n", path, path, path)
	} else {
		fmt.Fprintf(e.stdout, "read it with: thinbot audit export --db %s, thinbot audit timeline SESSION --db %s; it starts after the archive before it (head %s): check it with thinbot audit verify --db %s --from %d:%s\n",
			path, path, first.Prev, path, first.First-1, first.Prev)
	}
	return nil
}

// verifyArchives is verify --archive FILE...: each file alone, that each
// continues the one before, and, with a store (dbPath not ""), that the
// live chain continues the last and records each file it still holds an
// archive event for.
func verifyArchives(ctx context.Context, e *env, files []string, dbPath string) error {
	var broken []string
	var prev *store.ArchiveRecord
	var seals []store.FileReport
	for _, p := range files {
		v, err := agentcore.Verify(ctx, nil, agentcore.VerifyOptions{Archives: []string{p}}) // its chain and its checkpoints
		if err != nil {
			return err
		}
		rep := v.Archives[0]
		if !rep.OK {
			fmt.Fprintf(e.stdout, "archive %s: BROKEN at seq %d: %s\n", p, rep.BadSeq, rep.Problem)
			broken = append(broken, p)
			prev = nil
			continue
		}
		s := rep.Seal
		fmt.Fprintf(e.stdout, "archive %s: ok, events %d..%d (%d sessions), prev %s, head %s, file sha256 %s\n", p, s.First, s.Last, s.Sessions, s.Prev, s.Head, rep.FileSHA256)
		switch {
		case prev != nil && (s.First != prev.Last+1 || s.Prev != prev.Head):
			fmt.Fprintf(e.stdout, "archive %s: BROKEN: does not continue the file before it (which ends at seq %d, head %s)\n", p, prev.Last, prev.Head)
			broken = append(broken, p)
		case prev == nil && len(seals) == 0 && s.First != 1:
			fmt.Fprintf(e.stdout, "  (starts after seq %d: give the archives before it too to check the chain from seq 1)\n", s.First-1)
		}
		prev = &s
		seals = append(seals, rep)
	}
	if dbPath != "" {
		db, err := openReadOnly(dbPath)
		if err != nil {
			return err
		}
		defer db.Close()
		// The store as audit verify checks it (its checkpoints and its
		// export too), and that it continues the last archive.
		v, err := agentcore.Verify(ctx, db, agentcore.VerifyOptions{Journal: true})
		if err != nil {
			return err
		}
		rep := v.Chain
		recorded := map[string]store.ArchiveRecord{}
		for ev, err := range db.Events(store.ArchiveSession, 0) {
			if err != nil {
				return err
			}
			if r, ok := store.ArchiveRecordOf(ev); ok {
				recorded[fmt.Sprint(r.First, r.Last, r.Head)] = r
			}
		}
		switch {
		case !rep.OK:
			fmt.Fprintf(e.stdout, "store  %s: BROKEN at seq %d: %s\n", dbPath, rep.BadSeq, rep.Problem)
			broken = append(broken, "store")
		case prev != nil && (rep.ArchivedSeq != prev.Last || rep.ArchivedHash != prev.Head):
			fmt.Fprintf(e.stdout, "store  %s: BROKEN: the live chain starts after seq %d (%.12s…), not where the last archive ends (seq %d, %.12s…)\n",
				dbPath, rep.ArchivedSeq, rep.ArchivedHash, prev.Last, prev.Head)
			broken = append(broken, "store")
		default:
			fmt.Fprintf(e.stdout, "store  %s: ok, continues the last archive: events %d..%d, head seq %d hash %s\n", dbPath, rep.ArchivedSeq+1, rep.LastSeq, rep.LastSeq, rep.LastHash)
		}
		if ok, err := verifyExport(e, db, v); err != nil {
			return err
		} else if !ok {
			broken = append(broken, "export")
		}
		for i, a := range seals {
			s := a.Seal
			r, ok := recorded[fmt.Sprint(s.First, s.Last, s.Head)]
			switch {
			case !ok:
				continue // recorded by an event that is itself archived
			case r.SHA256 != s.SHA256 || r.FileSHA256 != a.FileSHA256:
				fmt.Fprintf(e.stdout, "archive %s: BROKEN: the live chain's archive event records another file (sha256 %s)\n", files[i], r.FileSHA256)
				broken = append(broken, files[i])
			default:
				fmt.Fprintf(e.stdout, "archive %s: recorded in the live chain (file %s, sha256 matches)\n", files[i], r.File)
			}
		}
	}
	if len(broken) > 0 {
		return brokenError{fmt.Sprintf("audit verify: %s failed verification", strings.Join(broken, ", "))}
	}
	return nil
}

// archivedNote says where the events before the live chain are ("" for a
// chain from seq 1).
func archivedNote(rep store.Report) string {
	if rep.ArchivedSeq == 0 {
		return ""
	}
	if rep.ArchiveFirst > 1 {
		// The last archive holds only its own range.
		return fmt.Sprintf("events 1..%d archived: %d..%d in %s (head %s), the earlier ones in the archives before it; ",
			rep.ArchivedSeq, rep.ArchiveFirst, rep.ArchivedSeq, rep.ArchiveFile, rep.ArchivedHash)
	}
	return fmt.Sprintf("events 1..%d archived in %s (head %s); ", rep.ArchivedSeq, rep.ArchiveFile, rep.ArchivedHash)
}
