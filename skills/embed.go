package skills

import (
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// packFS holds the skill packs shipped with thinbot, so that a binary alone
// can install them (thinbot skills install). Test data and Go tests inside
// the pack folders are embedded too but never installed.
//
//go:embed csv-stats log-triage promql skill-author sys-doctor
var packFS embed.FS

// ErrInstallUnsafe is returned by Install when the bot's user could change
// the installed files (the target folder or one above it is writable by it).
var ErrInstallUnsafe = errors.New("unsafe install target")

// Packs returns the names of the embedded skill packs, sorted.
func Packs() []string {
	entries, _ := packFS.ReadDir(".")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// PackFiles returns the installable files of the embedded packs as
// slash-separated paths ("sys-doctor/scripts/doctor.sh"), sorted: every file
// except test data and Go tests.
func PackFiles() []string {
	var out []string
	_ = fs.WalkDir(packFS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			out = append(out, p)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// packMode is the mode an installed pack file gets: scripts are executable.
func packMode(p string) os.FileMode {
	if parts := strings.Split(p, "/"); len(parts) > 2 && parts[1] == "scripts" {
		return 0o755
	}
	return 0o644
}

// Install writes the embedded packs into dir (one folder per pack), so that
// they are owned by the installing user (root, in a real install) and not
// writable by the bot's user botUID: folders 0755, scripts 0755, other files
// 0644. It refuses, before writing anything, when dir or a folder above it
// (or a pack folder already there) is owned by botUID, is group- or
// world-writable without the sticky bit, or when it runs as botUID itself.
// Files are replaced atomically (written beside, then renamed), so running
// Install again is harmless; files in dir that the packs do not ship are
// left alone. It returns the paths it wrote.
func Install(dir string, botUID int) ([]string, error) {
	if botUID < 0 {
		return nil, fmt.Errorf("%w: no bot user given", ErrInstallUnsafe)
	}
	if os.Getuid() == botUID {
		return nil, fmt.Errorf("%w: running as the bot's user (uid %d): install as root", ErrInstallUnsafe, botUID)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	l := &loader{uid: botUID}
	if err := l.checkTree(abs); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	var written []string
	for _, p := range PackFiles() {
		dst := filepath.Join(abs, filepath.FromSlash(p))
		if err := l.mkdirs(abs, filepath.Dir(dst)); err != nil {
			return written, err
		}
		data, err := packFS.ReadFile(p)
		if err != nil {
			return written, fmt.Errorf("install: %s: %w", p, err)
		}
		if err := writeAtomic(dst, data, packMode(p)); err != nil {
			return written, fmt.Errorf("install: %w", err)
		}
		written = append(written, dst)
	}
	return written, nil
}

// checkTree checks that dir (if it exists) and every folder above it cannot
// be changed by the bot's user.
func (l *loader) checkTree(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("install: %w", err)
		case fi.Mode()&fs.ModeSymlink != 0 && d == dir:
			return fmt.Errorf("%w: %s is a symlink", ErrInstallUnsafe, d)
		default:
			if fi.Mode()&fs.ModeSymlink != 0 {
				if fi, err = os.Stat(d); err != nil {
					return fmt.Errorf("install: %w", err)
				}
			}
			if why := l.writable(fi); why != "" {
				return fmt.Errorf("%w: folder %s is %s", ErrInstallUnsafe, d, why)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// mkdirs creates the folders from root down to dir with mode 0755, refusing
// a symlink or a folder the bot's user could change on the way.
func (l *loader) mkdirs(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("install: %s is outside %s", dir, root)
	}
	d := root
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		if part == "." {
			continue
		}
		d = filepath.Join(d, part)
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(d, 0o755); err != nil {
				return fmt.Errorf("install: %w", err)
			}
			if fi, err = os.Lstat(d); err != nil {
				return fmt.Errorf("install: %w", err)
			}
		} else if err != nil {
			return fmt.Errorf("install: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%w: %s is not a folder (%s)", ErrInstallUnsafe, d, fi.Mode().Type())
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("install: %w", err)
		}
		if fi, err = os.Lstat(d); err != nil {
			return fmt.Errorf("install: %w", err)
		}
		if why := l.writable(fi); why != "" {
			return fmt.Errorf("%w: folder %s is %s", ErrInstallUnsafe, d, why)
		}
	}
	return nil
}

// writeAtomic writes data to a new file beside p and renames it over p.
func writeAtomic(p string, data []byte, mode os.FileMode) error {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(p), "."+path.Base(filepath.ToSlash(p))+"."+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(mode)
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, p)
	}
	if werr != nil {
		_ = os.Remove(tmp)
	}
	return werr
}
