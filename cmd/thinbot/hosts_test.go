package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
