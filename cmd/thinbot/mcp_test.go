package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The mcp section is checked with the rest: no tokens file, a token too
// short, a bad path, an unknown channel and a platform the daemon does not
// serve are each reported; a good section passes.
func TestConfigCheckMCP(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	good := filepath.Join(dir, "mcp-tokens")
	os.WriteFile(good, []byte("ci 0123456789abcdef0123456789abcdef\n"), 0o600)
	short := filepath.Join(dir, "mcp-short")
	os.WriteFile(short, []byte("ci short\n"), 0o600)
	ws := t.TempDir()
	check := func(section string) string {
		cfg := filepath.Join(dir, "c.yaml")
		os.WriteFile(cfg, []byte(`
platform: mattermost
mattermost:
  url: https://mm.example.com
  token_file: `+token+`
  callback_url: http://127.0.0.1:8079/cb
model: {base_url: "http://127.0.0.1:1", model: m}
state_dir: `+filepath.Join(dir, "state")+`
channels:
  - id: abcdefghijklmnopqrstuvwxyz
    name: ops
    workspace: `+ws+`
    any_member_approves: true
`+section), 0o600)
		var out bytes.Buffer
		e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		run(t.Context(), e, []string{"config", "check", "--config", cfg})
		return out.String()
	}
	out := check("mcp:\n  channel: nowhere\n  path: mcp\n  approval_timeout: soon\n")
	for _, want := range []string{"mcp.tokens_file is empty", `mcp.path "mcp"`, "mcp.approval_timeout", `mcp.channel "nowhere" is not one of the configured channels`} {
		if !strings.Contains(out, want) {
			t.Errorf("config check output lacks %q:\n%s", want, out)
		}
	}
	if out := check("mcp:\n  tokens_file: " + short + "\n  channel: ops\n"); !strings.Contains(out, "16 characters or more") {
		t.Errorf("short token accepted:\n%s", out)
	}
	if out := check("mcp:\n  tokens_file: " + good + "\n  platform: web\n"); !strings.Contains(out, "mcp.platform web: the web console is not served") {
		t.Errorf("web platform without a console accepted:\n%s", out)
	}
	if out := check("mcp:\n  tokens_file: " + good + "\n  channel: ops\n"); strings.Contains(out, "mcp") {
		t.Errorf("a good mcp section is reported:\n%s", out)
	}
}
