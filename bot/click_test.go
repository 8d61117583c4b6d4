package bot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClickOnAnotherPostIsRefused: a click that carries an open request's
// id (the button value) but comes from another post (a forged or replayed
// callback, a copied button) decides nothing; the click on the request's
// own post does.
func TestClickOnAnotherPostIsRefused(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "touch clicked.txt"}, Channel{Approvers: []string{"U2"}}, Config{})
	r.say(alice, th1, "m1", "make the file", true)
	req := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	res := r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: req.id + "-other", ActionID: ActionApprove, Value: req.post.Value, User: bob})
	if !strings.Contains(res.Ephemeral, "no longer open") || res.Update != nil {
		t.Fatalf("click on another post = %+v", res)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "clicked.txt")); err == nil {
		t.Fatal("a click on another post ran the command")
	}
	res = r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: req.id, ActionID: ActionApprove, Value: req.post.Value, User: bob})
	if res.Update == nil || !strings.Contains(res.Update.Text, "Approved") {
		t.Fatalf("click on the request's post = %+v", res)
	}
	r.ad.waitPost(t, th1, contains("finished: exit code: 0"))
}
