// Package load runs a closed loop: N workers each call an operation again
// as soon as the previous one returns, for a fixed time, recording each
// call's latency. It is the same method as cmd/eventd-bench's closed loop
// (throughput at a given concurrency), small enough for a spike.
package load

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventd/eventd/bench/scaling/internal/lat"
)

// Result is what one closed-loop run measured.
type Result struct {
	Ops     int           // successful operations
	Errors  int           // failed operations (not in the latencies)
	Elapsed time.Duration // wall time of the run
	Lat     *lat.Recorder // one sample per successful operation
}

// Run calls op from workers goroutines for d. op gets the worker index and
// a per-worker sequence number, so workers can pick their own keys.
func Run(workers int, d time.Duration, op func(worker, seq int) error) Result {
	rec := &lat.Recorder{}
	var ops, errs atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			for i := 0; time.Now().Before(deadline); i++ {
				t := time.Now()
				if err := op(w, i); err != nil {
					errs.Add(1)
					continue
				}
				local = append(local, time.Since(t))
				ops.Add(1)
			}
			rec.Merge(local)
		}(w)
	}
	wg.Wait()
	return Result{Ops: int(ops.Load()), Errors: int(errs.Load()), Elapsed: time.Since(start), Lat: rec}
}
