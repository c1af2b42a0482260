package storage

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestTimeIterWalksBothFamilies: a timeIter over S keys, M keys and the M
// keys memory holds (over several of its cells, read one at a time) moves
// through them as one sorted index, every key under S and a key in both
// memory and Pebble once, in any sequence of First, Last, Next and Prev
// (direction changes, and so seeks, included), and within its bounds: keys
// of other datasets and out of range are not seen.
func TestTimeIterWalksBothFamilies(t *testing.T) {
	db := openTestDB(t, "")
	r := rand.New(rand.NewPCG(1, 2))
	inRange := map[string]bool{} // the S form of every key in range
	b := db.db.NewBatch()
	l := db.late
	l.mu.Lock()
	for i := range 300 {
		ts := int64(100_000 + r.IntN(50)*137) // over seven cells of memory
		id := idAt(int64(i), byte(i))
		k := recordKey(nil, 1, ts, id)
		switch r.IntN(4) {
		case 0: // S
			_ = b.Set(k, []byte("record"), nil)
		case 1: // M
			_ = b.Set(withPrefix(k, prefixRecord, prefixDisplacedMark), nil, nil)
		case 2: // memory
			l.insert(&pendingLate{ds: 1, ts: ts, id: id, name: "e"})
		default: // both: a cell being written
			_ = b.Set(withPrefix(k, prefixRecord, prefixDisplacedMark), nil, nil)
			l.insert(&pendingLate{ds: 1, ts: ts, id: id, name: "e"})
		}
		if ts >= 101_000 && ts <= 105_000 {
			inRange[string(k)] = true
		}
		// Neighbours that must stay out: another dataset, in every source.
		other := recordKey(nil, 2, ts, id)
		_ = b.Set(other, nil, nil)
		_ = b.Set(withPrefix(other, prefixRecord, prefixDisplacedMark), nil, nil)
		l.insert(&pendingLate{ds: 2, ts: ts, id: id, name: "e"})
	}
	l.mu.Unlock()
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, 0, len(inRange))
	for k := range inRange {
		want = append(want, []byte(k))
	}
	slices.SortFunc(want, bytes.Compare)
	lo, hi := rangeBounds(appendDataset(nil, prefixRecord, 1), 101_000, 105_000)
	it, err := db.openTime(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if len(it.srcs) != 3 {
		t.Fatalf("%d sources, want S, M and memory", len(it.srcs))
	}

	check := func(step int, op string, valid bool, pos int) {
		t.Helper()
		if wantValid := pos >= 0 && pos < len(want); valid != wantValid || it.Valid() != wantValid {
			t.Fatalf("step %d %s: valid %v/%v, want %v (position %d of %d)", step, op, valid, it.Valid(), wantValid, pos, len(want))
		}
		if !valid {
			return
		}
		if !bytes.Equal(it.Key(), want[pos]) {
			t.Fatalf("step %d %s: key %x, want %x", step, op, it.Key(), want[pos])
		}
		if isLate := string(it.Value()) != "record"; it.late() != isLate {
			t.Fatalf("step %d %s: late %v, want %v", step, op, it.late(), isLate)
		}
	}
	pos := -1
	for step := range 3000 {
		var op string
		var valid bool
		switch k := r.IntN(10); {
		case k == 0 || pos < 0 || pos >= len(want):
			if r.IntN(2) == 0 {
				op, valid, pos = "First", it.First(), 0
			} else {
				op, valid, pos = "Last", it.Last(), len(want)-1
			}
		case k < 6:
			op, valid = "Next", it.Next()
			pos++
		default:
			op, valid = "Prev", it.Prev()
			pos--
		}
		check(step, op, valid, pos)
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
}
