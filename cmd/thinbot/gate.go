package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/thinbot/thinbot/gate"
)

// cmdGate checks commands against the gate and prints the policy:
//
//	thinbot gate check [--json] [--policy FILE] [--dir DIR] 'COMMAND' | -
//	thinbot gate policy [--policy FILE]
func cmdGate(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: thinbot gate check|policy [flags]", errUsage)
	}
	switch args[0] {
	case "check":
		return gateCheck(ctx, e, args[1:])
	case "policy":
		return gatePolicy(e, args[1:])
	}
	return fmt.Errorf("%w: unknown gate command %q (want check or policy)", errUsage, args[0])
}

// gateResult is one line of `gate check --json` output.
type gateResult struct {
	Command string       `json:"command"`
	Verdict gate.Verdict `json:"verdict"`
	Reason  string       `json:"reason"`
	Rule    string       `json:"rule"`
}

func gateCheck(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "gate check")
	asJSON := fs.Bool("json", false, "print JSON (JSON Lines when reading stdin)")
	policyFile := fs.String("policy", "", "policy `FILE` that extends or replaces the default")
	dir := fs.String("dir", "", "working `DIR` the command would run in (for relative paths and trusted git repositories)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: thinbot gate check [--json] [--policy FILE] [--dir DIR] 'COMMAND'\n       thinbot gate check [flags] -   (one command per line on stdin)")
		fs.PrintDefaults()
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: gate check takes one command (quote it) or - for stdin", errUsage)
	}
	p, err := loadPolicy(*policyFile)
	if err != nil {
		return fmt.Errorf("gate check: %w", err)
	}
	report := func(cmd string) error {
		d := p.ClassifyIn(*dir, cmd)
		if *asJSON {
			b, err := json.Marshal(gateResult{Command: cmd, Verdict: d.Verdict, Reason: d.Reason, Rule: d.Rule})
			if err != nil {
				return fmt.Errorf("gate check: %w", err)
			}
			_, err = fmt.Fprintf(e.stdout, "%s\n", b)
			return err
		}
		_, err := fmt.Fprintf(e.stdout, "%s\t%s\t%s\n", d.Verdict, d.Rule, d.Reason)
		return err
	}
	if fs.Arg(0) != "-" {
		return report(fs.Arg(0))
	}
	return eachLine(ctx, e.stdin, report)
}

// eachLine calls f for every non-empty line of r until r ends or ctx is
// done. Lines may be up to 1 MiB long; the gate confirms anything over its
// own limit.
func eachLine(ctx context.Context, r io.Reader, f func(string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if sc.Text() == "" {
			continue
		}
		if err := f(sc.Text()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("gate check: read stdin: %w", err)
	}
	return nil
}

func gatePolicy(e *env, args []string) error {
	fs := newFlags(e, "gate policy")
	policyFile := fs.String("policy", "", "policy `FILE` that extends or replaces the default")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("%w: gate policy takes no arguments", errUsage)
	}
	p, err := loadPolicy(*policyFile)
	if err != nil {
		return fmt.Errorf("gate policy: %w", err)
	}
	out, err := p.YAML()
	if err != nil {
		return fmt.Errorf("gate policy: %w", err)
	}
	_, err = e.stdout.Write(out)
	return err
}
