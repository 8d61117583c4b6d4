package agentcore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Tool names the model sees.
const (
	ToolRun       = "run"
	ToolReadFile  = "read_file"
	ToolSkill     = "skill"
	ToolMemory    = "memory"
	ToolAgentDone = "agent_done"
)

func toolDefs(goal, withSkills, withFleet bool) []Tool {
	tools := []Tool{
		{Name: ToolRun, Description: "Run one shell command (bash) in the working directory and return its exit code and output. Read-only commands run at once; commands that change things wait for a human's approval; dangerous ones are refused.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"the command line"},"reason":{"type":"string","description":"why you run it, shown to the human who approves it"}},"required":["command"]}`)},
		{Name: ToolReadFile, Description: "Read a text file, optionally a range of lines.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","description":"first line, from 1"},"limit":{"type":"integer","description":"number of lines"}},"required":["path"]}`)},
	}
	if withFleet {
		tools[0] = Tool{Name: ToolRun, Description: "Run one shell command (bash) and return its exit code and output: here in the working directory, or with target on remote hosts over SSH (run by each host's login shell; identical outputs are grouped). Read-only commands run at once; commands that change things wait for a human's approval; dangerous ones are refused.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string","description":"the command line"},"reason":{"type":"string","description":"why you run it, shown to the human who approves it"},"target":{"type":"string","description":"optional: run on these inventory hosts instead of here: a host, a group, or an Ansible-style pattern (web*, web:db, web:!web-03)"}},"required":["command"]}`)}
		tools[1] = Tool{Name: ToolReadFile, Description: "Read a text file, optionally a range of lines; with target, an absolute path on remote hosts.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"offset":{"type":"integer","description":"first line, from 1"},"limit":{"type":"integer","description":"number of lines"},"target":{"type":"string","description":"optional: read on these inventory hosts (host, group or pattern)"}},"required":["path"]}`)}
	}
	if withSkills {
		tools = append(tools, Tool{Name: ToolSkill, Description: "Return the full instructions of a skill from the skill index, with its folder filled in.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
	}
	tools = append(tools, Tool{Name: ToolMemory, Description: "Append a short note to this workspace's memory, shown in future sessions. Use it for durable facts, not for progress notes.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"}},"required":["note"]}`)})
	if goal {
		tools = append(tools, Tool{Name: ToolAgentDone, Description: "Finish the goal: call it when the goal is reached (or cannot be), with a summary for the user.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`)})
	}
	return tools
}

// toolArgs are the union of all tools' arguments.
type toolArgs struct {
	Command string `json:"command"`
	Reason  string `json:"reason"`
	Path    string `json:"path"`
	Offset  int    `json:"offset"`
	Limit   int    `json:"limit"`
	Name    string `json:"name"`
	Note    string `json:"note"`
	Summary string `json:"summary"`
	Target  string `json:"target"`
	// The datasource tools' (datasources.go).
	Query      string `json:"query"`
	Datasource string `json:"datasource"`
	Window     string `json:"window"`
	End        string `json:"end"`
	Time       string `json:"time"`
	Step       string `json:"step"`
	Filter     string `json:"filter"`
	Top        int    `json:"top"`
}

// parseArgs validates a tool call's arguments. The error text goes back to
// the model, so it says how to do better.
func parseArgs(call ToolCall, known []Tool) (toolArgs, error) {
	found := false
	names := make([]string, 0, len(known))
	for _, t := range known {
		names = append(names, t.Name)
		found = found || t.Name == call.Name
	}
	if !found {
		return toolArgs{}, fmt.Errorf("unknown tool %q; the tools are: %s", call.Name, strings.Join(names, ", "))
	}
	var a toolArgs
	raw := strings.TrimSpace(call.Arguments)
	if raw == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return toolArgs{}, fmt.Errorf("arguments of %s are not a valid JSON object (%v); send an object like %s", call.Name, err, example(call.Name))
	}
	missing := ""
	switch call.Name {
	case ToolRun:
		if strings.TrimSpace(a.Command) == "" {
			missing = "command"
		}
	case ToolReadFile:
		if a.Path == "" {
			missing = "path"
		}
	case ToolSkill:
		if a.Name == "" {
			missing = "name"
		}
	case ToolMemory:
		if strings.TrimSpace(a.Note) == "" {
			missing = "note"
		}
	}
	if missing != "" {
		return toolArgs{}, fmt.Errorf("%s needs the field %q; send an object like %s", call.Name, missing, example(call.Name))
	}
	return a, nil
}

func example(tool string) string {
	switch tool {
	case ToolRun:
		return `{"command":"df -h","reason":"check free space"}`
	case ToolReadFile:
		return `{"path":"/var/log/syslog","offset":1,"limit":200}`
	case ToolSkill:
		return `{"name":"log-triage"}`
	case ToolMemory:
		return `{"note":"db01 is the primary"}`
	case ToolAgentDone:
		return `{"summary":"what was done"}`
	case ToolPromQuery, ToolPromRange, ToolLogQuery:
		return `{"query":"up","window":"1h"}`
	}
	return "{}"
}

// outcome is what one tool call gives back: the model's view of its
// result, and for agent_done the summary.
type outcome struct {
	content string
	isErr   bool
	ex      *ExecResult
	done    bool // agent_done: the goal is finished
	summary string
}

// dispatch runs one tool call whose arguments parseArgs accepted, for both
// structured calls and calls written as text, so that both go through the
// same gate, approvals and targets. It does not record the result; an
// error is a store failure.
func (r *run) dispatch(ctx context.Context, call ToolCall, args toolArgs) (outcome, error) {
	var (
		o   outcome
		err error
	)
	switch call.Name {
	case ToolRun:
		o.content, o.isErr, o.ex, err = r.runCommand(ctx, call, args.Command, args.Reason, args.Target)
	case ToolReadFile:
		o.content, o.isErr, o.ex, err = r.readFile(ctx, call, args)
	case ToolSkill:
		o.content, o.isErr, err = r.openSkill(call, args.Name)
		r.hookResult(CommandInfo{Tool: ToolSkill, Command: args.Name}, o.content, o.isErr)
	case ToolMemory:
		o.content, o.isErr, err = r.remember(args.Note)
	case ToolAgentDone:
		o.content, o.done, o.summary = "done", true, args.Summary
	case ToolPromQuery, ToolPromRange, ToolLogQuery, ToolAlerts, ToolSilences:
		o.content, o.isErr, err = r.queryDatasource(ctx, call, args)
	default:
		o.content, o.isErr = "error: unknown tool "+call.Name, true
	}
	return o, err
}
