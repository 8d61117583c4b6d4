package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/mcp"
	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// The mcp_servers: section (deploy/mcp.md): MCP servers whose tools join
// the model's, each call decided like a command (agentcore, package mcp).

// mcpServerConfig is one entry of mcp_servers.
type mcpServerConfig struct {
	Name string `yaml:"name"`
	// Command is a stdio server: the program (an absolute path) and its
	// arguments. Dir is its working directory ("" means /).
	Command []string `yaml:"command"`
	Dir     string   `yaml:"dir"`
	// Env are NAME=value variables that are no secret; EnvFile holds
	// NAME=value lines that are (a token): hidden from every command,
	// masked in all output, passed to the server process only.
	Env     []string `yaml:"env"`
	EnvFile string   `yaml:"env_file" secret:"file"`
	// URL is a streamable HTTP server instead; HeadersFile holds
	// "Name: value" lines sent with every request (Authorization).
	URL         string `yaml:"url"`
	HeadersFile string `yaml:"headers_file" secret:"file"`
	// ReadOnly marks every tool of the server read-only, ReadOnlyTools
	// the tools named: those run without an approval.
	ReadOnly      bool     `yaml:"read_only"`
	ReadOnlyTools []string `yaml:"read_only_tools"`
	// Timeout bounds each call; unset means 60s. A start may take it or
	// a minute, whichever is longer.
	Timeout duration `yaml:"timeout"`
}

// checkMCP checks the mcp_servers section.
func (c *daemonConfig) checkMCP(bad func(string, ...any), who daemonUser) {
	seen := map[string]bool{}
	for i, s := range c.MCPServers {
		key := fmt.Sprintf("mcp_servers[%d]", i)
		if s.Name != "" {
			key = "mcp_servers " + s.Name
		}
		if err := mcp.CheckServer(mcp.Server{Name: s.Name, Command: s.Command, URL: s.URL}); err != nil {
			bad("%v", err)
		} else if seen[s.Name] {
			bad("%s: named twice", key)
		}
		seen[s.Name] = true
		if len(s.Command) > 0 && strings.HasPrefix(s.Command[0], "/") {
			if st, err := os.Stat(s.Command[0]); err != nil {
				bad("%s: command: %v", key, err)
			} else if st.IsDir() || st.Mode()&0o111 == 0 {
				bad("%s: command %s is not an executable file", key, s.Command[0])
			}
		}
		if s.URL != "" && (len(s.Env) > 0 || s.EnvFile != "" || s.Dir != "") {
			bad("%s: env, env_file and dir are for a stdio server (command), not a url", key)
		}
		if s.Dir != "" && !filepath.IsAbs(s.Dir) {
			bad("%s: dir %q is not an absolute path", key, s.Dir)
		} else if st, err := os.Stat(s.Dir); s.Dir != "" && (err != nil || !st.IsDir()) {
			bad("%s: dir %s is not a directory", key, s.Dir)
		}
		if s.URL == "" && s.HeadersFile != "" {
			bad("%s: headers_file is for a url, not a command", key)
		}
		for _, kv := range s.Env {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
				bad("%s: env %q: want NAME=value", key, kv)
			} else if agentcore.SecretName(name) {
				bad("%s: env %s looks like a secret: put it in env_file, which commands cannot read", key, name)
			}
		}
		for _, f := range []struct{ key, path string }{{"env_file", s.EnvFile}, {"headers_file", s.HeadersFile}} {
			if f.path == "" {
				continue
			}
			if err := checkSecretFileAs(f.path, who); err != nil {
				bad("%s: %s: %v", key, f.key, err)
			}
		}
		s.Timeout.checkOrUnset(bad, key+": timeout", "60s")
	}
}

// mcpServers builds the Set of the mcp_servers section, not started. A
// stdio server's environment is PATH (command_path), LANG and HOME (/),
// then env, then env_file's lines; nothing of the daemon's own.
func (c *daemonConfig) mcpServers(logger *slog.Logger) (*mcp.Set, error) {
	if len(c.MCPServers) == 0 {
		return nil, nil
	}
	path := c.CommandPath
	if path == "" {
		path = agentcore.DefaultPath
	}
	var servers []mcp.Server
	for _, s := range c.MCPServers {
		sv := mcp.Server{Name: s.Name, Command: s.Command, Dir: s.Dir, URL: s.URL,
			ReadOnly: s.ReadOnly, ReadOnlyTools: s.ReadOnlyTools, Timeout: s.Timeout.Duration}
		if s.URL == "" {
			sv.Env = append([]string{"PATH=" + path, "HOME=/", "LANG=C.UTF-8"}, s.Env...)
			lines, err := secretLines(s.EnvFile, "=")
			if err != nil {
				return nil, fmt.Errorf("mcp_servers %s: env_file: %w", s.Name, err)
			}
			for _, kv := range lines {
				sv.Env = append(sv.Env, kv[0]+"="+kv[1])
			}
		} else {
			lines, err := secretLines(s.HeadersFile, ":")
			if err != nil {
				return nil, fmt.Errorf("mcp_servers %s: headers_file: %w", s.Name, err)
			}
			sv.Headers = map[string]string{}
			for _, kv := range lines {
				sv.Headers[kv[0]] = kv[1]
			}
		}
		servers = append(servers, sv)
	}
	return mcp.New(mcp.Config{Servers: servers, Logger: logger})
}

// secretLines reads "name SEP value" lines of a secret file ("" reads
// none), skipping blank lines and # comments.
func secretLines(path, sep string) ([][2]string, error) {
	text, err := readSecret(path)
	if err != nil || text == "" {
		return nil, err
	}
	var out [][2]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, sep)
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("a line without %q (want name%svalue)", sep, sep)
		}
		out = append(out, [2]string{strings.TrimSpace(name), strings.Trim(strings.TrimSpace(value), `"'`)})
	}
	return out, nil
}

// startMCP starts the servers of set in the daemon's sandbox. Where the kernel refuses the sandbox, stdio servers
// are not started (fail closed: their read-only tier could write); with
// sandbox: off they run unconfined, like commands.
func startMCP(ctx context.Context, set *mcp.Set, sbx *sandboxSetup) {
	if set == nil {
		return
	}
	var r mcp.Runner
	switch {
	case sbx.sb != nil:
		r = sbx.sb
	case sbx.noSandbox != "":
		r = refuseRunner{sbx.noSandbox}
	}
	set.Start(ctx, r) // it logs what each server offers, or why nothing
}

// refuseRunner starts nothing: the sandbox a stdio server's tier needs is
// unavailable.
type refuseRunner struct{ why string }

func (r refuseRunner) Run(context.Context, sandbox.Mode, sandbox.Cmd, io.Writer) (sandbox.Result, error) {
	return sandbox.Result{}, fmt.Errorf("the kernel sandbox is unavailable (%s): stdio MCP servers do not start", r.why)
}
