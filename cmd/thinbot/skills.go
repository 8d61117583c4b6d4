package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/thinbot/thinbot/agentcore/textfmt"
	"github.com/thinbot/thinbot/skills"
)

// dirList is a repeatable --dir flag.
type dirList []string

func (d *dirList) String() string { return strings.Join(*d, ":") }

func (d *dirList) Set(v string) error {
	*d = append(*d, v)
	return nil
}

// errSkillInvalid is returned by `thinbot skills check` for a skill that
// would be hidden from the model.
var errSkillInvalid = errors.New("skill is not usable")

// cmdSkills lists the skills of the search path, or checks one skill folder:
//
//	thinbot skills [--dir D]... [--json] [--index] [--context-tokens N] [--query TEXT]
//	thinbot skills check DIR
//	thinbot skills install [--bot-user thinbot] DIR
//	thinbot skills lock [--dir D]... [--out skills.lock]
func cmdSkills(_ context.Context, e *env, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return cmdSkillsCheck(e, args[1:])
		case "install":
			return cmdSkillsInstall(e, args[1:])
		case "lock":
			return cmdSkillsLock(e, args[1:])
		}
	}
	fs := newFlags(e, "skills")
	var dirs dirList
	fs.Var(&dirs, "dir", "skill search-path folder, repeatable, earlier shadows later\n(default: $AGENT_SKILLS_DIR, colon-separated, then ./skills)")
	asJSON := fs.Bool("json", false, "print JSON for scripts and reviewers")
	index := fs.Bool("index", false, "print the skill index exactly as the model's system prompt holds it")
	ctxTokens := fs.Int("context-tokens", 0, "model context window in tokens, for the --index budget (0: 8000-byte default)")
	query := fs.String("query", "", "a session's first message, which --index ranks the skills against")
	lockFile := fs.String("lock", "", "a skills.lock: skills whose files differ are shown hidden, with the reason (default: $AGENT_SKILLS_LOCK)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: thinbot skills [--dir D]... [--json] [--index]\n       thinbot skills check DIR\n       thinbot skills install [--bot-user NAME] DIR\n       thinbot skills lock [--dir D]... [--out FILE]")
		fs.PrintDefaults()
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: skills: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if len(dirs) == 0 {
		dirs = defaultSkillDirs(e)
	}
	if *lockFile == "" {
		*lockFile = e.getenv("AGENT_SKILLS_LOCK")
	}
	lock, err := readSkillsLock(*lockFile)
	if err != nil {
		return err
	}
	set := skills.Load(dirs, skills.Options{Probe: skills.Probe{Getenv: e.getenv, UID: -1}, Lock: lock})
	switch {
	case *asJSON:
		return writeSkillsJSON(e.stdout, dirs, set)
	case *index:
		opts := skills.IndexOptionsFor(*ctxTokens, 0, *query)
		idx := set.IndexWith(opts)
		fmt.Fprintln(e.stdout, idx)
		fmt.Fprintf(e.stderr, "%d skills, %d bytes (budget %d, up to %d for short descriptions), about %d tokens\n",
			len(set.Skills), len(idx), opts.Budget, opts.MaxBudget, skills.EstimateTokens(idx))
		return nil
	}
	writeSkillsText(e.stdout, dirs, set)
	return nil
}

// defaultSkillDirs is the search path: AGENT_SKILLS_DIR, then ./skills.
func defaultSkillDirs(e *env) []string {
	var dirs []string
	for d := range strings.SplitSeq(e.getenv("AGENT_SKILLS_DIR"), ":") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	return append(dirs, "skills")
}

func writeSkillsText(w io.Writer, dirs []string, set skills.Set) {
	fmt.Fprintf(w, "search path: %s\n", strings.Join(dirs, ":"))
	fmt.Fprintf(w, "\nloaded (%d):\n", len(set.Skills))
	for _, s := range set.Skills {
		fmt.Fprintf(w, "  %s  %s\n", s.Name, s.Dir)
		fmt.Fprintf(w, "      %s\n", oneLine(s.Description, 200))
		for _, p := range s.ReadOnlyScripts {
			fmt.Fprintf(w, "      read-only: %s\n", p)
		}
		for _, c := range s.Commands {
			fmt.Fprintf(w, "      command: !%s\n", c.Usage())
		}
		if s.SHA256 != "" {
			fmt.Fprintf(w, "      pinned: sha256 %s\n", s.SHA256)
		}
		for _, warn := range s.Warnings {
			fmt.Fprintf(w, "      warning: %s\n", warn)
		}
	}
	if len(set.Shadowed) > 0 {
		fmt.Fprintf(w, "\nshadowed (%d):\n", len(set.Shadowed))
		for _, s := range set.Shadowed {
			fmt.Fprintf(w, "  %s  %s\n      shadowed by %s\n", s.Name, s.Dir, s.By)
		}
	}
	if len(set.Filtered) > 0 {
		fmt.Fprintf(w, "\nhidden (%d):\n", len(set.Filtered))
		for _, f := range set.Filtered {
			fmt.Fprintf(w, "  %s  %s\n      %s\n", f.Name, f.Dir, f.Reason)
		}
	}
}

// skillJSON is one loaded skill in `thinbot skills --json`.
type skillJSON struct {
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Dir             string          `json:"dir"`
	File            string          `json:"file"`
	Requires        skills.Requires `json:"requires"`
	ReadOnlyScripts []string        `json:"read_only_scripts"`
	Warnings        []string        `json:"warnings"`
}

func writeSkillsJSON(w io.Writer, dirs []string, set skills.Set) error {
	out := struct {
		SearchPath []string          `json:"search_path"`
		Skills     []skillJSON       `json:"skills"`
		Shadowed   []skills.Shadowed `json:"shadowed"`
		Filtered   []skills.Filtered `json:"filtered"`
	}{SearchPath: dirs, Skills: []skillJSON{}, Shadowed: set.Shadowed, Filtered: set.Filtered}
	if out.Shadowed == nil {
		out.Shadowed = []skills.Shadowed{}
	}
	if out.Filtered == nil {
		out.Filtered = []skills.Filtered{}
	}
	for _, s := range set.Skills {
		out.Skills = append(out.Skills, skillJSON{Name: s.Name, Description: s.Description, Dir: s.Dir, File: s.File,
			Requires: s.Requires, ReadOnlyScripts: nonNil(s.ReadOnlyScripts), Warnings: nonNil(s.Warnings)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("skills: write json: %w", err)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// cmdSkillsCheck validates one skill folder for its author: it prints the
// skill as the model will see it and every warning, and fails when the skill
// would be hidden.
func cmdSkillsCheck(e *env, args []string) error {
	fs := newFlags(e, "skills check")
	fs.Usage = func() { fmt.Fprintln(e.stderr, "usage: thinbot skills check DIR") }
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: skills check needs one skill folder", errUsage)
	}
	dir := fs.Arg(0)
	sk, err := skills.LoadOne(dir, skills.Options{Probe: skills.Probe{Getenv: e.getenv, UID: -1}})
	for _, w := range sk.Warnings {
		fmt.Fprintf(e.stdout, "warning: %s\n", w)
	}
	if err != nil {
		fmt.Fprintf(e.stdout, "error: %v\n", err)
		return fmt.Errorf("%w: %s: %v", errSkillInvalid, dir, err)
	}
	line := skills.Set{Skills: []skills.Skill{sk}}.Index(skills.MaxIndexLine)
	fmt.Fprintf(e.stdout, "ok: %s (%s)\n", sk.Name, sk.Dir)
	fmt.Fprintf(e.stdout, "index line (%d bytes, about %d tokens):\n%s\n", len(line), skills.EstimateTokens(line), line)
	if req := sk.Requires; len(req.Bins)+len(req.AnyBins)+len(req.Env)+len(req.OS) > 0 || req.Python != "" {
		js, _ := json.Marshal(req)
		fmt.Fprintf(e.stdout, "requires: %s (met on this machine)\n", js)
	}
	for _, p := range sk.ReadOnlyScripts {
		fmt.Fprintf(e.stdout, "read-only script: %s\n", p)
	}
	for _, c := range sk.Commands {
		fmt.Fprintf(e.stdout, "command: !%s  %s\n", c.Usage(), oneLine(c.Description, 120))
	}
	body, err := sk.ReadBody()
	if err != nil {
		fmt.Fprintf(e.stdout, "error: %v\n", err)
		return fmt.Errorf("%w: %s: %v", errSkillInvalid, dir, err)
	}
	fmt.Fprintf(e.stdout, "body: %d lines, about %d tokens\n", strings.Count(body, "\n"), skills.EstimateTokens(body))
	return nil
}

// oneLine collapses whitespace and cuts s to at most n bytes, then "…".
// Not textfmt.OneLine ("..." within the limit, as chat shows it): this
// listing has always ended so, and n bytes of description stay whole.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	h, _ := textfmt.Ends(s, n, 0)
	return h + "…"
}

// cmdSkillsInstall writes the skill packs embedded in the binary into DIR,
// owned by the installing user (root) and not writable by the bot's user.
func cmdSkillsInstall(e *env, args []string) error {
	fs := newFlags(e, "skills install")
	botUser := fs.String("bot-user", "thinbot", "the user thinbot serve runs as (name or numeric uid); it must not be able to change the files")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: thinbot skills install [--bot-user NAME] DIR   (e.g. /usr/share/thinbot/skills, as root)")
		fs.PrintDefaults()
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("%w: skills install needs one folder", errUsage)
	}
	uid, err := lookupUID(*botUser)
	if err != nil {
		return fmt.Errorf("skills install: %w", err)
	}
	written, err := skills.Install(fs.Arg(0), uid)
	if err != nil {
		return fmt.Errorf("skills install: %w", err)
	}
	fmt.Fprintf(e.stdout, "installed %d files of %d packs (%s) into %s\n", len(written), len(skills.Packs()),
		strings.Join(skills.Packs(), ", "), fs.Arg(0))
	return nil
}

// lookupUID resolves a user name or numeric uid.
func lookupUID(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return -1, fmt.Errorf("bot user %q: %w (create it, or pass --bot-user)", name, err)
	}
	n, err := strconv.Atoi(u.Uid)
	if err != nil {
		return -1, fmt.Errorf("bot user %q: uid %q", name, u.Uid)
	}
	return n, nil
}

// readSkillsLock reads a skills.lock; "" means no lock (nil). A lock that
// is configured but unreadable is an error: the daemon does not start
// without the pins it was told to enforce.
func readSkillsLock(path string) (skills.Lock, error) {
	if path == "" {
		return nil, nil
	}
	return skills.ReadLock(path)
}

// cmdSkillsLock pins the skills of the search path: it writes the SHA-256
// of every file of every loaded skill to skills.lock (or --out).
func cmdSkillsLock(e *env, args []string) error {
	fs := newFlags(e, "skills lock")
	var dirs dirList
	fs.Var(&dirs, "dir", "skill search-path folder, repeatable (default: $AGENT_SKILLS_DIR, then ./skills)")
	out := fs.String("out", "skills.lock", "the lock file to write (- for standard output)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: thinbot skills lock [--dir D]... [--out FILE]")
		fs.PrintDefaults()
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: skills lock: unexpected argument %q", errUsage, fs.Arg(0))
	}
	if len(dirs) == 0 {
		dirs = defaultSkillDirs(e)
	}
	set := skills.Load(dirs, skills.Options{Probe: skills.Probe{Getenv: e.getenv, UID: -1}})
	lock, err := skills.NewLock(set)
	if err != nil {
		return fmt.Errorf("skills lock: %w", err)
	}
	var b strings.Builder
	if _, err := lock.WriteTo(&b); err != nil {
		return fmt.Errorf("skills lock: %w", err)
	}
	if *out == "-" {
		_, err := io.WriteString(e.stdout, b.String())
		return err
	}
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("skills lock: %w", err)
	}
	files := 0
	for _, f := range lock {
		files += len(f)
	}
	fmt.Fprintf(e.stdout, "pinned %d skills, %d files in %s\n", len(lock), files, *out)
	for _, f := range set.Filtered {
		fmt.Fprintf(e.stdout, "not pinned (hidden): %s  %s: %s\n", f.Name, f.Dir, f.Reason)
	}
	return nil
}
