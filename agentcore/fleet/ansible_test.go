package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestUngroupedAgreesWithAnsible: an INI inventory and the YAML that
// ansible-inventory --list -y exports from it (which names ungrouped as a
// child of all) give the same groups, the same hosts per group and the
// same ungrouped hosts, which are ansible's own; the pattern ungrouped
// selects them in both. Needs Debian's ansible (.ci/run installs it).
func TestUngroupedAgreesWithAnsible(t *testing.T) {
	bin, err := exec.LookPath("ansible-inventory")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no ansible-inventory (apt-get install ansible)")
		}
		t.Skip("no ansible-inventory (apt-get install ansible)")
	}
	dir := t.TempDir()
	ini := filepath.Join(dir, "inv.ini")
	src := iniInv + "\n[ungrouped]\nlone-1 ansible_host=10.0.9.1\n\n[ungrouped:vars]\nansible_user=nobody-in-particular\n\n[empty]\n"
	if err := os.WriteFile(ini, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	list := func(args ...string) string {
		cmd := exec.Command(bin, append([]string{"-i", ini}, args...)...)
		cmd.Env = append(os.Environ(), "ANSIBLE_LOCAL_TEMP="+dir, "ANSIBLE_HOME="+dir, "ANSIBLE_NOCOLOR=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ansible-inventory %v: %v", args, err)
		}
		return string(out)
	}
	yml := filepath.Join(dir, "inv.yml")
	exported := list("--list", "-y")
	if !strings.Contains(exported, "ungrouped:") {
		t.Fatalf("the export has no ungrouped group:\n%s", exported)
	}
	if err := os.WriteFile(yml, []byte(exported), 0o644); err != nil {
		t.Fatal(err)
	}
	// Ansible's own ungrouped hosts, from its graph: "  |--@ungrouped:" then
	// "  |  |--host" lines.
	var want []string
	in := false
	for _, l := range strings.Split(list("--graph"), "\n") {
		name := strings.TrimLeft(l, " |-")
		switch {
		case strings.HasPrefix(name, "@"):
			in = name == "@ungrouped:"
		case in && name != "":
			want = append(want, name)
		}
	}
	slices.Sort(want)
	if len(want) != 2 {
		t.Fatalf("ansible's ungrouped hosts: %v", want)
	}
	var invs []*Inventory
	for _, p := range []string{ini, yml} {
		inv, err := LoadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := inv.Build(); err != nil {
			t.Fatal(err)
		}
		invs = append(invs, inv)
		got, err := inv.Select("ungrouped")
		if err != nil {
			t.Fatalf("%s: ungrouped: %v", p, err)
		}
		var names []string
		for _, h := range got {
			names = append(names, h.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("%s: ungrouped = %v, ansible says %v", filepath.Base(p), names, want)
		}
		if h, _ := inv.Host("lone-1"); h.User != "nobody-in-particular" || len(h.Groups) != 0 {
			t.Errorf("%s: lone-1 = %+v (ungrouped:vars apply to it)", filepath.Base(p), h)
		}
	}
	a, b := invs[0], invs[1]
	if !slices.Equal(a.GroupNames(), b.GroupNames()) || slices.Contains(a.GroupNames(), "ungrouped") {
		t.Errorf("groups: INI %v, YAML %v", a.GroupNames(), b.GroupNames())
	}
	for _, g := range a.GroupNames() {
		if !slices.Equal(a.GroupHosts(g), b.GroupHosts(g)) {
			t.Errorf("group %s: INI %v, YAML %v", g, a.GroupHosts(g), b.GroupHosts(g))
		}
	}
	for _, h := range a.Hosts() {
		if hb, _ := b.Host(h.Name); !slices.Equal(h.Groups, hb.Groups) || h.User != hb.User || h.Addr != hb.Addr || h.Port != hb.Port {
			t.Errorf("host %s: INI %+v, YAML %+v", h.Name, h, hb)
		}
	}
}
