package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
)

// profileEnv names a directory into which `thinbot serve` writes profiles
// of its whole life: cpu.pprof while it runs, and heap.pprof, allocs.pprof
// and mutex.pprof when it stops. With traceEnv set to 1 as well, it also
// writes the execution trace (trace.out) and the block profile, which cost
// the daemon much more. Both are meant for the load test (tests/loadtest
// -profile, -trace); nothing is served over the network.
const (
	profileEnv = "THINBOT_PROFILE_DIR"
	traceEnv   = "THINBOT_PROFILE_TRACE"
)

// startProfiles starts the CPU profile (and the execution trace, if
// withTrace) into dir and returns the function that stops them and writes
// the other profiles. The mutex profile samples one contention in 5; the
// block profile every blocking event; with the trace, the heap profiles
// sample one allocation in 16 KiB.
func startProfiles(dir string, withTrace bool) (stop func() error, err error) {
	if err := profileDir(dir); err != nil {
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	cpu, err := createProfile(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, fmt.Errorf("%s: %w", profileEnv, err)
	}
	names := []string{"heap", "allocs", "mutex"}
	var tr *os.File
	if withTrace {
		if tr, err = createProfile(filepath.Join(dir, "trace.out")); err == nil {
			if err = trace.Start(tr); err != nil {
				tr.Close()
			}
		}
		if err != nil {
			pprof.StopCPUProfile()
			cpu.Close()
			return nil, fmt.Errorf("%s: %w", traceEnv, err)
		}
		runtime.SetBlockProfileRate(1)
		names = append(names, "block")
	}
	runtime.SetMutexProfileFraction(5)
	memRate := runtime.MemProfileRate
	if withTrace {
		// One allocation sample per 16 KiB instead of 512 KiB: a load run
		// allocates a few tens of MiB. It costs too much CPU for the CPU
		// profile of a run without the trace.
		runtime.MemProfileRate = 16 << 10
	}
	return func() error {
		var errs []error
		if tr != nil {
			trace.Stop()
			errs = append(errs, tr.Close())
		}
		pprof.StopCPUProfile()
		errs = append(errs, cpu.Close())
		for _, name := range names {
			errs = append(errs, writeProfile(filepath.Join(dir, name+".pprof"), name))
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
		runtime.MemProfileRate = memRate
		return errors.Join(errs...)
	}, nil
}

// profileDir makes dir (0700) if it does not exist and checks that it is
// a directory of the daemon's user that nobody else may write: profiles
// show the daemon's code paths and the trace its goroutines' life, and
// another user able to write there could plant a symlink that makes the
// daemon overwrite a file of its own (its store, its keys) with a profile.
func profileDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by others (mode %v); use a directory only thinbot's user can write", dir, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to thinbot's user (uid %d)", dir, st.Uid, os.Geteuid())
	}
	return nil
}

// createProfile creates or truncates a profile file readable by the
// daemon's user only, never through a symlink.
func createProfile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil { // a file from an earlier run keeps its mode otherwise
		f.Close()
		return nil, err
	}
	return f, nil
}

func writeProfile(path, name string) error {
	f, err := createProfile(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
