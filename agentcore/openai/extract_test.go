package openai

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/thinbot/thinbot/agentcore"
)

func TestExtract(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		tools     bool
		content   string
		reasoning string
		calls     []string // name + " " + arguments
	}{
		{"plain", "hello", true, "hello", "", nil},
		{"think block", "<think>\nhmm\n</think>\n\nanswer", true, "answer", "hmm", nil},
		{"unclosed leading think", "hmm, so\n</think>\nanswer", true, "answer", "hmm, so", nil},
		{"think cut by length", "<think>still going", true, "", "still going", nil},
		{"two think blocks", "<think>a</think>x<think>b</think>y", true, "xy", "a\n\nb", nil},
		{"hermes tool call", "I'll check.\n<tool_call>\n{\"name\": \"run\", \"arguments\": {\"command\": \"df -h\"}}\n</tool_call>", true,
			"I'll check.", "", []string{`run {"command":"df -h"}`}},
		{"two tool calls", `<tool_call>{"name":"a","arguments":"{\"x\":1}"}</tool_call><tool_call>{"name":"b","parameters":{"y":2}}</tool_call>`, true,
			"", "", []string{`a {"x":1}`, `b {"y":2}`}},
		{"broken tool call json", `<tool_call>{"name": "run", "arguments": {"command": "ls</tool_call>`, true,
			"", "", []string{`run {"name": "run", "arguments": {"command": "ls`}},
		{"tool call cut by length", `ok <tool_call>{"name":"run","argu`, true, "ok", "", []string{`run {"name":"run","argu`}},
		{"tool calls ignored in text protocol", `<tool_call>{"name":"run"}</tool_call>`, false, `<tool_call>{"name":"run"}</tool_call>`, "", nil},
		{"think then tool call", "<think>plan</think><tool_call>{\"name\":\"run\",\"arguments\":{}}</tool_call>", true, "", "plan", []string{"run {}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := extract(tt.in, tt.tools)
			var calls []string
			for _, c := range x.ToolCalls {
				calls = append(calls, c.Name+" "+c.Arguments)
				if !strings.HasPrefix(c.ID, "call_") {
					t.Errorf("call id %q", c.ID)
				}
			}
			if x.Content != tt.content || x.Reasoning != tt.reasoning || strings.Join(calls, "|") != strings.Join(tt.calls, "|") {
				t.Errorf("extract(%q) = %q, %q, %q; want %q, %q, %q", tt.in, x.Content, x.Reasoning, calls, tt.content, tt.reasoning, tt.calls)
			}
		})
	}
}

func TestArgumentsText(t *testing.T) {
	tests := map[string]string{
		`"{\"a\":1}"`:      `{"a":1}`,
		`{ "a" : [1, 2] }`: `{"a":[1,2]}`,
		`null`:             "",
		``:                 "",
		`"not json"`:       "not json",
	}
	for in, want := range tests {
		if got := agentcore.ArgumentsText(json.RawMessage(in)); got != want {
			t.Errorf("ArgumentsText(%s) = %q, want %q", in, got, want)
		}
	}
}

// filterAll feeds s to a textFilter in pieces split at the given cut points.
func filterAll(s string, tools bool, cuts []int) string {
	f := textFilter{toolCalls: tools}
	var out strings.Builder
	prev := 0
	for _, c := range cuts {
		if c <= prev || c >= len(s) {
			continue
		}
		out.WriteString(f.push(s[prev:c]))
		prev = c
	}
	out.WriteString(f.push(s[prev:]))
	out.WriteString(f.flush())
	return out.String()
}

func TestTextFilter(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"<think>x</think>\n\nhello", "hello"},
		{"a <thin", "a <thin"},
		{"a <think>b", "a "},
		{"x<tool_call>{}</tool_call>y", "xy"},
		{"<<think>>", "<"},
		{"<<think>x</think>>", "<>"},
	}
	for _, tt := range tests {
		for cut := range len(tt.in) {
			if got := filterAll(tt.in, true, []int{cut}); got != tt.want {
				t.Errorf("filter(%q cut at %d) = %q, want %q", tt.in, cut, got, tt.want)
			}
		}
	}
}

// FuzzExtract checks extract and the streaming filter on arbitrary content:
// no panics, every byte of visible text comes from the input, ids are
// stable, and the text shown while streaming (split anywhere) matches the
// final Content whenever the leading-</think> rule does not apply.
func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		"<think>a</think>b",
		"plan\n</think>\nanswer",
		"x<tool_call>{\"name\":\"run\",\"arguments\":{\"command\":\"ls\"}}</tool_call>y",
		"<tool_call>{\"name\":\"run\",\"argu",
		"<think><tool_call></think></tool_call>",
		"< think >",
		"```bash\nls\n```",
	} {
		f.Add(s, 3, 7)
	}
	f.Fuzz(func(t *testing.T, in string, cut1, cut2 int) {
		for _, tools := range []bool{true, false} {
			x := extract(in, tools)
			y := extract(in, tools)
			if len(x.ToolCalls) != len(y.ToolCalls) {
				t.Fatalf("extract not deterministic")
			}
			for i := range x.ToolCalls {
				if x.ToolCalls[i] != y.ToolCalls[i] {
					t.Fatalf("extract not deterministic: %+v vs %+v", x.ToolCalls[i], y.ToolCalls[i])
				}
			}
			if len(x.Content) > len(in) || (utf8.ValidString(in) && !utf8.ValidString(x.Content)) {
				t.Fatalf("content %q from %q", x.Content, in)
			}
			if !tools && len(x.ToolCalls) != 0 {
				t.Fatalf("tool calls extracted in text protocol")
			}
			end := strings.Index(in, thinkClose)
			start := strings.Index(in, thinkOpen)
			if end >= 0 && (start < 0 || start > end) {
				continue // the leading rule: only the final answer can apply it
			}
			shown := filterAll(in, tools, []int{cut1 % (len(in) + 1), cut2 % (len(in) + 1)})
			if strings.TrimSpace(shown) != x.Content {
				t.Fatalf("streamed %q, final content %q (input %q)", shown, x.Content, in)
			}
		}
	})
}
