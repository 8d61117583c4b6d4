// Package fleet runs gated commands on many hosts over the system's OpenSSH
// client: an inventory (hosts and groups from the configuration or an
// Ansible INI or YAML inventory), Ansible-like host patterns, a fan-out
// runner with a concurrency limit and a per-host timeout, and a summary
// that groups identical outputs (web-[01-17]).
//
// It knows nothing of the gate or the chain. agentcore decides (gate,
// approval, chain) and then calls Run with the mode the verdict allows,
// the sandbox's Mode (the one import of ours besides textfmt):
// sandbox.ReadOnly logs in with the group's read-only identity,
// sandbox.Approved with its privileged one. Privilege separation is on the
// remote side; the local ssh client runs from the daemon, not in the
// kernel sandbox, because it must read the bot's SSH keys, agent socket
// and ControlMaster sockets.
//
// What ssh is given: BatchMode=yes (never a prompt), strict host key
// checking (an unknown or changed key fails the host, reported plainly
// with both fingerprints), no agent or X11 forwarding, no port
// forwardings, no local command, no escape character, no terminal (-T),
// one ControlMaster connection per host and identity (never shared by the
// read-only and the privileged identity), and the caller's environment
// exactly (agentcore passes the allowlisted one: no API key, no chat
// token). The command goes out behind a POSIX sh prelude (RemoteCommand):
// an empty stdin, pagers set to cat, a start marker on stderr, and a
// watcher that hangs the command's process group up when the session ends,
// which is how killing the client (stop, timeout) ends the remote command.
// Command-line options win over ssh_config, so ssh_config cannot turn
// forwarding back on; everything else in it (ProxyJump, certificates,
// ports, users) applies.
package fleet
