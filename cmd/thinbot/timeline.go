package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
	"github.com/thinbot/thinbot/store"
)

// sessionZones returns the time zone of a session's timeline: the zone of
// its channel on the chat platform, zones[channel id] or else zones["*"]
// (a channel listed without a timezone of its own has none there), else
// def. A console or schedule session has def.
func sessionZones(platform string, zones map[string]*time.Location, def *time.Location) func(session string) *time.Location {
	return func(session string) *time.Location {
		t, ok := bot.ThreadOf(session)
		if !ok || t.Platform != platform {
			return def
		}
		loc, ok := zones[t.Channel]
		if !ok {
			loc = zones["*"]
		}
		if loc == nil {
			return def
		}
		return loc
	}
}

// configZones is sessionZones for a config read offline (thinbot audit
// timeline --config): channels listed by id. A channel listed by name is
// resolved only by the daemon, against the chat server, so its sessions
// here get the top-level timezone; --timezone sets another.
func configZones(c *daemonConfig) func(session string) *time.Location {
	zones := map[string]*time.Location{}
	for _, cc := range c.Channels {
		if cc.ID != "" {
			zones[cc.ID] = cc.Timezone.loc
		}
	}
	return sessionZones(c.Platform, zones, c.Timezone.loc)
}

// auditTimeline prints a session's timeline in Markdown, as opt says
// (agentcore.WriteTimeline). It reads the store, or, when a running daemon
// holds the store's lock (or --jsonl names one), the JSONL export, which
// it verifies first. A session none of them has is an error.
func auditTimeline(ctx context.Context, e *env, dbPath, jsonl, session string, opt agentcore.TimelineOptions) error {
	var events iter.Seq2[store.Event, error]
	var rep store.Report
	if jsonl == "" {
		db, err := openReadOnly(dbPath)
		if err == nil {
			defer db.Close()
			if rep, err = db.Verify(ctx, nil); err != nil {
				return err
			}
			a, archived, err := db.Archived(session)
			if err != nil {
				return err
			}
			if archived {
				// Archived events are not in this store: say where they are.
				fmt.Fprintf(e.stderr, "session %s: %d events (seq %d..%d) are archived in %s: thinbot audit restore FILE --to DIR, then thinbot audit timeline %s --db DIR/events.db\n",
					session, a.Events, a.FirstSeq, a.LastSeq, strings.Join(a.Files, ", "), session)
			}
			if _, live, err := db.Session(session); err != nil {
				return err
			} else if !live {
				if archived {
					return nil
				}
				return noSession(session)
			}
			events = db.Events(session, 1)
		} else if !errors.Is(err, store.ErrLocked) {
			return err
		} else {
			// A running daemon holds the store: its journal, verified.
			j, err := openLiveJournal(ctx, dbPath)
			if err != nil {
				return err
			}
			defer j.Close()
			fmt.Fprintln(e.stderr, j.note(dbPath))
			var evs []store.Event
			if err := j.each(ctx, func(ev store.Event, _ []byte) error {
				if ev.Session == session {
					evs = append(evs, ev)
				}
				return nil
			}); err != nil {
				return err
			}
			events, rep = eventsOf(evs), j.rep
		}
	} else {
		f, err := os.Open(jsonl)
		if err != nil {
			return fmt.Errorf("audit timeline: %w", err)
		}
		defer f.Close()
		vr, err := store.VerifyFile(ctx, f, nil)
		if err != nil {
			return err
		}
		if _, err := f.Seek(0, 0); err != nil {
			return err
		}
		events, rep = jsonlEvents(f, session, vr.LastSeq), vr.Report
	}
	tl, err := agentcore.ReadTimeline(session, events)
	if err != nil {
		return err
	}
	if len(tl.Rows) == 0 {
		return noSession(session)
	}
	return agentcore.WriteTimeline(e.stdout, tl, rep, opt)
}

// eventsOf yields evs.
func eventsOf(evs []store.Event) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// jsonlEvents are the session's events of a JSONL export up to seq last
// (the verified part).
func jsonlEvents(f *os.File, session string, last uint64) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var ev store.Event
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Session != session {
				continue
			}
			if ev.Seq > last {
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			yield(store.Event{}, err)
		}
	}
}

// chainTimeline is the web console's Timeline: a session's timeline from
// the daemon's store, with the whole chain verified, its times in the zone
// zoneOf gives for the session, its console links to console (an origin;
// "" for none).
func chainTimeline(db *store.DB, zoneOf func(session string) *time.Location, console string) func(ctx context.Context, session, part string) (string, error) {
	return func(ctx context.Context, session, part string) (string, error) {
		rep, err := db.Verify(ctx, nil)
		if err != nil {
			return "", err
		}
		tl, err := agentcore.ReadTimeline(session, db.Events(session, 1))
		if err != nil {
			return "", err
		}
		var b strings.Builder
		if err := agentcore.WriteTimeline(&b, tl, rep, agentcore.TimelineOptions{Part: part, Location: zoneOf(session), Console: console}); err != nil {
			return "", err
		}
		return b.String(), nil
	}
}
