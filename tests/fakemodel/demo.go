package fakemodel

import (
	"strconv"
	"strings"
)

// Demo is a reply function for NewFunc and cmd/fakemodel -demo: asked
// anything, it runs "df -h" (as a run tool call, or as a fenced block when
// the request offers no tools), and once it sees the output it summarises
// it. It works for any number of conversations.
func Demo(req Request) Reply {
	if out, ok := lastToolOutput(req); ok {
		return Reply{Content: summary(out)}
	}
	if req.HasTools() {
		return Reply{
			Content:   "Let me look at the disk usage.",
			ToolCalls: []Call{{Name: "run", Args: `{"command":"df -h","reason":"check disk usage"}`}},
		}
	}
	return Reply{Content: "Let me look at the disk usage.\n\n```bash\ndf -h\n```"}
}

// lastToolOutput finds the output of the demo's command: the last message
// is a tool result, or (text protocol) a user message right after an
// assistant message with a shell block.
func lastToolOutput(req Request) (string, bool) {
	n := len(req.Messages)
	if n == 0 {
		return "", false
	}
	last := req.Messages[n-1]
	if last.Role == "tool" {
		return last.Content, true
	}
	if last.Role == "user" && n >= 2 {
		prev := req.Messages[n-2]
		if prev.Role == "assistant" && (len(prev.ToolCalls) > 0 || strings.Contains(prev.Content, "```bash")) {
			return last.Content, true
		}
	}
	return "", false
}

func summary(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	fullest, pct := "", -1
	for _, l := range lines {
		for _, f := range strings.Fields(l) {
			if p, ok := percent(f); ok && p > pct {
				pct, fullest = p, l
			}
		}
	}
	if pct < 0 {
		return "I ran `df -h` but could not read usage figures from its output:\n\n```\n" + clipLines(lines, 10) + "\n```"
	}
	verdict := "Nothing is close to full."
	if pct >= 90 {
		verdict = "That one needs attention soon."
	}
	return "I ran `df -h`. The fullest filesystem is at " + strconv.Itoa(pct) + "%:\n\n```\n" +
		strings.TrimSpace(fullest) + "\n```\n\n" + verdict
}

func percent(f string) (int, bool) {
	if !strings.HasSuffix(f, "%") || len(f) < 2 || len(f) > 4 {
		return 0, false
	}
	n := 0
	for _, c := range f[:len(f)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func clipLines(lines []string, n int) string {
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
