package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/thinbot/thinbot/agentcore/textfmt"
)

// A storm is many alert groups opening threads in one channel at once. It
// starts when a group's first look has to queue or is skipped (the
// channel's limit of first looks is reached), takes in the channel's groups
// opened in the stormWindow before, and lasts until no group has opened in
// the channel for stormWindow. Its summary is one top-level post in the
// channel, updated in place: a line per group (at most stormLines) with its
// status, where its first look is, and a link to its thread where the
// adapter can make one (ThreadLinker).

// stormWindow is how long a storm reaches back at its start, and how long
// after its last new group it ends.
const stormWindow = 10 * time.Minute

// stormLines bounds the groups the summary lists; it counts the others.
const stormLines = 30

// maxStormGroups bounds the groups a storm remembers; it counts the others.
const maxStormGroups = 10000

// ThreadLinker is implemented by adapters that can link to a thread from a
// post (the storm summary's lines): Mattermost's permalinks, the web
// console's own. Link returns "" when it cannot.
type ThreadLinker interface {
	ThreadLink(t Thread) string
}

// storm is one channel's storm and its summary post.
type storm struct {
	// mu is held by the one goroutine that posts or updates the summary
	// (flush); it is taken before alerts.mu.
	mu     sync.Mutex
	postID string
	shown  string
	// The rest is guarded by alerts.mu. dirty: the summary may show less
	// than the storm is now.
	dirty bool
	t     Thread // the channel (Root "")
	since time.Time
	last  time.Time // when its last new group opened
	keys  []string  // its groups, in the order they joined
	more  int       // groups beyond maxStormGroups
}

// stormChanged tells the channel's storm that group key opened (opened)
// or changed (its status, its first look); trigger starts a storm if none
// is on (a first look queued or skipped). The summary is posted or updated
// when its text changed.
func (a *alerts) stormChanged(ctx context.Context, rt AlertRoute, key string, opened, trigger bool) {
	b := a.bots[rt.Platform]
	if b == nil {
		return
	}
	t := Thread{Platform: rt.Platform, Channel: rt.Channel}
	now := a.now()
	a.mu.Lock()
	s := a.storms[t.channelKey()]
	if s != nil && now.Sub(s.last) > stormWindow {
		s = nil // that storm is over
	}
	if s == nil && trigger {
		s = &storm{t: t, since: now, last: now}
		type opened struct {
			key string
			at  time.Time
		}
		var recent []opened
		for k, g := range a.groups {
			if gt, ok := ThreadOf(g.Session); ok && gt.channelKey() == t.channelKey() && now.Sub(g.Opened) <= stormWindow {
				recent = append(recent, opened{k, g.Opened})
			}
		}
		slices.SortFunc(recent, func(x, y opened) int { return x.at.Compare(y.at) })
		for _, r := range recent {
			s.add(r.key)
			if r.at.Before(s.since) {
				s.since = r.at
			}
		}
		a.storms[t.channelKey()] = s
	}
	if s == nil {
		a.mu.Unlock()
		return
	}
	if opened || trigger {
		s.add(key)
	}
	if opened {
		s.last = now
	}
	s.dirty = true
	a.mu.Unlock()
	// One goroutine at a time posts or updates the summary, and goes on
	// while changes arrive: a delivery never waits behind another's chat
	// call, and the last change is always shown. One that finds the
	// summary being written leaves its change to the writer, which looks
	// again after it lets go.
	for s.mu.TryLock() {
		a.flush(ctx, b, s)
		s.mu.Unlock()
		a.mu.Lock()
		again := s.dirty
		a.mu.Unlock()
		if !again {
			return
		}
	}
}

// flush shows the storm's summary until it shows the storm as it is: it
// posts it, or updates it where its text changed. The caller holds s.mu.
func (a *alerts) flush(ctx context.Context, b *Bot, s *storm) {
	ch, _ := b.cfg.Channel(s.t.Channel)
	for {
		a.mu.Lock()
		if !s.dirty {
			a.mu.Unlock()
			return
		}
		s.dirty = false
		text := a.stormText(b, s, b.zone(ch))
		a.mu.Unlock()
		if text == s.shown {
			continue
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		var err error
		if s.postID == "" {
			var id string
			if id, err = b.cfg.Adapter.Post(pctx, s.t, quiet(Post{Text: text})); err == nil && id != "" {
				s.postID = id
			}
		} else {
			err = b.cfg.Adapter.Update(pctx, Thread{Platform: s.t.Platform, Channel: s.t.Channel, Root: s.postID}, s.postID, quiet(Post{Text: text}))
		}
		cancel()
		if err != nil || s.postID == "" {
			// The next change tries again.
			b.log.Warn("post or update the storm summary", "channel", s.t.Channel, "err", err)
			return
		}
		s.shown = text
	}
}

// add puts a group into the storm once. The caller holds alerts.mu.
func (s *storm) add(key string) {
	if key == "" || slices.Contains(s.keys, key) {
		return
	}
	if len(s.keys) >= maxStormGroups {
		s.more++
		return
	}
	s.keys = append(s.keys, key)
}

// stormText is the summary: a head with the counts, then a line per group
// (stormLines at most): its alert name, status, first look and thread.
// Alert text is in code spans, as on the cards. The caller holds a.mu.
func (a *alerts) stormText(b *Bot, s *storm, loc *time.Location) string {
	linker, _ := b.cfg.Adapter.(ThreadLinker)
	looks := map[string]int{}
	firing := 0
	var lines []string
	for i, k := range s.keys {
		g := a.groups[k]
		if g.Status == "firing" {
			firing++
		}
		look := a.looks[k]
		if look == "" {
			look = "none"
		}
		looks[look]++
		if i >= stormLines {
			continue
		}
		name := "-"
		if len(g.Last.Alerts) > 0 {
			name = g.Last.Alerts[0].Labels["alertname"]
		}
		line := fmt.Sprintf("- %s · %s · first look %s", textfmt.CodeSpan(name, 60), g.Status, look)
		if t, ok := ThreadOf(g.Session); ok && linker != nil {
			if u := linker.ThreadLink(t); u != "" {
				line += " · [thread](" + u + ")"
			}
		}
		lines = append(lines, line)
	}
	n := len(s.keys) + s.more
	var out strings.Builder
	fmt.Fprintf(&out, "⛈️ **Alert storm**: %d alert groups opened in this channel since %s, %d still firing. First looks: ", n,
		textfmt.Clock(s.since, loc, "2006-01-02 15:04:05"), firing)
	var parts []string
	for _, st := range []string{lookRunning, lookDone, lookQueued, lookSkipped, lookDropped, "none"} {
		if looks[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", looks[st], st))
		}
	}
	out.WriteString(strings.Join(parts, ", ") + ".\n")
	out.WriteString(strings.Join(lines, "\n"))
	if n > stormLines {
		fmt.Fprintf(&out, "\n- … and %d more (their cards are in this channel)", n-stormLines)
	}
	fmt.Fprintf(&out, "\n_This post follows the storm, which ends %d minutes after its last new group. A skipped first look runs from the Run first look button in its thread._", int(stormWindow.Minutes()))
	return out.String()
}
