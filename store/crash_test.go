package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const crashEnv = "THINBOT_STORE_CRASH_DIR"

// TestHelperProcess is the child of TestCrashRecovery: it appends events
// from several goroutines until it is killed, printing "seq hash" for each
// committed event. It is not a test on its own.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashRecovery")
	}
	db, err := Open(filepath.Join(dir, "events.db"), &Options{Timeout: 10 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	// Bound the child's life in case the parent dies without killing it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	out := os.Stdout
	fmt.Fprintln(out, "ready")
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				evs := make([]Event, 1+i%3)
				for j := range evs {
					evs[j] = Event{Session: fmt.Sprintf("crash-%d", w), Type: "tool_result", Actor: "bot",
						Payload: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d,"pad":%q}`, w, i, strings.Repeat("x", i%200)))}
				}
				got, err := db.Append(ctx, evs...)
				if err != nil {
					return
				}
				var b strings.Builder
				for _, ev := range got {
					fmt.Fprintf(&b, "%d %s\n", ev.Seq, ev.Hash)
				}
				mu.Lock()
				out.WriteString(b.String()) // one write(2): lines reach the pipe whole
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	db.Close()
	os.Exit(0)
}

// TestCrashRecovery SIGKILLs a child that appends from several goroutines at
// random moments (including during Open's reconcile), then checks that every
// event the child reported as committed is in the store, that the chain
// verifies, and that the JSONL export has no gap and no duplicate.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test in -short mode")
	}
	// At least minKills kills; more while time allows. The bound is generous
	// because CI machines are shared; an idle 2-core machine needs ~20 s
	// with -race for maxKills.
	const minKills, maxKills = 50, 60
	dir := t.TempDir()
	deadline := time.Now().Add(100 * time.Second)
	reported := map[uint64]string{}
	rng := rand.New(rand.NewPCG(1, 2))
	kills := 0
	for round := range maxKills {
		if round >= minKills && time.Now().After(deadline) {
			break
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		readDone := make(chan struct{})
		go func() {
			defer close(readDone)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Kill at a random moment: a third of the rounds right away (often
		// inside Open's reconcile), the rest after some commits.
		var afterCommits int
		if rng.IntN(3) > 0 {
			afterCommits = 1 + rng.IntN(150)
		}
		got := 0
		timer := time.NewTimer(5 * time.Second)
	wait:
		for got < afterCommits {
			select {
			case l, ok := <-lines:
				if !ok {
					break wait
				}
				if record(t, reported, l) {
					got++
				}
			case <-timer.C:
				break wait
			}
		}
		timer.Stop()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for l := range lines {
			record(t, reported, l)
		}
		<-readDone
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: child ended with %v, not by SIGKILL; stderr: %s", round, err, stderr.String())
		}
		checkAfterCrash(t, dir, reported, round)
		kills++
	}
	t.Logf("%d kills, %d committed events reported", kills, len(reported))
}

// record notes one "seq hash" line; it reports whether l was one.
func record(t *testing.T, reported map[uint64]string, l string) bool {
	seqText, hash, ok := strings.Cut(l, " ")
	if !ok {
		return false
	}
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil {
		t.Fatalf("child printed %q", l)
	}
	if old, dup := reported[seq]; dup && old != hash {
		t.Fatalf("seq %d reported committed twice with different hashes", seq)
	}
	reported[seq] = hash
	return true
}

func checkAfterCrash(t *testing.T, dir string, reported map[uint64]string, round int) {
	t.Helper()
	// Before any repair, the raw export must be a valid prefix of the chain,
	// at most cut inside its last line.
	raw, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err == nil {
		rep, err := VerifyFile(t.Context(), bytes.NewReader(raw), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK && !strings.Contains(rep.Problem, "cut") {
			t.Fatalf("round %d: raw export after crash: BadSeq %d: %s", round, rep.BadSeq, rep.Problem)
		}
	}
	db, err := Open(filepath.Join(dir, "events.db"), &Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("round %d: reopen: %v", round, err)
	}
	defer db.Close()
	err = db.view(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		for seq, hash := range reported {
			l := events.Get(seqKey(seq))
			if l == nil {
				return fmt.Errorf("reported seq %d lost", seq)
			}
			if h := hashOf(l); h != hash {
				return fmt.Errorf("seq %d has hash %.12s, child reported %.12s", seq, h, hash)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	rep, err := db.Verify(t.Context(), nil)
	if err != nil || !rep.OK {
		t.Fatalf("round %d: Verify = %+v, %v", round, rep, err)
	}
	arep, err := db.VerifyJournal(t.Context(), Report{})
	if err != nil || !arep.OK || arep.Events != rep.Events {
		t.Fatalf("round %d: VerifyJournal = %+v, %v (store has %d events)", round, arep, err, rep.Events)
	}
}
