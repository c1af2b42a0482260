// Package metrics is eventd's Prometheus registry: a thin layer over a
// client_golang *prometheus.Registry that keeps the call sites' one-line
// registration (name, help, label text) and hands back series whose labels
// are resolved once, so a hot path pays one atomic add per observation and
// no label lookup. There is no global state: each Engine has its own
// Registry, passed to whoever registers.
package metrics

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Registry holds metric families and renders them.
type Registry struct {
	reg *prometheus.Registry

	mu       sync.Mutex
	families map[string]*family // by name
	series   map[string]any     // by name and label text: *Counter, *Gauge, *Histogram or nil (GaugeFunc)
}

// family is one registered vector: its type and label names must agree
// across every series registered under its name.
type family struct {
	typ    string
	labels []string
	vec    any // *prometheus.CounterVec, *prometheus.HistogramVec, or nil for a gauge (one collector per series)
}

// New returns an empty registry.
func New() *Registry {
	return &Registry{reg: prometheus.NewRegistry(), families: map[string]*family{}, series: map[string]any{}}
}

// MustRegister adds collectors that produce their own families (the
// runtime, build info, storage); it panics on a clash, a programming error.
func (r *Registry) MustRegister(cs ...prometheus.Collector) { r.reg.MustRegister(cs...) }

// Gatherer is the registry seen by tests and promhttp-style consumers.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// lookup returns the cached series of name and labels, or registers it with
// mk, which receives the family (created on first use) and the label values.
// A mismatch of type or label names panics: it is a programming error and
// would otherwise surface only as a failed scrape.
func (r *Registry) lookup(name, help, typ, labels string, newVec func(names []string) any, child func(vec any, values []string) any) any {
	key := name + "{" + labels + "}"
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.series[key]; ok {
		if f := r.families[name]; f.typ != typ {
			panic(fmt.Sprintf("metrics: %s registered as %s and %s", name, f.typ, typ))
		}
		return s
	}
	names, values, err := parseLabels(labels)
	if err != nil {
		panic(fmt.Sprintf("metrics: %s{%s}: %v", name, labels, err))
	}
	f := r.families[name]
	if f == nil {
		f = &family{typ: typ, labels: names}
		if newVec != nil {
			f.vec = newVec(names)
			r.reg.MustRegister(f.vec.(prometheus.Collector))
		}
		r.families[name] = f
	}
	if f.typ != typ || !slices.Equal(f.labels, names) {
		panic(fmt.Sprintf("metrics: %s registered as %s%v and %s%v", name, f.typ, f.labels, typ, names))
	}
	s := child(f.vec, values)
	r.series[key] = s
	return s
}

// Counter is a monotonically increasing value.
type Counter struct{ c prometheus.Counter }

// Add increases the counter by n.
func (c *Counter) Add(n uint64) { c.c.Add(float64(n)) }

// Inc increases the counter by one.
func (c *Counter) Inc() { c.c.Inc() }

// Value reads the counter (tests and benchmarks; it builds a protobuf).
func (c *Counter) Value() uint64 {
	var m dto.Metric
	_ = c.c.Write(&m)
	return uint64(m.GetCounter().GetValue())
}

// Counter returns the counter of name with labels in exposition syntax
// (e.g. `route="create_event",code="201"`), creating it once; later calls
// with the same name and labels return the same series.
func (r *Registry) Counter(name, help, labels string) *Counter {
	return r.lookup(name, help, "counter", labels,
		func(names []string) any {
			return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, names)
		},
		func(vec any, values []string) any {
			return &Counter{vec.(*prometheus.CounterVec).WithLabelValues(values...)}
		}).(*Counter)
}

// Gauge is a value that goes up and down. It is an atomic integer read at
// scrape time, not a client_golang Gauge, whose float Add is a
// compare-and-swap loop: the in-flight gauge moves twice per request.
type Gauge struct{ v atomic.Int64 }

// Set replaces the value.
func (g *Gauge) Set(v int64) { g.v.Store(v) }

// Add changes the value by d.
func (g *Gauge) Add(d int64) { g.v.Add(d) }

// Value reads the gauge.
func (g *Gauge) Value() int64 { return g.v.Load() }

// Gauge returns the gauge of name with labels, creating it once.
func (r *Registry) Gauge(name, help, labels string) *Gauge {
	return r.lookup(name, help, "gauge", labels, nil, func(_ any, values []string) any {
		g := &Gauge{}
		r.gaugeFunc(name, help, labels, values, func() float64 { return float64(g.v.Load()) })
		return g
	}).(*Gauge)
}

// GaugeFunc registers a gauge read from fn at scrape time.
func (r *Registry) GaugeFunc(name, help, labels string, fn func() float64) {
	r.lookup(name, help, "gauge", labels, nil, func(_ any, values []string) any {
		r.gaugeFunc(name, help, labels, values, fn)
		return nil
	})
}

// CounterFunc registers a counter without labels read from fn at scrape
// time: a count kept where it happens (storage), not by the registry.
func (r *Registry) CounterFunc(name, help string, fn func() float64) {
	r.lookup(name, help, "counter", "", nil, func(any, []string) any {
		r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
		return nil
	})
}

// gaugeFunc registers one series of a gauge family as its own collector,
// its labels constant, so series of one family may come from different
// owners (each listener its own). r.mu is held.
func (r *Registry) gaugeFunc(name, help, labels string, values []string, fn func() float64) {
	names, _, _ := parseLabels(labels)
	cl := prometheus.Labels{}
	for i, n := range names {
		cl[n] = values[i]
	}
	r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: cl}, fn))
}

// Histogram counts observations in fixed cumulative buckets.
type Histogram struct{ h prometheus.Observer }

// Observe records one value.
func (h *Histogram) Observe(v float64) { h.h.Observe(v) }

// Histogram returns the histogram of name with labels and upper bounds
// (ascending), creating it once; the bounds of the family's first
// registration hold for all its series.
func (r *Registry) Histogram(name, help, labels string, bounds []float64) *Histogram {
	return r.lookup(name, help, "histogram", labels,
		func(names []string) any {
			return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: bounds}, names)
		},
		func(vec any, values []string) any {
			return &Histogram{vec.(*prometheus.HistogramVec).WithLabelValues(values...)}
		}).(*Histogram)
}

// LatencyBuckets are seconds for eventd's request and commit latencies.
// Ingest takes about 0.3 to 30 ms (one group commit with its fsync, which
// --wal-min-sync-interval spaces 300 µs apart), so the buckets are dense
// from 250 µs to 50 ms, where percentiles and SLOs are read, and sparse
// beyond, where only "it is slow" matters: 13 buckets, not 16, since every
// bucket is a series per route.
var LatencyBuckets = []float64{0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.5, 2, 10}

// ContentType is the exposition format WriteTo writes.
var ContentType = string(expfmt.NewFormat(expfmt.TypeTextPlain))

// WriteTo renders every family in the Prometheus text exposition format,
// sorted by name, with HELP and label values escaped by the client library.
// A collector that fails leaves its family out and the error is returned
// after the rest is written.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	mfs, gatherErr := r.reg.Gather()
	cw := &countWriter{w: w}
	enc := expfmt.NewEncoder(cw, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return cw.n, err
		}
	}
	return cw.n, gatherErr
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// parseLabels splits label text in exposition syntax (`a="x",b="y\"z"`)
// into names and unquoted values; registration is rare, so the text form
// keeps call sites to one line.
func parseLabels(s string) (names, values []string, err error) {
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, nil, fmt.Errorf("label without name or value near %q", s)
		}
		names = append(names, s[:eq])
		q, err := strconv.QuotedPrefix(s[eq+1:])
		if err != nil {
			return nil, nil, fmt.Errorf("label %s: unquoted value", s[:eq])
		}
		v, _ := strconv.Unquote(q)
		values = append(values, v)
		s = s[eq+1+len(q):]
		if s != "" {
			if s[0] != ',' {
				return nil, nil, fmt.Errorf("label %s: want a comma after the value", names[len(names)-1])
			}
			s = s[1:]
		}
	}
	return names, values, nil
}
