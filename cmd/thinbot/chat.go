package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/skills"
)

// cmdChat is the interactive mode: it continues this directory's session.
func cmdChat(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "chat")
	var f localFlags
	f.register(fs.FlagSet)
	goal := fs.Bool("g", false, "goal mode for every message")
	if err := fs.parse(args); err != nil {
		return err
	}
	defer tuneGC(e.getenv)()
	l, err := openLocal(e, &f)
	if err != nil {
		return err
	}
	defer l.Close()
	lines := newLineReader(e.stdin)
	approver := &terminalApprover{e: e, lines: lines}
	fmt.Fprintf(e.stderr, "thinbot chat in %s — /help for commands, Ctrl+C interrupts, /exit quits\n", l.dir)
	interruptsAtPrompt := 0
	for {
		fmt.Fprint(e.stderr, "> ")
		var line string
		select {
		case <-ctx.Done():
			return nil
		case <-e.interrupts:
			interruptsAtPrompt++
			if interruptsAtPrompt >= 2 {
				fmt.Fprintln(e.stderr)
				return nil
			}
			fmt.Fprintln(e.stderr, "\n(press Ctrl+C again to exit)")
			continue
		case l2, ok := <-lines.lines:
			if !ok {
				fmt.Fprintln(e.stderr)
				return lines.err
			}
			line = strings.TrimSpace(l2)
		}
		interruptsAtPrompt = 0
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") {
			quit, err := chatCommand(ctx, e, l, line)
			if err != nil {
				fmt.Fprintln(e.stderr, "error:", err)
			}
			if quit {
				return nil
			}
			continue
		}
		runCtx, stop := interruptible(ctx, e)
		hooks, streamed := streaming(e, progress(e.stderr))
		res, err := l.agent.Run(runCtx, agentcore.Turn{
			Session: localSession, Actor: "user:" + userName(e), Text: line, Dir: l.dir,
			Goal: *goal, AllowAll: f.allowAll, Approver: approver, Hooks: hooks,
		})
		stop()
		if answer := strings.TrimSpace(res.Answer); answer != "" && answer != strings.TrimSpace(streamed()) {
			fmt.Fprintln(e.stdout, answer)
		}
		switch {
		case res.Status == agentcore.StatusCancelled:
			fmt.Fprintln(e.stderr, "(interrupted; the session is kept)")
		case err != nil:
			fmt.Fprintln(e.stderr, "error:", err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// streaming shows the model's text on stdout as it arrives. The returned
// func gives the text streamed since the last command, so that an answer
// already shown is not printed again.
func streaming(e *env, h agentcore.Hooks) (agentcore.Hooks, func() string) {
	var seg strings.Builder
	cmd := h.Command
	h.Text = func(delta string) {
		fmt.Fprint(e.stdout, delta)
		seg.WriteString(delta)
	}
	h.Command = func(c agentcore.CommandInfo) {
		if seg.Len() > 0 {
			fmt.Fprintln(e.stdout)
			seg.Reset()
		}
		if cmd != nil {
			cmd(c)
		}
	}
	return h, func() string {
		s := seg.String()
		if s != "" && !strings.HasSuffix(s, "\n") {
			fmt.Fprintln(e.stdout)
		}
		return s
	}
}

// chatCommand handles a /command; quit reports /exit.
func chatCommand(ctx context.Context, e *env, l *local, line string) (quit bool, err error) {
	switch strings.Fields(line)[0] {
	case "/exit", "/quit":
		return true, nil
	case "/clear":
		if err := l.agent.Clear(localSession, "user:"+userName(e)); err != nil {
			return false, err
		}
		fmt.Fprintln(e.stderr, "(new topic: earlier messages stay in the log but leave the context)")
	case "/compact":
		before, after, err := l.agent.Compact(ctx, localSession)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(e.stderr, "(compacted: about %d -> %d tokens)\n", before, after)
	case "/skills":
		fmt.Fprint(e.stdout, skillsSummary(l.set))
	case "/help":
		fmt.Fprintln(e.stderr, "/clear new topic (history kept)  /compact summarise now  /skills list skills  /exit quit")
	default:
		return false, fmt.Errorf("unknown command %s (try /help)", line)
	}
	return false, nil
}

// skillsSummary is what /skills shows: the loaded skills, and the hidden
// ones with the reason.
func skillsSummary(set skills.Set) string {
	var b strings.Builder
	if len(set.Skills) == 0 {
		b.WriteString("No skills loaded.\n")
	}
	for _, s := range set.Skills {
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, textfmt.OneLine(s.Description, 100))
	}
	for _, f := range set.Filtered {
		fmt.Fprintf(&b, "- hidden %s (%s): %s\n", f.Name, f.Dir, f.Reason)
	}
	for _, s := range set.Shadowed {
		fmt.Fprintf(&b, "- shadowed %s in %s by %s\n", s.Name, s.Dir, s.By)
	}
	return b.String()
}
