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
	for _, tc := range []struct{ name, yaml, err string }{
		{"ok", "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v, key: ro}, privileged: {user: d}}\n", ""},
		{"unknown key", "inventory: inv.ini\ngroup: []\n", `unknown key "group"`},
		{"no identities", "inventory: inv.ini\n", "no group has read_only and privileged"},
		{"half", "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}}\n", "set both read_only and privileged"},
		{"same", "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: v}}\n", "same identity"},
		{"missing key", "inventory: inv.ini\ngroups:\n  - {name: web, read_only: {user: v, key: nokey}, privileged: {user: d}}\n", "no such file"},
		{"missing inventory", "inventory: nope.ini\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "no such file"},
		{"bad timeout", "inventory: inv.ini\ntimeout: soon\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n", "fleet.timeout"},
		{"unknown group", "inventory: inv.ini\ngroups:\n  - {name: db, read_only: {user: v}, privileged: {user: d}}\n", ""},
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
	if got := fc.keyFiles(dir); len(got) != 1 || got[0] != filepath.Join(dir, "ro") {
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
