package web

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/bot"
)

// timelineLink is the audit viewer's link to a session's timeline, or ""
// when the server has no Timeline.
func (s *Server) timelineLink(session string) string {
	if s.cfg.Timeline == nil {
		return ""
	}
	return "/audit/timeline?session=" + url.QueryEscape(session)
}

// auditTimeline serves a session's timeline as a Markdown file: both
// parts, or ?part=postmortem or ?part=appendix alone. A session the chain
// does not hold is not found.
func (s *Server) auditTimeline(w http.ResponseWriter, r *http.Request, id identity) {
	sid, part := r.URL.Query().Get("session"), r.URL.Query().Get("part")
	if sid == "" || s.cfg.Timeline == nil {
		http.Error(w, "which session? (?session=ID)", http.StatusBadRequest)
		return
	}
	if part != agentcore.PartBoth && part != agentcore.PartPostmortem && part != agentcore.PartAppendix {
		http.Error(w, "part is postmortem or appendix (or none, for both)", http.StatusBadRequest)
		return
	}
	if _, ok, err := s.cfg.Chain.Session(sid); err == nil && !ok {
		http.Error(w, "no such session in the chain", http.StatusNotFound)
		return
	}
	text, err := s.cfg.Timeline(r.Context(), sid, part)
	if err != nil {
		s.log.Error("audit timeline", "conv", sid, "err", err)
		http.Error(w, "could not build the timeline; operators can see the details in the log", http.StatusInternalServerError)
		return
	}
	s.log.Info("audit timeline", "user", id.Name, "conv", sid)
	name := "timeline-" + strings.Map(safeFileRune, sid)
	if part != agentcore.PartBoth {
		name += "-" + part
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name+".md"))
	fmt.Fprint(w, text)
}

// openThread starts a thread the bot opens itself (an alert's): p is its
// first post, and the post's id is the thread's id, unique across restarts
// like a thread a user starts. The caller holds s.mu.
func (s *Server) openThread(p bot.Post) string {
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	tid := s.cfg.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(rb[:])
	title, _, _ := strings.Cut(p.Text, "\n")
	th := s.addThread(tid, shorten(title, titleLen), "thinbot", s.cfg.Now())
	s.add(th, &wpost{ID: tid, Author: "thinbot", Bot: true, Text: p.Text, Buttons: buttons(p.Buttons), Time: s.cfg.Now(), value: p.Value})
	return tid
}
