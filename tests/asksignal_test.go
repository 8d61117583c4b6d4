package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thinbot/thinbot/tests/fakemodel"
	"github.com/thinbot/thinbot/tests/sshd"
)

// TestAskSignalsEndPrivilegedMasters: `thinbot ask -a` whose terminal
// closes (SIGHUP) while an approved command runs, or whose stdout reader
// is gone when it prints the answer (SIGPIPE, as `| head`), ends the
// privileged SSH master it opened before it exits, as SIGINT and SIGTERM
// do: an idle privileged master is a write channel no approval guards. The
// SIGHUP'd run is recorded as a shutdown by SIGHUP.
func TestAskSignalsEndPrivilegedMasters(t *testing.T) {
	rig := sshd.Start(t, "web", 1, 0)
	fleetFile := writeFleet(t, rig, false)
	for _, sig := range []string{"SIGHUP", "SIGPIPE"} {
		t.Run(sig, func(t *testing.T) {
			xdg, err := os.MkdirTemp("", "tbxdg")
			if err != nil {
				t.Fatal(err)
			}
			socks := filepath.Join(xdg, "thinbot-ssh")
			masters := func(prefix string) []string { return controlSockets(socks, prefix) }
			t.Cleanup(func() {
				for _, s := range append(masters("w-"), masters("r-")...) {
					exec.Command("ssh", "-o", "ControlPath="+filepath.Join(socks, s), "-O", "exit", "x").Run()
				}
				os.RemoveAll(xdg)
			})
			write := runOn("touch /tmp/tb-sig-$$ && rm /tmp/tb-sig-$$ && id -un", "web-01") // approved (-a): the privileged login
			then := run("sleep 45")
			if sig == "SIGPIPE" {
				then = fakemodel.Reply{Content: "written\n" + strings.Repeat("more\n", 1000)}
			}
			m := fakemodel.Start(t, write, then)
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, thinbotBin, "ask", "-a", "write and wait")
			cmd.Dir = dir
			cmd.Env = append(baseEnv(), append(modelEnv(m), "THINBOT_FLEET="+fleetFile, "XDG_RUNTIME_DIR="+xdg)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if sig == "SIGPIPE" {
				// The reader is gone before the answer is printed.
				pr, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				pr.Close()
				defer pw.Close()
				cmd.Stdout = pw
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			if sig == "SIGHUP" {
				waitUntil(t, "the privileged master and the approved sleep", func() bool {
					return len(masters("w-")) > 0 && sleeps(cmd.Process.Pid) > 0
				})
				cmd.Process.Signal(syscall.SIGHUP)
			}
			werr := <-done
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				t.Errorf("thinbot ask died of %v instead of ending its run (%v)\n%s", ws.Signal(), werr, stderr.String())
			}
			if sig == "SIGPIPE" && len(m.Requests()) != 2 {
				t.Fatalf("the model was asked %d times, want 2\n%s", len(m.Requests()), stderr.String())
			}
			if w := masters("w-"); len(w) > 0 {
				t.Errorf("privileged masters outlive thinbot ask after %s: %v\n%s", sig, w, stderr.String())
			}
			if sig != "SIGHUP" {
				return
			}
			if !strings.Contains(stderr.String(), "run stopped: thinbot is shutting down (SIGHUP)") {
				t.Errorf("ask does not say why it stopped:\n%s", stderr.String())
			}
			events := chainEvents(t, filepath.Dir(dbOf(dir)))
			_, fin := stopEvents(t, events, events[len(events)-1].Session)
			if fin.Status != "cancelled" || fin.Cause != "shutdown" || fin.CauseBy != "SIGHUP" {
				t.Errorf("run_finished = %+v, want cancelled by a shutdown on SIGHUP", fin)
			}
		})
	}
}
