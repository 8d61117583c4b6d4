package web

import (
	"net/http"
	"sort"
	"time"
)

// The pending-approvals inbox: every approval request still open in any
// console thread, so that the person on call sees what waits for them
// without opening each thread. Deciding from the inbox posts the same click
// as the thread's buttons (POST /api/threads/{id}/posts/{post}/click), so
// the bot applies the same checks: the approver role, the channel's
// approvers, the two-person rule, a request decided once.

// inboxItem is one open approval request.
type inboxItem struct {
	Thread    string    `json:"thread"`
	Title     string    `json:"title"`
	Post      string    `json:"post"`
	Text      string    `json:"text"`
	Buttons   []button  `json:"buttons"`
	Requester string    `json:"requester,omitempty"`
	Asked     time.Time `json:"asked"`
	Expires   time.Time `json:"expires,omitzero"`
	// Mine is true when the viewer asked for it: under the two-person rule
	// they cannot approve it, and the page does not notify them of it.
	Mine bool `json:"mine"`
}

// pendingApprovals returns the open requests of all threads, oldest first:
// the posts Post registered in s.pending (a page polls this every few
// seconds, so it never scans every thread's posts).
func (s *Server) pendingApprovals(viewer string) []inboxItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []inboxItem{}
	for p, th := range s.pending {
		if p.value == "" || len(p.Buttons) == 0 || s.threads[th.ID] != th || s.find(th, p.ID) != p {
			delete(s.pending, p) // decided, or its thread (or the post) was forgotten
			continue
		}
		out = append(out, inboxItem{Thread: th.ID, Title: th.Title, Post: p.ID, Text: p.Text,
			Buttons: append([]button(nil), p.Buttons...), Requester: p.requester, Asked: p.Time,
			Expires: p.expires, Mine: p.requester != "" && p.requester == viewer})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Asked.Before(out[j].Asked) })
	return out
}

// approvalInbox answers GET /api/inbox: the open requests and whether the viewer
// may decide requests at all (the approver role, or the local operator).
func (s *Server) approvalInbox(w http.ResponseWriter, _ *http.Request, id identity) {
	writeJSON(w, http.StatusOK, map[string]any{
		"items":      s.pendingApprovals(id.Name),
		"may_decide": s.open || id.has(RoleApprover),
	})
}

// Help implements bot.HelpWriter: /help in the console speaks of the
// console's controls, not of mentions and chat clients' slash commands.
func (s *Server) Help(commands string) string {
	return "**thinbot** — write a task in the box below; each thread is one session with the agent.\n" + commands +
		"- **Stop** (beside Send, while I work) does what `/stop` does\n" +
		"Read-only commands run at once. Commands that change something wait for an approver's **Approve** " +
		"(on the card in the thread, or under **Pending** at the top, which counts the open requests of all threads " +
		"and can notify you); dangerous commands never run. A step's output shows its first lines: " +
		"click **… (N more lines)** for the whole output, read from the audit chain. Times are your local time; hover for UTC."
}
