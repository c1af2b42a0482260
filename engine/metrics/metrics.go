// Package metrics is a small Prometheus text-format registry: counters,
// gauges and histograms with fixed label sets, cheap enough for hot paths
// (one atomic add per observation) and free of global state.
package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// Registry holds metric families and renders them.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
}

type family struct {
	name, help, typ string
	series          map[string]series // by label text
}

type series interface {
	write(w io.Writer, name, labels string)
}

// New returns an empty registry.
func New() *Registry { return &Registry{families: make(map[string]*family)} }

func (r *Registry) register(name, help, typ, labels string, newSeries func() series) series {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.families[name]
	if f == nil {
		f = &family{name: name, help: help, typ: typ, series: map[string]series{}}
		r.families[name] = f
	}
	if f.typ != typ {
		panic(fmt.Sprintf("metrics: %s registered as %s and %s", name, f.typ, typ))
	}
	s := f.series[labels]
	if s == nil {
		s = newSeries()
		f.series[labels] = s
	}
	return s
}

// Counter is a monotonically increasing value.
type Counter struct{ v atomic.Uint64 }

// Add increases the counter by n.
func (c *Counter) Add(n uint64) { c.v.Add(n) }

// Inc increases the counter by one.
func (c *Counter) Inc() { c.v.Add(1) }

// Value reads the counter.
func (c *Counter) Value() uint64 { return c.v.Load() }

func (c *Counter) write(w io.Writer, name, labels string) {
	fmt.Fprintf(w, "%s%s %d\n", name, braces(labels), c.v.Load())
}

// Counter returns the counter of name with labels (e.g. `route="/events",code="201"`), creating it once.
func (r *Registry) Counter(name, help, labels string) *Counter {
	return r.register(name, help, "counter", labels, func() series { return &Counter{} }).(*Counter)
}

// Gauge is a value that goes up and down.
type Gauge struct{ v atomic.Int64 }

// Set replaces the value.
func (g *Gauge) Set(v int64) { g.v.Store(v) }

// Add changes the value by d.
func (g *Gauge) Add(d int64) { g.v.Add(d) }

// Value reads the gauge.
func (g *Gauge) Value() int64 { return g.v.Load() }

func (g *Gauge) write(w io.Writer, name, labels string) {
	fmt.Fprintf(w, "%s%s %d\n", name, braces(labels), g.v.Load())
}

// Gauge returns the gauge of name with labels, creating it once.
func (r *Registry) Gauge(name, help, labels string) *Gauge {
	return r.register(name, help, "gauge", labels, func() series { return &Gauge{} }).(*Gauge)
}

type gaugeFunc func() float64

func (f gaugeFunc) write(w io.Writer, name, labels string) {
	fmt.Fprintf(w, "%s%s %s\n", name, braces(labels), formatFloat(f()))
}

// GaugeFunc registers a gauge read from fn at scrape time.
func (r *Registry) GaugeFunc(name, help, labels string, fn func() float64) {
	r.register(name, help, "gauge", labels, func() series { return gaugeFunc(fn) })
}

// Histogram counts observations in fixed cumulative buckets.
type Histogram struct {
	bounds []float64
	counts []atomic.Uint64 // len(bounds)+1, the last is +Inf
	sum    atomic.Uint64   // float64 bits
	count  atomic.Uint64
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.counts[i].Add(1)
	h.count.Add(1)
	for {
		old := h.sum.Load()
		if h.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (h *Histogram) write(w io.Writer, name, labels string) {
	sep := ""
	if labels != "" {
		sep = ","
	}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i].Load()
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%s\"} %d\n", name, labels, sep, formatFloat(b), cum)
	}
	cum += h.counts[len(h.bounds)].Load()
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	fmt.Fprintf(w, "%s_sum%s %s\n", name, braces(labels), formatFloat(math.Float64frombits(h.sum.Load())))
	fmt.Fprintf(w, "%s_count%s %d\n", name, braces(labels), h.count.Load())
}

// Histogram returns the histogram of name with labels and upper bounds (ascending), creating it once.
func (r *Registry) Histogram(name, help, labels string, bounds []float64) *Histogram {
	return r.register(name, help, "histogram", labels, func() series {
		return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
	}).(*Histogram)
}

// LatencyBuckets are seconds from 100 µs to 10 s.
var LatencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// WriteTo renders every family in the Prometheus text exposition format, sorted by name.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	sort.Strings(names)
	type entry struct {
		f      *family
		labels []string
	}
	entries := make([]entry, 0, len(names))
	for _, n := range names {
		f := r.families[n]
		ls := make([]string, 0, len(f.series))
		for l := range f.series {
			ls = append(ls, l)
		}
		sort.Strings(ls)
		entries = append(entries, entry{f, ls})
	}
	r.mu.Unlock()
	cw := &countWriter{w: w}
	for _, e := range entries {
		fmt.Fprintf(cw, "# HELP %s %s\n# TYPE %s %s\n", e.f.name, e.f.help, e.f.name, e.f.typ)
		for _, l := range e.labels {
			r.mu.Lock()
			s := e.f.series[l]
			r.mu.Unlock()
			s.write(cw, e.f.name, l)
		}
	}
	return cw.n, cw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func braces(labels string) string {
	if labels == "" {
		return ""
	}
	return "{" + labels + "}"
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
