package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestFleetConfigChecks(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "inv.ini"), []byte("[web]\nweb-[1:2]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "ro"), []byte("k"), 0o600)
	os.WriteFile(filepath.Join(dir, "rw"), []byte("k2"), 0o600)
	os.WriteFile(filepath.Join(dir, "ro-copy"), []byte("k\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "open"), []byte("k3"), 0o644)
	os.WriteFile(filepath.Join(dir, "kh"), []byte("[127.0.0.1]:2201 ssh-ed25519 AAAA\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "kh-empty"), []byte("# nothing\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "keydir"), 0o700)
	const kh = "known_hosts: kh\n"
	for _, tc := range []struct{ name, yaml, err string }{
		{"ok", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v, key: ro}, privileged: {user: d}}\n", ""},
		// One login, two keys: each identity gets its own ControlMaster.
		{"same login two keys", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: d, key: ro}, privileged: {user: d, key: rw}}\n", ""},
		{"same key, one login from ansible_user", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {key: ro}, privileged: {user: d, key: ro}}\n", "can be the same identity"},
		{"same key, both logins from ansible_user", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {key: ro}, privileged: {key: ./ro}}\n", "can be the same identity"},
		{"same key content", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: d, key: ro}, privileged: {user: d, key: ro-copy}}\n", "can be the same identity"},
		{"no keys, one login from ansible_user", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: d}, privileged: {key: ''}}\n", "set both"},
		{"no keys, login from ssh_config", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: d, key: ''}, privileged: {user: ''}}\n", "set both"},
		{"key mode ssh refuses", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v, key: open}, privileged: {user: d}}\n", "ssh refuses such a key"},
		{"key is a directory", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v, key: keydir}, privileged: {user: d}}\n", "not a regular file"},
		{"known_hosts missing", "known_hosts: nope\ninventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "fleet.known_hosts: open"},
		{"known_hosts empty", "known_hosts: kh-empty\ninventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "has no host key"},
		{"known_hosts devnull", "known_hosts: /dev/null\ninventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "known_hosts is /dev/null"},
		{"ssh_config missing", kh + "ssh_config: nope\ninventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "fleet.ssh_config: open"},
		{"unknown key", kh + "inventory: inv.ini\ngroup: []\n", `unknown key "group"`},
		{"no identities", kh + "inventory: inv.ini\n", "no group has read_only and privileged"},
		{"half", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}}\n", "set both read_only and privileged"},
		{"same", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: v}}\n", "same identity"},
		{"missing key", kh + "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v, key: nokey}, privileged: {user: d}}\n", "no such file"},
		{"missing inventory", kh + "inventory: nope.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "no such file"},
		{"bad timeout", kh + "inventory: inv.ini\ntimeout: soon\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "fleet.timeout"},
		{"unknown group", kh + "inventory: inv.ini\ngroups:\n  - {name: db, read_only: {user: v}, privileged: {user: d}}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".yaml")
			os.WriteFile(p, []byte(tc.yaml), 0o644)
			fc, err := loadFleetFile(p)
			if err == nil {
				var fl interface{ Close() error }
				fl, err = fc.open(dir, nil, "")
				if err == nil {
					fl.Close()
				}
			}
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("error = %v, want %q", err, tc.err)
			}
		})
	}
	fc, _ := loadFleetFile(filepath.Join(dir, "ok.yaml"))
	if got := fc.keyFiles(dir); strings.Join(got, " ") != filepath.Join(dir, "ro")+" "+filepath.Join(dir, "kh") {
		t.Errorf("keyFiles = %v", got)
	}
}

// TestFleetGuideConfig: the config block of deploy/fleet.md has only known
// keys, and its fleet section decodes.
func TestFleetGuideConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "<!-- guide-test: fleet -->\n```yaml\n")
	if !ok {
		t.Fatal("deploy/fleet.md has no fleet config block")
	}
	block, _, _ = strings.Cut(block, "```")
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(block), &root); err != nil {
		t.Fatal(err)
	}
	if errs := unknownKeys(&root, reflect.TypeFor[daemonConfig](), ""); len(errs) > 0 {
		t.Errorf("unknown keys in the guide: %v", errs)
	}
	var c daemonConfig
	if err := yaml.Unmarshal([]byte(block), &c); err != nil {
		t.Fatal(err)
	}
	if c.Fleet.Inventory == "" || len(c.Fleet.Groups) != 2 || c.Fleet.Groups[0].ReadOnly.User != "thinbot-ro" || len(c.Channels[0].FleetGroups) != 1 {
		t.Errorf("decoded %+v", c.Fleet)
	}
}
