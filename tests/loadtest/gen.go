package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/thinbot/thinbot/store"
)

// Generate builds, in dir/events.db and dir/audit.jsonl, a store of about n
// events in the shape of a year of on-call (issue #23): sessions of about
// 50 events (a system prompt, then turns of a message, a run with two
// commands and their results, an approval in one turn of four, the answer),
// eight of them in flight at a time, spread over a year, with payloads of
// the sizes real sessions have (a 1.5 KB system prompt, 1 KB command
// outputs). The sessions are split between the web console, Mattermost,
// Slack and the terminal. The chain ends as a crash leaves it: the runs in
// flight cut short, one of them waiting for an approval, so that start-up
// has something to recover. It is deterministic for a given n.
func Generate(ctx context.Context, dir string, n int) (time.Duration, error) {
	start := time.Now()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("gen: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "events.db")); err == nil {
		return 0, fmt.Errorf("gen: %s already holds a store", dir)
	}
	year := 365 * 24 * time.Hour
	t0 := time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	step := year / time.Duration(max(n, 1))
	db, err := store.Open(filepath.Join(dir, "events.db"), &store.Options{Now: func() time.Time { return clock }})
	if err != nil {
		return 0, err
	}
	g := &gen{rng: rand.New(rand.NewPCG(uint64(n), 23))}
	const inFlight = 8
	var live [inFlight]*genSession
	written, sessions := 0, 0
	for written < n {
		if err := ctx.Err(); err != nil {
			db.Close()
			return 0, err
		}
		var batch []store.Event
		for i := range live {
			if live[i] == nil || live[i].turns == 0 {
				live[i] = g.session(sessions)
				sessions++
				batch = append(batch, live[i].open()...)
			}
			last := n-written-len(batch) <= 60 && i == 0
			batch = append(batch, live[i].turn(g, last)...)
			if last {
				live[i].turns = 0
				break
			}
		}
		if len(batch) > n-written {
			batch = batch[:n-written]
		}
		if _, err := db.AppendBuffered(ctx, batch...); err != nil {
			db.Close()
			return 0, err
		}
		written += len(batch)
		clock = clock.Add(step * time.Duration(len(batch)))
	}
	if err := db.Close(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

type gen struct {
	rng *rand.Rand
	req int
}

type genSession struct {
	id    string
	actor string
	turns int
	msg   int
}

var genCommands = []string{
	"systemctl status nginx --no-pager", "journalctl -u postgresql --since -1h --no-pager | tail -n 200",
	"df -h /var /srv", "kubectl -n payments get pods -o wide", "tail -n 100 /var/log/nginx/error.log",
	"ss -tlnp", "free -m", "uptime", "docker ps --format '{{.Names}} {{.Status}}'", "cat /etc/os-release",
}

var genRisky = []string{"systemctl restart nginx", "kubectl -n payments rollout restart deploy/api", "apt-get install -y htop", "rm -rf /var/cache/app/tmp"}

func (g *gen) session(i int) *genSession {
	s := &genSession{turns: 5}
	switch i % 10 {
	case 0, 1, 2, 3:
		s.id, s.actor = fmt.Sprintf("mattermost/ch%02d/p%08d", i%7, i), fmt.Sprintf("user:u%03d", i%40)
	case 4, 5, 6:
		s.id, s.actor = fmt.Sprintf("web/console/t%08d", i), "user:local"
	case 7, 8:
		s.id, s.actor = fmt.Sprintf("slack/C%02d/%d.%06d", i%5, 1700000000+i, i), fmt.Sprintf("user:U%03d", i%30)
	default:
		s.id, s.actor = fmt.Sprintf("terminal-%08d", i), "user:ops"
	}
	return s
}

func genJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// filler is English-looking text of about n bytes.
func (g *gen) filler(n int) string {
	words := []string{"the", "service", "restarted", "after", "disk", "pressure", "on", "node", "and", "latency",
		"recovered", "within", "minutes", "check", "logs", "for", "errors", "connection", "pool", "upstream"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[g.rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

func (s *genSession) open() []store.Event {
	return []store.Event{{Session: s.id, Type: "system_prompt", Actor: "system",
		Payload: genJSON(map[string]string{"text": strings.Repeat("You are thinbot, an on-call assistant. Commands pass a gate and a sandbox. ", 20)})}}
}

// turn is one message and its run: about 10 events, 12 with an approval.
// With open set, the run is left open with an approval pending (what a
// crash leaves).
func (s *genSession) turn(g *gen, open bool) []store.Event {
	s.turns--
	s.msg++
	ev := func(typ, actor string, p any) store.Event {
		return store.Event{Session: s.id, Type: typ, Actor: actor, Payload: genJSON(p)}
	}
	out := []store.Event{
		ev("user_message", s.actor, map[string]any{"text": "why is " + g.filler(60), "message_id": fmt.Sprintf("%s-m%d", s.id, s.msg)}),
		ev("run_started", "system", map[string]any{}),
	}
	for step := range 2 {
		call := fmt.Sprintf("call_%d_%d", s.msg, step)
		cmd := genCommands[g.rng.IntN(len(genCommands))]
		out = append(out,
			ev("assistant_message", "model", map[string]any{"content": g.filler(120), "tool_calls": []any{map[string]any{"id": call, "name": "run", "arguments": genJSON(map[string]string{"command": cmd})}},
				"usage": map[string]int{"prompt_tokens": 2400 + g.rng.IntN(4000), "completion_tokens": 80 + g.rng.IntN(200)}, "model": "gpt-oss-120b", "protocol": "tools", "latency_ms": 800 + g.rng.IntN(3000)}),
			ev("gate_decision", "gate", map[string]any{"call_id": call, "tool": "run", "command": cmd, "verdict": "pass", "reason": "read-only", "rule": "readonly", "action": "run"}))
		if step == 1 && (s.msg%4 == 0 || open) {
			g.req++
			risky := genRisky[g.rng.IntN(len(genRisky))]
			req := fmt.Sprintf("r%08d", g.req)
			sum := sha256.Sum256([]byte(risky))
			out = append(out, ev("approval_requested", "gate", map[string]any{"call_id": call, "request_id": req, "command": risky,
				"sha256": hex.EncodeToString(sum[:]), "reason": "changes the system", "requester": s.actor}))
			if open {
				return out
			}
			decided := map[string]any{"call_id": call, "request_id": req, "approved": g.rng.IntN(5) != 0, "by": "user:u00" + fmt.Sprint(g.rng.IntN(5)), "sha256": hex.EncodeToString(sum[:])}
			if decided["approved"] == false {
				decided["why"] = "not during business hours"
			}
			out = append(out, ev("approval_decision", "user:approver", decided))
		}
		code := 0
		out = append(out, ev("tool_result", "tool", map[string]any{"call_id": call, "tool": "run", "content": g.filler(900), "exit_code": &code,
			"output_size": 900, "duration_ms": 20 + g.rng.IntN(900)}))
	}
	out = append(out,
		ev("assistant_message", "model", map[string]any{"content": g.filler(400), "usage": map[string]int{"prompt_tokens": 5000, "completion_tokens": 300}, "model": "gpt-oss-120b", "protocol": "tools", "latency_ms": 1500}),
		ev("run_finished", "system", map[string]any{"status": "answered", "steps": 3}))
	return out
}
