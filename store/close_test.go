package store

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// closeDeadline bounds each wait of TestCloseWhileVerifyAuditWaitsForCommits:
// every step takes microseconds when nothing is stuck, so it is far above
// what a loaded 2-core machine under -race needs, and the test fails with a
// goroutine dump instead of hanging to the global timeout.
const closeDeadline = 30 * time.Second

// TestCloseWhileVerifyAuditWaitsForCommits: VerifyJournal (the web console's
// verify tab) holds the export lock, which keeps the committer waiting, and
// then reads the store. Appenders that find the commit queue full wait for
// the committer while holding closeMu's read lock; Close must release them
// (ErrClosed) before it takes the write lock, or VerifyJournal's read queues
// behind Close, and nothing ever moves again (fixed in d10a264).
//
// It replaces the test ca488f3 removed, which hung because it waited for the
// queue to be full while the batching committer took part of it: this one
// starts appenders until the queue is full, and every wait is bounded.
func TestCloseWhileVerifyAuditWaitsForCommits(t *testing.T) {
	// Not openTest: its cleanup would Close, which hangs if the bug is back.
	db, err := Open(filepath.Join(t.TempDir(), "events.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	stuck := func(what string) {
		t.Helper()
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("deadlock: %s after %s\n%s", what, closeDeadline, buf)
	}
	deadline := time.Now().Add(closeDeadline)
	poll := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			if time.Now().After(deadline) {
				stuck(what)
			}
			time.Sleep(time.Millisecond)
		}
	}

	db.auditMu.Lock() // VerifyJournal has begun; the committer waits for it
	var appends sync.WaitGroup
	var errMu sync.Mutex
	var appendErrs []error
	start := func() {
		appends.Go(func() {
			_, err := db.Append(context.Background(), Event{Session: "a", Type: "t"})
			errMu.Lock()
			appendErrs = append(appendErrs, err)
			errMu.Unlock()
		})
	}
	// The committer takes a first batch and blocks; appenders then fill the
	// queue, and those that come after wait for room in it.
	poll("the commit queue never filled", func() bool {
		start()
		return len(db.reqs) == cap(db.reqs)
	})
	for range 8 {
		start()
	}
	poll("no appender waits for room in the queue", func() bool {
		if db.closeMu.TryLock() {
			db.closeMu.Unlock()
			return false
		}
		return true // an appender holds the read lock: it waits for room
	})

	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	poll("Close never reached its write lock", func() bool {
		if !db.closeMu.TryRLock() {
			return true // Close holds or waits for the write lock
		}
		done := db.closed
		db.closeMu.RUnlock()
		return done
	})

	read := make(chan error, 1)
	go func() {
		err := db.view(func(*bolt.Tx) error { return nil }) // VerifyJournal reads the store
		db.auditMu.Unlock()
		read <- err
	}()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	select {
	case <-read:
	case <-timeout.C:
		stuck("VerifyJournal's read waits for Close, Close for the appenders, they for the committer, it for VerifyJournal")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Error(err)
		}
	case <-timeout.C:
		stuck("Close did not return")
	}
	allDone := make(chan struct{})
	go func() { appends.Wait(); close(allDone) }()
	select {
	case <-allDone:
	case <-timeout.C:
		stuck("appenders still wait after Close")
	}
	for _, err := range appendErrs {
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Append during Close = %v, want nil or ErrClosed", err)
		}
	}
}
