package bench

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseProcStatus(t *testing.T) {
	status := "Name:\teventd\nVmPeak:\t 2000000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\nThreads:\t12\n"
	rss, hwm := ParseProcStatus([]byte(status))
	if rss != 100<<20 || hwm != 200<<20 {
		t.Errorf("rss %d hwm %d", rss, hwm)
	}
	if rss, hwm := ParseProcStatus([]byte("Name:\tx\n")); rss != 0 || hwm != 0 {
		t.Errorf("empty status: %d %d", rss, hwm)
	}
}

func TestReadRSSOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	rss, hwm, err := ReadRSS(os.Getpid())
	if err != nil || rss == 0 || hwm < rss {
		t.Errorf("rss %d hwm %d err %v", rss, hwm, err)
	}
	s := StartMemSampler(&MemSource{PID: os.Getpid()}, time.Now(), time.Hour, 0)
	if got := s.Stop(); len(got) != 1 || got[0].RSS == 0 {
		t.Errorf("sampler took %+v; want the one sample taken at start", got)
	}
}

func TestParseMemStats(t *testing.T) {
	text := "heap profile: 1: 2 [3: 4] @ heap/1048576\n1: 2 [3: 4] @ 0x1\n\n# runtime.MemStats\n# Alloc = 1234\n# HeapInuse = 5678\n# HeapSys = 9999\n# PauseNs = [1 2 3]\n# NumGC = 7\n"
	m := ParseMemStats([]byte(text))
	if m["HeapInuse"] != 5678 || m["HeapSys"] != 9999 || m["NumGC"] != 7 || m["Alloc"] != 1234 {
		t.Errorf("%v", m)
	}
	if _, ok := m["PauseNs"]; ok {
		t.Error("a list was read as a number")
	}
	if len(ParseMemStats([]byte("no stats here"))) != 0 {
		t.Error("stats from nothing")
	}
}

func TestParseMetric(t *testing.T) {
	text := "# HELP process_resident_memory_bytes Resident memory.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 1.2345e+08\neventd_requests_total{route=\"x\"} 5\nprocess_resident_memory_bytes_other 1\n"
	if v, ok := ParseMetric([]byte(text), "process_resident_memory_bytes"); !ok || v != 1.2345e8 {
		t.Errorf("got %v %v", v, ok)
	}
	if _, ok := ParseMetric([]byte(text), "go_memstats_heap_inuse_bytes"); ok {
		t.Error("found a missing metric")
	}
	if got := ParseMetrics([]byte(text), "eventd_requests_total"); len(got) != 1 || got[`{route="x"}`] != 5 {
		t.Errorf("labelled samples: %v", got)
	}
	if got := ParseMetrics([]byte(text), "process_resident_memory_bytes"); len(got) != 1 {
		t.Errorf("samples of another family's prefix taken: %v", got)
	}
}

func TestSlope(t *testing.T) {
	x := []float64{0, 1, 2, 3, 4}
	if s := Slope(x, []float64{3, 5, 7, 9, 11}); math.Abs(s-2) > 1e-9 {
		t.Errorf("slope %v, want 2", s)
	}
	if s := Slope(x, []float64{5, 5, 5, 5, 5}); s != 0 {
		t.Errorf("flat slope %v", s)
	}
	if Slope([]float64{1}, []float64{1}) != 0 || Slope([]float64{2, 2}, []float64{1, 5}) != 0 {
		t.Error("degenerate inputs")
	}
}

func TestAnalyzeMemory(t *testing.T) {
	const mib = 1 << 20
	series := func(f func(i int) uint64) []MemSample {
		var s []MemSample
		for i := 0; i <= 120; i++ { // ten minutes, every 5 s
			s = append(s, MemSample{T: float64(i * 5), RSS: f(i)})
		}
		return s
	}
	// A warm-up ramp, then a saw-tooth (memtables filling and flushing)
	// around a level: flat.
	flat := AnalyzeMemory(series(func(i int) uint64 {
		if i < 20 {
			return uint64(100+10*i) * mib
		}
		return uint64(300+(i%10)*4) * mib
	}), 0.2)
	if !flat.Flat || flat.PeakRSS != 336*mib || flat.StartRSS != 100*mib || !strings.HasPrefix(flat.FlatReason, "flat") {
		t.Errorf("saw-tooth: %+v", flat)
	}
	// A steady leak of 10 MiB a minute on 300 MiB: 80 MiB over the fitted
	// eight minutes, above the 32 MiB allowance.
	leak := AnalyzeMemory(series(func(i int) uint64 { return 300*mib + uint64(i)*10*mib/12 }), 0.2)
	if leak.Flat || math.Abs(leak.RSSSlope-10*mib) > mib/100 || !strings.HasPrefix(leak.FlatReason, "GROWING") {
		t.Errorf("leak: %+v", leak)
	}
	heapOnly := series(func(int) uint64 { return 0 })
	for i := range heapOnly {
		heapOnly[i].HeapSys = 64 * mib
	}
	if got := AnalyzeMemory(heapOnly, 0.2); !got.Flat || got.MeanRSS != 64*mib {
		t.Errorf("heap only: %+v", got)
	}
	if got := AnalyzeMemory(nil, 0.2); got.Flat || got.FlatReason != "no samples" {
		t.Errorf("empty: %+v", got)
	}
	if got := Between(series(func(int) uint64 { return 1 }), 10, 20); len(got) != 3 {
		t.Errorf("Between: %d samples", len(got))
	}
}

func TestFormatBytes(t *testing.T) {
	for v, want := range map[float64]string{0: "0 B", 512: "512 B", 1536: "1.5 KiB", 123456789: "117.7 MiB", -2 << 20: "-2.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := FormatBytes(v); got != want {
			t.Errorf("FormatBytes(%v) = %q, want %q", v, got, want)
		}
	}
}
