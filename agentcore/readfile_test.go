package agentcore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/gate"
)

// TestReadFileChecksWhatItOpened: read_file judges the file it really
// opened, not the name it was given. A path the gate passed that turns out
// (symlink, /proc magic link) to be a sensitive file is refused, not read.
func TestReadFileChecksWhatItOpened(t *testing.T) {
	f := newFixture(t, Config{})
	dir := f.dir
	os.MkdirAll(filepath.Join(dir, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(dir, ".ssh", "id_ed25519"), []byte("PRIVATE KEY"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello\n"), 0o644)
	os.Symlink(filepath.Join(dir, ".ssh", "id_ed25519"), filepath.Join(dir, "innocent.txt"))
	pass := gate.Decision{Verdict: gate.Pass}
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{filepath.Join(dir, "notes.txt"), true},
		// The gate saw "innocent.txt" (pass); what opens is the key.
		{filepath.Join(dir, "innocent.txt"), false},
		// Magic links resolve, at open, to the daemon's own environment.
		{"/proc/self/environ", false},
		{"/dev/fd/../../self/environ", false},
		{"/proc/thread-self/environ", false},
		{dir, false},         // a directory
		{"/dev/null", false}, // not a regular file
	} {
		file, msg := f.a.openChecked(tc.path, pass)
		if file != nil {
			file.Close()
		}
		if (file != nil) != tc.ok {
			t.Errorf("openChecked(%s) = %v, %q; want ok=%v", tc.path, file != nil, msg, tc.ok)
		}
		if !tc.ok && !strings.HasPrefix(msg, "error: ") {
			t.Errorf("openChecked(%s): message %q", tc.path, msg)
		}
	}
}

// TestReadFileSymlinkRace: a file swapped for a symlink to a key, again and
// again while read_file runs, never yields the key.
func TestReadFileSymlinkRace(t *testing.T) {
	f := newFixture(t, Config{})
	key := filepath.Join(f.dir, ".ssh", "id_ed25519")
	os.MkdirAll(filepath.Dir(key), 0o700)
	os.WriteFile(key, []byte("PRIVATE KEY"), 0o600)
	p := filepath.Join(f.dir, "log.txt")
	os.WriteFile(p, []byte("safe\n"), 0o644)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.Remove(p)
			os.Symlink(key, p)
			os.Remove(p)
			os.WriteFile(p, []byte("safe\n"), 0o644)
		}
	}()
	pass := gate.Decision{Verdict: gate.Pass}
	read := 0
	for range 3000 {
		file, _ := f.a.openChecked(p, pass)
		if file == nil {
			continue
		}
		content, _ := readLines(file, p, 1, 10)
		file.Close()
		read++
		if strings.Contains(content, "PRIVATE") {
			t.Fatalf("read the key through a swapped symlink: %q", content)
		}
	}
	close(stop)
	<-done
	if read == 0 {
		t.Error("no read succeeded: the race test proves nothing")
	}
}

// TestReadFileJudgesTheRawPath: /dev/fd/../../1/environ is what the gate
// denies (another process's environment); cleaned as text it would read
// /dev/1/environ and only be confirm.
func TestReadFileJudgesTheRawPath(t *testing.T) {
	f := newFixture(t, Config{}, call("read_file", `{"path":"/dev/fd/../../1/environ"}`), say("ok"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "read", Dir: f.dir, Actor: "user:alice", AllowAll: true}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range f.events(t, "s") {
		if ev.Type == EvGateDecision && !strings.Contains(string(ev.Payload), `"verdict":"deny"`) {
			t.Errorf("gate decision: %s", ev.Payload)
		}
	}
}
