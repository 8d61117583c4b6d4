package gate

import (
	"bytes"
	"strings"
	"testing"
)

func TestDefaultPolicyRoundTrip(t *testing.T) {
	p := testPolicy(t)
	out, err := p.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("mode: replace")) {
		t.Fatalf("YAML output lacks mode: replace:\n%s", out[:200])
	}
	q, err := ParsePolicy(out, nil)
	if err != nil {
		t.Fatalf("ParsePolicy(YAML()) = %v", err)
	}
	again, err := q.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Error("the policy changed on a round trip through YAML")
	}
	for _, list := range [][]gateCase{denyCases, confirmCases, passCases} {
		for _, c := range list {
			if a, b := p.ClassifyIn(c.dir, c.cmd), q.ClassifyIn(c.dir, c.cmd); a != b {
				t.Errorf("ClassifyIn(%q) = %+v before and %+v after a round trip", c.cmd, a, b)
			}
		}
	}
}

func TestParsePolicyModes(t *testing.T) {
	base := DefaultPolicy()
	ext, err := ParsePolicy([]byte(`
trusted_repos: [/srv/app]
commands:
  curl: {operands: any, flags: [-s, -I]}
sensitive_paths: ["/srv/app/secrets/**"]
deny:
  commands:
    kubeadm: resets clusters
`), base)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		p    *Policy
		dir  string
		cmd  string
		want Verdict
	}{
		{ext, "/srv/app", "git status", Pass},
		{ext, "", "curl -sI https://example.com", Pass},
		{ext, "", "cat /srv/app/secrets/db", Confirm},
		{ext, "", "kubeadm reset", Deny},
		{ext, "", "ls -la", Pass},
		{ext, "", "rm -rf /", Deny},
		{base, "", "curl -sI https://example.com", Confirm},
		{base, "", "kubeadm reset", Confirm},
	}
	for _, tc := range tests {
		if got := tc.p.ClassifyIn(tc.dir, tc.cmd); got.Verdict != tc.want {
			t.Errorf("ClassifyIn(%q, %q) = %v (%s), want %v", tc.dir, tc.cmd, got.Verdict, got.Reason, tc.want)
		}
	}

	rep, err := ParsePolicy([]byte("mode: replace\ncommands:\n  ls: {}\n"), base)
	if err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]Verdict{"ls": Pass, "ls -l": Confirm, "cat x": Confirm, "rm -rf /": Confirm} {
		if got := rep.Classify(cmd); got.Verdict != want {
			t.Errorf("replace policy Classify(%q) = %v, want %v", cmd, got.Verdict, want)
		}
	}
	empty, err := ParsePolicy(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := empty.Classify("ls -la"); got.Verdict != Pass {
		t.Errorf("an empty policy file did not extend the default: %v", got)
	}
}

func TestParsePolicyErrors(t *testing.T) {
	bad := map[string]string{
		"unknown key":       "comands: {}\n",
		"bad mode":          "mode: merge\n",
		"bad operands":      "commands:\n  ls: {operands: some}\n",
		"unknown check":     "commands:\n  ls: {check: magic}\n",
		"not a flag":        "commands:\n  ls: {flags: [l]}\n",
		"nil rule":          "commands:\n  ls:\n",
		"bad pattern":       "sensitive_paths: ['/etc/[']\n",
		"relative repo":     "trusted_repos: [srv/repo]\n",
		"negative bytes":    "max_command_bytes: -1\n",
		"bad verb":          "commands:\n  git: {verbs: {log: {operands: x}}}\n",
		"bad wrapper flag":  "wrappers:\n  nice: {flags: [n]}\n",
		"negative position": "wrappers:\n  nice: {positional: -1}\n",
		"not yaml":          "commands: [\n",
		"bad name pattern":  "never_pass:\n  '[': x\n",
	}
	for name, doc := range bad {
		if _, err := ParsePolicy([]byte(doc), nil); err == nil {
			t.Errorf("%s: ParsePolicy(%q) succeeded", name, doc)
		} else if !strings.HasPrefix(err.Error(), "gate: parse policy: ") {
			t.Errorf("%s: error %q lacks the prefix", name, err)
		}
	}
}

// FuzzParsePolicy checks that ParsePolicy never panics, that a policy it
// accepts classifies without panicking, and that its YAML reads back.
func FuzzParsePolicy(f *testing.F) {
	f.Add(defaultPolicyYAML)
	f.Add([]byte("trusted_repos: [/srv]\n"))
	f.Add([]byte("mode: replace\ncommands:\n  ls: {flags: [-l]}\n"))
	f.Add([]byte("commands:\n  x: {verbs: {y: {operands: files}}}\n"))
	f.Add([]byte("deny:\n  commands: {'a*': b}\n"))
	f.Add([]byte("sensitive_paths: ['**/x', '~/y', 'z']\nhome: /h\n"))
	f.Add([]byte("endless_devices: [/dev/zero]\nallowed_daemons: [docker]\nreadable_devices: [/dev/zero]\n"))
	f.Add([]byte("commands:\n  head: {value_flags: [-c], bounded_read: {-c: '[0-9]+'}, operands: files}\n"))
	f.Add([]byte("commands:\n  t: {value_flags: [-f], file_flags: [-f], ignore_sensitive: ['**/*.pem'], resource_names: true, daemon: d}\n"))
	f.Add([]byte("commands:\n  k: {verbs: {a: {verbs: {b: {operands: any}}}}}\nwrappers:\n  x: {value_flags: [-P], flag_values: {-P: '[1-8]'}}\n"))
	f.Add([]byte("commands:\n  cd: {check: cd, operands: any}\n  seq: {check: seq, operands: any}\n  tar: {check: tar}\n  jq: {check: jq}\n"))
	cmds := []string{"ls -la", "rm -rf /", "cat ~/x", "git log", "x y z", "head -c 5 /dev/zero", "cd -- /etc && cat shadow",
		"k a b c", "t -f a.pem", "seq 5 | x -P 9 ls", "for f in a; do cat \"$f\"; done", "sysctl -w kernel.core_pattern=x"}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicy(data, nil)
		if err != nil {
			return
		}
		p.ClassifyPath("/etc/shadow")
		out, err := p.YAML()
		if err != nil {
			t.Fatalf("YAML of an accepted policy: %v", err)
		}
		q, err := ParsePolicy(out, nil)
		if err != nil {
			t.Fatalf("ParsePolicy(YAML()) = %v\n%s", err, out)
		}
		// The printed policy is the same policy: it decides alike.
		for _, cmd := range cmds {
			if a, b := p.ClassifyIn("/srv", cmd), q.ClassifyIn("/srv", cmd); a != b {
				t.Fatalf("ClassifyIn(%q) = %+v, but %+v after YAML and ParsePolicy\n%s", cmd, a, b, out)
			}
		}
	})
}
