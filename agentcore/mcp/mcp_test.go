package mcp

import (
	"strings"
	"testing"
)

// The servers themselves are tested from agentcore (mcp_test.go there),
// where calls are decided and recorded: the reference npm servers, the
// sandbox's tiers, and a fake server that misbehaves.

func TestCheckServer(t *testing.T) {
	for _, c := range []struct {
		s    Server
		want string // "" for none
	}{
		{Server{Name: "fs", Command: []string{"/usr/bin/node", "x.js"}}, ""},
		{Server{Name: "grafana-1", URL: "https://mcp.example.com/mcp"}, ""},
		{Server{Name: "Fs", Command: []string{"/bin/true"}}, "lowercase"},
		{Server{Name: "a__b", Command: []string{"/bin/true"}}, "lowercase"},
		{Server{Name: "", Command: []string{"/bin/true"}}, "lowercase"},
		{Server{Name: "fs"}, "set command (stdio) or url"},
		{Server{Name: "fs", Command: []string{"/bin/true"}, URL: "https://x"}, "not both"},
		{Server{Name: "fs", Command: []string{"node"}}, "not an absolute path"},
		{Server{Name: "fs", URL: "ftp://x"}, "not an http(s) URL"},
	} {
		err := CheckServer(c.s)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckServer(%+v) = %v, want %q", c.s, err, c.want)
		}
	}
}

func TestNewRefusesTwoServersOfOneName(t *testing.T) {
	_, err := New(Config{Servers: []Server{{Name: "fs", Command: []string{"/bin/true"}}, {Name: "fs", URL: "http://127.0.0.1:1/mcp"}}})
	if err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("New with two servers named fs: %v", err)
	}
}

// TestToolName: a tool's name becomes a name every model API accepts
// ([A-Za-z0-9_-], byte by byte); the server's own name is kept for the
// call.
func TestToolName(t *testing.T) {
	for in, want := range map[string]string{"read_file": "read_file", "get-env": "get-env", "db.query": "db_query", "a/b c": "a_b_c", "été": "__t__"} {
		if got := toolName(in); got != want {
			t.Errorf("toolName(%q) = %q, want %q", in, got, want)
		}
	}
}
