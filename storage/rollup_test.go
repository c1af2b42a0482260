package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// rDay is a UTC midnight (2024-10-04) that the rollup tests start from.
const rDay = int64(20000) * dayMs

// rDB is a store for the rollup tests, closed at cleanup unless closed before.
type rDB struct {
	*DB
	dir    string
	closed *bool
}

func rOpen(t testing.TB, dir string) rDB {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := rDB{DB: db, dir: dir, closed: new(bool)}
	t.Cleanup(func() {
		if !*d.closed {
			_ = db.Close()
		}
	})
	return d
}

func (d rDB) reopen(t testing.TB) rDB {
	t.Helper()
	*d.closed = true
	if err := d.DB.Close(); err != nil {
		t.Fatal(err)
	}
	return rOpen(t, d.dir)
}

// rID is an event id whose order follows n.
func rID(n uint64) ID {
	var id ID
	binary.BigEndian.PutUint64(id[8:], n)
	return id
}

func TestHLLErrorOn100kVisitors(t *testing.T) {
	// The documented bound: relative standard error 1.04/sqrt(16384) = 0.81%;
	// the hash is deterministic, so this is a fixed check that the estimate
	// lies within three standard errors.
	for _, n := range []int{100_000, 1_000_000} {
		if n > 100_000 && testing.Short() {
			continue
		}
		var s Sketch
		for i := range n {
			s.Add(HashVisitor(fmt.Sprintf("visitor-%d", i)))
		}
		est := s.Estimate()
		rel := math.Abs(est-float64(n)) / float64(n)
		t.Logf("n=%d estimate=%.0f error=%.3f%%", n, est, rel*100)
		if rel > 3*1.04/math.Sqrt(hllM) {
			t.Errorf("n=%d: estimate %.0f is %.2f%% off, more than 3 standard errors", n, est, rel*100)
		}
	}
}

func TestHLLSmallCountsNearlyExact(t *testing.T) {
	var s Sketch
	if s.Count() != 0 || !s.Empty() {
		t.Fatalf("empty sketch counts %d", s.Count())
	}
	added := 0
	for _, n := range []int{1, 2, 3, 10, 100, 1000, 5000} {
		for ; added < n; added++ {
			s.Add(HashVisitor(fmt.Sprintf("v-%d", added)))
			s.Add(HashVisitor(fmt.Sprintf("v-%d", added))) // repeats change nothing
		}
		got := s.Count()
		if d := math.Abs(float64(got - int64(n))); d > math.Max(0, 0.005*float64(n)) && d > 0 {
			if d > 0.01*float64(n) || n <= 100 {
				t.Errorf("n=%d: count %d", n, got)
			}
		}
	}
}

func TestHLLSparseToDenseAndMerge(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var a, b, union, direct Sketch
	for i := range 30_000 {
		h := r.Uint64()
		switch {
		case i%3 == 0:
			a.Add(h)
		case i%3 == 1:
			b.Add(h)
		default:
			a.Add(h)
			b.Add(h)
		}
		direct.Add(h)
	}
	// Round-trip a and b through their stored form, in both orders.
	for _, order := range [][2]*Sketch{{&a, &b}, {&b, &a}} {
		union = Sketch{}
		for _, s := range order {
			if err := union.MergeEncoded(s.AppendEncoded(nil)); err != nil {
				t.Fatal(err)
			}
		}
		if union.Estimate() != direct.Estimate() {
			t.Errorf("union of stored halves %.0f != sketch of all %.0f", union.Estimate(), direct.Estimate())
		}
	}
	if direct.dense == nil {
		t.Errorf("30,000 visitors should have made the sketch dense")
	}
	// Sparse sketches encode in 3 bytes an entry; a dense one in 1+16384.
	var small Sketch
	for i := range 10 {
		small.Add(HashVisitor(fmt.Sprint(i)))
	}
	if n := len(small.AppendEncoded(nil)); n != 1+3*10 {
		t.Errorf("10 visitors encode to %d bytes, want 31", n)
	}
	if n := len(direct.AppendEncoded(nil)); n != 1+hllM {
		t.Errorf("dense sketch encodes to %d bytes", n)
	}
	// Growing past hllSparseMax entries through merges switches to dense and keeps the estimate.
	var grown, ref Sketch
	for i := range 20 {
		var part Sketch
		for j := range 400 {
			h := HashVisitor(fmt.Sprintf("%d/%d", i, j))
			part.Add(h)
			ref.Add(h)
		}
		grown.Merge(&part)
	}
	if grown.dense == nil || grown.Estimate() != ref.Estimate() {
		t.Errorf("merged sketch dense=%v estimate %.0f, want dense and %.0f", grown.dense != nil, grown.Estimate(), ref.Estimate())
	}
}

func TestHLLCorruptEncodings(t *testing.T) {
	for _, p := range [][]byte{nil, {9}, {hllSparse, 1}, {hllSparse, 0xff, 0xff, 1}, {hllSparse, 0, 1, 0}, {hllDense, 1, 2}} {
		var s Sketch
		if err := s.MergeEncoded(p); !errors.Is(err, errCorrupt) {
			t.Errorf("MergeEncoded(%x) = %v, want errCorrupt", p, err)
		}
	}
}

func TestSumValueCompensated(t *testing.T) {
	var a, b sumValue
	for i := range 1_000_000 {
		if i%2 == 0 {
			a.add(19.99)
		} else {
			b.add(19.99)
		}
	}
	a.merge(b)
	if got := a.total(); got != 19990000 {
		t.Errorf("1,000,000 x 19.99 = %.10f, want 19990000 (correctly rounded)", got)
	}
}

// rollupOperand encodes a rollup value of the given sums and visitor hashes.
func rollupOperand(props map[string]sumValue, visitors ...uint64) []byte {
	var ps []propSum
	for name, v := range props {
		ps = append(ps, propSum{name: name, v: v})
	}
	slices.SortFunc(ps, func(a, b propSum) int { return strings.Compare(a.name, b.name) })
	var sk func([]byte) []byte
	if len(visitors) > 0 {
		var s Sketch
		for _, h := range visitors {
			s.Add(h)
		}
		sk = s.AppendEncoded
	}
	return appendRollupValue(nil, ps, sk)
}

func decodeRollup(t *testing.T, v []byte) (map[string]sumValue, *Sketch) {
	t.Helper()
	props := map[string]sumValue{}
	rest, err := eachRollupProp(v, func(name []byte, s sumValue) { props[string(name)] = s })
	if err != nil {
		t.Fatal(err)
	}
	var sk Sketch
	if len(rest) > 0 {
		if err := sk.MergeEncoded(rest); err != nil {
			t.Fatal(err)
		}
	}
	return props, &sk
}

func TestRollupMergeOperator(t *testing.T) {
	key := appendTS(rollupPrefix(nil, 1, "buy", LevelMinute), 0)
	m, err := merger.Merge(key, rollupOperand(map[string]sumValue{"amount": {sum: 1.5, n: 1}}, 1<<60))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.MergeNewer(rollupOperand(map[string]sumValue{"amount": {sum: 2, n: 1}, "qty": {sum: 3, n: 1}})); err != nil {
		t.Fatal(err)
	}
	if err := m.MergeOlder(rollupOperand(map[string]sumValue{"amount": {sum: 9.5, n: 5}}, 3<<60, 1<<60)); err != nil {
		t.Fatal(err)
	}
	out, closer, err := m.Finish(true)
	if err != nil || closer != nil {
		t.Fatal(err)
	}
	props, sk := decodeRollup(t, out)
	if a := props["amount"]; a.total() != 13 || a.n != 7 {
		t.Errorf("amount = %v over %d, want 13 over 7", a.total(), a.n)
	}
	if q := props["qty"]; q.total() != 3 || q.n != 1 || len(props) != 2 {
		t.Errorf("props = %v", props)
	}
	if sk.Count() != 2 {
		t.Errorf("merged sketch counts %d, want 2", sk.Count())
	}
	// A value without sketch stays without one.
	m, _ = merger.Merge(key, rollupOperand(map[string]sumValue{"x": {sum: 1, n: 1}}))
	out, _, _ = m.Finish(false)
	if _, rest, _ := func() (int, []byte, error) { r, e := eachRollupProp(out, nil); return 0, r, e }(); len(rest) != 0 {
		t.Errorf("sketch appeared from nowhere: %x", rest)
	}
	// The property cap keeps the smallest names, whatever the merge order.
	var ops [][]byte
	for i := range MaxBucketProperties + 10 {
		ops = append(ops, rollupOperand(map[string]sumValue{fmt.Sprintf("p%03d", i): {sum: float64(i), n: 1}}))
	}
	for _, order := range [][]int{{0, 1}, {1, 0}} {
		m, _ := merger.Merge(key, ops[0])
		if order[0] == 1 {
			m, _ = merger.Merge(key, ops[len(ops)-1])
		}
		for i := len(ops) - 1; i >= 0; i-- {
			if err := m.MergeOlder(ops[i]); err != nil {
				t.Fatal(err)
			}
		}
		out, _, _ := m.Finish(true)
		props, _ := decodeRollup(t, out)
		if len(props) != MaxBucketProperties || props["p000"].n < 1 || props[fmt.Sprintf("p%03d", MaxBucketProperties-1)].n != 1 {
			t.Errorf("cap: %d props kept, p000 %+v", len(props), props["p000"])
		}
		if _, ok := props[fmt.Sprintf("p%03d", MaxBucketProperties)]; ok {
			t.Errorf("cap kept a name beyond the %d smallest", MaxBucketProperties)
		}
	}
	for _, bad := range [][]byte{{}, {2, 0}, {rollupVersion, 1, 5, 'a'}, {rollupVersion, 0, 9}} {
		if _, err := merger.Merge(key, bad); err == nil {
			t.Errorf("operand %x accepted", bad)
		}
	}
	if _, err := merger.Merge([]byte{prefixGoal, 0}, []byte{1}); err == nil {
		t.Errorf("G keys must have no merge operator")
	}
}

func TestEachNumber(t *testing.T) {
	type kv struct {
		k string
		v float64
	}
	long := string(bytes.Repeat([]byte("k"), MaxRollupPropertyLen+1))
	many := "{"
	for i := range MaxRollupProperties + 4 {
		many += fmt.Sprintf(`"p%d":%d,`, i, i)
	}
	many = many[:len(many)-1] + "}"
	var manyWant []kv
	for i := range MaxRollupProperties {
		manyWant = append(manyWant, kv{fmt.Sprintf("p%d", i), float64(i)})
	}
	for _, tc := range []struct {
		in   string
		want []kv
	}{
		{`{}`, nil},
		{`{"amount":12.5}`, []kv{{"amount", 12.5}}},
		{`{"a":"1","b":true,"c":null,"d":-3e2,"e":[1,2],"f":{"g":4},"h":0}`, []kv{{"d", -300}, {"h", 0}}},
		{`{"s":"x\",\"y\":5","n":1}`, []kv{{"n", 1}}},
		{`{"n\u0061":1,"b":2}`, []kv{{"b", 2}}},
		{`{"` + long + `":1,"b":2}`, []kv{{"b", 2}}},
		{` { "a" : 1 , "b" : [ "]" ] , "c" : 2 } `, []kv{{"a", 1}, {"c", 2}}},
		{`{"big":1e999,"ok":1}`, []kv{{"ok", 1}}},
		{`{"a":1,"b":`, []kv{{"a", 1}}},
		{`[1,2]`, nil},
		{``, nil},
		{many, manyWant},
	} {
		var got []kv
		n := 0
		eachNumber([]byte(tc.in), func(k []byte, v float64) bool {
			got = append(got, kv{string(k), v})
			n++
			return n < MaxRollupProperties
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("eachNumber(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestGroupKeyAndLookup(t *testing.T) {
	props := []byte(`{"plan":"pro","n":1.50,"b":true,"z":null,"o":{"x":[1]},"e":"a\"b","k\u0065y":"esc"}`)
	for _, tc := range []struct{ name, want string }{
		{"plan", "pro"}, {"n", "1.5"}, {"b", "true"}, {"z", "null"}, {"o", `{"x":[1]}`}, {"e", `a"b`}, {"key", "esc"},
	} {
		raw, ok := lookupMember(props, tc.name)
		if !ok {
			t.Errorf("%s not found", tc.name)
			continue
		}
		if got := groupKey(raw); got != tc.want {
			t.Errorf("groupKey(%s) = %q, want %q", raw, got, tc.want)
		}
	}
	if _, ok := lookupMember(props, "missing"); ok {
		t.Errorf("missing member found")
	}
}

// rEvent is a test event of the rollup model.
type rEvent struct {
	ds      uint32
	name    string
	visitor string // "" none
	ts      int64
	props   string
}

// rollupModel writes random events over four days, in batches of random
// size, and keeps them for brute-force answers.
func rollupModel(t *testing.T, seed uint64, n int) (rDB, []rEvent) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	db := rOpen(t, "")
	names := []string{"view", "buy", "signup", "b"}
	var evs []rEvent
	id := uint64(0)
	for len(evs) < n {
		size := 1 + r.IntN(200)
		b := db.NewBatch()
		for range min(size, n-len(evs)) {
			id++
			ev := rEvent{ds: 1 + uint32(r.IntN(2)), name: names[r.IntN(len(names))],
				ts: rDay + r.Int64N(4*dayMs)}
			if r.IntN(5) != 0 {
				ev.visitor = fmt.Sprintf("v%d", r.IntN(300))
			}
			switch r.IntN(4) {
			case 0:
				ev.props = `{}`
			case 1:
				ev.props = fmt.Sprintf(`{"amount":%d.25,"plan":"p%d"}`, r.IntN(100), r.IntN(3))
			case 2:
				ev.props = fmt.Sprintf(`{"plan":"p%d","amount":"n/a","qty":%d}`, r.IntN(3), r.IntN(5))
			default:
				ev.props = fmt.Sprintf(`{"qty":%d,"amount":-%d}`, r.IntN(5), r.IntN(10))
			}
			evs = append(evs, ev)
			e := Event{ID: rID(id), Name: ev.name, Timestamp: ev.ts, CreatedAt: ev.ts, Properties: []byte(ev.props),
				VisitorID: ev.visitor, HasVisitor: ev.visitor != ""}
			b.AddEvent(ev.ds, &e)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if len(evs) > n/2 && len(evs)-size <= n/2 {
			if err := db.Pebble().Flush(); err != nil { // half in sstables: merges across levels
				t.Fatal(err)
			}
		}
	}
	return db, evs
}

// bruteAgg is the answer to one bucket from the raw events.
func bruteAgg(evs []rEvent, ds uint32, name, visitor, prop string, lo, hi int64) Agg {
	a := Agg{Sketch: &Sketch{}}
	var s sumValue
	for _, ev := range evs {
		if ev.ds != ds || (name != "" && ev.name != name) || (visitor != "" && ev.visitor != visitor) || ev.ts < lo || ev.ts >= hi {
			continue
		}
		a.Count++
		if ev.visitor != "" {
			a.Sketch.Add(HashVisitor(ev.visitor))
		}
		if v, ok := numberProperty([]byte(ev.props), prop); ok && prop != "" {
			s.add(v)
			s.n++
		}
	}
	a.Sum, a.N = s.total(), s.n
	return a
}

func TestAggregateMatchesRawEvents(t *testing.T) {
	db, evs := rollupModel(t, 1, 6000)
	r := rand.New(rand.NewPCG(9, 9))
	widths := []int64{minuteMs, hourMs, 3 * hourMs, dayMs, 7 * dayMs}
	for i := range 60 {
		// Aligned and unaligned ranges, buckets of several widths.
		from := rDay - dayMs/2 + r.Int64N(5*dayMs)
		if i%3 == 0 {
			from = floorTo(from, hourMs)
		}
		w := widths[r.IntN(len(widths))]
		nb := 1 + r.IntN(min(40, int(5*dayMs/w)+1))
		bounds := []int64{from}
		next := floorTo(from, w) + w
		for range nb {
			bounds = append(bounds, next)
			next += w
		}
		if i%2 == 1 { // an inclusive "to" that is not aligned
			bounds[len(bounds)-1] -= r.Int64N(w / 2)
		}
		q := AggQuery{Dataset: 1 + uint32(i%2), Bounds: bounds, Unique: true}
		switch i % 4 {
		case 1:
			q.Name = "buy"
		case 2:
			q.Name = "b"
		}
		if i%5 != 0 {
			q.Property = []string{"amount", "qty", "plan"}[i%3]
		}
		if i%7 == 0 {
			q.VisitorID, q.HasVisitor = fmt.Sprintf("v%d", i), true
		}
		got, err := db.Aggregate(q)
		if err != nil {
			t.Fatal(err)
		}
		for j := range got {
			want := bruteAgg(evs, q.Dataset, q.Name, q.VisitorID, q.Property, bounds[j], bounds[j+1])
			g := got[j]
			if g.Count != want.Count || g.N != want.N || math.Abs(g.Sum-want.Sum) > 1e-9 ||
				g.Sketch.Estimate() != want.Sketch.Estimate() {
				t.Fatalf("query %d %+v bucket %d [%d, %d): got count %d sum %v n %d uv %.1f, want %d %v %d %.1f",
					i, q, j, bounds[j], bounds[j+1], g.Count, g.Sum, g.N, g.Sketch.Estimate(),
					want.Count, want.Sum, want.N, want.Sketch.Estimate())
			}
		}
	}
	// The rollups survive a reopen (merge operands in sstables and the WAL).
	db = db.reopen(t)
	bounds := []int64{rDay, rDay + dayMs, rDay + 2*dayMs, rDay + 4*dayMs}
	got, err := db.Aggregate(AggQuery{Dataset: 1, Name: "view", Property: "amount", Unique: true, Bounds: bounds})
	if err != nil {
		t.Fatal(err)
	}
	for j := range got {
		want := bruteAgg(evs, 1, "view", "", "amount", bounds[j], bounds[j+1])
		if got[j].Count != want.Count || got[j].N != want.N || got[j].Sketch.Estimate() != want.Sketch.Estimate() {
			t.Errorf("after reopen bucket %d: %+v, want %+v", j, got[j], want)
		}
	}
}

func TestEventNames(t *testing.T) {
	db := rOpen(t, "")
	for i, name := range []string{"b", "a", "ab", "zz", "a"} {
		commitTestEvent(t, db.DB, 3, uint64(i+1), name, "", rDay, `{}`)
	}
	commitTestEvent(t, db.DB, 4, 9, "other", "", rDay, `{}`)
	got, err := db.EventNames(3)
	if err != nil || !slices.Equal(got, []string{"a", "ab", "b", "zz"}) {
		t.Errorf("EventNames = %v, %v", got, err)
	}
}

func commitTestEvent(t *testing.T, db *DB, ds uint32, id uint64, name, visitor string, ts int64, props string) {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	b.AddEvent(ds, &Event{ID: rID(id), Name: name, VisitorID: visitor, HasVisitor: visitor != "", Timestamp: ts, Properties: []byte(props)})
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
}

func TestGroupByProperty(t *testing.T) {
	db, evs := rollupModel(t, 3, 3000)
	from, to := rDay+5*hourMs+17, rDay+3*dayMs-1
	groups, total, err := db.GroupByProperty(GroupQuery{Dataset: 1, From: from, To: to, GroupBy: "plan", Property: "amount", Unique: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*Agg{}
	wantTotal := bruteAgg(evs, 1, "", "", "amount", from, to+1)
	for _, ev := range evs {
		if ev.ds != 1 || ev.ts < from || ev.ts > to {
			continue
		}
		raw, ok := lookupMember([]byte(ev.props), "plan")
		if !ok {
			continue
		}
		k := groupKey(raw)
		if want[k] == nil {
			want[k] = &Agg{Sketch: &Sketch{}}
		}
		w := want[k]
		w.Count++
		if ev.visitor != "" {
			w.Sketch.Add(HashVisitor(ev.visitor))
		}
		if v, ok := numberProperty([]byte(ev.props), "amount"); ok {
			w.Sum += v
			w.N++
		}
	}
	if len(groups) != len(want) || total.Count != wantTotal.Count || total.N != wantTotal.N {
		t.Fatalf("groups %d total %+v, want %d %+v", len(groups), total, len(want), wantTotal)
	}
	for k, w := range want {
		g := groups[k]
		if g == nil || g.Count != w.Count || g.N != w.N || math.Abs(g.Sum-w.Sum) > 1e-6 || g.Sketch.Count() != w.Sketch.Count() {
			t.Errorf("group %q: %+v, want %+v", k, g, w)
		}
	}
	if _, _, err := db.GroupByProperty(GroupQuery{Dataset: 1, From: from, To: to, GroupBy: "plan", MaxScan: 10}); !errors.Is(err, ErrScanLimit) {
		t.Errorf("scan limit: %v", err)
	}
}

func TestStepOccurrencesCarryVisitors(t *testing.T) {
	db := rOpen(t, "")
	commitTestEvent(t, db.DB, 1, 1, "signup", "alice", rDay+1000, `{}`)
	commitTestEvent(t, db.DB, 1, 2, "signup", "", rDay+2000, `{}`)
	commitTestEvent(t, db.DB, 1, 3, "signup", "bob", rDay+3000, `{}`)
	commitTestEvent(t, db.DB, 1, 4, "buy", "bob", rDay+4000, `{}`)
	var got []string
	n, err := db.StepOccurrences(1, "signup", "", false, rDay, rDay+dayMs, 0, func(o Occurrence) { got = append(got, o.Visitor) })
	if err != nil || n != 3 || !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("occurrences %v, %v", got, err)
	}
	got = nil
	_, err = db.StepOccurrences(1, "signup", "bob", true, rDay, rDay+dayMs, 0, func(o Occurrence) { got = append(got, o.Visitor) })
	if err != nil || !slices.Equal(got, []string{"bob"}) {
		t.Errorf("visitor occurrences %v, %v", got, err)
	}
	if _, err := db.StepOccurrences(1, "signup", "", false, rDay, rDay+dayMs, 2, func(Occurrence) {}); !errors.Is(err, ErrScanLimit) {
		t.Errorf("limit: %v", err)
	}
	hist, err := db.VisitorEvents(1, "bob", rDay, rDay+dayMs, 0)
	if err != nil || len(hist) != 2 || hist[0].Name != "signup" || hist[1].Name != "buy" {
		t.Errorf("VisitorEvents = %+v, %v", hist, err)
	}
}

func TestGoalRecords(t *testing.T) {
	db := rOpen(t, "")
	if _, ok, err := db.GoalCursor(1); ok || err != nil {
		t.Fatalf("cursor of a fresh store: %v %v", ok, err)
	}
	if err := db.InitGoalCursor(1, IDAt(rDay)); err != nil {
		t.Fatal(err)
	}
	if err := db.InitGoalCursor(1, IDAt(rDay+5)); err != nil {
		t.Fatal(err)
	}
	if id, ok, _ := db.GoalCursor(1); !ok || IDTime(id) != rDay {
		t.Errorf("InitGoalCursor overwrote the cursor: %d", IDTime(id))
	}
	cs := []Completion{
		{Goal: "g1", Visitor: "alice", HasVisitor: true, Timestamp: rDay + 10, ID: rID(1)},
		{Goal: "g1", Timestamp: rDay + 20, ID: rID(2)},
		{Goal: "g1", Timestamp: rDay + 20, ID: rID(2)}, // the same event twice: counted once
		{Goal: "g2", Visitor: "alice", HasVisitor: true, Timestamp: rDay + dayMs, ID: rID(3)},
	}
	if err := db.RecordGoals(map[uint32]ID{1: rID(3)}, map[uint32][]Completion{1: cs}); err != nil {
		t.Fatal(err)
	}
	if done, _ := db.GoalCompletedBy(1, "g1", "alice"); !done {
		t.Errorf("alice should have completed g1")
	}
	if done, _ := db.GoalCompletedBy(1, "g1", "bob"); done {
		t.Errorf("bob did not complete g1")
	}
	if done, _ := db.GoalCompletedBy(2, "g1", "alice"); done {
		t.Errorf("completions leak across datasets")
	}
	c, v, err := db.CountCompletions(1, "g1", rDay, rDay+dayMs)
	if err != nil || c != 2 || v != 1 {
		t.Errorf("CountCompletions g1 = %d, %d, %v; want 2, 1", c, v, err)
	}
	if c, _, _ := db.CountCompletions(1, "g1", rDay+11, rDay+dayMs); c != 1 {
		t.Errorf("range excludes the first completion: got %d", c)
	}
	if id, _, _ := db.GoalCursor(1); id != rID(3) {
		t.Errorf("cursor not advanced")
	}
	if err := db.DeleteGoalData("g1", 1, 2); err != nil {
		t.Fatal(err)
	}
	if c, _, _ := db.CountCompletions(1, "g1", 0, math.MaxInt64-1); c != 0 {
		t.Errorf("deleted goal still has %d completions", c)
	}
	if c, _, _ := db.CountCompletions(1, "g2", 0, math.MaxInt64-1); c != 1 {
		t.Errorf("g2 lost its completion")
	}
	if IDTime(IDAt(123456789)) != 123456789 {
		t.Errorf("IDAt/IDTime do not round-trip")
	}
}

func TestMaxRegistersMatchesBytewiseMax(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		a, b := make([]byte, hllM), make([]byte, hllM)
		for i := range a {
			a[i], b[i] = byte(r.IntN(hllQ+2)), byte(r.IntN(hllQ+2))
		}
		want := make([]byte, hllM)
		for i := range want {
			want[i] = max(a[i], b[i])
		}
		if err := maxRegisters(a, b); err != nil || !bytes.Equal(a, want) {
			t.Fatalf("maxRegisters differs from a byte-wise max (%v)", err)
		}
	}
	bad := make([]byte, hllM)
	bad[hllM-1] = 64
	if err := maxRegisters(make([]byte, hllM), bad); !errors.Is(err, errCorrupt) {
		t.Errorf("rank 64 accepted: %v", err)
	}
}

// TestRollupsRecentCells: the cells kept for the next look-up always
// answer as the map would, across names, datasets, minutes and a reset
// (which recycles the cells).
func TestRollupsRecentCells(t *testing.T) {
	type look struct {
		ds     uint32
		name   string
		minute int64
	}
	tests := []struct {
		name  string
		looks []look
	}{
		{"one name", []look{{1, "a", 0}, {1, "", 0}, {1, "a", 0}, {1, "", 0}}},
		{"names in turn", []look{{1, "a", 0}, {1, "", 0}, {1, "b", 0}, {1, "", 0}, {1, "c", 0}, {1, "", 0}, {1, "a", 0}, {1, "", 0}}},
		{"a new minute", []look{{1, "a", 0}, {1, "", 0}, {1, "a", minuteMs}, {1, "", minuteMs}, {1, "a", 0}}},
		{"another dataset", []look{{1, "a", 0}, {2, "a", 0}, {1, "a", 0}, {2, "", 0}, {1, "", 0}}},
	}
	r := newRollups()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for round := range 2 { // the second after a reset, with recycled cells
				for i, l := range tt.looks {
					r.cell(l.ds, l.name, l.minute).count++
					if want := r.cells[rollupCell{l.ds, l.name, l.minute}]; r.cell(l.ds, l.name, l.minute) != want || want == nil {
						t.Fatalf("round %d, look-up %d (%+v): not the map's cell", round, i, l)
					}
				}
				counts := map[look]int64{}
				for _, l := range tt.looks {
					counts[l]++
				}
				for l, n := range counts {
					if got := r.cells[rollupCell{l.ds, l.name, l.minute}].count; got != n {
						t.Fatalf("round %d: %+v counted %d, want %d", round, l, got, n)
					}
				}
				if len(r.cells) != len(counts) {
					t.Fatalf("round %d: %d cells, want %d", round, len(r.cells), len(counts))
				}
				r.reset()
			}
		})
	}
}
