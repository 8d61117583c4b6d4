package bot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
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

// TestUnrecordedRequestCannotBeDecided: when the request's post cannot be
// recorded (a restart could not close it), the card says so, no click can
// decide it, and nothing runs.
func TestUnrecordedRequestCannotBeDecided(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "touch x"}, Channel{Approvers: []string{"U2"}}, Config{})
	r.ad.onPost = func(p Post) {
		if len(p.Buttons) == 2 {
			r.db.Close() // the card is posted; its record fails
		}
	}
	r.say(alice, th1, "m1", "go", true)
	card := r.ad.waitPost(t, th1, contains("**Cancelled** — the request could not be recorded"))
	res := r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: card.id, ActionID: ActionApprove, Value: card.post.Value, User: bob})
	if !strings.Contains(res.Ephemeral, "no longer open") || res.Update != nil {
		t.Errorf("click on the unrecorded request = %+v", res)
	}
	r.stop()
	if _, err := os.Stat(filepath.Join(r.dir, "x")); err == nil {
		t.Error("the command ran")
	}
}

// TestClickShowsADecisionOnlyOnceRecorded: the click's answer (the card's
// new text) waits for the decision's commit; a decision the chain could not
// take is shown as not recorded, and nothing runs.
func TestClickShowsADecisionOnlyOnceRecorded(t *testing.T) {
	r := newRig(t, cmdModel{cmd: "touch x"}, Channel{Approvers: []string{"U2"}}, Config{})
	r.say(alice, th1, "m1", "go", true)
	card := r.ad.waitPost(t, th1, func(p Post) bool { return len(p.Buttons) == 2 })
	// Wait until the run has recorded the post (it then awaits clicks),
	// then take the store away so that the decision cannot be recorded.
	for deadline := time.Now().Add(20 * time.Second); !posted(t, r); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request's post was not recorded")
		}
	}
	r.db.Close()
	res := r.b.HandleClick(r.ctx, Click{Thread: th1, PostID: card.id, ActionID: ActionApprove, Value: card.post.Value, User: bob})
	if res.Update == nil || !strings.Contains(res.Update.Text, "**Not recorded**") {
		t.Errorf("click whose decision was not recorded = %+v", res)
	}
	r.stop()
	if _, err := os.Stat(filepath.Join(r.dir, "x")); err == nil {
		t.Error("the command ran")
	}
}

// posted reports whether th1's session holds an approval_posted note.
func posted(t *testing.T, r *rig) bool {
	t.Helper()
	for e, err := range r.db.Events(th1.Key(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		var p agentcore.NotePayload
		if e.Type == agentcore.EvNote && json.Unmarshal(e.Payload, &p) == nil && p.Kind == agentcore.NoteApprovalPosted {
			return true
		}
	}
	return false
}
