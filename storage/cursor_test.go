package storage

import (
	"errors"
	"testing"
)

func TestCursorRecordRoundTrip(t *testing.T) {
	for _, c := range []Cursor{
		{Name: "a", Position: testID(1), Delivered: testID(3), UpdatedAt: 42},
		{Name: "sink.v2-x_y", Position: testID(7), Delivered: testID(7), Expired: true, UpdatedAt: 1 << 40},
		{Name: "zero"},
	} {
		got, err := decodeCursor(c.Name, encodeCursor(&c))
		if err != nil || got != c {
			t.Fatalf("%+v: got %+v, %v", c, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {1}, make([]byte, cursorRecordLen+1), append([]byte{2}, make([]byte, cursorRecordLen-1)...)} {
		if _, err := decodeCursor("x", bad); err == nil {
			t.Fatalf("decoded %x", bad)
		}
	}
}

func TestCursorStore(t *testing.T) {
	db := openTestDB(t, "")
	if _, err := db.GetCursor(1, "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing cursor: %v", err)
	}
	// Ten events at ms 1..10 in dataset 1, timestamps 100*n.
	for n := uint64(1); n <= 10; n++ {
		commitEvents(t, db.DB, 1, &Event{ID: testID(n), Name: "e", Timestamp: int64(100 * n)})
	}
	commitEvents(t, db.DB, 2, &Event{ID: testID(5), Name: "other", Timestamp: 1})
	for _, c := range []Cursor{{Name: "b", Position: testID(2)}, {Name: "a", Position: testID(6)}, {Name: "c", Position: testID(9)}} {
		if err := db.PutCursor(1, &c, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.PutCursor(2, &Cursor{Name: "a"}, true); err != nil {
		t.Fatal(err)
	}
	cs, err := db.ListCursors(1, 10)
	if err != nil || len(cs) != 3 || cs[0].Name != "a" || cs[1].Name != "b" || cs[2].Name != "c" {
		t.Fatalf("list: %+v %v", cs, err)
	}

	for _, tc := range []struct {
		after, upTo uint64
		limit, n    int
		more        bool
	}{
		{0, 10, 100, 10, false},
		{2, 10, 100, 8, false},
		{2, 6, 100, 4, false},
		{2, 10, 3, 3, true},
		{10, 10, 100, 0, false},
		{6, 2, 100, 0, false},
	} {
		n, more, err := db.CountEventsAfter(1, testID(tc.after), testID(tc.upTo), tc.limit)
		if err != nil || n != tc.n || more != tc.more {
			t.Fatalf("count after %d up to %d limit %d: %d %v %v, want %d %v", tc.after, tc.upTo, tc.limit, n, more, err, tc.n, tc.more)
		}
	}
	if e, ok, err := db.FirstEventAfter(1, testID(4)); err != nil || !ok || e.ID != testID(5) {
		t.Fatalf("first after: %v %v %v", e.ID, ok, err)
	}

	// A sweep of timestamps before 650 deletes ids 1..6: "b" (at 2) would
	// skip 3..6, "a" (at 6) and "c" (at 9) skip nothing.
	maxID, ok, err := db.MaxIDBefore(1, 650)
	if err != nil || !ok || maxID != testID(6) {
		t.Fatalf("max id before: %x %v %v", maxID, ok, err)
	}
	names, err := db.ExpireCursors(1, maxID, 99)
	if err != nil || len(names) != 1 || names[0] != "b" {
		t.Fatalf("expired %v %v", names, err)
	}
	if c, _ := db.GetCursor(1, "b"); !c.Expired || c.UpdatedAt != 99 || c.Position != testID(2) {
		t.Fatalf("b after expiry: %+v", c)
	}
	if names, err := db.ExpireCursors(1, maxID, 100); err != nil || len(names) != 0 {
		t.Fatalf("second expiry: %v %v", names, err)
	}

	// Cursors go with their dataset, and only theirs.
	if err := db.DeleteDatasets(1); err != nil {
		t.Fatal(err)
	}
	if cs, _ := db.ListCursors(1, 10); len(cs) != 0 {
		t.Fatalf("cursors of a deleted dataset: %+v", cs)
	}
	if _, err := db.GetCursor(2, "a"); err != nil {
		t.Fatalf("other dataset's cursor: %v", err)
	}
	if err := db.DeleteCursor(2, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetCursor(2, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted cursor: %v", err)
	}
}

// BenchmarkPutCursor is the cost of saving one acknowledgement, with and
// without fsync (docs/decisions.md).
func BenchmarkPutCursor(b *testing.B) {
	for _, sync := range []bool{false, true} {
		name := "nosync"
		if sync {
			name = "sync"
		}
		b.Run(name, func(b *testing.B) {
			db := openTestDB(b, "")
			c := Cursor{Name: "sink"}
			for i := 0; b.Loop(); i++ {
				c.Position = testID(uint64(i))
				if err := db.PutCursor(1, &c, sync); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
