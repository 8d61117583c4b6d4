package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// commandName reads an in-thread command: "/stop" or "!stop". Both
// Mattermost and Slack take a message that starts with "/" for one of their
// own slash commands, so users write "@thinbot /stop" (the mention is
// stripped before this) or "!stop".
func commandName(text string) (string, bool) {
	if len(text) < 2 || (text[0] != '/' && text[0] != '!') {
		return "", false
	}
	name := strings.ToLower(strings.Fields(text[1:])[0])
	switch name {
	case "stop", "clear", "compact", "skills", "status", "help", "audit", "timeline", "silence", "unsilence":
		return name, true
	}
	return "", false
}

const helpText = "**thinbot** — mention me with a task; this thread is one session.\n" + HelpCommands +
	"Read-only commands run at once; changes wait for an approver's click; dangerous commands never run. " +
	"(Chat clients take a message that starts with `/` for their own slash command: write `@thinbot /stop`, or `!stop`.)"

// HelpCommands is the list of in-thread commands /help shows.
const HelpCommands = "- `/stop` stop the current run (the session stays)\n" +
	"- `/clear` start a new topic (the history stays in the log)\n" +
	"- `/compact` summarise the conversation to free context\n" +
	"- `/status` what is running, budgets, pending approvals\n" +
	"- `/skills` the skills I can use, and hidden ones with the reason\n" +
	"- `/audit` the last commands of this thread: verdict, approver, exit code\n" +
	"- `/timeline` this thread's postmortem timeline from the audit chain (as a file too); `/timeline summary` adds the model's summary, marked as its words\n" +
	"- `/silence 2h [comment]` (in an alert's thread) silence its group in Alertmanager, once approved; `/unsilence` expires that silence, once approved\n"

// command handles an in-thread command. /stop acts at once, ahead of the
// queue; /clear and /compact wait their turn in the queue.
func (b *Bot) command(ctx context.Context, m Message, ch Channel, name string) {
	key := m.Thread.Key()
	// reply posts the answer to the command and records both in the
	// chain, so that a thread rebuilt from it shows them (the web console
	// after a restart). A thread the chain does not know yet gets no note.
	reply := func(text string) {
		b.post(ctx, m.Thread, Post{Text: text})
		b.mu.Lock()
		known := b.known[key]
		b.mu.Unlock()
		if !known && !b.lookupKnown(key) {
			return
		}
		if _, err := ch.Agent.NoteUnlocked(key, agentcore.EvNote, actor(m.User), agentcore.NotePayload{
			Kind: agentcore.NoteCommandReply, Command: m.Text, Detail: text}); err != nil {
			b.log.Warn("record command reply", "conv", key, "err", err)
		}
	}
	switch name {
	case "help":
		text := helpText
		if hw, ok := b.cfg.Adapter.(HelpWriter); ok {
			text = hw.Help(HelpCommands)
		}
		if cmds := ch.Agent.SkillCommandsHelp(); cmds != "" {
			text += "\n\nSkill commands (run without the model, through the same approvals: `!name args` or `/run name args`):\n" + cmds
		}
		reply(text)
	case "skills":
		reply(skillsText(ch.Agent.Skills()))
	case "status":
		reply(b.status(key, ch))
	case "audit":
		rows, err := ch.Agent.Audit(key, 20)
		text := auditText(rows)
		if err != nil {
			b.log.Error("audit summary", "conv", key, "err", err)
			text = "Could not read this thread's record; operators can see the details in the log."
		}
		reply(text)
	case "silence", "unsilence":
		// Off the adapter's goroutine: it waits for an approval. It ends
		// with Run, as a run's request does.
		b.mu.Lock()
		closing, base := b.closing, b.runCtx
		if !closing && base != nil {
			b.wg.Add(1)
		}
		b.mu.Unlock()
		if !closing && base != nil {
			go func() {
				defer b.wg.Done()
				b.silenceCommand(base, m, ch, name)
			}()
		}
	case "timeline":
		// Off the adapter's goroutine: it verifies the whole chain, and a
		// summary waits for the thread's run and a model call.
		b.mu.Lock()
		closing := b.closing
		if !closing {
			b.wg.Add(1)
		}
		b.mu.Unlock()
		if !closing {
			go func() {
				defer b.wg.Done()
				b.timeline(context.WithoutCancel(ctx), m, ch)
			}()
		}
	case "stop":
		b.mu.Lock()
		th := b.threads[key]
		allowed := th != nil && th.participants[m.User.ID]
		var cancel context.CancelCauseFunc
		if th != nil {
			cancel = th.cancel
		}
		b.mu.Unlock()
		if !allowed && !isApprover(ch.Approvers, m.User) {
			reply("Only people taking part in this thread, or its approvers, can stop its run.")
			return
		}
		if cancel == nil {
			reply("Nothing is running in this thread.")
			return
		}
		b.log.Info("run stopped", "conv", key, "user", m.User.ID)
		// The run's end answers it; the note says who stopped it.
		if _, err := ch.Agent.NoteUnlocked(key, agentcore.EvNote, actor(m.User), agentcore.NotePayload{
			Kind: agentcore.NoteCommandReply, Command: m.Text}); err != nil {
			b.log.Warn("record /stop", "conv", key, "err", err)
		}
		cancel(&agentcore.StopCause{Kind: agentcore.StopUser, By: actor(m.User), Via: "/stop"})
	case "clear", "compact":
		b.enqueue(ctx, m, ch, item{msg: m, cmd: name})
	}
}

func (b *Bot) clear(ctx context.Context, th *thread, m Message) {
	if err := th.ch.Agent.Clear(th.t.Key(), actor(m.User)); err != nil {
		b.log.Error("clear session", "conv", th.t.Key(), "err", err)
		b.post(ctx, th.t, Post{Text: "Could not start a new topic; operators can see the details in the log."})
		return
	}
	b.post(ctx, th.t, Post{Text: "New topic: earlier messages stay in the log but leave my context."})
}

func (b *Bot) compact(ctx context.Context, th *thread) {
	before, after, err := th.ch.Agent.Compact(ctx, th.t.Key())
	if err != nil {
		b.log.Warn("compact session", "conv", th.t.Key(), "err", err)
		b.post(ctx, th.t, Post{Text: "Could not compact: " + shortErr(err)})
		return
	}
	b.post(ctx, th.t, Post{Text: fmt.Sprintf("Compacted the conversation: about %d → %d tokens.", before, after)})
}

// shortErr keeps only the last part of an error chain for chat.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i < 120 {
		return s[i+2:]
	}
	return "see the log"
}

func (b *Bot) status(key string, ch Channel) string {
	st := ch.Agent.SessionStatus(key)
	var s strings.Builder
	if st.Running {
		fmt.Fprintf(&s, "**Running** for %s: %d/%d steps, %d/%d model calls, %d prompt + %d completion tokens.\n",
			time.Since(st.Started).Round(time.Second), st.Steps, st.Budgets.MaxSteps, st.ModelCalls, st.Budgets.MaxModelCalls,
			st.Usage.PromptTokens, st.Usage.CompletionTokens)
		if st.Current != "" {
			fmt.Fprintf(&s, "Current: `%s`\n", oneLineMD(st.Current))
		}
	} else {
		s.WriteString("Nothing is running in this thread.\n")
	}
	b.mu.Lock()
	if th := b.threads[key]; th != nil && len(th.queue) > 0 {
		fmt.Fprintf(&s, "Queued messages: %d\n", len(th.queue))
	}
	for _, r := range b.pending {
		if r.ap.Session == key {
			fmt.Fprintf(&s, "Waiting for approval: `%s` (request `%s`, expires %s)\n", oneLineMD(r.ap.Command), r.ap.RequestID, textfmt.Clock(r.expires, b.zone(ch), "15:04"))
		}
	}
	b.mu.Unlock()
	fmt.Fprintf(&s, "Kernel sandbox: %s\n", ch.Agent.SandboxState())
	// The session id is what the audit commands on the host take.
	fmt.Fprintf(&s, "Session: `%s` (on the host: `thinbot audit timeline %s`)\n", oneLineMD(key), oneLineMD(key))
	return s.String()
}

// oneLineMD puts s on one line of at most 120 bytes, backquotes as ', for
// a code span the caller writes around it.
func oneLineMD(s string) string {
	return textfmt.OneLine(strings.ReplaceAll(s, "`", "'"), 120)
}

// skillsText is what /skills shows: loaded skills, and hidden ones with the
// reason.
func skillsText(list []agentcore.SkillInfo) string {
	var b strings.Builder
	if !slices.ContainsFunc(list, func(s agentcore.SkillInfo) bool { return s.State == "loaded" }) {
		b.WriteString("No skills are loaded.\n")
	}
	for _, s := range list {
		switch s.State {
		case "loaded":
			fmt.Fprintf(&b, "- **%s**: %s\n", s.Name, textfmt.OneLine(s.Description, 80))
		case "hidden":
			fmt.Fprintf(&b, "- hidden `%s` (%s): %s\n", s.Name, s.Dir, s.Why)
		case "shadowed":
			fmt.Fprintf(&b, "- shadowed `%s` in %s by %s\n", s.Name, s.Dir, s.Why)
		}
	}
	return b.String()
}

// auditText is what /audit shows of a thread's last commands.
func auditText(rows []agentcore.AuditRow) string {
	if len(rows) == 0 {
		return "No commands in this session yet."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Last %d command(s) in this session, as the chain recorded them:\n", len(rows))
	for _, r := range rows {
		fmt.Fprintf(&b, "- #%d `%s` — %s", r.Seq, textfmt.OneLine(strings.ReplaceAll(r.What, "`", "'"), 80), r.Verdict)
		if r.Approval != "" {
			fmt.Fprintf(&b, ", %s", r.Approval)
		}
		if r.Result != "" {
			fmt.Fprintf(&b, ", %s", r.Result)
		}
		b.WriteString("\n")
	}
	b.WriteString("Operators verify and export the full chain with `thinbot audit verify --config FILE` / `thinbot audit export --config FILE --session ...`.")
	return b.String()
}
