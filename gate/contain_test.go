package gate

import (
	"strings"
	"testing"
)

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
	{cmd: "builtin cd / && rm -rf *", want: Deny, dir: "/srv/app"},
	{cmd: "command cd -- / && rm -rf *", want: Deny, dir: "/srv/app"},
	{cmd: "builtin cd /etc && cat shadow", want: Confirm, dir: "/srv/app"},
	// Endless inputs: devices that never end, unless the read is bounded.
	{cmd: "head -n -1 /dev/zero", want: Confirm, rule: "input.endless"},
	{cmd: "head -n 1 /dev/zero", want: Confirm},
	{cmd: "head -c -1 /dev/zero", want: Confirm},
	{cmd: "head -5 /dev/zero", want: Confirm},
	{cmd: "tail -n 1 /dev/zero", want: Confirm},
	{cmd: "uniq /dev/zero", want: Confirm},
	{cmd: "sort /dev/zero", want: Confirm},
	{cmd: "sort -S 1M /dev/urandom", want: Confirm},
	{cmd: "sort -S 1M f", want: Confirm, rule: "flag.unsafe"},
	{cmd: "sort --parallel=64 f", want: Confirm},
	{cmd: "sort < /dev/zero", want: Confirm},
	{cmd: "cat /dev/urandom", want: Confirm},
	{cmd: "wc -c /dev/random", want: Confirm},
	{cmd: "tr -d x < /dev/zero", want: Confirm},
	{cmd: "cat /dev/tty", want: Confirm},
	{cmd: "cat /proc/kmsg", want: Confirm},
	{cmd: "wc -c /proc/self/pagemap", want: Confirm},
	{cmd: "tail -c 8 /proc/kpageflags", want: Confirm},
	{cmd: "cat /sys/kernel/tracing/trace_pipe", want: Confirm},
	{cmd: "cd /dev && sort zero", want: Confirm},
	{cmd: "cat /dev/./zero", want: Confirm},
	{cmd: "head -c 16 -c -1 /dev/zero", want: Confirm},
	{cmd: "head -c 16 -n 1 /dev/zero", want: Confirm},
	{cmd: "head -c 16 -5 /dev/zero", want: Confirm},
	{cmd: "head -c 16 --lines=1 /dev/zero", want: Confirm},
	{cmd: "head -n 1 -c 16 /dev/zero", want: Pass},
	{cmd: "head -c 16 -q /dev/urandom", want: Pass},
	{cmd: "head -c 16 /dev/urandom", want: Pass},
	{cmd: "head -c16 /dev/urandom", want: Pass},
	{cmd: "head --bytes=32 /dev/random", want: Pass},
	{cmd: "head -c 16 /dev/urandom | base64", want: Pass},
	{cmd: "cat /dev/null", want: Pass},
	{cmd: "sort -n f", want: Pass},
	// Endless producers.
	{cmd: "seq inf", want: Confirm, rule: "operand.endless"},
	{cmd: "seq 1 inf", want: Confirm},
	{cmd: "seq 1 infinity", want: Confirm},
	{cmd: "seq 1 0 5", want: Confirm},
	{cmd: "seq 1 1e18", want: Confirm},
	{cmd: "seq 0x1 0xfffffffffff", want: Confirm},
	{cmd: "seq 1 1000000000000", want: Confirm},
	{cmd: "seq 1 0.000001 100", want: Confirm},
	{cmd: "seq -1000000000 1", want: Confirm},
	{cmd: "seq nan", want: Confirm},
	{cmd: "seq", want: Confirm},
	{cmd: "seq -f '%.999999f' 1 3", want: Confirm},
	{cmd: "seq -s '" + strings.Repeat(" ", 4000) + "' 1000000", want: Confirm},
	{cmd: "seq 1 inf | xargs -P 0 -n 1 ls", want: Confirm},
	{cmd: "seq 10 | xargs -P 0 -n 1 ls", want: Confirm, rule: "flag.value"},
	{cmd: "seq 10 | xargs --max-procs=0 ls", want: Confirm},
	{cmd: "seq 10 | xargs -P 64 ls", want: Confirm},
	{cmd: "seq 10", want: Pass},
	{cmd: "seq 2 2 100", want: Pass},
	{cmd: "seq -w 1 1000000", want: Pass},
	{cmd: "seq -s , 1 5", want: Pass},
	{cmd: "seq -f 'node%02g' 1 20", want: Pass},
	{cmd: "seq 10 | xargs -P 4 -n 1 ls", want: Pass},
	// kubectl resource names are case-insensitive.
	{cmd: "kubectl get SECRETS -o yaml", want: Confirm, rule: "operand.unsafe"},
	{cmd: "kubectl get Secret -o yaml", want: Confirm},
	{cmd: "kubectl get Secrets/db -o json", want: Confirm},
	{cmd: "kubectl get secrets.v1. -o yaml", want: Confirm},
	{cmd: "kubectl get secret.v1.core -o yaml", want: Confirm},
	{cmd: "kubectl get pods,SECRETS -A -o yaml", want: Confirm},
	{cmd: "kubectl describe SECRET db", want: Confirm},
	{cmd: "kubectl -n prod get sEcReTs", want: Confirm},
	{cmd: "kubectl get pods -A -o wide", want: Pass},
	{cmd: "kubectl get all -A", want: Pass},
	{cmd: "kubectl get Deployments.apps -n prod", want: Pass},
	// The knobs that make the kernel run a program never change.
	{cmd: "sysctl -w kernel.core_pattern='|/tmp/x %p'", want: Deny, rule: "deny.write-target"},
	{cmd: "sysctl kernel.core_pattern='|/tmp/x'", want: Deny},
	{cmd: "sysctl -w kernel/core_pattern=/tmp/x", want: Deny},
	{cmd: "sysctl -q -w kernel.modprobe=/tmp/x", want: Deny},
	{cmd: "sysctl --write kernel.poweroff_cmd=/tmp/x", want: Deny},
	{cmd: "sysctl -w -kernel.core_pattern=x", want: Deny},
	{cmd: "sysctl -w 'kernel.core_pattern = |x'", want: Deny},
	{cmd: "sysctl -w fs.binfmt_misc.register=x", want: Deny},
	{cmd: "sudo sysctl -w kernel.core_pattern=x", want: Deny},
	{cmd: "sysctl -p /tmp/evil.conf", want: Deny},
	{cmd: "sysctl -p -", want: Deny},
	{cmd: "sysctl -qp /tmp/evil.conf", want: Deny},
	{cmd: "sysctl --load=/tmp/evil.conf", want: Deny},
	{cmd: "sysctl -p /etc/sysctl.d/../../tmp/evil.conf", want: Deny},
	{cmd: "echo '|/tmp/x' > /proc/sys/kernel/core_pattern", want: Deny},
	{cmd: "printf x >> /proc/sys/kernel/core_pattern", want: Deny},
	{cmd: "echo x >/proc/self/root/proc/sys/kernel/core_pattern", want: Deny},
	{cmd: "echo x > /proc/sys/kernel/../kernel/modprobe", want: Deny},
	{cmd: "echo x > /proc/sys/kernel/core_pat*", want: Deny},
	{cmd: "cd /proc/sys/kernel && echo x > core_pattern", want: Deny},
	{cmd: "echo '|/tmp/x' | tee /proc/sys/kernel/core_pattern", want: Deny},
	{cmd: "echo x | sudo tee -a /proc/sys/kernel/hotplug", want: Deny},
	{cmd: "cp /tmp/x /proc/sys/kernel/modprobe", want: Deny},
	{cmd: "dd if=/tmp/x of=/proc/sys/kernel/core_pattern", want: Deny},
	{cmd: "echo ':x:M::MZ::/tmp/x:' > /proc/sys/fs/binfmt_misc/register", want: Deny},
	{cmd: "echo /tmp/x > /sys/kernel/uevent_helper", want: Deny},
	{cmd: "echo /tmp/x > /sys/fs/cgroup/memory/release_agent", want: Deny},
	{cmd: "echo mem > /sys/power/state", want: Deny},
	{cmd: "bash -c 'echo x > /proc/sys/kernel/core_pattern'", want: Deny},
	{cmd: "sysctl kernel.core_pattern", want: Pass},
	{cmd: "cat /proc/sys/kernel/core_pattern", want: Pass},
	{cmd: "sysctl -w vm.swappiness=10", want: Confirm},
	{cmd: "sysctl -p", want: Confirm},
	{cmd: "sysctl -p /etc/sysctl.d/99-tune.conf", want: Confirm},
	{cmd: "sysctl --system", want: Confirm},
	{cmd: "echo 1 > /proc/sys/vm/drop_caches", want: Confirm},
	// Item 8: everyday diagnostics that now pass, and their neighbours.
	{cmd: "kubectl rollout status deploy/web -n prod", want: Pass},
	{cmd: "kubectl rollout status deployment web --timeout=60s", want: Pass},
	{cmd: "kubectl rollout history deploy/web", want: Pass},
	{cmd: "kubectl rollout restart deploy/web", want: Confirm, rule: "verb.unknown"},
	{cmd: "kubectl rollout undo deploy/web", want: Confirm},
	{cmd: "kubectl rollout pause deploy/web", want: Confirm},
	{cmd: "kubectl auth can-i get pods -n prod", want: Pass},
	{cmd: "kubectl auth can-i --list", want: Pass},
	{cmd: "kubectl auth whoami", want: Pass},
	{cmd: "kubectl auth reconcile -f x.yaml", want: Confirm},
	{cmd: "kubectl auth can-i get pods --as admin", want: Confirm},
	{cmd: "helm list -A", want: Pass},
	{cmd: "helm ls -n prod -o json", want: Pass},
	{cmd: "helm status web -n prod", want: Pass},
	{cmd: "helm history web --max 5", want: Pass},
	{cmd: "helm get values web", want: Confirm},
	{cmd: "helm get manifest web", want: Confirm},
	{cmd: "helm upgrade web ./chart", want: Confirm},
	{cmd: "helm uninstall web", want: Confirm},
	{cmd: "helm diff upgrade web ./chart", want: Confirm},
	{cmd: "helm list --kubeconfig /tmp/k", want: Confirm},
	{cmd: "helm status web -o template", want: Confirm},
	{cmd: "dpkg -l | grep nginx", want: Pass},
	{cmd: "dpkg -l 'nginx*'", want: Pass},
	{cmd: "dpkg -L nginx", want: Pass},
	{cmd: "dpkg -s openssl", want: Pass},
	{cmd: "dpkg -S /usr/bin/ls", want: Pass},
	{cmd: "dpkg-query -W -f '${Version}' nginx", want: Pass},
	{cmd: "dpkg -i x.deb", want: Confirm},
	{cmd: "dpkg -r nginx", want: Confirm},
	{cmd: "dpkg --purge nginx", want: Confirm},
	{cmd: "dpkg --configure -a", want: Confirm},
	{cmd: "dpkg -l --admindir=/tmp/x", want: Confirm},
	{cmd: "tar -tzf backup.tgz", want: Pass},
	{cmd: "tar -tf x.tar", want: Pass},
	{cmd: "tar tzvf x.tgz", want: Pass},
	{cmd: "tar --list --file=x.tar.zst --zstd", want: Pass},
	{cmd: "tar -tf x.tar etc/passwd", want: Pass},
	{cmd: "tar -xzf x.tgz", want: Confirm},
	{cmd: "tar xzf x.tgz", want: Confirm},
	{cmd: "tar -czf x.tgz /etc", want: Confirm},
	{cmd: "tar -t", want: Confirm, rule: "flag.required"},
	{cmd: "tar -tzf x.tgz --to-command=sh", want: Confirm},
	{cmd: "tar -tf x.tar --checkpoint=1 --checkpoint-action=exec=sh", want: Confirm},
	{cmd: "tar -I 'sh -c id' -tf x.tar", want: Confirm},
	{cmd: "tar -tf host:/x.tar", want: Confirm},
	{cmd: "tar -tf /root/backup.tar", want: Confirm},
	{cmd: "tar -tf /dev/zero", want: Confirm},
	{cmd: "tar tfz x.tgz", want: Confirm},
	{cmd: "tar -tf x.tar -O", want: Confirm},
	{cmd: "openssl x509 -noout -dates -in cert.pem", want: Pass},
	{cmd: "openssl x509 -noout -subject -issuer -in /etc/letsencrypt/live/x/cert.pem", want: Pass},
	{cmd: "openssl x509 -noout -text -in /etc/ssl/certs/ca.crt", want: Pass},
	{cmd: "openssl x509 -noout -enddate -checkend 86400 -in cert.pem", want: Pass},
	{cmd: "openssl x509 -noout -dates < cert.pem", want: Confirm},
	{cmd: "openssl x509 -in cert.pem -out copy.pem", want: Confirm},
	{cmd: "openssl x509 -noout -dates -in /etc/shadow", want: Confirm},
	{cmd: "openssl x509 -noout -text -in /etc/ssl/private/server.key", want: Confirm},
	{cmd: "openssl x509 -noout -text -in /run/secrets/tls.crt", want: Confirm},
	{cmd: "openssl x509 -noout -dates -in /dev/zero", want: Confirm},
	{cmd: "openssl x509 -req -in x.csr -signkey k.pem", want: Confirm},
	{cmd: "openssl x509 -engine /tmp/x.so -in c.pem", want: Confirm},
	{cmd: "openssl rsa -in server.key -text", want: Confirm},
	{cmd: "openssl s_client -connect example.com:443", want: Confirm},
	{cmd: "openssl enc -d -in x", want: Confirm},
	{cmd: "jq -r .name f.json", want: Pass},
	{cmd: "jq -r '.items[] | .metadata.name' pods.json", want: Pass},
	{cmd: "jq . package.json", want: Pass},
	{cmd: "jq --arg n web '.[] | select(.name == $n)' f.json", want: Pass},
	{cmd: "kubectl get pods -o json | jq -r '.items[].status.phase'", want: Pass},
	{cmd: "jq -n env", want: Confirm, rule: "jq.unsafe"},
	{cmd: "jq -n '$ENV.PATH'", want: Confirm},
	{cmd: "jq -n '$ENV'", want: Confirm},
	{cmd: "jq -r env.HOME f.json", want: Confirm},
	{cmd: "jq --arg x y '$ENV' f.json", want: Confirm},
	{cmd: "jq -n 'import \"../../root/.docker/config\" as $c; $c'", want: Confirm},
	{cmd: "jq -n 'include \"x\"; 1'", want: Confirm},
	{cmd: "jq -n 'repeat(1)'", want: Confirm},
	{cmd: "jq -n '[range(1e10)]'", want: Confirm},
	{cmd: "jq -n 'def f: f; f'", want: Confirm},
	{cmd: "jq -n '1 | recurse(.+1)'", want: Confirm},
	{cmd: "jq . /etc/shadow", want: Confirm},
	{cmd: "jq . ~/.docker/config.json", want: Confirm},
	{cmd: "jq . /dev/zero", want: Confirm},
	{cmd: "jq -f prog.jq f.json", want: Confirm},
	{cmd: "jq --rawfile k /etc/shadow -n '$k'", want: Confirm},
	{cmd: "jq --slurpfile k /root/x.json -n '$k'", want: Confirm},
	{cmd: "jq -L /tmp -n 'import \"m\" as m; 1'", want: Confirm},
	{cmd: "jq . f.json > out.json", want: Confirm},
	{cmd: "git log --oneline -n 20", want: Pass, dir: "/srv/repo"},
	{cmd: "git status", want: Pass, dir: "/srv/repo"},
	{cmd: "git diff --stat", want: Pass, dir: "/srv/repo"},
	{cmd: "git show --stat HEAD", want: Pass, dir: "/srv/repo"},
	{cmd: "git status", want: Confirm, rule: "git.untrusted", dir: "/tmp/x"},
	{cmd: "cd /tmp/x && git status", want: Confirm, dir: "/srv/repo"},
	{cmd: "git -c core.fsmonitor=false status", want: Confirm, dir: "/tmp/x"},
	{cmd: "git -c core.pager=cat log", want: Confirm, dir: "/srv/repo"},
	{cmd: "git log --textconv", want: Confirm, dir: "/srv/repo"},
	{cmd: "git diff --ext-diff", want: Confirm, dir: "/srv/repo"},
	{cmd: "git -C /tmp/x log", want: Confirm, dir: "/srv/repo"},
	{cmd: "GIT_DIR=/tmp/x/.git git log", want: Confirm, dir: "/srv/repo"},
	// A glob before -- may expand to a flag (a file named --files0-from=x).
	{cmd: "wc -l *", want: Confirm, rule: "word.glob"},
	{cmd: "du -s [a-z]*", want: Confirm},
	{cmd: "for f in *.log; do wc -l \"$f\"; done", want: Confirm},
	{cmd: "wc -l -- *", want: Pass},
	{cmd: "wc -l ./*", want: Pass},
	{cmd: "ls -l *", want: Pass}, // ls reads any flag as read-only
	{cmd: "for f in *.log; do wc -l -- \"$f\"; done", want: Pass},
	// for loops over read-only commands.
	{cmd: "for h in web1 web2; do ping -c 1 \"$h\"; done", want: Pass},
	{cmd: "for u in nginx postgresql; do systemctl status \"$u\" --no-pager; done", want: Pass},
	{cmd: "for f in syslog auth.log; do tail -n 5 \"/var/log/$f\"; done", want: Pass},
	{cmd: "for f in a b; do wc -l $f; done", want: Pass},
	{cmd: "for f in /var/log/*.log; do wc -l \"$f\"; done", want: Pass},
	{cmd: "for ns in prod staging; do kubectl get pods -n \"$ns\"; done", want: Pass},
	{cmd: "for f in a; do for g in b; do echo \"$f$g\"; done; done", want: Pass},
	{cmd: "for f in syslog shadow; do cat \"/etc/$f\"; done", want: Confirm, rule: "secret.path"},
	{cmd: "for f in /etc/*; do cat \"$f\"; done", want: Confirm},
	{cmd: "for f in /tmp/*; do cat $f; done", want: Confirm},
	{cmd: "for f in 'a b'; do cat $f; done", want: Confirm},
	{cmd: "for f in a; do cat \"$g\"; done", want: Confirm},
	{cmd: "for f in a; do rm \"$f\"; done", want: Confirm},
	{cmd: "for f in a; do cat \"$f\" > \"$f.bak\"; done", want: Confirm},
	{cmd: "for f in a; do cat \"$f\"; done > out", want: Confirm},
	{cmd: "for f in $(ls); do cat \"$f\"; done", want: Confirm},
	{cmd: "for f in {a,b}; do cat \"$f\"; done", want: Confirm},
	{cmd: "for f; do cat \"$f\"; done", want: Confirm},
	{cmd: "for ((i=0; i<3; i++)); do ls; done", want: Confirm},
	{cmd: "for PATH in /tmp; do ls; done", want: Confirm, rule: "assign"},
	{cmd: "for IFS in x; do ls; done", want: Confirm},
	{cmd: "for d in /etc /tmp; do cd \"$d\"; cat shadow; done", want: Confirm},
	{cmd: "for f in /srv/*; do 'cd' ..; cat etc/shadow; done", want: Confirm, dir: "/srv/app"},
	{cmd: "for f in /srv/*; do builtin cd ..; ls; done", want: Confirm, dir: "/srv/app"},
	{cmd: "for f in a b; do cd /var/log; ls; done", want: Confirm},
	{cmd: "for f in a; do for f in b; do ls; done; done", want: Confirm},
	{cmd: "for f in a; do echo \"${f:-x}\"; done", want: Confirm},
	{cmd: "for f in a; do f=/etc/shadow; cat \"$f\"; done", want: Confirm},
	{cmd: "for f in a; do ls; done; cat \"$f\"", want: Confirm},
	{cmd: "for f in; do cat /etc/shadow; done", want: Confirm},
	{cmd: "for c in rm; do $c -rf /tmp/x; done", want: Confirm},
	{cmd: "for d in /; do rm -rf /; done", want: Deny},
	{cmd: "for d in /; do rm -rf \"$d\"; done", want: Deny, rule: "deny.recursive-root"},
	{cmd: "for d in /tmp/x /etc; do rm -rf $d; done", want: Deny},
	{cmd: "for d in /etc; do for f in passwd; do rm -rf \"$d\"; done; done", want: Deny},
	{cmd: "for c in mkfs.ext4; do $c /dev/sda1; done", want: Deny},
	{cmd: "for d in /; do cd \"$d\"; done; rm -rf *", want: Deny},
	{cmd: "for k in kernel.core_pattern; do sysctl -w \"$k=|/tmp/x\"; done", want: Deny},
	{cmd: "for f in core_pattern; do echo x > \"/proc/sys/kernel/$f\"; done", want: Deny},
	{cmd: "for d in /; do bash -c \"rm -rf $d\"; done", want: Deny},
	{cmd: "for d in $(rm -rf /); do ls; done", want: Deny},
	{cmd: "for d in /tmp/build; do rm -rf \"$d\"; done", want: Confirm},
	{cmd: "for d in $X; do rm -rf \"$d\"; done", want: Confirm},
	{cmd: "for f in ~/.ssh/id_rsa; do cat \"$f\"; done", want: Confirm},
	{cmd: "for a in " + strings.Repeat("x ", 300) + "; do for b in " + strings.Repeat("y ", 300) + "; do for c in " + strings.Repeat("z ", 300) + "; do ls; done; done; done", want: Confirm, rule: "syntax.compound"},
	{cmd: "for a in " + strings.Repeat("x ", 200) + "; do ls \"$a\"; done", want: Pass},
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

// TestEveryReaderChecksSensitivePaths: every read-only command that reads
// files as content (operands: files) and every command fed a file through
// `<` needs approval for a sensitive path, so no reader on the table
// (rev, tr, nl, od…) prints a secret unseen, however it encodes it.
func TestEveryReaderChecksSensitivePaths(t *testing.T) {
	p := testPolicy(t)
	secrets := []string{"/etc/shadow", "/run/secrets/db", "/etc/systemd/system/thinbot.service.d/key.conf", "/etc/systemd/system/thinbot.service",
		"/etc/default/thinbot", "/srv/app/prod.env", "/run/credentials/thinbot.service/key", "/dev/zero"}
	readers := 0
	for name, r := range p.Commands {
		for _, s := range secrets {
			cmds := []string{name + " < " + s}
			if r.Operands == "files" {
				readers++
				pre := name + " "
				if len(r.PatternFlags) > 0 || r.Check == "sed" {
					pre += "p " // the first operand is a pattern or script
				}
				cmds = append(cmds, pre+s, name+" -- "+strings.TrimPrefix(pre, name+" ")+s)
			}
			for _, cmd := range cmds {
				if d := p.ClassifyIn("/srv/app", cmd); d.Verdict == Pass {
					t.Errorf("ClassifyIn(%q) = pass, want confirm or deny", cmd)
				}
			}
		}
	}
	if readers < 20*len(secrets) {
		t.Errorf("only %d reader cases", readers)
	}
}

// TestAllowedDaemons: docker's read-only verbs pass only when the policy
// lists docker in allowed_daemons; what changes or reveals stays confirm.
func TestAllowedDaemons(t *testing.T) {
	def := testPolicy(t)
	allowed, err := ParsePolicy([]byte("allowed_daemons: [docker]\n"), def)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd             string
		byDefault, with Verdict
	}{
		{"docker ps", Confirm, Pass},
		{"docker ps -a --format '{{.Names}}'", Confirm, Pass},
		{"docker images", Confirm, Pass},
		{"docker logs --tail 50 web", Confirm, Pass},
		{"docker stats --no-stream", Confirm, Pass},
		{"docker compose ps", Confirm, Pass},
		{"docker compose -p shop ps -a", Confirm, Pass},
		{"docker compose ls", Confirm, Pass},
		{"docker compose config", Confirm, Confirm},
		{"docker compose -f /tmp/x.yml ps", Confirm, Confirm},
		{"docker compose up -d", Confirm, Confirm},
		{"docker compose exec web sh", Confirm, Confirm},
		{"docker inspect web", Confirm, Confirm},
		{"docker exec web id", Confirm, Confirm},
		{"docker run --rm -v /:/h alpine cat /h/etc/shadow", Confirm, Confirm},
		{"docker -H tcp://10.0.0.1 ps", Confirm, Confirm},
		{"docker logs -f web", Confirm, Confirm},
	} {
		if got := def.Classify(tc.cmd); got.Verdict != tc.byDefault {
			t.Errorf("default: Classify(%q) = %v (%s), want %v", tc.cmd, got.Verdict, got.Reason, tc.byDefault)
		}
		if got := allowed.Classify(tc.cmd); got.Verdict != tc.with {
			t.Errorf("allowed_daemons [docker]: Classify(%q) = %v (%s), want %v", tc.cmd, got.Verdict, got.Reason, tc.with)
		}
	}
}

// TestClassifyPathContain: the read_file tool meets the same paths.
func TestClassifyPathContain(t *testing.T) {
	p := testPolicy(t)
	for _, tc := range []struct {
		path string
		want Verdict
		rule string
	}{
		{"/dev/zero", Confirm, "input.endless"},
		{"/dev/urandom", Confirm, "input.endless"},
		{"~alice/notes", Confirm, "secret.path"},
		{"~root/notes", Confirm, "secret.path"},
		{"~-/notes", Confirm, "secret.path"},
		{"/etc/systemd/system/thinbot.service.d/env.conf", Confirm, "secret.path"},
		{"/etc/default/thinbot", Confirm, "secret.path"},
		{"/run/credentials/thinbot.service/key", Confirm, "secret.path"},
		{"/proc/self/pagemap", Confirm, "secret.path"},
		{"/dev/null", Pass, "read-path"},
		{"/var/log/syslog", Pass, "read-path"},
		{"~/notes", Pass, "read-path"},
	} {
		got := p.ClassifyPath(tc.path)
		if got.Verdict != tc.want || got.Rule != tc.rule {
			t.Errorf("ClassifyPath(%q) = %v %s (%s), want %v %s", tc.path, got.Verdict, got.Rule, got.Reason, tc.want, tc.rule)
		}
	}
}
