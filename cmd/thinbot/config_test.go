package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The example config documents every key; it must decode into the real
// struct with no unknown field.
func TestExampleConfigKeysAreKnown(t *testing.T) {
	data, err := os.ReadFile("../../deploy/thinbot.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c daemonConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("example config: %v", err)
	}
	if c.Platform != "mattermost" || len(c.Channels) != 2 || !c.Channels[0].TwoPerson || c.Channels[1].Name != "sandbox" {
		t.Errorf("decoded %+v", c)
	}
}

func TestConfigCheckReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o644) // readable by others: refused
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
platform: mattermost
mattermost:
  url: https://mm.example.com
  token_file: `+token+`
listen: nonsense
approval_timeout: soon
channels:
  - id: abc
    workspace: /does/not/exist
`), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"config", "check", "--config", cfg})
	if err == nil {
		t.Fatal("config check passed a broken config")
	}
	for _, want := range []string{"model.base_url", "model.model", "readable or writable by other users", "callback_url",
		"listen", "state_dir", "approval_timeout", "is not a directory", "no approvers"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, out.String())
		}
	}
}

// checkConfig writes a Mattermost config whose channels section is
// channels (with WS standing for a real workspace folder) and runs
// `thinbot config check` on it.
func checkConfig(t *testing.T, channels string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("secret"), 0o600)
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte(`
model: {base_url: "http://127.0.0.1:9/v1", model: m}
platform: mattermost
mattermost: {url: "https://mm.example.com", token_file: "`+token+`", callback_url: "http://127.0.0.1:8065/hooks/mm"}
state_dir: `+filepath.Join(dir, "state")+`
channels:
`+strings.ReplaceAll(channels, "WS", dir)), 0o600)
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
	err := run(t.Context(), e, []string{"config", "check", "--config", cfg})
	return out.String(), err
}

func TestConfigCheckAcceptsAGoodConfig(t *testing.T) {
	if out, err := checkConfig(t, `  - {id: "*", workspace: "WS", approvers: [bob]}`+"\n"); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
}

func TestConfigChannelsByIDOrName(t *testing.T) {
	out, err := checkConfig(t, `  - {name: "ops", workspace: "WS", approvers: [bob]}
  - {name: "#ops", workspace: "WS", approvers: [bob]}
  - {id: "abc", name: "x", workspace: "WS", approvers: [bob]}
  - {workspace: "WS", approvers: [bob]}
`)
	if err == nil {
		t.Fatal("config check passed")
	}
	for _, want := range []string{"channels[1] (ops) is listed twice", "channels[2] has both id and name", "channels[3] has neither id nor name"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
