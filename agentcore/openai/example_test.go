package openai_test

import (
	"context"
	"fmt"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/openai"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

func ExampleClient_Complete() {
	srv := fakemodel.New(fakemodel.Reply{Content: "<think>df is read-only</think>Let me check.",
		ToolCalls: []fakemodel.Call{{ID: "call_1", Name: "run", Args: `{"command":"df -h"}`}}, Fragment: 4})
	defer srv.Close()

	c, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "qwen3"})
	if err != nil {
		panic(err)
	}
	resp, err := c.Complete(context.Background(), agentcore.Request{
		Messages: []agentcore.Message{{Role: agentcore.RoleUser, Content: "how full is the disk?"}},
		Tools:    []agentcore.Tool{{Name: "run", Description: "run a shell command"}},
		OnText:   func(s string) { fmt.Printf("shown: %q\n", s) },
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("content:", resp.Content)
	fmt.Println("reasoning:", resp.Reasoning)
	fmt.Println("call:", resp.ToolCalls[0].Name, resp.ToolCalls[0].Arguments)
	// Output:
	// shown: "Le"
	// shown: "t me"
	// shown: " che"
	// shown: "ck."
	// content: Let me check.
	// reasoning: df is read-only
	// call: run {"command":"df -h"}
}
