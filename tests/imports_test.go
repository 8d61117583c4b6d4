package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// allowedImports is the package map of ARCHITECTURE.md: which of our packages each
// package may import. Packages not listed (cmd/thinbot, tests/...) may
// import anything.
var allowedImports = map[string][]string{
	"gate":      {},
	"store":     {},
	"skills":    {},
	"agentcore": {"gate", "store", "skills", "agentcore/sandbox", "agentcore/fleet", "agentcore/textfmt", "agentcore/mcp", "agentcore/datasource"},
	// Prometheus, Loki and Alertmanager reads for the datasource tools.
	"agentcore/datasource": {},
	"agentcore/sandbox":    {"agentcore/textfmt"},
	// Inventory, host patterns and the OpenSSH fan-out; below agentcore
	// like the sandbox, whose Mode (read-only or approved) it takes.
	"agentcore/fleet":  {"agentcore/sandbox", "agentcore/textfmt"},
	"agentcore/openai": {"agentcore"},
	"bot":              {"agentcore", "agentcore/textfmt"},
	// Text shaping (head and tail, one line, code span, shell quote)
	// shared by the layers above; a leaf below all of them.
	"agentcore/textfmt": {},
	"bot/mattermost":    {"bot", "agentcore/textfmt"},
	"bot/slack":         {"bot"},
	// The console's audit viewer reads the chain (sessions, timelines,
	// verification, export); it never appends. It reads agentcore's
	// state index (approvals, topics) and rebuilds console threads from
	// agentcore's payloads.
	"bot/web": {"bot", "agentcore", "store"},
	// thinbot as an MCP server: a front end beside the chat adapters,
	// whose calls go through bot.ExternalThread to agentcore.CallTool.
	"bot/mcp": {"bot", "agentcore", "agentcore/textfmt"},
	// MCP servers as a client: their processes run in the sandbox's
	// tiers; agentcore decides and records every call.
	"agentcore/mcp": {"agentcore/sandbox"},
	// The chain replicated over raft: the store is its state machine,
	// and the store knows nothing of raft.
	"store/replica": {"store"},
}

// sdkOwners: only these packages may import the SDK, and each of them does
// (the design card names these libraries; a hand-written copy in their
// place is a change of design, not of code). Tests may import any.
var sdkOwners = map[string][]string{
	"github.com/mattermost/mattermost/server/public": {"bot/mattermost"},
	"github.com/slack-go/slack":                      {"bot/slack"},
	"go.etcd.io/bbolt":                               {"store"},
	"mvdan.cc/sh/v3":                                 {"gate"},
	"github.com/landlock-lsm/go-landlock":            {"agentcore/sandbox"},
	// Two owners by design: each adapter speaks its platform's WebSocket
	// itself (Mattermost's events, Slack's Socket Mode).
	"github.com/gorilla/websocket": {"bot/mattermost", "bot/slack"},
	// The bot counts runs, commands and approvals (bot.Metrics); cmd
	// registers the process and store collectors and serves /metrics.
	// agentcore/datasource asks Prometheus through its API client (api/).
	"github.com/prometheus/client_golang": {"bot", "cmd/thinbot", "agentcore/datasource"},
	// The official MCP Go SDK (issue 34): as a client (MCP servers'
	// tools) and as a server (thinbot mcp and the daemon's endpoint).
	"github.com/modelcontextprotocol/go-sdk": {"agentcore/mcp", "bot/mcp"},
	// The replicated chain (issue 36): raft, its bbolt log store and
	// the logger type raft takes.
	"github.com/hashicorp/raft":           {"store/replica"},
	"github.com/hashicorp/raft-boltdb/v2": {"store/replica"},
	"github.com/hashicorp/go-hclog":       {"store/replica"},
}

func TestImportMap(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "github.com/thinbot/thinbot/"
	imported := make(map[string]bool) // SDK + " " + owner: the owner imports it
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], mod)
		allowed, ruled := allowedImports[pkg]
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, mod) && ruled {
				dep := strings.TrimPrefix(imp, mod)
				if !contains(allowed, dep) {
					t.Errorf("%s imports %s, which the package map forbids", pkg, dep)
				}
			}
			for sdk, owner := range sdkOwners {
				if imp != sdk && !strings.HasPrefix(imp, sdk+"/") {
					continue
				}
				if contains(owner, pkg) {
					imported[sdk+" "+pkg] = true
				} else if !strings.HasPrefix(pkg, "tests") {
					t.Errorf("%s imports %s; only %s may", pkg, imp, strings.Join(owner, " and "))
				}
			}
		}
	}
	for sdk, owners := range sdkOwners {
		for _, owner := range owners {
			if !imported[sdk+" "+owner] {
				t.Errorf("%s does not import %s, the library the design card names for it", owner, sdk)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
