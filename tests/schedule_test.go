package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// botChannelPosts counts the bot's top-level posts in a channel containing
// want (scheduled checks post there).
func botChannelPosts(c chatSide, channel, want string) int {
	n := 0
	for _, p := range botRoots(c, channel) {
		if strings.Contains(p.Text, want) {
			n++
		}
	}
	return n
}

// TestScheduleRecoversAcrossARestart: a scheduled question fails, the
// daemon restarts, the check passes: the channel hears that it recovered,
// which the daemon knows from the chain (issue 33: the result was kept in
// memory only, so a pass after a restart said nothing).
func TestScheduleRecoversAcrossARestart(t *testing.T) {
	var verdict atomic.Value
	verdict.Store("FAIL\n/var is 97% full")
	m := fakemodel.NewFunc(func(fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Content: verdict.Load().(string)}
	})
	t.Cleanup(m.Close)
	chat := newMMChat(t)
	ops := chat.Ops()
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`schedules:
  - name: disk
    cron: "@every 1s"
    channel: %s
    question: Is any disk over 90%% full?
`, ops)})
	r.waitFor("the check's failure", func() bool { return botChannelPosts(chat, ops, "Scheduled check `disk` **failed**") == 1 })
	r.waitRecorded("schedule:disk", `"detail":"failed"`)
	r.stop()
	verdict.Store("OK\nplenty of space")
	r.start()
	r.waitFor("the check's recovery", func() bool { return botChannelPosts(chat, ops, "Scheduled check `disk` **recovered**") == 1 })
	if n := botChannelPosts(chat, ops, "**failed**"); n != 1 {
		t.Errorf("%d failure posts, want 1 (the same failure repeating is said once)", n)
	}
	r.stop()
}

// TestScheduleCouldNotRun: a check that cannot run is said as such, not as
// a failure: a question whose command the gate refuses (a scheduled run has
// no approver) and a skill command with a bad argument.
func TestScheduleCouldNotRun(t *testing.T) {
	m := fakemodel.NewFunc(func(req fakemodel.Request) fakemodel.Reply {
		if last := req.Messages[len(req.Messages)-1]; last.Role == "tool" {
			return fakemodel.Reply{Content: "FAIL\nthe check was refused"}
		}
		return run("systemctl restart nginx")
	})
	t.Cleanup(m.Close)
	chat := newMMChat(t)
	ops := chat.Ops()
	skillsDir := installSkills(t)
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`skills_dirs: [%s]
schedules:
  - name: probe
    cron: "@every 1s"
    channel: %s
    question: Can nginx be restarted?
  - name: bad-section
    cron: "@every 1s"
    channel: %s
    command: "!health swap"
`, skillsDir, ops, ops)})
	for _, name := range []string{"probe", "bad-section"} {
		r.waitFor(name+"'s post", func() bool {
			return botChannelPosts(chat, ops, "Scheduled check `"+name+"` **could not run**") == 1
		})
		r.waitRecorded("schedule:"+name, `"detail":"not_run"`)
	}
	if n := botChannelPosts(chat, ops, "**failed**"); n != 0 {
		t.Errorf("%d checks said failed; they could not run", n)
	}
	r.stop()
}

// TestExampleScheduleRunsWithWhatShips: the example config's schedule
// (deploy/thinbot.example.yaml: `!health disk`, sys-doctor's command) runs
// with the shipped skills installed (issue 33: its `!disk /` was no skill
// command of any pack, so a daemon with it would not start). The daemon
// starts with it and records each run's result; as the unprivileged bot
// user of a package, the command's script is read-only, so the gate passes
// it without an approval (the tests run as root, for whom every file is
// writable: here the run itself is refused, as it should be).
func TestExampleScheduleRunsWithWhatShips(t *testing.T) {
	example, err := os.ReadFile("../deploy/thinbot.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(example), `#    command: "!health disk"`) {
		t.Fatalf("the example schedule is no longer !health disk: update this test")
	}
	m := fakemodel.Start(t)
	chat := newMMChat(t)
	skillsDir := installSkills(t)
	// What the bot user of a package sees: the command, its script
	// read-only.
	for d := skillsDir; d != "/"; d = filepath.Dir(d) {
		if strings.HasPrefix(d, os.TempDir()+"/") {
			os.Chmod(d, 0o755) // t.TempDir's folders are 0700
		}
	}
	bin := filepath.Join(filepath.Dir(skillsDir), "thinbot") // thinbotBin's folder is 0700
	data, err := os.ReadFile(thinbotBin)
	if err != nil || os.WriteFile(bin, data, 0o755) != nil {
		t.Fatalf("copy the binary: %v", err)
	}
	cmd := exec.Command(bin, "skills", "--dir", skillsDir)
	cmd.Env = baseEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "read-only: "+filepath.Join(skillsDir, "sys-doctor/scripts/doctor.sh")) ||
		!strings.Contains(string(out), "command: !health [load|mem|disk|inodes|units|procs|ports|oom]") {
		t.Fatalf("the shipped skills as an unprivileged bot user sees them (%v):\n%s", err, out)
	}
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`skills_dirs: [%s]
schedules:
  - name: disk
    cron: "@every 1s"
    channel: %s
    command: "!health disk"
`, skillsDir, chat.Ops())})
	r.waitFor("the example schedule's result in the chain", func() bool { return lastScheduleOutcome(t, r, "schedule:disk") != "" })
	r.stop()
}

// lastScheduleOutcome is the last schedule_result note's detail in the
// session, from the daemon's journal ("" without one).
func lastScheduleOutcome(t *testing.T, r *rig, session string) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(r.stateDir, "audit.jsonl"))
	out := ""
	for _, l := range strings.Split(string(b), "\n") {
		var ev struct {
			Session string `json:"session"`
			Type    string `json:"type"`
			Payload struct {
				Kind   string `json:"kind"`
				Detail string `json:"detail"`
			} `json:"payload"`
		}
		if json.Unmarshal([]byte(l), &ev) == nil && ev.Session == session && ev.Type == "note" && ev.Payload.Kind == "schedule_result" {
			out = ev.Payload.Detail
		}
	}
	return out
}

// installSkills installs the shipped skill packs as the packages do
// (thinbot skills install) and returns their folder.
func installSkills(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "skills")
	if res := thinbot(t, t.TempDir(), nil, "skills", "install", "--bot-user", "nobody", dir); res.code != 0 {
		t.Fatalf("skills install: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	return dir
}

// TestScheduleBudgetCountedAndEnforced: a scheduled question runs under its
// channel's day budget and its tokens count in thinbot_tokens_total; once
// the day is spent it does not run and the channel hears that it could not
// (issue 33: a scheduled question ran after the day was spent, uncounted).
func TestScheduleBudgetCountedAndEnforced(t *testing.T) {
	used := &agentcore.Usage{PromptTokens: 600, CompletionTokens: 100}
	m := fakemodel.NewFunc(func(fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Content: "OK\nall disks below 50%", Usage: used}
	})
	t.Cleanup(m.Close)
	chat := newMMChat(t)
	sb := chat.Sandbox()
	// Extra continues the rig's last channel, the sandbox's.
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`    tokens: {per_day: 1000}
schedules:
  - name: disk
    cron: "@every 1s"
    channel: %s
    question: Is any disk over 90%% full?
`, sb)})
	r.waitFor("the check refused for the spent day", func() bool {
		return botChannelPosts(chat, sb, "Scheduled check `disk` **could not run**") == 1
	})
	if n := botChannelPosts(chat, sb, "has used its budget of 1000 model tokens for today"); n != 1 {
		t.Errorf("%d posts say the day is spent, want 1", n)
	}
	// Two runs of 700 tokens (the second starts at 700 < 1000), then none.
	if n := len(m.Requests()); n != 2 {
		t.Errorf("%d model calls, want 2: the schedule ran after its channel's day was spent", n)
	}
	if got := r.metric(fmt.Sprintf(`thinbot_tokens_total{channel=%q,kind="prompt"}`, sb)); got != "1200" {
		t.Errorf("thinbot_tokens_total of the schedule's channel: %q, want 1200", got)
	}
	r.stop()
}
