package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/textfmt"
)

const (
	maxProgressLines = 15
	shortViewLines   = 4
	// maxPostText is the longest answer posted as text; longer answers get
	// their full text attached as a file.
	maxPostText = 12000
	// attachOutputOver attaches a command's output when it (or what the
	// model saw of it) is longer than this.
	attachOutputOver = 3000
	// MaxAttachment bounds an attached command output; cmd captures up to
	// this much of each command (ExecConfig.CaptureLimit).
	MaxAttachment = 10 << 20
)

// renderer shows a run's progress in one status message, updated at most
// once per UpdateInterval, then posts the answer.
//
// When the adapter is a Streamer, the model's text goes into streamed
// messages instead of the status message. The text of one model call is a
// segment; a segment still being written at two stream ticks (every
// UpdateInterval/2) gets a stream, appended to at each tick. A tool call
// ends the segment: its stream stops and stays as the model's commentary.
// At the end of the run, the open stream (the answer's) stops showing the
// answer, which is then not posted again. A segment that ends between two
// ticks gets no stream, so quick commentary costs no calls (it shows as the
// intent line of its command), and neither does a quick answer: it is
// posted as without streaming. Any Streamer error
// falls back to the status message and a posted answer for the rest of the
// run.
type renderer struct {
	b *Bot
	t Thread

	// postMu serialises posting the status message (the updater and the
	// Result hook may both want it first).
	postMu sync.Mutex
	mu     sync.Mutex
	postID string
	prog   Progress
	text   strings.Builder
	dirty  bool
	// streamer is the adapter as a Streamer; nil when it is none, after a
	// streaming error, or in an unwatched run.
	streamer Streamer
	// plain shows the model's links as text (PlainLinks): set for a run
	// no human watches (an alert's first look).
	plain bool
	// ops are the segments' text not yet handed to the stream.
	ops []streamOp
	// callEnded is set after each model call: the next text starts a new
	// segment.
	callEnded bool
	// seg numbers the segments (cutSegment starts a new one); ripe is the
	// segment a stream tick has already seen being written, which the next
	// tick may stream; ended is the segment whose model call returned: it
	// gets no stream any more (the answer is posted whole, words before a
	// tool call become its intent line).
	seg, ripe, ended int
	// segText is the model's text of the current model call, shown as its
	// intent above the first command of the call unless a stream showed it
	// (segStreamed); segDone says the next text starts a new call.
	segText     strings.Builder
	segStreamed bool
	segDone     bool

	// The open stream; owned by the updater goroutine, then by finish.
	sid  string          // its id, "" if none
	sent strings.Builder // what it shows
	held string          // text not appended yet (trailing space; all text once full)
	full bool            // it reached maxPostText: nothing more is appended

	stopc chan struct{}
	// kick asks the updater to show a change now rather than at its next
	// tick (an approval decision).
	kick chan struct{}
	wg   sync.WaitGroup
}

// streamOp is text of the current segment, and whether the segment ended
// after it.
type streamOp struct {
	text string
	cut  bool
}

func newRenderer(b *Bot, t Thread) *renderer {
	r := &renderer{b: b, t: t, stopc: make(chan struct{}), kick: make(chan struct{}, 1), ripe: -1, ended: -1}
	r.streamer, _ = b.cfg.Adapter.(Streamer)
	return r
}

// unwatched makes r render a run no human watches, before start: the
// model's links are shown as text, and nothing is streamed (a stream
// would show a link before the whole answer is there to rewrite).
func (r *renderer) unwatched() {
	r.plain, r.streamer = true, nil
}

// shown is the model's text as r shows it.
func (r *renderer) shown(s string) string {
	if r.plain {
		return PlainLinks(s)
	}
	return s
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
		var streamTick <-chan time.Time
		if r.streamer != nil {
			st := time.NewTicker(max(r.b.cfg.UpdateInterval/2, time.Millisecond))
			defer st.Stop()
			streamTick = st.C
		}
		ticks := 0
		for {
			select {
			case <-tick.C:
				ticks++
				r.mu.Lock()
				posted, dirty, writing := r.postID != "", r.dirty, len(r.ops) > 0
				r.mu.Unlock()
				if posted {
					r.flush(ctx, false)
				} else if dirty || (ticks >= 2 && r.sid == "" && !writing) {
					// An open stream shows that work goes on, and so does
					// text about to get one.
					r.postStatus(ctx)
				}
			case <-r.kick:
				r.mu.Lock()
				posted := r.postID != ""
				r.mu.Unlock()
				if posted {
					r.flush(ctx, false)
				} else {
					r.postStatus(ctx)
				}
			case <-streamTick:
				r.pump(ctx, false)
			case <-r.stopc:
				return
			}
		}
	}()
}

// postStatus posts the status message with what there is to show, unless
// it is posted already.
func (r *renderer) postStatus(ctx context.Context) {
	r.postMu.Lock()
	defer r.postMu.Unlock()
	r.mu.Lock()
	if r.postID != "" {
		r.mu.Unlock()
		return
	}
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
	tail := ""
	if !final && r.text.Len() > 0 && r.streamer == nil {
		tail = r.text.String()
		if len(tail) > 1500 {
			tail = "…" + tail[len(tail)-1500:]
		}
		tail = r.shown(tail)
	}
	return r.prog.Text(final, tail)
}

// CommandInfo is a command as the status message shows it: agentcore's,
// named here for front ends that rebuild a thread from the chain (they
// import bot, not agentcore).
type CommandInfo = agentcore.CommandInfo

// Progress is the status message of a run: the model's intent before each
// command, each command with its state, and each result's first lines. The
// renderer keeps one per run; a front end that rebuilds a thread from the
// chain (the web console after a restart) replays the same calls to show
// the same message. The zero Progress is empty. It is not safe for
// concurrent use.
type Progress struct {
	steps    []string
	dropped  int
	commands int
}

// Empty reports whether the run has shown no step yet.
func (p *Progress) Empty() bool { return len(p.steps) == 0 && p.dropped == 0 }

// Text renders the message: "_Working on it…_" or, when final, "_Done: N
// step(s)._", the steps, and tail (the model's text so far, for adapters
// that cannot stream) after a blank line.
func (p *Progress) Text(final bool, tail string) string {
	var s strings.Builder
	if final {
		fmt.Fprintf(&s, "_Done: %d step(s)._\n", p.commands)
	} else {
		s.WriteString("_Working on it…_\n")
	}
	if p.dropped > 0 {
		fmt.Fprintf(&s, "_(%d earlier steps not shown)_\n", p.dropped)
	}
	for _, l := range p.steps {
		s.WriteString(l)
		s.WriteString("\n")
	}
	if tail != "" {
		s.WriteString("\n")
		s.WriteString(tail)
	}
	return s.String()
}

func (p *Progress) add(line string) {
	p.steps = append(p.steps, line)
	if len(p.steps) > maxProgressLines {
		p.steps = p.steps[1:]
		p.dropped++
	}
}

// Intent adds the model's words that came with its next command.
func (p *Progress) Intent(text string) {
	if text = strings.TrimSpace(text); text != "" {
		p.add(IntentLine(text))
	}
}

// Command adds a command (or file read) with its decision: "run",
// "ask" or "refuse".
func (p *Progress) Command(c agentcore.CommandInfo) {
	what := c.Command
	if c.Tool != agentcore.ToolRun {
		what = c.Tool + " " + what
	}
	state := map[string]string{"run": "running", "ask": "waiting for approval", "refuse": "refused"}[c.Action]
	if len(c.Targets) > 0 {
		what += " on " + agentcore.TargetSummary(c.Targets)
	}
	p.commands++
	p.add(fmt.Sprintf("- `%s` — %s (%s)", oneLineMD(what), state, c.Verdict))
}

// Decided rewrites the newest command waiting for approval with the
// decision ("running, approved by @bob"), reporting whether there was one.
func (p *Progress) Decided(approved bool, by, why string) bool {
	state := " — running, approved by @" + deciderName(by) + " ("
	switch {
	case approved:
	case by == "expiry" || by == "system":
		// system: a restart expired it (agentcore.Recover).
		state = " — not run: " + oneLineMD(why) + " ("
	default:
		state = " — not run: denied by @" + deciderName(by) + " ("
	}
	for i := len(p.steps) - 1; i >= 0; i-- {
		if strings.HasPrefix(p.steps[i], "- `") && strings.Contains(p.steps[i], waitingState) {
			p.steps[i] = strings.Replace(p.steps[i], waitingState, state, 1)
			return true
		}
	}
	return false
}

// Result adds a tool's result to the newest command: a mark and its first
// lines; a skill load is a step of its own.
func (p *Progress) Result(c agentcore.CommandInfo, content string, isErr bool) {
	if c.Tool == agentcore.ToolSkill {
		p.commands++
		p.add(fmt.Sprintf("- skill `%s` loaded", oneLineMD(c.Command)))
		return
	}
	mark := "✓"
	if isErr {
		mark = "✗"
	}
	if n := len(p.steps); n > 0 {
		line := p.steps[n-1]
		if i := strings.LastIndex(line, " — "); i >= 0 {
			line = line[:i] + " — " + mark
		}
		p.steps[n-1] = line + "\n" + indentFence(shortView(content))
	}
}

func (r *renderer) hooks() agentcore.Hooks {
	return agentcore.Hooks{
		Text: func(delta string) {
			r.mu.Lock()
			if r.segDone {
				r.segDone, r.segStreamed = false, false
				r.segText.Reset()
			}
			r.segText.WriteString(delta)
			r.text.WriteString(delta)
			if r.streamer != nil {
				r.queueText(delta)
			} else {
				r.dirty = true
			}
			r.mu.Unlock()
		},
		Command: func(c agentcore.CommandInfo) {
			r.b.cfg.Metrics.command(c.Verdict)
			r.mu.Lock()
			r.text.Reset()
			r.cutSegment()
			// The model's words before the command are its stated intent,
			// which an approver needs: shown above the command unless a
			// stream already shows them.
			if !r.segStreamed {
				r.prog.Intent(r.shown(r.segText.String()))
			}
			r.segText.Reset()
			r.prog.Command(c)
			r.dirty = true
			posted := r.postID != ""
			r.mu.Unlock()
			if c.Action == "ask" {
				// The status (with the intent) goes above the approval card.
				if posted {
					r.wake()
				} else {
					r.postStatus(context.Background())
				}
			}
		},
		Result: func(c agentcore.CommandInfo, content string, isErr bool) {
			r.mu.Lock()
			if c.Tool == agentcore.ToolSkill {
				r.cutSegment() // a skill load has no Command hook
				if !r.segStreamed {
					r.prog.Intent(r.shown(r.segText.String()))
				}
				r.segText.Reset()
			}
			r.prog.Result(c, content, isErr)
			r.dirty = true
			r.mu.Unlock()
			if c.Tool == agentcore.ToolSkill {
				return
			}
			if p, ok := outputPost(c, content, MaxAttachment); ok {
				// The status message, which lists the command, goes
				// first: the file follows what it belongs to.
				r.postStatus(context.Background())
				r.b.post(context.Background(), r.t, p)
			}
		},
		Model: func(latency time.Duration, err error) {
			r.b.cfg.Metrics.model(latency.Seconds())
			r.mu.Lock()
			r.callEnded, r.segDone = true, true
			r.ended = r.seg
			r.mu.Unlock()
		},
	}
}

// Texts of a run's end that a thread rebuilt from the chain shows as the
// live thread did.
const (
	StoppedText  = "Stopped by `/stop`. The session is kept; send a new message to continue."
	ShutdownText = "Stopped: thinbot is shutting down. The session is kept; ask me again in this thread after the restart."
	BudgetSuffix = " Send a new message to continue."
	// InterruptedText is posted after a restart into a thread whose run
	// the previous process left unfinished.
	InterruptedText = "thinbot restarted while working on this thread, so that run was interrupted. The session is kept: send a message to continue."
	// LeaderLostText is InterruptedText when a cluster's new leader
	// closed the run (agentcore.RecoverLeaderLost).
	LeaderLostText = "The cluster's leader was lost while working on this thread (another node took over), so that run was interrupted. The session is kept: send a message to continue."
)

// DecisionOutcome is the first line of a decided approval card: who
// approved (and when) or denied it, or that it expired. by is the
// decision's actor ("user:U2 (bob)", "expiry"), why its reason, at its
// time, shown in loc (nil means UTC).
func DecisionOutcome(approved bool, by, why string, at time.Time, loc *time.Location) string {
	switch {
	case approved:
		return "**Approved** by @" + deciderName(by) + " at " + textfmt.Clock(at, loc, "15:04:05") + " — running."
	case by == "expiry":
		return "**Expired** — nobody decided within " + strings.TrimPrefix(why, "expired after ") + ". Nothing was run."
	}
	return "**Denied** by @" + deciderName(by) + ". Nothing was run."
}

// RestartExpiredCard is an approval card that a restart left undecided
// (agentcore.Recover expired it): what Recover writes into it, and what a
// thread rebuilt from the chain shows.
func RestartExpiredCard(command string) string {
	return fmt.Sprintf("**Expired** — thinbot restarted before anyone decided. Nothing was run.\n```\n%s\n```", command)
}

// LeaderLostExpiredCard is RestartExpiredCard when a cluster's new leader
// expired the request (agentcore.RecoverLeaderLost).
func LeaderLostExpiredCard(command string) string {
	return fmt.Sprintf("**Expired** — the cluster's leader was lost before anyone decided. Nothing was run.\n```\n%s\n```", command)
}

// CancelledOutcome is the card's first line for a request whose run was
// stopped before anyone decided.
const CancelledOutcome = "**Cancelled** — the run was stopped. Nothing was run."

// CancelledText is the last post of a cancelled run, from the cause it
// was stopped with: who sent /stop, or that thinbot is shutting down and on
// which signal. Without a cause (a run recorded before causes were, or one
// whose context ended without one), stopped says whether /stop ended it.
func CancelledText(c *agentcore.StopCause, stopped bool) string {
	switch {
	case c != nil && c.Kind == agentcore.StopUser:
		return "Stopped by `/stop` from @" + deciderName(c.By) + ". The session is kept; send a new message to continue."
	case c != nil && c.Kind == agentcore.StopShutdown:
		return "Stopped: thinbot is shutting down (" + oneLineMD(c.By) + "). The session is kept; ask me again in this thread after the restart."
	case stopped:
		return StoppedText
	}
	return ShutdownText
}

// CancelledOutcomeOf is the first line of the card of a request whose run
// was stopped (c: why) before anyone decided, as the live card shows it.
func CancelledOutcomeOf(c *agentcore.StopCause) string { return cancelledOutcome(c) }

// cancelledOutcome is CancelledOutcome saying why the run stopped.
func cancelledOutcome(c *agentcore.StopCause) string {
	switch {
	case c != nil && c.Kind == agentcore.StopUser:
		return "**Cancelled** — the run was stopped by @" + deciderName(c.By) + ". Nothing was run."
	case c != nil && c.Kind == agentcore.StopShutdown:
		return "**Cancelled** — thinbot is shutting down (" + oneLineMD(c.By) + "). Nothing was run."
	}
	return CancelledOutcome
}

// DecidedCard is an approval card once decided: outcome, the command, the
// hosts, the requester (an actor or a name) and the request id.
func DecidedCard(outcome, command string, targets []string, requester, requestID string) string {
	on := ""
	if len(targets) > 0 {
		on = "On " + agentcore.TargetSummary(targets) + "\n"
	}
	return fmt.Sprintf("%s\n```\n%s\n```\n%sRequested for @%s · request `%s`", outcome, command, on, deciderName(requester), requestID)
}

// AnswerPost is the post of a run's answer (long ones get their full text
// attached).
func AnswerPost(answer string) Post { return answerPost(answer) }

// RebuiltOutputPost is, for a command result rebuilt from the chain, the
// post that attached its output live, nil if none did: content is what the
// chain keeps (the model's view, head and tail), size how many bytes the
// command wrote. The text is the live post's; the file holds content, as
// the chain keeps no more.
func RebuiltOutputPost(command string, size int64, content string) *Post {
	if size <= attachOutputOver && len(content) <= attachOutputOver {
		return nil
	}
	size = max(size, int64(len(content)))
	return &Post{Text: outputText(command, size, min(size, MaxAttachment), MaxAttachment),
		File: &File{Name: "output.txt", Data: []byte(content)}}
}

// waitingState is the state of a step that waits for an approver.
const waitingState = " — waiting for approval ("

// decided rewrites the newest waiting step with the decision and asks the
// updater to show it at once. threadApprover.Decided calls it the moment the
// decision is in the chain, so the status reads "running, approved by @bob"
// rather than "waiting for approval" until the command ends.
func (r *renderer) decided(approved bool, by, why string) {
	r.mu.Lock()
	if r.prog.Decided(approved, by, why) {
		r.dirty = true
	}
	r.mu.Unlock()
	r.wake()
}

// wake asks the updater to show the status now.
func (r *renderer) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// maxIntent bounds the intent shown above a command.
const maxIntent = 600

// IntentLine is the status message's line for the model's words before a
// command (its stated intent), on one line and cut at maxIntent bytes.
// Front ends that rebuild a thread from the chain use it too.
func IntentLine(text string) string {
	return "- 💬 " + textfmt.OneLine(text, maxIntent)
}

// deciderName is the name in an approval's By ("user:U2 (bob)" is bob,
// "user:bob" is bob).
func deciderName(by string) string {
	by = strings.TrimPrefix(by, "user:")
	if i := strings.Index(by, " ("); i >= 0 && strings.HasSuffix(by, ")") {
		by = by[i+2 : len(by)-1]
	}
	return oneLineMD(by)
}

// finish posts the answer, then writes the final status. A run that ran
// commands before any status was posted gets its status (the commands and
// their output) posted first, above the answer. An open stream is stopped
// showing the answer instead of a new post.
func (r *renderer) finish(ctx context.Context, answer string) {
	r.stop()
	r.pump(ctx, true)
	r.mu.Lock()
	posted, steps, st, statusID := r.postID != "", !r.prog.Empty(), r.streamer, r.postID
	r.mu.Unlock()
	answer = strings.TrimSpace(r.shown(answer))
	if answer == "" {
		answer = "_(no answer)_"
	}
	if posted && !steps && r.sid == "" && r.answerInStatus(ctx, statusID, answer) {
		// The status message showed only the model's text (a slow answer,
		// or streaming that fell back): it becomes the answer instead of
		// ending as "_Done: 0 step(s)._" above it.
		return
	}
	if posted {
		defer r.flush(ctx, true)
	} else if steps {
		r.mu.Lock()
		text := r.statusText(true)
		r.mu.Unlock()
		r.b.post(ctx, r.t, Post{Text: text})
	}
	if st != nil && r.sid != "" && r.finishStream(ctx, st, answer) {
		return
	}
	r.b.post(ctx, r.t, answerPost(answer))
}

// answerInStatus replaces the status message id with the answer (a long
// answer's full text follows as a file), reporting whether it did.
func (r *renderer) answerInStatus(ctx context.Context, id, answer string) bool {
	p := answerPost(answer)
	file := p.File
	p.File = nil
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.b.cfg.Adapter.Update(uctx, r.t, id, quiet(p)); err != nil {
		r.b.cfg.Metrics.error("chat")
		r.b.log.Warn("update status with the answer", "conv", r.t.Key(), "post", id, "err", err)
		return false
	}
	if file != nil {
		r.b.post(ctx, r.t, Post{Text: "The full answer is attached.", File: file})
	}
	return true
}

// outputPost is the post attaching a command's output when it is long: all
// of the captured output (c.Output), not the shorter copy the model saw, cut
// to limit bytes (head and tail) and saying what was left out.
func outputPost(c agentcore.CommandInfo, content string, limit int) (Post, bool) {
	data := c.Output
	if data == nil {
		data = []byte(content) // no capture (not a command): what there is
	}
	if len(data) <= attachOutputOver && len(content) <= attachOutputOver {
		return Post{}, false
	}
	size := max(c.Size, int64(len(data)))
	if len(data) > limit {
		data = []byte(headTailBytes(string(data), limit))
	}
	return Post{Text: outputText(c.Command, size, int64(len(data)), limit), File: &File{Name: "output.txt", Data: data}}, true
}

// outputText is the text of an output post: size bytes written, kept of
// them attached.
func outputText(command string, size, kept int64, limit int) string {
	if size > kept && kept > 0 {
		return fmt.Sprintf("Output of `%s` attached: %s of %s, its beginning and end (the middle was cut at the %s limit).",
			oneLineMD(command), humanBytes(kept), humanBytes(size), humanBytes(int64(limit)))
	}
	return fmt.Sprintf("Full output of `%s` attached (%s).", oneLineMD(command), humanBytes(size))
}

// headTailBytes keeps about limit bytes of s, its head and tail, with a
// marker between them; cuts never split a UTF-8 sequence (textfmt.Ends). Not
// textfmt.HeadTail: an attachment must fit the limit marker included (the
// post says "cut at the limit"), where the model's copy adds its marker.
func headTailBytes(s string, limit int) string {
	marker := fmt.Sprintf("\n[... %d bytes cut ...]\n", len(s))
	half := max((limit-len(marker))/2, 0)
	h, t := textfmt.Ends(s, half, half)
	return h + fmt.Sprintf("\n[... %d bytes cut ...]\n", len(s)-len(h)-len(t)) + t
}

// humanBytes formats a size for people: 930 B, 12.5 KiB, 10.0 MiB.
func humanBytes(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// answerPost is the post of an answer: long ones get their full text
// attached.
func answerPost(answer string) Post {
	if len(answer) <= maxPostText {
		return Post{Text: answer}
	}
	cut := maxPostText / 2
	for cut > 0 && !utf8.RuneStart(answer[cut]) {
		cut--
	}
	return Post{Text: answer[:cut] + "\n\n_(the answer is long; the full text is attached)_",
		File: &File{Name: "answer.md", Data: []byte(answer)}}
}

// queueText adds a text delta to the current segment; the caller holds r.mu.
func (r *renderer) queueText(delta string) {
	if r.callEnded {
		r.callEnded = false
		r.cutSegment()
	}
	if n := len(r.ops); n > 0 && !r.ops[n-1].cut {
		r.ops[n-1].text += delta
		return
	}
	r.ops = append(r.ops, streamOp{text: delta})
}

// cutSegment ends the current segment; the caller holds r.mu.
func (r *renderer) cutSegment() {
	if r.streamer == nil {
		return
	}
	r.seg++
	if n := len(r.ops); n > 0 {
		r.ops[n-1].cut = true
		return
	}
	r.ops = append(r.ops, streamOp{cut: true})
}

// pump hands the queued text to the stream. It starts a stream only for a
// segment still being written, and never when final (the run has ended). A
// Streamer error ends streaming for the run.
func (r *renderer) pump(ctx context.Context, final bool) {
	r.mu.Lock()
	ended := r.ended == r.seg
	if n := len(r.ops); !final && !ended && r.sid == "" && n > 0 && !r.ops[n-1].cut && r.ripe != r.seg {
		// A segment gets a stream only when a tick finds it still being
		// written a second time: words that come with their tool call
		// (in one reply, or within a tick) stay the command's intent line,
		// which is also how a thread rebuilt from the chain shows them.
		r.ripe = r.seg
		r.ops = r.ops[n-1:]
		r.mu.Unlock()
		return
	}
	ops, st := r.ops, r.streamer
	r.ops = nil
	r.mu.Unlock()
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	for _, op := range ops {
		if r.sid == "" && (op.cut || final || ended) {
			continue
		}
		if err := r.streamOp(ctx, st, op, final); err != nil {
			r.fallBack(ctx, st, err)
			return
		}
	}
}

// streamOp appends op's text to the open stream, starting one if needed,
// and stops the stream at the end of a segment. Trailing space is held back
// so that what the stream shows is a prefix of the trimmed answer; when
// final, all text is held back for finish.
func (r *renderer) streamOp(ctx context.Context, st Streamer, op streamOp, final bool) error {
	r.held += op.text
	if r.sid == "" {
		r.held = strings.TrimLeftFunc(r.held, unicode.IsSpace)
	}
	send := strings.TrimRightFunc(r.held, unicode.IsSpace)
	if i := strings.LastIndexFunc(send, unicode.IsSpace); strings.ContainsAny(send[i+1:], "@<") {
		// A word that may be a mention still being written waits for
		// its end: QuietMentions must see it whole.
		send = strings.TrimRightFunc(send[:i+1], unicode.IsSpace)
	}
	if r.sent.Len()+len(send) > maxPostText {
		r.full = true
	}
	if !final && !r.full && send != "" {
		if r.sid == "" {
			r.mu.Lock()
			status := r.postID == "" && !r.prog.Empty()
			bare := r.postID != "" && r.prog.Empty()
			r.mu.Unlock()
			if bare {
				return errStatusCarriesText
			}
			if status {
				r.postStatus(ctx) // the commands go above the text
			}
			id, err := st.StartStream(ctx, r.t)
			if err != nil {
				return err
			}
			r.sid = id
			r.mu.Lock()
			r.segStreamed = true
			r.mu.Unlock()
		}
		if err := st.AppendStream(ctx, r.t, r.sid, QuietMentions(send)); err != nil {
			return err
		}
		r.sent.WriteString(send)
		r.held = r.held[len(send):]
	}
	if !op.cut || r.sid == "" {
		return nil
	}
	rest := strings.TrimRightFunc(r.held, unicode.IsSpace)
	if r.full {
		rest = ""
	}
	err := st.StopStream(ctx, r.t, r.sid, QuietMentions(rest))
	r.resetStream()
	return err
}

// finishStream stops the open stream so that it shows answer, reporting
// whether it did; if not, the answer still has to be posted. A stream that
// shows the beginning of the answer gets the rest appended; any other is
// stopped and its text replaced.
func (r *renderer) finishStream(ctx context.Context, st Streamer, answer string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	id, sent := r.sid, r.sent.String()
	r.resetStream()
	if len(answer) <= maxPostText && strings.HasPrefix(answer, sent) {
		if err := st.StopStream(ctx, r.t, id, QuietMentions(answer[len(sent):])); err != nil {
			r.streamFailed(err)
			return false
		}
		return true
	}
	if err := st.StopStream(ctx, r.t, id, ""); err != nil {
		r.streamFailed(err)
		return false
	}
	p := answerPost(answer)
	file := p.File
	p.File = nil
	if err := r.b.cfg.Adapter.Update(ctx, r.t, id, quiet(p)); err != nil {
		r.b.cfg.Metrics.error("chat")
		r.b.log.Warn("update streamed answer", "conv", r.t.Key(), "post", id, "err", err)
		return false
	}
	if file != nil {
		r.b.post(ctx, r.t, Post{Text: "The full answer is attached.", File: file})
	}
	return true
}

// fallBack ends streaming for the rest of the run after err: the status
// message shows the text again and the answer is posted. An open stream is
// stopped as it is, if that still works.
func (r *renderer) fallBack(ctx context.Context, st Streamer, err error) {
	r.streamFailed(err)
	r.mu.Lock()
	r.streamer, r.ops, r.dirty = nil, nil, true
	r.mu.Unlock()
	if r.sid != "" {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = st.StopStream(sctx, r.t, r.sid, "") // best effort: the answer is posted anyway
	}
	r.resetStream()
}

// errStatusCarriesText ends streaming for a run whose status message was
// posted, bare, while the model had not written anything yet (a slow
// start): that message shows the text as it comes and becomes the answer,
// so the thread gets one message rather than a "_Done: 0 step(s)._" above a
// streamed one.
var errStatusCarriesText = errors.New("the status message carries the text")

// streamFailed logs a Streamer error once per run: quietly when the adapter
// already knows its workspace cannot stream.
func (r *renderer) streamFailed(err error) {
	if errors.Is(err, errStatusCarriesText) {
		return
	}
	if errors.Is(err, ErrStreamingUnsupported) {
		r.b.log.Debug("streaming unavailable; rendering with updates", "conv", r.t.Key())
		return
	}
	r.b.cfg.Metrics.error("chat")
	r.b.log.Warn("streaming failed; rendering with updates for the rest of the run", "conv", r.t.Key(), "err", err)
}

func (r *renderer) resetStream() {
	r.sid, r.held, r.full = "", "", false
	r.sent.Reset()
}

// shortView keeps the first lines of a tool result.
func shortView(content string) string {
	lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
	if len(lines) > shortViewLines {
		lines = append(lines[:shortViewLines], fmt.Sprintf("… (%d more lines)", len(lines)-shortViewLines))
	}
	for i, l := range lines {
		if len(l) > 200 {
			lines[i] = strings.ToValidUTF8(l[:200], "") + "…"
		}
	}
	return strings.Join(lines, "\n")
}

func indentFence(s string) string {
	s = strings.ReplaceAll(s, "```", "'''")
	return "  ```\n  " + strings.ReplaceAll(s, "\n", "\n  ") + "\n  ```"
}
