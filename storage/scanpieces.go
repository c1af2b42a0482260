package storage

import (
	"sort"
	"sync"
)

// A where= aggregate reads every event of its range (no rollup knows which
// match), about 0.4 µs each: 74 ms of CPU for a 12-hour chart at the
// density of 10 million events a month, all on one goroutine while the
// other cores idle. Over a long range it is cut at bucket bounds into
// pieces of about as many events, read on a goroutine each from one view
// of the store (openPieces), so the pieces add up to what one reader would
// see, and each bucket is still summed by one reader in time order: the
// results are the same to the last bit.

// minPieceEvents is the fewest events a piece is cut to: below it a
// goroutine and its iterators cost more than reading them on the caller's.
const minPieceEvents = 16 << 10

// matchAggregate is Aggregate over raw events with a property filter: every
// event of the range (of the name or visitor index when given) is read and
// matched. Without a visitor the counters say up front whether the range is
// past MaxScan, so such a query fails at once rather than after reading,
// and how to cut it into pieces.
func (d *DB) matchAggregate(q AggQuery, out []Agg) error {
	from, to := max(q.Bounds[0], 0), q.Bounds[len(q.Bounds)-1]-1
	sums := make([]sumValue, len(out))
	defer func() {
		for i := range sums {
			out[i].Sum, out[i].N = sums[i].total(), sums[i].n
		}
	}()
	// add is called by every piece's reader at once; each touches only
	// the buckets of its own piece.
	add := func(value []byte, ev *Event) error {
		i := sort.Search(len(q.Bounds), func(i int) bool { return q.Bounds[i] > ev.Timestamp }) - 1
		if i < 0 || i >= len(out) {
			return nil
		}
		if _, bot := splitBot(value); bot && !q.Bots {
			out[i].Bots++
			return nil
		}
		out[i].Count++
		addEventTo(&q, ev, &out[i], &sums[i])
		return nil
	}
	if q.HasVisitor {
		return d.scanEvents(q.Dataset, q.Name, q.VisitorID, true, from, to, q.MaxScan, q.Match, add)
	}
	n, err := d.Count(q.Dataset, q.Name, from, to)
	if err != nil {
		return err
	}
	if q.MaxScan > 0 && n > int64(q.MaxScan) {
		return ErrScanLimit
	}
	pieces := min(d.scanPieces, int(n/int64(d.pieceEvents)))
	starts, err := cutBuckets(len(out), pieces, n, func(k int) (int64, error) {
		return d.Count(q.Dataset, q.Name, from, q.Bounds[k]-1)
	})
	if err != nil {
		return err
	}
	cuts := make([]int64, len(starts))
	for i, k := range starts {
		cuts[i] = q.Bounds[k]
	}
	its, err := d.openPieces(q.Dataset, q.Name, from, to, cuts)
	if err != nil {
		return err
	}
	// Each piece may read up to MaxScan: the counters bounded the whole
	// range above, and only events committed since could pass it.
	errs := make([]error, len(its))
	var wg sync.WaitGroup
	for i := 1; i < len(its); i++ {
		wg.Go(func() { errs[i] = d.scanIter(its[i], q.Dataset, "", q.MaxScan, q.Match, add) })
	}
	errs[0] = d.scanIter(its[0], q.Dataset, "", q.MaxScan, q.Match, add)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// cutBuckets picks where a scan of buckets [0, n) holding total events is
// cut into up to pieces of about as many events each: the buckets (in
// [1, n), increasing) that start the second piece on. before(k) is how
// many events buckets [0, k) hold, increasing with k. A bucket is never
// cut, so a piece can hold more than its share, and there are fewer
// pieces when the buckets are too few or too uneven.
func cutBuckets(n, pieces int, total int64, before func(k int) (int64, error)) ([]int, error) {
	var starts []int
	lo := 1
	for j := 1; j < pieces && lo < n; j++ {
		target := total * int64(j) / int64(pieces)
		var err error
		k := lo + sort.Search(n-lo, func(i int) bool {
			c, e := before(lo + i)
			if e != nil {
				err = e
				return true
			}
			return c >= target
		})
		if err != nil {
			return nil, err
		}
		if k >= n {
			break
		}
		starts = append(starts, k)
		lo = k + 1
	}
	return starts, nil
}
