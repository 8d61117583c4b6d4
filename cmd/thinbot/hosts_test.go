package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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

// The fleet's durations: each value the string fields took is taken, and
// lands in fleet.Config as it did (zero and below: the default, which for
// control_persist a negative value turns off); each one they refused is
// refused, naming the key.
func TestFleetDurations(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "kh"), []byte("[127.0.0.1]:2201 ssh-ed25519 AAAA\n"), 0o644)
	const base = "known_hosts: kh\nhosts: [{name: web-1, groups: [web]}]\ngroups:\n  - {name: web, read_only: {user: v}, privileged: {user: d}}\n"
	type want struct {
		timeout, connect, persist time.Duration
		err                       string
	}
	for _, tc := range []struct {
		key, value string
		want
	}{
		{"timeout", "30s", want{timeout: 30 * time.Second}},
		{"timeout", "off", want{err: `fleet.timeout "off": want a positive duration like 120s`}},
		{"timeout", "", want{}},
		{"timeout", "bogus", want{err: `fleet.timeout "bogus": want a positive duration like 120s`}},
		{"timeout", "-5s", want{}},
		{"timeout", "0s", want{}},
		{"connect_timeout", "30s", want{connect: 30 * time.Second}},
		{"connect_timeout", "off", want{err: `fleet.connect_timeout "off": want a positive duration like 10s`}},
		{"connect_timeout", "", want{}},
		{"connect_timeout", "bogus", want{err: `fleet.connect_timeout "bogus": want a positive duration like 10s`}},
		{"connect_timeout", "-5s", want{}},
		{"connect_timeout", "0s", want{}},
		{"control_persist", "30s", want{persist: 30 * time.Second}},
		{"control_persist", "off", want{persist: -1}},
		{"control_persist", "", want{}},
		{"control_persist", "bogus", want{err: `fleet.control_persist "bogus": want a duration like 60s or "off"`}},
		{"control_persist", "-5s", want{persist: -1}},
		{"control_persist", "0s", want{}},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			p := filepath.Join(dir, "fleet.yaml")
			os.WriteFile(p, []byte(fmt.Sprintf("%s%s: %q\n", base, tc.key, tc.value)), 0o644)
			fc, err := loadFleetFile(p)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := fc.config(dir, nil, "", "")
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := (want{cfg.Timeout, cfg.ConnectTimeout, cfg.ControlPersist, ""}); got != tc.want {
				t.Errorf("fleet.Config timeout, connect, persist = %v, %v, %v; want %v, %v, %v",
					got.timeout, got.connect, got.persist, tc.timeout, tc.connect, tc.persist)
			}
		})
	}
}

// control_persist decodes as the string field did: any scalar, and a
// value that is none fails the decoding with the same error.
func TestControlPersistAsTheStringFieldWas(t *testing.T) {
	for _, doc := range []string{"p: off", `p: "off"`, "p: 60s", "p:", "p: ~", "p: 30", "p: true", "p: [1m]", "p: {a: 1}"} {
		var old struct {
			P string `yaml:"p"`
		}
		var c struct {
			P controlPersist `yaml:"p"`
		}
		oerr := yaml.Unmarshal([]byte(doc), &old)
		err := yaml.Unmarshal([]byte(doc), &c)
		if (oerr == nil) != (err == nil) || err != nil && err.Error() != oerr.Error() {
			t.Errorf("%q: decode error %v, the string field's %v", doc, err, oerr)
		} else if err == nil && c.P.text != old.P {
			t.Errorf("%q: text %q, the string field's %q", doc, c.P.text, old.P)
		}
	}
}

// The fleet's duration keys take what the string fields took, checked in
// check with time.ParseDuration, and give fleet.Config what openIn parsed
// from them: a timeout of zero or below is unset (fleet.Config's default
// either way), a negative control_persist is off either way.
func FuzzFleetDurations(f *testing.F) {
	for _, s := range []string{"30s", "off", "", "bogus", "-5s", "0s", "0", "-0s", "+3s", "1.5h", "9223372036854775807ns", "-9223372036854775808ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var c struct {
			T duration       `yaml:"t"`
			P controlPersist `yaml:"p"`
		}
		if err := yaml.Unmarshal([]byte(fmt.Sprintf("t: %q\np: %q\n", s, s)), &c); err != nil || c.T.text != s {
			return // not a string YAML reads back as itself
		}
		var tBad, pBad bool
		c.T.checkOrUnset(func(string, ...any) { tBad = true }, "t", "1s")
		c.P.check(func(string, ...any) { pBad = true })
		old, oerr := time.ParseDuration(s)
		if s == "" {
			old, oerr = 0, nil
		}
		if tBad != (oerr != nil) {
			t.Fatalf("timeout %q: refused %v, time.ParseDuration says %v", s, tBad, oerr)
		}
		if oerr == nil && c.T.Duration != max(old, 0) {
			t.Fatalf("timeout %q: %v, want %v", s, c.T.Duration, max(old, 0))
		}
		if s == "off" {
			old, oerr = -1, nil
		}
		if pBad != (oerr != nil) {
			t.Fatalf("control_persist %q: refused %v, time.ParseDuration says %v", s, pBad, oerr)
		}
		if got := c.P.value(); oerr == nil && got != old && (got >= 0 || old >= 0) {
			t.Fatalf("control_persist %q: %v, want %v", s, got, old)
		}
	})
}
