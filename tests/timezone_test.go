package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thinbot/thinbot/store"
)

// TestTimezoneWithoutZoneinfo: on a host without a zone database (a
// minimal container: no /usr/share/zoneinfo), a timezone still loads,
// from the copy compiled into thinbot (time/tzdata). The thinbot process
// runs in a mount namespace of its own where the system's zone
// directories are empty.
func TestTimezoneWithoutZoneinfo(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if os.Geteuid() != 0 || err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("needs root and unshare (util-linux) to hide the zone database, and CI has both (unshare: %v)", err)
		}
		t.Skip("needs root and unshare to hide the zone database")
	}
	dir := t.TempDir()
	at := time.Date(2026, 12, 1, 2, 12, 0, 0, time.UTC)
	db, err := store.Open(filepath.Join(dir, "events.db"), &store.Options{Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(map[string]string{"text": "what now?"})
	if _, err := db.Append(context.Background(), store.Event{Session: "mattermost/C1/R1", Type: "user_message", Actor: "user:U1 (alice)", Payload: p}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// Go looks in these, then in $GOROOT/lib/time/zoneinfo.zip of the Go
	// that built it (a binary built without -trimpath, as here; GOROOT in
	// the environment names another), then in its embedded copy.
	hide := ""
	for _, d := range []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ", "/etc/zoneinfo"} {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			hide += "mount -t tmpfs none " + d + " && "
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "-m", "--propagation", "private", "sh", "-c",
		hide+`test ! -e /usr/share/zoneinfo/Asia/Kolkata && exec "$0" "$@"`,
		thinbotBin, "audit", "timeline", "mattermost/C1/R1", "--db", filepath.Join(dir, "events.db"), "--timezone", "Asia/Kolkata")
	cmd.Env = append(os.Environ(), "ZONEINFO=", "GOROOT="+filepath.Join(dir, "no-go"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "**2026-12-01** (IST, UTC+05:30)\n\n- 07:42:00 #1 `") {
		t.Errorf("audit timeline --timezone Asia/Kolkata without a zone database: %v\n%s", err, out)
	}
}
