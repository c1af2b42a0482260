package storage

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestTimeIterWalksBothFamilies: a timeIter over S and M keys moves
// through them as one sorted index, every key under S, in any sequence of
// First, Last, Next and Prev (direction changes included), and within its
// bounds: keys of other datasets and out of range are not seen.
func TestTimeIterWalksBothFamilies(t *testing.T) {
	db := openTestDB(t, "")
	r := rand.New(rand.NewPCG(1, 2))
	var want [][]byte // the S form of every key in range, sorted
	b := db.db.NewBatch()
	for i := range 200 {
		ts := int64(1000 + r.IntN(50))
		id := idAt(int64(i), byte(i))
		p := byte(prefixRecord)
		if r.IntN(2) == 0 {
			p = prefixDisplacedMark
		}
		k := append(appendTS(appendDataset(nil, p, 1), ts), id[:]...)
		_ = b.Set(k, []byte{p}, nil)
		if ts >= 1010 && ts <= 1040 {
			want = append(want, withPrefix(k, p, prefixRecord))
		}
		// Neighbours that must stay out: another dataset, both families.
		_ = b.Set(withPrefix(appendTS(appendDataset(nil, prefixRecord, 2), ts), prefixRecord, p), nil, nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, bytes.Compare)
	lo, hi := rangeBounds(appendDataset(nil, prefixRecord, 1), 1010, 1040)
	it, err := openTime(db.db, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()

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
		if late := it.Value()[0] == prefixDisplacedMark; it.late() != late {
			t.Fatalf("step %d %s: late %v, want %v", step, op, it.late(), late)
		}
	}
	pos := -1
	for step := range 2000 {
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
