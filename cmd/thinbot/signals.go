package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/thinbot/thinbot/agentcore"
)

// cancelOnSignal cancels with the first of sigs that arrives, its cause an
// agentcore.StopCause naming the signal (a shutdown by SIGTERM), which the
// runs it cancels record. Later signals of sigs are ignored until the
// returned stop, which restores their default.
func cancelOnSignal(cancel context.CancelCauseFunc, sigs ...os.Signal) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case s := <-ch:
			cancel(&agentcore.StopCause{Kind: agentcore.StopShutdown, By: signalName(s)})
		case <-done:
		}
	})
	return func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
	}
}

// signalName is a signal's name as an operator writes it: SIGTERM.
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return s.String()
}

// brokenPipeStops makes a write to e's stdout or stderr that fails with
// EPIPE (the reader of `thinbot ask ... | head` is gone) cancel with a
// SIGPIPE shutdown instead of killing the process at once, which is what
// the Go runtime does to a program that does not handle SIGPIPE: the
// process then ends through its deferred clean-up. Handling SIGPIPE makes
// every write to a broken pipe or socket fail with EPIPE, as it does on
// any other descriptor already; the signals themselves are dropped. The
// returned stop restores the default.
func brokenPipeStops(e *env, cancel context.CancelCauseFunc) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGPIPE)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ch:
			case <-done:
				return
			}
		}
	})
	broken := func() {
		cancel(&agentcore.StopCause{Kind: agentcore.StopShutdown, By: "SIGPIPE"})
	}
	e.stdout = &pipeWriter{w: e.stdout, broken: broken}
	e.stderr = &pipeWriter{w: e.stderr, broken: broken}
	return func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
	}
}

// pipeWriter calls broken when a write fails with EPIPE.
type pipeWriter struct {
	w      io.Writer
	broken func()
}

func (p *pipeWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		p.broken()
	}
	return n, err
}
