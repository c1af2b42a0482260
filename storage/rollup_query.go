package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// ErrScanLimit is returned when a query would read more raw events than its
// MaxScan allows; the caller answers 422 and suggests a narrower query.
var ErrScanLimit = errors.New("storage: scan limit exceeded")

// Agg is an aggregate over some events.
type Agg struct {
	Count  int64   // events
	Sum    float64 // of the numeric property asked for
	N      int64   // events carrying that property as a number (avg = Sum/N)
	Sketch *Sketch // their visitors, when asked for
	// Bots is the number of bot events left out (bots.go); 0 when the
	// query counts bots (AggQuery.Bots).
	Bots int64
}

// AggQuery asks for one aggregate per time bucket of one dataset.
type AggQuery struct {
	Dataset  uint32
	Name     string // "" for every event name
	Property string // numeric property to sum; "" for none
	Unique   bool   // fill each Agg's Sketch
	// Bounds are increasing Unix ms; bucket i is [Bounds[i], Bounds[i+1]).
	Bounds []int64
	// VisitorID filters on one visitor: the visitor index is read instead of
	// the rollups, so the cost follows that visitor's events.
	VisitorID  string
	HasVisitor bool
	// MaxScan bounds the raw events a visitor filter may read (0: no bound).
	MaxScan int
	// Match, when set, counts only the events whose properties it accepts
	// (where= filters): no rollup knows them, so the raw events of the
	// range are read, at most MaxScan.
	Match func(props []byte) bool
	// Bots counts bot events too; without it they are left out and
	// counted in each Agg's Bots.
	Bots bool
}

// Aggregate computes one Agg per bucket. Without a visitor filter it reads
// rollups only: whole days, hours and minutes of each bucket from the C, S
// and U keys, and the partial minutes at the ends of the range (at most two
// per bucket edge that is not minute-aligned) from the index and records.
// Its cost follows the number of buckets, not of events.
func (d *DB) Aggregate(q AggQuery) ([]Agg, error) {
	if len(q.Bounds) < 2 {
		return nil, nil
	}
	out := make([]Agg, len(q.Bounds)-1)
	if q.Unique {
		for i := range out {
			out[i].Sketch = &Sketch{}
		}
	}
	if q.Match != nil {
		return out, d.matchAggregate(q, out)
	}
	if q.HasVisitor {
		return out, d.visitorAggregate(q, out)
	}
	r := rollupReader{d: d, q: &q, v: d.derived.view()}
	defer r.close()
	for i := range out {
		lo, hi := max(q.Bounds[i], 0), q.Bounds[i+1]
		plan := planCount(lo, hi)
		for _, bs := range plan.Buckets {
			if err := r.add(&out[i], bs); err != nil {
				return nil, err
			}
		}
		for _, e := range plan.Edges {
			if err := d.edgeAggregate(&q, e, &out[i]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// rollupReader keeps one iterator per key kind and level across a query, so
// each bucket span costs a seek rather than a new iterator.
type rollupReader struct {
	d   *DB
	q   *AggQuery
	v   *view // Pebble snapshot and the overlays of buckets not in it
	its map[string]*pebble.Iterator
	key []byte
}

func (r *rollupReader) iter(prefix []byte) (*pebble.Iterator, error) {
	if it := r.its[string(prefix)]; it != nil {
		return it, nil
	}
	lo := appendTS(append([]byte(nil), prefix...), max(r.q.Bounds[0], 0))
	hi := appendTS(append([]byte(nil), prefix...), r.q.Bounds[len(r.q.Bounds)-1])
	it, err := r.v.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	if r.its == nil {
		r.its = make(map[string]*pebble.Iterator)
	}
	r.its[string(prefix)] = it
	return it, nil
}

func (r *rollupReader) close() {
	for _, it := range r.its {
		_ = it.Close()
	}
	r.v.close()
}

// scan calls fn with the value of every key of prefix whose bucket start is in [start, end).
func (r *rollupReader) scan(prefix []byte, start, end int64, fn func(v []byte) error) error {
	it, err := r.iter(prefix)
	if err != nil {
		return err
	}
	// Spans of one level come in increasing order and are mostly adjacent:
	// when the iterator already sits at or past this span's start (where the
	// previous span left it), go on with Next instead of seeking again.
	ok := it.Valid() && keyStart(it.Key()) >= start
	if !ok {
		r.key = appendTS(append(r.key[:0], prefix...), start)
		ok = it.SeekGE(r.key)
	}
	for ; ok; ok = it.Next() {
		k := it.Key()
		if len(k) != len(prefix)+8 || keyStart(k) >= end {
			break
		}
		if err := fn(it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// add adds one bucket span of the query's series to a: the human series,
// and the bot series too when bots are counted, else only the bot series'
// count to a.Bots (counts add and sketches unite: nothing is subtracted).
func (r *rollupReader) add(a *Agg, bs bucketSpan) error {
	q := r.q
	if err := r.addSeries(a, bs, q.Name); err != nil {
		return err
	}
	bots := seriesName(q.Name, true)
	if q.Bots {
		return r.addSeries(a, bs, bots)
	}
	err := r.scan(counterPrefix(nil, q.Dataset, bots, bs.Level), bs.Start, bs.End, func(v []byte) error {
		a.Bots += decodeCount(v)
		return nil
	})
	a.Bots += r.v.count(q.Dataset, bots, bs.Level, bs.Start, bs.End)
	return err
}

// addSeries adds one series' counters and rollups over a bucket span to a.
func (r *rollupReader) addSeries(a *Agg, bs bucketSpan, series string) error {
	q := r.q
	err := r.scan(counterPrefix(nil, q.Dataset, series, bs.Level), bs.Start, bs.End, func(v []byte) error {
		a.Count += decodeCount(v)
		return nil
	})
	if err != nil {
		return err
	}
	withRoll := q.Property != "" || q.Unique
	s := sumValue{sum: a.Sum, n: a.N}
	r.v.eachBucket(q.Dataset, series, bs.Level, bs.Start, bs.End, func(b *bucket) {
		a.Count += b.count
		if !withRoll || !b.hasRoll {
			return
		}
		if q.Property != "" {
			if i, ok := slices.BinarySearchFunc(b.roll.props, q.Property, func(p propSum, n string) int { return strings.Compare(p.name, n) }); ok {
				s.merge(b.roll.props[i].v)
			}
		}
		if q.Unique && b.roll.hasSketch {
			a.Sketch.Merge(&b.roll.sketch)
		}
	})
	if !withRoll {
		return nil
	}
	err = r.scan(rollupPrefix(nil, q.Dataset, series, bs.Level), bs.Start, bs.End, func(v []byte) error {
		var visit func(name []byte, p sumValue)
		if q.Property != "" {
			visit = func(name []byte, p sumValue) {
				if string(name) == q.Property {
					s.merge(p)
				}
			}
		}
		rest, err := eachRollupProp(v, visit)
		if err != nil || !q.Unique || len(rest) == 0 {
			return err
		}
		return a.Sketch.MergeEncoded(rest)
	})
	a.Sum, a.N = s.total(), s.n
	return err
}

// edgeAggregate adds the events of a partial minute from the index (and the
// records when a sum or visitors are needed, except that the name index
// already holds visitor ids).
func (d *DB) edgeAggregate(q *AggQuery, e span, a *Agg) error {
	it, err := d.openIndex(q.Dataset, q.Name, "", false, e.Start, e.End-1)
	if err != nil {
		return err
	}
	defer it.Close()
	er := entryReader{d: d, ds: q.Dataset}
	defer er.close()
	needRecord := q.Property != "" || (q.Unique && q.Name == "")
	s := sumValue{sum: a.Sum, n: a.N}
	for it.First(); it.Valid(); it.Next() {
		visitor, bot := splitBot(it.Value())
		if bot && !q.Bots {
			a.Bots++
			continue
		}
		a.Count++
		if !needRecord {
			if q.Unique && len(visitor) > 0 {
				a.Sketch.Add(HashVisitor(string(visitor)))
			}
			continue
		}
		ts, id, ok := tsIDSuffix(it.Key())
		if !ok {
			return errCorrupt
		}
		ev, err := er.read(it, ts, id)
		if err != nil {
			return err
		}
		addEventTo(q, &ev, a, &s)
	}
	a.Sum, a.N = s.total(), s.n
	return it.Error()
}

// addEventTo applies the rollup rules to one raw event, so that raw scans
// and rollups agree exactly.
func addEventTo(q *AggQuery, ev *Event, a *Agg, s *sumValue) {
	if q.Unique && ev.HasVisitor {
		a.Sketch.Add(HashVisitor(ev.VisitorID))
	}
	if q.Property != "" {
		if v, ok := numberProperty(ev.Properties, q.Property); ok {
			s.add(v)
			s.n++
		}
	}
}

// numberProperty finds a property among the first MaxRollupProperties
// numeric ones, the ones ingest rolls up.
func numberProperty(props []byte, name string) (v float64, ok bool) {
	n := 0
	eachNumber(props, func(key []byte, x float64) bool {
		if string(key) == name {
			v, ok = x, true
			return false
		}
		n++
		return n < MaxRollupProperties
	})
	return v, ok
}

func (d *DB) visitorAggregate(q AggQuery, out []Agg) error {
	from, to := max(q.Bounds[0], 0), q.Bounds[len(q.Bounds)-1]-1
	var sums []sumValue
	if q.Property != "" {
		sums = make([]sumValue, len(out))
	}
	rr, err := d.NewRecordReader(q.Dataset)
	if err != nil {
		return err
	}
	defer rr.Close()
	scanned := 0
	err = d.scanQuery(q.Dataset, "", q.VisitorID, true, from, to, func(ts int64, id ID, value []byte) error {
		name, bot := splitBot(value)
		if q.Name != "" && string(name) != q.Name {
			return nil
		}
		if scanned++; q.MaxScan > 0 && scanned > q.MaxScan {
			return ErrScanLimit
		}
		i := sort.Search(len(q.Bounds), func(i int) bool { return q.Bounds[i] > ts }) - 1
		if i < 0 || i >= len(out) {
			return nil
		}
		a := &out[i]
		if bot && !q.Bots {
			a.Bots++
			return nil
		}
		a.Count++
		if q.Unique {
			a.Sketch.Add(HashVisitor(q.VisitorID))
		}
		if q.Property != "" {
			ev, err := rr.Get(ts, id)
			if err != nil {
				return err
			}
			if v, ok := numberProperty(ev.Properties, q.Property); ok {
				sums[i].add(v)
				sums[i].n++
			}
		}
		return nil
	})
	for i := range sums {
		out[i].Sum, out[i].N = sums[i].total(), sums[i].n
	}
	return err
}

// scanIndex walks the index entries under prefix with timestamps in [from, to], oldest first.
func (d *DB) scanIndex(prefix []byte, from, to int64, fn func(ts int64, id ID, value []byte) error) error {
	lo, hi := rangeBounds(prefix, from, to)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	return eachEntry(it, fn)
}

// scanQuery is scanIndex over the index openIndex picks for a query.
func (d *DB) scanQuery(ds uint32, name, visitor string, hasVisitor bool, from, to int64, fn func(ts int64, id ID, value []byte) error) error {
	it, err := d.openIndex(ds, name, visitor, hasVisitor, from, to)
	if err != nil {
		return err
	}
	return eachEntry(it, fn)
}

// scanEvents calls fn with the event of each entry of the index openIndex
// picks, oldest first, read from the entry itself when the index walks the
// records. A name filter over a visitor's index is applied from the index
// value first, and match (nil: none) to the stored properties before the
// event is decoded; past maxScan entries (0: no bound) it fails with
// ErrScanLimit; an event erased between its entry and its record is
// skipped.
func (d *DB) scanEvents(ds uint32, name, visitor string, hasVisitor bool, from, to int64, maxScan int, match func(props []byte) bool, fn func(value []byte, ev *Event) error) error {
	it, err := d.openIndex(ds, name, visitor, hasVisitor, from, to)
	if err != nil {
		return err
	}
	if !hasVisitor {
		name = "" // the index holds that name's entries only
	}
	return d.scanIter(it, ds, name, maxScan, match, fn)
}

// scanIter is scanEvents over it, an index opened for dataset ds; a
// visitor's index holds every name, so name (when not empty) is checked
// against each entry's value.
func (d *DB) scanIter(it indexIter, ds uint32, name string, maxScan int, match func(props []byte) bool, fn func(value []byte, ev *Event) error) error {
	er := entryReader{d: d, ds: ds}
	defer er.close()
	scanned := 0
	return eachEntry(it, func(ts int64, id ID, value []byte) error {
		if name != "" && !sameName(value, name) {
			return nil
		}
		if scanned++; maxScan > 0 && scanned > maxScan {
			return ErrScanLimit
		}
		ev, ok, err := er.matching(it, ts, id, match)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil || !ok {
			return err
		}
		return fn(value, &ev)
	})
}

// eachEntry calls fn with each entry of it, oldest first, and closes it.
func eachEntry(it indexIter, fn func(ts int64, id ID, value []byte) error) error {
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		ts, id, ok := tsIDSuffix(it.Key())
		if !ok {
			return errCorrupt
		}
		if err := fn(ts, id, it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// EventNames lists the event names that ever had an event in ds (bots'
// included), sorted, by hopping from one name's counters to the next (one
// seek per name).
func (d *DB) EventNames(ds uint32) ([]string, error) {
	v := d.derived.view()
	defer v.close()
	base := appendDataset(nil, prefixCounter, ds)
	it, err := v.snap.NewIter(&pebble.IterOptions{LowerBound: base, UpperBound: prefixEnd(base)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	names := map[string]bool{}
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) < datasetPrefLen+1 {
			return nil, errCorrupt
		}
		n := int(k[datasetPrefLen])
		if len(k) < datasetPrefLen+1+n {
			return nil, errCorrupt
		}
		// A bot series names its event after the mark; botAll names none.
		if name, _ := splitBot(k[datasetPrefLen+1 : datasetPrefLen+1+n]); len(name) > 0 {
			names[string(name)] = true
		}
		next := prefixEnd(k[:datasetPrefLen+1+n])
		if next == nil {
			break
		}
		ok = it.SeekGE(next)
	}
	v.names(ds, names)
	return slices.Sorted(maps.Keys(names)), it.Error()
}

// GroupQuery groups the raw events of a range by the value of a property.
type GroupQuery struct {
	Dataset    uint32
	Name       string // "" for every event name
	VisitorID  string
	HasVisitor bool
	From, To   int64  // inclusive Unix ms
	GroupBy    string // top-level property whose value is the group key
	Property   string // numeric property to sum; "" for none
	Unique     bool
	// Persons counts unique visitors per person: ids linked to each other
	// (identify, alias) count once, as far as the links stored when the
	// query runs say (identity.go).
	Persons bool
	MaxScan int // raw events read past which ErrScanLimit is returned (0: no bound)
	// Match, when set, keeps only the events whose properties it accepts.
	Match func(props []byte) bool
	// Bots counts bot events too; without it they are left out and
	// counted in total.Bots.
	Bots bool
}

// GroupByProperty scans the raw events of the range (there is no rollup per
// property value) and aggregates them per value of q.GroupBy: strings by
// their text, numbers in shortest form, true/false/null as such, objects and
// arrays as compact JSON. Events without the property join no group; total
// covers every event of the range. Without a visitor filter the exact count
// of the range is read first from the counters, so a query over the limit
// fails before reading anything.
func (d *DB) GroupByProperty(q GroupQuery) (groups map[string]*Agg, total Agg, err error) {
	if !q.HasVisitor {
		if err := d.checkScan(q.Dataset, q.Name, q.From, q.To, q.MaxScan); err != nil {
			return nil, total, err
		}
	}
	aq := &AggQuery{Property: q.Property, Unique: q.Unique}
	groups = make(map[string]*Agg)
	sums := make(map[string]*sumValue)
	var totalSum sumValue
	if q.Unique {
		total.Sketch = &Sketch{}
	}
	var persons *Resolver
	if q.Unique && q.Persons {
		if persons, err = d.NewResolver(q.Dataset); err != nil {
			return nil, total, err
		}
		defer persons.Close()
	}
	err = d.scanEvents(q.Dataset, q.Name, q.VisitorID, q.HasVisitor, q.From, q.To, q.MaxScan, q.Match, func(value []byte, ev *Event) error {
		if _, bot := splitBot(value); bot && !q.Bots {
			total.Bots++
			return nil
		}
		if persons != nil && ev.HasVisitor {
			person, err := persons.Person(ev.VisitorID)
			if err != nil {
				return err
			}
			ev.VisitorID = person
		}
		total.Count++
		addEventTo(aq, ev, &total, &totalSum)
		raw, ok := lookupMember(ev.Properties, q.GroupBy)
		if !ok {
			return nil
		}
		key := groupKey(raw)
		g := groups[key]
		if g == nil {
			g = &Agg{}
			if q.Unique {
				g.Sketch = &Sketch{}
			}
			groups[key] = g
			sums[key] = &sumValue{}
		}
		g.Count++
		addEventTo(aq, ev, g, sums[key])
		return nil
	})
	if err != nil {
		return nil, total, err
	}
	for k, s := range sums {
		groups[k].Sum, groups[k].N = s.total(), s.n
	}
	total.Sum, total.N = totalSum.total(), totalSum.n
	return groups, total, nil
}

// lookupMember finds a top-level member by its (unescaped) name.
func lookupMember(p []byte, name string) ([]byte, bool) {
	i := skipWS(p, 0)
	if i >= len(p) || p[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipWS(p, i)
		if i >= len(p) || p[i] != '"' {
			return nil, false
		}
		ks := i
		ke, escaped := endString(p, i)
		if ke < 0 {
			return nil, false
		}
		i = skipWS(p, ke)
		if i >= len(p) || p[i] != ':' {
			return nil, false
		}
		i = skipWS(p, i+1)
		vs := i
		if i = endValue(p, i); i < 0 {
			return nil, false
		}
		match := string(p[ks+1:ke-1]) == name
		if escaped {
			var k string
			match = json.Unmarshal(p[ks:ke], &k) == nil && k == name
		}
		if match {
			return p[vs:i], true
		}
		i = skipWS(p, i)
		if i >= len(p) || p[i] != ',' {
			return nil, false
		}
		i++
	}
}

// groupKey is the text a property value is grouped and reported under.
func groupKey(raw []byte) string {
	switch {
	case len(raw) == 0:
		return ""
	case raw[0] == '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			return string(raw[1 : len(raw)-1])
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9':
		if v, err := strconv.ParseFloat(string(raw), 64); err == nil && !math.IsInf(v, 0) {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return string(raw)
}

// Occurrence is one event of a funnel step: when, which, and by whom.
type Occurrence struct {
	Timestamp int64
	ID        ID
	Visitor   string
	Bot       bool // the event is flagged $bot (bots.go)
}

// StepOccurrences calls fn for each event named name in [from, to] that has a
// visitor, oldest first, from the name index alone (its value is the visitor).
// With a visitor filter it reads that visitor's index instead. It returns the
// number of index entries read; more than maxScan (0: no bound) returns ErrScanLimit.
func (d *DB) StepOccurrences(ds uint32, name string, visitor string, hasVisitor bool, from, to int64, maxScan int, fn func(Occurrence)) (int, error) {
	scanned := 0
	if hasVisitor {
		err := d.scanQuery(ds, "", visitor, true, from, to, func(ts int64, id ID, value []byte) error {
			n, bot := splitBot(value)
			if string(n) != name {
				return nil
			}
			if scanned++; maxScan > 0 && scanned > maxScan {
				return ErrScanLimit
			}
			fn(Occurrence{Timestamp: ts, ID: id, Visitor: visitor, Bot: bot})
			return nil
		})
		return scanned, err
	}
	err := d.scanQuery(ds, name, "", false, from, to, func(ts int64, id ID, value []byte) error {
		if scanned++; maxScan > 0 && scanned > maxScan {
			return ErrScanLimit
		}
		if v, bot := splitBot(value); len(v) > 0 {
			fn(Occurrence{Timestamp: ts, ID: id, Visitor: string(v), Bot: bot})
		}
		return nil
	})
	return scanned, err
}

// VisitorEvent is one entry of a visitor's history.
type VisitorEvent struct {
	Timestamp int64
	ID        ID
	Name      string
	Bot       bool // the event is flagged $bot (bots.go)
}

// VisitorEvents lists a visitor's events in [from, to], oldest first, from
// the visitor index alone; at most limit (0: no bound), else ErrScanLimit.
func (d *DB) VisitorEvents(ds uint32, visitor string, from, to int64, limit int) ([]VisitorEvent, error) {
	var out []VisitorEvent
	err := d.scanQuery(ds, "", visitor, true, max(from, 0), to, func(ts int64, id ID, value []byte) error {
		if limit > 0 && len(out) >= limit {
			return ErrScanLimit
		}
		name, bot := splitBot(value)
		out = append(out, VisitorEvent{Timestamp: ts, ID: id, Name: string(name), Bot: bot})
		return nil
	})
	return out, err
}

// EventsInRange calls fn with every event of ds with a timestamp in [from,
// to], oldest first; more than maxScan (0: no bound) returns ErrScanLimit,
// checked up front from the counters.
func (d *DB) EventsInRange(ds uint32, from, to int64, maxScan int, fn func(*Event)) error {
	from = max(from, 0)
	if err := d.checkScan(ds, "", from, to, maxScan); err != nil {
		return err
	}
	scanned := 0
	err := d.ScanEvents(ds, from, to, func(e *Event) bool {
		if scanned++; maxScan > 0 && scanned > maxScan {
			return false
		}
		fn(e)
		return true
	})
	if err == nil && maxScan > 0 && scanned > maxScan {
		err = ErrScanLimit
	}
	return err
}
