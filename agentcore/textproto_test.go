package agentcore

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTextReply(t *testing.T) {
	tests := []struct {
		name, in string
		want     TextAction
	}{
		{"plain answer", "The disk is fine.", TextAction{}},
		{"bash block", "Check disks.\n```bash\ndf -h\n```\n", TextAction{Command: "df -h", Blocks: 1}},
		{"untagged block is quoted text", "```\nuptime\n```", TextAction{}},
		{"quoted output then command", "Output was:\n```\n/dev/vda 15% /\n```\n```bash\ndf -i\n```", TextAction{Command: "df -i", Blocks: 1}},
		{"console block is not run", "```console\n$ rm -rf /tmp/x\n```", TextAction{}},
		{"sh tilde fence", "~~~sh\nls -la\n~~~", TextAction{Command: "ls -la", Blocks: 1}},
		{"two blocks, first runs", "```bash\na\n```\nthen\n```bash\nb\n```", TextAction{Command: "a", Blocks: 2}},
		{"python block ignored", "```python\nprint(1)\n```", TextAction{}},
		{"multi-line command", "```bash\nfor f in *; do\n  wc -l \"$f\"\ndone\n```", TextAction{Command: "for f in *; do\n  wc -l \"$f\"\ndone", Blocks: 1}},
		{"agent-done line", "All done, 3 disks checked.\nagent-done", TextAction{Done: true}},
		{"agent-done in block", "```bash\nagent-done\n```", TextAction{Done: true}},
		{"agent-done in backticks", "Finished. `agent-done`", TextAction{}},
		{"agent-done alone in backticks", "Finished.\n`agent-done`", TextAction{Done: true}},
		{"unclosed block runs", "```bash\nuptime", TextAction{Command: "uptime", Blocks: 1}},
		{"CRLF", "```bash\r\nfree -m\r\n```\r\n", TextAction{Command: "free -m", Blocks: 1}},
		{"longer fence", "````bash\necho '```'\n````", TextAction{Command: "echo '```'", Blocks: 1}},
		{"fence inside untagged block", "````\n```bash\nrm x\n```\n````", TextAction{}},
		{"empty block", "```bash\n```", TextAction{}},
		{"inline code is not a block", "Run `df -h` yourself.", TextAction{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseTextReply(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseTextReply(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTextReplyToolCalls(t *testing.T) {
	run := func(args string) []ToolCall { return []ToolCall{{Name: "run", Arguments: args}} }
	tests := []struct {
		name, in string
		want     TextAction
	}{
		{"hermes object arguments", "Let me check.\n<tool_call>\n{\"name\": \"run\", \"arguments\": {\"command\": \"df -h\", \"reason\": \"disk\"}}\n</tool_call>",
			TextAction{Calls: run(`{"command":"df -h","reason":"disk"}`)}},
		{"hermes string arguments", `<tool_call>{"name":"run","arguments":"{\"command\":\"uptime\"}"}</tool_call>`,
			TextAction{Calls: run(`{"command":"uptime"}`)}},
		{"parameters key", `<tool_call>{"name":"read_file","parameters":{"path":"/etc/hosts"}}</tool_call>`,
			TextAction{Calls: []ToolCall{{Name: "read_file", Arguments: `{"path":"/etc/hosts"}`}}}},
		{"two blocks", "<tool_call>\n{\"name\":\"run\",\"arguments\":{\"command\":\"a\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"run\",\"arguments\":{\"command\":\"b\"}}\n</tool_call>",
			TextAction{Calls: append(run(`{"command":"a"}`), run(`{"command":"b"}`)...)}},
		{"two objects in one block", "<tool_call>\n{\"name\":\"run\",\"arguments\":{\"command\":\"a\"}}\n{\"name\":\"run\",\"arguments\":{\"command\":\"b\"}}\n</tool_call>",
			TextAction{Calls: append(run(`{"command":"a"}`), run(`{"command":"b"}`)...)}},
		{"array in one block", `<tool_call>[{"name":"run","arguments":{"command":"a"}},{"name":"run","arguments":{"command":"b"}}]</tool_call>`,
			TextAction{Calls: append(run(`{"command":"a"}`), run(`{"command":"b"}`)...)}},
		{"two calls on one line", `<tool_call>{"name":"run","arguments":{"command":"a"}}</tool_call><tool_call>{"name":"run","arguments":{"command":"b"}}</tool_call>`,
			TextAction{Calls: append(run(`{"command":"a"}`), run(`{"command":"b"}`)...)}},
		{"unclosed call at the end", "<tool_call>\n{\"name\":\"run\",\"arguments\":{\"command\":\"free -m\"}}",
			TextAction{Calls: run(`{"command":"free -m"}`)}},
		{"broken json keeps the name", `<tool_call>{"name": "run", "arguments": {"command": "ls"</tool_call>`,
			TextAction{Calls: []ToolCall{{Name: "run", Arguments: `{"name": "run", "arguments": {"command": "ls"`}}}},
		{"empty block", "<tool_call></tool_call>", TextAction{Calls: []ToolCall{{}}}},
		{"qwen3-coder function", "<tool_call>\n<function=run>\n<parameter=command>\ndf -h /var\n</parameter>\n<parameter=reason>\ndisk\n</parameter>\n</function>\n</tool_call>",
			TextAction{Calls: run(`{"command":"df -h /var","reason":"disk"}`)}},
		{"qwen3-coder multi-line value and ints", "<function=read_file>\n<parameter=path>\n/var/log/syslog\n</parameter>\n<parameter=limit>\n50\n</parameter>\n</function>",
			TextAction{Calls: []ToolCall{{Name: "read_file", Arguments: `{"limit":50,"path":"/var/log/syslog"}`}}}},
		{"qwen3-coder heredoc with a fence", "<function=run>\n<parameter=command>\ncat <<'E'\n```bash\nx\n```\nE\n</parameter>\n</function>",
			TextAction{Calls: run(`{"command":"cat \u003c\u003c'E'\n` + "```bash\\nx\\n```" + `\nE"}`)}},
		{"llama function json", `<function=run>{"command": "uptime"}</function>`, TextAction{Calls: run(`{"command":"uptime"}`)}},
		{"quoted in inline code", "Models write `<tool_call>` tags.", TextAction{}},
		{"inside a fenced block", "```\n<tool_call>{\"name\":\"run\",\"arguments\":{\"command\":\"rm x\"}}</tool_call>\n```", TextAction{}},
		{"call then agent-done", "<tool_call>{\"name\":\"run\",\"arguments\":{\"command\":\"a\"}}</tool_call>\nagent-done",
			TextAction{Calls: run(`{"command":"a"}`), Done: true}},
		{"call and shell block", "<tool_call>{\"name\":\"run\",\"arguments\":{\"command\":\"a\"}}</tool_call>\n```bash\nb\n```",
			TextAction{Calls: run(`{"command":"a"}`), Command: "b", Blocks: 1}},
		{"unknown tool is parsed", `<tool_call>{"name":"browser","arguments":{"url":"x"}}</tool_call>`,
			TextAction{Calls: []ToolCall{{Name: "browser", Arguments: `{"url":"x"}`}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseTextReply(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseTextReply(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParseTextReply(f *testing.F) {
	for _, s := range []string{"```bash\ndf -h\n```", "agent-done", "~~~sh\nx\n~~~", "````\n```\n````", "```bash\nuptime",
		"<tool_call>{\"name\":\"run\",\"arguments\":{\"command\":\"a\"}}</tool_call>", "<function=run>\n<parameter=command>\nls\n</parameter>\n</function>",
		"<tool_call>[{\"name\":\"x\"}]</tool_call><tool_call>", "<function=a><parameter=b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a := ParseTextReply(s)
		if a.Command != "" && !strings.Contains(strings.ReplaceAll(s, "\r\n", "\n"), a.Command) {
			t.Fatalf("command %q is not part of the reply %q", a.Command, s)
		}
		if (a.Command == "") != (a.Blocks == 0) {
			t.Fatalf("Command %q with Blocks %d", a.Command, a.Blocks)
		}
		if len(a.Calls) > 0 && !strings.Contains(s, "<tool_call>") && !strings.Contains(s, "<function=") {
			t.Fatalf("calls %+v from a reply without a call tag %q", a.Calls, s)
		}
		for _, c := range a.Calls {
			if c.ID != "" {
				t.Fatalf("parser set an id: %+v", c)
			}
		}
	})
}

// Text-form calls in the text protocol go through the same dispatch as
// structured ones: a run is gated and its output comes back labelled, and
// agent_done finishes a goal.
func TestTextProtocolRunsTextFormCalls(t *testing.T) {
	f := newFixture(t, Config{TextProtocol: true},
		say("<tool_call>\n{\"name\": \"run\", \"arguments\": {\"command\": \"echo from-text-call\"}}\n</tool_call>"),
		func(r Request) (Response, error) {
			if got := lastToolContent(r); !strings.HasPrefix(got, `Result of run {"command":"echo from-text-call"}:`) || !strings.Contains(got, "from-text-call\n") {
				t.Errorf("model saw %q", got)
			}
			return Response{Content: `<tool_call>{"name":"agent_done","arguments":{"summary":"all good"}}</tool_call>`}, nil
		})
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "check", Dir: f.dir, Goal: true})
	if err != nil || res.Status != StatusDone || res.Answer != "all good" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if indexOf(types(f.events(t, "s")), EvGateDecision) < 0 {
		t.Error("the text-form run has no gate decision")
	}
}
