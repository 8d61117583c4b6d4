package tests

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/tests/fakemodel"
)

// A logrotate-style rotation of audit.jsonl under a running daemon (rename,
// then create an empty file) is noticed at the next commit: /readyz goes
// not ready naming the fix, the thread is told its message was not
// handled, `audit verify --config` never says "ok" for the new empty file,
// and once the journal is back nothing is lost: the next message is
// answered and the whole chain verifies.
func TestServeJournalRotation(t *testing.T) {
	t.Parallel()
	chat := newMMChat(t)
	m := fakemodel.Start(t, fakemodel.Reply{Content: "first answer"}, fakemodel.Reply{Content: "after the rotation"})
	r := newRig(t, chat, m.URL, rigOpts{})
	ops := chat.Ops()
	root := chat.Mention("alice", ops, "", "before")
	r.waitPost(ops, root, "first answer")

	journal := filepath.Join(r.stateDir, "audit.jsonl")
	if err := os.Rename(journal, journal+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	chat.Say("alice", ops, root, "during")
	r.waitPost(ops, root, "Something went wrong")
	if code, body := r.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not a log to rotate") {
		t.Errorf("/readyz with the journal rotated away = %d %q, want 503 naming the fix", code, body)
	}
	v := thinbot(t, r.dir, nil, "audit", "verify", "--config", r.cfgPath)
	if v.code != 2 || strings.Contains(v.stdout, ": ok,") && !strings.Contains(v.stdout, "NOT the running thinbot's journal") {
		t.Errorf("audit verify --config beside the rotated journal: exit %d, want 2 and no bare ok:\n%s%s", v.code, v.stdout, v.stderr)
	}

	// Put back, as the error says: the daemon commits again, and the
	// message sent while the file was away is not lost from the thread.
	if err := os.Rename(journal+".1", journal); err != nil {
		t.Fatal(err)
	}
	r.waitFor("ready again", func() bool { code, _ := r.get("/readyz"); return code == http.StatusOK })
	chat.Say("alice", ops, root, "after")
	r.waitPost(ops, root, "after the rotation")
	r.stop()
	if v := thinbot(t, r.dir, nil, "audit", "verify", "--config", r.cfgPath); v.code != 0 {
		t.Errorf("audit verify --config after the journal came back: exit %d\n%s%s", v.code, v.stdout, v.stderr)
	}
}
