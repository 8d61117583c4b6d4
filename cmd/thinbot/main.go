// Command thinbot is a thin ChatOps agent: it puts an LLM agent into Mattermost
// or Slack threads (thinbot serve) or a terminal (thinbot ask|chat|goal), gates
// every command, and records every event in a hash-chained, verifiable log.
//
// This package is wiring only: flags, environment, config files and signals.
// main calls run, which the end-to-end tests call too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"
	// The zone database, for the timezone keys where the system has none
	// (a minimal container without /usr/share/zoneinfo): about 410 KiB, 1.6%
	// of the release binary.
	_ "time/tzdata"

	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// version is set at link time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

// errUsage marks an error caused by bad arguments; run prints usage for it.
var errUsage = errors.New("usage")

// flagSet is a command's flags. Every command parses its flags through
// parse, so that they all answer alike: -h prints the flags and succeeds,
// a bad flag prints them and is a usage error.
type flagSet struct{ *flag.FlagSet }

// newFlags is the flag set of the command name; it writes to e.stderr.
func newFlags(e *env, name string) flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	return flagSet{fs}
}

// parse parses args. Its error wraps errUsage and the flag package's
// error; for -h that is flag.ErrHelp, which run answers with success.
func (fs flagSet) parse(args []string) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	return nil
}

// env is the process environment as run sees it. Only cmd/thinbot reads the
// environment; it passes values down in config structs.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// interrupts delivers SIGINT in interactive modes; nil in tests that do not need it.
	interrupts <-chan os.Signal
	// logJSON is set by a command whose log lines are JSON (serve --config):
	// its final error is then a JSON line too, so that a log pipeline that
	// reads JSON keeps the line saying why the daemon stopped.
	logJSON bool
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

func commands() []command {
	return []command{
		{"ask", "answer one question in this directory and exit", cmdAsk},
		{"chat", "talk with the agent in this directory (interactive)", cmdChat},
		{"goal", "work on a goal until the model says it is done or a budget ends", cmdGoal},
		{"serve", "web console on 127.0.0.1:8080; with --config the chat daemon (Mattermost, Slack)", cmdServe},
		{"sessions", "list or clear this directory's sessions", cmdSessions},
		{"audit", "verify, export or follow the event chain", cmdAudit},
		{"gate", "check commands against the gate, print the policy", cmdGate},
		{"skills", "list skills and why some are hidden, check a skill folder, install the built-in packs, pin a skill set (lock)", cmdSkills},
		{"config", "check a daemon config file", cmdConfig},
		{"sandbox", "show what kernel sandbox this host supports (sandbox check)", cmdSandbox},
		{"hosts", "list the fleet's hosts, groups and logins (remote targets over SSH)", cmdHosts},
		{"mcp", "MCP server on stdio for coding agents: each call goes to the daemon's gate, approvals and audit log", cmdMCP},
		{"version", "print the version", cmdVersion},
		{"help", "show this help", nil},
	}
}

func main() {
	// The kernel sandbox's helper is this binary, re-executed: it must take
	// over before anything else runs.
	sandbox.Main(os.Args)
	if len(os.Args) > 1 && slices.Contains([]string{"ask", "chat", "goal", "serve", "sandbox"}, os.Args[1]) {
		// Commands run under these: no command may read a credential
		// from this process's environment (/proc/<pid>/environ).
		if err := sandbox.HideEnviron(os.Args); err != nil {
			fmt.Fprintln(os.Stderr, "thinbot: warning:", err)
		}
	}
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stopOn := []os.Signal{syscall.SIGTERM}
	if len(os.Args) > 1 && (os.Args[1] == "ask" || os.Args[1] == "chat" || os.Args[1] == "goal") {
		// The terminal modes give Ctrl+C its own meaning: interrupt the
		// current model call or command, keep the session.
		ints := make(chan os.Signal, 4)
		signal.Notify(ints, os.Interrupt)
		e.interrupts = ints
		// A closed terminal (SIGHUP) and a closed output pipe (SIGPIPE:
		// `thinbot ask ... | head`) end them as SIGTERM does, through
		// ctx, so that what they opened is closed (the fleet's privileged
		// SSH masters) instead of the process dying at once.
		stopOn = append(stopOn, syscall.SIGHUP)
		stopPipe := brokenPipeStops(e, cancel)
		defer stopPipe()
	} else {
		stopOn = append(stopOn, os.Interrupt)
	}
	stop := cancelOnSignal(cancel, stopOn...)
	defer stop()
	if err := run(ctx, e, os.Args[1:]); err != nil {
		code := exitCodeOf(err)
		reportError(e.stderr, e.logJSON, err, code)
		os.Exit(code)
	}
}

// exitCodeOf is the exit status for run's error: 0 for none, the error's
// own (exitCoder), else 1. A usage error (an unknown command, verb or
// flag) is 1 too, not the 2 of Go's flag package: `audit verify` exits 2
// only when the chain is broken, which monitoring pages on, and a typo in
// a cron line must not read as tampering.
func exitCodeOf(err error) int {
	var ec exitCoder
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ec):
		return ec.ExitCode()
	}
	return 1
}

// reportError writes the error that ends the process: as a JSON log line
// (level ERROR, msg "thinbot exited", err, exit_code) where the command
// logs JSON, otherwise as "thinbot: ERR"; nothing for a silent error (a
// command's exit code passed on, as sandbox exec does).
func reportError(w io.Writer, logJSON bool, err error, code int) {
	var s interface{ Silent() bool }
	if errors.As(err, &s) && s.Silent() {
		return
	}
	if !logJSON {
		fmt.Fprintln(w, "thinbot:", err)
		return
	}
	slog.New(slog.NewJSONHandler(w, nil)).Error("thinbot exited", "err", err.Error(), "exit_code", code)
}

// exitCoder lets an error choose the process exit code (audit verify uses 2 for
// "chain broken" versus 1 for "could not check").
type exitCoder interface{ ExitCode() int }

// run dispatches one thinbot invocation.
func run(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		usage(e.stderr)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "--help":
		usage(e.stdout)
		return nil
	case "-v", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name && c.run != nil {
			err := c.run(ctx, e, rest)
			switch {
			case errors.Is(err, flag.ErrHelp):
				// The flag set printed the command's flags: asking for
				// help is no error.
				return nil
			case errors.Is(err, errUsage) && len(rest) > 0 && isHelpFlag(rest[0]):
				// "thinbot gate -h": a command with verbs answers with
				// its usage line.
				fmt.Fprintln(e.stdout, err)
				return nil
			}
			return err
		}
	}
	usage(e.stderr)
	return fmt.Errorf("%w: unknown command %q", errUsage, name)
}

func isHelpFlag(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

func usage(w io.Writer) {
	fmt.Fprintln(w, "thinbot: a thin, audited agent for chat threads and terminals")
	fmt.Fprintln(w, "\nusage: thinbot COMMAND [flags] [args]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'thinbot COMMAND -h' for a command's flags.")
}

func cmdVersion(_ context.Context, e *env, _ []string) error {
	fmt.Fprintln(e.stdout, "thinbot", version)
	return nil
}
