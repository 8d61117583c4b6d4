// Package sandbox is the kernel-enforced line behind the gate: every command
// the agent runs is started by a small helper process that lives in its own
// namespaces, so a command the gate misjudged still cannot do what its
// verdict does not allow.
//
// The helper is the thinbot binary itself, re-executed once per mode when
// the daemon starts (as runc and bwrap do), before the daemon marks itself
// non-dumpable. It sets up its namespaces once and then starts commands on
// request over a socketpair, so a command pays a fork and exec, not a Go
// start-up. Two helpers run (the read-only one alone with Config.NoApproved,
// as on a fleet target, where thinbot sandbox exec never runs an approved
// command):
//
//   - ReadOnly, for pass verdicts: a new user and mount namespace; every
//     mount is read-only (mount_setattr, recursive); /dev holds only null,
//     zero, full, random, urandom, tty and pts. Each command is started from
//     a thread of its own (locked, never reused), which first unshares a
//     mount namespace with empty private /tmp, /var/tmp and /dev/shm
//     (workspaces below them bound back; a missing one is refused at start),
//     covers the host's control sockets with /dev/null, and enters a
//     Landlock domain of the command's own: read and execute everywhere,
//     write only the private tmp dirs, TCP connect only to listed ports and
//     no bind (ABI 4+), signals and abstract unix sockets scoped (ABI 6+).
//     The thread, and so the command, inherits the seccomp filter the
//     helper installs on all its threads once at start: it refuses every
//     inet socket but TCP, and io_uring. The helper itself is in no domain, so no command can
//     signal or ptrace it, whichever thread started it. A root daemon's
//     commands run as an unprivileged user (thinbot-ro or nobody) with an
//     empty bounding set; no_new_privs is set.
//   - Approved, for confirm verdicts a human approved: a mount namespace (and
//     a user namespace when the daemon is not root), no other restriction on
//     the file system, and a Landlock domain that grants every file right:
//     it forbids mounts and ptrace attach (/proc/<pid>/mem) of processes
//     outside it. A root daemon's approved commands lose CAP_SYS_PTRACE and
//     see core_pattern, modprobe and the other usermode-helper knobs
//     read-only.
//
// Limits (Limits: memory, processes, CPU, file size) are rlimits set on each
// command while the kernel holds it stopped after its exec (it is started
// traced, and detached once they are set), so they bind from its first
// instruction and the helper stays unlimited. Where the daemon may create
// cgroups (Config.Cgroup; cgroup_linux.go), each command of both tiers also
// gets a group of its own, which caps its processes together (memory and
// swap, processes and threads, a share of a CPU) and binds root too: v2 in
// the daemon's delegated group (systemd Delegate=yes; the daemon moves
// itself into a leaf, "daemon", and command groups are its siblings; in
// auto mode only a group systemd marked delegated, xattr trusted.delegate
// or user.delegate, or for a user other than root one it owns: a root
// shell's session scope or a unit without Delegate=yes is systemd's, however
// writable to root), else
// v1 where the memory, pids and cpu hierarchies are writable (root). The
// command starts in its group (v2: moved in while stopped at its exec,
// before its first instruction; v1: the starting thread moves itself in
// before the fork and back after it), and when it
// exits whatever is left in the group is killed (cgroup.kill, or every pid
// of cgroup.procs until none is left), so a child it left behind, even in a
// session of its own, does not outlive it. The emptied group is kept for a
// later command (at most four per helper; its counters are read as deltas)
// or removed: making and removing groups per command cost about 0.5 ms
// more of the helper's CPU per command, and every removed memory cgroup
// lingers in the kernel while pages are charged to it. The helper removes
// its groups when it stops, the daemon those of a helper that died. The
// Result says when the command was killed at the memory limit or a fork
// failed at the process limit. Each helper makes one group with the
// commands' limits at start, so a limit the kernel refuses (a value out of
// its range) is found then: with the version asked for by name
// (Config.Cgroup "v1" or "v2") Start fails with the reason; in auto mode,
// where no group can be made at start, the helpers fall back to rlimits
// and Info.LimitsBy and Info.NotInForce say why and what; a group that
// cannot be made for one command fails that command (closed): it would
// otherwise run without the caps the operator was told are in force.
// Approved commands see the cgroup file systems read-only, so that root
// cannot move itself out of its group, and on v2 commands get no clone3
// (ENOSYS, as on a kernel without it; the C library falls back to clone):
// its CLONE_INTO_CGROUP starts a child in any group whose directory the
// caller can open, read-only mount or not. The read-only helper is a child
// subreaper and reaps every orphan at once. A helper that dies fails the
// command it was running, whose failure kills and removes the dead
// helper's groups; the next command starts a new helper.
//
// In both, the bot's own secrets and state (the state dir with the chain and
// audit file, the config file, token and key files) are covered: directories
// by an empty read-only tmpfs, files by /dev/null (their names may still be
// listed, in /proc/<pid>/mountinfo, as the mounts that hide them; their
// content cannot be read). A helper gets its configuration in a sealed
// memfd, not on its command line (/proc/<pid>/cmdline, which every process
// reads). HideEnviron empties the daemon's /proc/<pid>/environ and cuts its
// command line to the command ("thinbot serve"). Host processes and the
// network state stay visible (no PID or network namespace), so ps, ss,
// journalctl and systemctl status keep working.
//
// Limits, by design: what a listed control socket or the system bus lets
// the command's user do is up to the daemon behind it; TCP rules are by port,
// not host (Landlock); without cgroups (an ordinary user on a v1 host, a v2
// group not delegated) the limits are rlimits only: per process (and
// RLIMIT_NPROC per user, with root exempt), not a cap on a command's
// processes together. Mounts made by an approved command stay in its
// namespace.
//
// A command reads /dev/null and writes its stdout and stderr to one stream,
// unless Cmd.Stdin or Cmd.Stderr says otherwise: a server that speaks over
// stdio (an MCP server, package mcp) runs in a tier like any command.
//
// Where the kernel refuses user namespaces, mount_setattr or Landlock, Start
// fails and the caller fails closed (every command needs an approval).
// CheckSandbox probes a running sandbox for `thinbot sandbox check`.
package sandbox
