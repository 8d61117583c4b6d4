package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// requestBytes is the size of a request's message texts.
func requestBytes(r fakemodel.Request) int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Content) + 8
	}
	return n
}

// A long session fills the context until compaction happens; the next
// request starts with the summary and stays under the limit.
func TestCompactionEndToEnd(t *testing.T) {
	const window = 4000                                 // tokens; compaction at 75% = 3000 tokens ≈ 12000 bytes
	big := strings.Repeat("log line with details ", 60) // ~1.3 KB
	compactions := 0
	m := fakemodel.NewFunc(func(r fakemodel.Request) fakemodel.Reply {
		last := r.Messages[len(r.Messages)-1].Content
		if strings.Contains(last, "The conversation is getting long") {
			compactions++
			return fakemodel.Reply{Content: fmt.Sprintf("SUMMARY %d: the user pasted logs; nothing is broken.", compactions)}
		}
		return fakemodel.Reply{Content: "Noted. " + big}
	})
	t.Cleanup(m.Close)
	dir := t.TempDir()
	env := append(modelEnv(m), "AGENT_CONTEXT_WINDOW=4000")
	for i := range 8 {
		if r := thinbot(t, dir, env, "ask", "-s", fmt.Sprintf("turn %d: %s", i, big)); r.code != 0 {
			t.Fatalf("turn %d: exit %d: %s", i, r.code, r.stderr)
		}
	}
	if compactions == 0 {
		t.Fatal("the context never compacted")
	}
	reqs := m.Requests()
	sawSummaryFirst := false
	for i, r := range reqs {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "The conversation is getting long") {
			next := reqs[i+1] // the request after a compaction
			if !strings.Contains(next.Messages[1].Content, "SUMMARY") {
				t.Errorf("request after compaction starts with %.60q", next.Messages[1].Content)
			}
			if got := requestBytes(next); got/4 > window*3/4 {
				t.Errorf("request after compaction is ~%d tokens, over the %d-token threshold", got/4, window*3/4)
			}
			t.Logf("compaction: prompt ~%d -> ~%d tokens", requestBytes(r)/4, requestBytes(next)/4)
			sawSummaryFirst = true
		}
	}
	if !sawSummaryFirst {
		t.Error("no request followed a compaction")
	}
	for _, r := range reqs {
		if got := requestBytes(r) / 4; got > window {
			t.Errorf("a request of ~%d tokens exceeded the %d-token window", got, window)
		}
	}
	verifyChain(t, dbOf(dir))
}
