package agentcore

import "strings"

// textProtocolPrompt tells a model without tool calling how to act.
const textProtocolPrompt = `You act by writing shell commands. To run a command, reply with exactly one fenced block:

` + "```bash\n<one command or a short pipeline>\n```" + `

You will get its output in the next message. One command per reply; write a short reason above the block.
To read a skill's instructions, cat its SKILL.md file shown in the skill index.
When the task is finished, reply with your final answer and no command block` + goalDoneHint + `.`

const goalDoneHint = ` (in goal mode, write agent-done on a line of its own after the final summary)`

// TextAction is what a text-protocol reply asks for.
type TextAction struct {
	// Command is the first shell block's content, "" if there is none.
	Command string
	// Blocks is the number of shell blocks in the reply; only the first runs.
	Blocks int
	// Done reports that the reply says agent-done (goal mode's finish).
	Done bool
}

// ParseTextReply reads a text-protocol reply: fenced blocks tagged bash, sh,
// shell or zsh are shell blocks (an untagged block is text: models quote
// output in them, and quoted output must never run); a line "agent-done" outside a
// block, or a shell block holding only agent-done, finishes a goal. It never
// fails: a reply without a block is a final answer.
func ParseTextReply(s string) TextAction {
	var a TextAction
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		fence, info, ok := openFence(line)
		if !ok {
			if isDone(line) {
				a.Done = true
			}
			continue
		}
		var body []string
		closed := false
		j := i + 1
		for ; j < len(lines); j++ {
			t := strings.TrimSpace(lines[j])
			if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" && len(t) >= len(fence) {
				closed = true
				break
			}
			body = append(body, lines[j])
		}
		i = j
		if !shellInfo(info) {
			continue
		}
		cmd := strings.TrimSpace(strings.Join(body, "\n"))
		if !closed && cmd == "" {
			continue
		}
		if isDone(cmd) {
			a.Done = true
			continue
		}
		if cmd == "" {
			continue
		}
		a.Blocks++
		if a.Blocks == 1 {
			a.Command = cmd
		}
	}
	return a
}

func isDone(s string) bool {
	s = strings.Trim(strings.TrimSpace(s), "`*")
	return s == "agent-done" || s == "agent_done"
}

// openFence reports whether line opens a fenced block, with the fence run
// (``` or ~~~, three or more) and the info string.
func openFence(line string) (fence, info string, ok bool) {
	for _, ch := range []string{"`", "~"} {
		n := 0
		for n < len(line) && line[n] == ch[0] {
			n++
		}
		if n >= 3 {
			info = strings.TrimSpace(line[n:])
			if ch == "`" && strings.Contains(info, "`") {
				return "", "", false
			}
			return line[:n], info, true
		}
	}
	return "", "", false
}

func shellInfo(info string) bool {
	if f := strings.Fields(info); len(f) > 0 {
		info = strings.ToLower(f[0])
	}
	switch info {
	case "bash", "sh", "shell", "zsh":
		return true
	}
	return false
}
