package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestConfigCheckMCPServers: config check names every mistake of the
// mcp_servers section, and the env_file and headers_file are secret files:
// hidden from commands like every *_file key, their values masked.
func TestConfigCheckMCPServers(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "gh.env")
	os.WriteFile(envFile, []byte("GITHUB_TOKEN=ghp_0123456789abcdefghijklmnopqrstuvwxyz\n"), 0o600)
	loose := filepath.Join(dir, "loose.headers")
	os.WriteFile(loose, []byte("Authorization: Bearer x\n"), 0o644)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
mcp_servers:
  - name: Bad_Name
    command: [/bin/true]
  - name: rel
    command: [node, server.js]
  - name: both
    command: [/bin/true]
    url: https://mcp.example.com/mcp
  - name: gh
    command: [/bin/true]
    env: [GITHUB_TOKEN=plain, LANG=C]
    env_file: gh.env
    timeout: soon
  - name: gh
    url: https://mcp.example.com/mcp
    headers_file: loose.headers
  - name: missing
    command: [/does/not/exist]
    dir: srv
`), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	if err := run(t.Context(), e, []string{"config", "check", "--config", cfg}); err == nil {
		t.Fatal("config check passed a broken mcp_servers section")
	}
	for _, want := range []string{`mcp server "Bad_Name"`, `command "node" is not an absolute path`, "set command or url, not both",
		"GITHUB_TOKEN looks like a secret", "mcp_servers gh: timeout", "mcp_servers gh: named twice",
		"headers_file: ", "readable or writable by other users", "mcp_servers missing: command:", `dir "srv" is not an absolute path`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, out.String())
		}
	}
	c, _ := loadConfig(cfg, func(string) string { return "" })
	if c == nil {
		t.Fatal("the config did not load")
	}
	var keys []string
	for _, kv := range c.secretFiles() {
		keys = append(keys, kv[0]+" "+kv[1])
	}
	if !slices.Contains(keys, "mcp_servers[3].env_file "+envFile) || !slices.Contains(keys, "mcp_servers[4].headers_file "+loose) {
		t.Errorf("the env_file and headers_file are not secret files: %q", keys)
	}
	if !slices.Contains(c.secretValues(), "ghp_0123456789abcdefghijklmnopqrstuvwxyz") {
		t.Error("the env_file's token is not among the values masked in output")
	}
	// The servers and their tool list are fixed at start (reload.go).
	if reloadable("mcp_servers") {
		t.Error("mcp_servers is reloadable; its servers start with the daemon")
	}
}

// FuzzSecretLines: the env_file and headers_file reader never panics, and
// every pair it returns has a name without the separator and no blanks
// around name or value.
func FuzzSecretLines(f *testing.F) {
	for _, s := range []string{"A=b\n", "# c\n\nAuthorization: Bearer x\n", "=x", "A='q'\r\nB=\"r\"", "no separator"} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(dir, "s")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, sep := range []string{"=", ":"} {
			lines, err := secretLines(p, sep)
			if err != nil {
				continue
			}
			for _, kv := range lines {
				if kv[0] == "" || strings.Contains(kv[0], sep) || kv[0] != strings.TrimSpace(kv[0]) {
					t.Errorf("secretLines(%q, %q) gave name %q", text, sep, kv[0])
				}
			}
		}
	})
}
