package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// defaultDB is the terminal front end's store, relative to the working
// directory.
var defaultDB = filepath.Join(localDir, "events.db")

// tailPoll is how often audit tail looks for new lines.
const tailPoll = 200 * time.Millisecond

// brokenError is a verification that found tampering or damage: exit code 2
// (1 means "could not check").
type brokenError struct{ msg string }

func (b brokenError) Error() string { return b.msg }
func (b brokenError) ExitCode() int { return 2 }

// cmdAudit verifies, exports, follows and rebuilds the event chain:
//
//	thinbot audit verify  [--db PATH | --config FILE | --jsonl FILE] [--from SEQ:HASH]
//	thinbot audit export  [--db PATH | --config FILE] [--session ID] [--since SEQ]
//	thinbot audit tail    [--db PATH | --config FILE | --jsonl FILE] [--session ID] [--since SEQ] [--json]
//	thinbot audit rebuild [--db PATH | --config FILE]   (rewrites audit.jsonl from the store;
//	                                    with only audit.jsonl, builds the store from it)
//	thinbot audit timeline SESSION [--db PATH | --config FILE | --jsonl FILE] [--part postmortem|appendix]   (timeline.go)
//	thinbot audit verify  --archive FILE [--archive FILE...] [--db PATH | --config FILE]
//	thinbot audit archive (--before DATE | --upto SEQ) [--db PATH | --config FILE] [--dir DIR] [--as NAME]   (archive.go; a cluster node: cluster-wide)
//	thinbot audit restore FILE... --to DIR                                                     (archive.go)
//
// --config names a daemon's config file: the store is events.db in its
// state_dir. On a store a running daemon holds (bbolt's lock), verify,
// export and timeline read its journal, audit.jsonl, instead and say so
// (livejournal.go).
func cmdAudit(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || isHelpFlag(args[0]) {
		return fmt.Errorf("%w: %s", errUsage, auditUsage)
	}
	if args[0] == "archive" || args[0] == "restore" {
		return cmdAuditArchive(ctx, e, args)
	}
	var timelineSession string
	if args[0] == "timeline" && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		timelineSession, args = args[1], append([]string{args[0]}, args[2:]...)
	}
	fs := newFlags(e, "audit "+args[0])
	db := fs.String("db", defaultDB, "event store `PATH`")
	config := fs.String("config", "", "a daemon's config `FILE`: the event store in its state_dir")
	var jsonl, session *string
	var since *uint64
	var asJSON *bool
	var from, timezone, part *string
	var archives stringsFlag
	switch args[0] {
	case "verify":
		jsonl = fs.String("jsonl", "", "verify this JSONL export `FILE` alone (no store needed)")
		fs.Var(&archives, "archive", "verify this archive `FILE` (repeat, oldest first, to check a chain of archives; with --db or --config, also that the store continues the last)")
		from = fs.String("from", "", "verify only the events after a trusted anchor `SEQ:HASH` (a head this command printed before)")
	case "export":
		session = fs.String("session", "", "only this session's events (such an export has gaps by design)")
		since = fs.Uint64("since", 0, "only events with seq >= `SEQ`")
	case "tail":
		jsonl = fs.String("jsonl", "", "follow this JSONL `FILE` (default: audit.jsonl next to --db)")
		session = fs.String("session", "", "only this session's events")
		since = fs.Uint64("since", 0, "print events from `SEQ` on first (default: only new events)")
		asJSON = fs.Bool("json", false, "print the raw JSONL lines")
	case "rebuild":
	case "timeline":
		jsonl = fs.String("jsonl", "", "read this JSONL export `FILE` (default with --config: audit.jsonl when the daemon holds the store)")
		timezone = fs.String("timezone", "", "show times in this IANA `ZONE` (Europe/Berlin; default: with --config the session's channel's timezone, else UTC)")
		part = fs.String("part", "", "print only the `postmortem` (readable, no hashes) or the `appendix` (seq and hash per line); default: both")
	default:
		return fmt.Errorf("%w: unknown audit command %q\n%s", errUsage, args[0], auditUsage)
	}
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if args[0] == "timeline" {
		if fs.NArg() == 1 && timelineSession == "" {
			timelineSession = fs.Arg(0)
		} else if fs.NArg() != 0 || timelineSession == "" {
			return fmt.Errorf("%w: thinbot audit timeline SESSION [--db PATH | --config FILE | --jsonl FILE]", errUsage)
		}
	} else if fs.NArg() != 0 {
		return fmt.Errorf("%w: audit %s takes no arguments, got %q", errUsage, args[0], fs.Args())
	}
	zoneOf := func(string) *time.Location { return nil }
	console := ""
	if *config != "" {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["db"] || set["jsonl"] {
			return fmt.Errorf("%w: audit %s: --config names the store; give it or --db/--jsonl, not both", errUsage, args[0])
		}
		c, err := stateConfig(*config, e.getenv)
		if err != nil {
			return err
		}
		*db = filepath.Join(c.StateDir, "events.db")
		zoneOf, console = configZones(c), c.Web.PublicOrigin
	}
	if timezone != nil && *timezone != "" {
		loc, err := loadZone(*timezone)
		if err != nil {
			return fmt.Errorf("%w: audit timeline --timezone %q: %w", errUsage, *timezone, err)
		}
		zoneOf = func(string) *time.Location { return loc }
	}
	switch args[0] {
	case "verify":
		if len(archives) > 0 {
			if *jsonl != "" || *from != "" {
				return fmt.Errorf("%w: audit verify --archive takes no --jsonl or --from", errUsage)
			}
			withStore := *config != ""
			fs.Visit(func(f *flag.Flag) { withStore = withStore || f.Name == "db" })
			if !withStore {
				*db = ""
			}
			return verifyArchives(ctx, e, archives, *db)
		}
		if *jsonl != "" {
			if *from != "" {
				return fmt.Errorf("%w: audit verify: --from checks a store (--db or --config), not --jsonl", errUsage)
			}
			return verifyJSONLFile(ctx, e, *jsonl)
		}
		var err error
		if *from != "" {
			seq, hash, perr := parseAnchor(*from)
			if perr != nil {
				return fmt.Errorf("%w: audit verify --from: %w", errUsage, perr)
			}
			err = verifyStoreFrom(ctx, e, *db, seq, hash)
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%w: a running thinbot holds it; --from needs the store (stop the daemon), and without --from verify reads its journal", err)
			}
		} else {
			err = verifyStore(ctx, e, *db)
		}
		if *from == "" && errors.Is(err, store.ErrLocked) {
			// A running daemon holds the store: its journal is the
			// export, verifiable alone.
			journal := filepath.Join(filepath.Dir(*db), "audit.jsonl")
			fmt.Fprintf(e.stdout, "store  %s: held by the running thinbot; verifying its export instead (stop the daemon to check the store too)\n", *db)
			// A file the daemon no longer writes (rotated away and
			// replaced) would verify on its own: it must be the one.
			if err := daemonWrites(*db, journal); err != nil {
				fmt.Fprintf(e.stdout, "export %s: NOT the running thinbot's journal: %v\n", journal, err)
				return brokenError{"audit verify: the file at the journal's path is not the journal the running thinbot writes"}
			}
			return verifyJSONLFile(ctx, e, journal)
		}
		return err
	case "export":
		err := exportStore(ctx, e, *db, *session, *since)
		if errors.Is(err, store.ErrLocked) {
			err = exportJournal(ctx, e, *db, *session, *since)
		}
		return err
	case "tail":
		path := *jsonl
		if path == "" {
			path = filepath.Join(filepath.Dir(*db), "audit.jsonl")
		}
		return tailJSONL(ctx, e.stdout, path, *session, *since, *asJSON)
	case "timeline":
		if *part != agentcore.PartPostmortem && *part != agentcore.PartAppendix && *part != agentcore.PartBoth {
			return fmt.Errorf("%w: audit timeline --part %q: postmortem or appendix (default: both)", errUsage, *part)
		}
		return auditTimeline(ctx, e, *db, *jsonl, timelineSession,
			agentcore.TimelineOptions{Part: *part, Location: zoneOf(timelineSession), Console: console})
	default:
		return rebuildAudit(ctx, e, *db)
	}
}

// configStateDir is the state_dir of a daemon config. The rest of the
// config need not be valid (an auditor may not read the daemon's secrets);
// `thinbot config check` is for that.
func configStateDir(path string, getenv func(string) string) (string, error) {
	c, err := stateConfig(path, getenv)
	if err != nil {
		return "", err
	}
	return c.StateDir, nil
}

// stateConfig is a daemon config read for its state_dir (and what else
// an audit command takes from it: the timezones), valid or not.
func stateConfig(path string, getenv func(string) string) (*daemonConfig, error) {
	c, err := loadConfig(path, getenv)
	if c == nil {
		return nil, err
	}
	if c.StateDir == "" {
		return nil, fmt.Errorf("config %s has no state_dir", path)
	}
	return c, nil
}

// openReadOnly opens an existing store for reading.
func openReadOnly(path string) (*store.DB, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no event store at %s (use --db)", path)
	}
	return store.Open(path, &store.Options{ReadOnly: true})
}

// auditUsage is `thinbot audit -h`.
const auditUsage = `thinbot audit COMMAND [flags]   ('thinbot audit COMMAND -h' for its flags)

  verify    check the chain and its journal (exit 2 if broken)
  export    the chain as JSONL on stdout
  tail      follow the chain as events are appended
  timeline  a session's postmortem timeline and its verified appendix (Markdown)
  rebuild   rewrite audit.jsonl from the store, or the store from it
  archive   move old events into a sealed archive file (a cluster node: cluster-wide)
  restore   bring archived events back into a store of their own

Every command takes --db PATH (default ` + "./.thinbot/events.db" + `) or --config FILE (a daemon's
config: the store in its state_dir). verify, export, tail and timeline work on a running
daemon's store: they read its journal (audit.jsonl), which it only appends to.`

func verifyStore(ctx context.Context, e *env, path string) error {
	db, err := openReadOnly(path)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := agentcore.Verify(ctx, db, agentcore.VerifyOptions{Journal: true})
	if err != nil {
		return err
	}
	rep := v.Chain
	var broken []string
	if rep.OK {
		if rep.ArchivedSeq > 0 {
			fmt.Fprintf(e.stdout, "store  %s: ok, %sverified %d..%d: %d events, %d sessions, head seq %d hash %s\n", path, archivedNote(rep), rep.ArchivedSeq+1, rep.LastSeq, rep.Events, rep.Sessions, rep.LastSeq, rep.LastHash)
		} else {
			fmt.Fprintf(e.stdout, "store  %s: ok, %d events, %d sessions, head seq %d hash %s\n", path, rep.Events, rep.Sessions, rep.LastSeq, rep.LastHash)
		}
		printWarnings(e, rep)
	} else {
		fmt.Fprintf(e.stdout, "store  %s: BROKEN at seq %d: %s (%d good events before it)\n", path, rep.BadSeq, rep.Problem, rep.Events)
		broken = append(broken, "store")
	}
	ok, err := verifyExport(e, db, v)
	if err != nil {
		return err
	}
	if !ok {
		broken = append(broken, "export")
	}
	if len(broken) > 0 {
		return brokenError{fmt.Sprintf("audit verify: %v failed verification", broken)}
	}
	return nil
}

// verifyExport prints what v, a verification of the store with its
// journal (agentcore.Verify), found of the journal, the JSONL export; ok is
// false if it is broken.
func verifyExport(e *env, db *store.DB, v agentcore.Verification) (ok bool, err error) {
	if v.JournalErr != nil {
		return false, v.JournalErr
	}
	rep, arep := v.Chain, v.Journal
	// Warnings of the export's own: lines a process that died left past
	// the store's end, for the next writable open to replay or cut (the
	// time warnings of the events both hold were shown with the store).
	var own []string
	for _, w := range arep.Warnings {
		if !slices.Contains(rep.Warnings, w) {
			own = append(own, w)
		}
	}
	switch {
	case arep.OK && len(own) == 0 && arep.LastSeq == rep.LastSeq:
		fmt.Fprintf(e.stdout, "export %s: ok, %d events, identical to the store\n", db.AuditPath(), arep.Events)
	case arep.OK:
		fmt.Fprintf(e.stdout, "export %s: ok, %d events\n", db.AuditPath(), arep.Events)
		printWarnings(e, store.Report{Warnings: own, WarningCount: len(own)})
	default:
		fmt.Fprintf(e.stdout, "export %s: BROKEN at seq %d: %s", db.AuditPath(), arep.BadSeq, arep.Problem)
		if arep.Beyond > 0 && rep.OK {
			fmt.Fprintf(e.stdout, " (the store has %d events beyond its last good line; 'thinbot audit rebuild' rewrites it)", arep.Beyond)
		}
		fmt.Fprintln(e.stdout)
		return false, nil
	}
	return true, nil
}

// parseAnchor parses --from's SEQ:HASH: a sequence number of 1 or more and
// 64 lowercase hex digits.
func parseAnchor(s string) (uint64, string, error) {
	seqText, hash, ok := strings.Cut(s, ":")
	if !ok {
		return 0, "", fmt.Errorf("%q: want SEQ:HASH", s)
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil || seq == 0 {
		return 0, "", fmt.Errorf("%q: the sequence number must be 1 or more", seqText)
	}
	if len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return 0, "", fmt.Errorf("the hash must be 64 lowercase hex digits, got %q", hash)
	}
	return seq, hash, nil
}

// verifyStoreFrom is verify --from: the store's events after a trusted
// anchor (store.VerifyOptions.From), the daily check between full ones. It
// checks neither the events up to the anchor, nor the session summaries,
// nor the export (a full verify does).
func verifyStoreFrom(ctx context.Context, e *env, path string, seq uint64, hash string) error {
	db, err := openReadOnly(path)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := agentcore.Verify(ctx, db, agentcore.VerifyOptions{From: seq, FromHash: hash})
	if err != nil {
		return err
	}
	rep := v.Chain
	if !rep.OK {
		fmt.Fprintf(e.stdout, "store  %s: BROKEN at seq %d: %s (%d good events after the anchor seq %d)\n", path, rep.BadSeq, rep.Problem, rep.Events, seq)
		return brokenError{"audit verify: [store] failed verification"}
	}
	fmt.Fprintf(e.stdout, "store  %s: ok from the anchor seq %d: %d events after it, head seq %d hash %s\n", path, seq, rep.Events, rep.LastSeq, rep.LastHash)
	printWarnings(e, rep)
	fmt.Fprintln(e.stdout, "(--from checked the events after the anchor only: not those before it, the session summaries or the export; run it without --from for those)")
	return nil
}

// printWarnings shows what verified but deserves a look (time going
// backwards); the chain itself is intact, so the exit status stays 0.
func printWarnings(e *env, rep store.Report) {
	for _, w := range rep.Warnings {
		fmt.Fprintf(e.stdout, "WARNING: %s\n", w)
	}
	if more := rep.WarningCount - len(rep.Warnings); more > 0 {
		fmt.Fprintf(e.stdout, "WARNING: %d more like these\n", more)
	}
}

func verifyJSONLFile(ctx context.Context, e *env, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("audit verify: %w", err)
	}
	defer f.Close()
	// The chain and the checkpoints recorded in it, as a store's.
	v, err := agentcore.Verify(ctx, nil, agentcore.VerifyOptions{JSONL: f})
	if err != nil {
		return fmt.Errorf("audit verify %s: %w", path, err)
	}
	rep := *v.JSONL
	if !rep.OK {
		fmt.Fprintf(e.stdout, "export %s: BROKEN at seq %d: %s (%d good events before it)\n", path, rep.BadSeq, rep.Problem, rep.Events)
		return brokenError{"audit verify: the export failed verification"}
	}
	fmt.Fprintf(e.stdout, "export %s: ok, %s%d events, last seq %d hash %s\n", path, archivedNote(rep), rep.Events, rep.LastSeq, rep.LastHash)
	printWarnings(e, rep)
	fmt.Fprintln(e.stdout, "(a file alone cannot show a cut-off tail: compare the last hash with the store or an anchor)")
	return nil
}

func exportStore(ctx context.Context, e *env, path, session string, since uint64) error {
	db, err := openReadOnly(path)
	if err != nil {
		return err
	}
	defer db.Close()
	// The JSONL on stdout is the live chain's; where the earlier events
	// are goes to stderr.
	if rec, seq, ok, err := db.ArchivedBefore(); err != nil {
		return err
	} else if ok && since <= rec.Last {
		earlier := ""
		if rec.First > 1 {
			earlier = fmt.Sprintf(", events 1..%d in the archives before it", rec.First-1)
		}
		fmt.Fprintf(e.stderr, "events %d..%d are archived in %s (head %s, recorded by event %d)%s; this export starts at seq %d: thinbot audit restore FILE... --to DIR brings them back\n",
			rec.First, rec.Last, rec.File, rec.Head, seq, earlier, rec.Last+1)
	}
	if session != "" {
		a, archived, err := db.Archived(session)
		if err != nil {
			return err
		}
		if archived {
			fmt.Fprintf(e.stderr, "session %s: %d earlier events (seq %d..%d) are archived in %s\n", session, a.Events, a.FirstSeq, a.LastSeq, strings.Join(a.Files, ", "))
		}
		if _, live, err := db.Session(session); err != nil {
			return err
		} else if !live && !archived {
			return noSession(session)
		}
	}
	return db.Export(ctx, e.stdout, session, since)
}

// noSession is the error for a session the chain does not have.
func noSession(session string) error {
	return fmt.Errorf("no session %q in the chain ('thinbot sessions list' lists them)", session)
}

// exportJournal is exportStore for a store a running thinbot holds: the
// lines of its verified journal, the same bytes the store exports.
func exportJournal(ctx context.Context, e *env, path, session string, since uint64) error {
	j, err := openLiveJournal(ctx, path)
	if err != nil {
		return err
	}
	defer j.Close()
	fmt.Fprintln(e.stderr, j.note(path))
	if rec, seq, ok, err := j.archivedBefore(ctx); err != nil {
		return err
	} else if ok && since <= rec.Last {
		fmt.Fprintf(e.stderr, "events %d..%d are archived in %s (head %s, recorded by event %d); this export starts at seq %d: thinbot audit restore FILE... --to DIR brings them back\n",
			rec.First, rec.Last, rec.File, rec.Head, seq, rec.Last+1)
	}
	found := session == ""
	w := bufio.NewWriterSize(e.stdout, 64<<10)
	err = j.each(ctx, func(ev store.Event, line []byte) error {
		if session != "" && ev.Session != session {
			return nil
		}
		found = true
		if ev.Seq < since {
			return nil
		}
		w.Write(line)
		return w.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	if !found {
		return noSession(session)
	}
	return nil
}

// rebuildAudit rewrites the journal (audit.jsonl) from the store; with no
// store but a journal beside where it would be (a restore from backup), it
// builds the store from the journal instead. Either way it leaves the
// store's state index built.
func rebuildAudit(ctx context.Context, e *env, path string) error {
	opts := &store.Options{RebuildAudit: true, Logger: slog.New(slog.NewTextHandler(e.stderr, nil))}
	restore := false
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		journal := filepath.Join(filepath.Dir(path), "audit.jsonl")
		if _, err := os.Stat(journal); err != nil {
			return fmt.Errorf("no event store at %s and no audit.jsonl beside it (use --db)", path)
		}
		opts.RebuildAudit, restore = false, true
	}
	db, err := store.Open(path, opts)
	if err != nil {
		return err
	}
	// The state index too, which a store built from its journal lacks:
	// the next start then reads it at once instead of building it from
	// the whole chain first (seconds at a million events).
	if err := db.UseIndex(ctx, agentcore.StateIndex); err != nil {
		return errors.Join(err, db.Close())
	}
	n := db.LastSeq()
	out := db.AuditPath()
	if err := db.Close(); err != nil {
		return err
	}
	if restore {
		fmt.Fprintf(e.stdout, "built %s from %s: %d events\n", path, out, n)
		return nil
	}
	fmt.Fprintf(e.stdout, "rebuilt %s: %d events\n", out, n)
	return nil
}

// tailJSONL prints the export's events as they are appended, until ctx is
// done (store.Follower: it reads the file, which a running daemon's lock
// does not cover).
func tailJSONL(ctx context.Context, w io.Writer, path, session string, since uint64, raw bool) error {
	t := store.Follow(path, since)
	defer t.Close()
	tick := time.NewTicker(tailPoll)
	defer tick.Stop()
	for {
		for ev, line := range t.Events() {
			if session != "" && ev.Session != session {
				continue
			}
			var err error
			if raw {
				_, err = fmt.Fprintf(w, "%s\n", line)
			} else {
				_, err = fmt.Fprintf(w, "%d %s %s b%d %s %s %s\n", ev.Seq, ev.Time.Format(time.RFC3339), ev.Session, ev.Branch,
					ev.Type, ev.Actor, preview(ev.Payload, 160))
			}
			if err != nil {
				return err
			}
		}
		if err := t.Err(); err != nil {
			return fmt.Errorf("audit tail: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// preview shortens a payload for one terminal line.
func preview(p json.RawMessage, n int) string {
	if c, ok := store.Capped(p); ok {
		return fmt.Sprintf("[capped: %d bytes, sha256 %.12s…]", c.Size, c.SHA256)
	}
	s := string(p)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// daemonWrites checks that journal is the file the process holding the
// store at db (a running thinbot) has open: a journal rotated away (renamed,
// a new file created at its path) would otherwise verify as a good, short
// chain beside a store that holds more. The holder is found through
// /proc/locks (the store's state file lock) and its descriptors through
// /proc/PID/fd, which need the daemon's user or root; where they cannot
// be read, the check is not made and the note says so.
func daemonWrites(db, journal string) error {
	js, err := os.Stat(journal)
	if err != nil {
		return err
	}
	pid, err := lockHolder(db + ".state")
	if err != nil || pid == 0 {
		return nil // not found: nothing to compare with (the daemon may have stopped)
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return nil // another user's process: not visible
	}
	var writes []string
	for _, fd := range fds {
		link := filepath.Join(fdDir, fd.Name())
		target, err := os.Readlink(link)
		if err != nil || !strings.HasPrefix(filepath.Base(target), "audit.jsonl") {
			continue
		}
		if st, err := os.Stat(link); err == nil && os.SameFile(st, js) {
			return nil
		}
		writes = append(writes, target)
	}
	if len(writes) == 0 {
		return nil // a journal the daemon does not hold open: cannot tell
	}
	return fmt.Errorf("thinbot (pid %d) writes %s: the journal was moved or replaced while it ran (log rotation?), and it refuses to commit until the file is back", pid, strings.Join(writes, ", "))
}

// lockHolder returns the pid holding a flock on path, from /proc/locks
// (0 when none is listed).
func lockHolder(path string) (int, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, nil
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, err
	}
	dev := uint64(sys.Dev)
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, sys.Ino)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// 1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == want {
			pid, err := strconv.Atoi(f[4])
			if err == nil {
				return pid, nil
			}
		}
	}
	return 0, nil
}
