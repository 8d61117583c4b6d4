package store

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkCommitCost has 8 goroutines, each its own session, append
// buffered events (a command's result) and every third one durably (a
// decision), as the daemon's runs do; it reports the committer's CPU per
// commit, events per commit, and bbolt's pages allocated and writes per
// commit (a write is a page or a run of overflow pages, the meta page
// included; issue #20).
func BenchmarkCommitCost(b *testing.B) {
	db := historyStore(b)
	ctx := context.Background()
	c0 := db.commits.Load()
	st0 := db.bolt.Stats()
	cpu0 := cpuTime()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N/8 + 1
	for g := range 8 {
		wg.Go(func() {
			for i := range per {
				ev := benchEvent()
				ev.Session = fmt.Sprintf("mm:c:%d", g*37+i%5)
				var err error
				if i%3 == 0 {
					_, err = db.Append(ctx, ev)
				} else {
					_, err = db.AppendBuffered(ctx, ev)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	commits := db.commits.Load() - c0
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(commits), "cpu-µs/commit")
	b.ReportMetric(float64(8*per)/float64(commits), "events/commit")
	reportPages(b, db, st0, commits)
}

// historyStore opens a store with some history for the commit benchmarks:
// 2000 events in 300 sessions, so pages to split and a freelist.
func historyStore(b *testing.B) *DB {
	db := openTest(b, b.TempDir(), nil)
	for i := range 2000 {
		ev := benchEvent()
		ev.Session = fmt.Sprintf("mm:c:%d", i%300)
		if _, err := db.AppendBuffered(context.Background(), ev); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// reportPages reports bbolt's pages allocated and written per commit since
// st0.
func reportPages(b *testing.B, db *DB, st0 bolt.Stats, commits uint64) {
	st := db.bolt.Stats()
	b.ReportMetric(float64(st.TxStats.GetPageCount()-st0.TxStats.GetPageCount())/float64(commits), "pages/commit")
	b.ReportMetric(float64(st.TxStats.GetWrite()-st0.TxStats.GetWrite())/float64(commits), "writes/commit")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCommitSerial commits a decision's worth of events (4, one
// session, buffered: no sync) per op from one goroutine, on a store with
// some history: the commit path's own cost without the scheduling and
// syncs of BenchmarkCommitCost.
func BenchmarkCommitSerial(b *testing.B) {
	db := historyStore(b)
	ctx := context.Background()
	st0 := db.bolt.Stats()
	cpu0 := cpuTime()
	evs := make([]Event, 4)
	i := 0
	for b.Loop() {
		for j := range evs {
			evs[j] = benchEvent()
			evs[j].Session = fmt.Sprintf("mm:c:%d", i%50)
		}
		i++
		if _, err := db.AppendBuffered(ctx, evs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/commit")
	reportPages(b, db, st0, uint64(b.N))
}
