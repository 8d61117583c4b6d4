package agentcore

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thinbot/thinbot/agentcore/mcp"
	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// The MCP tests run the two reference servers from npm (installed by
// .ci/run into mcpNPMDir) and a fake server built with the SDK from this
// test binary (mcpFakeMain).

// mcpNPMDir is where .ci/run installs the reference servers:
// $THINBOT_MCP_NPM, else /var/cache/thinbot-test/mcp. It must be readable
// by every user: a root daemon's read-only tier runs as thinbot-ro.
func mcpNPMDir() string {
	if d := os.Getenv("THINBOT_MCP_NPM"); d != "" {
		return d
	}
	return "/var/cache/thinbot-test/mcp"
}

// npmServer returns the command of a reference server (server-filesystem,
// server-everything) run by node. Under CI it must be there.
func npmServer(t *testing.T, name string, args ...string) []string {
	t.Helper()
	js := filepath.Join(mcpNPMDir(), "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(js); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("@modelcontextprotocol/%s is not installed in %s (.ci/run installs it with npm): node %v, %v", name, mcpNPMDir(), err, serr)
		}
		t.Skipf("@modelcontextprotocol/%s is not installed in %s (see .ci/run): node %v, %v", name, mcpNPMDir(), err, serr)
	}
	return append([]string{node, js}, args...)
}

// mcpSet starts the servers and closes them with the test.
func mcpSet(t *testing.T, r mcp.Runner, maxResult int, servers ...mcp.Server) *mcp.Set {
	t.Helper()
	s, err := mcp.New(mcp.Config{Servers: servers, MaxResult: maxResult})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.Start(t.Context(), r)
	if p := s.Problems(); len(p) > 0 {
		t.Fatalf("servers did not start: %v", p)
	}
	return s
}

func mcpCallOf(t *testing.T, f *fixture, session string) []MCPCallPayload {
	t.Helper()
	var out []MCPCallPayload
	for _, e := range f.events(t, session) {
		if e.Type == EvMCPCall {
			p, err := Decode(e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, *p.(*MCPCallPayload))
		}
	}
	return out
}

func toolResults(t *testing.T, f *fixture, session string) []ToolResultPayload {
	t.Helper()
	var out []ToolResultPayload
	for _, e := range f.events(t, session) {
		if e.Type == EvToolResult {
			var p ToolResultPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

func mustArgs(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMCPFilesystemWriteWaitsForApproval: the reference filesystem
// server's write_file, not marked read-only, becomes an approval request
// naming server, tool and arguments; denied, nothing is written and the
// server is never called; approved, it writes, in the approved tier.
func TestMCPFilesystemWriteWaitsForApproval(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "note.txt")
	servers := []mcp.Server{{Name: "fs", Command: npmServer(t, "server-filesystem", root),
		Env: []string{"PATH=/usr/bin:/bin"}, ReadOnlyTools: []string{"read_text_file", "list_directory"}}}
	for _, approve := range []bool{false, true} {
		set := mcpSet(t, nil, 0, servers...)
		write := call("fs__write_file", mustArgs(map[string]string{"path": target, "content": "written by the model"}))
		f := newFixture(t, Config{MCP: set}, write, say("done"))
		var asked []Approval
		approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
			asked = append(asked, a)
			return ApprovalDecision{Approved: approve, By: "user:bob"}, nil
		})
		if _, err := f.a.Run(t.Context(), Turn{Session: "s", Actor: "user:al", Text: "write", Dir: f.dir, Approver: approver}); err != nil {
			t.Fatal(err)
		}
		if len(asked) != 1 {
			t.Fatalf("approve=%v: asked %d times, want once", approve, len(asked))
		}
		a := asked[0]
		if !strings.Contains(a.Command, "mcp fs write_file") || !strings.Contains(a.Command, "written by the model") || !strings.Contains(a.Reason, "server fs, tool write_file") {
			t.Errorf("the approval request does not show server, tool and arguments: %+v", a)
		}
		_, err := os.Stat(target)
		calls := mcpCallOf(t, f, "s")
		if !approve {
			if err == nil {
				t.Fatal("denied, and the file was written")
			}
			if len(calls) != 0 {
				t.Errorf("denied, and the server was called: %+v", calls)
			}
			res := toolResults(t, f, "s")
			if len(res) != 1 || !strings.Contains(res[0].Content, "refused") {
				t.Errorf("the model was told %+v", res)
			}
			continue
		}
		if err != nil {
			t.Fatalf("approved, and the file was not written: %v", err)
		}
		if len(calls) != 1 || calls[0].Tier != "approved" || calls[0].Server != "fs" || calls[0].Tool != "write_file" || calls[0].Error != "" {
			t.Errorf("mcp_call events = %+v", calls)
		}
		os.Remove(target)
	}
}

// TestMCPReadOnlyToolRunsAtOnce: a tool the config marks read-only runs
// without asking anyone (an approver that is asked fails the test), in the
// read-only tier, and its result reaches the model masked and recorded.
func TestMCPReadOnlyToolRunsAtOnce(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "config.txt")
	secret := "ghp_R8vT2kLm9QxZ4wNp7YbC3dFh6JsA1uEo5GiK" // a GitHub token's shape
	if err := os.WriteFile(file, []byte("db=primary\nurl = https://"+secret+"@github.com/x/y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	set := mcpSet(t, nil, 0, mcp.Server{Name: "fs", Command: npmServer(t, "server-filesystem", root),
		Env: []string{"PATH=/usr/bin:/bin"}, ReadOnlyTools: []string{"read_text_file"}})
	var saw string
	f := newFixture(t, Config{MCP: set},
		call("fs__read_text_file", mustArgs(map[string]string{"path": file})),
		func(r Request) (Response, error) { saw = lastToolContent(r); return Response{Content: "ok"}, nil })
	approver := approverFunc(func(context.Context, Approval) (ApprovalDecision, error) {
		t.Error("a read-only MCP tool asked for an approval")
		return ApprovalDecision{}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "read", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(saw, "db=primary") || strings.Contains(saw, secret) {
		t.Errorf("the model saw %q: want the file, the secret masked", saw)
	}
	g := gateDecisions(t, f, "s")
	if len(g) != 1 || g[0].Verdict != "pass" || g[0].Rule != "mcp-read-only" || g[0].Tool != "fs__read_text_file" {
		t.Errorf("gate decisions = %+v", g)
	}
	calls := mcpCallOf(t, f, "s")
	if len(calls) != 1 || !strings.HasPrefix(calls[0].Tier, "read-only") || !calls[0].ReadOnly || calls[0].ResultSize == 0 || calls[0].ResultSHA == "" {
		t.Errorf("mcp_call events = %+v", calls)
	}
	// The postmortem timeline shows the call.
	if md, err := f.a.Timeline(t.Context(), "s", TimelineOptions{}); err != nil || !strings.Contains(md, "**MCP call** `fs read_text_file` in the read-only") {
		t.Errorf("the timeline does not show the MCP call (%v):\n%s", err, md)
	}
	// Masked like command output: the result records what was masked.
	if res := toolResults(t, f, "s"); len(res) != 1 || len(res[0].Masked) == 0 || len(calls) != 1 || len(calls[0].Masked) == 0 {
		t.Errorf("the result does not record the masked secret: %+v", res)
	}
}

// TestMCPToolsOfferedNamespaced: every tool of the reference "everything"
// server is offered under "everything__", in a stable order, in both
// protocols (the text protocol lists them in the system prompt), and the
// server's readOnlyHint is shown to the approver but does not spare the
// approval.
func TestMCPToolsOfferedNamespaced(t *testing.T) {
	set := mcpSet(t, nil, 0, mcp.Server{Name: "everything", Command: npmServer(t, "server-everything", "stdio"), Env: []string{"PATH=/usr/bin:/bin"}})
	tools := set.Tools()
	var hinted mcp.Tool
	for _, tl := range tools {
		if !strings.HasPrefix(tl.Name, "everything__") {
			t.Errorf("tool %q is not namespaced", tl.Name)
		}
		if tl.ReadOnlyHint && hinted.Name == "" {
			hinted = tl
		}
	}
	if len(tools) < 3 || hinted.Name == "" {
		t.Fatalf("tools = %d, one with readOnlyHint: %q; want the everything server's tools", len(tools), hinted.Name)
	}
	var offered []string
	f := newFixture(t, Config{MCP: set}, func(r Request) (Response, error) {
		for _, tl := range r.Tools {
			offered = append(offered, tl.Name)
		}
		return call(hinted.Name, "{}")(r)
	}, say("ok"))
	var asked []Approval
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		asked = append(asked, a)
		return ApprovalDecision{Approved: false, By: "user:bob"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if !strings.Contains(strings.Join(offered, " "), tl.Name) {
			t.Errorf("tool %s was not offered to the model", tl.Name)
		}
	}
	if len(asked) != 1 || !strings.Contains(asked[0].Reason, "marks it read-only (a hint, not trusted)") {
		t.Errorf("a tool only the server calls read-only: approvals %+v", asked)
	}

	tf := newFixture(t, Config{MCP: set, TextProtocol: true}, func(r Request) (Response, error) {
		sys := r.Messages[0].Content
		if !strings.Contains(sys, "# MCP tools") || !strings.Contains(sys, hinted.Name) {
			t.Errorf("the text protocol's prompt does not list the MCP tools")
		}
		return Response{Content: `<tool_call>{"name": "everything__echo", "arguments": {"message": "hi there"}}</tool_call>`}, nil
	}, func(r Request) (Response, error) {
		if c := r.Messages[len(r.Messages)-1].Content; !strings.Contains(c, "hi there") {
			t.Errorf("the text-protocol call's result: %q", c)
		}
		return Response{Content: "ok"}, nil
	})
	if _, err := tf.a.Run(t.Context(), Turn{Session: "t", Text: "x", Dir: tf.dir, AllowAll: true}); err != nil {
		t.Fatal(err)
	}
}

// mcpFakeEnv makes the test binary an MCP server (mcpFakeMain).
const mcpFakeEnv = "THINBOT_TEST_MCP_FAKE"

// mcpFakeMain serves, over stdio, an MCP server built with the SDK whose
// tools misbehave: crash exits mid-call, hang never answers, flood sends
// 20000 notifications before it answers, huge answers 8 MiB, big 300 KiB,
// echo echoes.
func mcpFakeMain() {
	if os.Getenv(mcpFakeEnv) == "" {
		return
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1"}, nil)
	type in struct {
		Text string `json:"text,omitempty"`
	}
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(s, &sdk.Tool{Name: "crash"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ in) (*sdk.CallToolResult, any, error) {
		os.Stderr.WriteString("fake: about to crash\n")
		os.Exit(3)
		return nil, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "hang"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ in) (*sdk.CallToolResult, any, error) {
		select {} // the client's timeout ends it, with the process
	})
	sdk.AddTool(s, &sdk.Tool{Name: "flood"}, func(ctx context.Context, req *sdk.CallToolRequest, _ in) (*sdk.CallToolResult, any, error) {
		for i := range 20000 {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: "x", Progress: float64(i), Message: strings.Repeat("n", 100)})
		}
		return text("flood over"), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "huge"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ in) (*sdk.CallToolResult, any, error) {
		return text(strings.Repeat("h", 8<<20)), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "big"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ in) (*sdk.CallToolResult, any, error) {
		return text("first line\n" + strings.Repeat("b", 300<<10) + "\nlast line"), nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(ctx context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return text("echo: " + a.Text), nil, nil
	})
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestMCPBadServers: a server that crashes mid-call, hangs, floods
// notifications or answers too much gives the model a clear error, the
// chain records it (mcp_call's error), and the next call works (the
// server starts again); the run goes on to its answer.
func TestMCPBadServers(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Two servers from the same binary: "hung" has a short time limit
	// for its hang; "fake" a long one, which its flood must not need.
	set := mcpSet(t, nil, 1<<20,
		mcp.Server{Name: "fake", Command: []string{exe}, Env: []string{mcpFakeEnv + "=1"}, ReadOnly: true, Timeout: 2 * time.Minute},
		mcp.Server{Name: "hung", Command: []string{exe}, Env: []string{mcpFakeEnv + "=1"}, ReadOnly: true, Timeout: 2 * time.Second})
	echo := call("fake__echo", `{"text":"still here"}`)
	f := newFixture(t, Config{MCP: set},
		call("fake__crash", "{}"), echo,
		call("hung__hang", "{}"), call("hung__echo", `{"text":"still here"}`),
		call("fake__flood", "{}"),
		call("fake__huge", "{}"), echo,
		call("fake__big", "{}"),
		say("done"))
	res, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir})
	if err != nil || res.Answer != "done" {
		t.Fatalf("run = %+v, %v; want it to go on to its answer", res, err)
	}
	calls := mcpCallOf(t, f, "s")
	results := toolResults(t, f, "s")
	want := []struct{ tool, err, result string }{
		{"crash", "exited with code 3", "fake: about to crash"},
		{"echo", "", "echo: still here"},
		{"hang", "no answer within 2s", "the server was stopped"},
		{"echo", "", "echo: still here"},
		{"flood", "", "flood over"},
		{"huge", "maximum line length", "exceeded the configured maximum"},
		{"echo", "", "echo: still here"},
		{"big", "", "bytes omitted"},
	}
	if len(calls) != len(want) || len(results) != len(want) {
		t.Fatalf("%d mcp_call events, %d results; want %d: %+v", len(calls), len(results), len(want), calls)
	}
	for i, w := range want {
		c, r := calls[i], results[i]
		t.Logf("%s: %d ms, error %q", c.Tool, c.DurationMS, c.Error)
		if c.Tool != w.tool || !strings.Contains(c.Error, w.err) || (w.err == "" && c.Error != "") {
			t.Errorf("call %d: %s error %q, want %s with %q", i, c.Tool, c.Error, w.tool, w.err)
		}
		if !strings.Contains(r.Content, w.result) || len(r.Content) > 20<<10 {
			t.Errorf("call %d (%s): the model saw %.300q (%d bytes), want %q", i, w.tool, r.Content, len(r.Content), w.result)
		}
	}
	// Bounded: the model sees the head and the tail of a big result, the
	// chain its full size.
	if big, r := calls[len(calls)-1], results[len(results)-1]; big.ResultSize < 300<<10 || !strings.Contains(r.Content, "first line") || !strings.Contains(r.Content, "last line") {
		t.Errorf("big result: recorded %d bytes, the model saw %.200q", big.ResultSize, r.Content)
	}
}

// TestMCPReadOnlySandboxUnavailableFailsClosed: where the kernel sandbox
// is wanted but unavailable, a stdio tool the config marks read-only
// needs an approval, as a read-only command does: its read-only tier
// could not be enforced.
func TestMCPReadOnlySandboxUnavailableFailsClosed(t *testing.T) {
	root := t.TempDir()
	set := mcpSet(t, nil, 0, mcp.Server{Name: "fs", Command: npmServer(t, "server-filesystem", root),
		Env: []string{"PATH=/usr/bin:/bin"}, ReadOnlyTools: []string{"list_directory"}})
	f := newFixture(t, Config{MCP: set, Exec: ExecConfig{NoSandbox: "the kernel refused user namespaces"}},
		call("fs__list_directory", mustArgs(map[string]string{"path": root})), say("ok"))
	var asked int
	approver := approverFunc(func(context.Context, Approval) (ApprovalDecision, error) {
		asked++
		return ApprovalDecision{Approved: false, By: "user:bob"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	if g := gateDecisions(t, f, "s"); asked != 1 || len(g) != 1 || g[0].Rule != "sandbox-unavailable" {
		t.Errorf("asked %d times, gate decisions %+v; want one approval, rule sandbox-unavailable", asked, g)
	}
	if calls := mcpCallOf(t, f, "s"); len(calls) != 0 {
		t.Errorf("denied, and the server was called: %+v", calls)
	}
}

// TestMCPReadOnlyTierCannotWrite: a stdio server's read-only process runs
// in the kernel sandbox's read-only tier, so even a write tool that the
// config wrongly marks read-only (it runs at once) cannot write; the same
// call approved runs in the approved tier's process and writes.
func TestMCPReadOnlyTierCannotWrite(t *testing.T) {
	root := t.TempDir()
	sb := startSandbox(t, root)
	target := filepath.Join(root, "planted.txt")
	cmd := npmServer(t, "server-filesystem", root)
	write := call("fs__write_file", mustArgs(map[string]string{"path": target, "content": "planted"}))
	for _, readOnly := range []bool{true, false} {
		srv := mcp.Server{Name: "fs", Command: cmd, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + root}}
		if readOnly {
			srv.ReadOnlyTools = []string{"write_file"} // wrong on purpose
		}
		set := mcpSet(t, sb, 0, srv)
		f := newFixture(t, Config{MCP: set, Exec: ExecConfig{Sandbox: sb}}, write, say("done"))
		approver := approverFunc(func(context.Context, Approval) (ApprovalDecision, error) {
			return ApprovalDecision{Approved: true, By: "user:bob"}, nil
		})
		if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "write", Dir: root, Approver: approver}); err != nil {
			t.Fatal(err)
		}
		calls := mcpCallOf(t, f, "s")
		_, err := os.Stat(target)
		if readOnly {
			if err == nil {
				t.Fatalf("a server in the read-only tier wrote %s: %+v", target, calls)
			}
			if len(calls) != 1 || calls[0].Tier != "read-only" || (!calls[0].IsError && calls[0].Error == "") {
				t.Errorf("read-only tier: mcp_call = %+v; want a failed write", calls)
			}
			continue
		}
		if err != nil || len(calls) != 1 || calls[0].Tier != "approved" {
			t.Errorf("approved tier: the write did not happen (%v): %+v", err, calls)
		}
	}
}

// TestMCPStreamableHTTP: a server behind a streamable HTTP URL gets the
// configured headers with every request; an 8 MiB answer over the 1 MiB
// limit is refused and the next call works; its read-only tool runs at
// once (tier "remote"), and its other tool, which the server calls
// read-only, waits for an approval and is not called when it is denied.
func TestMCPStreamableHTTP(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "remote", Version: "1"}, nil)
	type in struct {
		Q string `json:"q"`
	}
	var deleted atomic.Bool
	sdk.AddTool(s, &sdk.Tool{Name: "huge"}, func(ctx context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("h", 8<<20)}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "query"}, func(ctx context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "rows for " + a.Q}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "delete", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
			deleted.Store(true)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted"}}}, nil, nil
		})
	// JSON answers: the SDK reads one whole, so thinbot bounds it.
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{JSONResponse: true})
	var unauthorized atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tkn-0123456789" {
			unauthorized.Add(1)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	set := mcpSet(t, nil, 1<<20, mcp.Server{Name: "db", URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer tkn-0123456789"},
		ReadOnlyTools: []string{"query", "huge"}})
	var saw string
	f := newFixture(t, Config{MCP: set},
		call("db__huge", `{"q":"all"}`),
		call("db__query", `{"q":"errors"}`), call("db__delete", `{"q":"everything"}`),
		func(r Request) (Response, error) { saw = lastToolContent(r); return Response{Content: "ok"}, nil })
	var asked []Approval
	approver := approverFunc(func(ctx context.Context, a Approval) (ApprovalDecision, error) {
		asked = append(asked, a)
		return ApprovalDecision{Approved: false, By: "user:bob"}, nil
	})
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "x", Dir: f.dir, Approver: approver}); err != nil {
		t.Fatal(err)
	}
	calls := mcpCallOf(t, f, "s")
	if len(calls) != 2 || calls[0].Tool != "huge" || !strings.Contains(calls[0].Error, "exceeded the configured maximum size") ||
		calls[1].Tool != "query" || calls[1].Tier != "remote" || calls[1].Error != "" {
		t.Errorf("mcp_call events = %+v; want the huge answer refused, then the query, remote; results %+v", calls, toolResults(t, f, "s"))
	}
	if res := toolResults(t, f, "s"); len(res) != 3 || !strings.Contains(res[1].Content, "rows for errors") {
		t.Errorf("results = %+v", res)
	}
	if deleted.Load() || len(asked) != 1 || !strings.Contains(asked[0].Command, "mcp db delete") || !strings.Contains(saw, "refused") {
		t.Errorf("delete: ran %v, approvals %+v, the model saw %q", deleted.Load(), asked, saw)
	}
	if unauthorized.Load() != 0 {
		t.Errorf("%d requests came without the configured header", unauthorized.Load())
	}
}

// BenchmarkMCPCall measures one call of the reference everything server's
// echo tool over a running stdio connection: as a plain child process,
// and in the kernel sandbox's read-only tier (deploy/measurements.md).
func BenchmarkMCPCall(b *testing.B) {
	cmd := npmServerB(b, "server-everything", "stdio")
	for _, tier := range []string{"unconfined", "read-only"} {
		b.Run(tier, func(b *testing.B) {
			var r mcp.Runner
			if tier == "read-only" {
				sb, err := sandbox.Start(b.Context(), sandbox.Config{})
				if err != nil {
					b.Skipf("no sandbox here: %v", err)
				}
				b.Cleanup(func() { sb.Close() })
				r = sb
			}
			set, err := mcp.New(mcp.Config{Servers: []mcp.Server{{Name: "everything", Command: cmd, Env: []string{"PATH=/usr/bin:/bin"}, ReadOnly: true}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { set.Close() })
			set.Start(b.Context(), r)
			tool, ok := set.Tool("everything__echo")
			if !ok {
				b.Fatalf("no echo tool: %v", set.Problems())
			}
			args := json.RawMessage(`{"message":"ping"}`)
			for b.Loop() {
				if res, err := set.Call(b.Context(), r, sandbox.ReadOnly, tool, args); err != nil || !strings.Contains(res.Text, "ping") {
					b.Fatalf("call: %+v, %v", res, err)
				}
			}
		})
	}
}

// npmServerB is npmServer for a benchmark.
func npmServerB(b *testing.B, name string, args ...string) []string {
	b.Helper()
	js := filepath.Join(mcpNPMDir(), "node_modules", "@modelcontextprotocol", name, "dist", "index.js")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(js); err != nil || serr != nil {
		b.Skipf("@modelcontextprotocol/%s is not installed in %s: node %v, %v", name, mcpNPMDir(), err, serr)
	}
	return append([]string{node, js}, args...)
}

// TestMCPEverythingContent: the reference everything server's kinds of
// content come back as text the model can read (an image and a resource
// link as a line saying what they are).
func TestMCPEverythingContent(t *testing.T) {
	set := mcpSet(t, nil, 0, mcp.Server{Name: "everything", Command: npmServer(t, "server-everything", "stdio"), Env: []string{"PATH=/usr/bin:/bin"}})
	for _, c := range []struct{ tool, args, want string }{
		{"get-sum", `{"a":2,"b":3}`, "5"},
		{"get-tiny-image", `{}`, "[image image/png"},
		{"get-resource-links", `{"count":2}`, "[resource link "},
		{"echo", `{"message":"after"}`, "after"},
	} {
		tool, ok := set.Tool("everything__" + c.tool)
		if !ok {
			t.Fatalf("no tool %s", c.tool)
		}
		res, err := set.Call(t.Context(), nil, sandbox.ReadOnly, tool, json.RawMessage(c.args))
		if err != nil || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s: %.300q, %v; want %q", c.tool, res.Text, err, c.want)
		}
	}
}

// TestMCPServerEnvHiddenFromReadOnlyCommands: a read-only command cannot
// read the environment of a stdio server's read-only process (where its
// env_file's secrets are): each runs in a Landlock domain of its own,
// which scopes /proc/PID/environ (and a root daemon's server process of
// the approved tier is root's). A control run shows that the command's
// scan reads what it may (its own environment).
func TestMCPServerEnvHiddenFromReadOnlyCommands(t *testing.T) {
	root := t.TempDir()
	sb := startSandbox(t, root)
	const marker = "MCPENVMARKER=0123456789abcdef"
	set := mcpSet(t, sb, 0, mcp.Server{Name: "everything", Command: npmServer(t, "server-everything", "stdio"),
		Env: []string{"PATH=/usr/bin:/bin", marker}, ReadOnly: true})
	if _, ok := set.Tool("everything__echo"); !ok {
		t.Fatal("the server did not start in the read-only tier")
	}
	count := func(pattern string) string {
		var out strings.Builder
		script := `for f in /proc/[0-9]*/environ; do { tr '\0' '\n' < "$f"; } 2>/dev/null; done | grep -c '^` + pattern + `'`
		if _, err := sb.Run(t.Context(), sandbox.ReadOnly, sandbox.Cmd{Args: []string{"/bin/sh", "-c", script}, Dir: root,
			Env: []string{"PATH=/usr/bin:/bin", "OWNMARKER=1"}}, &out); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	if n := count("OWNMARKER="); n == "0" || n == "" {
		t.Fatalf("the command does not see even its own environment (%q): the check proves nothing", n)
	}
	if n := count("MCPENVMARKER="); n != "0" {
		t.Errorf("a read-only command read the MCP server's environment %s times", n)
	}
}
