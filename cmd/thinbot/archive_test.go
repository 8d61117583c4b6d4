package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/agentcore"
	"github.com/thinbot/thinbot/store"
)

// newSessionStore makes a closed store of n sessions of 10 events, one
// after the other.
func newSessionStore(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".thinbot", "events.db")
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n * 10 {
		if _, err := db.Append(t.Context(), store.Event{Session: fmt.Sprintf("s%d", i/10), Type: "user_message",
			Actor: "user:alice", Payload: json.RawMessage(fmt.Sprintf(`{"text":"m%d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func runAudit(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	e, out, errb := auditEnv()
	err := run(t.Context(), e, append([]string{"audit"}, args...))
	if err != nil && exitCode(err) != 0 {
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), exitCode(err)
}

// TestAuditArchiveCommands: the operator's steps of deploy/audit.md: archive,
// verify the live store (which says what is archived where), verify the
// archives alone and with the store, export (which says where the earlier
// events are), restore and verify the restored store; a tampered archive
// or a store that does not continue it fails, naming where.
func TestAuditArchiveCommands(t *testing.T) {
	path := newSessionStore(t, 5)
	dir := filepath.Dir(path)
	out, errb, code := runAudit(t, "archive", "--db", path)
	if code != 1 || !strings.Contains(errb, "--before DATE or --upto SEQ") {
		t.Fatalf("archive without a limit: exit %d\n%s%s", code, out, errb)
	}
	out, errb, code = runAudit(t, "archive", "--db", path, "--upto", "25")
	if code != 0 || !strings.Contains(out, "archived events 1..20 (20 events, 2 sessions)") || !strings.Contains(out, "recorded by event 51") {
		t.Fatalf("archive: exit %d\n%s%s", code, out, errb)
	}
	a1 := filepath.Join(dir, "archive", "archive-000000000001-000000000020.jsonl.gz")
	// The new store starts as fast as any: its state index is built.
	if db, err := store.Open(path, &store.Options{ReadOnly: true}); err != nil {
		t.Fatal(err)
	} else {
		if !agentcore.IndexIsCurrent(db) {
			t.Error("after the archive the store has no current state index: the next start builds it from the chain")
		}
		db.Close()
	}
	out, errb, code = runAudit(t, "verify", "--db", path)
	if code != 0 || !strings.Contains(out, "events 1..20 archived in archive-000000000001-000000000020.jsonl.gz (head ") || !strings.Contains(out, "verified 21..51: 31 events") ||
		!strings.Contains(out, "identical to the store") {
		t.Fatalf("verify after archive: exit %d\n%s%s", code, out, errb)
	}
	out, errb, code = runAudit(t, "verify", "--jsonl", filepath.Join(dir, "audit.jsonl"))
	if code != 0 || !strings.Contains(out, "events 1..20 archived in") {
		t.Fatalf("verify --jsonl after archive: exit %d\n%s%s", code, out, errb)
	}
	out, errb, code = runAudit(t, "export", "--db", path)
	if code != 0 || !strings.Contains(errb, "events 1..20 are archived in archive-000000000001-000000000020.jsonl.gz") || !strings.HasPrefix(out, `{"seq":21,`) {
		t.Fatalf("export after archive: exit %d\n%.200s\n%s", code, out, errb)
	}
	out, errb, code = runAudit(t, "timeline", "s1", "--db", path)
	if code != 0 || !strings.Contains(errb, "session s1: 10 events (seq 11..20) are archived") {
		t.Fatalf("timeline of an archived session: exit %d\n%s%s", code, out, errb)
	}
	// A second archive; then the two archives and the store end to end.
	out, errb, code = runAudit(t, "archive", "--db", path, "--upto", "40")
	if code != 0 || !strings.Contains(out, "archived events 21..40") {
		t.Fatalf("second archive: exit %d\n%s%s", code, out, errb)
	}
	a2 := filepath.Join(dir, "archive", "archive-000000000021-000000000040.jsonl.gz")
	out, errb, code = runAudit(t, "verify", "--archive", a1, "--archive", a2, "--db", path)
	if code != 0 || strings.Count(out, ": ok, events") != 2 || !strings.Contains(out, "continues the last archive: events 41..52") ||
		!strings.Contains(out, "archive "+a2+": recorded in the live chain") {
		t.Fatalf("verify --archive with the store: exit %d\n%s%s", code, out, errb)
	}
	// Out of order, and the store after only the first: broken.
	out, _, code = runAudit(t, "verify", "--archive", a2, "--archive", a1)
	if code != 2 || !strings.Contains(out, "does not continue the file before it") {
		t.Fatalf("archives out of order: exit %d\n%s", code, out)
	}
	out, _, code = runAudit(t, "verify", "--archive", a1, "--db", path)
	if code != 2 || !strings.Contains(out, "not where the last archive ends (seq 20") {
		t.Fatalf("store after a missing archive: exit %d\n%s", code, out)
	}
	// Restore both and verify the restored store from seq 1.
	rdir := filepath.Join(t.TempDir(), "restored")
	out, errb, code = runAudit(t, "restore", a1, a2, "--to", rdir)
	if code != 0 || !strings.Contains(out, "restored events 1..40 from 2 archive file(s)") {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errb)
	}
	out, errb, code = runAudit(t, "verify", "--db", filepath.Join(rdir, "events.db"))
	if code != 0 || !strings.Contains(out, "ok, 40 events, 4 sessions, head seq 40") {
		t.Fatalf("verify the restored store: exit %d\n%s%s", code, out, errb)
	}
	out, errb, code = runAudit(t, "timeline", "s1", "--db", filepath.Join(rdir, "events.db"))
	if code != 0 || !strings.Contains(out, "m19") {
		t.Fatalf("timeline from the restored store: exit %d\n%s%s", code, out, errb)
	}
	// Restore the second alone: verified from the first's head.
	rdir2 := filepath.Join(t.TempDir(), "restored")
	out, _, code = runAudit(t, "restore", "--to", rdir2, a2)
	from := regexp.MustCompile(`--from (20:[0-9a-f]{64})`).FindStringSubmatch(out)
	if code != 0 || from == nil {
		t.Fatalf("restore of a later archive: exit %d\n%s", code, out)
	}
	if out, errb, code = runAudit(t, "verify", "--db", filepath.Join(rdir2, "events.db"), "--from", from[1]); code != 0 {
		t.Fatalf("verify --from of a restored later archive: exit %d\n%s%s", code, out, errb)
	}
	// A tampered archive: verify names the event.
	tamper(t, a1, "m7", "M7")
	out, _, code = runAudit(t, "verify", "--archive", a1)
	if code != 2 || !strings.Contains(out, "BROKEN at seq 8") {
		t.Fatalf("verify a tampered archive: exit %d\n%s", code, out)
	}
	if out, errb, code = runAudit(t, "restore", a1, a2, "--to", filepath.Join(t.TempDir(), "r")); code != 1 || !strings.Contains(errb, "does not verify: seq 8") {
		t.Fatalf("restore of a tampered archive: exit %d\n%s%s", code, out, errb)
	}
}

// tamper replaces old with new in an archive file's decompressed text.
func tamper(t *testing.T, p, old, new string) {
	t.Helper()
	b := gunzipFile(t, p)
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", p, old)
	}
	gzipFile(t, p, []byte(strings.Replace(string(b), old, new, 1)))
}

// gunzipFile is the decompressed content of the gzip file p.
func gunzipFile(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// gzipFile replaces the file p with b, gzip'd.
func gzipFile(t *testing.T, p string, b []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAuditArchiveNeedsTheStore: with a daemon holding the store, archive
// refuses and says to stop it; the store is unchanged.
func TestAuditArchiveNeedsTheStore(t *testing.T) {
	path := newSessionStore(t, 3)
	db, err := store.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out, errb, code := runAudit(t, "archive", "--db", path, "--upto", "20")
	if code != 1 || !strings.Contains(errb, "stop the daemon first") {
		t.Fatalf("archive of a held store: exit %d\n%s%s", code, out, errb)
	}
	if db.LastSeq() != 30 {
		t.Fatalf("the store changed: last seq %d", db.LastSeq())
	}
}

// TestAuditVerifyArchiveChecksTheStore: verify --archive with the store
// checks the store as audit verify does (its export too), not only its
// chain: a live journal edited after an archive fails it.
func TestAuditVerifyArchiveChecksTheStore(t *testing.T) {
	path := newSessionStore(t, 5)
	dir := filepath.Dir(path)
	if out, errb, code := runAudit(t, "archive", "--db", path, "--upto", "20"); code != 0 {
		t.Fatalf("archive: exit %d\n%s%s", code, out, errb)
	}
	a1 := filepath.Join(dir, "archive", "archive-000000000001-000000000020.jsonl.gz")
	journal := filepath.Join(dir, "audit.jsonl")
	b, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(journal, []byte(strings.Replace(string(b), `"m33"`, `"M33"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errb, code := runAudit(t, "verify", "--db", path)
	if code != 2 || !strings.Contains(out, "export "+journal+": BROKEN at seq 34") {
		t.Fatalf("verify of an edited journal: exit %d\n%s%s", code, out, errb)
	}
	out, errb, code = runAudit(t, "verify", "--archive", a1, "--db", path)
	if code != 2 || !strings.Contains(out, "export "+journal+": BROKEN at seq 34") {
		t.Fatalf("verify --archive with the store of an edited journal: exit %d\n%s%s", code, out, errb)
	}
}

// TestAuditVerifyNamesTheArchives: after two archives, verify does not say
// that the last archive file holds every archived event: restoring it alone
// gives only its own range.
func TestAuditVerifyNamesTheArchives(t *testing.T) {
	path := newSessionStore(t, 5)
	for _, upto := range []string{"20", "40"} {
		if out, errb, code := runAudit(t, "archive", "--db", path, "--upto", upto); code != 0 {
			t.Fatalf("archive --upto %s: exit %d\n%s%s", upto, code, out, errb)
		}
	}
	a2 := "archive-000000000021-000000000040.jsonl.gz"
	out, errb, code := runAudit(t, "verify", "--db", path)
	if code != 0 || strings.Contains(out, "events 1..40 archived in "+a2) || !strings.Contains(out, "events 1..40 archived: 21..40 in "+a2+" (head ") {
		t.Fatalf("verify after two archives: exit %d\n%s%s", code, out, errb)
	}
}

// TestAuditVerifyLinksArchivesByHash: archives are linked to each other,
// and the live store to the last, by the head and prev hashes, not by
// their seq ranges alone: an archive swapped for another self-consistent
// history of the same range (another store's, archived at the same seqs)
// verifies on its own but breaks the link on either side.
func TestAuditVerifyLinksArchivesByHash(t *testing.T) {
	archives := func(path string) (string, string) {
		t.Helper()
		for _, upto := range []string{"20", "40"} {
			if out, errb, code := runAudit(t, "archive", "--db", path, "--upto", upto); code != 0 {
				t.Fatalf("archive --upto %s: exit %d\n%s%s", upto, code, out, errb)
			}
		}
		dir := filepath.Join(filepath.Dir(path), "archive")
		return filepath.Join(dir, "archive-000000000001-000000000020.jsonl.gz"), filepath.Join(dir, "archive-000000000021-000000000040.jsonl.gz")
	}
	pathA, pathB := newSessionStore(t, 5), newSessionStore(t, 5)
	a1, a2 := archives(pathA)
	b1, b2 := archives(pathB)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		want   string
		broken string // the file or "store" named BROKEN
	}{
		{"own archives and store", []string{"--archive", a1, "--archive", a2, "--db", pathA}, 0, "continues the last archive", ""},
		{"other history alone", []string{"--archive", b1, "--archive", b2}, 0, "ok, events 21..40", ""},
		{"second archive swapped", []string{"--archive", a1, "--archive", b2}, 2, "does not continue the file before it", b2},
		{"first archive swapped", []string{"--archive", b1, "--archive", a2}, 2, "does not continue the file before it", a2},
		{"store after swapped archives", []string{"--archive", b1, "--archive", b2, "--db", pathA}, 2, "not where the last archive ends (seq 40", "store"},
		{"store after a swapped last archive", []string{"--archive", b2, "--db", pathA}, 2, "not where the last archive ends (seq 40", "store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errb, code := runAudit(t, append([]string{"verify"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Fatalf("verify %v: exit %d, want %d and %q\n%s%s", tc.args, code, tc.code, tc.want, out, errb)
			}
			if tc.broken != "" && !strings.Contains(out, tc.broken+": BROKEN") && !strings.Contains(out, tc.broken+"  "+pathA+": BROKEN") {
				t.Errorf("verify %v does not name %s as broken:\n%s", tc.args, tc.broken, out)
			}
		})
	}
}
