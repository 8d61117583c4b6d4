package gate

import "testing"

// containCases are the classes of issue #19: commands the gate passed that
// it must not (a changing working directory, endless inputs and outputs,
// other users' homes, kubectl's case-insensitive resource names), writes
// to the kernel knobs that make the kernel run a program, and the
// everyday diagnostics that now pass, each with neighbours that must not.
var containCases = []gateCase{
	// The working directory: cd and its forms move where relative paths
	// are read.
	{cmd: "cd -- /etc && cat shadow", want: Confirm, rule: "secret.path", dir: "/srv/app"},
	{cmd: "cd -- /run/secrets && cat db", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -- /root/.aws && cat credentials", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -P /etc && cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -L /etc && cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -Pe -- /etc && cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -P /srv/app/link/.. && cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd /etc; cd /tmp; cat ~-/shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cat ~-/shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd /etc; cat ~+/shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd /etc; cd /tmp; cd -; cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -; cat credentials", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -- -; cat credentials", want: Confirm, dir: "/srv/app"},
	{cmd: "pushd /etc && cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "pushd -n /etc; popd; cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "pushd /etc; pushd /tmp; popd; cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "pushd /etc >/dev/null; pushd +1; cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "CDPATH=/etc cd . && cat shadow", want: Confirm, dir: "/srv/app"},
	{cmd: "cd -@ /etc", want: Confirm, dir: "/srv/app"},
	{cmd: "cd /etc /tmp", want: Confirm, dir: "/srv/app"},
	{cmd: "cd ~root/.aws && cat credentials", want: Confirm, dir: "/srv/app"},
	{cmd: "cd ~root && cat .aws/credentials", want: Confirm, dir: "/srv/app"},
	{cmd: "cd ~alice && cat notes", want: Confirm, dir: "/srv/app"},
	{cmd: "cd ~alice/.aws && cat credentials", want: Confirm, dir: "/srv/app"},
	{cmd: "cat ~alice/notes", want: Confirm, dir: "/srv/app"},
	{cmd: "cat ~sys/zero", want: Confirm, dir: "/srv/app"},
	{cmd: "cat ~backup/shadow.bak", want: Confirm, dir: "/srv/app"},
	{cmd: "cat ~root/notes", want: Confirm, dir: "/srv/app"},
	{cmd: "cd sub && cat credentials", want: Confirm},           // unknown start: sub could be ~/.aws
	{cmd: "cd && cat credentials", want: Pass, dir: "/srv/app"}, // home is /home/bot
	{cmd: "cd ~/.aws && cat credentials", want: Confirm, dir: "/srv"},
	{cmd: "cd /var/log && tail -n 5 syslog", want: Pass, dir: "/srv/app"},
	{cmd: "cd -- /var/log && tail -n 5 syslog", want: Pass, dir: "/srv/app"},
	{cmd: "cd -P /var/log && ls", want: Pass, dir: "/srv/app"},
	{cmd: "cd /var/log; cd /tmp; cd -; ls", want: Pass, dir: "/srv/app"},
	{cmd: "pushd /var/log && cat syslog && popd", want: Pass, dir: "/srv/app"},
	{cmd: "dirs -v", want: Pass},
	{cmd: "cd ~alice && ls", want: Pass, dir: "/srv/app"},
	{cmd: "cd ~+ && cat README", want: Pass, dir: "/srv/app"},
	// Deny follows the same forms.
	{cmd: "cd -- / && rm -rf *", want: Deny, dir: "/srv/app"},
	{cmd: "cd -P / && rm -rf *", want: Deny, dir: "/srv/app"},
	{cmd: "pushd / && rm -rf *", want: Deny, dir: "/srv/app"},
	{cmd: "cd ~root && rm -rf *", want: Deny, dir: "/srv/app"},
}

func TestContain(t *testing.T) {
	p := testPolicy(t)
	counts := map[Verdict]int{}
	for _, tc := range containCases {
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
	t.Logf("%d cases: %d deny, %d confirm, %d pass", len(containCases), counts[Deny], counts[Confirm], counts[Pass])
}
