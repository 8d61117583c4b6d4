// Package mcp connects thinbot to MCP servers as a client: it starts each
// configured server (a stdio command, or a streamable HTTP endpoint), lists
// its tools, and calls them. The kernel (agentcore) offers the tools to the
// model under namespaced names (Tool.Name, "server__tool"), decides every
// call like a command, and records it; this package only speaks MCP, with
// the official Go SDK.
//
// # Tiers
//
// A stdio server runs as up to two processes, one per sandbox tier
// (sandbox.Mode), each started through the Runner the caller passes (the
// kernel sandbox, or a plain child process where there is none): a call
// runs in the process of the tier its decision allows. A tool the config
// marks read-only runs in the ReadOnly process, which cannot write (every
// mount read-only, Landlock: writes only to a private /tmp), however the
// server behaves; an approved call runs in the Approved process. The tool
// list comes from the ReadOnly process, started by Start. A server that
// cannot start read-only (it writes at start) offers no tools: its error
// says why. A streamable HTTP server is one connection; what it may do is
// up to the remote end, so only the approval stands in its way.
//
// # Failures
//
// The tool list is read once, by Start: the model's tools must not change
// under running sessions (notifications/tools/list_changed is ignored).
//
// Every call has a time limit (Server.Timeout); a server that does not
// answer in time is stopped, and so is one whose answer is larger than
// Config.MaxResult (one JSON-RPC message; over HTTP, a JSON answer or one
// event of a stream). A server process that exited
// or was stopped is started again at its tier's next call. Notifications
// (log messages, progress) are dropped. The error of a failed call says
// what happened, with the end of the server's standard error.
package mcp
