package web

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
)

// Full output on demand. A status post shows each command's first lines
// and "… (N more lines)"; the chain holds the whole output (up to the
// agent's capture limit, with its sha256). GET
// /api/threads/{id}/output?command=C&after=T&n=N answers the output of the
// N-th (from 0) command C of the run that made the status post of time T, read from the chain: what the page shows is what the chain
// holds, never a copy kept by the console. For a datasource tool's read
// it is the answer's data the datasource_query event keeps.

// maxOutputAnswer bounds the output sent to the page.
const maxOutputAnswer = 8 << 20

// sameCommand reports whether the command shown in a post (one line, `
// as ', cut at 120 bytes with "...") is the command run.
func sameCommand(shown, run string) bool {
	run = strings.Join(strings.Fields(strings.ReplaceAll(run, "`", "'")), " ")
	shown = strings.Join(strings.Fields(shown), " ")
	if cut, ok := strings.CutSuffix(shown, "..."); ok && len(shown) >= 120 {
		return strings.HasPrefix(run, cut)
	}
	return run == shown
}

func (s *Server) output(w http.ResponseWriter, r *http.Request, _ identity) {
	tid, q := r.PathValue("id"), r.URL.Query()
	command := q.Get("command")
	after, err := time.Parse(time.RFC3339Nano, q.Get("after"))
	n, nerr := strconv.Atoi(q.Get("n"))
	if command == "" || err != nil || nerr != nil || n < 0 {
		apiError(w, http.StatusBadRequest, "want command, after (RFC 3339 time) and n (0 or more)")
		return
	}
	s.mu.Lock()
	_, ok := s.threads[tid]
	s.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "no such thread")
		return
	}
	session := bot.Thread{Platform: Platform, Channel: s.cfg.Channel, Root: tid}.Key()
	calls := map[string]bool{}                           // call ids of the command, in order of the gate's decisions
	answers := map[string]*agentcore.DatasourcePayload{} // a datasource tool's call: its answer
	seen, inRun := 0, false
	for ev, err := range s.cfg.Chain.Events(session, 1) {
		if err != nil {
			s.log.Warn("read output from the chain", "session", session, "err", err)
			apiError(w, http.StatusInternalServerError, "could not read the chain: "+err.Error())
			return
		}
		// The post belongs to the last run started before it was made: a
		// status post appears after its run's first step was recorded.
		if ev.Type == agentcore.EvRunStarted {
			if !ev.Time.After(after) {
				inRun, seen, calls = true, 0, map[string]bool{}
				continue
			}
			if inRun {
				break
			}
		}
		if !inRun {
			continue
		}
		pl, _ := agentcore.Decode(ev)
		switch p := pl.(type) {
		case *agentcore.GatePayload:
			if sameCommand(command, p.Command) {
				if seen == n {
					calls[p.CallID] = true
				}
				seen++
			}
		case *agentcore.DatasourcePayload:
			if calls[p.CallID] {
				answers[p.CallID] = p
			}
		case *agentcore.ToolResultPayload:
			if !calls[p.CallID] {
				continue
			}
			out := fullOutput(p)
			verified := out != p.Content // the output's sha256 matched
			if a := answers[p.CallID]; a != nil && a.Result != "" {
				// A datasource read: the whole answer, as the chain keeps it.
				sum := sha256.Sum256([]byte(a.Result))
				out, verified = a.Result, hex.EncodeToString(sum[:]) == a.ResultSHA
			}
			truncated := false
			if len(out) > maxOutputAnswer {
				out, truncated = strings.ToValidUTF8(out[:maxOutputAnswer], ""), true
			}
			writeJSON(w, http.StatusOK, map[string]any{"output": out, "seq": ev.Seq, "size": p.OutputSize,
				"verified": verified, "truncated": truncated})
			return
		}
	}
	apiError(w, http.StatusNotFound, "the chain holds no output of that command in this thread (yet)")
}
