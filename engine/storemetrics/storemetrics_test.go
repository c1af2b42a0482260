package storemetrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eventd/eventd/storage"
)

// A real store after synced writes and a flush exports every family, with
// fsyncs observed in seconds and the flush counted.
func TestCollectorOnStore(t *testing.T) {
	stalls := NewStalls()
	db, err := storage.Open(t.TempDir(), storage.Options{Events: stalls.Listener()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < 20; i++ {
		if err := db.PutConfig("test", fmt.Sprint(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil { // a synced WAL write: one fsync
			t.Fatal(err)
		}
	}
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(db.Metrics, stalls))
	mfs, err := reg.Gather() // pedantic: checks every series against Describe
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 18 {
		t.Errorf("%d families, want 18", len(mfs))
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "eventd_pebble_compactions_total" {
			kinds := map[string]bool{}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					kinds[l.GetName()+"="+l.GetValue()] = true
				}
			}
			if !kinds["kind=move"] || !kinds["kind=default"] || len(kinds) != 9 {
				t.Errorf("compactions_total's series: %v, want the nine kinds", kinds)
			}
		}
		m := mf.GetMetric()[0]
		switch {
		case m.Histogram != nil:
			got[mf.GetName()] = float64(m.Histogram.GetSampleCount())
			if s := m.Histogram.GetSampleSum(); s <= 0 || s > float64(m.Histogram.GetSampleCount()) {
				t.Errorf("fsync sum %v s over %d fsyncs: not in seconds", s, m.Histogram.GetSampleCount())
			}
		case m.Counter != nil:
			got[mf.GetName()] = m.Counter.GetValue()
		case m.Gauge != nil:
			got[mf.GetName()] = m.Gauge.GetValue()
		}
	}
	for name, min := range map[string]float64{
		"eventd_pebble_wal_fsync_duration_seconds": 20, "eventd_pebble_flushes_total": 1,
		"eventd_pebble_disk_usage_bytes": 1, "eventd_pebble_wal_bytes_written_total": 1,
		// l0_files only exported: L0 is compacted as soon as it holds a
		// table (storage/db.go), so the flushed one may be gone already.
		"eventd_pebble_memtables": 1, "eventd_pebble_write_stalls_total": 0, "eventd_pebble_l0_files": 0,
	} {
		if v, ok := got[name]; !ok || v < min {
			t.Errorf("%s = %v (exported %v), want >= %v", name, v, ok, min)
		}
	}
}

// TestCompactionKinds: the kinds add up to Pebble's count of compactions.
func TestCompactionKinds(t *testing.T) {
	var m pebble.Metrics
	c := &m.Compact
	c.DefaultCount, c.MoveCount, c.CopyCount, c.DeleteOnlyCount, c.ElisionOnlyCount = 1, 2, 4, 8, 16
	c.ReadCount, c.TombstoneDensityCount, c.RewriteCount, c.BlobFileRewriteCount = 32, 64, 128, 256
	c.Count = 511
	var sum int64
	seen := map[string]bool{}
	for _, k := range compactionKinds(&m) {
		if seen[k.kind] {
			t.Errorf("kind %s twice", k.kind)
		}
		seen[k.kind] = true
		sum += k.n
	}
	if sum != c.Count {
		t.Errorf("kinds add up to %d, want Count %d", sum, c.Count)
	}
}

// Stalls are counted by reason and timed, the one under way included.
func TestStalls(t *testing.T) {
	now := time.Unix(0, 0)
	s := NewStalls()
	s.now = func() time.Time { return now }
	l := s.Listener()
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "L0 file count limit exceeded"})
	now = now.Add(2 * time.Second)
	l.WriteStallEnd()
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "memtable count limit reached"})
	now = now.Add(time.Second)
	count, seconds := s.read()
	if count["l0_file_count"] != 1 || seconds["l0_file_count"] != 2 || count["memtable_count"] != 1 || seconds["memtable_count"] != 1 {
		t.Fatalf("count %v seconds %v", count, seconds)
	}
	l.WriteStallEnd()
	l.WriteStallEnd() // unpaired: ignored
	l.WriteStallBegin(pebble.WriteStallBeginInfo{Reason: "something new"})
	l.WriteStallEnd()
	count, seconds = s.read()
	if count["other"] != 1 || seconds["memtable_count"] != 1 {
		t.Fatalf("count %v seconds %v", count, seconds)
	}
}

// The thinned fsync histogram keeps Pebble's exact bounds, in seconds.
func TestFsyncBuckets(t *testing.T) {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Buckets: pebble.FsyncLatencyBuckets})
	for _, d := range []time.Duration{50 * time.Microsecond, 250 * time.Microsecond, 3 * time.Millisecond, 40 * time.Millisecond, time.Minute} {
		h.Observe(float64(d))
	}
	var m pebble.Metrics
	m.LogWriter.FsyncLatency = h
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) { ch <- fsyncHistogram(&m) }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, b := range mfs[0].GetMetric()[0].GetHistogram().GetBucket() {
		lines = append(lines, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
	}
	got := strings.Join(lines, " ")
	for _, want := range []string{"0.0001:1", "0.0002:1", "0.0005:2", "0.003:3", "10:4"} {
		if !strings.Contains(" "+got+" ", " "+want+" ") {
			t.Errorf("bucket %s missing in %s", want, got)
		}
	}
	if c := mfs[0].GetMetric()[0].GetHistogram().GetSampleCount(); c != 5 {
		t.Errorf("count %d", c)
	}
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- fsyncDesc }
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }
