package skills

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

const (
	// MaxIndexLine is the longest index line, in bytes, before any budget
	// shortening: about 75 tokens.
	MaxIndexLine = 300
	// DefaultIndexBudget is the index budget in bytes when the context
	// window is unknown (Codex uses the same fallback).
	DefaultIndexBudget = 8000
	// maxListedFiles bounds the file list Text appends.
	maxListedFiles = 200
	// maxListDepth bounds how deep Text lists files below the skill folder.
	maxListDepth = 4
)

// Get returns the loaded skill with the given name.
func (s Set) Get(name string) (Skill, bool) {
	i, ok := slices.BinarySearchFunc(s.Skills, name, func(sk Skill, n string) int { return strings.Compare(sk.Name, n) })
	if !ok {
		return Skill{}, false
	}
	return s.Skills[i], true
}

// ReadOnlyScripts returns every loaded skill's validated read-only script
// paths (absolute, resolved), sorted, for the gate's read-only script list.
func (s Set) ReadOnlyScripts() []string {
	var out []string
	for _, sk := range s.Skills {
		out = append(out, sk.ReadOnlyScripts...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// IndexBudget returns the index budget in bytes for a model with a context
// window of contextTokens tokens: 2% of the window (as Codex does), at 4
// bytes per token (the EstimateTokens rule for ASCII). A window of 0 or
// less, meaning unknown, gives DefaultIndexBudget.
func IndexBudget(contextTokens int) int {
	if contextTokens <= 0 {
		return DefaultIndexBudget
	}
	return contextTokens * 2 / 100 * 4
}

// Index renders the skill index for the system prompt: one line per loaded
// skill, "- name: description", with the description's whitespace collapsed
// and the line cut at a word boundary with "…" to at most MaxIndexLine
// bytes. When all lines together (newline-separated) exceed budgetBytes,
// every line is cut to the same shorter length, so that no skill is dropped;
// if even "- name" lines do not fit, the index is names only and exceeds the
// budget. budgetBytes <= 0 means DefaultIndexBudget. The result is
// deterministic for a Set, which keeps the prompt prefix stable. An empty
// Set gives "".
func (s Set) Index(budgetBytes int) string {
	if len(s.Skills) == 0 {
		return ""
	}
	if budgetBytes <= 0 {
		budgetBytes = DefaultIndexBudget
	}
	full := make([]string, len(s.Skills))
	for i, sk := range s.Skills {
		full[i] = "- " + sk.Name + ": " + strings.Join(strings.Fields(sk.Description), " ")
	}
	total := func(limit int) int {
		n := len(full) - 1
		for i, l := range full {
			n += len(shorten(l, limit, s.Skills[i].Name))
		}
		return n
	}
	limit := MaxIndexLine
	if total(limit) > budgetBytes {
		// The total grows with limit, so search the largest limit that fits.
		lo, hi := 0, MaxIndexLine
		for lo < hi {
			mid := (lo + hi + 1) / 2
			if total(mid) <= budgetBytes {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		limit = lo
	}
	var b strings.Builder
	for i, l := range full {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(shorten(l, limit, s.Skills[i].Name))
	}
	return b.String()
}

// shorten cuts an index line to at most limit bytes, at a word boundary if
// one is near, ending in "…". It never cuts below "- name".
func shorten(line string, limit int, name string) string {
	if len(line) <= limit {
		return line
	}
	floor := "- " + name
	const ellipsis = "…"
	if limit < len(floor)+len(": ")+len(ellipsis)+8 {
		return floor
	}
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	head := line[:cut]
	if sp := strings.LastIndexByte(head, ' '); sp > len(floor)+2 && cut-sp < 30 {
		head = head[:sp]
	}
	head = strings.TrimRight(head, " ,;:.-")
	if len(head) <= len(floor)+1 {
		return floor
	}
	return head + ellipsis
}

// EstimateTokens estimates how many tokens s costs a model with the rule
// thinbot uses everywhere: one token per 4 bytes of ASCII text (rounded up
// per run of ASCII), plus one token per non-ASCII character, since BPE
// tokenizers spend about one token per CJK character or emoji. It is a
// budget estimate, not a tokenizer.
func EstimateTokens(s string) int {
	tokens, ascii := 0, 0
	for _, r := range s {
		if r < utf8.RuneSelf {
			ascii++
			continue
		}
		tokens += (ascii+3)/4 + 1
		ascii = 0
	}
	return tokens + (ascii+3)/4
}

// dirPlaceholders are the spellings of "this skill's folder" that skill
// authors use: thinbot's {SKILL_DIR}, OpenClaw's {baseDir}, Claude Code's
// ${CLAUDE_SKILL_DIR}, and {{skillDir}} from template-style agents. Longer
// spellings come first, so ${SKILL_DIR} is not read as "$" + {SKILL_DIR}.
var dirPlaceholders = []string{"${CLAUDE_SKILL_DIR}", "${SKILL_DIR}", "{{SKILL_DIR}}", "{{skillDir}}", "{{baseDir}}",
	"{SKILL_DIR}", "{baseDir}"}

// ReplaceDir fills the skill-folder placeholders of body (see Text) with dir.
func ReplaceDir(body, dir string) string {
	pairs := make([]string, 0, 2*len(dirPlaceholders))
	for _, p := range dirPlaceholders {
		pairs = append(pairs, p, dir)
	}
	return strings.NewReplacer(pairs...).Replace(body)
}

// ReadBody reads the skill's instructions, the Markdown after the
// frontmatter, from SKILL.md as the file is now: Load reads only the
// frontmatter, so an edited body is served as edited without a restart (the
// name, description and requirements stay those read at start). It fails
// with ErrUnreadable when SKILL.md is gone, no longer a regular file inside
// the skill folder, or unreadable; with ErrTooLarge when it grew over the
// size limit; and with a frontmatter error when it no longer parses.
func (sk Skill) ReadBody() (string, error) {
	limit := sk.maxFile
	if limit <= 0 {
		limit = defaultMaxFileSize
	}
	fi, err := os.Stat(sk.File)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w: %v (it was readable when thinbot started)", sk.Name, ErrUnreadable, unwrapPathError(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("skill %s: %w: SKILL.md is no longer a regular file", sk.Name, ErrUnreadable)
	}
	// The file may have been replaced by a symlink since the start: it must
	// still be inside the folder, or the skill tool would read any file.
	if real, err := filepath.EvalSymlinks(sk.File); err != nil || !inside(sk.Dir, real) {
		return "", fmt.Errorf("skill %s: %w: SKILL.md now links outside its folder", sk.Name, ErrUnreadable)
	}
	data, err := readLimited(sk.File, limit)
	if err != nil {
		return "", fmt.Errorf("skill %s: %w", sk.Name, err)
	}
	_, body, _, err := parseFrontmatter(data)
	if err != nil {
		return "", fmt.Errorf("skill %s: SKILL.md no longer parses: %w", sk.Name, err)
	}
	return body, nil
}

// Text returns what the skill tool gives the model: the body, read from
// SKILL.md now (see ReadBody), with the skill-folder placeholders
// ({SKILL_DIR}, {baseDir}, ${CLAUDE_SKILL_DIR}, ${SKILL_DIR}, {{skillDir}})
// replaced by the absolute skill folder, followed by the list of the
// skill's files as paths relative to it (at most 200 files, 4 levels deep,
// without hidden files; symlinks are listed, not followed). An error from
// ReadBody is returned with no text; an error listing the folder is
// returned with the text.
func (sk Skill) Text() (string, error) {
	raw, err := sk.ReadBody()
	if err != nil {
		return "", err
	}
	body := strings.TrimSpace(ReplaceDir(raw, sk.Dir))
	var files []string
	more := false
	err = filepath.WalkDir(sk.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == sk.Dir {
				return err
			}
			return nil
		}
		rel, _ := filepath.Rel(sk.Dir, p)
		if rel == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "__pycache__" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if strings.Count(rel, string(filepath.Separator)) >= maxListDepth-1 {
				return fs.SkipDir
			}
			return nil
		}
		if len(files) == maxListedFiles {
			more = true
			return fs.SkipAll
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	var b strings.Builder
	b.WriteString(body)
	fmt.Fprintf(&b, "\n\n[skill folder: %s]\n", sk.Dir)
	if len(files) > 0 {
		b.WriteString("Files:\n")
		for _, f := range files {
			b.WriteString("- " + f + "\n")
		}
		if more {
			fmt.Fprintf(&b, "- … (more than %d files)\n", maxListedFiles)
		}
	}
	if err != nil {
		return b.String(), fmt.Errorf("list skill %s: %w", sk.Name, err)
	}
	return b.String(), nil
}
