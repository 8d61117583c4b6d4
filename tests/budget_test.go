package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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

// TestConsoleTokenBudget: the web console's threads run under token
// budgets (web.tokens) as a channel's do, and their tokens count in
// thinbot_tokens_total{channel="console"} (issue 33: console threads had
// no budget at all, and their tokens counted nowhere).
func TestConsoleTokenBudget(t *testing.T) {
	used := &agentcore.Usage{PromptTokens: 600, CompletionTokens: 100}
	m := fakemodel.Start(t, fakemodel.Reply{Content: "one", Usage: used})
	webAddr := freeAddr(t)
	r := newRig(t, newMMChat(t), m.URL, rigOpts{Extra: `web:
  listen: ` + webAddr + `
  trusted_proxies: [127.0.0.1/32]
  users: [alice]
  approvers: [bob]
  workspace: ws
  tokens: {per_day: 500}
`})
	c := consoleClient{t: t, base: "http://" + webAddr, user: "alice"}
	first := c.newThread("first")
	r.waitFor("the console's first answer", func() bool { return c.hasPost(first, "one") })
	second := c.newThread("second")
	const over = "this channel has used its budget of 500 model tokens for today (UTC)"
	r.waitFor("the console's second thread refused", func() bool { return c.hasPost(second, over) })
	if got := r.metric(`thinbot_tokens_total{channel="console",kind="prompt"}`); got != "600" {
		t.Errorf(`thinbot_tokens_total{channel="console",kind="prompt"} = %q, want 600`, got)
	}
	r.stop()
}

// consoleClient is a console user behind the trusted proxy.
type consoleClient struct {
	t          *testing.T
	base, user string
}

func (c consoleClient) call(method, path, body string) (int, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("X-Forwarded-User", c.user)
	if method == "POST" {
		req.Header.Set("Origin", c.base)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// newThread starts a console thread with text and returns its id.
func (c consoleClient) newThread(text string) string {
	c.t.Helper()
	js, _ := json.Marshal(map[string]string{"text": text})
	code, body := c.call("POST", "/api/threads", string(js))
	var th struct{ ID string }
	json.Unmarshal([]byte(body), &th)
	if code != http.StatusCreated || th.ID == "" {
		c.t.Fatalf("new console thread: %d %s", code, body)
	}
	return th.ID
}

// posts are a console thread's posts as its event stream's snapshot has them.
func (c consoleClient) posts(id string) []consolePost {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/api/threads/"+id+"/events", nil)
	req.Header.Set("X-Forwarded-User", c.user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var snap struct{ Posts []consolePost }
			json.Unmarshal([]byte(data), &snap)
			return snap.Posts
		}
	}
	return nil
}

// consolePost is a post of a console thread.
type consolePost struct {
	ID      string
	Text    string
	Buttons []struct{ ID, Label string }
}

// hasPost reports whether a post of the thread contains want.
func (c consoleClient) hasPost(id, want string) bool {
	for _, p := range c.posts(id) {
		if strings.Contains(p.Text, want) {
			return true
		}
	}
	return false
}
