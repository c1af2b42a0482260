package storage

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestRollupQueriesAtScale loads EVENTD_SCALE events (e.g. 10000000) spread
// over 30 days into one dataset and times the storage calls the engine makes
// for timeseries and breakdowns. It is skipped unless EVENTD_SCALE is set;
// docs/analytics.md records a run. It measures storage only (no HTTP).
func TestRollupQueriesAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EVENTD_SCALE"))
	if n == 0 {
		t.Skip("set EVENTD_SCALE=<events> to run")
	}
	dir := os.Getenv("EVENTD_SCALE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const ds = 1
	names := []string{"page_view", "click", "signup", "activate", "add_to_cart", "checkout", "purchase", "logout"}
	start := int64(20400) * dayMs // 2025-11-09
	span := 30 * dayMs
	step := span / int64(n)
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Now()
	if os.Getenv("EVENTD_SCALE_DIR") == "" || !rHasEvents(db, ds) {
		b := db.NewBatch()
		for i := range n {
			e := Event{
				ID:         IDAt(start + int64(i)*step),
				Name:       names[min(r.IntN(12), len(names)-1)],
				VisitorID:  "v_" + strconv.Itoa(r.IntN(200_000)),
				HasVisitor: true,
				Timestamp:  start + int64(i)*step,
				Properties: fmt.Appendf(nil, `{"amount":%d.5,"currency":"EUR","sku":"sku_%d","quantity":2}`, r.IntN(200), r.IntN(1000)),
			}
			e.ID[15] = byte(i)
			e.CreatedAt = e.Timestamp
			b.AddEvent(ds, &e)
			if b.Len() == 1000 {
				if err := b.Commit(false); err != nil {
					t.Fatal(err)
				}
				b.Close()
				b = db.NewBatch()
			}
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		b.Close()
		t.Logf("loaded %d events in %v (%.0f events/s)", n, time.Since(t0).Round(time.Second), float64(n)/time.Since(t0).Seconds())
	}
	to := start + span - 1234 // "now": unaligned
	bounds := func(from, to, w int64) []int64 {
		out := []int64{from}
		for s := from - from%w + w; s <= to; s += w {
			out = append(out, s)
		}
		return append(out, to+1)
	}
	day30 := bounds(to-30*dayMs, to, dayMs)
	hour7 := bounds(to-7*dayMs, to, hourMs)
	hour30 := bounds(to-30*dayMs, to, hourMs)
	whole := []int64{to - 30*dayMs, to + 1}
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"timeseries count day 30d", func() error { _, err := db.Aggregate(AggQuery{Dataset: ds, Bounds: day30}); return err }},
		{"timeseries count hour 7d", func() error { _, err := db.Aggregate(AggQuery{Dataset: ds, Bounds: hour7}); return err }},
		{"timeseries count hour 30d", func() error { _, err := db.Aggregate(AggQuery{Dataset: ds, Bounds: hour30}); return err }},
		{"timeseries sum day 30d", func() error {
			_, err := db.Aggregate(AggQuery{Dataset: ds, Name: "purchase", Property: "amount", Bounds: day30})
			return err
		}},
		{"timeseries unique_visitors day 30d", func() error {
			_, err := db.Aggregate(AggQuery{Dataset: ds, Unique: true, Bounds: day30})
			return err
		}},
		{"timeseries unique_visitors hour 7d", func() error {
			_, err := db.Aggregate(AggQuery{Dataset: ds, Unique: true, Bounds: hour7})
			return err
		}},
		{"breakdown by event count 30d", func() error {
			ns, err := db.EventNames(ds)
			for _, name := range ns {
				if _, err := db.Aggregate(AggQuery{Dataset: ds, Name: name, Bounds: whole}); err != nil {
					return err
				}
			}
			return err
		}},
		{"breakdown by event unique_visitors 30d", func() error {
			ns, err := db.EventNames(ds)
			for _, name := range ns {
				if _, err := db.Aggregate(AggQuery{Dataset: ds, Name: name, Unique: true, Bounds: whole}); err != nil {
					return err
				}
			}
			return err
		}},
	} {
		var lat []time.Duration
		for range 200 {
			t1 := time.Now()
			if err := tc.run(); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(t1))
		}
		slices.Sort(lat)
		t.Logf("%-40s p50 %8v  p99 %8v  max %8v", tc.name, lat[len(lat)/2].Round(time.Microsecond),
			lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	}
}

func rHasEvents(db *DB, ds uint32) bool {
	n, err := db.Count(ds, "", 0, 1<<50)
	return err == nil && n > 0
}
