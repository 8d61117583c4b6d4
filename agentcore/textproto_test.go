package agentcore

import (
	"strings"
	"testing"
)

func TestParseTextReply(t *testing.T) {
	tests := []struct {
		name, in string
		want     TextAction
	}{
		{"plain answer", "The disk is fine.", TextAction{}},
		{"bash block", "Check disks.\n```bash\ndf -h\n```\n", TextAction{Command: "df -h", Blocks: 1}},
		{"untagged block is quoted text", "```\nuptime\n```", TextAction{}},
		{"quoted output then command", "Output was:\n```\n/dev/vda 15% /\n```\n```bash\ndf -i\n```", TextAction{Command: "df -i", Blocks: 1}},
		{"console block is not run", "```console\n$ rm -rf /tmp/x\n```", TextAction{}},
		{"sh tilde fence", "~~~sh\nls -la\n~~~", TextAction{Command: "ls -la", Blocks: 1}},
		{"two blocks, first runs", "```bash\na\n```\nthen\n```bash\nb\n```", TextAction{Command: "a", Blocks: 2}},
		{"python block ignored", "```python\nprint(1)\n```", TextAction{}},
		{"multi-line command", "```bash\nfor f in *; do\n  wc -l \"$f\"\ndone\n```", TextAction{Command: "for f in *; do\n  wc -l \"$f\"\ndone", Blocks: 1}},
		{"agent-done line", "All done, 3 disks checked.\nagent-done", TextAction{Done: true}},
		{"agent-done in block", "```bash\nagent-done\n```", TextAction{Done: true}},
		{"agent-done in backticks", "Finished. `agent-done`", TextAction{}},
		{"agent-done alone in backticks", "Finished.\n`agent-done`", TextAction{Done: true}},
		{"unclosed block runs", "```bash\nuptime", TextAction{Command: "uptime", Blocks: 1}},
		{"CRLF", "```bash\r\nfree -m\r\n```\r\n", TextAction{Command: "free -m", Blocks: 1}},
		{"longer fence", "````bash\necho '```'\n````", TextAction{Command: "echo '```'", Blocks: 1}},
		{"fence inside untagged block", "````\n```bash\nrm x\n```\n````", TextAction{}},
		{"empty block", "```bash\n```", TextAction{}},
		{"inline code is not a block", "Run `df -h` yourself.", TextAction{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseTextReply(tt.in); got != tt.want {
				t.Errorf("ParseTextReply(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzParseTextReply(f *testing.F) {
	for _, s := range []string{"```bash\ndf -h\n```", "agent-done", "~~~sh\nx\n~~~", "````\n```\n````", "```bash\nuptime"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a := ParseTextReply(s)
		if a.Command != "" && !strings.Contains(strings.ReplaceAll(s, "\r\n", "\n"), a.Command) {
			t.Fatalf("command %q is not part of the reply %q", a.Command, s)
		}
		if (a.Command == "") != (a.Blocks == 0) {
			t.Fatalf("Command %q with Blocks %d", a.Command, a.Blocks)
		}
	})
}
