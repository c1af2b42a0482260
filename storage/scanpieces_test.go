package storage

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
)

func TestCutBuckets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		counts []int64 // events per bucket
		pieces int
		want   []int
	}{
		{"even, two pieces", []int64{10, 10, 10, 10}, 2, []int{2}},
		{"even, three pieces", []int64{10, 10, 10, 10, 10, 10}, 3, []int{2, 4}},
		{"one piece", []int64{10, 10}, 1, nil},
		{"no pieces", []int64{10, 10}, 0, nil},
		{"one bucket", []int64{100}, 2, nil},
		{"more pieces than buckets", []int64{5, 5}, 4, []int{1}},
		{"empty buckets first", []int64{0, 0, 10, 10}, 2, []int{3}},
		{"uneven, three pieces", []int64{30, 0, 0, 30, 30}, 3, []int{1, 4}},
		{"the events in the last bucket", []int64{0, 0, 0, 50}, 2, nil},
		{"one bucket holds most", []int64{1, 100}, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var total int64
			for _, c := range tc.counts {
				total += c
			}
			before := func(k int) (int64, error) {
				var n int64
				for _, c := range tc.counts[:k] {
					n += c
				}
				return n, nil
			}
			got, err := cutBuckets(len(tc.counts), tc.pieces, total, before)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cutBuckets(%v, %d) = %v, %v; want %v", tc.counts, tc.pieces, got, err, tc.want)
			}
		})
	}
	t.Run("a count fails", func(t *testing.T) {
		bad := errors.New("count failed")
		_, err := cutBuckets(4, 2, 40, func(int) (int64, error) { return 0, bad })
		if !errors.Is(err, bad) {
			t.Errorf("err = %v, want %v", err, bad)
		}
	})
}

// commitPieceFixture stores hours events an hour in ds 1 from planDay on,
// every other one displaced (its record under Z, its time index key in
// memory), every seventh a bot, with fractional amounts; it returns the
// hourly bounds.
func commitPieceFixture(t *testing.T, db testDB, hours, perHour int) []int64 {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	base := int64(planDay)
	bounds := []int64{base}
	for h := range hours {
		for i := range perHour {
			n := h*perHour + i
			ts := base + int64(h)*hourMs + int64(i)*1000
			id := IDAt(ts)
			if n%2 == 1 {
				id = IDAt(ts + 700)
			}
			props := fmt.Sprintf(`{"plan":%q,"amount":%d.%d}`, []string{"pro", "free", "team"}[n%3], n%17, n%10)
			if n%7 == 0 {
				props = `{"$bot":true,"plan":"pro","amount":1.5}`
			}
			name := []string{"a", "b"}[n%2]
			b.AddEvent(1, &Event{ID: id, Name: name, VisitorID: fmt.Sprintf("v%d", n%40), HasVisitor: true, Timestamp: ts, CreatedAt: ts, Properties: []byte(props)})
		}
		bounds = append(bounds, base+int64(h+1)*hourMs)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if db.late.n == 0 {
		t.Fatal("no displaced event is held in memory: the test does not reach memory's pieces")
	}
	return bounds
}

// heldProps are the properties of the event holdHeldEvent holds.
const heldProps = `{"plan":"pro","amount":0.25}`

// holdHeldEvent holds, until the test ends, a commit of one displaced
// event named "a" in the last hour of bounds, after Pebble's part: its
// time index key is in no memory yet, only in the commit in flight.
func holdHeldEvent(t *testing.T, db testDB, bounds []int64) {
	t.Helper()
	last := bounds[len(bounds)-2] + 1234
	release, done := holdNextCommit(t, db, 1, &Event{ID: IDAt(last + 900), Name: "a", Timestamp: last, CreatedAt: last,
		Properties: []byte(heldProps)}, stagePublished)
	t.Cleanup(func() {
		release()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// A where= aggregate read in pieces on several goroutines gives what one
// reader gives, to the last bit of the sums, with and without a name, bots
// left out or counted, events in Pebble, under Z keys and in memory, and
// the displaced event of a commit still in flight, in the last piece.
func TestMatchAggregateInPieces(t *testing.T) {
	db := openTestDB(t, "")
	bounds := commitPieceFixture(t, db, 6, 50)
	holdHeldEvent(t, db, bounds)
	pro := func(p []byte) bool { v, _ := lookupMember(p, "plan"); return string(v) == `"pro"` }
	aggregate := func(q AggQuery, pieces int) []Agg {
		t.Helper()
		db.scanPieces, db.pieceEvents = pieces, 1
		aggs, err := db.Aggregate(q)
		if err != nil {
			t.Fatal(err)
		}
		return aggs
	}
	for _, q := range []AggQuery{
		{Name: "", Bots: false},
		{Name: "a", Bots: false},
		{Name: "", Bots: true},
	} {
		q.Dataset, q.Bounds, q.Match, q.Unique, q.Property, q.MaxScan = 1, bounds, pro, true, "amount", 1000
		t.Run(fmt.Sprintf("name %q bots %v", q.Name, q.Bots), func(t *testing.T) {
			one := aggregate(q, 1)
			var count int64
			for _, a := range one {
				count += a.Count
			}
			if count < 30 || one[len(one)-1].Count == 0 {
				t.Fatalf("one reader counted %d events, %d in the last hour: the fixture matches too little", count, one[len(one)-1].Count)
			}
			for _, pieces := range []int{2, 3, 6} {
				got := aggregate(q, pieces)
				for i := range one {
					a, b := one[i], got[i]
					if a.Count != b.Count || a.N != b.N || a.Bots != b.Bots || a.Sum != b.Sum || a.Sketch.Estimate() != b.Sketch.Estimate() {
						t.Errorf("%d pieces, hour %d: %+v (%v visitors), one reader %+v (%v)", pieces, i, b, b.Sketch.Estimate(), a, a.Sketch.Estimate())
					}
				}
			}
		})
	}
	t.Run("the held commit counts", func(t *testing.T) {
		q := AggQuery{Dataset: 1, Bounds: bounds, Name: "a", Match: func(p []byte) bool { return string(p) == heldProps }}
		for _, pieces := range []int{1, 3} {
			if got := aggregate(q, pieces); got[len(got)-1].Count != 1 {
				t.Errorf("%d pieces: the last hour counts %d events of the held commit, want 1", pieces, got[len(got)-1].Count)
			}
		}
	})
	t.Run("past MaxScan", func(t *testing.T) {
		db.scanPieces, db.pieceEvents = 3, 1
		if _, err := db.Aggregate(AggQuery{Dataset: 1, Bounds: bounds, Match: pro, MaxScan: 100}); !errors.Is(err, ErrScanLimit) {
			t.Errorf("err = %v, want ErrScanLimit", err)
		}
	})
}

// The pieces openPieces cuts a range into hold, between them, every entry
// of the range once, each in the piece of its time.
func TestOpenPieces(t *testing.T) {
	db := openTestDB(t, "")
	bounds := commitPieceFixture(t, db, 4, 30)
	from, to := bounds[0], bounds[len(bounds)-1]-1
	for _, name := range []string{"", "b"} {
		whole, err := db.openPieces(1, name, from, to, nil)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		if err := eachEntry(whole[0], func(ts int64, _ ID, _ []byte) error { want = append(want, ts); return nil }); err != nil {
			t.Fatal(err)
		}
		cuts := []int64{bounds[1], bounds[1] + 17_500, bounds[3]}
		its, err := db.openPieces(1, name, from, to, cuts)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for i, it := range its {
			lo, hi := from, to
			if i > 0 {
				lo = cuts[i-1]
			}
			if i < len(cuts) {
				hi = cuts[i] - 1
			}
			if err := eachEntry(it, func(ts int64, _ ID, _ []byte) error {
				if ts < lo || ts > hi {
					t.Errorf("name %q: piece %d [%d, %d] holds an entry at %d", name, i, lo, hi, ts)
				}
				got = append(got, ts)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("name %q: the pieces hold %d entries, the whole range %d", name, len(got), len(want))
		}
	}
}

// A where= list read in pieces gives the page and the total one reader
// gives: pages within a piece, across two, past the matches, and with a
// name; the event of a commit in flight counts.
func TestListMatchingInPieces(t *testing.T) {
	db := openTestDB(t, "")
	bounds := commitPieceFixture(t, db, 6, 50)
	holdHeldEvent(t, db, bounds)
	pro := func(p []byte) bool { v, _ := lookupMember(p, "plan"); return string(v) == `"pro"` }
	list := func(q ListQuery, pieces int) ([]ID, int64) {
		t.Helper()
		db.scanPieces, db.pieceEvents = pieces, 1
		events, total, err := db.List(q)
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]ID, len(events))
		for i, e := range events {
			ids[i] = e.ID
		}
		return ids, total
	}
	for _, name := range []string{"", "a"} {
		for _, page := range [][2]int{{0, 10}, {35, 20}, {95, 20}, {0, 100}, {200, 10}, {990, 10}} {
			q := ListQuery{Dataset: 1, Name: name, From: bounds[0] + 17, To: math.MaxInt64, Offset: page[0], Limit: page[1], Match: pro, MaxScan: 1000}
			want, wantTotal := list(q, 1)
			if wantTotal < 50 {
				t.Fatalf("name %q: one reader matched %d events: the fixture matches too little", name, wantTotal)
			}
			for _, pieces := range []int{2, 3, 6} {
				if got, total := list(q, pieces); total != wantTotal || !reflect.DeepEqual(got, want) {
					t.Errorf("name %q, offset %d, limit %d, %d pieces: %d events, total %d; one reader %d, %d (or not in its order)",
						name, page[0], page[1], pieces, len(got), total, len(want), wantTotal)
				}
			}
		}
	}
	t.Run("the held commit counts", func(t *testing.T) {
		q := ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 5, MaxScan: 1000,
			Match: func(p []byte) bool { return string(p) == heldProps }}
		for _, pieces := range []int{1, 3} {
			if got, total := list(q, pieces); total != 1 || len(got) != 1 {
				t.Errorf("%d pieces: %d events, total %d; want the held one", pieces, len(got), total)
			}
		}
	})
	t.Run("past MaxScan", func(t *testing.T) {
		db.scanPieces, db.pieceEvents = 3, 1
		if _, _, err := db.List(ListQuery{Dataset: 1, To: math.MaxInt64, Limit: 5, Match: pro, MaxScan: 100}); !errors.Is(err, ErrScanLimit) {
			t.Errorf("err = %v, want ErrScanLimit", err)
		}
	})
}
