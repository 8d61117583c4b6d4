package main

import (
	"fmt"
	"strings"

	"github.com/thinbot/thinbot/bot"
)

// scheduleConfig is one entry of the schedules: section: a check on a cron
// spec that posts into a channel only when it fails or changes.
type scheduleConfig struct {
	Name string `yaml:"name"`
	// Cron is a five-field spec or a descriptor (@hourly, @every 10m),
	// optionally prefixed with CRON_TZ=Zone.
	Cron string `yaml:"cron"`
	// Channel is a configured channel's id (its workspace runs the check).
	Channel string `yaml:"channel"`
	// Command is a skill command ("!disk /"), run without the model;
	// Question is a read-only question for the model. One of the two.
	Command  string   `yaml:"command"`
	Question string   `yaml:"question"`
	MaxSteps int      `yaml:"max_steps"`
	MaxWall  duration `yaml:"max_wall"`
}

// checkSchedules reports the schedules: section's problems through bad.
func checkSchedules(bad func(string, ...any), list []scheduleConfig, channels []channelConfig) {
	names := map[string]bool{}
	for i, s := range list {
		where := fmt.Sprintf("schedules[%d]", i)
		if s.Name == "" || strings.ContainsAny(s.Name, "/ ") {
			bad("%s.name %q: want a name without spaces or slashes", where, s.Name)
		} else if names[s.Name] {
			bad("%s.name %q is used twice", where, s.Name)
		}
		names[s.Name] = true
		if err := bot.ParseSpec(s.Cron); err != nil {
			bad("%s.cron %q: %v", where, s.Cron, err)
		}
		if (s.Command == "") == (s.Question == "") {
			bad("%s: give a command (a skill command, run without the model) or a question, not both", where)
		}
		if s.Command != "" && !strings.HasPrefix(s.Command, "!") && !strings.HasPrefix(s.Command, "/run ") {
			bad("%s.command %q: a skill command starts with ! (\"!disk /\")", where, s.Command)
		}
		found := false
		for _, ch := range channels {
			found = found || (ch.ID != "" && ch.ID != "*" && ch.ID == s.Channel)
		}
		if !found {
			bad("%s.channel %q is not the id of a configured channel", where, s.Channel)
		}
		s.MaxWall.check(bad, where+".max_wall", "5m")
	}
}

// newScheduler checks the configured schedules against b.
func newScheduler(c *daemonConfig, b *bot.Bot) (*bot.Scheduler, error) {
	return b.NewScheduler(scheduleList(c))
}
