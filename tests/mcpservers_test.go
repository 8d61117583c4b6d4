package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

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
// chain records every call. A server's env_file reaches its process and
// nothing else (the result that shows it is masked). A server that exits
// at start is reported and offers nothing; the daemon serves all the same.
// mcpE2E returns node, the filesystem server's script and a folder for
// it to serve. Under CI they must be there.
func mcpE2E(t *testing.T) (node, js, root string) {
	t.Helper()
	js = filepath.Join(mcpNPMDir(), "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(js); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the reference filesystem MCP server is not installed (.ci/run installs it): node %v, %v", err, serr)
		}
		t.Skipf("the reference filesystem MCP server is not installed (see .ci/run): node %v, %v", err, serr)
	}
	// The server's folder must be visible in the read-only tier (which
	// has a private /tmp) and readable by its user: beside the servers.
	root, err = os.MkdirTemp(filepath.Dir(mcpNPMDir()), "e2e-")
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
	return node, js, root
}

func TestServeMCPServerTools(t *testing.T) {
	node, js, root := mcpE2E(t)
	if err := os.WriteFile(filepath.Join(root, "motd"), []byte("all systems nominal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "from-chat.txt")
	everything := filepath.Join(mcpNPMDir(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	const token = "tok-e2e-0123456789abcdef"
	envFile := writeSecret(t, t.TempDir(), "everything.env", "SERVICE_TOKEN="+token)

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
			return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "everything__get-env", Args: `{}`}}}
		case 3:
			return fakemodel.Reply{ToolCalls: []fakemodel.Call{{Name: "fs__write_file", Args: fmt.Sprintf(`{"path":%q,"content":"hello from chat"}`, target)}}}
		}
		return fakemodel.Reply{Content: "Wrote it."}
	})
	r := newRig(t, chat, m.URL, rigOpts{Extra: fmt.Sprintf(`mcp_servers:
  - name: fs
    command: [%s, %s, %s]
    read_only_tools: [read_text_file, list_directory]
  - name: everything
    command: [%s, %s, stdio]
    env_file: %s
    read_only_tools: [get-env]
  - name: broken
    command: [/bin/false]
`, node, js, root, node, everything, envFile)})
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

	// The env_file's token reached the server (its get-env shows its
	// environment: the config's, not the daemon's) and nothing else: the
	// result the model saw, and the chain, hold it masked.
	audit, err := os.ReadFile(filepath.Join(r.stateDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(audit), token) {
		t.Error("the env_file's token is in the chain")
	}
	var env string
	for _, ev := range chainEvents(t, r.stateDir) {
		var p agentcore.ToolResultPayload
		if ev.Type == agentcore.EvToolResult && json.Unmarshal(ev.Payload, &p) == nil && p.Tool == "everything__get-env" {
			env = p.Content
		}
	}
	if !strings.Contains(env, `"SERVICE_TOKEN": "[REDACTED]"`) || !strings.Contains(env, `"HOME": "/"`) || strings.Contains(env, "THINBOT") {
		t.Errorf("the server's environment as the model saw it:\n%s", env)
	}

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
	if want := []string{"read_text_file:read-only", "get-env:read-only", "write_file:approved"}; !slices.Equal(tiers, want) {
		t.Errorf("mcp_call events %v, want %v", tiers, want)
	}
}

// TestGuideMCPConfig: the mcp_servers example of deploy/mcp.md, with its
// paths and URL pointed at this machine's servers, starts both servers
// under thinbot serve: the stdio filesystem server in the sandbox, and a
// streamable HTTP server (the Go SDK's, on loopback) that gets the
// headers_file's Authorization header; the model is offered the tools of
// both.
func TestGuideMCPConfig(t *testing.T) {
	node, _, root := mcpE2E(t)
	guide, err := os.ReadFile("../deploy/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	// The guide's YAML block that starts with mcp_servers: (the guide has
	// thinbot-as-a-server parts too).
	_, block, ok := strings.Cut(string(guide), "```yaml\nmcp_servers:\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("deploy/mcp.md has no mcp_servers example (a ```yaml block starting with mcp_servers:)")
	}
	block = "mcp_servers:\n" + block
	s := sdk.NewServer(&sdk.Implementation{Name: "grafana-like", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "query_prometheus"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "up 1"}}}, nil, nil
	})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	var badAuth atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer guide-token-0123456789" {
			badAuth.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	secrets := t.TempDir()
	block = strings.NewReplacer(
		"/usr/bin/node", node,
		"/opt/mcp", mcpNPMDir(),
		"/srv/data", root,
		"/etc/thinbot/fs.env", writeSecret(t, secrets, "fs.env", "# nothing secret for this server\n"),
		"/etc/thinbot/grafana-mcp.headers", writeSecret(t, secrets, "grafana.headers", "Authorization: Bearer guide-token-0123456789"),
		"https://mcp.example.com/mcp", srv.URL,
	).Replace(block)

	chat := newMMChat(t)
	var offered []string
	m := modelFunc(t, func(req fakemodel.Request) fakemodel.Reply {
		for _, tl := range req.Tools {
			offered = append(offered, tl.Function.Name)
		}
		return fakemodel.Reply{Content: "Tools listed."}
	})
	r := newRig(t, chat, m.URL, rigOpts{Extra: block})
	root1 := chat.Mention("alice", chat.Ops(), "", "what can you use?")
	r.waitPost(chat.Ops(), root1, "Tools listed.")
	for _, want := range []string{"fs__read_text_file", "fs__write_file", "grafana__query_prometheus"} {
		if !slices.Contains(offered, want) {
			t.Errorf("the guide's config does not offer %s: %v", want, offered)
		}
	}
	if badAuth.Load() != 0 {
		t.Errorf("%d requests to the HTTP server came without the headers_file's header", badAuth.Load())
	}
	r.stop()
}
