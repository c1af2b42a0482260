package storage

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/storage/propnums"
)

// Rollup key prefixes (see the package documentation for the layout).
const (
	prefixRollup = 'U'
	prefixGoal   = 'G'
)

// Bounds on what one event adds to the rollups, so a wide event cannot make
// ingest expensive: only the first MaxRollupProperties top-level numeric
// properties are rolled up, and only those whose name is at most
// MaxRollupPropertyLen bytes and carries no JSON escape.
const (
	MaxRollupProperties  = propnums.MaxMembers // the decoder indexes as many
	MaxRollupPropertyLen = propnums.MaxKeyLen
	// MaxBucketProperties bounds the distinct property names one bucket
	// keeps, so events with ever-new numeric property names cannot grow a
	// bucket's value without end. The smallest names (byte order) are kept:
	// that rule gives the same result in any merge order, and a kept name's
	// sum is always complete.
	MaxBucketProperties = 64
)

// rollupPrefix is U ds len name level: the rollups of one event name (or of
// every event, name "") at one level; the bucket start follows. The value
// holds the bucket's numeric property sums and its visitor sketch, so an
// event adds one merge operand per level and name, however many numeric
// properties it has: what costs at ingest is the number of keys written.
func rollupPrefix(dst []byte, ds uint32, name string, level byte) []byte {
	dst = appendDataset(dst, prefixRollup, ds)
	dst = append(dst, byte(len(name)))
	dst = append(dst, name...)
	return append(dst, level)
}

// rollupMerger picks the merge operator of a rollup key; merge.go calls it
// for every prefix other than C.
func rollupMerger(key, value []byte) (pebble.ValueMerger, error) {
	if key[0] != prefixRollup {
		return nil, fmt.Errorf("storage: no merge operator for key prefix %q", key[:1])
	}
	m := &rollupValueMerger{}
	return m, m.MergeNewer(value)
}

// A rollup value is:
//
//	version (1) | uvarint nprops | nprops x (len name, sum f64, comp f64, uvarint n) | sketch?
//
// with properties sorted by name and the sketch (rollup_hll.go encoding)
// present only if an event of the bucket had a visitor. Properties come
// first so a sum query stops reading before a 16 KiB dense sketch.
const rollupVersion = 1

func appendRollupValue(dst []byte, props []propSum, sketch func([]byte) []byte) []byte {
	dst = append(dst, rollupVersion)
	dst = binary.AppendUvarint(dst, uint64(len(props)))
	for _, p := range props {
		dst = append(dst, byte(len(p.name)))
		dst = append(dst, p.name...)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.v.sum))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.v.comp))
		dst = binary.AppendUvarint(dst, uint64(p.v.n))
	}
	if sketch != nil {
		dst = sketch(dst)
	}
	return dst
}

// eachRollupProp calls fn for each property of a rollup value and returns
// the rest of the value (the sketch, possibly empty).
func eachRollupProp(v []byte, fn func(name []byte, s sumValue)) ([]byte, error) {
	if len(v) < 1 || v[0] != rollupVersion {
		return nil, errCorrupt
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n > MaxBucketProperties {
		return nil, errCorrupt
	}
	p := v[1+k:]
	for range n {
		if len(p) < 1 || len(p) < 1+int(p[0])+16 {
			return nil, errCorrupt
		}
		name := p[1 : 1+int(p[0])]
		p = p[1+int(p[0]):]
		s := sumValue{
			sum:  math.Float64frombits(binary.LittleEndian.Uint64(p)),
			comp: math.Float64frombits(binary.LittleEndian.Uint64(p[8:])),
		}
		cnt, k := binary.Uvarint(p[16:])
		if k <= 0 {
			return nil, errCorrupt
		}
		s.n = int64(cnt)
		p = p[16+k:]
		if fn != nil {
			fn(name, s)
		}
	}
	return p, nil
}

// rollupValueMerger is the merge operator of U keys: property sums added by
// name (keeping the MaxBucketProperties smallest names) and sketches
// unioned. The derived overlay (derived.go) keeps one per open bucket.
type rollupValueMerger struct {
	props     []propSum
	sketch    Sketch
	hasSketch bool
}

// MergeNewer folds in an operand; order does not matter for sums and sketches.
func (m *rollupValueMerger) MergeNewer(value []byte) error {
	rest, err := eachRollupProp(value, func(name []byte, s sumValue) { addPropTo(m, name, s) })
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		m.hasSketch = true
		return m.sketch.MergeEncoded(rest)
	}
	return nil
}

// addProp adds one property in place: operands mostly repeat the names
// already held, so merging them allocates nothing.
func addPropTo[S ~string | ~[]byte](m *rollupValueMerger, name S, s sumValue) {
	i, found := slices.BinarySearchFunc(m.props, name, func(p propSum, n S) int { return strings.Compare(p.name, string(n)) })
	if found {
		m.props[i].v.merge(s)
		return
	}
	if len(m.props) >= MaxBucketProperties {
		if i == len(m.props) {
			return // larger than every kept name
		}
		m.props = m.props[:len(m.props)-1]
	}
	m.props = slices.Insert(m.props, i, propSum{name: string(name), v: s})
}

// MergeOlder is MergeNewer: the operator is commutative.
func (m *rollupValueMerger) MergeOlder(value []byte) error { return m.MergeNewer(value) }

// Finish encodes the merged value.
func (m *rollupValueMerger) Finish(bool) ([]byte, io.Closer, error) {
	return m.appendValue(nil), nil, nil
}

// appendValue appends the encoded value. It only reads m once its sketch is
// compacted, so a frozen overlay can be encoded while readers look at it.
func (m *rollupValueMerger) appendValue(dst []byte) []byte {
	var sk func([]byte) []byte
	if m.hasSketch {
		sk = m.sketch.AppendEncoded
	}
	return appendRollupValue(dst, m.props, sk)
}

// rollupCell is one minute of one event name (or "" for every event) in a batch.
type rollupCell struct {
	ds     uint32
	name   string
	minute int64
}

type propSum struct {
	name string
	v    sumValue
}

// rollupAgg is what the events of a batch add to one minute cell: its count
// (negative when an erasure takes events away), visitor sketch entries and
// numeric property sums.
type rollupAgg struct {
	count int64
	hll   []uint32 // sketch entries, unsorted and possibly repeated
	props []propSum
}

// addSum adds s to a cell's sum of the property name: a []byte read from an
// event, or a string read back from the log.
func addSum[S ~string | ~[]byte](a *rollupAgg, r *rollups, name S, s sumValue) {
	for i := range a.props {
		if a.props[i].name == string(name) {
			a.props[i].v.merge(s)
			return
		}
	}
	a.props = append(a.props, propSum{name: intern(r, name), v: s})
}

// intern returns name as a string, allocating only the first time a pooled
// accumulator sees it: property names repeat from event to event.
func intern[S ~string | ~[]byte](r *rollups, name S) string {
	if s, ok := r.names[string(name)]; ok {
		return s
	}
	if len(r.names) >= 4096 {
		clear(r.names) // ever-new names: do not keep them all
	}
	s := string(name)
	r.names[s] = s
	return s
}

// rollups accumulates a batch's derived data per minute cell; the overlay
// derives hour and day buckets from the minute cells, so an event costs at
// most two map lookups here whatever the number of levels.
type rollups struct {
	cells map[rollupCell]*rollupAgg
	// recent are the two cells cell returned last, the latest first. An
	// event adds to its name's cell and to every event's, and the next
	// event of a batch mostly to the same two (to every event's one at
	// least), so most look-ups skip hashing the name.
	recent [2]recentCell
	free   []*rollupAgg
	names  map[string]string
	// sortBuf is sortSketchEntries' second buffer, kept for the next commit.
	sortBuf []uint32
}

type recentCell struct {
	k rollupCell
	a *rollupAgg
}

func newRollups() *rollups {
	return &rollups{cells: make(map[rollupCell]*rollupAgg), names: make(map[string]string)}
}

func (r *rollups) cell(ds uint32, name string, minute int64) *rollupAgg {
	k := rollupCell{ds, name, minute}
	if c := r.recent[0]; c.a != nil && c.k == k {
		return c.a
	}
	if c := r.recent[1]; c.a != nil && c.k == k {
		r.recent[0], r.recent[1] = c, r.recent[0]
		return c.a
	}
	a := r.cells[k]
	if a == nil {
		if n := len(r.free); n > 0 {
			a = r.free[n-1]
			r.free = r.free[:n-1]
		} else {
			a = &rollupAgg{}
		}
		r.cells[k] = a
	}
	r.recent[1], r.recent[0] = r.recent[0], recentCell{k, a}
	return a
}

// reset empties r for reuse, keeping its cells' storage.
func (r *rollups) reset() {
	r.recent = [2]recentCell{}
	for k, a := range r.cells {
		a.count = 0
		a.hll = a.hll[:0]
		clear(a.props)
		a.props = a.props[:0]
		r.free = append(r.free, a)
		delete(r.cells, k)
	}
}

// numProp is a numeric top-level property of one event.
type numProp struct {
	key []byte
	v   float64
}

// numbers fills nums with e's numeric properties, as eachNumber finds
// them, and returns how many: from e.Numbers when the decoder indexed
// them and every number parses, else by walking e.Properties.
func numbers(e *Event, nums *[MaxRollupProperties]numProp) int {
	n := 0
	add := func(key []byte, v float64) bool {
		nums[n] = numProp{key, v}
		n++
		return n < MaxRollupProperties
	}
	if e.Numbers != nil {
		parsed := true
		if propnums.Each(e.Properties, e.Numbers, func(key, num []byte) bool {
			v, ok := parseNumber(num)
			parsed = ok
			return ok && add(key, v)
		}) && parsed {
			return n
		}
		n = 0
	}
	eachNumber(e.Properties, add)
	return n
}

// derive records what e adds to its minute: count to the counts (0 when
// only rollups are rebuilt), its visitor and numeric properties to the
// sketch and sums; for its name and for every event, or with withName false
// for every event only (rebuilding the rollups of some names). A bot event
// goes to the bot series of both (bots.go).
func (b *Batch) derive(ds uint32, e *Event, bot bool, count int64, withName bool) {
	var nums [MaxRollupProperties]numProp
	n := numbers(e, &nums)
	if count == 0 && n == 0 && !e.HasVisitor {
		return
	}
	var entry uint32
	if e.HasVisitor {
		entry = hllEntry(HashVisitor(e.VisitorID))
	}
	minute := floorTo(e.Timestamp, minuteMs)
	r := b.rollups()
	names := [2]string{e.Name, ""}
	if bot {
		names = [2]string{intern(r, seriesName(e.Name, true)), botAll}
	}
	first := 0
	if !withName {
		first = 1
	}
	for _, name := range names[first:] {
		a := r.cell(ds, name, minute)
		a.count += count
		if e.HasVisitor {
			a.hll = append(a.hll, entry)
		}
		for _, p := range nums[:n] {
			addSum(a, r, p.key, sumValue{sum: p.v, n: 1})
		}
	}
}

// addCount adds delta to the counts of one name's (and every event's)
// minute at ts, in the bot series for a bot event.
func (b *Batch) addCount(ds uint32, name string, bot bool, ts int64, delta int64) {
	minute := floorTo(ts, minuteMs)
	r := b.rollups()
	r.cell(ds, seriesName(name, bot), minute).count += delta
	r.cell(ds, seriesName("", bot), minute).count += delta
}

func (b *Batch) rollups() *rollups {
	if b.roll == nil {
		if b.roll, _ = b.db.pools.rollups.Get().(*rollups); b.roll == nil {
			b.roll = newRollups()
		}
	}
	return b.roll
}

// nameIndexValue is the value of an N key: dst (the bot mark, if any) and
// the visitor id (none when the event has none; ids are never empty), so
// funnels can follow visitors through the name index without reading
// records.
func nameIndexValue(dst []byte, e *Event) []byte {
	if !e.HasVisitor {
		return dst // the bot mark of an event without a visitor too
	}
	return append(dst, e.VisitorID...)
}

// decodeSumKeyTS and friends read the bucket start at the end of a rollup key.
func keyStart(key []byte) int64 {
	if len(key) < 8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(key[len(key)-8:]))
}
