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

// timeline answers /timeline [appendix] [summary]: the thread's timeline
// from the chain. The message shows the postmortem (or, with "appendix",
// the verified appendix), cut at a line when long; the attached Markdown
// file holds both.
func (b *Bot) timeline(ctx context.Context, m Message, ch Channel) {
	key := m.Thread.Key()
	opt := agentcore.TimelineOptions{Location: b.zone(ch), Console: b.cfg.Console}
	shownPart := agentcore.PartPostmortem
	for _, w := range strings.Fields(m.Text)[1:] {
		switch strings.ToLower(w) {
		case "summary":
			sum, err := ch.Agent.IncidentSummary(ctx, key)
			if err != nil {
				b.log.Warn("incident summary", "conv", key, "err", err)
				b.post(ctx, m.Thread, Post{Text: "The model could not write a summary, so the timeline below has none."})
			}
			opt.Summary = sum
		case agentcore.PartAppendix:
			shownPart = agentcore.PartAppendix
		}
	}
	text, err := ch.Agent.Timeline(ctx, key, opt)
	if err == nil {
		opt.Part = shownPart
		var shown string
		if shown, err = ch.Agent.Timeline(ctx, key, opt); err == nil {
			if len(shown) > maxInlineTimeline {
				shown = cutOutsideFence(shown, maxInlineTimeline) + "\n… (the whole timeline is in the attached file)"
			}
			b.post(ctx, m.Thread, Post{Text: shown, File: &File{Name: fmt.Sprintf("timeline-%s.md", fileSafe(m.Thread.Root)), Data: []byte(text)}})
			return
		}
	}
	b.log.Error("timeline", "conv", key, "err", err)
	b.post(ctx, m.Thread, Post{Text: "Could not build this thread's timeline; operators can see the details in the log."})
}

// cutOutsideFence returns the longest head of s, at most limit bytes, that
// ends with a whole line outside a fenced code block, so that a cut
// timeline does not leave a command's output fence open in the chat.
func cutOutsideFence(s string, limit int) string {
	cut, fence := 0, ""
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 || i+j+1 > limit {
			break
		}
		line := s[i : i+j]
		switch {
		case fence == "" && strings.HasPrefix(line, "```") && strings.Trim(line, "`") == "":
			fence = line
		case line == fence:
			fence = ""
		}
		i += j + 1
		if fence == "" {
			cut = i
		}
	}
	return s[:cut]
}

func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}
