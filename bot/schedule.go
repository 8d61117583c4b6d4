package bot

import (
	"context"
	"crypto/sha256"
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

// scheduleState is what a schedule remembers between runs.
type scheduleState struct {
	mu     sync.Mutex
	runs   int
	digest [32]byte // of the last result
	failed bool
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
	"Answer with OK or FAIL alone on the first line (FAIL if anything needs a human), then at most a few lines saying why.\n\nThe check: "

// runSchedule runs one check and posts when it fails or its result
// changed since the last run.
func (b *Bot) runSchedule(ctx context.Context, s Schedule, st *scheduleState) {
	ch, ok := b.cfg.Channel(s.Channel)
	if !ok || ctx.Err() != nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	failed := false
	t := agentcore.Turn{Session: scheduleSession(s), Actor: "schedule:" + s.Name, Dir: ch.Workspace, NoApprover: "a scheduled question cannot ask for one",
		Instructions: []string{ch.Instructions}, FleetGroups: ch.FleetGroups,
		Hooks: agentcore.Hooks{Result: func(_ agentcore.CommandInfo, _ string, isErr bool) { failed = failed || isErr }}}
	var res agentcore.Result
	var err error
	if s.Command != "" {
		t.Text = s.Command
		res, err = ch.Agent.RunSkillCommand(ctx, t)
	} else {
		steps, wall := s.MaxSteps, s.MaxWall
		if steps <= 0 {
			steps = 8
		}
		if wall <= 0 {
			wall = 5 * time.Minute
		}
		t.Text, t.Budgets = scheduleQuestion+s.Question, agentcore.Budgets{MaxSteps: steps, MaxModelCalls: 2*steps + 1, MaxWall: wall}
		failed = false // a question's commands may fail on the way; its answer decides
		t.Hooks.Result = nil
		if why := b.scheduleBudget(s, ch, &t); why != "" {
			// Not run: the chain says so, and the check fails with why.
			if _, err := ch.Agent.Note(t.Session, agentcore.EvNote, t.Actor, agentcore.NotePayload{
				Kind: agentcore.NoteRunRefused, Detail: why, Text: s.Question}); err != nil {
				b.log.Error("record refused schedule", "schedule", s.Name, "err", err)
			}
			res.Answer = why
		} else {
			res, err = ch.Agent.Run(ctx, t)
			if u := res.Usage; u.PromptTokens+u.CompletionTokens > 0 {
				b.cfg.Metrics.tokensUsed(s.Channel, u)
			}
		}
		first, _, _ := strings.Cut(strings.TrimSpace(res.Answer), "\n")
		failed = !strings.EqualFold(strings.Trim(strings.TrimSpace(first), "*_`."), "OK")
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return
	}
	if err != nil || res.Status == agentcore.StatusError || res.Status == agentcore.StatusBudget {
		failed = true
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
	changed := st.runs > 0 && digest != st.digest
	repeat := st.runs > 0 && failed && st.failed && digest == st.digest
	st.runs++
	st.digest, st.failed = digest, failed
	b.log.Info("scheduled check", "schedule", s.Name, "failed", failed, "changed", changed, "status", res.Status)
	if repeat || (!failed && !changed) {
		return
	}
	head := fmt.Sprintf("⏰ Scheduled check `%s` ", oneLineMD(s.Name))
	switch {
	case failed:
		head += "**failed**"
	case st.runs > 1:
		head += "changed (it passes)"
	}
	b.post(ctx, Thread{Platform: s.Platform, Channel: s.Channel}, Post{Text: head + fmt.Sprintf(" (`%s`, chain session `schedule:%s`):\n%s", oneLineMD(s.Spec), oneLineMD(s.Name), what)})
}

// cronLogger passes cron's own messages (a panic recovered, a run skipped)
// to the bot's log.
type cronLogger struct{ b *Bot }

func (l cronLogger) Info(msg string, kv ...any) { l.b.log.Info("cron: "+msg, kv...) }
func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.b.log.Error("cron: "+msg, append(kv, "err", err)...)
}
