package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// cmdSessions lists or clears a store's sessions:
//
//	thinbot sessions list [--db PATH | --config FILE]
//	thinbot sessions clear [--db PATH | --config FILE] [--session ID]
//
// list works on a store a running daemon holds: it reads the daemon's
// journal (livejournal.go).
func cmdSessions(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || isHelpFlag(args[0]) {
		return fmt.Errorf("%w: thinbot sessions list|clear [--db PATH | --config FILE] [flags]", errUsage)
	}
	switch args[0] {
	case "list":
		return sessionsList(ctx, e, args[1:])
	case "clear":
		return sessionsClear(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: unknown sessions command %q (want list or clear)", errUsage, args[0])
}

func sessionsList(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "sessions list")
	dbPath := storeFlags(e, fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: sessions list takes no arguments, got %q", errUsage, fs.Args())
	}
	path, err := dbPath()
	if err != nil {
		return err
	}
	var list []store.SessionInfo
	db, err := openReadOnly(path)
	switch {
	case err == nil:
		defer db.Close()
		list, err = db.Sessions()
	case errors.Is(err, store.ErrLocked):
		var j *liveJournal
		if j, err = openLiveJournal(ctx, path); err == nil {
			defer j.Close()
			fmt.Fprintln(e.stderr, j.note(path))
			list, err = j.sessions(ctx)
		}
	}
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tEVENTS\tFIRST\tLAST")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", s.ID, s.Events, s.First.Format(time.RFC3339), s.Last.Format(time.RFC3339))
	}
	return tw.Flush()
}

// sessionsClear starts a new branch of a session (by default this
// directory's continuing session): its history stays in the chain and the
// audit export, but the next run starts fresh. Nothing is deleted: the
// chain is append-only.
func sessionsClear(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "sessions clear")
	dbPath := storeFlags(e, fs)
	session := fs.String("session", localSession, "session `ID` to clear")
	if err := fs.parse(args); err != nil {
		return err
	}
	path, err := dbPath()
	if err != nil {
		return err
	}
	db, err := store.Open(path, nil)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("%w: a running thinbot holds it; clear the thread from its chat instead (/clear), or stop the daemon", err)
	}
	if err != nil {
		return err
	}
	if _, ok, err := db.Session(*session); err != nil {
		return err
	} else if !ok {
		return noSession(*session)
	}
	defer db.Close()
	// No model is called: clearing only appends a clear event.
	ag, err := agentcore.New(agentcore.Config{Store: db, Model: noModel{}, Policy: gate.DefaultPolicy()})
	if err != nil {
		return err
	}
	if err := ag.Clear(*session, "user:"+userName(e)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "session %s cleared: a new branch starts; the history stays in the audit log\n", *session)
	return nil
}

// noModel is the Model of commands that never call one.
type noModel struct{}

func (noModel) Complete(context.Context, agentcore.Request) (agentcore.Response, error) {
	return agentcore.Response{}, errors.New("no model configured for this command")
}

// storeFlags adds --db and --config to fs; the function it returns, called
// after parsing, is the store's path: --db, or events.db in the state_dir
// of the daemon config --config names. Both at once is a usage error.
func storeFlags(e *env, fs flagSet) func() (string, error) {
	db := fs.String("db", defaultDB, "event store `PATH`")
	config := fs.String("config", "", "a daemon's config `FILE`: the event store in its state_dir")
	return func() (string, error) {
		if *config == "" {
			return *db, nil
		}
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "db" })
		if set {
			return "", fmt.Errorf("%w: %s: --config names the store; give it or --db, not both", errUsage, fs.Name())
		}
		dir, err := configStateDir(*config, e.getenv)
		if err != nil {
			return "", err
		}
		return filepath.Join(dir, "events.db"), nil
	}
}
