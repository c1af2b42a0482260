// Package storemetrics exports the store's health to Prometheus: a
// collector that reads pebble.DB.Metrics() once per scrape (never on a
// request's path) and an event listener that times write stalls by reason,
// which Pebble reports only as events.
package storemetrics

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Stall reasons, as label values. Pebble stalls writes when the memtables
// waiting to flush reach MemTableStopWritesThreshold, or when L0 holds
// L0StopWritesThreshold files; anything else it may add is "other".
var stallReasons = map[string]string{
	"memtable count limit reached": "memtable_count",
	"L0 file count limit exceeded": "l0_file_count",
}

var reasonLabels = []string{"memtable_count", "l0_file_count", "other"}

// Stalls counts Pebble's write stalls and the time spent in them, by reason.
type Stalls struct {
	now func() time.Time

	mu      sync.Mutex
	count   map[string]uint64
	seconds map[string]float64
	current string    // reason of the stall under way, "" when none
	since   time.Time // its start
}

// NewStalls returns an empty stall record.
func NewStalls() *Stalls {
	return &Stalls{now: time.Now, count: map[string]uint64{}, seconds: map[string]float64{}}
}

// Listener is the pebble.EventListener to pass to storage.Options.Events.
func (s *Stalls) Listener() *pebble.EventListener {
	return &pebble.EventListener{WriteStallBegin: s.begin, WriteStallEnd: s.end}
}

func (s *Stalls) begin(info pebble.WriteStallBeginInfo) {
	reason, ok := stallReasons[info.Reason]
	if !ok {
		reason = "other"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != "" { // Pebble pairs begin and end; be safe if it does not
		s.seconds[s.current] += s.now().Sub(s.since).Seconds()
	}
	s.count[reason]++
	s.current, s.since = reason, s.now()
}

func (s *Stalls) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == "" {
		return
	}
	s.seconds[s.current] += s.now().Sub(s.since).Seconds()
	s.current = ""
}

// read returns the counts and seconds by reason, the stall under way
// included up to now, so the seconds grow while a stall lasts and a
// scrape in the middle of a long one already shows it.
func (s *Stalls) read() (count map[string]uint64, seconds map[string]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	count, seconds = make(map[string]uint64, len(reasonLabels)), make(map[string]float64, len(reasonLabels))
	for _, r := range reasonLabels {
		count[r], seconds[r] = s.count[r], s.seconds[r]
	}
	if s.current != "" {
		seconds[s.current] += s.now().Sub(s.since).Seconds()
	}
	return count, seconds
}

// Collector is a prometheus.Collector over one store.
type Collector struct {
	metrics func() *pebble.Metrics
	stalls  *Stalls
}

// NewCollector collects from metrics (storage.DB.Metrics) and stalls (may be nil).
func NewCollector(metrics func() *pebble.Metrics, stalls *Stalls) *Collector {
	if stalls == nil {
		stalls = NewStalls()
	}
	return &Collector{metrics: metrics, stalls: stalls}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("eventd_pebble_"+name, help, labels, nil)
}

var (
	fsyncDesc = desc("wal_fsync_duration_seconds", "Latency of the WAL's fsyncs (Pebble's histogram, thinned to fewer buckets).")
	walBytes  = desc("wal_bytes_written_total", "Bytes written to the WAL, with its record framing.")

	flushes       = desc("flushes_total", "Memtable flushes to L0.")
	flushBytes    = desc("flush_bytes_total", "Bytes written by flushes.")
	flushSeconds  = desc("flush_duration_seconds_total", "Time spent flushing.")
	compactions   = desc("compactions_total", "Compactions completed, by kind: move (a table moved down, nothing rewritten), default (tables merged and rewritten), and Pebble's others.", "kind")
	compactBytes  = desc("compaction_bytes_written_total", "Bytes written by compactions.")
	compactRead   = desc("compaction_bytes_read_total", "Bytes read by compactions.")
	compactSecs   = desc("compaction_duration_seconds_total", "Time spent compacting.")
	compactNow    = desc("compactions_in_progress", "Compactions running now.")
	compactDebt   = desc("compaction_debt_bytes", "Estimated bytes still to compact for the LSM to be in shape.")
	l0Sublevels   = desc("l0_sublevels", "Sublevels of L0: reads and stalls grow with them.")
	l0Files       = desc("l0_files", "Files in L0 (writes stall at 24).")
	memtableBytes = desc("memtable_bytes", "Bytes allocated by the memtables, the mutable one and those waiting to flush.")
	memtables     = desc("memtables", "Memtables, the mutable one and those waiting to flush (writes stall at 4).")
	diskUsage     = desc("disk_usage_bytes", "Disk space used by the store: tables, WAL, manifest and options, live and obsolete.")
	stallCount    = desc("write_stalls_total", "Write stalls by reason.", "reason")
	stallSeconds  = desc("write_stall_duration_seconds_total", "Time writes were stalled, by reason.", "reason")
)

// Describe sends every family's descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fsyncDesc, walBytes, flushes, flushBytes, flushSeconds, compactions,
		compactBytes, compactRead, compactSecs, compactNow, compactDebt, l0Sublevels, l0Files,
		memtableBytes, memtables, diskUsage, stallCount, stallSeconds} {
		ch <- d
	}
}

// Collect reads Pebble's metrics once and sends every series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.metrics()
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	if h := fsyncHistogram(m); h != nil {
		ch <- h
	}
	total := m.Total()
	counter(walBytes, float64(m.WAL.BytesWritten))
	counter(flushes, float64(m.Flush.Count))
	counter(flushBytes, float64(total.TableBytesFlushed+total.BlobBytesFlushed))
	counter(flushSeconds, m.Flush.WriteThroughput.WorkDuration.Seconds())
	for _, k := range compactionKinds(m) {
		ch <- prometheus.MustNewConstMetric(compactions, prometheus.CounterValue, float64(k.n), k.kind)
	}
	counter(compactBytes, float64(total.TableBytesCompacted+total.BlobBytesCompacted))
	counter(compactRead, float64(total.TableBytesRead))
	counter(compactSecs, m.Compact.Duration.Seconds())
	gauge(compactNow, float64(m.Compact.NumInProgress))
	gauge(compactDebt, float64(m.Compact.EstimatedDebt))
	gauge(l0Sublevels, float64(m.Levels[0].Sublevels))
	gauge(l0Files, float64(m.Levels[0].TablesCount))
	gauge(memtableBytes, float64(m.MemTable.Size))
	gauge(memtables, float64(m.MemTable.Count))
	gauge(diskUsage, float64(m.DiskSpaceUsage()))
	count, seconds := c.stalls.read()
	for _, r := range reasonLabels {
		ch <- prometheus.MustNewConstMetric(stallCount, prometheus.CounterValue, float64(count[r]), r)
		ch <- prometheus.MustNewConstMetric(stallSeconds, prometheus.CounterValue, seconds[r], r)
	}
}

// fsyncBounds are the bucket bounds (seconds) kept from Pebble's 100 fsync
// buckets: fine where a healthy disk's fsyncs fall (0.1 to 5 ms) and coarse
// out to 10 s, 14 series instead of 100 on every scrape. Each is mapped to
// the largest of Pebble's bounds not above it, so the counts stay exact
// (up to the rounding of the bound's label, below).
var fsyncBounds = []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2, 10}

// fsyncHistogram re-exports Pebble's WAL fsync histogram (nanoseconds, no
// name) in seconds under eventd's name; nil when the store has no WAL
// writer (read-only).
func fsyncHistogram(m *pebble.Metrics) prometheus.Metric {
	h := m.LogWriter.FsyncLatency
	if h == nil {
		return nil
	}
	var pb dto.Metric
	if err := h.Write(&pb); err != nil || pb.Histogram == nil {
		return nil
	}
	buckets := map[float64]uint64{}
	src := pb.Histogram.GetBucket()
	j := 0
	for _, want := range fsyncBounds {
		// The last of Pebble's bounds at or under want (with rounding slack).
		for j+1 < len(src) && src[j+1].GetUpperBound()/1e9 <= want*(1+1e-9) {
			j++
		}
		if j < len(src) && src[j].GetUpperBound()/1e9 <= want*(1+1e-9) {
			// 4 significant digits: Pebble's exponential bounds print as
			// 0.009299119756734196; the rounding moves a bound by < 0.05%.
			b, _ := strconv.ParseFloat(strconv.FormatFloat(src[j].GetUpperBound()/1e9, 'g', 4, 64), 64)
			if !math.IsInf(b, 0) {
				buckets[b] = src[j].GetCumulativeCount()
			}
		}
	}
	mh, err := prometheus.NewConstHistogram(fsyncDesc, pb.Histogram.GetSampleCount(), pb.Histogram.GetSampleSum()/1e9, buckets)
	if err != nil {
		return nil
	}
	return mh
}

// compactionKind is one value of compactions_total's kind label.
type compactionKind struct {
	kind string
	n    int64
}

// compactionKinds splits Pebble's compaction count by kind; the kinds add
// up to Compact.Count. Moves against merges say whether flushed tables go
// down the LSM whole (docs/decisions.md, "Flushed tables moved down whole").
func compactionKinds(m *pebble.Metrics) []compactionKind {
	c := &m.Compact
	return []compactionKind{
		{"default", c.DefaultCount}, {"move", c.MoveCount}, {"copy", c.CopyCount},
		{"delete_only", c.DeleteOnlyCount}, {"elision_only", c.ElisionOnlyCount}, {"read", c.ReadCount},
		{"tombstone_density", c.TombstoneDensityCount}, {"rewrite", c.RewriteCount},
		{"blob_file_rewrite", c.BlobFileRewriteCount},
	}
}
