package gate

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed default_policy.yaml
var defaultPolicyYAML []byte

// Policy holds the gate's tables as data: the read-only command table with
// its argument rules, the wrappers that are judged by what they wrap, the
// commands that never pass, the deny rules and the sensitive paths.
//
// A Policy is read by Classify, ClassifyIn and ClassifyPath and never
// modified by them, so one Policy may be used from many goroutines at once.
// The With methods return modified copies. The zero Policy has empty tables:
// it confirms every command and path (a NUL byte is still a deny).
type Policy struct {
	// MaxCommandBytes is the longest command that may pass; longer ones are
	// confirmed, because a human cannot review them in a chat message.
	// Zero means 4096.
	MaxCommandBytes int `yaml:"max_command_bytes,omitempty"`
	// Home is the directory `~` stands for when matching sensitive paths.
	// Empty means unknown: a path under `~` is then matched as if it could
	// sit under any directory.
	Home string `yaml:"home,omitempty"`
	// Assignments lists the variable names a command may set in front of
	// itself (`LC_ALL=C sort`) and still pass.
	Assignments []string `yaml:"assignments,omitempty,flow"`
	// TrustedRepos lists directories whose git repositories may be read by
	// git (a repository's own config can run programs).
	TrustedRepos []string `yaml:"trusted_repos,omitempty"`
	// TrustAllRepos lets git pass in any directory.
	TrustAllRepos bool `yaml:"trust_all_repos,omitempty"`
	// RecursiveReadRoots lists the directories under which a recursive
	// content reader (`grep -r`) may pass.
	RecursiveReadRoots []string `yaml:"recursive_read_roots,omitempty"`
	// SensitivePaths are path patterns that are never read without
	// approval: `*` matches within one path element, `**` any number of
	// elements. A pattern that does not start with `/` or `**` matches
	// anywhere (it is read as `**/PATTERN`).
	SensitivePaths []string `yaml:"sensitive_paths,omitempty"`
	// ProtectedPaths are files and folders (everything under them too)
	// that belong to the bot: its config file, state folder (event store,
	// audit.jsonl) and token files. Reading them is confirm; writing them
	// (redirection, dd of=, sed w, sort -o, a command not on the read-only
	// table naming them) is deny.
	ProtectedPaths []string `yaml:"protected_paths,omitempty"`
	// ReadableDevices are the paths under /dev that commands may read
	// without approval. Every other path under /dev is sensitive: raw
	// disks (/dev/sda, /dev/mapper/*, /dev/VG/LV), memory and links to
	// other processes' files.
	ReadableDevices []string `yaml:"readable_devices,omitempty,flow"`
	// EndlessDevices are devices that never reach end of file (/dev/zero,
	// /dev/urandom): a reader of one needs approval, because it grows or
	// runs until a limit stops it, unless its rule bounds the read
	// (Rule.BoundedRead: `head -c 16 /dev/urandom`).
	EndlessDevices []string `yaml:"endless_devices,omitempty,flow"`
	// AllowedDaemons lists the Rule.Daemon commands the operator lets
	// pass (`[docker]`), typically together with the sandbox setting that
	// lets the read-only tier reach the daemon's socket.
	AllowedDaemons []string `yaml:"allowed_daemons,omitempty,flow"`
	// ReadOnlyScripts are absolute script paths that pass when run as
	// exactly `bash|sh PATH args...` or `python3 PATH args...` with plain
	// literal arguments.
	ReadOnlyScripts []string `yaml:"read_only_scripts,omitempty"`
	// Commands is the read-only table: command name to argument rules.
	Commands map[string]*Rule `yaml:"commands,omitempty"`
	// Wrappers run another command given in their arguments; they are
	// judged by what they wrap.
	Wrappers map[string]*Wrapper `yaml:"wrappers,omitempty"`
	// NeverPass maps command name patterns to the reason they always need
	// approval (interpreters, shells, privilege changes, disclosure of the
	// environment). Commands missing from every table are confirmed too;
	// this table only gives them a better reason.
	NeverPass map[string]string `yaml:"never_pass,omitempty"`
	// Deny holds the rules for commands that never run.
	Deny DenyRules `yaml:"deny,omitempty"`

	c *compiled // set by ParsePolicy; nil means compile on each call
}

// Rule gives the argument rules of one read-only command (or of one verb of
// it, such as `git log`). Flags not listed are confirmed.
type Rule struct {
	// Flags are the flags that take no value. A long flag written with a
	// trailing `=` (`--color=`) may be given with or without a value.
	Flags []string `yaml:"flags,omitempty,flow"`
	// ValueFlags take a value: `-n 5`, `-n5`, `--lines 5`, `--lines=5`.
	// Only flags whose value the tool requires belong here: the gate reads
	// the next argument as the value, as getopt does.
	ValueFlags []string `yaml:"value_flags,omitempty,flow"`
	// OptionalValueFlags take a value only when it is attached: `-n5`,
	// `--lines=5` (getopt's optional arguments, `-n[N]`, `--lines[=N]`).
	// The next argument is never their value, so `journalctl -n
	// --vacuum-time=1s` reads --vacuum-time as a flag.
	OptionalValueFlags []string `yaml:"optional_value_flags,omitempty,flow"`
	// WholeFlags means single-dash flags are whole words, never clusters
	// of letters (ip, xxd): a word that is not listed is unknown, except a
	// listed value flag with a number attached (`xxd -l64`).
	WholeFlags bool `yaml:"whole_flags,omitempty"`
	// OptionsFirst means the tool stops reading flags at its first operand
	// (xxd, ip): every later argument is an operand, even `-u`.
	OptionsFirst bool `yaml:"options_first,omitempty"`
	// GlobalFlagsFirst means the command's own flags must come before the
	// verb; after the verb only the verb's flags apply (git: `git log -C`
	// finds copies, `git -C DIR log` changes directory).
	GlobalFlagsFirst bool `yaml:"global_flags_first,omitempty"`
	// ResponseFiles marks tools that replace any argument `@FILE` by the
	// contents of FILE (binutils, wherever it stands): such arguments are
	// never pass.
	ResponseFiles bool `yaml:"response_files,omitempty"`
	// FlagValues maps a value flag to a regular expression its value must
	// match in full (kubectl -o: not go-template-file=FILE, which prints
	// any file).
	FlagValues map[string]string `yaml:"flag_values,omitempty"`
	// OperandPattern, when set, is a regular expression every operand must
	// match in full (sysctl: no `key=value`, which writes; nft: no `;`,
	// which nft reads as a command separator).
	OperandPattern string `yaml:"operand_pattern,omitempty"`
	// NumericFlags allows number flags such as `head -5`.
	NumericFlags bool `yaml:"numeric_flags,omitempty"`
	// UnsafeFlags are flags that write, run programs, leak secrets or never
	// return, with the reason shown to the user.
	UnsafeFlags map[string]string `yaml:"unsafe_flags,omitempty"`
	// RequireFlags must all be present for the command to pass, with the
	// reason shown when one is missing (`docker stats --no-stream`).
	RequireFlags map[string]string `yaml:"require_flags,omitempty"`
	// Operands says what the non-flag arguments are: "none" (the default),
	// "any" (names, patterns, revisions) or "files" (read as content, so
	// each is checked against the sensitive paths).
	Operands string `yaml:"operands,omitempty"`
	// MaxOperands limits the number of operands; zero means no limit.
	MaxOperands int `yaml:"max_operands,omitempty"`
	// UnsafeOperands are operands (or comma/slash separated parts of one)
	// that are never pass, with the reason (`kubectl get secret`).
	UnsafeOperands map[string]string `yaml:"unsafe_operands,omitempty"`
	// ResourceNames marks operands that are kubectl resource names: they
	// are matched against UnsafeOperands case-insensitively and without
	// their .VERSION.GROUP (SECRETS, Secret, secrets.v1., secret/NAME
	// are all secrets).
	ResourceNames bool `yaml:"resource_names,omitempty"`
	// PatternFlags, when set, means the first operand is a pattern, not a
	// file, unless one of these flags gives the pattern (`grep -e`).
	PatternFlags []string `yaml:"pattern_flags,omitempty,flow"`
	// Globs allows unquoted glob patterns in operands.
	Globs bool `yaml:"globs,omitempty"`
	// RecursiveFlags turn a content reader recursive: its operands must
	// then lie under a recursive read root.
	RecursiveFlags []string `yaml:"recursive_flags,omitempty,flow"`
	// Recursive marks a reader that always reads directories recursively
	// (rg): its operands must lie under a recursive read root.
	Recursive bool `yaml:"recursive,omitempty"`
	// Xargs marks commands that may pass behind xargs, which appends
	// operands the gate cannot see: only commands that print metadata.
	// xargs may append flags too (`echo --files0-from=F | xargs wc`), so
	// the command passes behind xargs only when its arguments end with
	// `--`, unless XargsFlags is set.
	Xargs bool `yaml:"xargs,omitempty"`
	// XargsFlags marks a command that is read-only with any flags at all
	// (ls, stat): behind xargs it passes without a closing `--`.
	XargsFlags bool `yaml:"xargs_flags,omitempty"`
	// BoundedRead maps value flags to a regular expression: when one of
	// them is given with a matching value, the command stops after a
	// bounded amount of input and may read an endless device (`head -c
	// 16 /dev/urandom`).
	BoundedRead map[string]string `yaml:"bounded_read,omitempty"`
	// FileFlags are value flags whose value is a file the command reads as
	// content (`tar -f ARCHIVE`, `openssl x509 -in CERT`): it is checked
	// against the sensitive paths like a files operand.
	FileFlags []string `yaml:"file_flags,omitempty,flow"`
	// IgnoreSensitive lists sensitive_paths patterns, exactly as written
	// there, that do not apply to this command's files: it parses them
	// without printing what makes them sensitive (`openssl x509` reads
	// only the certificate of a .pem file, never its key).
	IgnoreSensitive []string `yaml:"ignore_sensitive,omitempty"`
	// Daemon, if set, is the reason the command needs approval unless the
	// policy's allowed_daemons lists it: it asks a daemon outside the
	// sandbox (docker: a root daemon) to act.
	Daemon string `yaml:"daemon,omitempty"`
	// Verbs, when set, makes the first operand a subcommand that must be
	// one of these keys; the verb's rule adds to this rule's flags. A verb
	// may have verbs of its own (`kubectl rollout status`).
	Verbs map[string]*Rule `yaml:"verbs,omitempty"`
	// Check names a built-in check for argument grammars that flags cannot
	// describe: "sed", "find", "git", "git-branch", "ps", "date",
	// "interval" (no operands, or a numeric DELAY and COUNT: vmstat 1 5),
	// "ip" (iproute2: OBJECT [show|list|get] with its prefix matching),
	// "cd" (cd, pushd, popd: moves the directory relative paths are
	// resolved in), "seq" (plain decimals, at most a million lines), "tar"
	// (list a named archive; old-style first word), "jq" (the filter's
	// tokens, as jq's lexer cuts them: no environment, modules, input-free
	// loops, or what never ends on jq 1.6).
	Check string `yaml:"check,omitempty"`
}

// Wrapper describes a command that runs another command given in its
// arguments (`timeout 5 CMD`), so that the wrapped command is judged.
type Wrapper struct {
	// Flags and ValueFlags are the wrapper's own flags, as in Rule.
	Flags      []string `yaml:"flags,omitempty,flow"`
	ValueFlags []string `yaml:"value_flags,omitempty,flow"`
	// FlagValues maps a value flag to a regular expression its value must
	// match in full (xargs -P: a bounded number of processes).
	FlagValues map[string]string `yaml:"flag_values,omitempty"`
	// Positional is the number of operands before the wrapped command
	// (`timeout DURATION`).
	Positional int `yaml:"positional,omitempty"`
	// Assignments allows NAME=value operands (env), subject to the
	// policy's Assignments list.
	Assignments bool `yaml:"assignments,omitempty"`
	// Alone, if set, is the reason the wrapper without a command is never
	// pass (`env` alone prints the environment). Empty means it passes.
	Alone string `yaml:"alone,omitempty"`
	// LookupFlags turn the wrapper into a lookup that runs nothing
	// (`command -v NAME`).
	LookupFlags []string `yaml:"lookup_flags,omitempty,flow"`
	// Xargs means the wrapped command receives extra operands from stdin.
	Xargs bool `yaml:"xargs,omitempty"`
	// NeverPass, if set, is the reason the wrapper never passes even with
	// a read-only command (`sudo`); the wrapped command is still scanned
	// for deny rules.
	NeverPass string `yaml:"never_pass,omitempty"`
	// ScriptFlag is the flag that takes a command string which is parsed
	// as a script for the deny scan (`su -c`).
	ScriptFlag string `yaml:"script_flag,omitempty"`
}

// DenyRules are the rules for commands that never run. They are checked
// everywhere in a command: inside lists, pipelines, subshells, command
// substitutions, function bodies, wrapped commands and `bash -c` strings.
type DenyRules struct {
	// Commands maps command name patterns to the reason they never run.
	Commands map[string]string `yaml:"commands,omitempty"`
	// RecursiveTargets are the paths (after cleaning, with a trailing `/*`
	// removed) that `rm -r`, `chmod -R`, `chown -R` and `chgrp -R` may
	// never touch. `~` stands for the home directory.
	RecursiveTargets []string `yaml:"recursive_targets,omitempty"`
	// RecursiveCommands are the commands RecursiveTargets applies to.
	RecursiveCommands []string `yaml:"recursive_commands,omitempty,flow"`
	// Deleters are the commands that, run by `find ROOT -exec` over a
	// recursive target, destroy it (rm, shred, unlink, truncate…).
	Deleters []string `yaml:"deleters,omitempty,flow"`
	// BlockDevices are patterns of block devices that may not be written,
	// by redirection, `dd of=` or a writer command.
	BlockDevices []string `yaml:"block_devices,omitempty"`
	// DeviceWriters are commands that write to their file operands.
	DeviceWriters []string `yaml:"device_writers,omitempty,flow"`
	// Verbs maps a command to verbs that never run (`systemctl reboot`,
	// `init 0`).
	Verbs map[string]map[string]string `yaml:"verbs,omitempty"`
	// ReadTargets are files that are never read by any command (other
	// processes' memory and environment), matched after resolving /dev/fd
	// and /proc links; commands that only name paths (ls, stat, echo) may
	// still name them.
	ReadTargets []string `yaml:"read_targets,omitempty"`
	// WriteTargets are files that may never be written (redirection or
	// writer command), such as /proc/sysrq-trigger.
	WriteTargets []string `yaml:"write_targets,omitempty"`
	// Shells are the shells whose `-c` string, here-document or piped
	// `echo` script is parsed and scanned for deny rules.
	Shells []string `yaml:"shells,omitempty,flow"`
	// ForkBombs denies a function that calls itself in a pipeline or in
	// the background.
	ForkBombs bool `yaml:"fork_bombs,omitempty"`
}

// policyFile is the on-disk form: the tables plus the merge mode.
type policyFile struct {
	Mode       string `yaml:"mode,omitempty"`
	policyData `yaml:",inline"`
}

// policyData has Policy's fields but not its methods, so marshalling it
// does not call Policy.MarshalYAML again.
type policyData Policy

// DefaultPolicy returns the policy compiled into the binary (the embedded
// default_policy.yaml). Each call parses it again and returns a fresh copy
// the caller owns.
func DefaultPolicy() *Policy {
	p, err := ParsePolicy(defaultPolicyYAML, &Policy{})
	if err != nil {
		// The embedded file is tested; a failure here is a build defect.
		panic("gate: embedded default policy: " + err.Error())
	}
	return p
}

// ParsePolicy reads a policy file. With `mode: replace` the file is the
// whole policy; with `mode: extend` (the default) its lists are appended to
// base's, its map entries replace base's entries of the same key, and its
// non-empty scalars replace base's. A nil base means DefaultPolicy().
// Unknown keys, bad patterns and unknown checks are errors. base is not
// modified.
func ParsePolicy(data []byte, base *Policy) (*Policy, error) {
	var f policyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("gate: parse policy: %w", err)
	}
	file := Policy(f.policyData)
	var out *Policy
	switch f.Mode {
	case "replace":
		out = file.clone()
	case "", "extend":
		if base == nil {
			base = DefaultPolicy()
		}
		out = base.clone()
		out.extend(&file)
	default:
		return nil, fmt.Errorf("gate: parse policy: mode %q is not extend or replace", f.Mode)
	}
	if err := out.validate(); err != nil {
		return nil, fmt.Errorf("gate: parse policy: %w", err)
	}
	out.c = out.compile()
	return out, nil
}

// MarshalYAML gives the policy in the file format ParsePolicy reads, with
// `mode: replace`, so the output of `thinbot gate policy` can be saved,
// edited and loaded as a complete policy.
func (p *Policy) MarshalYAML() (any, error) {
	return policyFile{Mode: "replace", policyData: policyData(*p.orZero())}, nil
}

// YAML returns the policy as a YAML document with a short header comment,
// for `thinbot gate policy`.
func (p *Policy) YAML() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# thinbot gate policy (effective). Load with --policy FILE; see the\n")
	b.WriteString("# embedded default policy for what each key means.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("gate: encode policy: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("gate: encode policy: %w", err)
	}
	return b.Bytes(), nil
}

// WithProtected returns a copy of p that protects these paths and
// everything under them: the bot's config file, its state folder (event
// store, audit.jsonl) and its token and key files. Reading them is
// confirm (commands and read_file); anything else that names them —
// a redirection, dd of=, sed -i or `w FILE`, sort -o, rm, cp, tee, a
// command not on the read-only table — is deny. Relative and empty paths
// are ignored; the caller passes absolute paths.
func (p *Policy) WithProtected(paths ...string) *Policy {
	return p.withPaths(func(q *Policy) *[]string { return &q.ProtectedPaths }, paths)
}

// WithReadOnlyScripts returns a copy of p that passes exactly
// `bash PATH args...`, `sh PATH args...` and `python3 PATH args...` for these
// absolute script paths, when every argument is plain literal text. The
// skills package decides which scripts are read-only; the gate only matches
// the cleaned path. Relative and empty paths are ignored.
func (p *Policy) WithReadOnlyScripts(paths ...string) *Policy {
	return p.withPaths(func(q *Policy) *[]string { return &q.ReadOnlyScripts }, paths)
}

// withPaths returns a compiled copy of p with the absolute paths, cleaned,
// added to the list that field selects.
func (p *Policy) withPaths(field func(*Policy) *[]string, paths []string) *Policy {
	q := p.orZero().clone()
	list := field(q)
	for _, s := range paths {
		if s == "" || !strings.HasPrefix(s, "/") {
			continue
		}
		*list = appendNew(*list, path.Clean(s))
	}
	q.c = q.compile()
	return q
}

func (p *Policy) orZero() *Policy {
	if p == nil {
		return &Policy{}
	}
	return p
}

func appendNew(list []string, items ...string) []string {
	for _, s := range items {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// clone returns a deep copy of p without its compiled cache.
func (p *Policy) clone() *Policy {
	q := *p
	q.c = nil
	q.Assignments = slices.Clone(p.Assignments)
	q.TrustedRepos = slices.Clone(p.TrustedRepos)
	q.RecursiveReadRoots = slices.Clone(p.RecursiveReadRoots)
	q.SensitivePaths = slices.Clone(p.SensitivePaths)
	q.ProtectedPaths = slices.Clone(p.ProtectedPaths)
	q.ReadableDevices = slices.Clone(p.ReadableDevices)
	q.EndlessDevices = slices.Clone(p.EndlessDevices)
	q.AllowedDaemons = slices.Clone(p.AllowedDaemons)
	q.ReadOnlyScripts = slices.Clone(p.ReadOnlyScripts)
	q.Commands = cloneRules(p.Commands)
	if p.Wrappers != nil {
		q.Wrappers = make(map[string]*Wrapper, len(p.Wrappers))
		for k, w := range p.Wrappers {
			if w == nil {
				q.Wrappers[k] = nil
				continue
			}
			c := *w
			c.Flags = slices.Clone(w.Flags)
			c.ValueFlags = slices.Clone(w.ValueFlags)
			c.LookupFlags = slices.Clone(w.LookupFlags)
			c.FlagValues = maps.Clone(w.FlagValues)
			q.Wrappers[k] = &c
		}
	}
	q.NeverPass = maps.Clone(p.NeverPass)
	d := p.Deny
	q.Deny = DenyRules{
		Commands:          maps.Clone(d.Commands),
		RecursiveTargets:  slices.Clone(d.RecursiveTargets),
		RecursiveCommands: slices.Clone(d.RecursiveCommands),
		Deleters:          slices.Clone(d.Deleters),
		BlockDevices:      slices.Clone(d.BlockDevices),
		DeviceWriters:     slices.Clone(d.DeviceWriters),
		WriteTargets:      slices.Clone(d.WriteTargets),
		ReadTargets:       slices.Clone(d.ReadTargets),
		Shells:            slices.Clone(d.Shells),
		ForkBombs:         d.ForkBombs,
	}
	if d.Verbs != nil {
		q.Deny.Verbs = make(map[string]map[string]string, len(d.Verbs))
		for k, v := range d.Verbs {
			q.Deny.Verbs[k] = maps.Clone(v)
		}
	}
	return &q
}

func cloneRules(m map[string]*Rule) map[string]*Rule {
	if m == nil {
		return nil
	}
	out := make(map[string]*Rule, len(m))
	for k, r := range m {
		out[k] = r.clone()
	}
	return out
}

func (r *Rule) clone() *Rule {
	if r == nil {
		return nil
	}
	c := *r
	c.Flags = slices.Clone(r.Flags)
	c.ValueFlags = slices.Clone(r.ValueFlags)
	c.OptionalValueFlags = slices.Clone(r.OptionalValueFlags)
	c.UnsafeFlags = maps.Clone(r.UnsafeFlags)
	c.RequireFlags = maps.Clone(r.RequireFlags)
	c.UnsafeOperands = maps.Clone(r.UnsafeOperands)
	c.FlagValues = maps.Clone(r.FlagValues)
	c.BoundedRead = maps.Clone(r.BoundedRead)
	c.FileFlags = slices.Clone(r.FileFlags)
	c.IgnoreSensitive = slices.Clone(r.IgnoreSensitive)
	c.RecursiveFlags = slices.Clone(r.RecursiveFlags)
	c.PatternFlags = slices.Clone(r.PatternFlags)
	c.Verbs = cloneRules(r.Verbs)
	return &c
}

// extend merges f into p: lists are appended, map entries replaced by key,
// non-empty scalars replace.
func (p *Policy) extend(f *Policy) {
	if f.MaxCommandBytes != 0 {
		p.MaxCommandBytes = f.MaxCommandBytes
	}
	if f.Home != "" {
		p.Home = f.Home
	}
	p.TrustAllRepos = p.TrustAllRepos || f.TrustAllRepos
	p.Assignments = appendNew(p.Assignments, f.Assignments...)
	p.TrustedRepos = appendNew(p.TrustedRepos, f.TrustedRepos...)
	p.RecursiveReadRoots = appendNew(p.RecursiveReadRoots, f.RecursiveReadRoots...)
	p.SensitivePaths = appendNew(p.SensitivePaths, f.SensitivePaths...)
	p.ProtectedPaths = appendNew(p.ProtectedPaths, f.ProtectedPaths...)
	p.ReadableDevices = appendNew(p.ReadableDevices, f.ReadableDevices...)
	p.EndlessDevices = appendNew(p.EndlessDevices, f.EndlessDevices...)
	p.AllowedDaemons = appendNew(p.AllowedDaemons, f.AllowedDaemons...)
	p.ReadOnlyScripts = appendNew(p.ReadOnlyScripts, f.ReadOnlyScripts...)
	p.Commands = mergeMap(p.Commands, cloneRules(f.Commands))
	p.Wrappers = mergeMap(p.Wrappers, f.Wrappers)
	p.NeverPass = mergeMap(p.NeverPass, f.NeverPass)
	d, e := &p.Deny, &f.Deny
	d.Commands = mergeMap(d.Commands, e.Commands)
	d.RecursiveTargets = appendNew(d.RecursiveTargets, e.RecursiveTargets...)
	d.RecursiveCommands = appendNew(d.RecursiveCommands, e.RecursiveCommands...)
	d.Deleters = appendNew(d.Deleters, e.Deleters...)
	d.BlockDevices = appendNew(d.BlockDevices, e.BlockDevices...)
	d.DeviceWriters = appendNew(d.DeviceWriters, e.DeviceWriters...)
	d.WriteTargets = appendNew(d.WriteTargets, e.WriteTargets...)
	d.ReadTargets = appendNew(d.ReadTargets, e.ReadTargets...)
	d.Shells = appendNew(d.Shells, e.Shells...)
	d.Verbs = mergeMap(d.Verbs, e.Verbs)
	d.ForkBombs = d.ForkBombs || e.ForkBombs
}

func mergeMap[V any](dst, src map[string]V) map[string]V {
	if len(src) == 0 {
		return dst
	}
	if dst == nil {
		dst = make(map[string]V, len(src))
	}
	maps.Copy(dst, src)
	return dst
}

var knownChecks = map[string]bool{"": true, "cd": true, "seq": true, "tar": true, "jq": true, "sed": true, "find": true, "git": true, "git-branch": true, "ps": true, "date": true, "interval": true, "ip": true}

// validate reports the first malformed entry of p.
func (p *Policy) validate() error {
	if p.MaxCommandBytes < 0 {
		return fmt.Errorf("max_command_bytes %d is negative", p.MaxCommandBytes)
	}
	for _, pat := range p.SensitivePaths {
		if braceCount(pat) > maxBraceExpansions {
			return fmt.Errorf("sensitive path %q expands to more than %d patterns", pat, maxBraceExpansions)
		}
	}
	for _, list := range [][]string{p.SensitivePaths, p.ProtectedPaths, p.Deny.BlockDevices, p.Deny.WriteTargets, p.Deny.ReadTargets} {
		for _, pat := range list {
			if err := checkPattern(pat); err != nil {
				return err
			}
		}
	}
	for _, list := range [][]string{p.TrustedRepos, p.RecursiveReadRoots, p.ReadOnlyScripts, p.ReadableDevices, p.EndlessDevices} {
		for _, s := range list {
			if !strings.HasPrefix(s, "/") {
				return fmt.Errorf("path %q is not absolute", s)
			}
		}
	}
	for _, m := range []map[string]string{p.NeverPass, p.Deny.Commands} {
		for pat := range m {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				return fmt.Errorf("bad command pattern %q", pat)
			}
		}
	}
	for name, r := range p.Commands {
		if err := r.validate(name); err != nil {
			return err
		}
	}
	for name, w := range p.Wrappers {
		if w == nil {
			return fmt.Errorf("wrapper %q is empty", name)
		}
		if w.Positional < 0 {
			return fmt.Errorf("wrapper %q: positional %d is negative", name, w.Positional)
		}
		if err := checkFlags(name, append(slices.Clone(w.Flags), append(w.ValueFlags, w.LookupFlags...)...)); err != nil {
			return err
		}
		for f, pat := range w.FlagValues {
			if _, err := regexp.Compile(pat); err != nil {
				return fmt.Errorf("wrapper %q: flag_values %s: %w", name, f, err)
			}
		}
	}
	return nil
}

func (r *Rule) validate(name string) error {
	if r == nil {
		return fmt.Errorf("command %q has no rule (write {} for no flags)", name)
	}
	switch r.Operands {
	case "", "none", "any", "files":
	default:
		return fmt.Errorf("command %q: operands %q is not none, any or files", name, r.Operands)
	}
	if !knownChecks[r.Check] {
		return fmt.Errorf("command %q: unknown check %q", name, r.Check)
	}
	if r.MaxOperands < 0 {
		return fmt.Errorf("command %q: max_operands is negative", name)
	}
	if err := checkFlags(name, append(append(slices.Clone(r.Flags), r.ValueFlags...), r.OptionalValueFlags...)); err != nil {
		return err
	}
	if r.OperandPattern != "" {
		if _, err := regexp.Compile(r.OperandPattern); err != nil {
			return fmt.Errorf("command %q: operand_pattern: %w", name, err)
		}
	}
	for f, pat := range r.FlagValues {
		if _, err := regexp.Compile(pat); err != nil {
			return fmt.Errorf("command %q: flag_values %s: %w", name, f, err)
		}
	}
	for f, pat := range r.BoundedRead {
		if _, err := regexp.Compile(pat); err != nil {
			return fmt.Errorf("command %q: bounded_read %s: %w", name, f, err)
		}
	}
	for v, vr := range r.Verbs {
		if err := vr.validate(name + " " + v); err != nil {
			return err
		}
	}
	return nil
}

func checkFlags(name string, flags []string) error {
	for _, f := range flags {
		if !strings.HasPrefix(f, "-") || f == "-" || f == "--" {
			return fmt.Errorf("command %q: %q is not a flag", name, f)
		}
	}
	return nil
}

func checkPattern(pat string) error {
	if pat == "" {
		return errors.New("empty path pattern")
	}
	for _, seg := range strings.Split(pat, "/") {
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("bad path pattern %q: %w", pat, err)
		}
	}
	return nil
}
