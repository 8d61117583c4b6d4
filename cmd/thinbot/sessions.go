package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"
)

// cmdSessions lists or clears a store's sessions:
//
//	thinbot sessions list [--db PATH]
//	thinbot sessions clear ...   (not built yet)
func cmdSessions(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: thinbot sessions list|clear [flags]", errUsage)
	}
	switch args[0] {
	case "list":
		return sessionsList(ctx, e, args[1:])
	case "clear":
		return errors.New("sessions clear: not built yet")
	}
	return fmt.Errorf("%w: unknown sessions command %q (want list or clear)", errUsage, args[0])
}

func sessionsList(_ context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("sessions list", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	dbPath := fs.String("db", defaultDB, "event store `PATH`")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
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
