package store

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var benchPayload = json.RawMessage(`{"command":"df -h /var/lib/postgresql","verdict":"pass","reason":"read-only","rule":"df"}`)

func benchEvent() Event {
	return Event{Session: "mm:town-square:8x1y2z", Type: "gate_decision", Actor: "system", Payload: benchPayload}
}

// BenchmarkAppendSingle appends one event per call from one goroutine: one
// transaction (two fsyncs) plus one export fsync per event.
func BenchmarkAppendSingle(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	ctx := context.Background()
	for b.Loop() {
		if _, err := db.Append(ctx, benchEvent()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendConcurrent32 has 32 goroutines appending one event per call
// (b.N events in all); group commit shares each transaction among the
// callers waiting at once. It reports durable events/s and events per
// commit.
func BenchmarkAppendConcurrent32(b *testing.B) {
	db := openTest(b, b.TempDir(), nil)
	ctx := context.Background()
	var next atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := db.Append(ctx, benchEvent()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/float64(db.commits.Load()), "events/commit")
}

// BenchmarkVerify100k verifies a chain of 100,000 events.
func BenchmarkVerify100k(b *testing.B) {
	db := openTest(b, b.TempDir(), &Options{AuditPath: "-"})
	ctx := context.Background()
	batch := make([]Event, 1000)
	for i := range batch {
		batch[i] = benchEvent()
	}
	for range 100 {
		if _, err := db.Append(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		rep, err := db.Verify(ctx, nil)
		if err != nil || !rep.OK || rep.Events != 100_000 {
			b.Fatalf("Verify = %+v, %v", rep, err)
		}
	}
}

// BenchmarkRawWriteFsync writes the bytes of one stored event and fsyncs,
// in the same directory as the store benchmarks: the physical floor for a
// durable single append.
func BenchmarkRawWriteFsync(b *testing.B) {
	ev := benchEvent()
	ev.Time, ev.Prev, ev.Seq = time.Now(), ZeroHash, 1
	line, _ := encodeLine(&ev)
	line = append(line, '\n')
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for b.Loop() {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// BenchmarkRebuild100k is what Open costs after the machine went down with
// the store open: the bbolt file rebuilt from a journal of 100,000 events.
func BenchmarkRebuild100k(b *testing.B) {
	dir := b.TempDir()
	db := openTest(b, dir, nil)
	ctx := context.Background()
	batch := make([]Event, 1000)
	for i := range batch {
		batch[i] = benchEvent()
	}
	for range 100 {
		if _, err := db.Append(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	path := filepath.Join(dir, "events.db")
	for b.Loop() {
		setState(b, dir, "an-earlier-boot")
		db, err := Open(path, nil)
		if err != nil {
			b.Fatal(err)
		}
		if db.LastSeq() != 100_000 {
			b.Fatalf("LastSeq = %d", db.LastSeq())
		}
		db.Close()
		kept, _ := filepath.Glob(path + ".unsynced-*")
		for _, k := range kept {
			os.Remove(k)
		}
	}
	b.ReportMetric(float64(100_000*b.N)/b.Elapsed().Seconds(), "events/s")
}
