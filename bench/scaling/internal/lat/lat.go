// Package lat records latencies of a bounded spike run and reports
// percentiles. Runs are seconds long, so keeping every sample and sorting
// once is exact and simpler than a histogram.
package lat

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
)

// Recorder collects durations from many goroutines.
type Recorder struct {
	mu      sync.Mutex
	samples []time.Duration
}

// Add records one sample.
func (r *Recorder) Add(d time.Duration) {
	r.mu.Lock()
	r.samples = append(r.samples, d)
	r.mu.Unlock()
}

// Merge adds a goroutine's local samples in one lock.
func (r *Recorder) Merge(s []time.Duration) {
	r.mu.Lock()
	r.samples = append(r.samples, s...)
	r.mu.Unlock()
}

// Quantile returns the q-quantile (0..1) of the samples, 0 with none.
func (r *Recorder) Quantile(q float64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return 0
	}
	sort.Slice(r.samples, func(i, j int) bool { return r.samples[i] < r.samples[j] })
	i := int(q * float64(len(r.samples)-1))
	return r.samples[i]
}

// Count is the number of samples.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.samples)
}

// Line formats one result row: the operation count over the elapsed time,
// p50 and p99, and the load average at the time of printing, since every
// figure on a shared machine needs its load next to it.
func Line(name string, ops int, unit string, elapsed time.Duration, r *Recorder) string {
	rate := float64(ops) / elapsed.Seconds()
	return fmt.Sprintf("%-44s %10.0f %s/s  p50 %8s  p99 %8s  n=%d  load %s",
		name, rate, unit, round(r.Quantile(0.50)), round(r.Quantile(0.99)), r.Count(), Load())
}

func round(d time.Duration) string {
	switch {
	case d < 10*time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(10 * time.Microsecond).String()
	}
}

// Load is the 1-minute load average from /proc/loadavg (or `uptime` when
// /proc is missing).
func Load() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 0 {
			return f[0]
		}
	}
	out, _ := exec.Command("uptime").Output()
	return strings.TrimSpace(string(out))
}
