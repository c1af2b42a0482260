package metrics

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
)

// RegisterProcess adds the process's memory and goroutine gauges, so a soak
// run can tell from /metrics alone whether memory stays flat.
func (r *Registry) RegisterProcess() {
	r.GaugeFunc("process_resident_memory_bytes", "Resident memory of the process.", "", residentBytes)
	r.GaugeFunc("go_heap_objects_bytes", "Bytes of live and not yet swept heap objects.", "", func() float64 {
		return readRuntime("/memory/classes/heap/objects:bytes")
	})
	r.GaugeFunc("go_goroutines", "Goroutines that currently exist.", "", func() float64 {
		return float64(runtime.NumGoroutine())
	})
}

func readRuntime(name string) float64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64())
}

// residentBytes reads /proc/self/statm (Linux); 0 elsewhere.
func residentBytes() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseFloat(f[1], 64)
	if err != nil {
		return 0
	}
	return pages * float64(os.Getpagesize())
}
