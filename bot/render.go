package bot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

const (
	maxProgressLines = 15
	shortViewLines   = 4
	// maxPostText is the longest answer posted as text; longer answers get
	// their full text attached as a file.
	maxPostText = 12000
	// attachOutputOver attaches a command's full output (as the model saw
	// it) when it is longer than this.
	attachOutputOver = 3000
)

// renderer shows a run's progress in one status message, updated at most
// once per UpdateInterval, then posts the answer.
type renderer struct {
	b *Bot
	t Thread

	mu      sync.Mutex
	postID  string
	steps   []string
	dropped int
	text    strings.Builder
	dirty   bool

	stopc chan struct{}
	wg    sync.WaitGroup
}

func newRenderer(b *Bot, t Thread) *renderer {
	return &renderer{b: b, t: t, stopc: make(chan struct{})}
}

// start starts the updater. It posts the status message once there is
// something to show (a command, streamed text) or the run has taken longer
// than two update intervals, so a quick answer arrives alone and no chat
// round trip delays the first model call. Then it updates the status at most
// once per UpdateInterval, until stop.
func (r *renderer) start(ctx context.Context) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		tick := time.NewTicker(r.b.cfg.UpdateInterval)
		defer tick.Stop()
		ticks := 0
		for {
			select {
			case <-tick.C:
				ticks++
				r.mu.Lock()
				posted, dirty := r.postID != "", r.dirty
				r.mu.Unlock()
				if posted {
					r.flush(ctx, false)
				} else if dirty || ticks >= 2 {
					r.postStatus(ctx)
				}
			case <-r.stopc:
				return
			}
		}
	}()
}

// postStatus posts the status message with what there is to show.
func (r *renderer) postStatus(ctx context.Context) {
	r.mu.Lock()
	text := r.statusText(false)
	r.dirty = false
	r.mu.Unlock()
	id := r.b.post(ctx, r.t, Post{Text: text})
	r.mu.Lock()
	r.postID = id
	r.mu.Unlock()
}

func (r *renderer) stop() {
	select {
	case <-r.stopc:
	default:
		close(r.stopc)
	}
	r.wg.Wait()
}

// flush updates the status message if anything changed.
func (r *renderer) flush(ctx context.Context, final bool) {
	r.mu.Lock()
	if !r.dirty && !final {
		r.mu.Unlock()
		return
	}
	r.dirty = false
	text, id := r.statusText(final), r.postID
	r.mu.Unlock()
	r.b.update(ctx, r.t, id, Post{Text: text})
}

// statusText renders the status message; the caller holds r.mu.
func (r *renderer) statusText(final bool) string {
	var s strings.Builder
	if final {
		fmt.Fprintf(&s, "_Done: %d step(s)._\n", len(r.steps)+r.dropped)
	} else {
		s.WriteString("_Working on it…_\n")
	}
	if r.dropped > 0 {
		fmt.Fprintf(&s, "_(%d earlier steps not shown)_\n", r.dropped)
	}
	for _, l := range r.steps {
		s.WriteString(l)
		s.WriteString("\n")
	}
	if !final && r.text.Len() > 0 {
		t := r.text.String()
		if len(t) > 1500 {
			t = "…" + t[len(t)-1500:]
		}
		s.WriteString("\n")
		s.WriteString(t)
	}
	return s.String()
}

func (r *renderer) addStep(line string) {
	r.steps = append(r.steps, line)
	if len(r.steps) > maxProgressLines {
		r.steps = r.steps[1:]
		r.dropped++
	}
	r.dirty = true
}

func (r *renderer) hooks() agentcore.Hooks {
	return agentcore.Hooks{
		Text: func(delta string) {
			r.mu.Lock()
			r.text.WriteString(delta)
			r.dirty = true
			r.mu.Unlock()
		},
		Command: func(c agentcore.CommandInfo) {
			r.b.cfg.Metrics.command(c.Verdict)
			what := c.Command
			if c.Tool != agentcore.ToolRun {
				what = c.Tool + " " + what
			}
			state := map[string]string{"run": "running", "ask": "waiting for approval", "refuse": "refused"}[c.Action]
			r.mu.Lock()
			r.text.Reset()
			r.addStep(fmt.Sprintf("- `%s` — %s (%s)", oneLineMD(what), state, c.Verdict))
			r.mu.Unlock()
		},
		Result: func(c agentcore.CommandInfo, content string, isErr bool) {
			if c.Tool == agentcore.ToolSkill {
				r.mu.Lock()
				r.addStep(fmt.Sprintf("- skill `%s` loaded", oneLineMD(c.Command)))
				r.mu.Unlock()
				return
			}
			mark := "✓"
			if isErr {
				mark = "✗"
			}
			view := shortView(content)
			r.mu.Lock()
			if n := len(r.steps); n > 0 {
				line := r.steps[n-1]
				if i := strings.LastIndex(line, " — "); i >= 0 {
					line = line[:i] + " — " + mark
				}
				r.steps[n-1] = line + "\n" + indentFence(view)
				r.dirty = true
			}
			r.mu.Unlock()
			if len(content) > attachOutputOver {
				r.b.post(context.Background(), r.t, Post{
					Text: fmt.Sprintf("Full output of `%s` attached.", oneLineMD(c.Command)),
					File: &File{Name: "output.txt", Data: []byte(content)},
				})
			}
		},
		Model: func(latency time.Duration, err error) {
			r.b.cfg.Metrics.model(latency.Seconds())
		},
	}
}

// finish posts the answer, then writes the final status. A run that ran
// commands before any status was posted gets its status (the commands and
// their output) posted first, above the answer.
func (r *renderer) finish(ctx context.Context, answer string) {
	r.stop()
	r.mu.Lock()
	posted, steps := r.postID != "", len(r.steps) > 0
	r.mu.Unlock()
	if posted {
		defer r.flush(ctx, true)
	} else if steps {
		r.mu.Lock()
		text := r.statusText(true)
		r.mu.Unlock()
		r.b.post(ctx, r.t, Post{Text: text})
	}
	answer = strings.TrimSpace(answer)
	if answer == "" {
		answer = "_(no answer)_"
	}
	p := Post{Text: answer}
	if len(answer) > maxPostText {
		p = Post{Text: answer[:maxPostText/2] + "\n\n_(the answer is long; the full text is attached)_",
			File: &File{Name: "answer.md", Data: []byte(answer)}}
	}
	r.b.post(ctx, r.t, p)
}

// shortView keeps the first lines of a tool result.
func shortView(content string) string {
	lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
	if len(lines) > shortViewLines {
		lines = append(lines[:shortViewLines], fmt.Sprintf("… (%d more lines)", len(lines)-shortViewLines))
	}
	for i, l := range lines {
		if len(l) > 200 {
			lines[i] = l[:200] + "…"
		}
	}
	return strings.Join(lines, "\n")
}

func indentFence(s string) string {
	s = strings.ReplaceAll(s, "```", "'''")
	return "  ```\n  " + strings.ReplaceAll(s, "\n", "\n  ") + "\n  ```"
}
