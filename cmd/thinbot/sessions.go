package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// cmdSessions lists or clears a store's sessions:
//
//	thinbot sessions list [--db PATH]
//	thinbot sessions clear [--db PATH] [--session ID]
func cmdSessions(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: thinbot sessions list|clear [flags]", errUsage)
	}
	switch args[0] {
	case "list":
		return sessionsList(ctx, e, args[1:])
	case "clear":
		return sessionsClear(ctx, e, args[1:])
	}
	return fmt.Errorf("%w: unknown sessions command %q (want list or clear)", errUsage, args[0])
}

func sessionsList(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "sessions list")
	dbPath := fs.String("db", defaultDB, "event store `PATH`")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: sessions list takes no arguments, got %q", errUsage, fs.Args())
	}
	db, err := openReadOnly(*dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	list, err := db.Sessions()
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
	dbPath := fs.String("db", defaultDB, "event store `PATH`")
	session := fs.String("session", localSession, "session `ID` to clear")
	if err := fs.parse(args); err != nil {
		return err
	}
	db, err := store.Open(*dbPath, nil)
	if err != nil {
		return err
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
