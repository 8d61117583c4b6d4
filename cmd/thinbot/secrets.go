package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The daemon's secrets are hidden from every command by construction: every
// config field that names a file holding a secret carries the struct tag
// secret:"file", and protectedPaths collects them by reflection, so a new key
// cannot be forgotten the way web.tokens_file once was. Fields that name
// files without secrets say so with secret:"no"; a test refuses any *_file
// key that carries neither (TestEverySecretFileKeyIsHidden).

// secretFiles returns the config's secret-bearing file keys that are set,
// as "key path" pairs in field order (the key is the YAML path, for
// messages).
func (c *daemonConfig) secretFiles() [][2]string {
	var out [][2]string
	var walk func(v reflect.Value, where string)
	walk = func(v reflect.Value, where string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), where)
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Struct {
				for i := range v.Len() {
					walk(v.Index(i), fmt.Sprintf("%s[%d]", where, i))
				}
			}
		case reflect.Struct:
			t := v.Type()
			for i := range t.NumField() {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				key := name
				if where != "" {
					key = where + "." + name
				}
				fv := v.Field(i)
				if f.Tag.Get("secret") == "file" {
					switch fv.Kind() {
					case reflect.String:
						if p := fv.String(); p != "" {
							out = append(out, [2]string{key, p})
						}
					case reflect.Slice:
						for j := range fv.Len() {
							if p := fv.Index(j).String(); p != "" {
								out = append(out, [2]string{fmt.Sprintf("%s[%d]", key, j), p})
							}
						}
					}
					continue
				}
				walk(fv, key)
			}
		}
	}
	walk(reflect.ValueOf(c), "")
	return out
}

// protectedPaths are the daemon's own files, absolute, which the gate protects
// and the kernel sandbox hides from every command: the state dir (its chain,
// its login and button keys), the config file, every secret-bearing file the
// config names, the fleet's SSH keys, and the systemd unit's files and
// EnvironmentFiles (where operators put AGENT_API_KEY).
func (c *daemonConfig) protectedPaths(configPath string) []string {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	out := []string{abs(c.StateDir), abs(configPath)}
	for _, kv := range c.secretFiles() {
		out = append(out, abs(kv[1]))
	}
	// The fleet's SSH keys are the daemon's, never a local command's.
	out = append(out, c.Fleet.keyFiles(filepath.Dir(abs(configPath)))...)
	// A cluster's raft log and snapshots hold the chain too.
	if c.Cluster.configured() {
		out = append(out, abs(c.Cluster.dataDir(c.StateDir)))
	}
	out = append(out, c.systemd.hide()...)
	slices.Sort(out)
	return slices.Compact(out)
}

// workspaceProblem says why ws cannot be a workspace, "" if it can: a
// workspace at or under a hidden path is an empty directory to every command
// (the sandbox covers it), so each one would fail with "fork/exec /bin/bash:
// no such file or directory".
func workspaceProblem(ws string, hidden []string) string {
	w := resolved(ws)
	for _, h := range hidden {
		hr := resolved(h)
		if w == hr || strings.HasPrefix(w, hr+"/") {
			return fmt.Sprintf("%s is inside %s, which the sandbox hides from every command (the state dir, the config or a secret): "+
				"commands could not even start there (they would fail with \"no such file or directory\"); use a workspace outside it, e.g. /srv/ops", ws, h)
		}
	}
	return ""
}

// resolved is p absolute with its symlinks resolved as far as they exist.
func resolved(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		return r
	}
	// Resolve the longest existing parent: the state dir may not exist yet.
	dir, rest := a, ""
	for dir != "/" && dir != "." {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(r, rest)
		}
		dir, rest = filepath.Dir(dir), filepath.Join(filepath.Base(dir), rest)
	}
	return a
}

// secretModeProblem says why a secret file with stat st may not hold a
// secret of a daemon running as uid with the groups gids, "" if it may. The
// rule is who can read it: nobody but root, the daemon's user and a group
// the daemon runs with. So the package's layout (root:thinbot 0640, the
// daemon in group thinbot) passes, and so does thinbot:thinbot 0600; a file
// others can read, or whose group the daemon is not in, does not. (A group
// is trusted as a whole: put no other account into the daemon's group.)
func secretModeProblem(path string, mode os.FileMode, fuid, fgid uint32, uid int, gids []int) string {
	perm := mode.Perm()
	switch {
	case perm&0o007 != 0:
		return fmt.Sprintf("%s is readable or writable by other users (mode %s); chmod o-rwx it (0600, or 0640 with the daemon's group)", path, perm)
	case fuid != 0 && int(fuid) != uid:
		return fmt.Sprintf("%s is owned by uid %d, who is neither root nor the daemon's user (uid %d) and can read it; chown it", path, fuid, uid)
	case perm&0o070 != 0 && fgid != 0 && !slices.Contains(gids, int(fgid)):
		why := fmt.Sprintf("%s is open to group %d (mode %s), a group the daemon (uid %d) is not in; chmod g-rwx it or chgrp it to the daemon's group", path, fgid, perm, uid)
		if uid == 0 {
			why += " (config check judges for the user it runs as, or the unit's User=; for a daemon of another user, run it as that user: sudo -u thinbot thinbot config check ...)"
		}
		return why
	case uid != 0 && !(int(fuid) == uid && perm&0o400 != 0) && !(slices.Contains(gids, int(fgid)) && perm&0o040 != 0):
		return fmt.Sprintf("%s cannot be read by the daemon's user (uid %d; the file is %d:%d, mode %s); chown it to that user or chgrp it to the daemon's group with mode 0640", path, uid, fuid, fgid, perm)
	}
	return ""
}

// daemonGroups are the groups this process runs with.
func daemonGroups() []int {
	gids, _ := os.Getgroups()
	return append(gids, os.Getegid())
}

// daemonUser is who the daemon runs as, for the secret files' check.
type daemonUser struct {
	uid  int
	gids []int
}

func currentUser() daemonUser { return daemonUser{uid: os.Geteuid(), gids: daemonGroups()} }

// daemonUser is the unit's User= (with its groups, Group= and
// SupplementaryGroups=) when this process runs as root (config check run
// by an operator with sudo for a daemon that runs as thinbot), else this
// process's user.
func (s systemdSources) daemonUser() daemonUser {
	if os.Geteuid() != 0 || s.User == "" || s.User == "root" {
		return currentUser()
	}
	u, err := user.Lookup(s.User)
	if err != nil {
		return currentUser()
	}
	uid, _ := strconv.Atoi(u.Uid)
	who := daemonUser{uid: uid}
	names, _ := u.GroupIds()
	names = append(names, u.Gid)
	for _, g := range append([]string{s.Group}, s.Groups...) {
		if g == "" {
			continue
		}
		if grp, err := user.LookupGroup(g); err == nil {
			names = append(names, grp.Gid)
		}
	}
	for _, n := range names {
		if gid, err := strconv.Atoi(n); err == nil {
			who.gids = append(who.gids, gid)
		}
	}
	return who
}

// systemdSources is what the daemon's systemd unit gives it: its unit files
// (fragment and drop-ins), the EnvironmentFiles they name, and which secret
// variables each of them sets.
type systemdSources struct {
	Unit string
	// User, Group and Groups are the unit's User=, Group= and
	// SupplementaryGroups=.
	User, Group string
	Groups      []string
	Files       []string // unit files and drop-in directories found
	EnvFiles    []string
	// Vars maps a secret variable's name to the file that sets it.
	Vars map[string]string
}

// systemdDirs are where systemd looks for a system unit and its drop-ins,
// highest priority first (systemd.unit(5)).
var systemdDirs = []string{"/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
	"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// systemdUnit is the unit this process runs as: under systemd
// ($INVOCATION_ID is set) the .service of its cgroup, else the configured
// name, else thinbot.service.
func systemdUnit(configured string, getenv func(string) string) string {
	if getenv("INVOCATION_ID") != "" {
		if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				for _, part := range strings.Split(line, "/") {
					if strings.HasSuffix(part, ".service") {
						configured = part
					}
				}
			}
		}
	}
	if configured == "" {
		configured = "thinbot.service"
	}
	return configured
}

// discoverSystemd finds unit's files in dirs and reads which secret
// variables they and their EnvironmentFiles set. Files it cannot read are
// still listed (they are hidden all the same).
func discoverSystemd(unit string, dirs []string) systemdSources {
	s := systemdSources{Unit: unit, Vars: map[string]string{}}
	names := []string{unit}
	if at := strings.Index(unit, "@"); at > 0 {
		names = append(names, unit[:at+1]+filepath.Ext(unit)) // thinbot@.service
	}
	var files []string
	for _, d := range dirs {
		for _, n := range names {
			if f := filepath.Join(d, n); exists(f) {
				files = append(files, f)
			}
			dd := filepath.Join(d, n+".d")
			if exists(dd) {
				s.Files = append(s.Files, dd)
				m, _ := filepath.Glob(filepath.Join(dd, "*.conf"))
				files = append(files, m...)
			}
		}
		// Drop-ins for every service.
		if dd := filepath.Join(d, "service.d"); exists(dd) {
			m, _ := filepath.Glob(filepath.Join(dd, "*.conf"))
			files = append(files, m...)
		}
	}
	for _, f := range files {
		s.Files = append(s.Files, f)
		s.readUnit(f)
	}
	for _, ef := range s.EnvFiles {
		s.readEnvFile(ef)
	}
	return s
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// readUnit notes the EnvironmentFile= and secret Environment= lines of a
// unit file.
func (s *systemdSources) readUnit(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	s.parseUnit(f, path)
}

// parseUnit reads the lines of the unit file path from r.
func (s *systemdSources) parseUnit(r io.Reader, path string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "User":
			s.User = strings.TrimSpace(val)
		case "Group":
			s.Group = strings.TrimSpace(val)
		case "SupplementaryGroups":
			s.Groups = append(s.Groups, strings.Fields(val)...)
		case "EnvironmentFile":
			p := strings.TrimPrefix(strings.TrimSpace(val), "-")
			if p != "" && filepath.IsAbs(p) && !strings.Contains(p, "%") && !slices.Contains(s.EnvFiles, p) {
				s.EnvFiles = append(s.EnvFiles, p)
			}
		case "Environment":
			for _, kv := range strings.Fields(val) {
				name, _, _ := strings.Cut(strings.Trim(kv, `"'`), "=")
				if secretVar(name) {
					s.Vars[name] = path
				}
			}
		}
	}
}

// readEnvFile notes the secret variables an EnvironmentFile sets.
func (s *systemdSources) readEnvFile(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	s.parseEnvFile(f, path)
}

// parseEnvFile reads the lines of the EnvironmentFile path from r.
func (s *systemdSources) parseEnvFile(r io.Reader, path string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		if name, _, ok := strings.Cut(line, "="); ok && secretVar(strings.TrimSpace(name)) {
			s.Vars[strings.TrimSpace(name)] = path
		}
	}
}

// hide is what of the unit the sandbox hides: its files, drop-in
// directories and EnvironmentFiles.
func (s systemdSources) hide() []string {
	return append(append([]string(nil), s.Files...), s.EnvFiles...)
}

// secretVar reports whether an environment variable holds a secret: the
// model key, or a name that says token, secret, password or key.
func secretVar(name string) bool {
	u := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"} {
		if strings.Contains(u, w) {
			return true
		}
	}
	return false
}

// secretWarnings are config check's warnings about secrets that come from
// the environment: the file systemd reads each from (hidden from commands,
// but a file only thinbot opens, named in the config, is the better home).
func (c *daemonConfig) secretWarnings(getenv func(string) string) []string {
	var out []string
	names := make([]string, 0, len(c.systemd.Vars))
	for n := range c.systemd.Vars {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		use := ""
		if n == "AGENT_API_KEY" && c.Model.APIKeyFile != "" {
			use = " (unused: model.api_key_file is set)"
		}
		out = append(out, fmt.Sprintf("secret %s comes from the environment%s: systemd reads it from %s (unit %s). Commands cannot read that file (it is hidden), "+
			"but every process of the unit gets the value; prefer model.api_key_file (or the platform's *_file keys), a file only thinbot opens", n, use, c.systemd.Vars[n], c.systemd.Unit))
	}
	if c.Model.APIKeyFile == "" && getenv("AGENT_API_KEY") != "" && c.systemd.Vars["AGENT_API_KEY"] == "" {
		out = append(out, fmt.Sprintf("secret AGENT_API_KEY comes from the environment, from no file of unit %s that thinbot found "+
			"(set systemd_unit if the unit has another name, or list the file under secret_files so that commands cannot read it); prefer model.api_key_file", c.systemd.Unit))
	}
	return out
}

// secretValues are the secrets in the config's secret files, for the
// agent to redact from command output: each file's content, and of each of
// its lines the value of NAME=value or else the last word (the token of a
// web.tokens_file line, not the user's name), when 16 characters or more.
func (c *daemonConfig) secretValues() []string {
	var out []string
	for _, kv := range c.secretFiles() {
		v, err := readSecret(kv[1])
		if err != nil || v == "" {
			continue
		}
		out = append(out, v)
		for _, line := range strings.Split(v, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			w := line
			if _, val, ok := strings.Cut(line, "="); ok {
				w = strings.Trim(strings.TrimSpace(val), `"'`)
			} else if f := strings.Fields(line); len(f) > 1 {
				w = f[len(f)-1]
			}
			if len(w) >= 16 && w != v {
				out = append(out, w)
			}
		}
	}
	return out
}
