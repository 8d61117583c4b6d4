package bot

import (
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/agentcore"
)

// TestApprovalTextNamesTargets: a remote command's approval shows the
// command and every target (count and names), and so does the decided text.
func TestApprovalTextNamesTargets(t *testing.T) {
	targets := []string{"web-01", "web-02", "web-03", "web-05", "db-1"}
	req := &request{ap: agentcore.Approval{Command: "systemctl restart nginx", Targets: targets, Rule: "write",
		RequestID: "r7", SHA256: agentcore.BindingSHA("systemctl restart nginx", targets)},
		requester: User{ID: "u1", Name: "al"}, expires: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	got := approvalText(req, nil)
	for _, want := range []string{"```\nsystemctl restart nginx\n```", "**On 5 hosts: db-1, web-[01-03,05]** (with their privileged login)", "sha256 `" + req.ap.SHA256[:12]} {
		if !strings.Contains(got, want) {
			t.Errorf("approval text lacks %q:\n%s", want, got)
		}
	}
	req.ap.Logins = []string{"thinbot-rw"}
	if got := approvalText(req, nil); !strings.Contains(got, "**On 5 hosts: db-1, web-[01-03,05]** (as thinbot-rw, the privileged login)") {
		t.Errorf("approval text does not name the login:\n%s", got)
	}
	if d := decidedText(req, "**Approved** by @bob"); !strings.Contains(d, "On 5 hosts: db-1, web-[01-03,05]") {
		t.Errorf("decided text:\n%s", d)
	}
	req.ap.Targets = nil
	if got := approvalText(req, nil); strings.Contains(got, "hosts") {
		t.Errorf("a local command's approval names hosts:\n%s", got)
	}
}
