package store

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func lineSeeds() [][]byte {
	ev := Event{Seq: 1, Time: time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC), Session: "s\n\"é", Type: "t",
		Actor: "user:a\x01", Payload: json.RawMessage(`{"a":[1,2.5e3,"<&>"]}`), Prev: ZeroHash}
	good, _ := encodeLine(&ev)
	return [][]byte{good, []byte(`{}`), []byte(`{"seq":1,"hash":"` + ZeroHash + `"}`), nil, []byte("\n\n")}
}

// FuzzParseLine: parseLine never panics, and a line it accepts re-encodes
// to exactly itself (one byte string per event).
func FuzzParseLine(f *testing.F) {
	for _, s := range lineSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := parseLine(line)
		if err != nil {
			return
		}
		again, h := encodeLine(&ev)
		if !bytes.Equal(again, line) || h != ev.Hash {
			t.Fatalf("accepted %q but it re-encodes to %q", line, again)
		}
	})
}

// FuzzDecodeCanonical: the fast reader of canonical lines agrees with the
// JSON decoder on every line it accepts that parseLine then finds good,
// and never accepts a line into an event that parseLine's checks pass but
// the decoder would reject.
func FuzzDecodeCanonical(f *testing.F) {
	for _, s := range lineSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := decodeCanonical(line)
		if !ok {
			return
		}
		slow, err := decodeLine(line)
		if err != nil {
			if _, perr := parseLine(line); perr == nil {
				t.Fatalf("parseLine accepts %q, which the decoder rejects: %v", line, err)
			}
			return
		}
		if fast.Seq != slow.Seq || !fast.Time.Equal(slow.Time) || fast.Time.String() != slow.Time.String() || fast.Session != slow.Session ||
			fast.Branch != slow.Branch || fast.Type != slow.Type || fast.Actor != slow.Actor || !bytes.Equal(fast.Payload, slow.Payload) ||
			fast.Prev != slow.Prev || fast.Hash != slow.Hash {
			if _, perr := parseLine(line); perr == nil {
				t.Fatalf("%q: fast %+v, decoder %+v", line, fast, slow)
			}
		}
	})
}

// seedChain is three good JSONL lines from seq first, linked from the
// zero hash: a fuzz seed (a chain that starts after seq 1 reads as an
// export after an archive).
func seedChain(first uint64) []byte {
	var all []byte
	prev := ZeroHash
	for i := range 3 {
		l, h := encodeLine(&Event{Seq: first + uint64(i), Time: time.Unix(int64(i), 0), Session: "s", Type: "t", Prev: prev, Payload: json.RawMessage("null")})
		all = append(append(all, l...), '\n')
		prev = h
	}
	return all
}

// FuzzVerifyJSONL: VerifyFile never panics or errors on any input, and an
// OK report counts exactly the file's lines.
func FuzzVerifyJSONL(f *testing.F) {
	all := seedChain(1)
	f.Add(all)
	f.Add(all[:len(all)-5])
	f.Add([]byte("garbage\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := VerifyFile(t.Context(), bytes.NewReader(data), nil)
		if err != nil {
			t.Fatalf("VerifyFile error on in-memory input: %v", err)
		}
		if rep.OK && rep.Events != uint64(bytes.Count(data, []byte("\n"))) {
			t.Fatalf("OK with %d events for %d lines", rep.Events, bytes.Count(data, []byte("\n")))
		}
	})
}

// FuzzJSONLHashes: FileHashes never panics on any input, and on one
// that VerifyFile finds good it returns, for every seq, the hash the
// verification saw there (its cheap reading of each line's seq agrees with
// the full one).
func FuzzJSONLHashes(f *testing.F) {
	all := seedChain(5)
	f.Add(all)
	f.Add(all[:len(all)-5])
	f.Add([]byte("{\"seq\":1,garbage\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		seen := map[uint64]string{}
		rep, err := VerifyFile(t.Context(), bytes.NewReader(data), &FileOptions{Each: func(ev Event) { seen[ev.Seq] = ev.Hash }})
		if err != nil {
			t.Fatalf("VerifyFile error on in-memory input: %v", err)
		}
		seqs := []uint64{0, 1, 2, 5, 6, 7, 8, rep.LastSeq, rep.LastSeq + 1}
		got, err := FileHashes(t.Context(), bytes.NewReader(data), seqs, rep.LastSeq, nil)
		if !rep.OK {
			return
		}
		if err != nil {
			t.Fatalf("FileHashes of a good file: %v", err)
		}
		for _, s := range seqs {
			if got[s] != seen[s] {
				t.Fatalf("seq %d: FileHashes %q, VerifyFile saw %q", s, got[s], seen[s])
			}
		}
	})
}

// FuzzStoredPayload: any accepted payload is stored as valid JSON within the
// cap, and small ones keep their meaning.
func FuzzStoredPayload(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `"` + strings.Repeat("ü", 900) + `"`, `[1, 2`, "\"\xff\"", ` null `, `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		got, err := storedPayload(p, 1024)
		if err != nil {
			return
		}
		if !json.Valid(got) || len(got) > 1024 && len(p) > 0 {
			t.Fatalf("stored %q (%d bytes) from %q", got, len(got), p)
		}
		var compact bytes.Buffer
		if json.Compact(&compact, p) == nil && compact.Len() <= 1024 && len(p) > 0 && !bytes.Equal(got, compact.Bytes()) {
			t.Fatalf("payload %q within the cap stored as %q", p, got)
		}
	})
}

// TestPythonVerifier runs testdata/verify_jsonl.py, the outside verifier the
// package documentation shows, on a real export and on a tampered one.
func TestPythonVerifier(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("python3 is not installed; .ci/run installs it")
		}
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	db := openTest(t, dir, &Options{PayloadCap: 2048})
	fill(t, db, 20)
	if _, err := db.Append(t.Context(),
		Event{Session: "ü\t\"x\"\x01", Type: "odd", Actor: "<&>", Payload: json.RawMessage(`{"s":"\u00e9\n","n":1.50,"big":"` + strings.Repeat("z", 5000) + `"}`)}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	path := filepath.Join(dir, "audit.jsonl")
	out, err := exec.Command(py, "testdata/verify_jsonl.py", path).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok 21 events") {
		t.Fatalf("verify_jsonl.py on a good export: %v: %s", err, out)
	}
	f, _ := os.ReadFile(path)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, bytes.Replace(f, []byte("message 7"), []byte("message 8"), 1), 0o600)
	out, err = exec.Command(py, "testdata/verify_jsonl.py", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "seq 8: hash mismatch") {
		t.Fatalf("verify_jsonl.py on a tampered export: %v: %s", err, out)
	}
}

// FuzzParseArchiveLine: the archive header/seal parser never panics, and
// what it accepts is consistent and encodes back to a line it accepts.
func FuzzParseArchiveLine(f *testing.F) {
	f.Add([]byte(`{"format":"thinbot-archive-1","first":1,"last":20,"count":20,"prev":"` + ZeroHash + `"}`))
	f.Add([]byte(`{"seal":"thinbot-archive-1","first":21,"last":40,"count":20,"prev":"` + ZeroHash[:63] + `1","head":"` + ZeroHash + `","sha256":"` + ZeroHash + `","sessions":2}`))
	f.Add([]byte(`{"first":1,"last":0}`))
	f.Add([]byte(`{"first":1,"last":1,"count":1,"prev":"` + ZeroHash + `"} {}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseArchiveLine(line)
		if err != nil {
			return
		}
		if r.First == 0 || r.Last < r.First || r.Count != r.Last-r.First+1 || !isHex64(r.Prev) {
			t.Fatalf("accepted an inconsistent record %+v from %q", r, line)
		}
		if r2, err := parseArchiveLine(mustMarshal(r)); err != nil || r2 != r {
			t.Fatalf("re-encoded %+v: %+v, %v", r, r2, err)
		}
	})
}

// FuzzVerifyArchive: VerifyFile never panics or errors on in-memory
// input (compressed or not), and never calls a file OK whose seal does
// not match its events.
func FuzzVerifyArchive(f *testing.F) {
	var plain bytes.Buffer
	prev := ZeroHash
	var lines [][]byte
	for i := range 3 {
		l, h := encodeLine(&Event{Seq: uint64(i + 1), Time: time.Unix(int64(i), 0), Session: "s", Type: "t", Prev: prev, Payload: json.RawMessage("null")})
		lines = append(lines, l)
		prev = h
	}
	sum := sha256.New()
	fmt.Fprintf(&plain, `{"format":"thinbot-archive-1","first":1,"last":3,"count":3,"prev":"%s"}`+"\n", ZeroHash)
	for _, l := range lines {
		plain.Write(append(l, '\n'))
		sum.Write(append(l, '\n'))
	}
	fmt.Fprintf(&plain, `{"seal":"thinbot-archive-1","first":1,"last":3,"count":3,"prev":"%s","head":"%s","sha256":"%x","sessions":1}`+"\n", ZeroHash, prev, sum.Sum(nil))
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	if rep, err := VerifyFile(f.Context(), bytes.NewReader(gz(plain.Bytes())), &FileOptions{Archive: true}); err != nil || !rep.OK {
		f.Fatalf("seed does not verify: %+v, %v", rep, err)
	}
	f.Add(plain.Bytes(), true)
	f.Add(plain.Bytes()[:100], true)
	f.Add(gz(plain.Bytes()), false)
	f.Fuzz(func(t *testing.T, data []byte, compress bool) {
		if compress {
			data = gz(data)
		}
		rep, err := VerifyFile(t.Context(), bytes.NewReader(data), &FileOptions{Archive: true})
		if err != nil {
			t.Fatalf("VerifyFile error on in-memory input: %v", err)
		}
		if rep.OK && (rep.Seal.Head != rep.LastHash || rep.Seal.Last != rep.LastSeq || rep.Events != rep.Seal.Count) {
			t.Fatalf("OK with a seal %+v that does not match the events %+v", rep.Seal, rep.Report)
		}
	})
}
