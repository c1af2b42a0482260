package bench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestHistogramBucketsContiguous(t *testing.T) {
	prevHi := int64(-1)
	for i := 0; i < histNumBuckets; i++ {
		lo, hi := histBounds(i)
		if lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if hi < lo {
			t.Fatalf("bucket %d: hi %d < lo %d", i, hi, lo)
		}
		if w := hi - lo + 1; w > 1 && float64(w)/float64(lo) > 1.0/histSubCount+1e-12 {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d of its value", i, lo, hi, histSubCount)
		}
		prevHi = hi
	}
	if prevHi != histMaxValue {
		t.Fatalf("last bucket ends at %d, want %d", prevHi, histMaxValue)
	}
}

func TestHistogramIndex(t *testing.T) {
	cases := []int64{
		0, 1, 2, 255, 256, 257, 511, 512, 1000, 1023, 1024,
		int64(time.Microsecond), int64(37 * time.Microsecond), int64(time.Millisecond),
		int64(4999 * time.Microsecond), int64(time.Second), int64(60 * time.Second), histMaxValue,
	}
	for _, v := range cases {
		i := histIndex(v)
		if i < 0 || i >= histNumBuckets {
			t.Fatalf("value %d: index %d out of range", v, i)
		}
		lo, hi := histBounds(i)
		if v < lo || v > hi {
			t.Errorf("value %d: bucket %d is [%d,%d]", v, i, lo, hi)
		}
	}
}

func TestHistogramPercentiles(t *testing.T) {
	uniform := func(h *Histogram) {
		for i := 1; i <= 10000; i++ {
			h.Record(time.Duration(i) * time.Microsecond)
		}
	}
	tests := []struct {
		name string
		fill func(*Histogram)
		p    float64
		want time.Duration
	}{
		{"empty", func(*Histogram) {}, 50, 0},
		{"single p0", func(h *Histogram) { h.Record(42 * time.Microsecond) }, 0, 42 * time.Microsecond},
		{"single p50", func(h *Histogram) { h.Record(42 * time.Microsecond) }, 50, 42 * time.Microsecond},
		{"single p100", func(h *Histogram) { h.Record(42 * time.Microsecond) }, 100, 42 * time.Microsecond},
		{"uniform p50", uniform, 50, 5000 * time.Microsecond},
		{"uniform p90", uniform, 90, 9000 * time.Microsecond},
		{"uniform p99", uniform, 99, 9900 * time.Microsecond},
		{"uniform p99.9", uniform, 99.9, 9990 * time.Microsecond},
		{"uniform p100", uniform, 100, 10000 * time.Microsecond},
		{"small exact", func(h *Histogram) {
			for i := 1; i <= 100; i++ {
				h.Record(time.Duration(i))
			}
		}, 99, 99},
		{"bimodal p50", func(h *Histogram) {
			for i := 0; i < 90; i++ {
				h.Record(time.Millisecond)
			}
			for i := 0; i < 10; i++ {
				h.Record(time.Second)
			}
		}, 50, time.Millisecond},
		{"bimodal p95", func(h *Histogram) {
			for i := 0; i < 90; i++ {
				h.Record(time.Millisecond)
			}
			for i := 0; i < 10; i++ {
				h.Record(time.Second)
			}
		}, 95, time.Second},
		{"clamped", func(h *Histogram) { h.Record(2 * time.Minute) }, 50, HistogramMax},
		{"negative", func(h *Histogram) { h.Record(-time.Second) }, 50, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			tc.fill(&h)
			got := h.Percentile(tc.p)
			// The reported value is the top of the bucket: never below the
			// true value, at most 1/128 above it.
			lo := tc.want
			hi := tc.want + tc.want/histSubCount
			if got < lo || got > hi {
				t.Errorf("Percentile(%v) = %v, want in [%v, %v]", tc.p, got, lo, hi)
			}
		})
	}
}

func TestHistogramStats(t *testing.T) {
	var h Histogram
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	if h.Count() != 10000 {
		t.Errorf("Count = %d", h.Count())
	}
	if h.Min() != time.Microsecond || h.Max() != 10*time.Millisecond {
		t.Errorf("Min/Max = %v/%v", h.Min(), h.Max())
	}
	if want := 5000500 * time.Nanosecond; h.Mean() != want {
		t.Errorf("Mean = %v, want %v", h.Mean(), want)
	}
	var n uint64
	for _, b := range h.Buckets() {
		if b.Count == 0 || b.High < b.Low {
			t.Fatalf("bad bucket %+v", b)
		}
		n += b.Count
	}
	if n != h.Count() {
		t.Errorf("buckets hold %d samples, Count %d", n, h.Count())
	}
	s := h.Summary()
	if s.Count != 10000 || math.Abs(s.P50Us-5000) > 5000.0/histSubCount || s.MaxUs != 10000 {
		t.Errorf("Summary = %+v", s)
	}
	h.Reset()
	if h.Count() != 0 || h.Percentile(99) != 0 || len(h.Buckets()) != 0 {
		t.Errorf("Reset left samples")
	}
}

func TestHistogramMergeEqualsSingle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var all, a, b Histogram
	for i := 0; i < 50000; i++ {
		d := time.Duration(r.ExpFloat64() * float64(300*time.Microsecond))
		all.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	var m Histogram
	m.Merge(&a)
	m.Merge(&b)
	m.Merge(nil)
	m.Merge(&Histogram{})
	if m != all {
		t.Fatalf("merged histogram differs from the single one")
	}
	for _, p := range []float64{50, 90, 99, 99.9, 100} {
		if m.Percentile(p) != all.Percentile(p) {
			t.Errorf("p%v differs", p)
		}
	}
}

func TestHistogramRecordAllocs(t *testing.T) {
	var h Histogram
	d := 123 * time.Microsecond
	if n := testing.AllocsPerRun(1000, func() { h.Record(d) }); n != 0 {
		t.Fatalf("Record allocates %v times", n)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i&0xfffff) * time.Microsecond)
	}
}
