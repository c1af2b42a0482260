package bench

import (
	"math"
	"math/bits"
	"time"
)

// Bucket layout (log-linear, as in HdrHistogram): values are nanoseconds.
// Below 2*subCount every nanosecond has its own bucket; above, each power of
// two is split into subCount equal buckets, so a bucket is at most 1/subCount
// (0.78%) of its value wide. The top bucket ends at 2^36 ns (about 68.7 s),
// which covers the 60 s we care about with one fixed array of 3,840 counters.
const (
	histSubBits    = 7
	histSubCount   = 1 << histSubBits
	histMaxBits    = 36
	histNumBuckets = (histMaxBits - histSubBits + 1) * histSubCount
	histMaxValue   = int64(1)<<histMaxBits - 1
)

// HistogramMax is the largest latency a Histogram tells apart; longer ones
// are clamped to it (and counted in Clamped) instead of growing memory.
const HistogramMax = time.Duration(histMaxValue)

// Histogram records latencies with about 1% precision in fixed memory, so
// every worker can own one (no locks on the hot path) and merge at the end.
// The zero value is ready to use. It is not safe for concurrent use.
type Histogram struct {
	counts  [histNumBuckets]uint64
	count   uint64
	sum     uint64 // exact nanoseconds, for Mean
	min     int64
	max     int64
	clamped uint64
}

// NewHistogram exists for symmetry with pooled use; the zero value works too.
func NewHistogram() *Histogram { return &Histogram{} }

// histIndex maps a value to its bucket; kept branch-light because Record is
// on every request's path.
func histIndex(v int64) int {
	if v < 2*histSubCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 1 - histSubBits
	return shift*histSubCount + int(v>>uint(shift))
}

// histBounds gives the inclusive value range [lo, hi] a bucket stands for.
func histBounds(i int) (lo, hi int64) {
	if i < 2*histSubCount {
		return int64(i), int64(i)
	}
	shift := i/histSubCount - 1
	sub := int64(i - shift*histSubCount)
	lo = sub << uint(shift)
	return lo, lo + int64(1)<<uint(shift) - 1
}

// Record adds one latency. It never allocates, so it can run per request.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	if v > histMaxValue {
		v = histMaxValue
		h.clamped++
	}
	h.counts[histIndex(v)]++
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.count++
	h.sum += uint64(v)
}

// Merge adds another histogram's samples, so per-worker and per-round
// histograms combine into exact totals (percentiles cannot be averaged).
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.count == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.count += o.count
	h.sum += o.sum
	h.clamped += o.clamped
}

// Reset empties the histogram for reuse without reallocating.
func (h *Histogram) Reset() { *h = Histogram{} }

// Count is the number of recorded samples.
func (h *Histogram) Count() uint64 { return h.count }

// Clamped counts samples longer than HistogramMax, which were recorded as it.
func (h *Histogram) Clamped() uint64 { return h.clamped }

// Min is exact, not bucketed, so a report never shows a value below it.
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }

// Max is exact, not bucketed, so the worst request is reported as it was.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is exact (from the running sum), unlike the percentiles.
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / h.count)
}

// Percentile returns the value below or at which p percent (0-100) of the
// samples fall. It reports the top of the bucket (as HdrHistogram does), so
// it errs on the slow side by under 1%, and never above Max.
func (h *Histogram) Percentile(p float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	if p >= 100 || math.IsNaN(p) {
		return time.Duration(h.max)
	}
	if p < 0 {
		p = 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(h.count)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			_, hi := histBounds(i)
			hi = min(hi, h.max)
			hi = max(hi, h.min)
			return time.Duration(hi)
		}
	}
	return time.Duration(h.max)
}

// HistogramBucket is one non-empty bucket, for latency charts.
type HistogramBucket struct {
	Low   time.Duration `json:"low_ns"`
	High  time.Duration `json:"high_ns"`
	Count uint64        `json:"count"`
}

// Buckets lists the non-empty buckets in ascending order; a chart can draw
// them directly or re-bin them coarser.
func (h *Histogram) Buckets() []HistogramBucket {
	var out []HistogramBucket
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		lo, hi := histBounds(i)
		out = append(out, HistogramBucket{Low: time.Duration(lo), High: time.Duration(hi), Count: c})
	}
	return out
}

// LatencySummary is the histogram in the units people read (microseconds),
// as written to bench-results.json.
type LatencySummary struct {
	Count  uint64  `json:"count"`
	MeanUs float64 `json:"mean_us"`
	P50Us  float64 `json:"p50_us"`
	P90Us  float64 `json:"p90_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p99_9_us"`
	MaxUs  float64 `json:"max_us"`
}

// Summary condenses the histogram to the percentiles every report shows.
func (h *Histogram) Summary() LatencySummary {
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	return LatencySummary{
		Count:  h.count,
		MeanUs: us(h.Mean()),
		P50Us:  us(h.Percentile(50)),
		P90Us:  us(h.Percentile(90)),
		P99Us:  us(h.Percentile(99)),
		P999Us: us(h.Percentile(99.9)),
		MaxUs:  us(h.Max()),
	}
}
