package agentcore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/gate"
)

// TestResumeCarriedApproval: a run whose process stopped while it waited
// for an approval (a cluster's old leader; here its Await never returns
// until the end) is carried over by RecoverLeaderLost, not expired, and
// another Agent over the same chain goes on with it: it awaits the same
// post, records the decision, runs the command only if approved (once),
// tells the model either way, and ends the run with the model's answer.
func TestResumeCarriedApproval(t *testing.T) {
	for _, approve := range []bool{false, true} {
		t.Run(map[bool]string{false: "denied", true: "approved"}[approve], func(t *testing.T) {
			f := newFixture(t, Config{}, runCmd("touch carried-file"), say("the old leader's late reply"))
			awaiting, gone := make(chan struct{}), make(chan struct{})
			old := &postingApprover{where: "post-1", await: func(ctx context.Context, a Approval) (ApprovalDecision, error) {
				close(awaiting)
				<-gone
				return ApprovalDecision{}, errors.New("the old leader is gone")
			}}
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.a.Run(context.Background(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: old, Actor: "user:alice"})
			}()
			<-awaiting
			defer func() { close(gone); <-done }()

			u, err := RecoverLeaderLost(f.db)
			if err != nil {
				t.Fatal(err)
			}
			if len(u.Carried) != 1 || len(u.Approvals) != 0 || len(u.Runs) != 0 {
				t.Fatalf("RecoverLeaderLost = %+v: want the request carried, nothing closed", u)
			}
			c := u.Carried[0]
			if c.PostID != "post-1" || c.Approval.Command != "touch carried-file" || c.Approval.Requester != "user:alice" {
				t.Errorf("carried = %+v", c)
			}
			m2 := &scriptedModel{t: t, replies: []func(Request) (Response, error){say("all done")}}
			a2, err := New(Config{Store: f.db, Model: m2, Policy: gate.DefaultPolicy(), Exec: ExecConfig{Environ: []string{"PATH=" + os.Getenv("PATH")}}})
			if err != nil {
				t.Fatal(err)
			}
			now := &postingApprover{await: func(ctx context.Context, a Approval) (ApprovalDecision, error) {
				return ApprovalDecision{Approved: approve, By: "user:bob"}, nil
			}}
			res, err := a2.Resume(t.Context(), Turn{Session: "s", Dir: f.dir, Approver: now, Actor: "user:alice"}, c)
			if err != nil || res.Status != StatusAnswered || res.Answer != "all done" {
				t.Fatalf("Resume = %+v, %v", res, err)
			}
			if !slices.Equal(now.calls, []string{"await post-1", "decided post-1"}) || now.decErr != nil {
				t.Errorf("approver calls = %v (%v)", now.calls, now.decErr)
			}
			_, statErr := os.Stat(filepath.Join(f.dir, "carried-file"))
			if ran := statErr == nil; ran != approve {
				t.Errorf("approved %v, the command ran: %v", approve, ran)
			}
			told := lastToolContent(m2.reqs[0])
			if !approve && !strings.Contains(told, "refused by user:bob") {
				t.Errorf("the model was told %q", told)
			}
			got := types(f.events(t, "s"))
			i := indexOf(got, EvApprovalAsked)
			want := []string{EvApprovalAsked, EvNote, EvApprovalDecided, EvToolResult, EvAssistantMessage, EvRunFinished}
			if i < 0 || !slices.Equal(got[i:], want) {
				t.Errorf("events = %v, want them to end %v", got, want)
			}
		})
	}
}
