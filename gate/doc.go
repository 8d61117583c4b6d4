// Package gate classifies shell commands and paths before thinbot runs or
// reads them. It is pure: no I/O, no clock, no environment, and it imports
// nothing of thinbot's. Every command the model wants to run gets one of
// three verdicts:
//
//   - Deny: never runs (whole-system destruction, the bot's own state as a
//     write target, other processes' memory and environment);
//   - Confirm: runs only after a human approves it;
//   - Pass: read-only, runs at once.
//
// # Types
//
// A [Policy] holds the tables as data: the read-only commands with their
// argument rules ([Rule]), the wrappers judged by what they wrap
// ([Wrapper]), the deny rules ([DenyRules]) and the sensitive, protected
// and readable paths. [DefaultPolicy] returns the policy embedded from
// default_policy.yaml; [ParsePolicy] extends or replaces it from a policy
// file; the With methods return copies with the bot's own paths added.
// [Policy.ClassifyIn] judges a command in a working directory,
// [Policy.ClassifyPath] a path for the read_file tool; both return a
// [Decision]: the [Verdict], a reason for the chat and the rule name for
// the audit log.
//
// # How a command is judged
//
// The command is parsed with mvdan.cc/sh (bash dialect). The deny scan
// walks the whole tree (lists, pipelines, subshells, substitutions,
// function bodies, wrapped commands, `bash -c` strings) and follows `cd`,
// so `cd / && rm -rf *` is `rm -rf /*`. Then every simple command must be
// on the read-only table with its arguments read as the tool itself reads
// them, or the whole command is confirm:
//
//   - flags follow getopt: bundled short flags (-la), attached values
//     (-n5, --lines=5), and optional arguments that never take the next
//     word (journalctl -n, date -I, od -w, git -U); a long flag must be
//     spelled in full, since an abbreviation (--in-pl) is not on the table;
//   - tools with their own parsers are modelled as such: xxd and ip read
//     whole-word flags and stop at their first operand, git's own flags
//     come before the subcommand, iproute2 matches objects and commands by
//     prefix (`ip l s` is `ip link set`), binutils expand @FILE, nft reads
//     `;` as a separator, sed scripts are parsed as GNU sed does (labels,
//     bracket expressions, e, r, w, s///e, s///w);
//   - xargs may append flags as well as operands: its command passes only
//     if it is safe with any operands and its flags end with `--`;
//   - paths are resolved as the kernel would before they are matched:
//     /dev/fd is /proc/self/fd, so /dev/fd/../../1/environ is
//     /proc/1/environ; a path through /proc/PID/{cwd,root,exe,fd/N} is
//     sensitive, and so is every device not in readable_devices; a device
//     in endless_devices only for a read its rule bounds (head -c N); a
//     process's memory, address space and environment files are one
//     sensitive_paths rule for every process and thread,
//     /proc/*/{,task/*/}{environ,mem,maps,smaps,…} (brace alternatives
//     expand as in bash), matched after that resolution;
//   - jq filters are read token by token as jq 1.6's lexer cuts them
//     (`$ ENV` is $ENV, .env is a field): the environment, modules,
//     input-free loops and what never ends on jq 1.6 (gsub on a regex
//     that can match the empty string, indices("")) are confirm;
//   - output flags that encode what the policy refuses elsewhere are off
//     the table: `helm status -o json|yaml` (values and Secret
//     manifests); Secrets are confirm in every kubectl form;
//   - an unquoted [ is a glob only when a ] closes it, as bash reads it
//     (jq .items[] passes);
//   - the working directory follows cd as bash reads it (-L, -P, -e, --,
//     cd -, ~+, ~-, pushd, popd); after a cd to a directory the gate
//     cannot name (cd -, ~user, cd -P through ..) a relative read is
//     confirm, and so is a read under ~user or ~- (~root is /root);
//   - a `for NAME in WORDS` loop passes when its body passes for every
//     item, with $NAME standing for the item;
//   - a command whose rule names a daemon (docker, which runs as root
//     outside the sandbox) passes only when allowed_daemons lists it.
//
// # What runs is what was judged
//
// The verdict is on the tree the parser read, and the shell must run that
// tree: [Decision.Program] is the tree rendered back to text, and callers
// hand it, not the command, to bash. Where bash is known to read text
// otherwise than the parser (a comment whose line ends in a backslash, a
// backslash-newline in an unquoted here-document) and wherever the
// rendering does not parse back to the same tree, the command is confirm
// and every other reading of it is scanned for deny rules too, in nested
// scripts as well. bash_test.go holds the differential harness that runs
// passed commands under the real bash and compares what it reaches with
// what the gate judged.
//
// The deny scan also denies writes to the kernel's program-running knobs
// (kernel.core_pattern, kernel.modprobe, binfmt_misc, uevent_helper…) by
// redirection, writer commands and sysctl. Anything the gate does not
// understand, and anything that fails to parse, is confirm.
//
// # Caveats
//
// The gate is lexical. It cannot see symbolic links other than the /proc
// and /dev/fd ones it knows, what a variable holds, or what a program does
// with its input; a command that hides its target behind $VAR is confirm,
// not deny. The gate is the first line; the kernel sandbox that runs pass
// verdicts read-only is the second. All methods of Policy may be called
// concurrently; a Policy is never modified after it is built.
package gate
