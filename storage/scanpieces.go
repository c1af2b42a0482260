package storage

import (
	"errors"
	"sort"
	"sync"
)

// A where= query reads every event of its range (no rollup or counter
// knows which match), about 0.4 µs each: 74 ms of CPU for a 12-hour chart
// at the density of 10 million events a month, all on one goroutine while
// the other cores idle. Over a long range, aggregates and lists are cut
// into pieces of about as many events (the counters say where), read on a
// goroutine each from one view of the store (openPieces), so the pieces
// add up to what one reader would see. An aggregate is cut at its bucket
// bounds only, so each bucket is still summed by one reader in time order
// and its sums are the same to the last bit; a list's pieces keep their
// first matches newest first and are joined in time order.

// minPieceEvents is the fewest events a piece is cut to: below it a
// goroutine and its iterators cost more than reading them on the caller's.
const minPieceEvents = 16 << 10

// maxPieceKeep bounds the matches each piece of a list keeps (its offset
// plus its limit): a page further on is read on one goroutine, which
// keeps only the page.
const maxPieceKeep = 1000

// runPieces reads every piece, the first on the caller's goroutine, the
// others on one each, and returns the first piece's error, else the next.
func runPieces(its []indexIter, read func(i int, it indexIter) error) error {
	errs := make([]error, len(its))
	var wg sync.WaitGroup
	for i := 1; i < len(its); i++ {
		wg.Go(func() { errs[i] = read(i, its[i]) })
	}
	errs[0] = read(0, its[0])
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// openScan opens a where= scan of [from, to] without a visitor filter:
// the counters say how many events it reads (past maxScan, when set, it
// fails with ErrScanLimit at once) and so into how many pieces, up to
// most, cut says where to cut it.
func (d *DB) openScan(ds uint32, name string, from, to int64, maxScan, most int, cut func(n int64, pieces int) ([]int64, error)) ([]indexIter, error) {
	n, err := d.Count(ds, name, from, to)
	if err != nil {
		return nil, err
	}
	if maxScan > 0 && n > int64(maxScan) {
		return nil, ErrScanLimit
	}
	cuts, err := cut(n, min(most, int(n/int64(d.pieceEvents))))
	if err != nil {
		return nil, err
	}
	return d.openPieces(ds, name, from, to, cuts)
}

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
	its, err := d.openScan(q.Dataset, q.Name, from, to, q.MaxScan, d.scanPieces, func(n int64, pieces int) ([]int64, error) {
		starts, err := cutBuckets(len(out), pieces, n, func(k int) (int64, error) {
			return d.Count(q.Dataset, q.Name, from, q.Bounds[k]-1)
		})
		cuts := make([]int64, len(starts))
		for i, k := range starts {
			cuts[i] = q.Bounds[k]
		}
		return cuts, err
	})
	if err != nil {
		return err
	}
	// Each piece may read up to MaxScan: the counters bounded the whole
	// range above, and only events committed since could pass it.
	return runPieces(its, func(_ int, it indexIter) error {
		return d.scanIter(it, q.Dataset, "", q.MaxScan, q.Match, add)
	})
}

// listMatching is List with a property filter: no counter knows how many
// events match, so every record in the range is read and matched, newest
// first, to give the page and the exact total; at most q.MaxScan records
// (in each piece).
func (d *DB) listMatching(q ListQuery) ([]Event, int64, error) {
	if q.HasVisitor {
		it, err := d.openIndex(q.Dataset, q.Name, q.VisitorID, true, q.From, q.To)
		if err != nil {
			return nil, 0, err
		}
		return d.listPiece(it, &q, q.Offset, q.Limit)
	}
	most := d.scanPieces
	if q.Offset+q.Limit > maxPieceKeep {
		most = 1
	}
	its, err := d.openScan(q.Dataset, q.Name, q.From, q.To, q.MaxScan, most, func(n int64, pieces int) ([]int64, error) {
		return d.cutTimes(q.Dataset, q.Name, q.From, q.To, n, pieces)
	})
	if err != nil {
		return nil, 0, err
	}
	if len(its) == 1 {
		return d.listPiece(its[0], &q, q.Offset, q.Limit)
	}
	// Each piece keeps its first Offset+Limit matches, newest first: the
	// page is among them, wherever the pieces' matches put it.
	type piece struct {
		events  []Event
		matched int64
	}
	got := make([]piece, len(its))
	err = runPieces(its, func(i int, it indexIter) (err error) {
		got[i].events, got[i].matched, err = d.listPiece(it, &q, 0, q.Offset+q.Limit)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	events := make([]Event, 0, q.Limit)
	var total int64
	for i := len(got) - 1; i >= 0; i-- { // the newest piece first
		for j, e := range got[i].events {
			if total+int64(j) >= int64(q.Offset) && len(events) < q.Limit {
				events = append(events, e)
			}
		}
		total += got[i].matched
	}
	return events, total, nil
}

// listPiece walks it newest first and closes it: the matches from the
// skip-th on, at most limit of them, and how many match in all; past
// q.MaxScan entries read it fails with ErrScanLimit.
func (d *DB) listPiece(it indexIter, q *ListQuery, skip, limit int) ([]Event, int64, error) {
	defer it.Close()
	er := entryReader{d: d, ds: q.Dataset}
	defer er.close()
	nameFilter := q.HasVisitor && q.Name != ""
	events := make([]Event, 0, limit)
	var matched int64
	scanned := 0
	for it.Last(); it.Valid(); it.Prev() {
		if nameFilter && !sameName(it.Value(), q.Name) {
			continue
		}
		if scanned++; scanned > q.MaxScan {
			return nil, 0, ErrScanLimit
		}
		ts, id, ok := tsIDSuffix(it.Key())
		if !ok {
			return nil, 0, errCorrupt
		}
		e, ok, err := er.matching(it, ts, id, q.Match)
		if errors.Is(err, ErrNotFound) {
			continue // erased between the index entry and its record
		}
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			continue
		}
		matched++
		if matched > int64(skip) && len(events) < limit {
			events = append(events, e)
		}
	}
	return events, matched, it.Error()
}

// cutTimes cuts a scan of [from, to] that has no buckets of its own (a
// list) at minute bounds, where the counters are exact, into up to pieces
// of about n/pieces events; a range open at the end is cut up to now.
func (d *DB) cutTimes(ds uint32, name string, from, to, n int64, pieces int) ([]int64, error) {
	if pieces < 2 {
		return nil, nil
	}
	first := floorTo(max(from, 0), minuteMs) + minuteMs // the first bound inside the range
	last := min(to, d.now().UnixMilli())
	if last < first {
		return nil, nil
	}
	bound := func(k int) int64 { return first + int64(k-1)*minuteMs } // k >= 1
	starts, err := cutBuckets(int((last-first)/minuteMs)+2, pieces, n, func(k int) (int64, error) {
		return d.Count(ds, name, from, bound(k)-1)
	})
	cuts := make([]int64, len(starts))
	for i, k := range starts {
		cuts[i] = bound(k)
	}
	return cuts, err
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
