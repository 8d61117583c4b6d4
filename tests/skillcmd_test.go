package tests

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// scSkillCommandModelDown: with the model unreachable, a skill command runs
// from the thread (!name and /run name) through the gate, the two-person
// approval and the chain; /help lists the commands; a pinned skill whose
// files changed is hidden, and /skills says why.
func scSkillCommandModelDown(t *testing.T, newChat func(*testing.T) chatSide) {
	chat := newChat(t)
	skillsDir := t.TempDir()
	writeSkillFile(t, filepath.Join(skillsDir, "ops"), "---\nname: ops\ndescription: Ops routines.\nmetadata:\n  thinbot:\n    commands:\n"+
		"      - {name: greet, description: Say hello to a host, command: 'echo hello-from {host}', args: [{name: host, type: host}]}\n"+
		"      - {name: mark, description: Leave a mark file, command: 'touch {file}', args: [{name: file, type: enum, values: [marked.txt]}]}\n"+
		"---\nRoutines.\n")
	writeSkillFile(t, filepath.Join(skillsDir, "notes"), "---\nname: notes\ndescription: Team notes.\n---\nBody.\n")
	lock := filepath.Join(t.TempDir(), "skills.lock")
	if res := thinbot(t, t.TempDir(), nil, "skills", "lock", "--dir", skillsDir, "--out", lock); res.code != 0 {
		t.Fatalf("skills lock: exit %d: %s", res.code, res.stderr)
	}
	writeSkillFile(t, filepath.Join(skillsDir, "notes"), "---\nname: notes\ndescription: Team notes.\n---\nBody, edited after review.\n")

	r := newRig(t, chat, "http://"+freeAddr(t)+"/v1", rigOpts{Extra: fmt.Sprintf("skills_dirs: [%s]\nskills_lock: %s\n", skillsDir, lock)})
	ops := chat.Ops()

	root := chat.Mention("alice", ops, "", "!greet web-01")
	r.waitPost(ops, root, "hello-from web-01")
	chat.Say("alice", ops, root, "!greet web-01;reboot")
	r.waitPost(ops, root, "is not a host name or IP address")

	chat.Say("alice", ops, root, "/run mark marked.txt")
	req := r.waitButtons(ops, root)
	if !strings.Contains(req.Text, "touch marked.txt") {
		t.Errorf("the request does not show the command:\n%s", req.Text)
	}
	r.waitRecorded(r.session(ops, root), `"approval_posted"`)
	chat.Click(t, ops, root, req.ID, "approve", "bob")
	r.waitFor("the approved skill command to run", func() bool { return fileExists(filepath.Join(r.ws, "marked.txt")) })
	r.waitPost(ops, root, "`touch marked.txt`")

	chat.Say("alice", ops, root, "/help")
	r.waitPost(ops, root, "!greet host:host")
	chat.Say("alice", ops, root, "/skills")
	r.waitPost(ops, root, "files differ from skills.lock: changed: SKILL.md")
	if n := r.countPosts(ops, root, "could not reach the model"); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
	r.stop()

	tr := trail(chainEvents(t, r.stateDir), r.session(ops, root))
	for i, s := range tr {
		if strings.HasPrefix(s, "approval_decision:true:") && strings.Contains(s, chat.UserID("bob")) {
			tr[i] = "approval_decision:true"
		}
	}
	want := []string{"run_started", "gate_decision:pass", "tool_result", "run_finished:answered",
		"run_started", "run_finished:answered",
		"run_started", "gate_decision:confirm", "approval_requested", "approval_decision:true", "tool_result", "run_finished:answered"}
	if !inOrder(tr, want) || slices.Contains(tr, "run_finished:error") {
		t.Errorf("session trail = %v, want %v in order", tr, want)
	}
	var filtered bool
	for _, ev := range chainEvents(t, r.stateDir) {
		filtered = filtered || ev.Type == "skill_filtered" && strings.Contains(string(ev.Payload), "files differ from skills.lock")
	}
	if !filtered {
		t.Error("the hidden skill is not recorded as skill_filtered")
	}
}
