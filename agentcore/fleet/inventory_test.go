package fleet

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

const iniInv = `
# ungrouped
bastion ansible_host=10.0.0.1 ansible_user=ops

[web]
web-[01:03] ansible_user=deploy
web-10:2222

[db]
db-1 ansible_host="10.0.1.1" ansible_port=2200

[prod:children]
web
db

[prod:vars]
ansible_user=produser
ansible_port=22
`

const yamlInv = `
all:
  hosts:
    bastion:
      ansible_host: 10.0.0.1
      ansible_user: ops
  children:
    prod:
      vars:
        ansible_user: produser
        ansible_port: 22
      children:
        web:
          hosts:
            web-[01:03]:
              ansible_user: deploy
            web-10:
              ansible_port: 2222
        db:
          hosts:
            db-1:
              ansible_host: 10.0.1.1
              ansible_port: 2200
`

func TestInventoryFormats(t *testing.T) {
	for _, tc := range []struct {
		name string
		load func() (*Inventory, error)
	}{
		{"ini", func() (*Inventory, error) { return ParseINI(strings.NewReader(iniInv)) }},
		{"yaml", func() (*Inventory, error) { return ParseYAML(strings.NewReader(yamlInv)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := tc.load()
			if err != nil {
				t.Fatal(err)
			}
			if err := inv.Build(); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, h := range inv.Hosts() {
				names = append(names, h.Name)
			}
			if got, want := strings.Join(names, " "), "bastion db-1 web-01 web-02 web-03 web-10"; got != want {
				t.Errorf("hosts = %q, want %q", got, want)
			}
			want := map[string]Host{
				"bastion": {Addr: "10.0.0.1", User: "ops"},
				"db-1":    {Addr: "10.0.1.1", Port: 2200, User: "produser"},
				"web-02":  {Addr: "web-02", Port: 22, User: "deploy"},
				"web-10":  {Addr: "web-10", Port: 2222, User: "produser"},
			}
			for name, w := range want {
				h, ok := inv.Host(name)
				if !ok {
					t.Fatalf("no host %s", name)
				}
				if h.Addr != w.Addr || h.Port != w.Port || h.User != w.User {
					t.Errorf("%s = %+v, want addr %s port %d user %s", name, h, w.Addr, w.Port, w.User)
				}
			}
			if h, _ := inv.Host("web-01"); strings.Join(h.Groups, ",") != "prod,web" {
				t.Errorf("web-01 groups = %v", h.Groups)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	inv, err := ParseINI(strings.NewReader(iniInv))
	if err != nil {
		t.Fatal(err)
	}
	if err := inv.Build(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pattern, want, err string
	}{
		{"all", "bastion db-1 web-01 web-02 web-03 web-10", ""},
		{"*", "bastion db-1 web-01 web-02 web-03 web-10", ""},
		{"web", "web-01 web-02 web-03 web-10", ""},
		{"web-02", "web-02", ""},
		{"web-0*", "web-01 web-02 web-03", ""},
		{"w*", "web-01 web-02 web-03 web-10", ""},
		{"web:db", "db-1 web-01 web-02 web-03 web-10", ""},
		{"web,bastion", "bastion web-01 web-02 web-03 web-10", ""},
		{"prod:!web-03:!db", "web-01 web-02 web-10", ""},
		{"!web-03:prod", "db-1 web-01 web-02 web-10", ""},
		{"all:&web", "web-01 web-02 web-03 web-10", ""},
		{"web-0?", "web-01 web-02 web-03", ""},
		{"nope", "", "matches no host"},
		{"web:nope", "", "matches no host"},
		{"~web.*", "", "not supported"},
		{"web[0]", "", "not supported"},
		{"!web", "", "selects nothing"},
		{"", "", "empty"},
	} {
		hs, err := inv.Select(tc.pattern)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Select(%q) error = %v, want %q", tc.pattern, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Select(%q): %v", tc.pattern, err)
			continue
		}
		var names []string
		for _, h := range hs {
			names = append(names, h.Name)
		}
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("Select(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}
}

func TestInventoryErrors(t *testing.T) {
	for _, tc := range []struct{ name, ini, err string }{
		{"cycle", "[a:children]\nb\n[b:children]\na\n", "own descendant"},
		{"port", "h ansible_port=x\n", "bad ansible_port"},
		{"option host", "-oProxyCommand=x\n", "bad host name"},
		{"option addr", "h ansible_host=-oProxyCommand=x\n", "bad address"},
		{"section", "[a:foo]\n", "unknown section"},
		{"vars", "[a:vars]\nnovalue\n", "key=value"},
		{"quote", "h ansible_host='x\n", "unclosed quote"},
	} {
		inv, err := ParseINI(strings.NewReader(tc.ini))
		if err == nil {
			err = inv.Build()
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error = %v, want %q", tc.name, err, tc.err)
		}
	}
}

func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"web-01 web-02 web-03", "web-[01-03]"},
		{"web-01 web-02 web-03 web-05 web-17 web-16", "web-[01-03,05,16-17]"},
		{"web-01", "web-01"},
		{"db-1 web-01 web-02 bastion", "bastion, db-1, web-[01-02]"},
		{"a1.example.com a2.example.com", "a[1-2].example.com"},
		{"web-1 web-01", "web-01, web-1"},
	} {
		if got := Ranges(strings.Fields(tc.in)); got != tc.want {
			t.Errorf("Ranges(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSummary(t *testing.T) {
	var rs []Result
	for _, h := range []string{"web-01", "web-02", "web-03", "web-05"} {
		rs = append(rs, Result{Host: h, Output: []byte("up 3 days\n"), SHA256: "x", Size: 10})
	}
	rs = append(rs,
		Result{Host: "web-04", ExitCode: 1, Output: []byte("boom\n"), SHA256: "y", Size: 5},
		Result{Host: "web-06", ExitCode: -1, Err: "ssh: connect to host 127.0.0.1 port 9: Connection refused"},
		Result{Host: "web-07", ExitCode: -1, TimedOut: true})
	got := Summary(rs, 4096)
	for _, want := range []string{
		"7 host(s): 4 exit 0, 1 failed, 1 timed out, 0 stopped, 1 unreachable",
		"== web-[01-03,05] (4 hosts, exit 0):\nup 3 days\n",
		"== web-04 (1 host, exit 1):\nboom\n",
		"== timed out (killed): web-07",
		"== unreachable, nothing ran: web-06 (1 host): ssh: connect to host 127.0.0.1 port 9: Connection refused",
	} {
		if !strings.Contains(strings.Replace(got, ", 0 stopped", "", 1), strings.Replace(want, ", 0 stopped", "", 1)) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	// Bounded: 200 distinct big outputs stay within the limit.
	rs = nil
	for i := range 200 {
		rs = append(rs, Result{Host: "h" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Output: []byte(strings.Repeat("z", 10000) + string(rune(i))), SHA256: string(rune(i)), Size: 10001})
	}
	if got := Summary(rs, 8192); len(got) > 8192+2048 {
		t.Errorf("summary is %d bytes, limit 8192", len(got))
	}
}

// TestMarkerSplit: ssh's stderr before the start marker is ssh's, after it
// the command's, however the writes cut the marker.
func TestMarkerSplit(t *testing.T) {
	in := "ssh: warning\n" + StartMarker + "err1\nerr2\n"
	for cut := 1; cut < len(in); cut++ {
		out := &lockedCapture{c: NewCapture(1 << 10)}
		w := &markerSplit{out: out}
		w.Write([]byte(in[:cut]))
		w.Write([]byte(in[cut:]))
		started, pre := w.result()
		if !started || string(pre) != "ssh: warning\n" || string(out.capture().Bytes()) != "err1\nerr2\n" {
			t.Fatalf("cut %d: started %v, pre %q, out %q", cut, started, pre, out.capture().Bytes())
		}
	}
	w := &markerSplit{out: io.Discard}
	w.Write([]byte("ssh: connect to host 10.0.0.1 port 22: Connection refused\r\n"))
	if started, pre := w.result(); started || sshError(string(pre), "") != "ssh: connect to host 10.0.0.1 port 22: Connection refused" {
		t.Errorf("no marker: %v %q", started, sshError(string(pre), ""))
	}
}

func FuzzSSHError(f *testing.F) {
	f.Add("WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\nThe fingerprint for the ED25519 key sent by the remote host is\nSHA256:abc.\nOffending ED25519 key in /nonexistent:3\nHost key for [h]:22 has changed")
	f.Add("No ED25519 host key is known for [h]:2 and you have requested strict checking.\n")
	f.Fuzz(func(t *testing.T, s string) {
		got := sshError(s, "/nonexistent/known_hosts")
		if strings.Contains(s, "REMOTE HOST IDENTIFICATION HAS CHANGED") && !strings.HasPrefix(got, "host key changed") {
			t.Fatalf("a changed host key reported as %q", got)
		}
	})
}

func FuzzParseINI(f *testing.F) {
	f.Add(iniInv)
	f.Add("[a:children]\nb\n[b:children]\na\n")
	f.Fuzz(func(t *testing.T, s string) {
		inv, err := ParseINI(strings.NewReader(s))
		if err != nil {
			return
		}
		if inv.Build() != nil {
			return
		}
		for _, h := range inv.Hosts() {
			if !validName(h.Name) || strings.HasPrefix(h.Addr, "-") {
				t.Fatalf("unsafe host %+v", h)
			}
		}
		_, _ = inv.Select("all:!x*")
	})
}

// FuzzSelect: whatever the pattern, Select names only inventory hosts,
// sorted and once each, the same way twice; an exclusion never adds a host
// and removes the one it names, "&all" changes nothing, and a union part
// never removes a host.
func FuzzSelect(f *testing.F) {
	for _, p := range []string{
		"web:&prod:!web-0*", "all", "*", "web", "db-1", "web-0?", "web,db", "prod:!db",
		"web:&db", "!web", "&prod", "all:!all", "web-10", "10.0.0.1", "::1", "fe80::1:!x",
		"web[0]", "~web.*", "w*b*:&p*:!*1", " web , db ", "web::db", "nosuch", "[", "web-0[1-2]",
	} {
		f.Add(p)
	}
	inv, err := ParseINI(strings.NewReader(iniInv))
	if err != nil {
		f.Fatal(err)
	}
	if err := inv.Build(); err != nil {
		f.Fatal(err)
	}
	known := map[string]bool{}
	for _, h := range inv.Hosts() {
		known[h.Name] = true
	}
	names := func(hs []Host) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.Name)
		}
		return out
	}
	f.Fuzz(func(t *testing.T, p string) {
		hs, err := inv.Select(p)
		if err != nil {
			return
		}
		got := names(hs)
		for i, h := range got {
			if !known[h] {
				t.Fatalf("Select(%q) names %q, not in the inventory", p, h)
			}
			if i > 0 && got[i-1] >= h {
				t.Fatalf("Select(%q) = %v: not sorted, or a host twice", p, got)
			}
		}
		again, err := inv.Select(p)
		if err != nil || !slices.Equal(names(again), got) {
			t.Fatalf("Select(%q) = %v, then %v, %v", p, got, names(again), err)
		}
		same, err := inv.Select(p + ",&all")
		if err != nil || !slices.Equal(names(same), got) {
			t.Fatalf("Select(%q,&all) = %v, %v; want %v", p, names(same), err, got)
		}
		for _, h := range []string{"web-01", "db-1", "bastion"} {
			less, err := inv.Select(p + ",!" + h)
			if err != nil {
				t.Fatalf("Select(%q,!%s): %v", p, h, err)
			}
			for _, x := range names(less) {
				if x == h || !slices.Contains(got, x) {
					t.Fatalf("Select(%q,!%s) = %v: %s is not in %v, or is the excluded host", p, h, names(less), x, got)
				}
			}
			more, err := inv.Select(p + "," + h)
			if err != nil {
				t.Fatalf("Select(%q,%s): %v", p, h, err)
			}
			for _, x := range got {
				if !slices.Contains(names(more), x) {
					t.Fatalf("Select(%q,%s) = %v lost %s", p, h, names(more), x)
				}
			}
		}
	})
}

// TestSSHErrorReadsOnlyKnownHosts: the file named in an "Offending key"
// line is read only when it is the configured known_hosts (the text before
// the start marker may come from the remote side).
func TestSSHErrorReadsOnlyKnownHosts(t *testing.T) {
	dir := t.TempDir()
	kh := dir + "/known_hosts"
	other := dir + "/secret"
	line := "h ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQORFBo2ugisqnoGZYrzcrZg8rCO6Zo5zXLFvJVcwd7\n"
	os.WriteFile(kh, []byte(line), 0o600)
	os.WriteFile(other, []byte(line), 0o600)
	msg := func(path string) string {
		return "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!\nOffending ED25519 key in " + path + ":1\nHost key for h has changed and you have requested strict checking.\n"
	}
	if got := sshError(msg(kh), kh); !strings.Contains(got, "expects ED25519 SHA256:") {
		t.Errorf("configured known_hosts: %s", got)
	}
	if got := sshError(msg(other), kh); strings.Contains(got, "SHA256:") || !strings.Contains(got, "(not read: not the configured known_hosts)") {
		t.Errorf("another file was read: %s", got)
	}
}
