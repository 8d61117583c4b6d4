package bot

import (
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
)

func TestSkillsText(t *testing.T) {
	tests := []struct {
		name string
		list []agentcore.SkillInfo
		want string
	}{
		{"none", nil, "No skills are loaded.\n"},
		{"all kinds", []agentcore.SkillInfo{
			{Name: "disk", State: "loaded", Description: "Find  what\nfills a disk"},
			{Name: "net", State: "hidden", Dir: "/s/net", Why: "needs nmap"},
			{Name: "disk", State: "shadowed", Dir: "/t/disk", Why: "/s/disk"},
		}, "- **disk**: Find what fills a disk\n- hidden `net` (/s/net): needs nmap\n- shadowed `disk` in /t/disk by /s/disk\n"},
		{"only hidden", []agentcore.SkillInfo{{Name: "net", State: "hidden", Dir: "/s/net", Why: "needs nmap"}},
			"No skills are loaded.\n- hidden `net` (/s/net): needs nmap\n"},
		{"long description", []agentcore.SkillInfo{{Name: "x", State: "loaded", Description: strings.Repeat("a", 100)}},
			"- **x**: " + strings.Repeat("a", 77) + "...\n"},
	}
	for _, tt := range tests {
		if got := skillsText(tt.list); got != tt.want {
			t.Errorf("%s: skillsText =\n%q\nwant\n%q", tt.name, got, tt.want)
		}
	}
}

func TestAuditText(t *testing.T) {
	if got := auditText(nil); got != "No commands in this session yet." {
		t.Errorf("empty: %q", got)
	}
	got := auditText([]agentcore.AuditRow{
		{Seq: 7, What: "df -h", Verdict: "pass", Result: "exit 0"},
		{Seq: 9, What: "systemctl restart `nginx`", Verdict: "confirm", Approval: "approved by user:bob", Result: "exit 1"},
		{Seq: 12, What: "read_file /etc/shadow", Verdict: "deny"},
	})
	want := "Last 3 command(s) in this session, as the chain recorded them:\n" +
		"- #7 `df -h` — pass, exit 0\n" +
		"- #9 `systemctl restart 'nginx'` — confirm, approved by user:bob, exit 1\n" +
		"- #12 `read_file /etc/shadow` — deny\n" +
		"Operators verify and export the full chain with `thinbot audit verify --config FILE` / `thinbot audit export --config FILE --session ...`."
	if got != want {
		t.Errorf("auditText =\n%s\nwant\n%s", got, want)
	}
}
