package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/tests/fakemodel"
)

// mcpNPMDir is where .ci/run installs the reference MCP servers (as in
// agentcore/mcp_test.go).
func mcpNPMDir() string {
	if d := os.Getenv("THINBOT_MCP_NPM"); d != "" {
		return d
	}
	return "/var/cache/thinbot-test/mcp"
}

// TestServeMCPServerTools: thinbot serve with an mcp_servers entry (the
// reference filesystem server from npm) offers the server's tools to the
// model; a read-only tool runs at once in the sandbox's read-only tier, a
// write is an approval card in the thread naming server, tool and
// arguments, and runs once an approver clicks, in the approved tier; the
// chain records both calls. A server that exits at start is reported and
// offers nothing; the daemon serves all the same.
func TestServeMCPServerTools(t *testing.T) {
	js := filepath.Join(mcpNPMDir(), "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(js); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the reference filesystem MCP server is not installed (.ci/run installs it): node %v, %v", err, serr)
		}
		t.Skipf("the reference filesystem MCP server is not installed (see .ci/run): node %v, %v", err, serr)
	}
	// The server's folder must be visible in the read-only tier (which
	// has a private /tmp) and readable by its user: beside the servers.
	root, err := os.MkdirTemp(filepath.Dir(mcpNPMDir()), "e2e-")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skipf("no folder for the server beside %s: %v", mcpNPMDir(), err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "motd"), []byte("all systems nominal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "from-chat.txt")

	chat := newMMChat(t)
	var offered []string
	m := modelFunc(t, func(req fakemodel.Request) fakemodel.Reply {
		switch req.N {
		case 1:
			for _, tl := range req.Tools {
				offered = append(offered, tl.Function.Name)
			}
			return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "fs__read_text_file", Args: fmt.Sprintf(`{"path":%q}`, filepath.Join(root, "motd"))}}}
		case 2:
			return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "fs__write_file", Args: fmt.Sprintf(`{"path":%q,"content":"hello from chat"}`, target)}}}
		}
		return fakemodel.Reply{Content: "Wrote it."}
	})
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`mcp_servers:
  - name: fs
    command: [%s, %s, %s]
    read_only_tools: [read_text_file, list_directory]
  - name: broken
    command: [/bin/false]
`, node, js, root)})
	if !strings.Contains(r.log.String(), `"msg":"mcp server offers no tools","server":"broken"`) {
		t.Errorf("a server that exits at start was not reported")
	}
	ops := chat.Ops()
	root1 := chat.Mention("alice", ops, "", "read the motd, then write a note")
	card := r.waitButtons(ops, root1)
	t.Logf("the approval card:\n%s", card.Text)
	if !strings.Contains(card.Text, "mcp fs write_file") || !strings.Contains(card.Text, "hello from chat") || !strings.Contains(card.Text, "from-chat.txt") {
		t.Errorf("the approval card does not show server, tool and arguments:\n%s", card.Text)
	}
	if fileExists(target) {
		t.Fatal("the write ran before the approval")
	}
	chat.Click(t, ops, root1, card.ID, "approve", "bob")
	r.waitPost(ops, root1, "Wrote it.")
	if b, err := os.ReadFile(target); err != nil || string(b) != "hello from chat" {
		t.Errorf("after the approval, %s holds %q, %v", target, b, err)
	}
	if !slices.Contains(offered, "fs__write_file") || !slices.Contains(offered, "fs__read_text_file") || strings.Contains(strings.Join(offered, " "), "broken__") {
		t.Errorf("the model was offered %v", offered)
	}
	r.stop()

	var tiers []string
	for _, ev := range chainEvents(t, r.stateDir) {
		if ev.Type != agentcore.EvMCPCall {
			continue
		}
		var p agentcore.MCPCallPayload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Error != "" {
			t.Errorf("mcp_call %s failed: %s", p.Tool, p.Error)
		}
		tiers = append(tiers, p.Tool+":"+p.Tier)
	}
	if want := []string{"read_text_file:read-only", "write_file:approved"}; !slices.Equal(tiers, want) {
		t.Errorf("mcp_call events %v, want %v", tiers, want)
	}
}
