package sandbox

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestCoveredSockets checks which of the sockets to cover a read-only
// command gets covered: those that exist (through a symbolic link too,
// reported where it leads), once each, never a listed one, nor a file that
// is not a socket.
func TestCoveredSockets(t *testing.T) {
	dir := t.TempDir()
	listen := func(name string) string {
		p := filepath.Join(dir, name)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return p
	}
	ctl, other, listed := listen("ctl.sock"), listen("other.sock"), listen("listed.sock")
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(ctl, link); err != nil {
		t.Fatal(err)
	}
	linkListed := filepath.Join(dir, "link-listed.sock")
	if err := os.Symlink(listed, linkListed); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hc := helperConfig{Net: Network{
		Cover:   []string{link, ctl, other, linkListed, plain, filepath.Join(dir, "missing.sock")},
		Sockets: []string{listed},
	}}
	got := coveredSockets(hc)
	for _, p := range []string{ctl, other} {
		if !slices.Contains(got, p) {
			t.Errorf("%s is not covered: %q", p, got)
		}
	}
	for _, p := range []string{listed, linkListed, link, plain} {
		if slices.Contains(got, p) {
			t.Errorf("%s is covered: %q", p, got)
		}
	}
	n := 0
	for _, p := range got {
		if p == ctl {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%s covered %d times: %q", ctl, n, got)
	}
}

// TestStdinIsNull checks that a command of either mode reads an empty
// /dev/null on its standard input, shared by every command of the helper.
func TestStdinIsNull(t *testing.T) {
	r := newRig(t)
	for _, m := range []Mode{ReadOnly, Approved} {
		for range 2 {
			var out bytes.Buffer
			res, err := r.sb.Run(context.Background(), m, Cmd{Args: []string{"/bin/sh", "-c", "cat; readlink /proc/self/fd/0"}, Dir: r.ws, Env: []string{testPath}}, &out)
			if err != nil || res.ExitCode != 0 || out.String() != "/dev/null\n" {
				t.Fatalf("%s: %v %+v %q", m, err, res, out.String())
			}
		}
	}
}
