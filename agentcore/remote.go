package agentcore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/gate"
)

// BindingSHA is the hash an approval is bound to: of the command alone for
// a local command; with targets, of the command, a NUL byte and the target
// names joined by newlines, so the same command on other hosts is another
// approval.
func BindingSHA(command string, targets []string) string {
	b := []byte(command)
	if len(targets) > 0 {
		b = append(append(b, 0), strings.Join(targets, "\n")...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// targets resolves a tool call's target to inventory hosts, within the
// turn's groups. The error text goes to the model.
func (r *run) targets(target string) ([]fleet.Host, error) {
	if r.cfg.Fleet == nil {
		return nil, fmt.Errorf("no fleet is configured, so there are no remote hosts; leave target out to run here")
	}
	hosts, err := r.cfg.Fleet.Inventory().Select(target)
	if err != nil {
		return nil, err
	}
	if len(r.t.FleetGroups) > 0 {
		var outside []string
		for _, h := range hosts {
			if !slices.ContainsFunc(h.Groups, func(g string) bool { return slices.Contains(r.t.FleetGroups, g) }) {
				outside = append(outside, h.Name)
			}
		}
		if len(outside) > 0 {
			return nil, fmt.Errorf("this channel may only target the groups %s; not %s", strings.Join(r.t.FleetGroups, ", "), fleet.Ranges(outside))
		}
	}
	return hosts, nil
}

func hostNames(hs []fleet.Host) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return out
}

// runRemote gates a command once, asks one approval naming every target
// when needed, and runs it on all of them: pass verdicts with each group's
// read-only identity, approved ones with its privileged identity.
func (r *run) runRemote(ctx context.Context, call ToolCall, command, reason, target string) (string, bool, *ExecResult, error) {
	hosts, err := r.targets(target)
	if err != nil {
		content := "error: target " + target + ": " + err.Error()
		r.hookResult(CommandInfo{Tool: ToolRun, Command: command}, content, true)
		return content, true, nil, nil
	}
	// The local sandbox plays no part remotely: the remote read-only
	// identity is what confines a pass verdict there.
	d := r.cfg.Policy.Classify(command)
	requested := command
	command = program(d, command)
	info := CommandInfo{Tool: ToolRun, Command: command, Requested: requested, Targets: hostNames(hosts)}
	return r.remote(ctx, call, info, d, reason, hosts, command)
}

// readRemote serves read_file with a target: the path is gated like a
// local one and read by awk on every host (numbered lines from offset,
// at most limit lines and readFileLimit bytes).
func (r *run) readRemote(ctx context.Context, call ToolCall, args toolArgs) (string, bool, *ExecResult, error) {
	p := args.Path
	if !strings.HasPrefix(p, "/") {
		content := "error: with a target, read_file needs an absolute path"
		return content, true, nil, nil
	}
	p = path.Clean(p)
	hosts, err := r.targets(args.Target)
	if err != nil {
		content := "error: target " + args.Target + ": " + err.Error()
		r.hookResult(CommandInfo{Tool: ToolReadFile, Command: p}, content, true)
		return content, true, nil, nil
	}
	offset, limit := max(args.Offset, 1), args.Limit
	if limit <= 0 {
		limit = 2000
	}
	command := fmt.Sprintf(`awk -v o=%d -v l=%d 'NR>=o+l{print "[... more lines; continue with offset " NR " ...]"; exit} NR>=o{printf "%%6d\t%%s\n", NR, $0}' < %s | head -c %d`,
		offset, limit, textfmt.ShellQuote(p), readFileLimit)
	d := r.cfg.Policy.ClassifyPath(p)
	info := CommandInfo{Tool: ToolReadFile, Command: p, Targets: hostNames(hosts)}
	return r.remote(ctx, call, info, d, "read "+p, hosts, command)
}

func (r *run) remote(ctx context.Context, call ToolCall, info CommandInfo, d gate.Decision, reason string, hosts []fleet.Host, command string) (string, bool, *ExecResult, error) {
	if d.Verdict != gate.Pass {
		info.Logins = r.cfg.Fleet.Logins(hosts, sandbox.Approved)
	}
	ok, refusal, err := r.decide(ctx, call, info, d, reason)
	if err != nil {
		return "", false, nil, err
	}
	info.Verdict, info.Reason = d.Verdict.String(), d.Reason
	if !ok {
		r.hookResult(info, refusal, true)
		return refusal, true, nil, nil
	}
	if err := ctx.Err(); err != nil {
		r.stopped = CauseOf(ctx)
		return notRun(r.stopped), true, nil, nil
	}
	// Nothing starts while the local sandbox is still starting, ssh
	// included: its start ends with this process made non-dumpable.
	if _, err := r.cfg.Exec.started(ctx); err != nil {
		content := "error: " + err.Error()
		r.hookResult(info, content, true)
		return content, true, nil, nil
	}
	start := r.cfg.Now()
	// The same time limit and output capture as a local command (a
	// fleet's own timeout, when configured, wins).
	ec := r.cfg.Exec.withDefaults()
	results := r.cfg.Fleet.Run(ctx, hosts, modeFor(d.Verdict), command, fleet.Limits{Timeout: ec.Timeout, CaptureLimit: ec.CaptureLimit})
	for i := range results {
		results[i].Output = []byte(r.maskOutput(string(results[i].Output)))
	}
	content := fleet.Summary(results, r.cfg.Exec.ViewLimit)
	if ctx.Err() != nil {
		// Hosts the cancellation stopped are in the summary; why, here.
		r.stopped = CauseOf(ctx)
		content = interrupted(r.stopped) + "; the remote commands were stopped\n" + content
	}
	sum := sha256.Sum256([]byte(content))
	ex := &ExecResult{Targets: info.Targets, Remote: results, Output: []byte(content), Size: int64(len(content)),
		SHA256: hex.EncodeToString(sum[:]), Duration: r.cfg.Now().Sub(start), Cancelled: ctx.Err() != nil, Cause: r.stopped}
	isErr := false
	for _, r := range results {
		isErr = isErr || !r.OK()
	}
	if r.t.Hooks.Result != nil {
		// The attachment: every host's own output, one after another.
		var b strings.Builder
		for _, r := range results {
			fmt.Fprintf(&b, "==> %s (%s) <==\n", r.Host, hostStatus(r))
			b.Write(r.Output)
			if len(r.Output) > 0 && r.Output[len(r.Output)-1] != '\n' {
				b.WriteByte('\n')
			}
		}
		info.Output, info.Size = []byte(b.String()), int64(b.Len())
	}
	r.hookResult(info, content, isErr)
	return content, isErr, ex, nil
}

func hostStatus(r fleet.Result) string {
	switch {
	case r.Err != "":
		return "unreachable: " + r.Err
	case r.TimedOut:
		return "timed out"
	case r.NotStarted:
		return "not started"
	case r.Cancelled:
		return "stopped"
	}
	return fmt.Sprintf("exit %d", r.ExitCode)
}

func hostRecords(rs []fleet.Result) []HostRecord {
	out := make([]HostRecord, len(rs))
	for i, r := range rs {
		out[i] = HostRecord{Host: r.Host, User: r.User, ExitCode: r.ExitCode, OutputSize: r.Size, OutputSHA: r.SHA256,
			DurationMS: r.Duration.Round(time.Millisecond).Milliseconds(), Error: r.Err, TimedOut: r.TimedOut, Cancelled: r.Cancelled, NotStarted: r.NotStarted}
	}
	return out
}

// TargetSummary names remote targets for a person: their count and their
// names, numbered runs compacted (3 hosts: web-[01-03]); cut past about
// 1500 bytes, saying so. Empty for none.
func TargetSummary(targets []string) string {
	if len(targets) == 0 {
		return ""
	}
	names := fleet.Ranges(targets)
	if len(names) > 1500 {
		names = strings.ToValidUTF8(names[:1500], "") + " … (cut; the chain lists them all)"
	}
	if len(targets) == 1 {
		return "1 host: " + names
	}
	return fmt.Sprintf("%d hosts: %s", len(targets), names)
}

// LoginSummary names the logins of an approval for a person: "as
// thinbot-rw, the privileged login"; "with their privileged login" when
// none is known (ssh_config decides).
func LoginSummary(logins []string) string {
	var named []string
	for _, l := range logins {
		if l != "" {
			named = append(named, l)
		}
	}
	switch {
	case len(named) == 0:
		return "with their privileged login"
	case len(named) == 1 && len(logins) == 1:
		return "as " + named[0] + ", the privileged login"
	}
	s := "as " + textfmt.HeadTail(strings.Join(named, ", "), 300)
	if len(named) < len(logins) {
		s += " or as ssh_config says"
	}
	return s + ", the privileged logins"
}

// fleetPrompt tells the model which remote hosts it may target: the groups
// (only the turn's, when it is limited) with their hosts, within about 2
// KiB. The inventory is fixed at start, so the prompt stays byte-stable.
func fleetPrompt(inv *fleet.Inventory, only []string) string {
	var b strings.Builder
	b.WriteString("\n\n# Remote hosts\nGive run or read_file a target (a host, a group, or a pattern such as web*, web:db, web:!web-03) to run on these hosts over SSH instead of here. Each host's login shell runs the command; read-only commands log in with a read-only account, approved ones with a privileged one. Identical outputs come back grouped.\n")
	groups := inv.GroupNames()
	if len(only) > 0 {
		groups = slices.DeleteFunc(slices.Clone(groups), func(g string) bool { return !slices.Contains(only, g) })
	}
	grouped := map[string]bool{}
	for i, g := range groups {
		hs := inv.GroupHosts(g)
		if len(hs) == 0 {
			continue
		}
		for _, h := range hs {
			grouped[h] = true
		}
		line := fmt.Sprintf("- %s (%d): %s\n", g, len(hs), fleet.Ranges(hs))
		if b.Len()+len(line) > 2048 {
			fmt.Fprintf(&b, "(%d more groups not listed)\n", len(groups)-i)
			return b.String()
		}
		b.WriteString(line)
	}
	if len(only) == 0 {
		var rest []string
		for _, h := range inv.Hosts() {
			if !grouped[h.Name] {
				rest = append(rest, h.Name)
			}
		}
		if len(rest) > 0 {
			b.WriteString(textfmt.HeadTail("- hosts in no group: "+fleet.Ranges(rest), 400) + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
