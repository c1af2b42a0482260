package main

import (
	"log/slog"
	"os"
	"runtime"
)

// spareProc gives Go's scheduler one processor (P) more than the machine
// has CPUs, and logs the processors in force. A Pebble flush or compaction
// holds a P for up to a second of CPU; with as many Ps as CPUs it took one
// of two away from the requests, and an open loop queued behind it
// (docs/benchmarks.md, session 27). With a spare P the kernel shares the
// CPUs among all the threads instead.
func spareProc(log *slog.Logger) {
	_, set := os.LookupEnv("GOMAXPROCS")
	n, cpus := runtime.GOMAXPROCS(0), runtime.NumCPU()
	want := procs(set, n, cpus)
	if want != n {
		runtime.GOMAXPROCS(want)
	}
	log.Info("processors", "gomaxprocs", want, "cpus", cpus, "spare", want-n)
}

// procs is the GOMAXPROCS eventd runs with, given Go's own n, the CPUs the
// process may use, and whether the operator set GOMAXPROCS. It keeps n when
// the operator chose it, and when a container's CPU quota sized it below
// the CPUs: threads beyond a quota are throttled, which costs more than the
// spare P saves.
func procs(set bool, n, cpus int) int {
	if set || n < cpus {
		return n
	}
	return n + 1
}
