package tests

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// TestAlertStorm: 200 alerts of 200 groups reach thinbot through a real
// Alertmanager at once. Every group gets its own thread and card; the first
// looks are bounded (max_investigations_per_channel 2): 20 more queue and
// run as the others end (max_queued_first_looks, the default), the rest
// say they were skipped and offer Run first look, which a tap runs; one
// storm summary in the channel lists the groups with links to their
// threads. It logs the figures (threads opened, first looks run and
// skipped, the daemon's peak RSS, card and answer latency) and asserts
// none of them against a clock (without the race detector's memory):
//
//	THINBOT_E2E_NORACE=1 go test -count=1 -v -run TestAlertStorm ./tests/
func TestAlertStorm(t *testing.T) {
	const n = 200
	// A model that takes 200 ms per answer: one command, then findings.
	model := fakemodel.NewFunc(func(req fakemodel.Request) fakemodel.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			return fakemodel.Reply{Content: "Findings: nothing unusual.", Delay: 200 * time.Millisecond}
		}
		rep := run("uptime")
		rep.Delay = 200 * time.Millisecond
		return rep
	})
	t.Cleanup(model.Close)
	chat := newMMChat(t)
	mm := chat.(*mmChat)
	tokenFile := writeSecret(t, t.TempDir(), "alerts.token", alertToken)
	r := newRig(t, chat, model.URL, rigOpts{Extra: fmt.Sprintf(`max_concurrent_runs: 16
alerts:
  token_file: %s
  rate: 200
  burst: 400
  routes:
    - name: storm
      channel: %s
`, tokenFile, chat.Ops())})
	ops := chat.Ops()
	am := startAlertmanager(t, "http://"+r.addr+"/alerts", tokenFile)
	var alerts []amAlert
	for i := range n {
		alerts = append(alerts, amAlert{Labels: map[string]string{"alertname": fmt.Sprintf("Storm%03d", i), "severity": "critical"},
			Annotations: map[string]string{"summary": "storm"}})
	}
	before, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.proc.cmd.Process.Pid))
	start := time.Now()
	am.post(t, alerts...)
	r.waitFor(fmt.Sprintf("%d cards", n), func() bool { return len(cardRoots(chat, ops)) >= n })
	opened := time.Since(start)
	// Every thread ends with a first look's answer or a skip notice.
	var ran, skipped int
	var latencies []time.Duration
	r.waitFor("every thread's first look answered or skipped", func() bool {
		ran, skipped, latencies = 0, 0, latencies[:0]
		for _, root := range cardRoots(chat, ops) {
			card, _ := mm.s.Post(root.ID)
			for _, p := range mm.s.Thread(root.ID) {
				switch {
				case strings.Contains(p.Message, "Findings: nothing unusual."):
					ran++
					latencies = append(latencies, time.Duration(p.CreateAt-card.CreateAt)*time.Millisecond)
				case strings.Contains(p.Message, "Skipped the automatic first look"):
					skipped++
				}
			}
		}
		return ran+skipped == n
	})
	cards := len(cardRoots(chat, ops))
	if cards != n {
		t.Errorf("%d cards for %d groups", cards, n)
	}
	// 2 at once, then the 20 queued as they end; the others skipped.
	if ran != 2+20 || skipped != n-2-20 {
		t.Errorf("first looks: %d ran, %d skipped; want %d and %d", ran, skipped, 2+20, n-2-20)
	}
	// One storm summary, bounded, with a permalink per listed group.
	var summaries []chatPost
	for _, p := range botRoots(chat, ops) {
		if strings.Contains(p.Text, "Alert storm") {
			summaries = append(summaries, p)
		}
	}
	if len(summaries) != 1 {
		t.Fatalf("%d storm summaries in the channel, want 1", len(summaries))
	}
	r.waitFor("the storm summary's final counts", func() bool {
		p, _ := mm.s.Post(summaries[0].ID)
		return strings.Contains(p.Message, fmt.Sprintf("%d alert groups opened in this channel", n)) &&
			strings.Contains(p.Message, fmt.Sprintf("First looks: 22 ran, %d skipped.", n-22))
	})
	sum, _ := mm.s.Post(summaries[0].ID)
	if links := strings.Count(sum.Message, "]("+mm.s.URL+"/_redirect/pl/"); links != 30 || !strings.Contains(sum.Message, fmt.Sprintf("… and %d more", n-30)) {
		t.Errorf("the storm summary lists %d groups with links, want 30 and %d more:\n%s", links, n-30, sum.Message)
	}
	// A tap on a skipped group's Run first look runs it.
	var tapped string
	for _, root := range cardRoots(chat, ops) {
		for _, p := range mm.s.Thread(root.ID) {
			if strings.Contains(p.Message, "Skipped the automatic first look") && tapped == "" {
				tapped = root.ID
				// On the card; Mattermost action ids are alphanumeric.
				chat.Click(t, ops, root.ID, root.ID, "firstlook", "bob")
			}
		}
	}
	r.waitPost(ops, tapped, "Findings: nothing unusual.")
	r.waitPost(ops, tapped, "Run first look: started by @bob")
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.proc.cmd.Process.Pid))
	rss := func(key string) string { return procField(status, key) }
	// Go's own view: the race detector's shadow memory (the tests build
	// thinbot with -race unless THINBOT_E2E_NORACE=1) is in RSS but not here.
	_, metrics := r.get("/metrics")
	goMem := map[string]string{}
	for _, l := range strings.Split(metrics, "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && (k == "go_memstats_heap_inuse_bytes" || k == "go_goroutines") {
			goMem[k] = v
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	lat := "none"
	if len(latencies) > 0 {
		lat = fmt.Sprintf("min %v, median %v, max %v", latencies[0], latencies[len(latencies)/2], latencies[len(latencies)-1])
	}
	t.Logf("storm of %d alerts (%d groups) through Alertmanager: %d threads opened in %v; first looks: %d ran, %d skipped (limit 2 per channel, 20 queued); "+
		"card -> answer latency of the first looks: %s; daemon RSS before %s (anonymous %s), after %s (anonymous %s, file-backed %s: the store's mmap), peak %s; Go heap in use %s bytes, %s goroutines",
		n, n, cards, opened.Round(time.Millisecond), ran, skipped, lat, procField(before, "VmRSS"), procField(before, "RssAnon"),
		rss("VmRSS"), rss("RssAnon"), rss("RssFile"), rss("VmHWM"), goMem["go_memstats_heap_inuse_bytes"], goMem["go_goroutines"])
	r.stop()
}

// procField is a field of /proc/PID/status.
func procField(status []byte, key string) string {
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, key+":") {
			return strings.TrimSpace(strings.TrimPrefix(l, key+":"))
		}
	}
	return "?"
}

// cardRoots are the bot's top-level posts in a channel but its storm
// summaries: the alert cards.
func cardRoots(c chatSide, channel string) []chatPost {
	var out []chatPost
	for _, p := range botRoots(c, channel) {
		if !strings.Contains(p.Text, "Alert storm") {
			out = append(out, p)
		}
	}
	return out
}
