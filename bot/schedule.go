package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/thinbot/thinbot/agentcore"
)

// Schedule is a check run on a cron spec: a skill command (no model) or a
// read-only question. It posts into its channel only when the result
// fails or changes.
type Schedule struct {
	Name string
	// Spec is a standard five-field cron spec or a descriptor (@hourly,
	// @every 5m), optionally prefixed with CRON_TZ=Zone; parsed by
	// github.com/robfig/cron/v3.
	Spec string
	// Channel is the channel id it posts to; its workspace and agent run
	// the check. Platform is the Thread.Platform of the bot's adapter.
	Channel  string
	Platform string
	// Command is a skill command line ("!disk /"); Question a read-only
	// question for the model. One of them is set.
	Command  string
	Question string
	// MaxSteps and MaxWall bound a question; 0 means 8 and 5 minutes.
	MaxSteps int
	MaxWall  time.Duration
}

// ParseSpec checks a cron spec as RunSchedules reads it.
func ParseSpec(spec string) error {
	_, err := cron.ParseStandard(spec)
	return err
}

// scheduleState is what a schedule remembers between runs: the last
// result, which the chain keeps too (a NoteScheduleResult after each run),
// so that the first run after a start compares with the last before it.
type scheduleState struct {
	mu     sync.Mutex
	runs   int
	loaded bool     // the last result was read from the chain
	digest [32]byte // of the last result
	// outcome is the last run's: agentcore.ScheduleOK, ScheduleFailed or
	// ScheduleNotRun ("" before the first).
	outcome string
}

// Scheduler runs schedules; NewScheduler checks them.
type Scheduler struct {
	b    *Bot
	list []Schedule
}

// NewScheduler checks the schedules against the bot's channels: a known
// channel, a valid spec, a command or a question, a command that is a skill
// command of the channel's workspace. It tells the channels' token
// tallies about the questions' sessions, so that what they spent today
// (before a restart, say) counts in their channel's day before they next
// run.
func (b *Bot) NewScheduler(list []Schedule) (*Scheduler, error) {
	if err := CheckSchedules(list, b.cfg.Channel); err != nil {
		return nil, err
	}
	for _, s := range list {
		if s.Question != "" {
			b.tokens.schedule(scheduleSession(s), Thread{Platform: s.Platform, Channel: s.Channel}.channelKey())
		}
	}
	return &Scheduler{b: b, list: list}, nil
}

// scheduleSession is the chain session of a schedule's runs.
func scheduleSession(s Schedule) string { return "schedule:" + s.Name }

// CheckSchedules is NewScheduler's check against the channels channel
// returns (as Config.Channel does): a config reload checks its schedules
// against its new channels before it puts either in force.
func CheckSchedules(list []Schedule, channel func(string) (Channel, bool)) error {
	for _, s := range list {
		ch, ok := channel(s.Channel)
		if !ok {
			return fmt.Errorf("schedule %q: channel %q is not configured", s.Name, s.Channel)
		}
		if (s.Command == "") == (s.Question == "") {
			return fmt.Errorf("schedule %q: give a command or a question", s.Name)
		}
		if s.Command != "" {
			if _, _, ok := ch.Agent.SkillCommand(s.Command); !ok {
				return fmt.Errorf("schedule %q: %q is not a skill command of the channel's workspace", s.Name, s.Command)
			}
		}
		if err := ParseSpec(s.Spec); err != nil {
			return fmt.Errorf("schedule %q: %w", s.Name, err)
		}
	}
	return nil
}

// RunSchedules is NewScheduler and Run.
func (b *Bot) RunSchedules(ctx context.Context, list []Schedule) error {
	s, err := b.NewScheduler(list)
	if err != nil {
		return err
	}
	s.Run(ctx)
	return nil
}

// Run runs the schedules until ctx is done and waits for a check under way
// to end. A check still running when its next time comes is skipped
// (cron.SkipIfStillRunning). Every run is a turn of the session
// "schedule:NAME" in the chain, without an approver (every confirm verdict
// is refused).
func (s *Scheduler) Run(ctx context.Context) { s.RunUntil(ctx, ctx.Done()) }

// RunUntil is Run that stops starting checks when stop is closed, too: a
// check under way then runs on under ctx, and RunUntil waits for it. A
// config reload replaces a Scheduler this way without cancelling its
// checks.
func (s *Scheduler) RunUntil(ctx context.Context, stop <-chan struct{}) {
	if len(s.list) == 0 {
		return
	}
	b := s.b
	c := cron.New(cron.WithChain(cron.Recover(cronLogger{b}), cron.SkipIfStillRunning(cronLogger{b})))
	for _, sc := range s.list {
		st := &scheduleState{}
		if _, err := c.AddFunc(sc.Spec, func() { b.runSchedule(ctx, sc, st) }); err != nil {
			b.log.Error("schedule", "schedule", sc.Name, "err", err) // checked by NewScheduler
		}
	}
	c.Start()
	select {
	case <-ctx.Done():
	case <-stop:
	}
	<-c.Stop().Done()
}

// scheduleQuestion frames a scheduled question so that its answer can be
// compared from one run to the next.
const scheduleQuestion = "This is a scheduled check, run without a human: use read-only commands only. " +
	"Answer with OK, FAIL or CANNOT alone on the first line (FAIL if anything needs a human; CANNOT if you could not check: " +
	"a command you needed was refused, a tool or skill is missing), then at most a few lines saying why.\n\nThe check: "

// runSchedule runs one check and posts when it fails, could not run, or
// its result changed since the last run (the last before a restart too:
// the chain keeps each run's outcome).
func (b *Bot) runSchedule(ctx context.Context, s Schedule, st *scheduleState) {
	ch, ok := b.cfg.Channel(s.Channel)
	if !ok || ctx.Err() != nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	b.lastSchedule(ch, s, st)
	failed := false
	// ran: a command ran (a question's or the skill command); refused: the
	// gate refused one (no approver in a scheduled run, or a deny).
	var ran, refused bool
	refusedCmds := map[string]bool{}
	t := agentcore.Turn{Session: scheduleSession(s), Actor: "schedule:" + s.Name, Dir: ch.Workspace, NoApprover: "a scheduled question cannot ask for one",
		Instructions: []string{ch.Instructions}, FleetGroups: ch.FleetGroups,
		Hooks: agentcore.Hooks{
			Command: func(c agentcore.CommandInfo) {
				if c.Action == "refuse" {
					refused, refusedCmds[c.Command] = true, true
				}
			},
			Result: func(c agentcore.CommandInfo, content string, isErr bool) {
				// A refused command's result is its refusal; "error: ..."
				// is a command that could not start.
				ran = ran || (!refusedCmds[c.Command] && !(isErr && strings.HasPrefix(content, "error: ")))
				failed = failed || isErr
			}}}
	var res agentcore.Result
	var err error
	notRun := false
	if s.Command != "" {
		t.Text = s.Command
		res, err = ch.Agent.RunSkillCommand(ctx, t)
		// A missing skill command, bad arguments or a refusal ran nothing.
		notRun = !ran
	} else {
		steps, wall := s.MaxSteps, s.MaxWall
		if steps <= 0 {
			steps = 8
		}
		if wall <= 0 {
			wall = 5 * time.Minute
		}
		t.Text, t.Budgets = scheduleQuestion+s.Question, agentcore.Budgets{MaxSteps: steps, MaxModelCalls: 2*steps + 1, MaxWall: wall}
		if why := b.scheduleBudget(s, ch, &t); why != "" {
			// Not run: the chain says so, and the check could not run.
			if _, err := ch.Agent.Note(t.Session, agentcore.EvNote, t.Actor, agentcore.NotePayload{
				Kind: agentcore.NoteRunRefused, Detail: why, Text: s.Question}); err != nil {
				b.log.Error("record refused schedule", "schedule", s.Name, "err", err)
			}
			res.Answer, notRun = why, true
		} else {
			res, err = ch.Agent.Run(ctx, t)
			if u := res.Usage; u.PromptTokens+u.CompletionTokens > 0 {
				b.cfg.Metrics.tokensUsed(s.Channel, u)
			}
		}
		// A question's commands may fail on the way; its answer decides.
		first, _, _ := strings.Cut(strings.TrimSpace(res.Answer), "\n")
		switch strings.ToUpper(strings.Trim(strings.TrimSpace(first), "*_`.")) {
		case "OK":
			failed = false
		case "FAIL":
			// Refused and nothing checked: the model could not look.
			failed, notRun = true, notRun || (refused && !ran)
		default: // CANNOT, or no verdict
			notRun = true
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	if err != nil || res.Status == agentcore.StatusError || res.Status == agentcore.StatusBudget {
		notRun = true
	}
	outcome := agentcore.ScheduleOK
	switch {
	case notRun:
		outcome = agentcore.ScheduleNotRun
	case failed:
		outcome = agentcore.ScheduleFailed
	}
	what := res.Answer
	if err != nil {
		what = userError(err, res.LastSeq)
	}
	// Nobody watches a schedule: its links are shown, not clickable.
	what = PlainLinks(what)
	// A question's answer is compared by its first line (the verdict);
	// a command's by its whole output.
	key := what
	if s.Question != "" {
		key, _, _ = strings.Cut(strings.TrimSpace(what), "\n")
	}
	digest := sha256.Sum256([]byte(key))
	last := st.outcome
	changed := last != "" && digest != st.digest
	repeat := last == outcome && outcome != agentcore.ScheduleOK && digest == st.digest
	st.runs++
	st.digest, st.outcome = digest, outcome
	if _, err := ch.Agent.Note(t.Session, agentcore.EvNote, t.Actor, agentcore.NotePayload{
		Kind: agentcore.NoteScheduleResult, Detail: outcome, Text: hex.EncodeToString(digest[:])}); err != nil {
		b.log.Error("record schedule result", "schedule", s.Name, "err", err)
	}
	b.log.Info("scheduled check", "schedule", s.Name, "outcome", outcome, "changed", changed, "status", res.Status)
	recovered := outcome == agentcore.ScheduleOK && last != "" && last != agentcore.ScheduleOK
	if repeat || (outcome == agentcore.ScheduleOK && !changed && !recovered) {
		return
	}
	head := fmt.Sprintf("⏰ Scheduled check `%s` ", oneLineMD(s.Name))
	switch {
	case outcome == agentcore.ScheduleNotRun:
		head += "**could not run**"
	case outcome == agentcore.ScheduleFailed:
		head += "**failed**"
	case recovered:
		head += "**recovered** (it passes again)"
	default:
		head += "changed (it passes)"
	}
	b.post(ctx, Thread{Platform: s.Platform, Channel: s.Channel}, Post{Text: head + fmt.Sprintf(" (`%s`, chain session `schedule:%s`):\n%s", oneLineMD(s.Spec), oneLineMD(s.Name), what)})
}

// lastSchedule fills st, before a schedule's first run in this process,
// with the last result the chain records for it (a run before a restart).
func (b *Bot) lastSchedule(ch Channel, s Schedule, st *scheduleState) {
	if st.loaded {
		return
	}
	st.loaded = true
	if st.outcome != "" {
		return
	}
	p, ok, err := ch.Agent.LastNote(scheduleSession(s), agentcore.NoteScheduleResult)
	if err != nil {
		b.log.Error("read the schedule's last result", "schedule", s.Name, "err", err)
		return
	}
	sum, derr := hex.DecodeString(p.Text)
	if !ok || derr != nil || len(sum) != len(st.digest) {
		return
	}
	copy(st.digest[:], sum)
	st.outcome = p.Detail
}

// cronLogger passes cron's own messages (a panic recovered, a run skipped)
// to the bot's log.
type cronLogger struct{ b *Bot }

func (l cronLogger) Info(msg string, kv ...any) { l.b.log.Info("cron: "+msg, kv...) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.b.log.Error("cron: "+msg, append(kv, "err", err)...)
}
