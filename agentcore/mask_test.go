package agentcore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Secret shapes in command output are masked by gitleaks' rules, and
// ordinary output is left alone.
func TestMask(t *testing.T) {
	m, err := NewMasker()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Source, "github.com/gitleaks/gitleaks/blob/") {
		t.Errorf("source = %q", m.Source)
	}
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvredZiKRkgwlL9xNAwxXFg0x/XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC+9aGVd+Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmwIDAQABAoIBAQCIDV+\n-----END RSA PRIVATE KEY-----"
	for _, tc := range []struct{ name, in, rule, keep string }{
		{"aws", "export AWS_ACCESS_KEY_ID=AKIAZ7VRSQ5KXM3PW4JD", "aws-access-token", "export AWS_ACCESS_KEY_ID="},
		{"github", "url = https://ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK@github.com/x/y", "github-pat", "@github.com/x/y"},
		{"gitlab", "token: glpat-Xy7Kp2Lm9QvZ4wNp7YbC", "gitlab-pat", "token: "},
		{"slack", "SLACK_BOT_TOKEN=xoxb-1234567890123-9876543210987-AbCdEfGhIjKlMnOpQrStUvWx", "slack-bot-token", "SLACK_BOT_TOKEN="},
		{"pem", "key:\n" + pem + "\nafter", "private-key", "after"},
		{"jwt", "Authorization: Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "jwt", "Authorization: Bearer "},
		{"k8s", "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  password: c3VwZXJzZWNyZXRwYXNzd29yZDEyMw==\n", "kubernetes-secret-yaml", "kind: Secret"},
	} {
		out, counts := m.Mask(tc.in)
		if counts[tc.rule] == 0 || !strings.Contains(out, "[MASKED:") || !strings.Contains(out, tc.keep) {
			t.Errorf("%s: %q -> %q %v", tc.name, tc.in, out, counts)
		}
	}
	for _, plain := range []string{
		"Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        50G   48G  2.0G  97% /",
		"commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39\nAuthor: alice",
		"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
		"password: ${DB_PASSWORD}",
	} {
		if out, counts := m.Mask(plain); out != plain {
			t.Errorf("masked ordinary output %q -> %q %v", plain, out, counts)
		}
	}
}

// Every embedded rule compiles, and has keywords: NewMasker leaves the
// compile to a rule's first use, where a bad regexp would panic, and a rule
// without keywords would run over every text.
func TestMaskRulesCompile(t *testing.T) {
	m, err := NewMasker()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.rules) < 200 {
		t.Fatalf("%d rules", len(m.rules))
	}
	for _, r := range m.rules {
		if len(r.keywords) == 0 {
			t.Errorf("rule %s has no keywords", r.id)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("rule %s: %v", r.id, p)
				}
			}()
			r.re()
		}()
	}
}

func BenchmarkNewMasker(b *testing.B) {
	for b.Loop() {
		if _, err := NewMasker(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMask16K(b *testing.B) {
	m, err := NewMasker()
	if err != nil {
		b.Fatal(err)
	}
	line := "2026-12-01T03:12:00Z db1 postgres[123]: LOG: checkpoint complete: wrote 1234 buffers (7.5%); key=value token usage ok\n"
	s := strings.Repeat(line, 16<<10/len(line)) + "ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK\n"
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, c := m.Mask(s); c["github-pat"] != 1 {
			b.Fatal("not masked")
		}
	}
}

// BenchmarkMaskLog10M masks a 10 MiB command output (the chat attachment's
// limit) of log lines, some with the generic rule's keywords, and a token
// in the middle.
func BenchmarkMaskLog10M(b *testing.B) {
	m, err := NewMasker()
	if err != nil {
		b.Fatal(err)
	}
	lines := "Dec  1 03:12:00 db1 kernel: [123.456] EXT4-fs (sda1): mounted filesystem with ordered data mode\n" +
		"Dec  1 03:12:01 db1 sshd[991]: Accepted publickey for deploy from 10.0.0.5 port 50122 ssh2\n" +
		"Dec  1 03:12:02 db1 app[77]: GET /api/v1/items 200 12ms\n"
	half := strings.Repeat(lines, 5<<20/len(lines))
	s := half + "GITHUB_TOKEN=ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK\n" + half
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, c := m.Mask(s); c["github-pat"] != 1 {
			b.Fatal("not masked")
		}
	}
}

// A token a command prints reaches neither the model, the hooks (the
// chat's attachment) nor the chain; the result records what was masked.
func TestMaskCommandOutput(t *testing.T) {
	const token = "ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK"
	f := newFixture(t, Config{}, runCmd("cat creds.txt"), say("done"))
	os.WriteFile(filepath.Join(f.dir, "creds.txt"), []byte("github: "+token+"\n"), 0o600)
	var hooked string
	_, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: "show", Dir: f.dir,
		Hooks: Hooks{Result: func(c CommandInfo, content string, _ bool) { hooked = string(c.Output) + content }}})
	if err != nil {
		t.Fatal(err)
	}
	if last := f.model.reqs[1].Messages[len(f.model.reqs[1].Messages)-1].Content; strings.Contains(last, token) || !strings.Contains(last, "[MASKED:github-pat]") {
		t.Errorf("the model saw %q", last)
	}
	if strings.Contains(hooked, token) || !strings.Contains(hooked, "[MASKED:github-pat]") {
		t.Errorf("the hooks saw %q", hooked)
	}
	found := false
	for _, e := range f.events(t, "s") {
		if strings.Contains(string(e.Payload), token) {
			t.Errorf("the chain holds the token: %s", e.Payload)
		}
		if e.Type == EvToolResult && strings.Contains(string(e.Payload), `"masked":{"github-pat":1}`) {
			found = true
		}
	}
	if !found {
		t.Error("the tool result does not record what was masked")
	}
}

func FuzzMask(f *testing.F) {
	m, err := NewMasker()
	if err != nil {
		f.Fatal(err)
	}
	f.Add("token: glpat-Xy7Kp2Lm9QvZ4wNp7YbC\nkind: Secret\ndata:\n  a: c3VwZXJzZWNyZXRwYXNzd29yZDEyMw==")
	f.Add("AKIAZ7VRSQ5KXM3PW4JD ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK")
	f.Fuzz(func(t *testing.T, s string) {
		out, counts := m.Mask(s)
		n := 0
		for _, c := range counts {
			n += c
		}
		if n == 0 && out != s || n != strings.Count(out, "[MASKED:")-strings.Count(s, "[MASKED:") && !strings.Contains(s, "[MASKED:") {
			t.Fatalf("Mask(%q) = %q, %v", s, out, counts)
		}
	})
}

// A run over its token budget stops before the next model call, with the
// server's usage or, without it, the estimate.
func TestTokenBudget(t *testing.T) {
	withUsage := func(r Request) (Response, error) {
		resp, err := runCmd("true")(r)
		resp.Usage = Usage{PromptTokens: 900, CompletionTokens: 200}
		return resp, err
	}
	f := newFixture(t, Config{}, withUsage, say("never"))
	f.model.replies = f.model.replies[:1]
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: "go", Dir: f.dir, Budgets: Budgets{MaxTokens: 1000}})
	if res.Status != StatusBudget || !strings.Contains(res.Answer, "1000 tokens") || err == nil || res.Usage.PromptTokens != 900 {
		t.Fatalf("res = %+v, %v", res, err)
	}
	// Without usage from the server, the estimate counts.
	g := newFixture(t, Config{}, runCmd("true"), runCmd("true"))
	res, _ = g.a.Run(t.Context(), Turn{Session: "s", Actor: "user:a", Text: strings.Repeat("word ", 400), Dir: g.dir, Budgets: Budgets{MaxTokens: 700}})
	if res.Status != StatusBudget || res.Usage.PromptTokens < 500 {
		t.Fatalf("estimated: %+v", res)
	}
}

// TestMaskEdgeCases: gitleaks' AND allowlist (a .bb file's LICENSE line)
// does not let a LICENSE_KEY line of command output through; a token
// longer than its specific rule's pattern, which the generic rule finds
// whole, keeps no tail; a generic-only secret is masked in the head and
// the tail of an output over 512 KiB.
func TestMaskEdgeCases(t *testing.T) {
	m, err := NewMasker()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, in, gone string }{
		{"and-allowlist", `LICENSE_KEY="f3k9Xq2LmZ8vR7tY1pW4nB6c"`, "f3k9Xq2LmZ8vR7tY1pW4nB6c"},
		{"and-allowlist-src", `SRC_TOKEN="f3k9Xq2LmZ8vR7tY1pW4nB6c"`, "f3k9Xq2LmZ8vR7tY1pW4nB6c"},
		{"overlap-tail", "token=ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiKzX91qW7 ok", "zX91qW7"},
		{"overlap-tail-gitlab", "GITLAB_TOKEN=glpat-Xy7Kp2Lm9QvZ4wNp7YbCq8Rt3 ok", "q8Rt3"},
	} {
		if out, _ := m.Mask(tc.in); strings.Contains(out, tc.gone) || !strings.Contains(out, "[MASKED:") {
			t.Errorf("%s: %q -> %q", tc.name, tc.in, out)
		}
	}
	filler := strings.Repeat("Dec  1 03:12:00 db1 kernel: EXT4-fs (sda1): mounted filesystem with ordered data mode\n", 600<<10/88)
	for _, where := range []string{"head", "tail"} {
		s := `password = "Xq2LmZ8vR7tY1pW4nB6cf3k9"` + "\n" + filler
		if where == "tail" {
			s = filler + `password = "Xq2LmZ8vR7tY1pW4nB6cf3k9"` + "\n"
		}
		if len(s) <= 512<<10 {
			t.Fatalf("output of %d bytes", len(s))
		}
		if out, counts := m.Mask(s); strings.Contains(out, "Xq2LmZ8vR7tY1pW4nB6cf3k9") || counts["generic-api-key"] != 1 {
			t.Errorf("%s of a %d-byte output: %v", where, len(s), counts)
		}
	}
}
