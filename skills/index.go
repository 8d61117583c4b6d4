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

// IndexOptions says how much room the index has and what it is for.
type IndexOptions struct {
	// Budget is the index's share of the prompt in bytes; 0 means
	// DefaultIndexBudget.
	Budget int
	// MaxBudget is how far the index may grow past Budget so that every
	// skill keeps a floor description and the skills that match Query keep
	// a long one; values below Budget mean Budget (no growth).
	MaxBudget int
	// Query is what the skills are ranked against: the session's first
	// user message. "" ranks by name.
	Query string
}

// IndexOptionsFor returns the options the kernel uses for a model with a
// context window of contextTokens tokens: Budget is share of the window
// (0 means 0.02, as Codex does) and MaxBudget four times that, so that at
// a 32k window 80 skills all keep a useful description.
func IndexOptionsFor(contextTokens int, share float64, query string) IndexOptions {
	if share <= 0 {
		share = 0.02
	}
	budget := DefaultIndexBudget
	if contextTokens > 0 {
		budget = int(float64(contextTokens)*share) * 4
	}
	return IndexOptions{Budget: budget, MaxBudget: 4 * budget, Query: query}
}

const (
	// FloorDescription is the description every index line keeps, in
	// bytes, while the budget allows: enough to say what a skill is for.
	FloorDescription = 60
	// maxRelevant bounds the skills matching the query that get long lines;
	// maxRelevantPacked does when not every skill keeps its floor.
	maxRelevant       = 8
	maxRelevantPacked = 3
	// namesLead starts the trailing line of skills listed by name only.
	namesLead = "- Also available (open one to see what it does): "
)

// Index renders the skill index with IndexOptions{Budget: budgetBytes}.
func (s Set) Index(budgetBytes int) string {
	return s.IndexWith(IndexOptions{Budget: budgetBytes})
}

// IndexWith renders the skill index for the system prompt: one line per
// skill, "- name: description", with whitespace collapsed and lines cut at a
// word boundary with "…", at most MaxIndexLine bytes. Within the budget:
//
//  1. every skill keeps at least FloorDescription bytes of description;
//     the index grows up to MaxBudget for that;
//  2. skills that match the query (words shared with name and description,
//     see Rank) keep long lines, the best first, up to maxRelevant of them;
//  3. what budget is left lengthens all other lines equally.
//
// When even the floors do not fit in MaxBudget, skills get their lines in
// rank order while they fit (long lines for the three best matches only),
// and the rest are listed by name on one
// trailing line: no skill is ever dropped, so an index of names alone may
// exceed the budget. Lines are sorted by name, the names line last. The
// result is a pure function of the Set and the options, so a session that
// keeps its query keeps its prompt prefix byte for byte. An empty Set gives "".
func (s Set) IndexWith(o IndexOptions) string {
	n := len(s.Skills)
	if n == 0 {
		return ""
	}
	budget := o.Budget
	if budget <= 0 {
		budget = DefaultIndexBudget
	}
	maxBudget := max(o.MaxBudget, budget)
	full := make([]string, n)
	floor := make([]string, n)
	for i, sk := range s.Skills {
		full[i] = "- " + sk.Name + ": " + strings.Join(strings.Fields(sk.Description), " ")
		floor[i] = floorLine(full[i], sk.Name)
	}
	rank, scores := s.Rank(o.Query)
	relevant := rank[:0:0]
	isRel := make(map[int]bool)
	for _, i := range rank {
		if scores[i] > 0 && len(relevant) < maxRelevant {
			relevant = append(relevant, i)
			isRel[i] = true
		}
	}
	lines := slices.Clone(floor)
	cost := func() int {
		c := n - 1
		for _, l := range lines {
			c += len(l)
		}
		return c
	}
	floors := cost()
	if floors > maxBudget {
		return s.packed(rank, isRel, full, floor, maxBudget)
	}
	want := floors
	for _, i := range relevant {
		want += len(shorten(full[i], MaxIndexLine, s.Skills[i].Name)) - len(floor[i])
	}
	limit := min(maxBudget, max(budget, want))
	for _, i := range relevant {
		long := shorten(full[i], MaxIndexLine, s.Skills[i].Name)
		if extra := len(long) - len(lines[i]); cost()+extra <= limit {
			lines[i] = long
		}
	}
	// The rest of the budget lengthens the other lines equally: the
	// largest common cut that fits.
	fixed := n - 1
	for i := range lines {
		if isRel[i] {
			fixed += len(lines[i])
		}
	}
	total := func(cut int) int {
		t := fixed
		for i := range lines {
			if !isRel[i] {
				l := shorten(full[i], cut, s.Skills[i].Name)
				if len(l) < len(floor[i]) {
					l = floor[i]
				}
				t += len(l)
			}
		}
		return t
	}
	lo, hi := 0, MaxIndexLine
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if total(mid) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for i := range lines {
		if !isRel[i] {
			if l := shorten(full[i], lo, s.Skills[i].Name); len(l) > len(floor[i]) {
				lines[i] = l
			}
		}
	}
	return strings.Join(lines, "\n")
}

// packed is IndexWith when not every skill can keep its floor: in rank
// order, each of the three best-matching skills gets its long line (or its
// floor) and any other skill its floor, while the lines so far and the names line
// for the rest fit in limit.
func (s Set) packed(rank []int, relevant map[int]bool, full, floor []string, limit int) string {
	n := len(s.Skills)
	lines := make([]string, n)
	nameBytes := 0
	for _, sk := range s.Skills {
		nameBytes += len(sk.Name)
	}
	namesLine := func(k, bytes int) int {
		if k == 0 {
			return 0
		}
		return len(namesLead) + bytes + 2*(k-1)
	}
	used, left, long := 0, n, 0
	for _, i := range rank {
		name := len(s.Skills[i].Name)
		cands := []string{floor[i]}
		if relevant[i] && long < maxRelevantPacked {
			long++
			cands = []string{shorten(full[i], MaxIndexLine, s.Skills[i].Name), floor[i]}
		}
		for _, l := range cands {
			if used+len(l)+1+namesLine(left-1, nameBytes-name) <= limit+1 {
				lines[i] = l
				used += len(l) + 1
				left--
				nameBytes -= name
				break
			}
		}
	}
	var out, names []string
	for i := range n {
		if lines[i] == "" {
			names = append(names, s.Skills[i].Name)
		} else {
			out = append(out, lines[i])
		}
	}
	if len(names) > 0 {
		out = append(out, namesLead+strings.Join(names, ", "))
	}
	return strings.Join(out, "\n")
}

// floorLine cuts an index line to its floor: at least FloorDescription
// bytes of description, ending at the first word boundary after them (at
// most 24 bytes further), then "…".
func floorLine(line, name string) string {
	head := len("- " + name + ": ")
	if len(line) <= head+FloorDescription+24+len("…") {
		return line
	}
	cut := head + FloorDescription
	if sp := strings.IndexByte(line[cut:head+FloorDescription+24], ' '); sp >= 0 {
		cut += sp
	} else {
		cut += 24
		for cut > head && !utf8.RuneStart(line[cut]) {
			cut--
		}
	}
	return strings.TrimRight(line[:cut], " ,;:.-") + "…"
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
