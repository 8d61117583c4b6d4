package fleet

import (
	"fmt"
	"sort"
	"strings"

	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// Summary writes results for the model and the chat: a count line, then
// hosts with identical output and exit code grouped under one header
// (web-[01-17]), the groups with most hosts first. Timeouts, stops, hosts
// not started and unreachable hosts (with ssh's reason) are listed right
// under the count line, before the outputs. It stays within about limit bytes:
// each group's output is cut in the middle to its share, and groups past
// the 20th are only named.
func Summary(results []Result, limit int) string {
	if limit <= 0 {
		limit = 16 << 10
	}
	type group struct {
		hosts  []string
		code   int
		output string
	}
	var groups []*group
	index := map[string]*group{}
	var ok, failed, timedOut, stopped, notStarted []string
	unreachable := map[string][]string{} // reason -> hosts
	var reasons []string
	for _, r := range results {
		switch {
		case r.Err != "":
			if _, seen := unreachable[r.Err]; !seen {
				reasons = append(reasons, r.Err)
			}
			unreachable[r.Err] = append(unreachable[r.Err], r.Host)
			continue
		case r.NotStarted:
			notStarted = append(notStarted, r.Host)
			continue
		case r.Cancelled:
			stopped = append(stopped, r.Host)
		case r.TimedOut:
			timedOut = append(timedOut, r.Host)
		case r.ExitCode == 0:
			ok = append(ok, r.Host)
		default:
			failed = append(failed, r.Host)
		}
		if r.Cancelled || r.TimedOut {
			if r.Size == 0 {
				continue
			}
		}
		key := fmt.Sprintf("%d %v %v %s", r.ExitCode, r.TimedOut, r.Cancelled, r.SHA256)
		g := index[key]
		if g == nil {
			g = &group{code: r.ExitCode, output: string(r.Output)}
			if r.TimedOut {
				g.code = -2
			} else if r.Cancelled {
				g.code = -3
			}
			index[key] = g
			groups = append(groups, g)
		}
		g.hosts = append(g.hosts, r.Host)
	}
	sort.SliceStable(groups, func(i, j int) bool { return len(groups[i].hosts) > len(groups[j].hosts) })

	var b strings.Builder
	n := 0
	for _, hs := range unreachable {
		n += len(hs)
	}
	fmt.Fprintf(&b, "%d host(s): %d exit 0, %d failed", len(results), len(ok), len(failed))
	if len(timedOut) > 0 {
		fmt.Fprintf(&b, ", %d timed out", len(timedOut))
	}
	if len(stopped) > 0 {
		fmt.Fprintf(&b, ", %d stopped", len(stopped))
	}
	if len(notStarted) > 0 {
		fmt.Fprintf(&b, ", %d not started", len(notStarted))
	}
	fmt.Fprintf(&b, ", %d unreachable\n", n)
	// The hosts that did not answer come first, right under the counts: a
	// reader (or a view) that stops after a few lines still sees them.
	if len(timedOut) > 0 {
		fmt.Fprintf(&b, "== timed out (killed): %s\n", Ranges(timedOut))
	}
	if len(stopped) > 0 {
		fmt.Fprintf(&b, "== stopped (killed): %s\n", Ranges(stopped))
	}
	if len(notStarted) > 0 {
		fmt.Fprintf(&b, "== not started (the run was stopped first; nothing was tried there): %s\n", Ranges(notStarted))
	}
	for _, why := range reasons {
		hs := unreachable[why]
		fmt.Fprintf(&b, "== unreachable, nothing ran: %s (%d host%s): %s\n", Ranges(hs), len(hs), plural(len(hs)), textfmt.HeadTail(why, 600))
	}
	const maxGroups = 20
	shown := min(len(groups), maxGroups)
	share := limit
	if shown > 0 {
		share = max(256, (limit-512)/shown)
	}
	for i, g := range groups {
		if i == maxGroups {
			var rest []string
			for _, g := range groups[i:] {
				rest = append(rest, g.hosts...)
			}
			fmt.Fprintf(&b, "\n== %d more distinct outputs, not shown: %s\n", len(groups)-i, Ranges(rest))
			break
		}
		status := fmt.Sprintf("exit %d", g.code)
		switch g.code {
		case -2:
			status = "timed out"
		case -3:
			status = "stopped"
		}
		fmt.Fprintf(&b, "\n== %s (%d host%s, %s):\n", Ranges(g.hosts), len(g.hosts), plural(len(g.hosts)), status)
		out := strings.TrimRight(g.output, "\n")
		if out == "" {
			b.WriteString("(no output)\n")
			continue
		}
		b.WriteString(textfmt.HeadTail(out, share))
		b.WriteString("\n")
	}
	return textfmt.HeadTail(b.String(), limit+1024)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
