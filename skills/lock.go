package skills

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Errors of the pinned skill set; the Reason of a skill hidden by a lock
// starts with one of them.
var (
	// ErrNotLocked is returned for a skill that skills.lock does not name.
	ErrNotLocked = errors.New("not in skills.lock")
	// ErrLockMismatch is returned for a skill whose files differ from skills.lock.
	ErrLockMismatch = errors.New("files differ from skills.lock")
)

// maxSkillFiles bounds how many files of one skill are hashed.
const maxSkillFiles = 10000

// FileHash is one file of a skill: its path relative to the skill folder
// (slash-separated) and the SHA-256 of its content, in hex.
type FileHash struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Lock is a pinned skill set (skills.lock): every file of every skill, by
// skill name. The zero (nil) Lock pins nothing.
type Lock map[string][]FileHash

// Files hashes every file under the skill's folder, sorted by path. A
// symlink is hashed as the file it leads to; a symlinked folder is not
// entered.
func (s Skill) Files() ([]FileHash, error) {
	return hashDir(s.Dir)
}

func hashDir(dir string) ([]FileHash, error) {
	var out []FileHash
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if len(out) >= maxSkillFiles {
			return fmt.Errorf("more than %d files", maxSkillFiles)
		}
		sum, err := hashFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out = append(out, FileHash{Path: filepath.ToSlash(rel), SHA256: sum})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hash %s: %w", dir, err)
	}
	slices.SortFunc(out, func(a, b FileHash) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// hashFile returns the hex SHA-256 of a regular file's content.
func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", p)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Digest is the SHA-256 of a skill's file list as skills.lock writes it:
// one hash for the whole skill, which the chain records when a session
// opens the skill.
func Digest(files []FileHash) string {
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s  %s\n", f.SHA256, f.Path)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Digest hashes the skill's files now and returns their Digest.
func (s Skill) Digest() (string, error) {
	files, err := s.Files()
	if err != nil {
		return "", err
	}
	return Digest(files), nil
}

// NewLock pins every loaded skill of set.
func NewLock(set Set) (Lock, error) {
	l := Lock{}
	for _, s := range set.Skills {
		files, err := s.Files()
		if err != nil {
			return nil, fmt.Errorf("skill %s: %w", s.Name, err)
		}
		l[s.Name] = files
	}
	return l, nil
}

// WriteTo writes the lock in its text form: a comment line, then one
// "SHA256  skill/path" line per file, sorted by skill name and path, so
// the same skills give the same bytes.
func (l Lock) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	b.WriteString("# skills.lock: SHA-256 of every file of every skill (thinbot skills lock). A skill whose files differ is hidden.\n")
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for _, f := range l[n] {
			fmt.Fprintf(&b, "%s  %s/%s\n", f.SHA256, n, f.Path)
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// ParseLock reads the text form WriteTo writes. Blank lines and lines
// starting with # are ignored.
func ParseLock(r io.Reader) (Lock, error) {
	l := Lock{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		sum, p, ok := strings.Cut(line, "  ")
		name, rel, ok2 := strings.Cut(p, "/")
		if b, err := hex.DecodeString(sum); !ok || !ok2 || err != nil || len(b) != sha256.Size || name == "" || rel == "" {
			return nil, fmt.Errorf("skills lock line %d: want \"SHA256  skill/path\"", n)
		}
		l[name] = append(l[name], FileHash{Path: rel, SHA256: strings.ToLower(sum)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("skills lock: %w", err)
	}
	for _, files := range l {
		slices.SortFunc(files, func(a, b FileHash) int { return strings.Compare(a.Path, b.Path) })
	}
	return l, nil
}

// ReadLock reads a skills.lock file.
func ReadLock(path string) (Lock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("skills lock: %w", err)
	}
	defer f.Close()
	l, err := ParseLock(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// check compares a skill's files with the lock and says, in one line, what
// differs: the first changed, added and missing files.
func (l Lock) check(name string, files []FileHash) error {
	pinned, ok := l[name]
	if !ok {
		return ErrNotLocked
	}
	want := map[string]string{}
	for _, f := range pinned {
		want[f.Path] = f.SHA256
	}
	var changed, added []string
	for _, f := range files {
		w, ok := want[f.Path]
		switch {
		case !ok:
			added = append(added, f.Path)
		case w != f.SHA256:
			changed = append(changed, fmt.Sprintf("%s (sha256 %s…, pinned %s…)", f.Path, f.SHA256[:12], w[:12]))
		}
		delete(want, f.Path)
	}
	missing := make([]string, 0, len(want))
	for p := range want {
		missing = append(missing, p)
	}
	slices.Sort(missing)
	var parts []string
	for _, g := range []struct {
		what  string
		paths []string
	}{{"changed", changed}, {"added", added}, {"missing", missing}} {
		if len(g.paths) > 0 {
			parts = append(parts, g.what+": "+strings.Join(g.paths, ", "))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrLockMismatch, strings.Join(parts, "; "))
}

// PinnedScripts returns the read-only scripts of the loaded skills with the
// SHA-256 the lock pins them to (path -> hex); empty without a lock. The
// agent checks a script against its hash before a command using it passes.
func (s Set) PinnedScripts() map[string]string {
	out := map[string]string{}
	for _, sk := range s.Skills {
		for p, h := range sk.pinned {
			out[p] = h
		}
	}
	return out
}

// VerifyScript reports whether the file at path still has the SHA-256 sum.
func VerifyScript(path, sum string) error {
	got, err := hashFile(path)
	if err != nil {
		return fmt.Errorf("read-only script %s: %w", path, err)
	}
	if got != sum {
		return fmt.Errorf("%w: read-only script %s (sha256 %s…, pinned %s…)", ErrLockMismatch, path, got[:12], sum[:12])
	}
	return nil
}
