package agentcore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// basePrompt is the built-in system prompt.
const basePrompt = `You are thinbot, an operations assistant working on a Linux machine for an on-call team.
You work through tools: run shell commands, read files, load skills. Read-only commands run at once; commands that change anything wait for a human's approval, so give a short reason with each; some commands are refused by policy: do not try to get around a refusal.
Prefer small, targeted commands with compact output (use head, tail, grep, wc). Investigate before you conclude, and say what you verified and what you assume.
When a skill in the index fits the task, load it with the skill tool and follow it.
Answer in the user's language, briefly, in Markdown.`

// MemoryFile is where a workspace's memory lives, relative to the workspace.
const MemoryFile = ".thinbot/memory.md"

const (
	maxInstructionBytes = 64 << 10
	maxMemoryBytes      = 32 << 10
)

// systemPrompt builds the prompt for a run: base prompt, instruction layers
// (global, workspace, channel), skill index and memory.
func (r *run) systemPrompt() string {
	var b strings.Builder
	base := r.cfg.Prompt
	if base == "" {
		base = basePrompt
	}
	b.WriteString(base)
	if r.textProtocol() {
		b.WriteString("\n\n")
		b.WriteString(textInstructions(r.t.Goal))
	} else if r.t.Goal {
		b.WriteString("\n\nYou are in goal mode: keep working step by step until the goal is reached, then call agent_done with a summary.")
	}
	layers := []string{r.cfg.GlobalInstructions}
	if r.t.Dir != "" {
		layers = append(layers, readLimited(filepath.Join(r.t.Dir, "AGENT.md"), maxInstructionBytes))
	}
	layers = append(layers, r.t.Instructions...)
	first := true
	for _, l := range layers {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if first {
			b.WriteString("\n\n# Instructions\n")
			first = false
		}
		b.WriteString("\n")
		b.WriteString(l)
		b.WriteString("\n")
	}
	if len(r.cfg.Skills.Skills) > 0 {
		// The index is ranked against the session's first message, which
		// the chain keeps: every run of the session builds the same bytes
		// (a stable prefix), and the configured window, not one a server
		// reported later, sizes it.
		query := r.s.proj.FirstUser()
		if query == "" {
			query = r.t.Text
		}
		opts := skills.IndexOptionsFor(r.cfg.ContextWindow, r.cfg.SkillIndexShare, query)
		b.WriteString("\n\n# Skills\n")
		if r.textProtocol() {
			b.WriteString("Read a skill's instructions (with the skill tool_call shown above) before using it.\n")
		} else {
			b.WriteString("Load a skill's instructions with the skill tool before using it.\n")
		}
		b.WriteString(r.cfg.Skills.IndexWith(opts))
	}
	if r.textProtocol() && r.cfg.MCP != nil {
		b.WriteString(mcpPrompt(r.cfg.MCP.Tools()))
	}
	b.WriteString(datasourcePrompt(r.cfg.Datasources, r.textProtocol()))
	if r.cfg.Fleet != nil {
		b.WriteString(fleetPrompt(r.cfg.Fleet.Inventory(), r.t.FleetGroups))
	}
	if r.t.Dir != "" {
		if mem := strings.TrimSpace(readLimited(filepath.Join(r.t.Dir, MemoryFile), maxMemoryBytes)); mem != "" {
			b.WriteString("\n\n# Memory (notes kept from earlier sessions)\n")
			b.WriteString(mem)
		}
	}
	if r.t.Dir != "" {
		fmt.Fprintf(&b, "\n\nWorking directory: %s", r.t.Dir)
	}
	return b.String()
}

// promptEvent returns the system_prompt event to record when the prompt
// differs from the one the session's projection holds, else nothing.
// Within a run the prompt does not change, so consecutive model calls share
// their prefix byte for byte.
func (r *run) promptEvent() []store.Event {
	p := r.systemPrompt()
	if p == r.s.proj.System() {
		return nil
	}
	return []store.Event{{Type: EvSystemPrompt, Actor: "system", Payload: mustJSON(SystemPromptPayload{Text: p})}}
}

// readLimited reads a small text file; a missing or unreadable file is "".
func readLimited(path string, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, limit))
	return string(b)
}

// remember appends a note to the workspace memory file and records it.
func (r *run) remember(note string) (string, bool, error) {
	if r.t.Dir == "" {
		return "error: this session has no workspace, so there is no memory file", true, nil
	}
	note = strings.TrimSpace(note)
	if len(note) > 2000 {
		return "error: a memory note must be under 2000 bytes; keep it to durable facts", true, nil
	}
	path := filepath.Join(r.t.Dir, MemoryFile)
	// The memory change is an event first, then the file: the chain is the
	// record, the file a convenience the next session's prompt reads.
	if _, err := r.record(durable, store.Event{Type: EvMemory, Actor: "model", Payload: mustJSON(MemoryPayload{Text: note, File: path})}); err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "error: " + err.Error(), true, nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return "error: " + err.Error(), true, nil
	}
	_, werr := fmt.Fprintf(f, "- %s\n", strings.ReplaceAll(note, "\n", " "))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "error: " + werr.Error(), true, nil
	}
	return "saved to memory; it will be in the prompt of future sessions", false, nil
}
