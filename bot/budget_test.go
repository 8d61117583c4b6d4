package bot

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/thinbot/thinbot/agentcore"
)

// usageModel answers with a fixed usage.
type usageModel struct{}

func (usageModel) Complete(context.Context, agentcore.Request) (agentcore.Response, error) {
	return agentcore.Response{Content: "answered", Usage: agentcore.Usage{PromptTokens: 600, CompletionTokens: 100}}, nil
}

// A thread over its token budget does not start another run, and a
// channel over its daily budget neither; the tokens are counted per
// channel.
func TestTokenBudgets(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newRig(t, usageModel{}, Channel{Tokens: TokenBudgets{PerThread: 1000, PerDay: 2000}}, Config{Metrics: NewMetrics(reg)})
	r.say(alice, th1, "m1", "one", true)
	r.ad.waitPost(t, th1, contains("answered"))
	r.say(alice, th1, "m2", "two", true)
	for deadline := time.Now().Add(20 * time.Second); r.ad.count("answered") < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no second answer")
		}
	}
	r.say(alice, th1, "m3", "three", true)
	r.ad.waitPost(t, th1, contains("this thread has used its budget of 1000 model tokens (1400 used)"))
	th2 := Thread{Platform: "fake", Channel: "C1", Root: "R2"}
	r.say(alice, th2, "m4", "four", true)
	r.ad.waitPost(t, th2, contains("answered"))
	r.say(bob, Thread{Platform: "fake", Channel: "C1", Root: "R3"}, "m5", "five", true)
	r.ad.waitPost(t, Thread{Platform: "fake", Channel: "C1", Root: "R3"}, contains("this channel has used its budget of 2000 model tokens for today"))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, mf := range mfs {
		if mf.GetName() != "thinbot_tokens_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) == 2 && m.GetLabel()[0].GetValue() == "C1" && m.GetLabel()[1].GetValue() == "prompt" {
				got = m.GetCounter().GetValue()
			}
		}
	}
	if got != 1800 {
		t.Errorf("prompt tokens counted: %v", got)
	}
}
