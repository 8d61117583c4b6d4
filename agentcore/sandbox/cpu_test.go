package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// cpuTimes are a process's CPU times in clock ticks, from /proc/<pid>/stat:
// its own (all threads, living and exited) and its reaped children's.
type cpuTimes struct{ self, children int64 }

func readCPU(pid string) (cpuTimes, error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields 14-17 (utime, stime, cutime, cstime) are f[11..14] here.
	var v [4]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[11+i], 10, 64); err != nil {
			return cpuTimes{}, err
		}
	}
	return cpuTimes{v[0] + v[1], v[2] + v[3]}, nil
}

// cpuMeter reports, per benchmark iteration, the CPU of this process (the
// daemon), of helper h itself, and of the commands it reaped.
type cpuMeter struct {
	helper      string
	daemon, hlp cpuTimes
}

func startCPU(b *testing.B, h *helper) *cpuMeter {
	m := &cpuMeter{helper: fmt.Sprint(h.proc.Pid)}
	var err1, err2 error
	m.daemon, err1 = readCPU("self")
	m.hlp, err2 = readCPU(m.helper)
	if err1 != nil || err2 != nil {
		b.Fatal(err1, err2)
	}
	return m
}

func (m *cpuMeter) report(b *testing.B) {
	d, err1 := readCPU("self")
	h, err2 := readCPU(m.helper)
	if err1 != nil || err2 != nil {
		b.Fatal(err1, err2)
	}
	const tick = 1e7 // ns per clock tick (USER_HZ 100)
	n := float64(b.N)
	b.ReportMetric(float64(d.self-m.daemon.self)*tick/n, "daemon-cpu-ns/op")
	b.ReportMetric(float64(h.self-m.hlp.self)*tick/n, "helper-cpu-ns/op")
	b.ReportMetric(float64(h.children-m.hlp.children)*tick/n, "cmd-cpu-ns/op")
}
