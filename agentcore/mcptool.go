package agentcore

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/thinbot/thinbot/agentcore/mcp"
	"github.com/thinbot/thinbot/agentcore/sandbox"
	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// mcpTools are the MCP servers' tools as the model is offered them (none
// without Config.MCP), after the built-in ones.
func (r *run) mcpTools() []Tool {
	if r.cfg.MCP == nil {
		return nil
	}
	var out []Tool
	for _, t := range r.cfg.MCP.Tools() {
		out = append(out, Tool{Name: t.Name, Description: mcpDescription(t), Parameters: t.InputSchema})
	}
	return out
}

func mcpDescription(t mcp.Tool) string {
	how := "It waits for a human's approval."
	if t.ReadOnly {
		how = "It runs at once (read-only)."
	}
	return "[MCP server " + t.Server + "] " + strings.TrimSpace(t.Description) + " " + how
}

// mcpPrompt is the text protocol's list of the MCP tools: the model writes
// their calls as text.
func mcpPrompt(tools []mcp.Tool) string {
	if len(tools) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\n# MCP tools\nCall one by replying with only this line (arguments as the schema says):\n")
	b.WriteString(`<tool_call>{"name": "TOOL-NAME", "arguments": {...}}</tool_call>` + "\n")
	for _, t := range tools {
		b.WriteString("- " + t.Name + ": " + textfmt.OneLine(mcpDescription(t), 300) + " Arguments: " + string(t.InputSchema) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// callMCP decides, calls and records one call of an MCP tool, returning
// what the model sees. The config's read_only marking is the only thing
// that lets a call run without an approval (the server's readOnlyHint is
// shown, never trusted); the call runs in the server process of the tier
// its decision allows (mcp.Set). An error is a store failure.
func (r *run) callMCP(ctx context.Context, call ToolCall, t mcp.Tool) (string, bool, error) {
	raw := strings.TrimSpace(call.Arguments)
	if raw == "" {
		raw = "{}"
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		return "error: the arguments of " + t.Name + " are not a JSON object (" + err.Error() + "); send an object as its schema says", true, nil
	}
	// Re-encoded (keys sorted): what is judged, shown, bound by the
	// approval's hash and sent are the same bytes.
	args := mustJSON(obj)
	d := gate.Decision{Verdict: gate.Confirm, Rule: "mcp-tool", Reason: "MCP tool not marked read_only in the config"}
	if t.ReadOnly {
		d = gate.Decision{Verdict: gate.Pass, Rule: "mcp-read-only", Reason: "MCP tool marked read_only in the config"}
		if !t.Remote {
			d = r.failClosed(ctx, d)
		}
	}
	hint := "the server does not mark it read-only"
	if t.ReadOnlyHint {
		hint = "the server marks it read-only (a hint, not trusted)"
	}
	info := CommandInfo{Tool: t.Name, Command: "mcp " + t.Server + " " + t.Tool + " " + string(args)}
	ok, refusal, err := r.decide(ctx, call, info, d, "MCP server "+t.Server+", tool "+t.Tool+"; "+hint)
	if err != nil {
		return "", false, err
	}
	info.Verdict, info.Reason = d.Verdict.String(), d.Reason
	if !ok {
		r.hookResult(info, refusal, true)
		return refusal, true, nil
	}
	if err := ctx.Err(); err != nil {
		r.stopped = CauseOf(ctx)
		return notRun(r.stopped), true, nil
	}
	mode := modeFor(d.Verdict)
	tier := mode.String()
	var runner mcp.Runner
	if t.Remote {
		tier = "remote"
	} else {
		ec, err := r.cfg.Exec.started(ctx)
		if err != nil {
			content := "error: " + err.Error()
			r.hookResult(info, content, true)
			return content, true, nil
		}
		if ec.Sandbox != nil {
			runner = ec.Sandbox
		} else if mode == sandbox.ReadOnly && ec.NoSandbox == "" {
			// No sandbox configured: the read-only tier is a name only,
			// as it is for commands (sandbox: off).
			tier = "read-only (unconfined)"
		}
	}
	start := r.cfg.Now()
	res, cerr := r.cfg.MCP.Call(ctx, runner, mode, t, args)
	if cerr != nil && ctx.Err() != nil {
		r.stopped = CauseOf(ctx) // the result records why it was cut off
	}
	p := MCPCallPayload{CallID: call.ID, Server: t.Server, Tool: t.Tool, Arguments: string(args), Tier: tier,
		ReadOnly: t.ReadOnly, ReadOnlyHint: t.ReadOnlyHint, DurationMS: r.cfg.Now().Sub(start).Milliseconds()}
	var content string
	if cerr != nil {
		p.Error = cerr.Error()
		content = r.maskOutput("error: MCP tool " + t.Name + " failed: " + cerr.Error())
	} else {
		p.ResultSize, p.ResultSHA, p.IsError = res.Size, res.SHA256, res.IsError
		content = textfmt.HeadTail(r.maskOutput(res.Text), r.cfg.Exec.ViewLimit)
		if res.IsError {
			content = "the tool reported an error:\n" + content
		}
		if content == "" {
			content = "(no output)"
		}
	}
	p.Masked = r.masked
	if _, err := r.record(buffered, store.Event{Type: EvMCPCall, Actor: "system", Payload: mustJSON(p)}); err != nil {
		return "", false, err
	}
	isErr := cerr != nil || res.IsError
	r.hookResult(info, content, isErr)
	return content, isErr, nil
}
