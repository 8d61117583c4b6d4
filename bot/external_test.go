package bot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

// An external agent's thread: its root names it, a write's card is posted
// there and decided by the channel's approvers (the agent is no approver),
// and the call returns once decided.
func TestExternalThreadApproval(t *testing.T) {
	r := newRig(t, cmdModel{}, Channel{Approvers: []string{"U2"}}, Config{})
	x, err := r.b.OpenExternal(r.ctx, External{Thread: Thread{Platform: "fake", Channel: "C1"},
		Who: User{ID: "mcp:ci", Name: "codex"}, Title: "MCP session of codex"})
	if err != nil {
		t.Fatal(err)
	}
	th := x.Thread()
	if th.Root == "" || len(r.ad.rootPosts()) != 1 || !strings.Contains(r.ad.rootPosts()[0].post.Text, "codex") {
		t.Fatalf("thread %+v, roots %+v", th, r.ad.rootPosts())
	}
	done := make(chan agentcore.ExternalResult, 1)
	go func() {
		res, _ := x.Call(r.ctx, "codex calls run", agentcore.ExternalCall{Tool: agentcore.ToolRun, Command: "touch ext.txt", Reason: "codex wants it"})
		done <- res
	}()
	card := r.ad.waitPost(t, th, func(p Post) bool { return len(p.Buttons) == 2 })
	click := func(u User, action string) ClickResult {
		return r.b.HandleClick(r.ctx, Click{Thread: th, PostID: card.id, ActionID: action, Value: card.post.Value, User: u})
	}
	if res := click(User{ID: "mcp:ci", Name: "codex"}, ActionApprove); !strings.Contains(res.Ephemeral, "not an approver") {
		t.Errorf("the agent's own click = %+v", res)
	}
	if res := click(bob, ActionApprove); res.Update == nil {
		t.Fatalf("approver's click = %+v", res)
	}
	res := <-done
	if res.IsError || !strings.Contains(res.Content, "exit code: 0") {
		t.Fatalf("call = %+v", res)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "ext.txt")); err != nil {
		t.Error("the approved write did not run")
	}
}

// A call takes a run slot: with every slot held by a call waiting for an
// approval, another call waits, and its client's giving up ends it with
// nothing run or recorded.
func TestExternalCallTakesARunSlot(t *testing.T) {
	r := newRig(t, cmdModel{}, Channel{Approvers: []string{"U2"}}, Config{MaxConcurrent: 1})
	open := func() *ExternalThread {
		x, err := r.b.OpenExternal(r.ctx, External{Thread: Thread{Platform: "fake", Channel: "C1"}, Who: User{ID: "mcp:ci", Name: "codex"}, Title: "MCP session"})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	first, second := open(), open()
	go first.Call(r.ctx, "waits", agentcore.ExternalCall{Tool: agentcore.ToolRun, Command: "touch first.txt"})
	r.ad.waitPost(t, first.Thread(), func(p Post) bool { return len(p.Buttons) == 2 })
	ctx, cancel := context.WithCancel(r.ctx)
	go cancel() // the client gives up while no slot is free
	res, err := second.Call(ctx, "queued", agentcore.ExternalCall{Tool: agentcore.ToolRun, Command: "echo second"})
	if err == nil || res.Status != agentcore.StatusCancelled {
		t.Fatalf("second call = %+v, %v; want cancelled", res, err)
	}
	n := 0
	for range r.db.Events(second.Thread().Key(), 1) {
		n++
	}
	if n != 0 {
		t.Errorf("%d events recorded for a call that never got a slot", n)
	}
}
