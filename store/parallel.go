package store

import (
	"runtime"
)

// Verification is bound by parsing and hashing each line (decoding its
// JSON, re-encoding its canonical body, SHA-256). A parser does that in
// worker goroutines, a few batches ahead, while the caller checks the
// results in chain order (seq, prev links, the index): the order-dependent
// part stays sequential and identical to a one-line-at-a-time check.

// verifyBatch is how many lines a worker parses at a time.
const verifyBatch = 1024

type parseBatch struct {
	keys  [][]byte // the events bucket's keys, when read from bbolt
	lines [][]byte
	evs   []Event
	errs  []error
	done  chan struct{}
}

type parser struct {
	jobs  chan *parseBatch
	queue []*parseBatch
	depth int
}

// newParser starts w workers (GOMAXPROCS if w <= 0); close stops them.
func newParser(w int) *parser {
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	p := &parser{depth: 2*w + 2}
	p.jobs = make(chan *parseBatch, p.depth)
	for range w {
		go func() {
			for b := range p.jobs {
				for i, l := range b.lines {
					b.evs[i], b.errs[i] = parseLine(l)
				}
				close(b.done)
			}
		}()
	}
	return p
}

// full reports whether enough batches are in flight.
func (p *parser) full() bool { return len(p.queue) >= p.depth }

// submit queues lines (which must stay valid until their batch is taken)
// for parsing.
func (p *parser) submit(keys, lines [][]byte) {
	b := &parseBatch{keys: keys, lines: lines, evs: make([]Event, len(lines)), errs: make([]error, len(lines)), done: make(chan struct{})}
	p.queue = append(p.queue, b)
	p.jobs <- b
}

// next returns the oldest batch, parsed, or nil when none is queued.
func (p *parser) next() *parseBatch {
	if len(p.queue) == 0 {
		return nil
	}
	b := p.queue[0]
	p.queue = p.queue[1:]
	<-b.done
	return b
}

// close waits for the queued batches (their lines may be bbolt's memory,
// valid only in the caller's transaction) and stops the workers.
func (p *parser) close() {
	for p.next() != nil {
	}
	close(p.jobs)
}
