package skills

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors LoadOne returns (wrapped) besides those of ParseFrontmatter; the
// Reason of a Filtered skill is the same error's text.
var (
	// ErrNoSkillFile is returned when the folder has no SKILL.md.
	ErrNoSkillFile = errors.New("no SKILL.md")
	// ErrTooLarge is returned when SKILL.md is over Options.MaxFileSize.
	ErrTooLarge = errors.New("SKILL.md too large")
	// ErrNoDescription is returned when the frontmatter has no usable description.
	ErrNoDescription = errors.New("no description")
	// ErrUnreadable is returned when the folder or SKILL.md cannot be read.
	ErrUnreadable = errors.New("unreadable")
	// ErrRequirements is returned when the machine does not meet the
	// skill's requirements (missing executable, variable, python version, OS).
	ErrRequirements = errors.New("requirements not met")
)

const (
	// maxDescription is the open format's limit on description length, in characters.
	maxDescription = 1024
	// maxNameLen is the open format's limit on name length.
	maxNameLen = 64
	// maxEntries bounds how many entries of one search-path folder are read.
	maxEntries = 5000
)

// nameRule is the open format's naming rule.
var nameRule = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// knownKeys are the top-level fields thinbot understands; others go to Extra.
var knownKeys = []string{"name", "description", "requires", "allowed-tools", "license",
	"metadata", "compatibility", "read-only-scripts"}

// requirementLike are top-level keys (lowercased) that authors use for
// requirements outside requires; they are not checked, so Load warns.
var requirementLike = map[string]bool{
	"bins": true, "binaries": true, "anybins": true, "any-bins": true, "any_bins": true,
	"env": true, "python": true, "python3": true, "os": true,
	"requirements": true, "dependencies": true, "depends": true, "prerequisites": true,
}

// requirementKey is the requires field a requirement-like key belongs in.
func requirementKey(k string) string {
	switch k = strings.ToLower(k); k {
	case "binaries", "requirements", "dependencies", "depends", "prerequisites":
		return "bins"
	case "anybins", "any-bins", "any_bins":
		return "anyBins"
	case "python3":
		return "python"
	}
	return k
}

// legacyVendors are the metadata keys OpenClaw and its predecessors use for
// requirement declarations, in order of preference.
var legacyVendors = []string{"openclaw", "clawdbot", "moltbot", "clawdis"}

// loader carries the per-Load state: options and the python probe result.
type loader struct {
	opts    Options
	py      PythonProbe // when opts.Probe.Python is nil
	pyDone  bool
	pyMajor int
	pyMinor int
	pyErr   error
	uid     int
}

func newLoader(opts Options) *loader {
	uid := opts.Probe.UID
	if uid < 0 {
		uid = os.Getuid()
	}
	return &loader{opts: opts, uid: uid}
}

// Load reads every skill folder directly under each of dirs, in search
// order: an earlier skill shadows a later one of the same name (only loaded
// skills shadow; a filtered one does not). A missing folder in dirs is
// skipped. Folders whose names start with "." and node_modules are skipped;
// a folder without SKILL.md is not a skill and is skipped silently.
//
// Load never panics and does not fail: broken skills, unmet requirements and
// unreadable folders end up in Set.Filtered with their reason. It reads at
// most 5,000 entries per folder, follows no symlink chain endlessly (the OS
// bounds resolution), stats SKILL.md before reading it and never reads more
// than Options.MaxFileSize bytes, so a symlink loop or a huge file cannot
// hang it. It may run python3 once, bounded by a minute (PythonProbe), when
// a skill declares a python version and Probe.Python is nil.
func Load(dirs []string, opts Options) Set {
	l := newLoader(opts)
	log := opts.logger()
	var set Set
	byName := map[string]int{}
	for _, root := range dirs {
		if root == "" {
			continue
		}
		for _, dir := range l.listRoot(root, &set) {
			sk, err := l.load(dir)
			if errors.Is(err, ErrNoSkillFile) {
				continue
			}
			if err == nil && opts.Lock != nil {
				err = l.pin(&sk)
			}
			if err != nil {
				f := Filtered{Dir: dir, Name: sk.Name, Reason: err.Error()}
				set.Filtered = append(set.Filtered, f)
				log.Warn("skill hidden", "skill", f.Name, "dir", f.Dir, "reason", f.Reason)
				continue
			}
			if i, dup := byName[sk.Name]; dup {
				s := Shadowed{Name: sk.Name, Dir: sk.Dir, By: set.Skills[i].Dir}
				set.Shadowed = append(set.Shadowed, s)
				log.Info("skill shadowed", "skill", s.Name, "dir", s.Dir, "by", s.By)
				continue
			}
			byName[sk.Name] = len(set.Skills)
			set.Skills = append(set.Skills, sk)
			if len(sk.Warnings) > 0 {
				log.Warn("skill loaded with warnings", "skill", sk.Name, "dir", sk.Dir, "warnings", strings.Join(sk.Warnings, "; "))
			}
		}
	}
	slices.SortStableFunc(set.Skills, func(a, b Skill) int { return strings.Compare(a.Name, b.Name) })
	log.Info("skills loaded", "loaded", len(set.Skills), "hidden", len(set.Filtered), "shadowed", len(set.Shadowed))
	return set
}

// listRoot returns the candidate skill folders directly under root, sorted
// by name. Problems with root itself are recorded in set.Filtered.
func (l *loader) listRoot(root string, set *Set) []string {
	abs, err := filepath.Abs(root)
	if err != nil {
		set.Filtered = append(set.Filtered, Filtered{Dir: root, Reason: fmt.Sprintf("%v: %v", ErrUnreadable, err)})
		return nil
	}
	f, err := os.Open(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		set.Filtered = append(set.Filtered, Filtered{Dir: abs, Reason: fmt.Sprintf("%v: %v", ErrUnreadable, err)})
		return nil
	}
	defer f.Close()
	entries, err := f.ReadDir(maxEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		set.Filtered = append(set.Filtered, Filtered{Dir: abs, Reason: fmt.Sprintf("%v: %v", ErrUnreadable, err)})
		return nil
	}
	if len(entries) > maxEntries {
		set.Filtered = append(set.Filtered, Filtered{Dir: abs,
			Reason: fmt.Sprintf("folder has more than %d entries; only the first %d are read", maxEntries, maxEntries)})
		entries = entries[:maxEntries]
	}
	var dirs []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || name == "node_modules" {
			continue
		}
		if e.Type().IsRegular() {
			continue
		}
		dir := filepath.Join(abs, name)
		fi, err := os.Stat(dir)
		if err != nil {
			set.Filtered = append(set.Filtered, Filtered{Dir: dir, Name: name, Reason: fmt.Sprintf("%v: %v", ErrUnreadable, unwrapPathError(err))})
			continue
		}
		if fi.IsDir() {
			dirs = append(dirs, dir)
		}
	}
	slices.Sort(dirs)
	return dirs
}

// unwrapPathError drops the path from a *fs.PathError, which the caller
// already shows.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// LoadOne reads the single skill folder dir, as `thinbot skills check`
// does for authors. It returns the skill with every warning, and a non-nil
// error (wrapping ErrNoSkillFile, ErrTooLarge, ErrUnreadable,
// ErrNoFrontmatter, ErrUnclosedFrontmatter, ErrInvalidFrontmatter,
// ErrNoDescription or ErrRequirements) when Load would hide it. The Skill is
// filled as far as reading got, so warnings are reported with the error.
func LoadOne(dir string, opts Options) (Skill, error) {
	return newLoader(opts).load(dir)
}

// load reads one skill folder.
func (l *loader) load(dir string) (Skill, error) {
	sk := Skill{Name: filepath.Base(dir)}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return sk, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	folder := filepath.Base(abs)
	sk.Name = folder
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return sk, fmt.Errorf("%w: %v", ErrUnreadable, unwrapPathError(err))
	}
	sk.Dir = real
	sk.File = filepath.Join(real, "SKILL.md")
	fi, err := os.Stat(sk.File)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(sk.File); lerr == nil {
			return sk, fmt.Errorf("%w: SKILL.md is a broken symlink", ErrUnreadable)
		}
		return sk, ErrNoSkillFile
	}
	if err != nil {
		return sk, fmt.Errorf("%w: %v", ErrUnreadable, unwrapPathError(err))
	}
	if !fi.Mode().IsRegular() {
		return sk, fmt.Errorf("%w: SKILL.md is not a regular file", ErrUnreadable)
	}
	if realFile, err := filepath.EvalSymlinks(sk.File); err != nil {
		return sk, fmt.Errorf("%w: %v", ErrUnreadable, unwrapPathError(err))
	} else if !inside(real, realFile) {
		return sk, fmt.Errorf("%w: SKILL.md links outside its folder", ErrUnreadable)
	}
	limit := l.opts.maxFileSize()
	if fi.Size() > limit {
		return sk, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrTooLarge, fi.Size(), limit)
	}
	sk.maxFile = limit
	data, err := readFront(sk.File, limit)
	if err != nil {
		return sk, err
	}
	fm, _, warns, err := parseFrontmatter(data)
	if err != nil {
		return sk, err
	}
	sk.Warnings = append(sk.Warnings, warns...)
	l.fill(&sk, fm, folder)
	if sk.Description == "" {
		if v, ok := fm["description"]; ok && v != nil && text(v) == "" {
			return sk, fmt.Errorf("%w: description is not text", ErrNoDescription)
		}
		return sk, ErrNoDescription
	}
	if err := l.check(sk.Requires); err != nil {
		return sk, err
	}
	return sk, nil
}

// readFront reads path up to and including the line that closes the
// frontmatter (the whole file if none does), at most limit bytes: at start
// only the frontmatter is read; bodies are read when a skill is opened.
func readFront(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, unwrapPathError(err))
	}
	defer f.Close()
	return frontPrefix(f, limit)
}

// frontPrefix is readFront on a reader.
func frontPrefix(r io.Reader, limit int64) ([]byte, error) {
	br := bufio.NewReader(io.LimitReader(r, limit+1))
	var out []byte
	for n := 0; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A very long line: keep it whole, it cannot be a delimiter.
			out = append(out, line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = br.ReadSlice('\n')
				out = append(out, line...)
			}
		} else {
			out = append(out, line...)
		}
		if int64(len(out)) > limit {
			return nil, fmt.Errorf("%w: over the %d-byte limit", ErrTooLarge, limit)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
		}
		t := strings.TrimRight(strings.TrimPrefix(string(line), "\xef\xbb\xbf"), " \t\r\n")
		if t == "---" && n > 0 {
			return out, nil
		}
		if n == 0 && t != "---" {
			return out, nil // no frontmatter: parseFrontmatter says so
		}
	}
}

// readLimited reads at most limit bytes of path; more is ErrTooLarge (the
// file may have grown since it was stat'ed).
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, unwrapPathError(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, unwrapPathError(err))
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: over the %d-byte limit", ErrTooLarge, limit)
	}
	return data, nil
}

// fill sets the skill's fields from its frontmatter and adds warnings.
func (l *loader) fill(sk *Skill, fm map[string]any, folder string) {
	warn := func(format string, args ...any) { sk.Warnings = append(sk.Warnings, fmt.Sprintf(format, args...)) }

	name := strings.TrimSpace(text(fm["name"]))
	if name == "" {
		warn("no name: using the folder's name %q", folder)
		name = folder
	}
	if !nameRule.MatchString(name) || len(name) > maxNameLen {
		warn("name %q breaks the naming rule (lowercase letters, digits, single hyphens, at most 64 characters)", name)
	}
	if name != folder {
		warn("name %q differs from its folder %q", name, folder)
	}
	sk.Name = name

	desc := strings.TrimSpace(text(fm["description"]))
	if n := utf8.RuneCountInString(desc); n > maxDescription {
		warn("description is %d characters, over the format's limit of %d: kept whole, only its index line is cut", n, maxDescription)
	}
	sk.Description = desc

	sk.License = strings.TrimSpace(text(fm["license"]))
	sk.Compatibility = strings.TrimSpace(text(fm["compatibility"]))
	if n := utf8.RuneCountInString(sk.Compatibility); n > 500 {
		warn("compatibility is %d characters, over the limit of 500", n)
	}
	sk.AllowedTools = stringList(fm["allowed-tools"], true)

	switch m := fm["metadata"].(type) {
	case nil:
	case map[string]any:
		sk.Metadata = m
	case string:
		var js map[string]any
		if err := json.Unmarshal([]byte(m), &js); err == nil {
			sk.Metadata = js
		} else {
			warn("metadata is not a mapping: ignored")
		}
	default:
		warn("metadata is not a mapping: ignored")
	}

	for k, v := range fm {
		if !slices.Contains(knownKeys, k) {
			if sk.Extra == nil {
				sk.Extra = map[string]any{}
			}
			sk.Extra[k] = v
		}
	}
	var reqLike []string
	for k := range sk.Extra {
		if requirementLike[strings.ToLower(k)] {
			reqLike = append(reqLike, k)
		}
	}
	slices.Sort(reqLike)
	for _, k := range reqLike {
		warn("top-level %q looks like a requirement but is not checked: put it under requires (requires: {%s: ...})", k, requirementKey(k))
	}

	sk.Requires = l.requires(fm["requires"], sk.Metadata, func(s string) { warn("%s", s) })
	sk.ReadOnlyScripts = l.readOnlyScripts(sk, fm, func(s string) { warn("%s", s) })
	sk.Commands = l.commands(sk, func(s string) { warn("%s", s) })
}

// text renders a scalar frontmatter value as a string; maps and lists give "".
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case map[string]any, []any:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// stringList reads a list of strings, or a string split on commas (or on
// spaces when split is set and it has no comma).
func stringList(v any, split bool) []string {
	var out []string
	switch v := v.(type) {
	case string:
		var parts []string
		if strings.Contains(v, ",") {
			parts = strings.Split(v, ",")
		} else if split {
			parts = strings.Fields(v)
		} else {
			parts = []string{v}
		}
		for _, p := range parts {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	case []any:
		for _, item := range v {
			if s := strings.TrimSpace(text(item)); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// requires merges the top-level requires field with the OpenClaw-style
// metadata.<vendor>.requires and os declarations.
func (l *loader) requires(top any, meta map[string]any, warn func(string)) Requires {
	var r Requires
	switch v := top.(type) {
	case nil:
	case map[string]any:
		for k, val := range v {
			switch k {
			case "bins", "binaries":
				r.Bins = appendNew(r.Bins, stringList(val, true)...)
			case "anyBins", "any-bins", "any_bins", "anybins":
				r.AnyBins = appendNew(r.AnyBins, stringList(val, true)...)
			case "env":
				r.Env = appendNew(r.Env, envList(val)...)
			case "python", "python3":
				r.Python = pythonVersion(val, warn)
			case "os":
				r.OS = appendNew(r.OS, osList(val)...)
			default:
				warn(fmt.Sprintf("requires.%s is not understood: ignored", k))
			}
		}
	case []any:
		warn("requires is a list, not a mapping of bins/python/env: ignored")
	default:
		warn("requires is not a mapping of bins/python/env: ignored")
	}
	for _, vendor := range legacyVendors {
		block, ok := meta[vendor].(map[string]any)
		if !ok {
			continue
		}
		always, _ := block["always"].(bool)
		if req, ok := block["requires"].(map[string]any); ok && !always {
			for k, val := range req {
				switch k {
				case "bins":
					r.Bins = appendNew(r.Bins, stringList(val, true)...)
				case "anyBins":
					r.AnyBins = appendNew(r.AnyBins, stringList(val, true)...)
				case "env":
					r.Env = appendNew(r.Env, envList(val)...)
				default:
					warn(fmt.Sprintf("metadata.%s.requires.%s is not checked by thinbot: ignored", vendor, k))
				}
			}
		}
		r.OS = appendNew(r.OS, osList(block["os"])...)
		break // the first vendor block present wins, as in OpenClaw
	}
	return r
}

// envList reads env as a list, a string, or a mapping whose keys are the names.
func envList(v any) []string {
	if m, ok := v.(map[string]any); ok {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return keys
	}
	return stringList(v, true)
}

func osList(v any) []string {
	list := stringList(v, true)
	for i, s := range list {
		switch s = strings.ToLower(s); s {
		case "win32", "win":
			list[i] = "windows"
		case "macos", "mac", "osx":
			list[i] = "darwin"
		default:
			list[i] = s
		}
	}
	return list
}

// pythonVersionRule finds "3" or "3.10" in ">=3.10", "python>=3.8", "3.10".
var pythonVersionRule = regexp.MustCompile(`(\d+)(?:\.(\d+))?`)

func pythonVersion(v any, warn func(string)) string {
	s := text(v)
	m := pythonVersionRule.FindStringSubmatch(s)
	if m == nil {
		warn(fmt.Sprintf("requires.python %q is not a version: ignored", s))
		return ""
	}
	if m[2] == "" {
		return m[1]
	}
	return m[1] + "." + m[2]
}

func appendNew(list []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(list, it) {
			list = append(list, it)
		}
	}
	return list
}

// check probes the machine for the requirements and returns ErrRequirements
// naming everything missing.
func (l *loader) check(r Requires) error {
	var problems []string
	if len(r.OS) > 0 && !slices.Contains(r.OS, runtime.GOOS) {
		problems = append(problems, fmt.Sprintf("runs on %s, not %s", strings.Join(r.OS, ", "), runtime.GOOS))
	}
	var missing []string
	for _, b := range r.Bins {
		if l.opts.Probe.lookPath(b) != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		problems = append(problems, "not on PATH: "+strings.Join(missing, ", "))
	}
	if len(r.AnyBins) > 0 {
		found := false
		for _, b := range r.AnyBins {
			if l.opts.Probe.lookPath(b) == nil {
				found = true
				break
			}
		}
		if !found {
			problems = append(problems, "none of these on PATH: "+strings.Join(r.AnyBins, ", "))
		}
	}
	var unset []string
	for _, e := range r.Env {
		if l.opts.Probe.getenv(e) == "" {
			unset = append(unset, e)
		}
	}
	if len(unset) > 0 {
		problems = append(problems, "environment not set: "+strings.Join(unset, ", "))
	}
	if r.Python != "" {
		if p := l.checkPython(r.Python); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrRequirements, strings.Join(problems, "; "))
}

// checkPython compares python3's version with want ("3" or "3.10"), probing
// python3 at most once per loader.
func (l *loader) checkPython(want string) string {
	if !l.pyDone {
		l.pyDone = true
		if l.opts.Probe.Python != nil {
			l.pyMajor, l.pyMinor, l.pyErr = l.opts.Probe.Python()
		} else {
			l.pyMajor, l.pyMinor, l.pyErr = l.py.Version()
		}
	}
	if l.pyErr != nil {
		return fmt.Sprintf("python3 >= %s needed: %v", want, l.pyErr)
	}
	wMaj, wMin := 0, 0
	maj, minor, _ := strings.Cut(want, ".")
	wMaj, _ = strconv.Atoi(maj)
	if minor != "" {
		wMin, _ = strconv.Atoi(minor)
	}
	if l.pyMajor > wMaj || (l.pyMajor == wMaj && l.pyMinor >= wMin) {
		return ""
	}
	return fmt.Sprintf("python3 >= %s needed, found %d.%d", want, l.pyMajor, l.pyMinor)
}

// inside reports whether path is dir or below it (both cleaned, absolute).
func inside(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// pin checks a loaded skill against the lock and records its digest and
// the pinned hashes of its read-only scripts.
func (l *loader) pin(sk *Skill) error {
	files, err := sk.Files()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	if err := l.opts.Lock.check(sk.Name, files); err != nil {
		return err
	}
	sk.SHA256 = Digest(files)
	sk.pinned = map[string]string{}
	for _, p := range sk.ReadOnlyScripts {
		rel, err := filepath.Rel(sk.Dir, p)
		if err != nil {
			continue
		}
		for _, f := range files {
			if f.Path == filepath.ToSlash(rel) {
				sk.pinned[p] = f.SHA256
			}
		}
	}
	return nil
}
