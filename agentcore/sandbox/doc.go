// Package sandbox is the kernel-enforced line behind the gate: every command
// the agent runs is started by a small helper process that lives in its own
// namespaces and Landlock domain, so a command the gate misjudged still
// cannot do what its verdict does not allow.
//
// The helper is the thinbot binary itself, re-executed once per mode when
// the daemon starts (as runc and bwrap do), before the daemon marks itself
// non-dumpable. It sets up its namespaces once and then starts commands on
// request over a socketpair, so a command pays a fork and exec, not a Go
// start-up. Two helpers run:
//
//   - ReadOnly, for pass verdicts: a new user and mount namespace; every
//     mount is read-only (mount_setattr, recursive); /tmp, /var/tmp and
//     /dev/shm are private tmpfs (workspaces below them are bound back
//     read-only); /dev holds only null, zero, full, random, urandom, tty and
//     pts, so raw block devices and /dev/mem are gone; a Landlock domain
//     allows reading and executing everywhere and writing only to the
//     private tmp dirs and /dev/null; signals and abstract unix sockets are
//     scoped to the command (Landlock ABI 6+); all capabilities are dropped
//     but CAP_DAC_READ_SEARCH (when the daemon is root, so root-only logs
//     stay readable); no_new_privs is set.
//   - Approved, for confirm verdicts a human approved: a mount namespace (and
//     a user namespace when the daemon is not root), no other restriction on
//     the file system, and a Landlock domain that grants every file right:
//     its only effect is that the command cannot ptrace or open
//     /proc/<pid>/{environ,mem,root,...} of processes outside its domain,
//     the daemon among them.
//
// In both, the bot's own secrets and state (the state dir with the chain and
// audit file, the config file, token and key files) are covered: directories
// by an empty read-only tmpfs, files by /dev/null. Host processes, sockets
// and the network stay visible (no PID or network namespace), so ps, ss,
// systemctl status, journalctl, docker ps and kubectl get keep working.
//
// Limits, by design: IPC to privileged daemons (D-Bus, docker.sock, the
// Kubernetes API) is not filtered — a read-only verdict for `docker rm` would
// still reach dockerd, so the gate stays the line for those. Mounts made by an
// approved command stay in its namespace. When the daemon runs as an ordinary
// user, set-user-ID programs (sudo) do not gain privileges in its commands,
// and ps shows other users' processes as owned by nobody in read-only mode.
//
// Where the kernel refuses user namespaces, mount_setattr or Landlock, Start
// fails and the caller fails closed (every command needs an approval).
package sandbox
