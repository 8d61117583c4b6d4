package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/store"
	"github.com/thinbot/thinbot/tests/fakemodel"
	"github.com/thinbot/thinbot/tests/sshd"
)

// TestServeRecordsWhyARunStopped: a daemon with an approved `sleep 45`
// running gets SIGTERM; the chain (the result the model reads and the
// run's end), the timeline and the thread say thinbot shut down on
// SIGTERM, nowhere that a user interrupted it, and the log names the
// signal and the session. After a restart, alice's /stop of the same
// command names alice.
func TestServeRecordsWhyARunStopped(t *testing.T) {
	chat := newMMChat(t)
	m := fakemodel.Start(t, run("sleep 45"), run("sleep 45"))
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()

	approveSleep := func(root string) {
		t.Helper()
		req := r.waitButtons(ops, root)
		r.waitRecorded(r.session(ops, root), `"approval_posted"`)
		chat.Click(t, ops, root, req.ID, "approve", "bob")
		r.waitFor("the approved sleep 45 to run", func() bool { return sleeps(r.proc.cmd.Process.Pid) > 0 })
	}

	// 1. SIGTERM.
	root := chat.Mention("alice", ops, "", "wait 45 seconds")
	approveSleep(root)
	pid := r.proc.cmd.Process.Pid
	r.stop()
	if n := sleeps(pid); n > 0 {
		t.Errorf("%d sleep(s) outlive the daemon", n)
	}
	session := r.session(ops, root)
	res, fin := stopEvents(t, chainEvents(t, r.stateDir), session)
	if res.Cause != "shutdown" || res.CauseBy != "SIGTERM" ||
		!strings.HasPrefix(res.Content, "interrupted: thinbot is shutting down (SIGTERM); the process group was killed") {
		t.Errorf("the command's result = %+v, want it interrupted by the shutdown on SIGTERM", res)
	}
	if fin.Status != "cancelled" || fin.Cause != "shutdown" || fin.CauseBy != "SIGTERM" {
		t.Errorf("run_finished = %+v, want cancelled, cause shutdown by SIGTERM", fin)
	}
	for _, s := range []string{res.Content, fin.Detail} {
		if strings.Contains(s, "user") {
			t.Errorf("the shutdown is recorded as a user's interrupt: %q", s)
		}
	}
	r.waitPost(ops, root, "Stopped: thinbot is shutting down (SIGTERM).")
	if want := fmt.Sprintf(`"msg":"bot stopped","signal":"SIGTERM","cancelled_runs":1,"sessions":[%q]`, session); !strings.Contains(r.log.String(), want) {
		t.Errorf("the log does not name the signal and the cancelled run (%s):\n%s", want, tail(r.log.String(), 3000))
	}
	tl := thinbot(t, r.dir, nil, "audit", "timeline", session, "--config", r.cfgPath)
	if tl.code != 0 {
		t.Fatalf("audit timeline: exit %d: %s", tl.code, tl.stderr)
	}
	for _, want := range []string{"**result** of `sleep 45`: interrupted", "`interrupted: thinbot is shutting down (SIGTERM); the process group was killed`", "run finished: cancelled after 1 step(s): **thinbot shut down** (`SIGTERM`)"} {
		if !strings.Contains(tl.stdout, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, tl.stdout)
		}
	}
	if strings.Contains(tl.stdout, "by the user") {
		t.Errorf("the timeline says a user interrupted the run:\n%s", tl.stdout)
	}

	// 2. /stop by alice.
	r.start()
	root = chat.Mention("alice", ops, "", "wait 45 seconds again")
	approveSleep(root)
	chat.Mention("alice", ops, root, "/stop")
	r.waitPost(ops, root, "Stopped by `/stop` from @alice.")
	r.stop()
	alice := "user:" + chat.UserID("alice") + " (alice)"
	res, fin = stopEvents(t, chainEvents(t, r.stateDir), r.session(ops, root))
	if res.Cause != "stop" || res.CauseBy != alice || !strings.HasPrefix(res.Content, "interrupted: stopped by "+alice+" with /stop; the process group was killed") {
		t.Errorf("the command's result = %+v, want it interrupted by alice's /stop", res)
	}
	if fin.Status != "cancelled" || fin.Cause != "stop" || fin.CauseBy != alice {
		t.Errorf("run_finished = %+v, want cancelled, cause stop by %s", fin, alice)
	}
}

// causePayload is what tool_result and run_finished say about a stop.
type causePayload struct {
	Status  string `json:"status"`
	Content string `json:"content"`
	Detail  string `json:"detail"`
	Cause   string `json:"cause"`
	CauseBy string `json:"cause_by"`
}

// stopEvents are a session's last tool_result and run_finished payloads.
func stopEvents(t *testing.T, evs []store.Event, session string) (res, fin causePayload) {
	t.Helper()
	for _, ev := range evs {
		if ev.Session != session {
			continue
		}
		var p causePayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "tool_result":
			res = p
		case "run_finished":
			fin = p
		}
	}
	return res, fin
}

// sleeps counts the `sleep 45` processes below pid.
func sleeps(pid int) int {
	n := 0
	for _, p := range sshd.Descendants(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err == nil && string(b) == "sleep\x0045\x00" {
			n++
		}
	}
	return n
}
