package agentcore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// basePrompt is the built-in system prompt.
const basePrompt = `You are thinbot, an operations assistant working on a Linux machine for an on-call team.
You work through tools: run shell commands, read files, load skills. Read-only commands run at once; commands that change anything wait for a human's approval, so give a short reason with each; some commands are refused by policy: do not try to get around a refusal.
Prefer small, targeted commands with compact output (use head, tail, grep, wc). Investigate before you conclude, and say what you verified and what you assume.
When a skill in the index fits the task, load it with the skill tool and follow it.
Answer in the user's language, briefly, in Markdown.`

// defaultCompactPrompt asks the model for a summary that replaces history.
const defaultCompactPrompt = `The conversation is getting long. Write a summary that will replace everything above it.
Keep: the user's goal and requests, facts found (host names, paths, numbers, errors), commands that worked and their key results, decisions and approvals, what is still open and the next step.
Leave out: raw command output, failed attempts that taught nothing. Write plain text, at most 400 words.`

// MemoryFile is where a workspace's memory lives, relative to the workspace.
const MemoryFile = ".thinbot/memory.md"

const (
	maxInstructionBytes = 64 << 10
	maxMemoryBytes      = 32 << 10
	readFileLimit       = 64 << 10
)

// systemPrompt builds the prompt for a run: base prompt, instruction layers
// (global, workspace, channel), skill index and memory.
func (a *Agent) systemPrompt(rs *runState) string {
	var b strings.Builder
	base := a.cfg.Prompt
	if base == "" {
		base = basePrompt
	}
	b.WriteString(base)
	if rs.text {
		b.WriteString("\n\n")
		p := textProtocolPrompt
		if !rs.t.Goal {
			p = strings.Replace(p, goalDoneHint, "", 1)
		}
		b.WriteString(p)
	} else if rs.t.Goal {
		b.WriteString("\n\nYou are in goal mode: keep working step by step until the goal is reached, then call agent_done with a summary.")
	}
	layers := []string{a.cfg.GlobalInstructions}
	if rs.t.Dir != "" {
		layers = append(layers, readLimited(filepath.Join(rs.t.Dir, "AGENT.md"), maxInstructionBytes))
	}
	layers = append(layers, rs.t.Instructions...)
	first := true
	for _, l := range layers {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if first {
			b.WriteString("\n\n# Instructions\n")
			first = false
		}
		b.WriteString("\n")
		b.WriteString(l)
		b.WriteString("\n")
	}
	if len(a.cfg.Skills.Skills) > 0 {
		// The index is ranked against the session's first message, which
		// the chain keeps: every run of the session builds the same bytes
		// (a stable prefix), and the configured window, not one a server
		// reported later, sizes it.
		query := rs.s.proj.FirstUser()
		if query == "" {
			query = rs.t.Text
		}
		opts := skills.IndexOptionsFor(a.cfg.ContextWindow, a.cfg.SkillIndexShare, query)
		b.WriteString("\n\n# Skills\n")
		if rs.text {
			b.WriteString("Read a skill's instructions (with the skill tool_call shown above) before using it.\n")
		} else {
			b.WriteString("Load a skill's instructions with the skill tool before using it.\n")
		}
		b.WriteString(a.cfg.Skills.IndexWith(opts))
	}
	if a.cfg.Fleet != nil {
		b.WriteString(fleetPrompt(a.cfg.Fleet.Inventory(), rs.t.FleetGroups))
	}
	if rs.t.Dir != "" {
		if mem := strings.TrimSpace(readLimited(filepath.Join(rs.t.Dir, MemoryFile), maxMemoryBytes)); mem != "" {
			b.WriteString("\n\n# Memory (notes kept from earlier sessions)\n")
			b.WriteString(mem)
		}
	}
	if rs.t.Dir != "" {
		fmt.Fprintf(&b, "\n\nWorking directory: %s", rs.t.Dir)
	}
	return b.String()
}

// promptEvent returns the system_prompt event to record when the prompt
// differs from the one the session's projection holds, else nothing.
// Within a run the prompt does not change, so consecutive model calls share
// their prefix byte for byte.
func (a *Agent) promptEvent(rs *runState) []store.Event {
	p := a.systemPrompt(rs)
	if p == rs.s.proj.System() {
		return nil
	}
	return []store.Event{{Type: EvSystemPrompt, Actor: "system", Payload: mustJSON(systemPromptPayload{Text: p})}}
}

// readLimited reads a small text file; a missing or unreadable file is "".
func readLimited(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	return string(b)
}

// EstimateTokens is the kernel's token estimate: one token per 4 bytes,
// rounded up, which over-counts English slightly and keeps compaction early
// rather than late.
func EstimateTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += msgBytes(m)
	}
	return (n + 3) / 4
}

// msgBytes is a message's size for EstimateTokens.
func msgBytes(m Message) int {
	n := len(m.Content) + len(m.Reasoning) + 8
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Arguments) + 8
	}
	return n
}

// maybeCompact compacts the session when its projection exceeds the
// configured share of the context window, or always when force is set.
func (a *Agent) maybeCompact(ctx context.Context, rs *runState, force bool) error {
	before := rs.s.proj.Tokens()
	if !force && float64(before) < a.cfg.CompactAt*float64(a.window()) {
		return nil
	}
	msgs := rs.s.proj.Messages()
	if len(msgs) < 3 {
		return nil // nothing to summarise beyond the prompt and one message
	}
	return a.compact(ctx, rs.t.Session, rs.s, msgs, before, rs)
}

// compact asks the model for a summary and records it. During a run
// (rs != nil) the newest user message and what follows it are kept after
// the summary, so the question being worked on is not folded into it.
func (a *Agent) compact(ctx context.Context, id string, s *session, msgs []Message, before int, rs *runState) error {
	prompt := a.cfg.CompactPrompt
	if prompt == "" {
		prompt = defaultCompactPrompt
	}
	upTo := s.last
	history := msgs
	if rs != nil {
		if idx, seq, ok := s.proj.lastUser(); ok && idx > 1 {
			history, upTo = msgs[:idx], seq-1
		}
	}
	// When the history itself overflows the window, drop the oldest
	// messages from the summarisation request (they stay in the chain).
	req := append(history[:len(history):len(history)], Message{Role: RoleUser, Content: prompt})
	limit := int(0.9 * float64(a.window()))
	for EstimateTokens(req) > limit && len(req) > 3 {
		req = append(req[:1:1], req[2:]...)
		for len(req) > 2 && req[1].Role == RoleTool {
			req = append(req[:1:1], req[2:]...)
		}
	}
	if rs != nil {
		rs.calls++
	}
	resp, err := a.cfg.Model.Complete(ctx, Request{Messages: req})
	if err != nil {
		return fmt.Errorf("%w: compaction: %w", ErrModel, err)
	}
	summary := strings.TrimSpace(resp.Content)
	if summary == "" {
		return errors.New("compaction: the model returned an empty summary")
	}
	ev := store.Event{Type: EvCompacted, Actor: "model", Payload: mustJSON(compactedPayload{
		Summary: summary, UpToSeq: upTo, TokensBefore: before,
		TokensAfter: before - EstimateTokens(history) + EstimateTokens([]Message{{Role: RoleSystem, Content: s.proj.System()}, {Role: RoleUser, Content: summaryPrefix + summary}})})}
	if rs != nil {
		_, err = a.append(rs, ev)
	} else {
		_, err = a.appendTo(id, s, ev)
	}
	return err
}

// readFile serves the read_file tool: gated by gate.ClassifyPath, audited.
func (a *Agent) readFile(ctx context.Context, rs *runState, call ToolCall, args toolArgs) (string, bool, *ExecResult, error) {
	if args.Target != "" {
		return a.readRemote(ctx, rs, call, args)
	}
	content, isErr, err := a.readLocal(ctx, rs, call, args)
	return content, isErr, nil, err
}

func (a *Agent) readLocal(ctx context.Context, rs *runState, call ToolCall, args toolArgs) (string, bool, error) {
	path := args.Path
	if strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			path = filepath.Join(home, path[2:])
		}
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(rs.t.Dir, path)
	}
	path = filepath.Clean(path)
	d := a.cfg.Policy.ClassifyPath(path)
	// The real file behind a symlink must pass too.
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		if d2 := a.cfg.Policy.ClassifyPath(real); d2.Verdict < d.Verdict {
			d = d2
		}
	}
	info := CommandInfo{Tool: ToolReadFile, Command: path}
	ok, refusal, err := a.decide(ctx, rs, call, info, d, "read "+path)
	if err != nil {
		return "", false, err
	}
	info.Command, info.Verdict, info.Reason = a.redact(info.Command), d.Verdict.String(), a.redact(d.Reason)
	if !ok {
		a.hookResult(rs, info, refusal, true)
		return refusal, true, nil
	}
	var content string
	isErr := true
	if f, msg := a.openChecked(path, d); f == nil {
		content = msg
	} else {
		content, isErr = readLines(f, path, args.Offset, args.Limit)
		f.Close()
	}
	content = a.redact(content)
	a.hookResult(rs, info, content, isErr)
	return content, isErr, nil
}

// openChecked opens path for read_file the safe way round: it opens first
// (the last component not followed if it is a symlink, so the file is the
// one the gate saw resolved) and then checks what it opened: a regular
// file, whose real path (from the kernel, /proc/self/fd) the gate judges
// no stricter than decision d. A file swapped between the check and the
// open is refused, not read: the error message is returned instead.
func (a *Agent) openChecked(path string, d gate.Decision) (*os.File, string) {
	target := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real
	}
	fd, err := syscall.Open(target, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, "error: " + path + " changed while it was opened (a symlink appeared); not read"
		}
		return nil, "error: open " + path + ": " + err.Error()
	}
	f := os.NewFile(uintptr(fd), target)
	real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		f.Close()
		return nil, "error: cannot tell which file was opened: " + err.Error()
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, "error: " + err.Error()
	case st.IsDir():
		f.Close()
		return nil, "error: " + path + " is a directory; use run with ls"
	case !st.Mode().IsRegular():
		f.Close()
		return nil, "error: " + path + " is not a regular file"
	}
	if d2 := a.cfg.Policy.ClassifyPath(real); d2.Verdict < d.Verdict {
		f.Close()
		return nil, fmt.Sprintf("error: the file opened is %s, which the gate rates %s (%s); not read", real, d2.Verdict, d2.Reason)
	}
	return f, ""
}

// readLines returns lines [offset, offset+limit) of the text file f (named
// path), numbered, within readFileLimit bytes.
func readLines(f *os.File, path string, offset, limit int) (string, bool) {
	if offset < 1 {
		offset = 1
	}
	if limit <= 0 {
		limit = 2000
	}
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, shown := 0, 0
	for sc.Scan() {
		n++
		if n < offset {
			continue
		}
		if shown >= limit || b.Len() > readFileLimit {
			fmt.Fprintf(&b, "[... more lines; continue with offset %d ...]\n", n)
			break
		}
		line := sc.Text()
		if !utf8.ValidString(line) || strings.ContainsRune(line, 0) {
			return fmt.Sprintf("error: %s looks binary (line %d); use run with file/xxd/strings", path, n), true
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, line)
		shown++
	}
	if err := sc.Err(); err != nil {
		return fmt.Sprintf("error: reading %s: %v", path, err), true
	}
	if shown == 0 {
		return fmt.Sprintf("(no lines from %d; the file has %d lines)", offset, n), false
	}
	return b.String(), false
}

// skillText serves the skill tool.
func (a *Agent) skillText(name string) (string, bool) {
	sk, ok := a.cfg.Skills.Get(name)
	if !ok {
		names := make([]string, 0, len(a.cfg.Skills.Skills))
		for _, s := range a.cfg.Skills.Skills {
			names = append(names, s.Name)
		}
		return fmt.Sprintf("error: no skill named %q; the skills are: %s", name, strings.Join(names, ", ")), true
	}
	text, err := sk.Text()
	if err != nil {
		return "error: " + err.Error(), true
	}
	return text, false
}

// openSkill returns a skill's text for the skill tool and records, before
// the model sees it, the SHA-256 of the skill's files (skill_opened). A
// skill pinned by skills.lock whose files changed since the start is not
// opened. An error is a store failure.
func (a *Agent) openSkill(rs *runState, call ToolCall, name string) (string, bool, error) {
	sk, ok := a.cfg.Skills.Get(name)
	if !ok {
		content, isErr := a.skillText(name)
		return content, isErr, nil
	}
	sum, err := sk.Digest()
	if err != nil {
		return "error: skill " + name + ": " + err.Error(), true, nil
	}
	if _, err := a.append(rs, store.Event{Type: EvSkillOpened, Actor: "system", Payload: mustJSON(skillOpenedPayload{
		CallID: call.ID, Name: sk.Name, Dir: sk.Dir, SHA256: sum, Pinned: sk.SHA256})}); err != nil {
		return "", false, err
	}
	if sk.SHA256 != "" && sum != sk.SHA256 {
		return fmt.Sprintf("error: skill %s changed since it was pinned in skills.lock (files sha256 %s, pinned %s); it is not opened", name, sum, sk.SHA256), true, nil
	}
	content, isErr := a.skillText(name)
	return content, isErr, nil
}

// checkPins turns a pass verdict into confirm when the command names a
// read-only script pinned by skills.lock whose content no longer has its
// pinned hash: such a script passes only as it was reviewed.
func (a *Agent) checkPins(command string, d gate.Decision) gate.Decision {
	if d.Verdict != gate.Pass {
		return d
	}
	for p, sum := range a.cfg.Skills.PinnedScripts() {
		if !strings.Contains(command, p) {
			continue
		}
		if err := skills.VerifyScript(p, sum); err != nil {
			return gate.Decision{Verdict: gate.Confirm, Rule: "skills-lock", Reason: err.Error()}
		}
	}
	return d
}

// remember appends a note to the workspace memory file and records it.
func (a *Agent) remember(rs *runState, note string) (string, bool, error) {
	if rs.t.Dir == "" {
		return "error: this session has no workspace, so there is no memory file", true, nil
	}
	note = strings.TrimSpace(note)
	if len(note) > 2000 {
		return "error: a memory note must be under 2000 bytes; keep it to durable facts", true, nil
	}
	path := filepath.Join(rs.t.Dir, MemoryFile)
	// The memory change is an event first, then the file: the chain is the
	// record, the file a convenience the next session's prompt reads.
	if _, err := a.append(rs, store.Event{Type: EvMemory, Actor: "model", Payload: mustJSON(memoryPayload{Text: note, File: path})}); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "error: " + err.Error(), true, nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return "error: " + err.Error(), true, nil
	}
	_, werr := fmt.Fprintf(f, "- %s\n", strings.ReplaceAll(note, "\n", " "))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "error: " + werr.Error(), true, nil
	}
	return "saved to memory; it will be in the prompt of future sessions", false, nil
}

// Clear starts a new branch of the session: older events stay in the chain
// but leave the projection.
func (a *Agent) Clear(session, actor string) error {
	s := a.session(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(session, s); err != nil {
		return err
	}
	_, err := a.appendTo(session, s, store.Event{Type: EvClear, Branch: s.proj.Branch() + 1, Actor: actor, Payload: mustJSON(map[string]int{"branch": s.proj.Branch() + 1})})
	return err
}

// Compact summarises the session now (the /compact command). It reports the
// estimated tokens before and after.
func (a *Agent) Compact(ctx context.Context, session string) (before, after int, err error) {
	s := a.session(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(session, s); err != nil {
		return 0, 0, err
	}
	msgs := s.proj.Messages()
	before = EstimateTokens(msgs)
	if len(msgs) < 3 {
		return before, before, errors.New("nothing to compact yet")
	}
	if err := a.compact(ctx, session, s, msgs, before, nil); err != nil {
		return before, 0, err
	}
	return before, EstimateTokens(s.proj.Messages()), nil
}

// Note records an event on behalf of a front end (approval message posted,
// click refused, run interrupted by a restart). Type is usually EvNote.
func (a *Agent) Note(session, typ, actor string, payload any) (store.Event, error) {
	evs, err := a.appendSession(session, store.Event{Type: typ, Actor: actor, Payload: mustJSON(payload)})
	if err != nil {
		return store.Event{}, err
	}
	return evs[0], nil
}

// NoteSync records an event without waiting for a running turn of the
// session (Note waits for it). Use it from click handlers while the turn
// blocks on an approval.
func (a *Agent) NoteSync(session, typ, actor string, payload any) (store.Event, error) {
	evs, err := a.cfg.Store.Append(context.Background(), store.Event{Session: session, Type: typ, Actor: actor, Payload: mustJSON(payload)})
	if err != nil {
		return store.Event{}, fmt.Errorf("record %s: %w", typ, err)
	}
	return evs[0], nil
}

// SessionStatus reports what the session is doing.
func (a *Agent) SessionStatus(session string) Status {
	a.mu.Lock()
	s := a.state[session]
	a.mu.Unlock()
	if s == nil {
		return Status{}
	}
	s.smu.Lock()
	defer s.smu.Unlock()
	return s.status
}

// Messages returns the session's current projection (what the next model
// call would see, before the next user message).
func (a *Agent) Messages(session string) ([]Message, error) {
	s := a.session(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.load(session, s); err != nil {
		return nil, err
	}
	return s.proj.Messages(), nil
}

// Policy is the gate policy the agent uses (with skills' read-only scripts).
func (a *Agent) Policy() *gate.Policy { return a.cfg.Policy }

// SkillsSummary is what /skills shows: loaded skills, and hidden ones with
// the reason.
func (a *Agent) SkillsSummary() string {
	var b strings.Builder
	set := a.cfg.Skills
	if len(set.Skills) == 0 {
		b.WriteString("No skills are loaded.\n")
	}
	for _, s := range set.Skills {
		fmt.Fprintf(&b, "- **%s**: %s\n", s.Name, oneLine(s.Description))
	}
	for _, f := range set.Filtered {
		fmt.Fprintf(&b, "- hidden `%s` (%s): %s\n", f.Name, f.Dir, f.Reason)
	}
	for _, s := range set.Shadowed {
		fmt.Fprintf(&b, "- shadowed `%s` in %s by %s\n", s.Name, s.Dir, s.By)
	}
	return b.String()
}
