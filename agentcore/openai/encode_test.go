package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

// longHistory is a run at its step n: a long system prompt, the question,
// then n commands with the same 3 KiB of output each (messages that differ
// only in their call id, tool name or role must not share an encoding).
func longHistory(n int) agentcore.Request {
	msgs := []agentcore.Message{{Role: agentcore.RoleSystem, Content: strings.Repeat("You are on call for the <db> fleet & its \"replicas\". ", 40)},
		{Role: agentcore.RoleUser, Content: "disk full on db-1?"}}
	out := strings.Repeat("Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        50G   45G  5.0G  90% /\u2028\n", 36)
	for i := range n {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			agentcore.Message{Role: agentcore.RoleAssistant, Content: "Checking.", Reasoning: "think", ToolCalls: []agentcore.ToolCall{{ID: id, Name: "run", Arguments: `{"command":"df -h","reason":"look"}`}}},
			agentcore.Message{Role: agentcore.RoleTool, ToolCallID: id, Name: []string{"run", "read_file"}[i%2], Content: out})
	}
	msgs = append(msgs, agentcore.Message{Role: agentcore.RoleUser, Content: out})
	tools := []agentcore.Tool{{Name: "run", Description: "Run one shell command <bash>.", Parameters: json.RawMessage(`{"type":"object", "properties":{"command":{"type":"string"}}}`)},
		{Name: "memory", Description: "Note."}}
	return agentcore.Request{Messages: msgs, Tools: tools, MaxTokens: 512}
}

// TestEncodeRequestSameBytes: the body a request is sent as is
// json.Marshal of the wire request, byte for byte, at every step of a run
// (the long messages from the cache from the second step on), with and
// without tools, streaming and settings.
func TestEncodeRequestSameBytes(t *testing.T) {
	temp := 0.2
	for _, cfg := range []Config{{Model: "m"}, {Model: "m\"<x>", FeedReasoning: true, Temperature: &temp}} {
		c := &Client{cfg: cfg}
		full := longHistory(6)
		for step := 1; step <= len(full.Messages); step++ {
			for _, tools := range []bool{true, false} {
				for _, stream := range []bool{true, false} {
					req := full
					req.Messages = full.Messages[:step]
					if !tools {
						req.Tools = nil
					}
					w := c.buildRequest(req, stream)
					want, err := json.Marshal(w)
					if err != nil {
						t.Fatal(err)
					}
					got, err := c.encodeRequest(w)
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("cfg %+v step %d tools %v stream %v: encodeRequest = %v\n%s\nwant\n%s", cfg, step, tools, stream, err, got, want)
					}
				}
			}
		}
		if len(c.msgs.m) == 0 {
			t.Error("nothing cached")
		}
	}
	// Nothing to send: messages null, as json.Marshal has it.
	c := &Client{cfg: Config{Model: "m"}}
	w := c.buildRequest(agentcore.Request{}, false)
	w.Messages = nil
	want, _ := json.Marshal(w)
	if got, err := c.encodeRequest(w); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("empty: %s, %v; want %s", got, err, want)
	}
}

// TestEncodeRequestBudget: past its budget the cache starts again, and
// what it returns is still right.
func TestEncodeRequestBudget(t *testing.T) {
	c := &Client{cfg: Config{Model: "m"}}
	big := strings.Repeat("x", cacheBudget/3)
	for i := range 5 {
		req := agentcore.Request{Messages: []agentcore.Message{{Role: agentcore.RoleUser, Content: fmt.Sprint(i) + big}}}
		w := c.buildRequest(req, false)
		want, _ := json.Marshal(w)
		if got, err := c.encodeRequest(w); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("message %d: wrong body (%v)", i, err)
		}
		if c.msgs.size > cacheBudget {
			t.Fatalf("cache holds %d bytes, budget %d", c.msgs.size, cacheBudget)
		}
	}
	if n := len(c.msgs.m); n == 0 || n > 2 {
		t.Fatalf("%d messages cached, want 1 or 2", n)
	}
}

// FuzzEncodeRequest: any messages encode as json.Marshal has them, also
// the second time (from the cache).
func FuzzEncodeRequest(f *testing.F) {
	f.Add("system", strings.Repeat("a<b>&\"c\"\u2028", 100), "tool", "id", "run", `{"command":"ls"}`, true)
	f.Add("user", "\xff\xfe invalid", "assistant", "", "", "not json", false)
	f.Fuzz(func(t *testing.T, role1, content, role2, id, name, args string, tools bool) {
		content = strings.Repeat(content, cacheMinLen/(len(content)+1)+1)
		req := agentcore.Request{Messages: []agentcore.Message{
			{Role: role1, Content: content, ToolCallID: id, Name: name},
			{Role: role2, Content: content, ToolCalls: []agentcore.ToolCall{{ID: id, Name: name, Arguments: args}}},
		}}
		if tools {
			req.Tools = []agentcore.Tool{{Name: name, Description: content}}
		}
		c := &Client{cfg: Config{Model: name, FeedReasoning: tools}}
		for range 2 {
			w := c.buildRequest(req, tools)
			want, werr := json.Marshal(w)
			got, err := c.encodeRequest(w)
			if (err != nil) != (werr != nil) || !bytes.Equal(got, want) {
				t.Fatalf("encodeRequest = %q, %v; json.Marshal = %q, %v", got, err, want, werr)
			}
		}
	})
}

// BenchmarkEncodeRequest encodes the request of step 3 and step 20 of a
// run whose commands printed 3 KiB each, as every step before sent it:
// "marshal" encodes all of it (as before the cache), "cached" what
// encodeRequest does.
func BenchmarkEncodeRequest(b *testing.B) {
	for _, steps := range []int{3, 20} {
		req := longHistory(steps)
		b.Run(fmt.Sprintf("step%d/marshal", steps), func(b *testing.B) {
			c := &Client{cfg: Config{Model: "m"}}
			for b.Loop() {
				if _, err := json.Marshal(c.buildRequest(req, true)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("step%d/cached", steps), func(b *testing.B) {
			c := &Client{cfg: Config{Model: "m"}}
			for b.Loop() {
				if _, err := c.encodeRequest(c.buildRequest(req, true)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEncodeRequestKeys: long messages alike but for one field each get
// each their own encoding.
func TestEncodeRequestKeys(t *testing.T) {
	c := &Client{cfg: Config{Model: "m"}}
	long := strings.Repeat("same output\n", cacheMinLen/10)
	for _, m := range []agentcore.Message{
		{Role: agentcore.RoleTool, ToolCallID: "a", Name: "run", Content: long},
		{Role: agentcore.RoleTool, ToolCallID: "a", Name: "read_file", Content: long},
		{Role: agentcore.RoleTool, ToolCallID: "b", Name: "read_file", Content: long},
		{Role: agentcore.RoleTool, ToolCallID: "b", Content: long},
		{Role: agentcore.RoleUser, ToolCallID: "b", Content: long},
		{Role: agentcore.RoleUser, Content: long},
		{Role: agentcore.RoleUser, Content: long + "."},
	} {
		w := c.buildRequest(agentcore.Request{Messages: []agentcore.Message{m}, Tools: []agentcore.Tool{{Name: "run"}}}, false)
		want, _ := json.Marshal(w)
		if got, err := c.encodeRequest(w); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v: got\n%s\nwant\n%s", m, got, want)
		}
	}
}

// TestEncodeRequestConcurrent: runs share the client's cache (go test -race).
func TestEncodeRequestConcurrent(t *testing.T) {
	c := &Client{cfg: Config{Model: "m"}}
	req := longHistory(4)
	want, _ := json.Marshal(c.buildRequest(req, true))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if got, err := c.encodeRequest(c.buildRequest(req, true)); err != nil || !bytes.Equal(got, want) {
					t.Error("wrong body")
					return
				}
			}
		})
	}
	wg.Wait()
}
