package tests

import (
	"syscall"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// A thread and a channel that spent their token budgets stay refused after
// the daemon is killed and started again: the tallies are the chain's
// (issue #21 item 6; a crash loop used to hand out fresh budgets).
func scTokenBudgetsAfterACrash(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	used := &agentcore.Usage{PromptTokens: 600, CompletionTokens: 100}
	m := fakemodel.Start(t, fakemodel.Reply{Content: "one", Usage: used}, fakemodel.Reply{Content: "two", Usage: used})
	// Extra continues the last channel of the rig's config, the sandbox's.
	r := newRig(t, chat, m.URL, rigOpts{Extra: "    tokens: {per_thread: 1000, per_day: 1400}\n"})
	sb := chat.Sandbox()
	root := chat.Mention("alice", sb, "", "first")
	r.waitPost(sb, root, "one")
	chat.Say("alice", sb, root, "second")
	r.waitPost(sb, root, "two")
	chat.Say("alice", sb, root, "third")
	const threadOver = "this thread has used its budget of 1000 model tokens (1400 used)"
	r.waitPost(sb, root, threadOver)
	if code := r.signal(syscall.SIGKILL); code == 0 {
		t.Fatalf("SIGKILL gave exit code 0")
	}

	r.start()
	chat.Say("alice", sb, root, "fourth")
	r.waitFor("the thread's second refusal", func() bool { return r.countPosts(sb, root, threadOver) >= 2 })
	other := chat.Mention("bob", sb, "", "fifth")
	r.waitPost(sb, other, "this channel has used its budget of 1400 model tokens for today (UTC)")
	// The restarted daemon's catch-up may see "third" again: recorded as
	// refused (a run_refused note), it is not refused a second time (a
	// loaded run once showed three refusals here).
	if n := r.countPosts(sb, root, threadOver); n != 2 {
		t.Errorf("the thread was refused %d times, want 2 (third and fourth)", n)
	}
	r.stop()
}
