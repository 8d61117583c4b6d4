package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/gate"
)

func gateEnv(stdin string) (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}, &out, &errb
}

func TestGateCheck(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"check", "ls -la"}, "pass\tread-only\t"},
		{[]string{"check", "cat /etc/shadow"}, "confirm\tsecret.path\treads /etc/shadow"},
		{[]string{"check", "bash -c 'rm -rf /'"}, "deny\tdeny.recursive-root\t"},
		{[]string{"check", "--dir", "/etc", "cat shadow"}, "confirm\tsecret.path\t"},
	}
	for _, tc := range tests {
		e, out, _ := gateEnv("")
		if err := cmdGate(t.Context(), e, tc.args); err != nil {
			t.Fatalf("gate %q: %v", tc.args, err)
		}
		if !strings.HasPrefix(out.String(), tc.want) || strings.Count(out.String(), "\n") != 1 {
			t.Errorf("gate %q printed %q, want a line starting %q", tc.args, out, tc.want)
		}
	}
}

func TestGateCheckJSONStdin(t *testing.T) {
	e, out, _ := gateEnv("ls\n\nrm -rf /\ncat ~/.ssh/id_rsa\n")
	if err := cmdGate(t.Context(), e, []string{"check", "--json", "-"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []gate.Verdict{gate.Pass, gate.Deny, gate.Confirm}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, line := range lines {
		var r gateResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		if r.Verdict != want[i] || r.Rule == "" || r.Reason == "" || r.Command == "" {
			t.Errorf("line %d = %+v, want verdict %v", i, r, want[i])
		}
	}
	if !strings.Contains(lines[1], `"verdict":"deny"`) {
		t.Errorf("verdict is not written as text: %s", lines[1])
	}
}

func TestGatePolicy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(file, []byte("trusted_repos: [/srv/repo]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, out, _ := gateEnv("")
	if err := cmdGate(t.Context(), e, []string{"policy", "--policy", file}); err != nil {
		t.Fatal(err)
	}
	p, err := gate.ParsePolicy(out.Bytes(), nil)
	if err != nil {
		t.Fatalf("printed policy does not parse: %v", err)
	}
	if d := p.ClassifyIn("/srv/repo", "git status"); d.Verdict != gate.Pass {
		t.Errorf("printed policy lost the trusted repo: %+v", d)
	}

	e, out, _ = gateEnv("")
	if err := cmdGate(t.Context(), e, []string{"check", "--policy", file, "--dir", "/srv/repo", "git log"}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "pass") {
		t.Errorf("check with --policy = %q", out)
	}
}

func TestGateUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frob"}, {"check"}, {"check", "a", "b"}, {"check", "--nope", "ls"}, {"policy", "x"}} {
		e, _, _ := gateEnv("")
		if err := cmdGate(t.Context(), e, args); !errors.Is(err, errUsage) {
			t.Errorf("gate %q = %v, want a usage error", args, err)
		}
	}
	e, _, _ := gateEnv("")
	if err := cmdGate(t.Context(), e, []string{"check", "--policy", "/nonexistent/policy.yaml", "ls"}); err == nil || errors.Is(err, errUsage) {
		t.Errorf("missing policy file = %v", err)
	}
}
