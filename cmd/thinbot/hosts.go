package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/agentcore/fleet"
	"github.com/thinbot/thinbot/agentcore/sandbox"
)

// The fleet's wiring: the fleet: config section and the fleet file, their
// checks, and `thinbot hosts`. The checks protect the two SSH identities:
// the read-only and the privileged identity never become one login with
// one key (identitiesCanCollide), each key is a file ssh will use and no
// other local user can read (checkSSHKey), host keys come from a
// known_hosts file that has entries (hasKnownHost: no trust on first use),
// and the ControlMaster sockets live in a directory only the daemon can
// enter (privateDir), so that a command cannot borrow the privileged
// connection. The connections themselves are package fleet's.

// fleetConfig is the fleet: section of the daemon config, and the whole of
// a fleet file (THINBOT_FLEET, thinbot hosts --fleet) for the terminal
// front end. deploy/fleet.md explains every key.
type fleetConfig struct {
	// Inventory is an Ansible inventory file, INI or YAML.
	Inventory string `yaml:"inventory"`
	// Hosts are more hosts, beside (or instead of) the inventory's.
	Hosts []fleetHost `yaml:"hosts"`
	// Groups give groups their members and their two identities; the
	// first group (in this order) that holds a host gives it its
	// identities. A group named "all" holds every host.
	Groups      []fleetGroup `yaml:"groups"`
	Concurrency int          `yaml:"concurrency"`
	// Timeout is per host, connection included, and ConnectTimeout is
	// ssh's; unset (or, as they always took it, zero or below) means
	// fleet.Config's default.
	Timeout        duration `yaml:"timeout"`
	ConnectTimeout duration `yaml:"connect_timeout"`
	// ControlPersist is how long idle ControlMaster connections stay
	// ("60s" by default); "off" disables multiplexing.
	ControlPersist controlPersist `yaml:"control_persist"`
	SSH            string         `yaml:"ssh"`
	SSHConfig      string         `yaml:"ssh_config"`
	KnownHosts     string         `yaml:"known_hosts"`
	// NoTTY is accepted and has no effect: remote commands never get a
	// terminal now (a pager or prompt would wait on it), and /stop ends
	// them through the session's end instead (fleet.RemoteCommand). Kept
	// so that configs that set it still load.
	NoTTY bool `yaml:"no_tty"`
}

// controlPersist is fleet.control_persist: a Go duration, or "off" (off:
// no multiplexing). Unset or zero is fleet.Config's default (60s); a
// negative duration is off too, as it always was (fleet.Config's
// ControlPersist below zero). Like duration, a value that is neither does
// not fail the decoding: it is kept with its text for check to report.
type controlPersist struct {
	time.Duration
	off  bool
	text string
	err  error
}

// errControlPersist is controlPersist's error; check words it for the key.
var errControlPersist = errors.New(`want a duration like 60s or "off"`)

// UnmarshalYAML takes any scalar, as a string field does.
func (p *controlPersist) UnmarshalYAML(n *yaml.Node) error {
	var text string
	if err := n.Decode(&text); err != nil {
		return err
	}
	*p = controlPersist{text: text}
	switch text {
	case "":
	case "off":
		p.off = true
	default:
		v, err := time.ParseDuration(text)
		switch {
		case err != nil:
			p.err = errControlPersist
		case v < 0:
			p.off = true
		default:
			p.Duration = v
		}
	}
	return nil
}

// check reports a value that did not parse, as "fleet.control_persist
// "TEXT": want a duration like 60s or "off"".
func (p controlPersist) check(bad func(string, ...any)) {
	if p.err != nil {
		bad("fleet.control_persist %q: %v", p.text, p.err)
	}
}

// value is fleet.Config.ControlPersist: below zero when off.
func (p controlPersist) value() time.Duration {
	if p.off {
		return -1
	}
	return p.Duration
}

type fleetHost struct {
	Name    string   `yaml:"name"`
	Address string   `yaml:"address"`
	Port    int      `yaml:"port"`
	User    string   `yaml:"user"`
	Groups  []string `yaml:"groups"`
}

type fleetGroup struct {
	Name       string         `yaml:"name"`
	Hosts      []string       `yaml:"hosts"`
	Children   []string       `yaml:"children"`
	ReadOnly   fleet.Identity `yaml:"read_only"`
	Privileged fleet.Identity `yaml:"privileged"`
}

func (fc fleetConfig) configured() bool {
	return !reflect.ValueOf(fc).IsZero()
}

// inventory builds the inventory: the file's, then the configured hosts
// and groups. Relative paths are relative to base (the config's folder).
func (fc fleetConfig) inventory(base string) (*fleet.Inventory, error) {
	inv := fleet.NewInventory()
	if fc.Inventory != "" {
		fi, err := fleet.LoadFile(rel(base, fc.Inventory))
		if err != nil {
			return nil, err
		}
		inv.Merge(fi)
	}
	for _, h := range fc.Hosts {
		if h.Name == "" {
			return nil, errors.New("fleet.hosts: a host without a name")
		}
		vars := map[string]string{}
		if h.Address != "" {
			vars["ansible_host"] = h.Address
		}
		if h.Port != 0 {
			vars["ansible_port"] = fmt.Sprint(h.Port)
		}
		if h.User != "" {
			vars["ansible_user"] = h.User
		}
		inv.AddHost(h.Name, "", vars)
		for _, g := range h.Groups {
			inv.AddHost(h.Name, g, nil)
		}
	}
	for _, g := range fc.Groups {
		if g.Name == "" {
			return nil, errors.New("fleet.groups: a group without a name")
		}
		for _, h := range g.Hosts {
			inv.AddHost(h, g.Name, nil)
		}
		for _, c := range g.Children {
			inv.AddChild(g.Name, c)
		}
		if g.Name != "all" {
			inv.SetGroupVars(g.Name, nil)
		}
	}
	if err := inv.Build(); err != nil {
		return nil, err
	}
	return inv, nil
}

// check returns every problem of the section.
func (fc fleetConfig) check(base string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, err := fc.inventory(base); err != nil {
		errs = append(errs, fmt.Errorf("fleet: %w", err))
	}
	withIDs := 0
	for _, g := range fc.Groups {
		ro, rw := g.ReadOnly, g.Privileged
		if ro == (fleet.Identity{}) && rw == (fleet.Identity{}) {
			continue
		}
		withIDs++
		switch {
		case ro.User == "" && ro.Key == "" || rw.User == "" && rw.Key == "":
			errs = append(errs, fmt.Errorf("fleet.groups %s: set both read_only and privileged (a user, a key or both)", g.Name))
		case ro == rw:
			errs = append(errs, fmt.Errorf("fleet.groups %s: read_only and privileged are the same identity; pass verdicts would run with write rights", g.Name))
		case identitiesCanCollide(base, ro, rw):
			errs = append(errs, fmt.Errorf("fleet.groups %s: read_only and privileged can be the same identity (the same key, %s, and a login that is the same or comes from ansible_user or ssh_config for one of them); give each its own key", g.Name, keyName(ro.Key)))
		}
		for _, k := range []struct{ what, path string }{{"read_only", ro.Key}, {"privileged", rw.Key}} {
			if k.path == "" {
				continue
			}
			if err := checkSSHKey(rel(base, k.path)); err != nil {
				errs = append(errs, fmt.Errorf("fleet.groups %s: %s key: %w", g.Name, k.what, err))
			}
		}
	}
	errs = append(errs, fc.checkSSHFiles(base)...)
	if withIDs == 0 {
		errs = append(errs, errors.New("fleet: no group has read_only and privileged identities, so no host can be reached"))
	}
	fc.Timeout.checkOrUnset(bad, "fleet.timeout", "120s")
	fc.ConnectTimeout.checkOrUnset(bad, "fleet.connect_timeout", "10s")
	fc.ControlPersist.check(bad)
	if fc.Concurrency < 0 {
		errs = append(errs, errors.New("fleet.concurrency: must not be negative"))
	}
	return errs
}

// identitiesCanCollide reports whether a read-only and a privileged
// identity can end up as one login with one key on some host: both offer
// the same key (both none: the agent's or ssh's defaults; the same file; or
// two files with the same content) and the logins are equal, or one of
// them is left to the host's ansible_user or ssh_config, which can name the
// other's.
func identitiesCanCollide(base string, ro, rw fleet.Identity) bool {
	if ro.User != rw.User && ro.User != "" && rw.User != "" {
		return false
	}
	if ro.Key == "" || rw.Key == "" {
		return ro.Key == rw.Key
	}
	a, b := rel(base, ro.Key), rel(base, rw.Key)
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	da, errA := os.ReadFile(a)
	db, errB := os.ReadFile(b)
	return errA == nil && errB == nil && bytes.Equal(bytes.TrimSpace(da), bytes.TrimSpace(db))
}

func keyName(k string) string {
	if k == "" {
		return "none configured, so the agent's or ssh's default keys"
	}
	return k
}

// checkSSHKey refuses a private key file the ssh client will not use: one
// this process (config check runs as the daemon's user) cannot read, one
// that is not a regular file, one ssh ignores because its owner is this
// user and group or others may read it ("UNPROTECTED PRIVATE KEY FILE"),
// and one every local user can read whoever owns it.
func checkSSHKey(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w (the daemon's user must be able to read it)", err)
	}
	f.Close()
	perm := st.Mode().Perm()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == os.Geteuid() && perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o and belongs to this user: ssh refuses such a key (bad permissions); chmod 600 it", path, perm)
	}
	if perm&0o004 != 0 {
		return fmt.Errorf("%s has mode %04o: every local user can read this private key; chmod o-r it", path, perm)
	}
	return nil
}

// checkSSHFiles refuses a known_hosts or ssh_config the ssh client cannot
// read, and a known_hosts that is empty (then every host fails "Host key
// verification failed"). Without known_hosts: and ssh_config:, ssh's
// defaults (~/.ssh/known_hosts, /etc/ssh/ssh_known_hosts) must hold one.
func (fc fleetConfig) checkSSHFiles(base string) []error {
	var errs []error
	if fc.SSHConfig != "" && fc.SSHConfig != "/dev/null" {
		if err := readable(rel(base, fc.SSHConfig)); err != nil {
			errs = append(errs, fmt.Errorf("fleet.ssh_config: %w", err))
		}
	}
	switch {
	case fc.KnownHosts == "/dev/null":
		errs = append(errs, errors.New("fleet.known_hosts is /dev/null: every host would fail host key verification"))
	case fc.KnownHosts != "":
		p := rel(base, fc.KnownHosts)
		if err := readable(p); err != nil {
			errs = append(errs, fmt.Errorf("fleet.known_hosts: %w (every host would fail host key verification)", err))
		} else if !hasKnownHost(p) {
			errs = append(errs, fmt.Errorf("fleet.known_hosts %s has no host key: every host would fail host key verification", p))
		}
	case fc.SSHConfig == "":
		home, _ := os.UserHomeDir()
		if (home == "" || !hasKnownHost(filepath.Join(home, ".ssh", "known_hosts"))) && !hasKnownHost("/etc/ssh/ssh_known_hosts") {
			errs = append(errs, errors.New("fleet: no known_hosts: set fleet.known_hosts to a file with the hosts' keys (neither ~/.ssh/known_hosts nor /etc/ssh/ssh_known_hosts has one, so every host would fail host key verification)"))
		}
	}
	return errs
}

func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// hasKnownHost reports whether the known_hosts file at path holds at least
// one entry.
func hasKnownHost(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			return true
		}
	}
	return false
}

// open builds the Fleet. The ssh client's environment is the allowlisted
// one of commands (no API key, no chat token) plus SSH_AUTH_SOCK.
func (fc fleetConfig) open(base string, environ []string, path string) (*fleet.Fleet, error) {
	return fc.openIn(base, environ, path, "")
}

// openIn is open with the ControlMaster sockets in controlDir, whose
// read-only masters outlive the process ("" means a private directory,
// every master ended at Close).
func (fc fleetConfig) openIn(base string, environ []string, path, controlDir string) (*fleet.Fleet, error) {
	cfg, err := fc.config(base, environ, path, controlDir)
	if err != nil {
		return nil, err
	}
	return fleet.New(cfg)
}

// config checks the section and builds openIn's fleet.Config.
func (fc fleetConfig) config(base string, environ []string, path, controlDir string) (fleet.Config, error) {
	if errs := fc.check(base); len(errs) > 0 {
		return fleet.Config{}, errors.Join(errs...)
	}
	inv, err := fc.inventory(base)
	if err != nil {
		return fleet.Config{}, err
	}
	cfg := fleet.Config{Inventory: inv, Concurrency: fc.Concurrency,
		Timeout: fc.Timeout.Duration, ConnectTimeout: fc.ConnectTimeout.Duration, ControlPersist: fc.ControlPersist.value(),
		SSH: fc.SSH, SSHConfig: relOpt(base, fc.SSHConfig), KnownHosts: relOpt(base, fc.KnownHosts)}
	if path == "" {
		path = agentcore.DefaultPath
	}
	cfg.Env = agentcore.ChildEnv(environ, []string{"SSH_AUTH_SOCK"}, path)
	cfg.ControlDir, cfg.KeepReadOnly = controlDir, controlDir != ""
	for _, g := range fc.Groups {
		if g.ReadOnly == (fleet.Identity{}) && g.Privileged == (fleet.Identity{}) {
			continue
		}
		ro, rw := g.ReadOnly, g.Privileged
		ro.Key, rw.Key = relOpt(base, ro.Key), relOpt(base, rw.Key)
		cfg.Access = append(cfg.Access, fleet.Access{Group: g.Name, ReadOnly: ro, Privileged: rw})
	}
	return cfg, nil
}

func rel(base, p string) string {
	if p == "" || filepath.IsAbs(p) || base == "" {
		return p
	}
	return filepath.Join(base, p)
}

func relOpt(base, p string) string {
	if p == "" || p == "/dev/null" {
		return p
	}
	return rel(base, p)
}

// loadFleetFile reads a fleet file: the fleet: section's keys at the top.
func loadFleetFile(path string) (fleetConfig, error) {
	var fc fleetConfig
	data, err := os.ReadFile(path)
	if err != nil {
		return fc, fmt.Errorf("fleet: %w", err)
	}
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return fc, fmt.Errorf("fleet %s: %w", path, err)
	}
	if unknown := unknownKeys(&root, reflect.TypeFor[fleetConfig](), ""); len(unknown) > 0 {
		return fc, fmt.Errorf("fleet %s: %w", path, errors.Join(unknown...))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return fc, fmt.Errorf("fleet %s: %w", path, err)
	}
	return fc, nil
}

// localFleet opens the terminal front end's fleet: THINBOT_FLEET names a
// fleet file; unset means none. It returns the files commands must not
// read: the fleet's keys, known_hosts and ssh_config, and the directory of
// the ControlMaster sockets.
func localFleet(e *env) (*fleet.Fleet, []string, error) {
	path := e.getenv("THINBOT_FLEET")
	if path == "" {
		return nil, nil, nil
	}
	fc, err := loadFleetFile(path)
	if err != nil {
		return nil, nil, err
	}
	base := filepath.Dir(path)
	cd := warmControlDir(e.getenv("XDG_RUNTIME_DIR"))
	fl, err := fc.openIn(base, os.Environ(), "", cd)
	if err != nil {
		return nil, nil, fmt.Errorf("THINBOT_FLEET %s: %w", path, err)
	}
	hidden := fc.keyFiles(base)
	if cd != "" {
		hidden = append(hidden, cd)
	}
	return fl, hidden, nil
}

// warmControlDir is where the terminal front end keeps the read-only
// identities' ControlMaster sockets between runs, so that the next thinbot
// ask starts warm (within control_persist): $XDG_RUNTIME_DIR/thinbot-ssh,
// the per-user runtime dir (a tmpfs, gone at logout). "" (a private
// directory per process, every master ended at exit) when there is no
// such dir, or when it, or the socket dir, is not this user's alone: a
// socket anyone else can reach runs commands past the gate. Only the
// read-only masters stay: a privileged one would be an idle write channel
// that no approval guards. Commands never see the directory (hidden like
// the keys), so a local command cannot use a master either.
func warmControlDir(runtimeDir string) string {
	if runtimeDir == "" || !filepath.IsAbs(runtimeDir) || !privateDir(runtimeDir) {
		return ""
	}
	d := filepath.Join(runtimeDir, "thinbot-ssh")
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return ""
	}
	if !privateDir(d) || len(d) > 107-1-55-17 {
		return ""
	}
	return d
}

// privateDir reports whether d is a directory (not a symlink) owned by
// this user that no one else can enter.
func privateDir(d string) bool {
	st, err := os.Lstat(d)
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid()
}

// cmdHosts lists the inventory: thinbot hosts [--json] [--config FILE |
// --fleet FILE] [PATTERN].
func cmdHosts(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "hosts")
	asJSON := fs.Bool("json", false, "print JSON")
	cfgPath := fs.String("config", "", "the daemon config `file` (its fleet: section)")
	fleetPath := fs.String("fleet", "", "a fleet `file` (default $THINBOT_FLEET)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: thinbot hosts [--json] [--config FILE | --fleet FILE] [PATTERN]\n\nLists the fleet's hosts (all, or those PATTERN selects: web, web*, web:!web-03) with their groups and logins.")
		fs.PrintDefaults()
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	var fc fleetConfig
	base := ""
	switch {
	case *cfgPath != "":
		c, err := loadConfig(*cfgPath, e.getenv)
		if c == nil {
			return err
		}
		fc, base = c.Fleet, filepath.Dir(*cfgPath)
	default:
		p := *fleetPath
		if p == "" {
			p = e.getenv("THINBOT_FLEET")
		}
		if p == "" {
			return fmt.Errorf("%w: no fleet: pass --config or --fleet, or set THINBOT_FLEET", errUsage)
		}
		var err error
		if fc, err = loadFleetFile(p); err != nil {
			return err
		}
		base = filepath.Dir(p)
	}
	if !fc.configured() {
		return errors.New("the config has no fleet: section")
	}
	if errs := fc.check(base); len(errs) > 0 {
		return errors.Join(errs...)
	}
	fl, err := fc.open(base, os.Environ(), "")
	if err != nil {
		return err
	}
	defer fl.Close()
	inv := fl.Inventory()
	hosts := inv.Hosts()
	if fs.NArg() > 0 {
		if hosts, err = inv.Select(strings.Join(fs.Args(), ",")); err != nil {
			return err
		}
	}
	type row struct {
		fleet.Host
		ReadOnly   *fleet.Identity `json:"read_only"`
		Privileged *fleet.Identity `json:"privileged"`
	}
	rows := make([]row, 0, len(hosts))
	for _, h := range hosts {
		r := row{Host: h}
		if id, ok := fl.Identity(h, sandbox.ReadOnly); ok {
			r.ReadOnly = &id
		}
		if id, ok := fl.Identity(h, sandbox.Approved); ok {
			r.Privileged = &id
		}
		rows = append(rows, r)
	}
	if *asJSON {
		groups := map[string][]string{}
		for _, g := range inv.GroupNames() {
			groups[g] = inv.GroupHosts(g)
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Hosts       []row               `json:"hosts"`
			Groups      map[string][]string `json:"groups"`
			Concurrency int                 `json:"concurrency"`
			// TimeoutSec is 0 when the fleet takes the local commands' timeout.
			TimeoutSec float64 `json:"timeout_seconds"`
		}{rows, groups, fl.Concurrency(), fl.Timeout().Seconds()})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tADDRESS\tGROUPS\tREAD-ONLY LOGIN\tPRIVILEGED LOGIN")
	login := func(id *fleet.Identity) string {
		if id == nil {
			return "- (unreachable: no identity)"
		}
		s := id.User
		if s == "" {
			s = "(ssh_config)"
		}
		if id.Key != "" {
			s += " key " + id.Key
		}
		return s
	}
	for _, r := range rows {
		addr := r.Addr
		if r.Port != 0 {
			addr = fmt.Sprintf("%s:%d", addr, r.Port)
		}
		groups := strings.Join(r.Groups, ",")
		if groups == "" {
			groups = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, addr, groups, login(r.ReadOnly), login(r.Privileged))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	timeout := "the local commands' timeout (budgets.command_timeout, 120s by default)"
	if fl.Timeout() > 0 {
		timeout = fl.Timeout().String()
	}
	fmt.Fprintf(e.stdout, "\n%d host(s) · %d group(s) · concurrency %d · timeout %s per host\n",
		len(rows), len(inv.GroupNames()), fl.Concurrency(), timeout)
	return nil
}

// keyFiles returns the files that make the fleet's trust, absolute, for
// the sandbox and the gate to hide from commands: the identities' private
// keys, and the known_hosts and ssh_config thinbot gives ssh. An approved
// command must not read a key, nor rewrite known_hosts (an ssh-keygen -R
// the model proposes after a changed host key would make thinbot trust
// whatever key the host presents next) or ssh_config.
func (fc fleetConfig) keyFiles(base string) []string {
	var out []string
	add := func(p string) {
		if p == "" || p == "/dev/null" {
			return
		}
		if a, err := filepath.Abs(rel(base, p)); err == nil && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	for _, g := range fc.Groups {
		add(g.ReadOnly.Key)
		add(g.Privileged.Key)
	}
	add(fc.KnownHosts)
	add(fc.SSHConfig)
	return out
}

// serveFleet opens the daemon's fleet; nil when none is configured.
func serveFleet(c *daemonConfig, configPath string) (*fleet.Fleet, error) {
	if !c.Fleet.configured() {
		return nil, nil
	}
	return c.Fleet.open(filepath.Dir(configPath), os.Environ(), c.CommandPath)
}
