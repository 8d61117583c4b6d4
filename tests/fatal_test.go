package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeFatalErrorIsJSON starts the daemon against a Mattermost address
// where nothing listens: start-up fails, and the line that says why is a
// JSON log line like every other line of serve, not plain text that a JSON
// log pipeline drops.
func TestServeFatalErrorIsJSON(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := writeSecret(t, dir, "mattermost.token", "fake-token-0123456789")
	addr := freeAddr(t)
	cfg := filepath.Join(dir, "thinbot.yaml")
	conf := fmt.Sprintf(`platform: mattermost
mattermost:
  url: http://%s
  token_file: %s
  callback_url: http://%s/hooks/mattermost/actions
model: {base_url: http://%s/v1, model: test-model}
listen: %s
state_dir: %s
channels:
  - {id: 4xp9fdt4e3rpcqa8cwyb3ou3yw, workspace: %s, approvers: [wbiz7r1mzpfk9g3nd5ce8t4hqy]}
`, freeAddr(t), tok, addr, freeAddr(t), addr, filepath.Join(dir, "state"), ws)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := thinbot(t, dir, nil, "serve", "--config", cfg)
	if r.code != 1 {
		t.Fatalf("serve against a closed port: exit %d, want 1\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("a log line of serve is not JSON: %q", l)
		}
	}
	var last struct {
		Level, Msg, Err string
		ExitCode        int `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("the last line: %v\n%s", err, r.stderr)
	}
	if last.Level != "ERROR" || last.Msg != "thinbot exited" || !strings.Contains(last.Err, "connection refused") || last.ExitCode != 1 {
		t.Errorf("the last line is %+v, want the fatal error (ERROR, thinbot exited, connection refused, exit 1)", last)
	}

	// Commands that do not log JSON keep the plain form.
	r = thinbot(t, dir, nil, "audit", "verify", "--db", filepath.Join(dir, "nothing.db"))
	if r.code == 0 || !strings.HasPrefix(r.stderr, "thinbot: ") {
		t.Errorf("audit verify on no store: exit %d, stderr %q; want the plain thinbot: form", r.code, r.stderr)
	}
}
