package skills

import (
	"log/slog"
	"os/exec"
)

// Skill is one loaded skill folder. All paths are absolute with symlinks
// resolved, so the script paths the model sees after {SKILL_DIR} is filled in
// are exactly the paths in ReadOnlyScripts.
type Skill struct {
	// Name identifies the skill: the frontmatter name, or the folder's name
	// when the frontmatter has none.
	Name string
	// Description is the frontmatter description, trimmed and whole: one
	// over the format's 1,024 characters loads with a warning, and only its
	// index line is cut (see Set.Index).
	Description string
	// Dir is the absolute, symlink-resolved skill folder.
	Dir string
	// File is the absolute path of SKILL.md inside Dir.
	File string
	// Requires is merged from the top-level requires field and the
	// metadata.{openclaw,clawdbot,moltbot,clawdis}.requires blocks.
	Requires Requires
	// ReadOnlyScripts are absolute, resolved script paths inside Dir that
	// the skill declares read-only and that passed validation (inside the
	// folder, regular file, not writable by the bot's user).
	ReadOnlyScripts []string
	// Commands are the commands the skill declares for people to run
	// without the model (metadata.thinbot.commands).
	Commands []Command
	// AllowedTools is the allowed-tools field as a list (a string is split
	// on spaces and commas). thinbot does not act on it.
	AllowedTools []string
	// License and Compatibility are the free-text fields of the open format.
	License, Compatibility string
	// Metadata is the metadata field, decoded as nested maps and lists.
	Metadata map[string]any
	// Extra holds every top-level field thinbot does not understand; it is
	// kept and ignored.
	Extra map[string]any
	// Warnings lists problems that did not stop the skill from loading.
	Warnings []string

	// SHA256 is the skill's Digest when Options.Lock pinned it at load.
	SHA256 string

	// pinned maps each read-only script to its pinned SHA-256 (with a lock).
	pinned map[string]string
	// maxFile is the largest SKILL.md ReadBody reads (Options.MaxFileSize).
	maxFile int64
}

// Requires is what a skill needs from the machine. A skill whose
// requirements are not met is hidden from the model.
type Requires struct {
	// Bins must all be executables on PATH.
	Bins []string `json:"bins,omitempty"`
	// AnyBins needs at least one executable on PATH (OpenClaw's anyBins).
	AnyBins []string `json:"any_bins,omitempty"`
	// Env lists environment variables that must be set and non-empty.
	Env []string `json:"env,omitempty"`
	// Python is the minimum python3 version, such as "3.10".
	Python string `json:"python,omitempty"`
	// OS lists the operating systems the skill runs on (GOOS names; OpenClaw's
	// "win32" is read as "windows"); empty means any.
	OS []string `json:"os,omitempty"`
}

// Filtered is a skill folder hidden from the model, and why.
type Filtered struct {
	// Dir is the folder as found in the search path.
	Dir string `json:"dir"`
	// Name is the skill's name if the frontmatter could be read that far,
	// else the folder's name.
	Name string `json:"name"`
	// Reason says why the skill is hidden, in one line.
	Reason string `json:"reason"`
}

// Shadowed is a skill hidden by an earlier skill of the same name.
type Shadowed struct {
	Name string `json:"name"`
	// Dir is the hidden skill's folder.
	Dir string `json:"dir"`
	// By is the folder of the skill that is used instead.
	By string `json:"by"`
}

// Set is the result of Load. A Set is immutable after Load returns and may be
// used concurrently.
type Set struct {
	// Skills are the loaded skills, sorted by name.
	Skills []Skill
	// Filtered are the folders hidden from the model, in search order.
	Filtered []Filtered
	// Shadowed are the skills hidden by an earlier one of the same name.
	Shadowed []Shadowed
}

// Probe is how Load checks requirements. It is injected so the package reads
// no environment itself and tests control what is "installed". The zero
// Probe looks executables up on PATH, treats every environment variable as
// unset, runs python3 once if a skill asks for a version, and checks
// writability for UID 0 (root); set UID to -1 for the current user.
type Probe struct {
	// LookPath finds an executable; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// Getenv reads an environment variable; nil means every variable is unset.
	Getenv func(string) string
	// Python reports python3's version; nil means a PythonProbe of the
	// Load's own (python3 -I -S, run once, bounded by a minute). A
	// daemon loading several skill sets passes one probe's Version to
	// each, so that python3 runs once.
	Python func() (major, minor int, err error)
	// UID is the user the bot runs as, for the not-writable check of
	// read-only scripts; -1 means os.Getuid(). Root can write any file, so a
	// bot running as root gets no read-only scripts.
	UID int
}

// Options configures Load and LoadOne. The zero Options is usable.
type Options struct {
	// MaxFileSize is the largest SKILL.md read; 0 means 256 KiB. A larger
	// file is filtered without being read.
	MaxFileSize int64
	// Probe checks requirements.
	Probe Probe
	// Lock, when not nil, pins the skill set: a skill it does not name, or
	// whose files differ from it, is hidden (ErrNotLocked, ErrLockMismatch).
	Lock Lock
	// Logger receives one line per filtered or shadowed skill; nil discards.
	Logger *slog.Logger
}

const defaultMaxFileSize = 256 << 10

func (o Options) maxFileSize() int64 {
	if o.MaxFileSize > 0 {
		return o.MaxFileSize
	}
	return defaultMaxFileSize
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (p Probe) lookPath(name string) error {
	if p.LookPath != nil {
		_, err := p.LookPath(name)
		return err
	}
	_, err := exec.LookPath(name)
	return err
}

func (p Probe) getenv(name string) string {
	if p.Getenv != nil {
		return p.Getenv(name)
	}
	return ""
}
