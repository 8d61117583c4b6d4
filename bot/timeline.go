package bot

import (
	"context"
	"fmt"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
)

// maxInlineTimeline is how much of a timeline is shown in the message; the
// whole of it is always attached as a file.
const maxInlineTimeline = 3500

// timeline answers /timeline: the thread's postmortem timeline from the
// chain, in the message (cut at a line when long) and as a Markdown file.
func (b *Bot) timeline(ctx context.Context, m Message, ch Channel) {
	key := m.Thread.Key()
	opt := agentcore.TimelineOptions{Location: b.zone(ch)}
	if f := strings.Fields(m.Text); len(f) > 1 && strings.EqualFold(f[1], "summary") {
		sum, err := ch.Agent.IncidentSummary(ctx, key)
		if err != nil {
			b.log.Warn("incident summary", "conv", key, "err", err)
			b.post(ctx, m.Thread, Post{Text: "The model could not write a summary, so the timeline below has none."})
		}
		opt.Summary = sum
	}
	text, err := ch.Agent.Timeline(ctx, key, opt)
	if err != nil {
		b.log.Error("timeline", "conv", key, "err", err)
		b.post(ctx, m.Thread, Post{Text: "Could not build this thread's timeline; operators can see the details in the log."})
		return
	}
	shown := text
	if len(shown) > maxInlineTimeline {
		cut := strings.LastIndexByte(shown[:maxInlineTimeline], '\n')
		shown = shown[:cut+1] + "\n… (the whole timeline is in the attached file)"
	}
	b.post(ctx, m.Thread, Post{Text: shown, File: &File{Name: fmt.Sprintf("timeline-%s.md", fileSafe(m.Thread.Root)), Data: []byte(text)}})
}

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}
