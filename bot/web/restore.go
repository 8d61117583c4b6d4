package web

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/store"
)

// maxRestored is how many earlier console threads New brings back from
// the chain.
const maxRestored = 50

// restore brings back the console threads of earlier processes from the
// chain, rendered as they were shown live: the people's messages, the
// status message of each run (the model's intent, each command, who
// approved it and the first lines of its output) through the same
// bot.Progress the live renderer uses, the approval cards with their
// decisions, long outputs (as much of them as the chain keeps), the
// answers, and the replies to in-thread commands such as /audit.
//
// What differs from the live thread, by design: text the live thread
// streamed as a post of its own before a command shows as that command's
// intent line, and an attached output holds what the chain keeps of it
// (its head and tail) rather than all of it.
func (s *Server) restore() error {
	prefix := Platform + "/" + s.cfg.Channel + "/"
	var mine []string
	// The most recently active first (the store's recent-sessions index),
	// until maxRestored: a year of other sessions is not read.
	for si, err := range s.cfg.Chain.RecentSessions(0) {
		if err != nil {
			return err
		}
		if strings.HasPrefix(si.ID, prefix) {
			mine = append(mine, si.ID)
			if len(mine) == maxRestored {
				break
			}
		}
	}
	slices.Reverse(mine) // least recently active first
	for _, sid := range mine {
		rp := &replay{s: s}
		for ev, err := range s.cfg.Chain.Events(sid, 1) {
			if err != nil {
				return err
			}
			if rp.th == nil {
				rp.th = s.addThread(strings.TrimPrefix(sid, prefix), "Earlier thread", "", ev.Time)
				rp.alerts.Location = s.cfg.Location
			}
			rp.event(ev)
			rp.th.Updated = ev.Time
		}
		if rp.th != nil && len(rp.th.posts) > maxThreadPosts {
			rp.th.posts = rp.th.posts[len(rp.th.posts)-maxThreadPosts:]
		}
	}
	return nil
}

// replay renders one thread's events into posts.
type replay struct {
	s  *Server
	th *wthread

	titled bool            // th has its title (an alert card's, or its first message's)
	card   *wpost          // the alert card, the root post of a thread an alert opened
	alerts bot.AlertReplay // the card and notices of its deliveries

	// The run being replayed.
	prog    bot.Progress
	status  *wpost // its status message, once it has a step
	intent  string // the model's text that came with its tool calls
	answer  string // the model's last text without a tool call
	calls   map[string]bot.CommandInfo
	args    map[string]string // call id -> the skill tool's name
	cards   map[string]*card  // request id -> its card
	stopped bool              // a /stop was sent during the run
	// unwatched is a run no human watches (an alert's first look, a
	// schedule's question): the live renderer showed the model's links
	// as text (bot.PlainLinks), and so does the rebuilt thread.
	unwatched bool
}

// shown is the model's text as the live renderer showed it.
func (rp *replay) shown(s string) string {
	if rp.unwatched {
		return bot.PlainLinks(s)
	}
	return s
}

type card struct {
	post      *wpost
	command   string
	targets   []string
	requester string
	decided   bool
	cancelled bool // undecided when its run was stopped: finish says why
}

// userName is the name in an actor ("user:alice", "user:U1 (alice)").
func userName(actor string) string {
	a := strings.TrimPrefix(actor, "user:")
	if i := strings.Index(a, " ("); i >= 0 && strings.HasSuffix(a, ")") {
		return a[i+2 : len(a)-1]
	}
	return a
}

func (rp *replay) post(p *wpost) *wpost {
	p.ID, p.restored = rp.s.newPostID(), true
	rp.th.posts = append(rp.th.posts, p)
	return p
}

func (rp *replay) bot(text string, at time.Time) *wpost {
	return rp.post(&wpost{Author: "thinbot", Bot: true, Text: text, Time: at})
}

// begin starts a run's replay.
func (rp *replay) begin() {
	rp.prog, rp.status, rp.intent, rp.answer, rp.stopped, rp.unwatched = bot.Progress{}, nil, "", "", false, false
	rp.calls, rp.args, rp.cards = map[string]bot.CommandInfo{}, map[string]string{}, map[string]*card{}
}

// step shows the status message from the run's first step on, where the
// live thread posted it.
func (rp *replay) step(at time.Time) {
	if rp.status == nil {
		rp.status = rp.bot("", at)
	}
	rp.status.Text = rp.prog.Text(false, "")
}

func (rp *replay) event(ev store.Event) {
	if rp.calls == nil {
		rp.begin()
	}
	pl, err := agentcore.Decode(ev)
	if err != nil {
		return // shown by the audit viewer; the thread goes on without it
	}
	switch p := pl.(type) {
	case *agentcore.RunPayload:
		if ev.Type == agentcore.EvRunStarted {
			rp.begin()
		} else {
			rp.finish(p, ev)
		}
	case *agentcore.AlertPayload:
		// As the receiver showed it: the card is the thread's root post,
		// whose id is the thread's (openThread); each later delivery
		// rewrites it and posts a line.
		card, line := rp.alerts.Event(*p, ev.Time)
		if rp.card == nil {
			rp.card = rp.bot("", ev.Time)
			rp.card.ID = rp.th.ID
		}
		rp.redraw(card)
		if line != "" {
			rp.bot(line, ev.Time)
		}
		rp.th.Alert = p.Status
		rp.th.Title, rp.th.By, rp.titled = plainTitle(card.Text), "thinbot", true
	case *agentcore.AlertAckPayload:
		if card, ok := rp.alerts.Ack(*p, ev.Time); ok {
			rp.redraw(card)
		}
	case *agentcore.AlertSilencePayload:
		if card, ok := rp.alerts.Silence(*p, ev.Time); ok {
			rp.redraw(card)
		}
	case *agentcore.UserMessagePayload:
		if strings.HasPrefix(ev.Actor, "alert:") || strings.HasPrefix(ev.Actor, "schedule:") {
			// An alert's first look, a schedule's question: never shown
			// in the thread, only its run, which no human watches.
			rp.unwatched = true
			return
		}
		name := userName(ev.Actor)
		if !rp.titled {
			rp.th.Title, rp.th.By, rp.titled = plainTitle(shorten(p.Text, titleLen)), name, true
		}
		rp.post(&wpost{Author: name, Text: p.Text, Time: ev.Time})
	case *agentcore.AssistantPayload:
		if len(p.ToolCalls) == 0 {
			rp.answer = p.Content
			return
		}
		rp.intent = p.Content
		for _, c := range p.ToolCalls {
			if c.Name == agentcore.ToolSkill {
				var a struct {
					Name string `json:"name"`
				}
				_ = json.Unmarshal([]byte(c.Arguments), &a)
				rp.args[c.ID] = a.Name
			}
		}
	case *agentcore.GatePayload:
		c := bot.CommandInfo{Tool: p.Tool, Command: p.Command, Verdict: p.Verdict, Action: p.Action, Targets: p.Targets}
		if c.Command == "" {
			c.Command = p.Path
		}
		rp.calls[p.CallID] = c
		rp.prog.Intent(rp.shown(rp.intent))
		rp.intent = ""
		rp.prog.Command(c)
		rp.step(ev.Time)
	case *agentcore.ApprovalAskedPayload:
		c := &card{command: p.Command, targets: p.Targets, requester: p.Requester}
		c.post = rp.bot(bot.DecidedCard(bot.CancelledOutcome, p.Command, p.Targets, p.Requester, p.RequestID), ev.Time)
		rp.cards[p.RequestID] = c
	case *agentcore.ApprovalDecidedPayload:
		if c := rp.cards[p.RequestID]; c != nil {
			c.post.Text = bot.DecidedCard(bot.DecisionOutcome(p.Approved, p.By, p.Why, ev.Time, rp.s.cfg.Location), c.command, c.targets, c.requester, p.RequestID)
			switch {
			case p.By == "system" && strings.HasPrefix(p.Why, "expired: thinbot restarted"):
				// Expired by a restart (agentcore.Recover): as bot.Recover wrote it.
				c.post.Text = bot.RestartExpiredCard(c.command)
			case p.By == "system" && strings.HasPrefix(p.Why, "expired: the cluster's leader was lost"):
				c.post.Text = bot.LeaderLostExpiredCard(c.command)
			case p.By == "system" && strings.HasPrefix(p.Why, "cancelled before a decision"):
				// Its run was stopped: finish knows by whom.
				c.post.Text, c.cancelled = bot.DecidedCard(bot.CancelledOutcome, c.command, c.targets, c.requester, p.RequestID), true
			}
			c.decided = true
		}
		if rp.prog.Decided(p.Approved, p.By, p.Why) {
			rp.step(ev.Time)
		}
	case *agentcore.ToolResultPayload:
		c, ok := rp.calls[p.CallID]
		if !ok {
			c = bot.CommandInfo{Tool: p.Tool, Command: rp.args[p.CallID]}
		}
		if p.Tool == agentcore.ToolSkill {
			c.Tool = agentcore.ToolSkill
			rp.prog.Intent(rp.shown(rp.intent))
			rp.intent = ""
		}
		rp.prog.Result(c, p.Content, p.IsError)
		rp.step(ev.Time)
		if p.Tool != agentcore.ToolSkill {
			if op := bot.RebuiltOutputPost(c.Command, p.OutputSize, fullOutput(p)); op != nil {
				wp := rp.bot(op.Text, ev.Time)
				if op.File != nil {
					wp.FileName, wp.FileSize, wp.data = op.File.Name, len(op.File.Data), op.File.Data
				}
			}
		}
	case *agentcore.NotePayload:
		if p.Kind == agentcore.NoteFirstLook {
			// What became of an alert's first look, as the thread showed it.
			line, card, redrawn := rp.alerts.Look(p.Detail, p.Text, ev.Time)
			rp.bot(line.Text, ev.Time)
			if redrawn {
				rp.redraw(card)
			}
			return
		}
		if c := rp.cards[p.RequestID]; p.Kind == agentcore.NoteApprovalPosted && c != nil && p.PostID != "" {
			// The card keeps its live id: a restart's bot.Recover updates
			// the card of a request it expired by that id.
			c.post.ID = p.PostID
			return
		}
		if p.Kind == agentcore.NoteRunRefused { // a message no run was started for, and the reply saying why
			if p.Text != "" { // recorded since the note has it
				rp.post(&wpost{Author: userName(ev.Actor), Text: p.Text, Time: ev.Time})
			}
			rp.bot(p.Detail, ev.Time)
			return
		}
		if p.Kind != agentcore.NoteCommandReply {
			return
		}
		rp.post(&wpost{Author: userName(ev.Actor), Text: p.Command, Time: ev.Time})
		if p.Detail == "" { // a /stop: the run's end answers it
			rp.stopped = true
			return
		}
		rp.bot(p.Detail, ev.Time)
	case *agentcore.ClearPayload:
		if strings.HasPrefix(ev.Actor, "user:") {
			rp.post(&wpost{Author: userName(ev.Actor), Text: "/clear", Time: ev.Time})
			rp.bot("New topic: earlier messages stay in the log but leave my context.", ev.Time)
		}
	case *agentcore.CompactedPayload:
		if strings.HasPrefix(ev.Actor, "user:") {
			rp.post(&wpost{Author: userName(ev.Actor), Text: "/compact", Time: ev.Time})
			rp.bot(fmt.Sprintf("Compacted the conversation: about %d → %d tokens.", p.TokensBefore, p.TokensAfter), ev.Time)
		}
	}
}

// redraw shows an alert's card as the receiver last drew it: its text, and
// its Acknowledge button while the group fires and nobody took it.
func (rp *replay) redraw(card bot.Post) {
	if rp.card == nil {
		return
	}
	rp.card.Text, rp.card.Buttons, rp.card.value = card.Text, buttons(card.Buttons), card.Value
}

// fullOutput is a result's output as the live thread attached it when the
// chain holds all of it: the model's view after its first line ("exit
// code: 0"), if its SHA-256 is the recorded one; else the model's view.
func fullOutput(p *agentcore.ToolResultPayload) string {
	if _, rest, ok := strings.Cut(p.Content, "\n"); ok && p.OutputSHA != "" && int64(len(rest)) == p.OutputSize {
		if sum := sha256.Sum256([]byte(rest)); hex.EncodeToString(sum[:]) == p.OutputSHA {
			return rest
		}
	}
	return p.Content
}

var budgetDetail = regexp.MustCompile(`: (\d+) ([a-z ]+)$`)

// finish ends a run's replay as the renderer ended it: the final status,
// the open approval cards, the answer.
func (rp *replay) finish(p *agentcore.RunPayload, ev store.Event) {
	if rp.status != nil {
		rp.status.Text = rp.prog.Text(true, "")
		if p.Status == agentcore.StatusInterrupted {
			// Not "Working on it…", and not "Done" either.
			rp.status.Text = strings.Replace(rp.status.Text, "_Done: ", "_Interrupted by a restart of thinbot after ", 1)
		}
	}
	var answer string
	switch p.Status {
	case agentcore.StatusAnswered, agentcore.StatusDone:
		answer = strings.TrimSpace(rp.shown(rp.answer))
	case agentcore.StatusCancelled:
		var c *agentcore.StopCause
		if p.Cause != "" {
			c = &agentcore.StopCause{Kind: p.Cause, By: p.CauseBy}
		}
		answer = bot.CancelledText(c, rp.stopped)
		for id, cd := range rp.cards {
			if cd.cancelled {
				cd.post.Text = bot.DecidedCard(bot.CancelledOutcomeOf(c), cd.command, cd.targets, cd.requester, id)
			}
		}
	case agentcore.StatusBudget:
		answer = "Stopped: the run used its budget." + bot.BudgetSuffix
		if m := budgetDetail.FindStringSubmatch(p.Detail); m != nil {
			answer = "Stopped: the run used its budget of " + m[1] + " " + m[2] + "." + bot.BudgetSuffix
		}
	case agentcore.StatusInterrupted:
		answer = bot.InterruptedText
		if p.Detail == "interrupted: leader lost" {
			answer = bot.LeaderLostText
		}
	default:
		answer = fmt.Sprintf("Something went wrong and the run stopped before doing anything more (ref %d). Operators can see the details in the log.", ev.Seq)
	}
	if answer == "" {
		answer = "_(no answer)_"
	}
	ap := bot.AnswerPost(answer)
	wp := rp.bot(ap.Text, ev.Time)
	if ap.File != nil {
		wp.FileName, wp.FileSize, wp.data = ap.File.Name, len(ap.File.Data), ap.File.Data
	}
	rp.calls = nil
}
