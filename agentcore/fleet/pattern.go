package fleet

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Select returns the hosts a pattern names, sorted. The pattern follows
// Ansible's host patterns, as far as implemented:
//
//	all, *            every host
//	web-01            a host
//	web               a group (through its children)
//	web*, db-0?       shell globs over host and group names
//	web:db, web,db    union
//	web:&prod         intersection (hosts in web that are also in prod)
//	web:!web-03       exclusion
//
// Unions come first, then intersections, then exclusions, whatever their
// order in the pattern. A part that names nothing is an error (so a typo
// does not silently shrink the target list); regex patterns (~) and
// subscripts (web[0]) are not supported and are errors too.
func (inv *Inventory) Select(pattern string) ([]Host, error) {
	pattern = strings.TrimSpace(pattern)
	if pattern == "" {
		return nil, fmt.Errorf("empty host pattern")
	}
	var union, inter, excl []string
	for _, part := range splitPattern(pattern) {
		switch {
		case strings.HasPrefix(part, "!"):
			excl = append(excl, part[1:])
		case strings.HasPrefix(part, "&"):
			inter = append(inter, part[1:])
		default:
			union = append(union, part)
		}
	}
	if len(union) == 0 {
		return nil, fmt.Errorf("host pattern %q selects nothing before its intersections and exclusions", pattern)
	}
	set := map[string]bool{}
	for _, p := range union {
		hs, err := inv.match(p)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			set[h] = true
		}
	}
	for _, p := range inter {
		hs, err := inv.match(p)
		if err != nil {
			return nil, err
		}
		keep := map[string]bool{}
		for _, h := range hs {
			if set[h] {
				keep[h] = true
			}
		}
		set = keep
	}
	for _, p := range excl {
		hs, err := inv.match(p)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			delete(set, h)
		}
	}
	out := make([]Host, 0, len(set))
	for name := range set {
		out = append(out, *inv.hosts[name])
	}
	sortHosts(out)
	return out, nil
}

// splitPattern splits on ',' and ':' (not inside an IPv6 address, which
// has more than one ':' and no letters after a '!' or '&').
func splitPattern(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ",") {
		part = strings.TrimSpace(part)
		if strings.Count(part, ":") >= 2 && !strings.ContainsAny(part, "!&*?") && isIPv6ish(part) {
			out = append(out, part)
			continue
		}
		for _, q := range strings.Split(part, ":") {
			if q = strings.TrimSpace(q); q != "" {
				out = append(out, q)
			}
		}
	}
	return out
}

func isIPv6ish(s string) bool {
	for _, c := range s {
		if !(c == ':' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
			return false
		}
	}
	return true
}

// match returns the host names one pattern part names.
func (inv *Inventory) match(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("empty part in host pattern")
	}
	if strings.HasPrefix(p, "~") || strings.ContainsAny(p, "[]") {
		return nil, fmt.Errorf("host pattern %q: regular expressions and subscripts are not supported", p)
	}
	if p == "all" || p == "*" {
		return inv.GroupHosts("all"), nil
	}
	if p == "ungrouped" {
		if out := inv.GroupHosts(p); len(out) > 0 {
			return out, nil
		}
		return nil, fmt.Errorf("host pattern %q: every host of the inventory is in a group", p)
	}
	var out []string
	if strings.ContainsAny(p, "*?") {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("host pattern %q: %w", p, err)
		}
		for name := range inv.hosts {
			if ok, _ := path.Match(p, name); ok {
				out = append(out, name)
			}
		}
		for _, g := range inv.GroupNames() {
			if ok, _ := path.Match(p, g); ok {
				out = append(out, inv.GroupHosts(g)...)
			}
		}
	} else {
		if _, ok := inv.hosts[p]; ok {
			out = append(out, p)
		}
		if _, ok := inv.members[p]; ok {
			out = append(out, inv.GroupHosts(p)...)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("host pattern %q matches no host or group of the inventory", p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sortHosts sorts hosts by name, numbers in names compared as numbers.
func sortHosts(hs []Host) {
	sort.Slice(hs, func(i, j int) bool { return naturalLess(hs[i].Name, hs[j].Name) })
}

// naturalLess compares strings with digit runs compared as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da != "" && db != "" {
			ta, tb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(ta) != len(tb) {
				return len(ta) < len(tb)
			}
			if ta != tb {
				return ta < tb
			}
			if da != db {
				return da < db
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitPrefix(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// Ranges writes names compactly: hosts that differ only in one trailing
// number of the same width become a range, as in web-[01-17] or
// web-[01-03,05]; the rest are listed as they are. The order is natural.
func Ranges(names []string) string {
	type key struct {
		prefix, suffix string
		width          int
	}
	groups := map[key][]int{}
	var order []key
	var plain []string
	for _, n := range names {
		// The last digit run.
		end := len(n)
		for end > 0 && (n[end-1] < '0' || n[end-1] > '9') {
			end--
		}
		start := end
		for start > 0 && n[start-1] >= '0' && n[start-1] <= '9' {
			start--
		}
		if start == end || end-start > 9 {
			plain = append(plain, n)
			continue
		}
		v, _ := strconv.Atoi(n[start:end])
		k := key{n[:start], n[end:], end - start}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], v)
	}
	var parts []string
	for _, k := range order {
		nums := groups[k]
		slices.Sort(nums)
		nums = slices.Compact(nums)
		if len(nums) == 1 {
			parts = append(parts, fmt.Sprintf("%s%0*d%s", k.prefix, k.width, nums[0], k.suffix))
			continue
		}
		var rs []string
		for i := 0; i < len(nums); {
			j := i
			for j+1 < len(nums) && nums[j+1] == nums[j]+1 {
				j++
			}
			if j == i {
				rs = append(rs, fmt.Sprintf("%0*d", k.width, nums[i]))
			} else {
				rs = append(rs, fmt.Sprintf("%0*d-%0*d", k.width, nums[i], k.width, nums[j]))
			}
			i = j + 1
		}
		parts = append(parts, fmt.Sprintf("%s[%s]%s", k.prefix, strings.Join(rs, ","), k.suffix))
	}
	parts = append(parts, plain...)
	sort.SliceStable(parts, func(i, j int) bool { return naturalLess(parts[i], parts[j]) })
	return strings.Join(parts, ", ")
}
