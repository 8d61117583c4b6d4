package agentcore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/store"
)

// script is a Model that answers with its replies in turn.
type script []agentcore.Response

func (s *script) Complete(ctx context.Context, req agentcore.Request) (agentcore.Response, error) {
	r := (*s)[0]
	*s = (*s)[1:]
	return r, nil
}

// One turn: the model asks for a read-only command, reads its result and
// answers. The events show the commit order: the model's reply and the
// gate's decision are in the chain before the command runs; its result
// follows, then the answer and the run's end.
func ExampleAgent_Run() {
	dir, err := os.MkdirTemp("", "thinbot-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "events.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	model := &script{
		{ToolCalls: []agentcore.ToolCall{{ID: "c1", Name: agentcore.ToolRun, Arguments: `{"command":"echo disk ok","reason":"check"}`}}},
		{Content: "The disk is fine."},
	}
	a, err := agentcore.New(agentcore.Config{Store: db, Model: model, Policy: gate.DefaultPolicy(),
		Exec: agentcore.ExecConfig{Environ: []string{"PATH=" + os.Getenv("PATH")}}})
	if err != nil {
		log.Fatal(err)
	}
	res, err := a.Run(context.Background(), agentcore.Turn{Session: "example", Actor: "user:alice", Text: "is the disk ok?", Dir: dir})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Answer)
	for ev, err := range db.Events("example", 1) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Seq, ev.Type)
	}
	// Output:
	// answered The disk is fine.
	// 1 system_prompt
	// 2 run_started
	// 3 user_message
	// 4 assistant_message
	// 5 gate_decision
	// 6 tool_result
	// 7 assistant_message
	// 8 run_finished
}
