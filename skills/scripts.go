package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// readOnlyScripts reads the read-only script declarations of a skill (the
// top-level read-only-scripts field and metadata.thinbot.read-only-scripts)
// and returns the absolute, resolved paths that pass validation. Each
// rejected path becomes a warning and is not declared.
func (l *loader) readOnlyScripts(sk *Skill, fm map[string]any, warn func(string)) []string {
	declared := stringList(fm["read-only-scripts"], true)
	if tb, ok := sk.Metadata["thinbot"].(map[string]any); ok {
		declared = appendNew(declared, stringList(tb["read-only-scripts"], true)...)
	}
	var out []string
	for _, rel := range declared {
		p, err := l.validateScript(sk.Dir, rel)
		if err != nil {
			warn(fmt.Sprintf("read-only script %q not declared: %v", rel, err))
			continue
		}
		out = appendNew(out, p)
	}
	return out
}

// validateScript resolves rel inside the skill folder dir (already
// resolved) and checks that it is a regular file inside dir after resolving
// symlinks, and that neither it nor any folder above it can be changed by
// the bot's user.
func (l *loader) validateScript(dir, rel string) (string, error) {
	rel = strings.ReplaceAll(rel, "{SKILL_DIR}/", "")
	if filepath.IsAbs(rel) {
		return "", errors.New("path must be relative to the skill folder")
	}
	joined := filepath.Join(dir, filepath.FromSlash(rel))
	if !inside(dir, joined) {
		return "", errors.New("path leaves the skill folder")
	}
	real, err := filepath.EvalSymlinks(joined)
	if err != nil {
		return "", unwrapPathError(err)
	}
	if !inside(dir, real) {
		return "", errors.New("symlink leads out of the skill folder")
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", unwrapPathError(err)
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if why := l.writable(fi); why != "" {
		return "", fmt.Errorf("the script is %s", why)
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		di, err := os.Stat(d)
		if err != nil {
			return "", unwrapPathError(err)
		}
		if why := l.writable(di); why != "" {
			return "", fmt.Errorf("folder %s is %s", d, why)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	return real, nil
}

// writable says why the bot's user could change fi (or replace entries of
// the folder fi), or "" if it cannot. A folder with the sticky bit (such as
// /tmp) protects entries owned by others, so its world-writable bit is fine.
func (l *loader) writable(fi fs.FileInfo) string {
	if l.uid == 0 {
		return "writable by root, the bot's user"
	}
	if uid, ok := owner(fi); !ok {
		return "of unknown ownership"
	} else if uid == l.uid {
		return "owned by the bot's user"
	}
	if fi.Mode().Perm()&0o022 != 0 && !(fi.IsDir() && fi.Mode()&fs.ModeSticky != 0) {
		return "group- or world-writable"
	}
	return ""
}
