package gate

import "testing"

// holeCases are the classes of hole found by the red team in issue 9, with
// the exact examples and their neighbours: each case names the verdict it
// must get. Pass cases are the legitimate read-only use the fixes keep.
var holeCases = []gateCase{
	// GNU sed: a label ends at whitespace or `;`, and what follows is the
	// next command.
	{cmd: "sed -n ':a e id' f", want: Confirm, rule: "sed.script"},
	{cmd: "sed -n ':a w out' f", want: Confirm},
	{cmd: "sed ':a w /tmp/x' f", want: Confirm},
	{cmd: "sed -n 'b e id' f", want: Confirm},
	{cmd: "sed -n 'bx w out;:x' f", want: Confirm},
	{cmd: "sed -n 't e id' f", want: Confirm},
	{cmd: "sed -n 'T w out' f", want: Confirm},
	{cmd: "sed -n ':a\te id' f", want: Confirm},
	{cmd: "sed -n ':a r /etc/passwd' f", want: Confirm},
	{cmd: "sed ':a;:b e id' f", want: Confirm},
	{cmd: "sed -n ':a}' f", want: Confirm},
	{cmd: "sed -n ':' f", want: Confirm},
	{cmd: "sed ':a;s/x/y/;ta' f", want: Pass},
	{cmd: "sed -n ':top;N;$!btop;p' f", want: Pass},
	{cmd: "sed -n '/x/{:a;N;ba}' f", want: Pass},
	{cmd: "sed -n 'b;p' f", want: Pass},
	{cmd: "sed -e ':a' -e 'N' -e '$!ba' -e 's/\\n/ /g' f", want: Pass},
	// Bracket expressions hide the delimiter from a naive reader.
	{cmd: "sed 's/[/]/;s|a|/e;s|x|y|' f", want: Confirm},
	{cmd: "sed 's/[/]/x/e' f", want: Confirm},
	{cmd: "sed 's/[/]/x/w out' f", want: Confirm},
	{cmd: "sed 's/[^/]/;e id;/' f", want: Confirm},
	{cmd: "sed 's/[]/]/x/' f", want: Confirm},
	{cmd: "sed '/[/]/e id' f", want: Confirm},
	{cmd: "sed '\\,[,],w out' f", want: Confirm},
	{cmd: "sed 's/[[:alpha:]/]/x/' f", want: Confirm},
	{cmd: "sed 's/[[:/:]]/x/' f", want: Confirm},
	{cmd: "sed 's/[\\]/;e id;/' f", want: Confirm},
	{cmd: "sed 's/[a\n]/x/' f", want: Confirm},
	{cmd: "sed 's/[0-9][0-9]*/N/g' f", want: Pass},
	{cmd: "sed -E 's/[[:space:]]+$//' f", want: Pass},
	{cmd: "sed 's/[^a-z]/_/g' f", want: Pass},
	{cmd: "sed 's/[]a]/x/' f", want: Pass},
	{cmd: "sed -n '/^[#;]/!p' f", want: Pass},
	{cmd: "sed 's|[/]|x|' f", want: Pass},
	// Commands and flags that write, read or run.
	{cmd: "sed 'W out' f", want: Confirm},
	{cmd: "sed '$W /tmp/x' f", want: Confirm},
	{cmd: "sed 'R /etc/shadow' f", want: Confirm},
	{cmd: "sed '1r /etc/hostname' f", want: Confirm},
	{cmd: "sed 'e' f", want: Confirm},
	{cmd: "sed '1!e id' f", want: Confirm},
	{cmd: "sed 's/x/id/e' f", want: Confirm},
	{cmd: "sed 's/x/y/gpw out' f", want: Confirm},
	{cmd: "sed 's/x/y/3e' f", want: Confirm},
	{cmd: "sed -n 'p;w .thinbot/events.db' f", want: Confirm},
	{cmd: "sed -e 's/x/\\' -e 'e/' f", want: Confirm},
	{cmd: "sed -e 's/x/y/' -e 'w out' f", want: Confirm},
	{cmd: "sed 'p # w out' f", want: Confirm},
	{cmd: "sed 'v' f", want: Confirm},
	{cmd: "sed 's/x/y/;p junk' f", want: Confirm},
	// Flags: in place in every spelling, script files.
	{cmd: "sed -i 's/a/b/' f", want: Confirm},
	{cmd: "sed -i'' 's/a/b/' f", want: Confirm},
	{cmd: "sed -Ei 's/a/b/' f", want: Confirm},
	{cmd: "sed -si 's/a/b/' f", want: Confirm},
	{cmd: "sed -n -i p f", want: Confirm},
	{cmd: "sed --in-place=.bak 's/a/b/' f", want: Confirm},
	{cmd: "sed --in-pl 's/a/b/' f", want: Confirm},
	{cmd: "sed --in 's/a/b/' f", want: Confirm},
	{cmd: "sed --i 's/a/b/' f", want: Confirm},
	{cmd: "sed --follow-symlinks -i 's/a/b/' f", want: Confirm},
	{cmd: "sed --follow-symlinks 's/a/b/' f", want: Confirm},
	{cmd: "sed --fi=x.sed f", want: Confirm},
	{cmd: "sed --expr='w out' f", want: Confirm},
	{cmd: "sed -f /dev/stdin f", want: Confirm},
	{cmd: "sed -s -n '$p' a b", want: Pass},
	{cmd: "sed --sandbox -n 1p f", want: Pass},
	{cmd: "sed --debug -n 1p f", want: Pass},
	{cmd: "sed -n 1,20p file", want: Pass},
	{cmd: "sed 's/a/b/' file", want: Pass},
	{cmd: "sed -n '/ERROR/{=;p}' /var/log/syslog", want: Pass},
	{cmd: "sed -n 'l 80' f", want: Pass},
	{cmd: "sed '5q' f", want: Pass},
	{cmd: "sed 's;a;b;g' f", want: Pass},
	{cmd: "sed -z 's/\\n/,/g' f", want: Pass},
	{cmd: "sed -n '0,/re/p' f", want: Pass},
	{cmd: "sed -n '2,+3p' f", want: Pass},
	{cmd: "sed -n '2,~4p' f", want: Pass},
	{cmd: "sed -n '2,xp' f", want: Confirm},
}

func TestClassifyHoles(t *testing.T) {
	p := testPolicy(t)
	counts := map[Verdict]int{}
	for _, tc := range holeCases {
		counts[tc.want]++
		got := p.ClassifyIn(tc.dir, tc.cmd)
		if got.Verdict != tc.want {
			t.Errorf("ClassifyIn(%q, %q) = %v (%s: %s), want %v", tc.dir, tc.cmd, got.Verdict, got.Rule, got.Reason, tc.want)
			continue
		}
		if tc.rule != "" && got.Rule != tc.rule {
			t.Errorf("ClassifyIn(%q, %q) rule = %s (%s), want %s", tc.dir, tc.cmd, got.Rule, got.Reason, tc.rule)
		}
		if got.Reason == "" || got.Rule == "" {
			t.Errorf("ClassifyIn(%q) = %+v: empty reason or rule", tc.cmd, got)
		}
	}
	t.Logf("%d cases: %d deny, %d confirm, %d pass", len(holeCases), counts[Deny], counts[Confirm], counts[Pass])
}
