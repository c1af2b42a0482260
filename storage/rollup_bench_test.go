package storage

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// benchIngest measures AddEvent+Commit per event for batches of size events,
// the cost the rollups add to ingest (compare with the numbers in
// docs/analytics.md, taken before rollups existed).
func benchIngest(b *testing.B, size int, sync bool) {
	opts, dir := Options{}, "bench"
	if sync {
		dir = b.TempDir()
	} else {
		opts.FS = vfs.NewMem() // CPU cost only: no disk, no fsync
	}
	d, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	db := d
	events := make([]Event, size)
	for i := range events {
		events[i] = Event{
			Name:       []string{"page_view", "click", "purchase", "signup", "a"}[i%5],
			Properties: []byte(`{"amount":12.5,"currency":"EUR","sku":"sku_1","quantity":2,"page":"/checkout/confirm"}`),
			HasVisitor: i%5 != 0,
		}
	}
	ts := int64(20000 * dayMs)
	var n uint64
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		bt := db.NewBatch()
		for i := range events {
			n++
			ts += 37
			events[i].ID = IDAt(int64(n))
			events[i].VisitorID = fmt.Sprintf("visitor-%d", n%5000)
			events[i].Timestamp, events[i].CreatedAt = ts, ts
			bt.AddEvent(1, &events[i])
		}
		if err := bt.Commit(sync); err != nil {
			b.Fatal(err)
		}
		bt.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/event")
	// CPU time of the whole process (Pebble's flushes and compactions
	// included) is steadier than wall time on a busy machine.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*size), "cpu-ns/event")
}

func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func BenchmarkIngestRollups(b *testing.B) {
	for _, size := range []int{1, 100} {
		for _, sync := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/sync=%v", size, sync), func(b *testing.B) { benchIngest(b, size, sync) })
		}
	}
}

// benchProperties are the bench's default event's (bench.EventTemplate).
const benchProperties = `{"amount":12.5,"currency":"EUR","sku":"sku_1","quantity":2,"page":"/checkout/confirm","referrer":"https://www.example.com/products/sku_1","campaign":"spring_sale"}`

// BenchmarkDerive is what a batch of 100 events adds to its rollup cells
// (counts, visitor sketch entries, numeric sums), with one event name and
// with five names in turn.
func BenchmarkDerive(b *testing.B) {
	db := openTestDB(b, "")
	for _, names := range []int{1, len(modelNames)} {
		b.Run(fmt.Sprintf("names=%d", names), func(b *testing.B) {
			events := make([]Event, 100)
			for i := range events {
				events[i] = Event{Name: modelNames[i%names], VisitorID: fmt.Sprintf("v-%d", i%17), HasVisitor: true,
					Properties: []byte(benchProperties), Timestamp: int64(planDay) + int64(i), ID: testID(uint64(i + 1))}
			}
			for b.Loop() {
				bt := db.NewBatch()
				for i := range events {
					bt.derive(1, &events[i], false, 1, true)
				}
				bt.Close()
			}
		})
	}
}
