package agentcore

import (
	"fmt"
	"strings"
	"testing"
)

// textModel is a Model: it hides the tools from the server it wraps and
// reads the reply into the tool calls the run's one path runs.
func TestTextModelWrapsModel(t *testing.T) {
	var sent []Request
	reply := ""
	m := textModel{funcModel(func(r Request) (Response, error) {
		sent = append(sent, r)
		return Response{Content: reply, FinishReason: "stop", Model: "m"}, nil
	})}
	ask := func(content string) Response {
		t.Helper()
		reply = content
		resp, err := m.Complete(t.Context(), Request{Messages: []Message{{Role: RoleUser, Content: "go"}}, Tools: toolDefs(false, false, false), MaxTokens: 7})
		if err != nil {
			t.Fatal(err)
		}
		last := sent[len(sent)-1]
		if last.Tools != nil || last.MaxTokens != 7 || len(last.Messages) != 1 {
			t.Fatalf("the wrapped model got %+v, want the request without tools", last)
		}
		if resp.text == nil || resp.recorded() != nil || resp.Content != content || resp.Model != "m" {
			t.Fatalf("reply %+v: want the content kept, a textReply and no recorded calls", resp)
		}
		return resp
	}

	if r := ask("fine\nagent-done\n"); len(r.ToolCalls) != 0 || r.text.answer != "fine" || !r.text.done {
		t.Fatalf("an answer with agent-done: %+v %+v", r.ToolCalls, *r.text)
	}
	r := ask("why\n```bash\necho a\n```\n```bash\necho b\n```")
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != ToolRun || r.ToolCalls[0].text.index != -1 {
		t.Fatalf("a shell block: %+v", r.ToolCalls)
	}
	args, err := parseArgs(r.ToolCalls[0], toolDefs(false, false, false))
	if err != nil || args.Command != "echo a" || args.Reason != "" {
		t.Fatalf("the block's run call has arguments %+v (%v), want the first block's command", args, err)
	}
	if id := r.ToolCalls[0].named(41).ID; id != "text-41" {
		t.Fatalf("a block is named %q, want text-41", id)
	}
	if v := r.ToolCalls[0].text.view("out", true); v != "Output of `echo a`:\nout\n(Only the first command block of your reply ran; send one block per reply.)" {
		t.Fatalf("a block's result reads %q", v)
	}

	many := ""
	for i := range 10 {
		many += fmt.Sprintf("<tool_call>{\"name\": \"run\", \"arguments\": {\"command\": \"echo %d\"}}</tool_call>\n", i)
	}
	r = ask(many + "```bash\nls\n```")
	if len(r.ToolCalls) != maxTextCalls+1 {
		t.Fatalf("%d calls from 10, want %d: the cap's error ends the step", len(r.ToolCalls), maxTextCalls+1)
	}
	for i, c := range r.ToolCalls {
		if c.ID != "" || c.text.index != i {
			t.Fatalf("call %d: %+v %+v", i, c, *c.text)
		}
		if got := c.named(5).ID; got != fmt.Sprintf("text-5-%d", i) {
			t.Fatalf("call %d is named %q", i, got)
		}
		if refused := c.text.refusal != ""; refused != (i == maxTextCalls) {
			t.Fatalf("call %d refusal %q", i, c.text.refusal)
		}
		if c.text.note != "" {
			t.Fatalf("call %d has note %q; the note about the shell block goes on the reply's last call, which is past the cap", i, c.text.note)
		}
	}
	if got := r.ToolCalls[maxTextCalls].text.refusal; got != "error: only the first 8 tool calls of a reply run; 2 did not" {
		t.Fatalf("the cap says %q", got)
	}

	r = ask("<tool_call>{broken</tool_call>\n<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}</tool_call>\n```bash\nls\n```")
	if len(r.ToolCalls) != 2 || !strings.HasPrefix(r.ToolCalls[0].text.refusal, "error: could not read the tool call") {
		t.Fatalf("an unreadable call: %+v", r.ToolCalls)
	}
	if v := r.ToolCalls[1].text.view("data", true); v != "Result of read_file {\"path\":\"x\"}:\ndata\n(The shell block of your reply did not run: send one action per reply.)" {
		t.Fatalf("a call's result reads %q", v)
	}
	if v := r.ToolCalls[1].text.view("error: bad", false); v != "Result of read_file {\"path\":\"x\"}:\nerror: bad" {
		t.Fatalf("a refused call's result reads %q", v)
	}

	var structured *textCall
	if structured.view("as is", true) != "as is" || (ToolCall{ID: "c1"}).named(9).ID != "c1" {
		t.Fatal("a structured call must keep its id and its result's words")
	}
}

// FuzzTextModel: whatever the reply, the calls textModel returns are what
// the loop can run: at most maxTextCalls and one refused call after them,
// each with a textCall, none with an id before it runs, a shell block's
// run call with arguments parseArgs accepts.
func FuzzTextModel(f *testing.F) {
	for _, s := range []string{"```bash\ndf -h\n```", "agent-done", "<tool_call>{\"name\":\"run\",\"arguments\":{\"command\":\"a\"}}</tool_call>",
		"<tool_call>[{\"name\":\"x\"},{\"name\":\"y\"}]</tool_call>\n```sh\nx\n```", "<function=run>\n<parameter=command>\nls\n</parameter>\n</function>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := textModel{funcModel(func(Request) (Response, error) { return Response{Content: s}, nil })}
		resp, err := m.Complete(t.Context(), Request{Tools: toolDefs(true, true, false)})
		if err != nil || resp.text == nil || resp.Content != s {
			t.Fatalf("Complete: %v %+v", err, resp)
		}
		if len(resp.ToolCalls) > maxTextCalls+1 {
			t.Fatalf("%d calls", len(resp.ToolCalls))
		}
		for i, c := range resp.ToolCalls {
			if c.text == nil || c.ID != "" {
				t.Fatalf("call %d: %+v", i, c)
			}
			if c.text.index == maxTextCalls && i != len(resp.ToolCalls)-1 {
				t.Fatalf("the cap's call %d is not the last", i)
			}
			if c.text.index < 0 {
				if len(resp.ToolCalls) != 1 {
					t.Fatalf("a shell block beside calls: %+v", resp.ToolCalls)
				}
				if a, err := parseArgs(c, toolDefs(true, true, false)); err != nil || a.Command == "" {
					t.Fatalf("the block's call %+v: %v", c, err)
				}
			}
		}
		if strings.Contains(resp.text.answer, "\nagent-done\n") {
			t.Fatalf("answer %q keeps an agent-done line", resp.text.answer)
		}
	})
}
