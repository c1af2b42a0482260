package storage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// model is the brute-force answer to List and Count: every event kept in
// memory with its dataset, each dataset's events in list order once sorted.
type model struct {
	events map[uint32][]Event
}

// sort puts every dataset's events in list order: timestamp desc, then id desc.
func (m *model) sort() {
	for _, evs := range m.events {
		slices.SortFunc(evs, func(a, b Event) int {
			if c := cmp.Compare(b.Timestamp, a.Timestamp); c != 0 {
				return c
			}
			return bytes.Compare(b.ID[:], a.ID[:])
		})
	}
}

func (m *model) list(q ListQuery) (page []Event, total int64) {
	all := m.match(q.Dataset, q.Name, q.VisitorID, q.HasVisitor, q.From, q.To)
	total = int64(len(all))
	if q.Offset >= len(all) {
		return nil, total
	}
	all = all[q.Offset:]
	return all[:min(q.Limit, len(all))], total
}

func (m *model) match(ds uint32, name, visitor string, hasVisitor bool, from, to int64) []Event {
	var out []Event
	for _, e := range m.events[ds] {
		if name != "" && e.Name != name {
			continue
		}
		if hasVisitor && (!e.HasVisitor || e.VisitorID != visitor) {
			continue
		}
		if e.Timestamp < from || e.Timestamp > to {
			continue
		}
		out = append(out, e)
	}
	return out
}

var (
	modelNames    = []string{"a", "ab", "click", "page_view", "purchase"}
	modelVisitors = func() []string {
		v := make([]string, 20) // v1 is a prefix of v10..v19
		for i := range v {
			v[i] = fmt.Sprintf("v%d", i)
		}
		return v
	}()
	modelStart = int64(planDay) + 21*hourMs + 17*minuteMs + 123 // not aligned
	modelSpan  = 3 * dayMs
)

// buildModelDB writes n random events to a fresh store, in several batches,
// and returns the store and the model. With persist, half of the events are
// flushed to an sstable and the store is reopened before it is returned
// (the race detector's Pebble build makes sstable reads slow, hence optional).
func buildModelDB(t *testing.T, r *rand.Rand, n int, persist bool) (testDB, *model) {
	t.Helper()
	db := openTestDB(t, "")
	m := &model{events: map[uint32][]Event{}}
	var all []int64 // every timestamp so far
	timestamp := func() int64 {
		switch k := r.IntN(10); {
		case k < 3 && len(all) > 0: // the same millisecond as another event
			return all[r.IntN(len(all))]
		case k < 6 && len(all) > 0: // the same minute as another event
			return floorTo(all[r.IntN(len(all))], minuteMs) + r.Int64N(minuteMs)
		case k < 7: // exactly on a minute, hour or day boundary, or just before
			w := []int64{minuteMs, hourMs, dayMs}[r.IntN(3)]
			ts := ceilTo(modelStart+r.Int64N(modelSpan), w)
			if r.IntN(2) == 0 {
				ts--
			}
			return ts
		default:
			return modelStart + r.Int64N(modelSpan)
		}
	}
	var id uint64
	for written := 0; written < n; {
		size := min(1+r.IntN(300), n-written)
		b := db.NewBatch()
		for range size {
			id++
			ds := uint32(1)
			if r.IntN(4) == 0 {
				ds = 2
			}
			ts := timestamp()
			all = append(all, ts)
			e := Event{
				ID:         testID(id), // displaced: a client's time (Z, M and J keys)
				Name:       modelNames[r.IntN(len(modelNames))],
				Timestamp:  ts,
				CreatedAt:  modelStart + modelSpan + int64(id),
				Properties: fmt.Appendf(nil, `{"n":%d}`, id),
			}
			if r.IntN(2) == 0 { // at its id's time (S and N keys), as live traffic is
				e.ID = IDAt(ts)
				binary.BigEndian.PutUint64(e.ID[8:], id)
			}
			if r.IntN(7) != 0 {
				e.HasVisitor = true
				e.VisitorID = modelVisitors[r.IntN(len(modelVisitors))]
			}
			b.AddEvent(ds, &e)
			m.events[ds] = append(m.events[ds], e)
		}
		if err := b.Commit(true); err != nil {
			t.Fatal(err)
		}
		b.Close()
		written += size
		if persist && written > n/2 && written-size <= n/2 {
			// Half the data in sstables, half in the memtable.
			if err := db.Pebble().Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	m.sort()
	if persist {
		db = db.reopen(t)
	}
	return db, m
}

func TestListAndCountMatchModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	db, m := buildModelDB(t, r, 3000, false)

	// A time bound: unbounded, an event's exact timestamp (or next to it),
	// aligned to a minute/hour/day (or just before), or anywhere.
	bound := func(ds uint32, isTo bool) int64 {
		evs := m.events[ds]
		switch k := r.IntN(12); {
		case k == 0:
			if isTo {
				return math.MaxInt64
			}
			return 0
		case k < 5 && len(evs) > 0:
			return evs[r.IntN(len(evs))].Timestamp
		case k < 6 && len(evs) > 0:
			return evs[r.IntN(len(evs))].Timestamp + r.Int64N(3) - 1
		case k < 9:
			w := []int64{minuteMs, hourMs, dayMs}[r.IntN(3)]
			ts := floorTo(modelStart+r.Int64N(modelSpan), w)
			if isTo && r.IntN(3) != 0 {
				ts-- // the last ms of the previous bucket, inclusive
			}
			return ts
		default:
			return modelStart - hourMs + r.Int64N(modelSpan+2*hourMs)
		}
	}

	const queries = 1000
	var stats struct{ empty, pastEnd, partial, visitor int }
	defer func() {
		if t.Failed() {
			return
		}
		// The generator must keep producing every kind of query.
		t.Logf("queries: %+v of %d", stats, queries)
		if stats.empty < queries/20 || stats.pastEnd < queries/20 || stats.partial < queries/5 || stats.visitor < queries/10 {
			t.Errorf("query mix too narrow: %+v of %d", stats, queries)
		}
	}()
	for i := range queries {
		q := ListQuery{Dataset: 1, Limit: 1 + r.IntN(100)}
		switch k := r.IntN(20); {
		case k < 3:
			q.Dataset = 2
		case k < 4:
			q.Dataset = 3 // empty
		}
		if r.IntN(2) == 0 {
			q.Name = modelNames[r.IntN(len(modelNames))]
			if r.IntN(20) == 0 {
				q.Name = "nope"
			}
		}
		if r.IntN(5) < 2 {
			q.HasVisitor = true
			q.VisitorID = modelVisitors[r.IntN(len(modelVisitors))]
			if r.IntN(20) == 0 {
				q.VisitorID = "nobody"
			}
		}
		q.From, q.To = bound(q.Dataset, false), bound(q.Dataset, true)
		switch r.IntN(10) {
		case 0:
			q.To = q.From // one millisecond
		case 1:
			q.To = q.From + r.Int64N(2*minuteMs) // a short range around minute edges
		}
		if q.From > q.To {
			q.From, q.To = q.To, q.From
		}
		_, total := m.list(ListQuery{Dataset: q.Dataset, Name: q.Name, VisitorID: q.VisitorID,
			HasVisitor: q.HasVisitor, From: q.From, To: q.To, Limit: 1})
		switch k := r.IntN(10); {
		case k < 4:
			q.Offset = 0
		case k < 6:
			q.Offset = r.IntN(20)
		case k < 9:
			q.Offset = r.IntN(int(total) + 1)
		default:
			q.Offset = int(total) + r.IntN(3) // at or beyond the end
		}

		checkList(t, db.DB, m, q, fmt.Sprintf("query %d", i))
		if t.Failed() {
			return
		}
		switch {
		case total == 0:
			stats.empty++
		case q.Offset >= int(total):
			stats.pastEnd++
		case q.Offset+q.Limit < int(total):
			stats.partial++
		}
		if q.HasVisitor && total > 0 {
			stats.visitor++
		}

		wantCount := int64(len(m.match(q.Dataset, q.Name, "", false, q.From, q.To)))
		gotCount, err := db.Count(q.Dataset, q.Name, q.From, q.To)
		if err != nil {
			t.Fatal(err)
		}
		if gotCount != wantCount {
			t.Fatalf("query %d: Count(%d, %q, %d, %d) = %d, want %d", i, q.Dataset, q.Name, q.From, q.To, gotCount, wantCount)
		}
	}
}

// checkList compares one List call with the model.
func checkList(t *testing.T, db *DB, m *model, q ListQuery, what string) {
	t.Helper()
	got, gotTotal, err := db.List(q)
	if err != nil {
		t.Fatalf("%s: List(%+v): %v", what, q, err)
	}
	want, wantTotal := m.list(q)
	if gotTotal != wantTotal {
		t.Errorf("%s: List(%+v) total = %d, want %d", what, q, gotTotal, wantTotal)
	}
	if len(got) != len(want) {
		t.Errorf("%s: List(%+v) returned %d events, want %d", what, q, len(got), len(want))
		return
	}
	for j := range got {
		if !sameEvent(&got[j], &want[j]) {
			t.Fatalf("%s: List(%+v)[%d]:\n got %+v\nwant %+v", what, q, j, got[j], want[j])
		}
	}
}

func TestListEdgeCasesMatchModel(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	db, m := buildModelDB(t, r, 600, true)

	// The most shared millisecond of dataset 1: ties order by id desc.
	byTS := map[int64]int{}
	for _, e := range m.events[1] {
		byTS[e.Timestamp]++
	}
	var tied int64
	for ts, n := range byTS {
		if n > byTS[tied] || (n == byTS[tied] && ts < tied) {
			tied = ts
		}
	}
	if byTS[tied] < 3 {
		t.Fatalf("no millisecond with several events (best %d)", byTS[tied])
	}
	first := slices.MinFunc(m.events[1], func(a, b Event) int { return cmp.Compare(a.Timestamp, b.Timestamp) }).Timestamp
	last := slices.MaxFunc(m.events[1], func(a, b Event) int { return cmp.Compare(a.Timestamp, b.Timestamp) }).Timestamp

	tests := []struct {
		name string
		q    ListQuery
	}{
		{"everything", ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 100}},
		{"everything second page", ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 100, Offset: 100}},
		{"to max-1", ListQuery{Dataset: 1, To: math.MaxInt64 - 1, Limit: 7}},
		{"tied millisecond", ListQuery{Dataset: 1, From: tied, To: tied, Limit: 100}},
		{"tied millisecond paged", ListQuery{Dataset: 1, From: tied, To: tied, Limit: 1, Offset: 1}},
		{"before tied millisecond", ListQuery{Dataset: 1, From: 0, To: tied - 1, Limit: 100}},
		{"after tied millisecond", ListQuery{Dataset: 1, From: tied + 1, To: math.MaxInt64, Limit: 100}},
		{"first event only", ListQuery{Dataset: 1, From: first, To: first, Limit: 100}},
		{"last event only", ListQuery{Dataset: 1, From: last, To: last, Limit: 100}},
		{"nothing before first", ListQuery{Dataset: 1, From: 0, To: first - 1, Limit: 100}},
		{"nothing after last", ListQuery{Dataset: 1, From: last + 1, To: math.MaxInt64, Limit: 100}},
		{"offset past end", ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 10, Offset: 100000}},
		{"visitor prefix v1", ListQuery{Dataset: 1, HasVisitor: true, VisitorID: "v1", To: math.MaxInt64, Limit: 100}},
		{"visitor and name", ListQuery{Dataset: 1, HasVisitor: true, VisitorID: "v10", Name: "a", To: math.MaxInt64, Limit: 100}},
		{"visitor and name paged", ListQuery{Dataset: 1, HasVisitor: true, VisitorID: "v3", Name: "ab", To: math.MaxInt64, Limit: 2, Offset: 3}},
		{"name a is not ab", ListQuery{Dataset: 1, Name: "a", To: math.MaxInt64, Limit: 100}},
		{"whole days", ListQuery{Dataset: 1, From: floorTo(first, dayMs) + dayMs, To: floorTo(first, dayMs) + 2*dayMs - 1, Limit: 50}},
		{"empty dataset", ListQuery{Dataset: 9, To: math.MaxInt64, Limit: 100}},
		{"dataset 0", ListQuery{Dataset: 0, To: math.MaxInt64, Limit: 100}},
		{"dataset 2", ListQuery{Dataset: 2, To: math.MaxInt64, Limit: 100, Offset: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkList(t, db.DB, m, tc.q, tc.name) })
	}

	t.Run("count of an empty or reversed range", func(t *testing.T) {
		for _, r := range [][2]int64{{tied, tied - 1}, {last, first}, {math.MaxInt64, 0}} {
			n, err := db.Count(1, "", r[0], r[1])
			if err != nil || n != 0 {
				t.Errorf("Count(1, \"\", %d, %d) = %d, %v; want 0", r[0], r[1], n, err)
			}
		}
	})

	t.Run("dataset isolation", func(t *testing.T) {
		own := map[ID]bool{}
		for _, e := range m.events[1] {
			own[e.ID] = true
		}
		seen := 0
		for off := 0; ; off += 100 {
			page, total, err := db.List(ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 100, Offset: off})
			if err != nil {
				t.Fatal(err)
			}
			if total != int64(len(m.events[1])) {
				t.Fatalf("total = %d, want %d", total, len(m.events[1]))
			}
			for _, e := range page {
				if !own[e.ID] {
					t.Fatalf("event %x of another dataset listed in dataset 1", e.ID)
				}
				seen++
			}
			if len(page) < 100 {
				break
			}
		}
		if seen != len(m.events[1]) {
			t.Errorf("paged through %d events, want %d", seen, len(m.events[1]))
		}
		for _, e := range m.events[2] {
			if _, err := db.GetEvent(1, e.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("GetEvent(1, id of dataset 2) = %v, want ErrNotFound", err)
			}
		}
	})

	// Bounds outside the index: List must agree with Count, which clamps
	// from to 0 and counts nothing for to < from. A date-only from of 1969
	// gives a negative From.
	t.Run("bounds before the epoch or reversed", func(t *testing.T) {
		for _, b := range [][2]int64{
			{-1, last},
			{-dayMs, math.MaxInt64},
			{math.MinInt64, first},
			{-365 * dayMs, -dayMs}, // wholly before the epoch
			{math.MinInt64, -1},
			{last, first}, // reversed
			{0, -5},       // reversed, to before the epoch
			{first, first - 1},
		} {
			q := ListQuery{Dataset: 1, From: b[0], To: b[1], Limit: 5}
			checkList(t, db.DB, m, q, fmt.Sprintf("from %d to %d", b[0], b[1]))
		}
	})
}

func TestGetEvent(t *testing.T) {
	db := openTestDB(t, "")
	e1 := Event{ID: testID(1), Name: "click", VisitorID: "v", HasVisitor: true, Timestamp: 10, CreatedAt: 11,
		Properties: []byte(`{"a":1}`)}
	e2 := Event{ID: testID(2), Name: "view", Timestamp: 20, CreatedAt: 21, Properties: []byte(`{}`)}
	commitEvents(t, db.DB, 1, &e1)
	commitEvents(t, db.DB, 2, &e2)

	tests := []struct {
		name    string
		ds      uint32
		id      ID
		want    *Event
		wantErr error
	}{
		{"found", 1, e1.ID, &e1, nil},
		{"found other dataset", 2, e2.ID, &e2, nil},
		{"unknown id", 1, testID(3), nil, ErrNotFound},
		{"zero id", 1, ID{}, nil, ErrNotFound},
		{"id of dataset 2 in dataset 1", 1, e2.ID, nil, ErrNotFound},
		{"id of dataset 1 in dataset 2", 2, e1.ID, nil, ErrNotFound},
		{"unknown dataset", 3, e1.ID, nil, ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := db.GetEvent(tc.ds, tc.id)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("GetEvent = %v, want %v", err, tc.wantErr)
			}
			if tc.want != nil && !sameEvent(&got, tc.want) {
				t.Errorf("GetEvent:\n got %+v\nwant %+v", got, *tc.want)
			}
		})
	}
}

func TestEventsAfter(t *testing.T) {
	db := openTestDB(t, "")
	// Dataset 1 holds ids 10..19 (timestamps deliberately out of id order);
	// its neighbours 0 and 2 hold other ids.
	var ds1 []*Event
	for i := range 10 {
		ds1 = append(ds1, &Event{ID: testID(uint64(10 + i)), Name: "e", Timestamp: int64(1000 - i), CreatedAt: 1})
	}
	commitEvents(t, db.DB, 1, ds1[:5]...)
	commitEvents(t, db.DB, 1, ds1[5:]...)
	commitEvents(t, db.DB, 0, &Event{ID: testID(5), Name: "e"}, &Event{ID: testID(30), Name: "e"})
	commitEvents(t, db.DB, 2, &Event{ID: testID(1), Name: "e"}, &Event{ID: testID(25), Name: "e"})

	ids := func(from, to uint64) []ID {
		var out []ID
		for n := from; n <= to; n++ {
			out = append(out, testID(n))
		}
		return out
	}
	beforeFirst := testID(10)
	beforeFirst[15]-- // just below id 10, not an event

	tests := []struct {
		name   string
		after  ID
		limit  int
		stopAt int // fn returns false after this many events; 0 never
		want   []ID
	}{
		{"from the start", ID{}, 100, 0, ids(10, 19)},
		{"strictly after", testID(13), 100, 0, ids(14, 19)},
		{"limit", testID(11), 3, 0, ids(12, 14)},
		{"limit 1", ID{}, 1, 0, ids(10, 10)},
		{"limit 0", ID{}, 0, 0, nil},
		{"after a missing id", beforeFirst, 2, 0, ids(10, 11)},
		{"after the last", testID(19), 100, 0, nil},
		{"after everything", maxID(), 100, 0, nil},
		{"fn stops", ID{}, 100, 4, ids(10, 13)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []ID
			err := db.EventsAfter(1, tc.after, tc.limit, func(e *Event) bool {
				got = append(got, e.ID)
				if e.Name != "e" || e.CreatedAt != 1 {
					t.Errorf("event %x decoded wrongly: %+v", e.ID, *e)
				}
				return tc.stopAt == 0 || len(got) < tc.stopAt
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("EventsAfter(%x, %d) = %x, want %x", tc.after, tc.limit, got, tc.want)
			}
		})
	}
}

// TestListMatching: a property filter pages and totals only the matching
// events, newest first, within the name index when one is given, and
// refuses to read more than MaxScan records.
func TestListMatching(t *testing.T) {
	db := openTestDB(t, "")
	b := db.NewBatch()
	for i := 1; i <= 30; i++ {
		plan := "free"
		if i%3 == 0 {
			plan = "pro"
		}
		name := "signup"
		if i%2 == 0 {
			name = "login"
		}
		e := Event{ID: testID(uint64(i)), Name: name, Timestamp: int64(planDay) + int64(i)*1000,
			Properties: []byte(`{"plan":"` + plan + `"}`)}
		b.AddEvent(1, &e)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	pro := func(p []byte) bool { return string(p) == `{"plan":"pro"}` }
	tests := []struct {
		name        string
		q           ListQuery
		wantTotal   int64
		wantFirstTS int64 // seconds after planDay of the first event of the page
		wantLen     int
	}{
		{"all names", ListQuery{Limit: 4}, 10, 30, 4},
		{"offset", ListQuery{Limit: 4, Offset: 8}, 10, 6, 2},
		{"one name", ListQuery{Name: "signup", Limit: 10}, 5, 27, 5},
	}
	for _, tc := range tests {
		q := tc.q
		q.Dataset, q.To, q.Match, q.MaxScan = 1, math.MaxInt64, pro, 1000
		events, total, err := db.List(q)
		if err != nil || total != tc.wantTotal || len(events) != tc.wantLen {
			t.Fatalf("%s: %d events, total %d, %v", tc.name, len(events), total, err)
		}
		if first := (events[0].Timestamp - int64(planDay)) / 1000; first != tc.wantFirstTS {
			t.Errorf("%s: first event at +%d s, want +%d", tc.name, first, tc.wantFirstTS)
		}
	}
	if _, _, err := db.List(ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 10, Match: pro, MaxScan: 29}); !errors.Is(err, ErrScanLimit) {
		t.Fatalf("30 events with MaxScan 29: %v", err)
	}
}

// A where= filter reads each record in place and decodes only the events it
// keeps: lists and aggregates over records at their ids' times (read from
// the time index itself) and displaced ones (through their Z keys) give
// the matched events whole.
func TestMatchDecodesKeptEvents(t *testing.T) {
	db := openTestDB(t, "")
	b := db.NewBatch()
	base := int64(planDay)
	for i := int64(1); i <= 40; i++ {
		ts := base + i*1000
		id := IDAt(ts) // at its id's time
		if i%2 == 0 {
			id = IDAt(ts + 500) // displaced: sent half a second before it was recorded
		}
		plan := "free"
		if i%4 < 2 {
			plan = "pro"
		}
		e := Event{ID: id, Name: "signup", VisitorID: fmt.Sprintf("v%d", i), HasVisitor: true, Timestamp: ts,
			Properties: []byte(`{"plan":"` + plan + `","n":` + fmt.Sprint(i) + `}`)}
		b.AddEvent(1, &e)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	pro := func(p []byte) bool { v, _ := lookupMember(p, "plan"); return string(v) == `"pro"` }

	events, total, err := db.List(ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 100, Match: pro, MaxScan: 1000})
	if err != nil || total != 20 || len(events) != 20 {
		t.Fatalf("List: %d events, total %d, %v; want 20", len(events), total, err)
	}
	displacedSeen := false
	for _, e := range events {
		i := (e.Timestamp - base) / 1000
		if e.Name != "signup" || e.VisitorID != fmt.Sprintf("v%d", i) || string(e.Properties) != `{"plan":"pro","n":`+fmt.Sprint(i)+`}` {
			t.Errorf("event at +%d s decoded as %+v", i, e)
		}
		displacedSeen = displacedSeen || displaced(e.Timestamp, e.ID)
	}
	if !displacedSeen {
		t.Error("no displaced event among the matches: the test does not reach the Z keys")
	}

	aggs, err := db.Aggregate(AggQuery{Dataset: 1, Bounds: []int64{base, base + 20_500, base + 60_000}, Match: pro, Unique: true, Property: "n", MaxScan: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// pro: i%4 in {0,1}: 1,4,5,8,9,12,13,16,17,20 before +20.5 s, the other ten after.
	if aggs[0].Count != 10 || aggs[1].Count != 10 || aggs[0].Sum != 105 || aggs[1].Sum != 305 {
		t.Errorf("Aggregate: counts %d, %d, sums %v, %v; want 10, 10, 105, 305", aggs[0].Count, aggs[1].Count, aggs[0].Sum, aggs[1].Sum)
	}
	if u := aggs[0].Sketch.Estimate(); math.Round(u) != 10 {
		t.Errorf("Aggregate: %v unique visitors in the first bucket, want 10", u)
	}
}

// A record erased between a list's index entry and its read (an erasure
// running beside the list) is skipped, as every other reader skips it,
// not answered with ErrNotFound.
func TestListSkipsARecordErasedUnderIt(t *testing.T) {
	db := openTestDB(t, "")
	var evs []*Event
	for n := uint64(1); n <= 3; n++ {
		evs = append(evs, &Event{ID: testID(n), Name: "click", VisitorID: "v", HasVisitor: true,
			Timestamp: int64(n) * 10, CreatedAt: int64(n) * 10, Properties: []byte(`{}`)})
	}
	commitEvents(t, db.DB, 1, evs...)
	// The index entry stays, the record goes: the state a list meets when
	// an erasure deletes the record after the list's index was opened.
	if err := db.db.Delete(displacedKey(nil, 1, testID(2)), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for _, q := range []ListQuery{
		{Dataset: 1, From: 0, To: math.MaxInt64, Limit: 10},
		{Dataset: 1, From: 0, To: math.MaxInt64, Limit: 10, VisitorID: "v", HasVisitor: true},
	} {
		page, total, err := db.List(q)
		if err != nil {
			t.Fatalf("List(visitor %q) = %v", q.VisitorID, err)
		}
		var got []ID
		for _, e := range page {
			got = append(got, e.ID)
		}
		if want := []ID{testID(3), testID(1)}; !slices.Equal(got, want) {
			t.Errorf("List(visitor %q) gives %v, want %v", q.VisitorID, got, want)
		}
		if q.HasVisitor && total != 2 {
			t.Errorf("List(visitor %q) total %d, want 2", q.VisitorID, total)
		}
	}
}
