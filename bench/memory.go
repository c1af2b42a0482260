package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"time"
)

// Memory of the server under test. eventd's /metrics has no process memory
// gauge, so the bench reads what it can: VmRSS of the server process it
// started (/proc/<pid>/status), and the Go heap from the runtime.MemStats
// block of /debug/pprof/heap?debug=1 (admin token). If /metrics ever gains
// process_resident_memory_bytes, that is used instead of /proc.

// MemSample is one reading. T is seconds since the sampler (or the bench)
// started.
type MemSample struct {
	T         float64 `json:"t_s"`
	RSS       uint64  `json:"rss_bytes"`
	HeapInuse uint64  `json:"heap_inuse_bytes,omitempty"`
	HeapSys   uint64  `json:"heap_sys_bytes,omitempty"`
}

// ParseProcStatus reads VmRSS and VmHWM (peak RSS) from /proc/<pid>/status.
func ParseProcStatus(b []byte) (rss, hwm uint64) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		var dst *uint64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &hwm
		default:
			continue
		}
		f := bytes.Fields(line[6:])
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && bytes.EqualFold(f[1], []byte("kB")) {
			n *= 1024
		}
		*dst = n
	}
	return rss, hwm
}

// ReadRSS reads a local process's resident set size.
func ReadRSS(pid int) (rss, hwm uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	rss, hwm = ParseProcStatus(b)
	if rss == 0 {
		return 0, 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return rss, hwm, nil
}

// ParseMemStats reads the "# Name = value" lines that net/http/pprof's heap
// profile prints in text form (debug=1): HeapInuse, HeapSys, Sys, NumGC...
func ParseMemStats(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	i := bytes.Index(b, []byte("# runtime.MemStats"))
	if i < 0 {
		return out
	}
	sc := bufio.NewScanner(bytes.NewReader(b[i:]))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := bytes.TrimPrefix(sc.Bytes(), []byte("# "))
		k, v, ok := bytes.Cut(line, []byte(" = "))
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64); err == nil {
			out[string(k)] = n
		}
	}
	return out
}

// ParseMetric returns the value of an unlabelled Prometheus sample.
func ParseMetric(text []byte, name string) (float64, bool) {
	v, ok := ParseMetrics(text, name)[""]
	return v, ok
}

// ParseMetrics returns the samples of the Prometheus family name by their
// labels as written (`{kind="move"}`; "" for the unlabelled sample).
func ParseMetrics(text []byte, name string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte(" "))
		labels, named := bytes.CutPrefix(k, []byte(name))
		if !ok || !named || (len(labels) > 0 && labels[0] != '{') {
			continue
		}
		if f, err := strconv.ParseFloat(string(bytes.Fields(v)[0]), 64); err == nil {
			out[string(labels)] = f
		}
	}
	return out
}

// MemSource reads the server's memory; any part may be unavailable.
type MemSource struct {
	PID   int    // local server process; 0: unknown
	Admin *Admin // for /metrics and the heap profile; nil: none

	once       sync.Once
	hasMetrics bool // /metrics has process_resident_memory_bytes
}

// Read takes one sample (T left for the caller); heap asks for the Go heap
// too, which costs the server a heap profile dump, so samplers do it rarely.
func (m *MemSource) Read(ctx context.Context, heap bool) (MemSample, error) {
	var s MemSample
	var err error
	m.once.Do(func() {
		if m.Admin != nil {
			if b, merr := m.Admin.Get(ctx, "/metrics"); merr == nil {
				_, m.hasMetrics = ParseMetric(b, "process_resident_memory_bytes")
			}
		}
	})
	if m.hasMetrics {
		if b, merr := m.Admin.Get(ctx, "/metrics"); merr == nil {
			if v, ok := ParseMetric(b, "process_resident_memory_bytes"); ok {
				s.RSS = uint64(v)
			}
		}
	}
	if s.RSS == 0 && m.PID > 0 {
		s.RSS, _, err = ReadRSS(m.PID)
	}
	if heap && m.Admin != nil {
		if b, herr := m.Admin.Get(ctx, "/debug/pprof/heap?debug=1"); herr == nil {
			ms := ParseMemStats(b)
			s.HeapInuse, s.HeapSys = ms["HeapInuse"], ms["HeapSys"]
		}
	}
	if s.RSS == 0 && s.HeapSys > 0 {
		return s, nil // a remote server: the Go heap is all there is
	}
	if s.RSS == 0 && err == nil {
		err = fmt.Errorf("no memory reading (no pid, no process_resident_memory_bytes)")
	}
	return s, err
}

// MemSampler reads the server's memory at a fixed interval in the
// background; T is seconds since origin.
type MemSampler struct {
	src      *MemSource
	origin   time.Time
	every    time.Duration
	heapEach int // every n-th sample also reads the heap; 0: never

	mu      sync.Mutex
	samples []MemSample
	stop    chan struct{}
	done    chan struct{}
}

// StartMemSampler begins sampling now.
func StartMemSampler(src *MemSource, origin time.Time, every time.Duration, heapEach int) *MemSampler {
	m := &MemSampler{src: src, origin: origin, every: every, heapEach: heapEach,
		stop: make(chan struct{}), done: make(chan struct{})}
	go m.loop()
	return m
}

func (m *MemSampler) loop() {
	defer close(m.done)
	t := time.NewTicker(m.every)
	defer t.Stop()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), m.every+5*time.Second)
		s, err := m.src.Read(ctx, m.heapEach > 0 && i%m.heapEach == 0)
		cancel()
		if err == nil {
			s.T = time.Since(m.origin).Seconds()
			m.mu.Lock()
			m.samples = append(m.samples, s)
			m.mu.Unlock()
		}
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// Samples returns a copy of the samples so far.
func (m *MemSampler) Samples() []MemSample {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]MemSample(nil), m.samples...)
}

// Stop ends sampling and returns every sample.
func (m *MemSampler) Stop() []MemSample {
	close(m.stop)
	<-m.done
	return m.Samples()
}

// Between returns the samples with from <= T <= to.
func Between(samples []MemSample, from, to float64) []MemSample {
	var out []MemSample
	for _, s := range samples {
		if s.T >= from && s.T <= to {
			out = append(out, s)
		}
	}
	return out
}

// Slope fits y = a + b·x by least squares and returns b (units of y per
// unit of x); fewer than two distinct x give 0.
func Slope(x, y []float64) float64 {
	n := float64(len(x))
	if len(x) < 2 || len(x) != len(y) {
		return 0
	}
	var sx, sy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
	}
	mx, my := sx/n, sy/n
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// MemTrend summarises memory over a run.
type MemTrend struct {
	Samples    int     `json:"samples"`
	StartRSS   uint64  `json:"start_rss_bytes"`
	EndRSS     uint64  `json:"end_rss_bytes"`
	PeakRSS    uint64  `json:"peak_rss_bytes"`
	MeanRSS    uint64  `json:"mean_rss_bytes"`
	FitFromS   float64 `json:"fit_from_s"`
	FitToS     float64 `json:"fit_to_s"`
	RSSSlope   float64 `json:"rss_slope_bytes_per_min"`
	HeapSlope  float64 `json:"heap_inuse_slope_bytes_per_min"`
	FitGrowth  float64 `json:"rss_growth_over_fit_bytes"` // slope × fitted span
	Allowance  float64 `json:"allowance_bytes"`
	Flat       bool    `json:"flat"`
	FlatReason string  `json:"verdict"`
}

// FlatAllowance is how much RSS may grow over the fitted span and still count
// as flat: Pebble's memtables (64 MiB each) and caches make RSS saw-tooth,
// so the bar is the larger of 10% of the mean and 32 MiB.
func FlatAllowance(meanRSS uint64) float64 {
	return math.Max(0.10*float64(meanRSS), 32<<20)
}

// AnalyzeMemory fits a line to the samples after the first skip fraction
// (warm-up: memtables and caches filling) and calls memory flat when the
// fitted growth over that span stays within FlatAllowance.
func AnalyzeMemory(samples []MemSample, skip float64) MemTrend {
	// Without RSS (a remote server without a memory gauge) the Go heap's
	// size as obtained from the OS stands in for it.
	noRSS := len(samples) > 0
	for _, s := range samples {
		noRSS = noRSS && s.RSS == 0
	}
	if noRSS {
		alt := make([]MemSample, len(samples))
		for i, s := range samples {
			alt[i] = s
			alt[i].RSS = s.HeapSys
		}
		samples = alt
	}
	var t MemTrend
	t.Samples = len(samples)
	if len(samples) == 0 {
		t.FlatReason = "no samples"
		return t
	}
	t.StartRSS, t.EndRSS = samples[0].RSS, samples[len(samples)-1].RSS
	for _, s := range samples {
		t.PeakRSS = max(t.PeakRSS, s.RSS)
	}
	span := samples[len(samples)-1].T - samples[0].T
	from := samples[0].T + skip*span
	var x, y, hx, hy []float64
	var sum float64
	for _, s := range samples {
		if s.T < from {
			continue
		}
		x = append(x, s.T/60)
		y = append(y, float64(s.RSS))
		sum += float64(s.RSS)
		if s.HeapInuse > 0 {
			hx = append(hx, s.T/60)
			hy = append(hy, float64(s.HeapInuse))
		}
	}
	if len(x) < 3 {
		t.FlatReason = "too few samples to fit"
		return t
	}
	t.MeanRSS = uint64(sum / float64(len(y)))
	t.FitFromS, t.FitToS = x[0]*60, x[len(x)-1]*60
	t.RSSSlope = Slope(x, y)
	t.HeapSlope = Slope(hx, hy)
	t.FitGrowth = t.RSSSlope * (x[len(x)-1] - x[0])
	t.Allowance = FlatAllowance(t.MeanRSS)
	t.Flat = t.FitGrowth <= t.Allowance
	if t.Flat {
		t.FlatReason = fmt.Sprintf("flat: fitted growth %s over %.0f s, within %s",
			FormatBytes(t.FitGrowth), t.FitToS-t.FitFromS, FormatBytes(t.Allowance))
	} else {
		t.FlatReason = fmt.Sprintf("GROWING: fitted growth %s over %.0f s, above %s",
			FormatBytes(t.FitGrowth), t.FitToS-t.FitFromS, FormatBytes(t.Allowance))
	}
	return t
}

// FormatBytes prints 123456789 as "117.7 MiB".
func FormatBytes(v float64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	units := []string{"B", "KiB", "MiB", "GiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
	if i == 0 {
		s = strconv.FormatFloat(v, 'f', 0, 64) + " B"
	}
	if neg {
		s = "-" + s
	}
	return s
}
