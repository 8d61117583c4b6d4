package fleet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Host is one machine of the inventory.
type Host struct {
	// Name is the inventory name (what patterns match and results show).
	Name string `json:"name"`
	// Addr is what ssh connects to: ansible_host, or the name.
	Addr string `json:"addr"`
	// Port is ansible_port; 0 leaves it to ssh_config (22 by default).
	Port int `json:"port,omitempty"`
	// User is ansible_user: the login when the identity names none.
	User string `json:"user,omitempty"`
	// Groups are every group the host belongs to, directly or through
	// children, sorted; "all" is implied and not listed.
	Groups []string `json:"groups,omitempty"`
}

// Inventory is a set of hosts and groups.
type Inventory struct {
	hosts map[string]*Host
	// members are each group's direct hosts; children its child groups.
	members  map[string][]string
	children map[string][]string
	// vars are ansible_* variables: per group, and per host.
	groupVars map[string]map[string]string
	hostVars  map[string]map[string]string
}

// NewInventory returns an empty inventory.
func NewInventory() *Inventory {
	return &Inventory{hosts: map[string]*Host{}, members: map[string][]string{}, children: map[string][]string{},
		groupVars: map[string]map[string]string{}, hostVars: map[string]map[string]string{}}
}

// AddHost adds (or updates) a host; a non-empty group puts it in that group.
// Vars are Ansible-style (ansible_host, ansible_port, ansible_user).
func (inv *Inventory) AddHost(name, group string, vars map[string]string) {
	if _, ok := inv.hostVars[name]; !ok {
		inv.hostVars[name] = map[string]string{}
	}
	for k, v := range vars {
		inv.hostVars[name][k] = v
	}
	if group != "" && group != "all" && group != "ungrouped" {
		inv.addGroup(group)
		if !slices.Contains(inv.members[group], name) {
			inv.members[group] = append(inv.members[group], name)
		}
	}
}

// AddChild makes child a child group of parent.
func (inv *Inventory) AddChild(parent, child string) {
	if parent == "ungrouped" || child == "ungrouped" {
		// ansible-inventory -y exports all: {children: {ungrouped: …}};
		// ungrouped is implied, as in INI (see GroupHosts).
		return
	}
	inv.addGroup(parent)
	inv.addGroup(child)
	if !slices.Contains(inv.children[parent], child) {
		inv.children[parent] = append(inv.children[parent], child)
	}
}

// SetGroupVars sets variables of a group (for its hosts and its children's).
func (inv *Inventory) SetGroupVars(group string, vars map[string]string) {
	inv.addGroup(group)
	if inv.groupVars[group] == nil {
		inv.groupVars[group] = map[string]string{}
	}
	for k, v := range vars {
		inv.groupVars[group][k] = v
	}
}

func (inv *Inventory) addGroup(g string) {
	if g == "ungrouped" {
		return
	}
	if _, ok := inv.members[g]; !ok {
		inv.members[g] = nil
	}
}

// Build resolves group membership and variables into Hosts. It fails on a
// cycle of children or a bad ansible_port.
func (inv *Inventory) Build() error {
	// Every group's full set of hosts, and each group's depth (a child's
	// variables win over its parent's, as in Ansible).
	depth := map[string]int{}
	var visit func(g string, d int, stack []string) error
	visit = func(g string, d int, stack []string) error {
		if slices.Contains(stack, g) {
			return fmt.Errorf("inventory: group %q is its own descendant (%s)", g, strings.Join(append(stack, g), " -> "))
		}
		if d > depth[g] {
			depth[g] = d
		}
		for _, c := range inv.children[g] {
			if err := visit(c, d+1, append(stack, g)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, g := range inv.GroupNames() {
		if err := visit(g, 1, nil); err != nil {
			return err
		}
	}
	hostGroups := map[string][]string{}
	for _, g := range inv.GroupNames() {
		for _, h := range inv.groupHosts(g, nil) {
			hostGroups[h] = append(hostGroups[h], g)
		}
	}
	for name := range inv.hostVars {
		groups := hostGroups[name]
		sort.Strings(groups)
		// all's vars first, then groups from the shallowest to the
		// deepest (ties by name), then the host's own.
		order := slices.Clone(groups)
		sort.SliceStable(order, func(i, j int) bool { return depth[order[i]] < depth[order[j]] })
		vars := map[string]string{}
		for k, v := range inv.groupVars["all"] {
			vars[k] = v
		}
		if len(groups) == 0 {
			for k, v := range inv.groupVars["ungrouped"] {
				vars[k] = v
			}
		}
		for _, g := range order {
			for k, v := range inv.groupVars[g] {
				vars[k] = v
			}
		}
		for k, v := range inv.hostVars[name] {
			vars[k] = v
		}
		h := &Host{Name: name, Addr: name, User: vars["ansible_user"], Groups: groups}
		if a := vars["ansible_host"]; a != "" {
			h.Addr = a
		}
		if p := vars["ansible_port"]; p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("inventory: host %s: bad ansible_port %q", name, p)
			}
			h.Port = n
		}
		if strings.HasPrefix(h.Addr, "-") || strings.HasPrefix(h.User, "-") || strings.ContainsAny(h.Addr+h.User, " \t\n'\"\\") {
			return fmt.Errorf("inventory: host %s: bad address or user %q@%q", name, h.User, h.Addr)
		}
		inv.hosts[name] = h
	}
	return nil
}

// groupHosts returns every host of group g, through its children.
func (inv *Inventory) groupHosts(g string, seen map[string]bool) []string {
	if seen == nil {
		seen = map[string]bool{}
	}
	if seen[g] {
		return nil
	}
	seen[g] = true
	out := slices.Clone(inv.members[g])
	for _, c := range inv.children[g] {
		out = append(out, inv.groupHosts(c, seen)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Hosts returns every host, sorted by name (naturally: web-2 before web-10).
func (inv *Inventory) Hosts() []Host {
	out := make([]Host, 0, len(inv.hosts))
	for _, h := range inv.hosts {
		out = append(out, *h)
	}
	sortHosts(out)
	return out
}

// Host returns a host by name.
func (inv *Inventory) Host(name string) (Host, bool) {
	h, ok := inv.hosts[name]
	if !ok {
		return Host{}, false
	}
	return *h, true
}

// GroupNames returns the group names, sorted. "all" and "ungrouped" are
// implied, as in Ansible, and not listed, whether the inventory was INI
// (where hosts before any section are ungrouped) or the YAML that
// ansible-inventory -y exports (which names ungrouped as a child of all).
func (inv *Inventory) GroupNames() []string {
	out := make([]string, 0, len(inv.members))
	for g := range inv.members {
		if g != "all" {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

// GroupHosts returns the names of a group's hosts (through its children);
// for "ungrouped", the hosts that belong to no group.
func (inv *Inventory) GroupHosts(g string) []string {
	if g == "all" || g == "ungrouped" {
		var out []string
		for _, h := range inv.Hosts() {
			// ungrouped: the hosts in no group but all.
			if g == "all" || len(h.Groups) == 0 {
				out = append(out, h.Name)
			}
		}
		return out
	}
	return inv.groupHosts(g, nil)
}

// Children returns a group's child groups.
func (inv *Inventory) Children(g string) []string { return slices.Clone(inv.children[g]) }

// Merge adds other's hosts, groups and variables to inv (other wins on
// conflicting variables). Call Build afterwards.
func (inv *Inventory) Merge(other *Inventory) {
	for h, vars := range other.hostVars {
		inv.AddHost(h, "", vars)
	}
	for g, hs := range other.members {
		inv.addGroup(g)
		for _, h := range hs {
			inv.AddHost(h, g, nil)
		}
	}
	for g, cs := range other.children {
		for _, c := range cs {
			inv.AddChild(g, c)
		}
	}
	for g, vars := range other.groupVars {
		inv.SetGroupVars(g, vars)
	}
}

// LoadFile reads an Ansible inventory file, INI or YAML (by its extension
// .yml/.yaml, or by its content starting with "all:" or a YAML mapping).
func LoadFile(name string) (*Inventory, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	ext := strings.ToLower(path.Ext(name))
	var inv *Inventory
	if ext == ".yml" || ext == ".yaml" || looksYAML(string(data)) {
		inv, err = ParseYAML(strings.NewReader(string(data)))
	} else {
		inv, err = ParseINI(strings.NewReader(string(data)))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return inv, nil
}

func looksYAML(s string) bool {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || l == "---" {
			continue
		}
		return strings.HasSuffix(l, ":") && !strings.HasPrefix(l, "[")
	}
	return false
}

// ParseINI reads an Ansible INI inventory: host lines (with key=value
// variables and [01:17] ranges), [group], [group:vars] and
// [group:children] sections. Hosts before any section are ungrouped.
func ParseINI(r io.Reader) (*Inventory, error) {
	inv := NewInventory()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	group, kind := "ungrouped", ""
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			end := strings.Index(line, "]")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unclosed section %q", n, line)
			}
			sec := line[1:end]
			group, kind, _ = strings.Cut(sec, ":")
			if kind != "" && kind != "vars" && kind != "children" {
				return nil, fmt.Errorf("line %d: unknown section kind %q", n, kind)
			}
			if !validName(group) {
				return nil, fmt.Errorf("line %d: bad group name %q", n, group)
			}
			inv.addGroup(group)
			continue
		}
		switch kind {
		case "vars":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				return nil, fmt.Errorf("line %d: expected key=value in [%s:vars]", n, group)
			}
			inv.SetGroupVars(group, map[string]string{strings.TrimSpace(k): unquote(strings.TrimSpace(v))})
		case "children":
			child := strings.Fields(line)[0]
			if !validName(child) {
				return nil, fmt.Errorf("line %d: bad group name %q", n, child)
			}
			inv.AddChild(group, child)
		default:
			fields, err := splitFields(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if len(fields) == 0 { // `""`, or `'' # note`: quotes around nothing
				return nil, fmt.Errorf("line %d: no host name", n)
			}
			vars := map[string]string{}
			for _, f := range fields[1:] {
				k, v, ok := strings.Cut(f, "=")
				if !ok {
					return nil, fmt.Errorf("line %d: expected key=value after the host name, got %q", n, f)
				}
				vars[k] = v
			}
			name := fields[0]
			// host:port, unless it is an IPv6 address.
			if i := strings.LastIndex(name, ":"); i > 0 && strings.Count(name, ":") == 1 && !strings.Contains(name, "[") {
				vars["ansible_port"] = name[i+1:]
				name = name[:i]
			}
			names, err := expandRange(name)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			for _, h := range names {
				if !validName(h) {
					return nil, fmt.Errorf("line %d: bad host name %q", n, h)
				}
				inv.AddHost(h, group, vars)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return inv, nil
}

// splitFields splits a host line on blanks, keeping quoted values whole.
func splitFields(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, c := range line {
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(c)
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && cur.Len() == 0:
			return out, nil
		case c == ' ' || c == '\t':
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if quote != 0 {
		return nil, errors.New("unclosed quote")
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out, nil
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

var rangeRE = regexp.MustCompile(`\[([0-9]+):([0-9]+)(?::([0-9]+))?\]`)

// expandRange expands Ansible's numeric host ranges: web-[01:17] is web-01
// to web-17 (leading zeros keep the width), [1:9:2] steps by 2.
func expandRange(name string) ([]string, error) {
	m := rangeRE.FindStringSubmatchIndex(name)
	if m == nil {
		return []string{name}, nil
	}
	lo, hi := name[m[2]:m[3]], name[m[4]:m[5]]
	a, _ := strconv.Atoi(lo)
	b, _ := strconv.Atoi(hi)
	step := 1
	if m[6] >= 0 {
		step, _ = strconv.Atoi(name[m[6]:m[7]])
	}
	if b < a || step < 1 || (b-a)/step > 10000 {
		return nil, fmt.Errorf("bad host range in %q", name)
	}
	width := 0
	if strings.HasPrefix(lo, "0") && len(lo) > 1 {
		width = len(lo)
	}
	var out []string
	for i := a; i <= b; i += step {
		rest, err := expandRange(name[m[1]:])
		if err != nil {
			return nil, err
		}
		for _, r := range rest {
			out = append(out, fmt.Sprintf("%s%0*d%s", name[:m[0]], width, i, r))
		}
	}
	return out, nil
}

// validName accepts host and group names that are safe as an ssh
// destination and in a pattern: no blanks, quotes, commas, colons (except
// IPv6 addresses, which contain no other punctuation), '!' or '&', and no
// leading '-'.
func validName(s string) bool {
	if s == "" || strings.HasPrefix(s, "-") || strings.HasPrefix(s, "~") {
		return false
	}
	return !strings.ContainsAny(s, " \t\n'\"\\,!&*?[]=;`$|<>(){}")
}

// ParseYAML reads an Ansible YAML inventory: a tree of groups with hosts
// (mapping host -> variables), vars and children, rooted at "all".
func ParseYAML(r io.Reader) (*Inventory, error) {
	var root map[string]*yamlGroup
	dec := yaml.NewDecoder(r)
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return NewInventory(), nil
		}
		return nil, fmt.Errorf("yaml: %w", err)
	}
	inv := NewInventory()
	var walk func(name string, g *yamlGroup, depth int) error
	walk = func(name string, g *yamlGroup, depth int) error {
		if depth > 50 {
			return errors.New("groups nested too deep")
		}
		if !validName(name) {
			return fmt.Errorf("bad group name %q", name)
		}
		inv.addGroup(name)
		if g == nil {
			return nil
		}
		for h, vars := range g.Hosts {
			names, err := expandRange(h)
			if err != nil {
				return err
			}
			for _, hn := range names {
				if !validName(hn) {
					return fmt.Errorf("bad host name %q", hn)
				}
				inv.AddHost(hn, name, stringVars(vars))
			}
		}
		if len(g.Vars) > 0 {
			inv.SetGroupVars(name, stringVars(g.Vars))
		}
		for c, cg := range g.Children {
			if name != "all" {
				inv.AddChild(name, c)
			}
			if err := walk(c, cg, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for name, g := range root {
		if err := walk(name, g, 0); err != nil {
			return nil, err
		}
	}
	return inv, nil
}

type yamlGroup struct {
	Hosts    map[string]map[string]any `yaml:"hosts"`
	Vars     map[string]any            `yaml:"vars"`
	Children map[string]*yamlGroup     `yaml:"children"`
}

func stringVars(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		switch v := v.(type) {
		case string:
			out[k] = v
		case int, int64, float64, bool:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}
