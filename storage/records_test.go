package storage

import (
	"errors"
	"testing"
)

// TestRecordReader: the reader answers as GetEvent does, for ids in and
// out of order, missing ids and another dataset's records.
func TestRecordReader(t *testing.T) {
	db := openTestDB(t, "")
	var events []*Event
	for n := uint64(1); n <= 20; n += 2 { // odd ids only
		events = append(events, &Event{ID: testID(n), Name: "e", VisitorID: "v", HasVisitor: true, Timestamp: int64(n), CreatedAt: 7, Properties: []byte(`{"n":1}`)})
	}
	commitEvents(t, db.DB, 1, events...)
	commitEvents(t, db.DB, 2, &Event{ID: testID(4), Name: "other", Timestamp: 4})
	r, err := db.NewRecordReader(1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, n := range []uint64{1, 3, 19, 2, 4, 7, 5, 21, 0, 11} {
		got, gotErr := r.Get(testID(n))
		want, wantErr := db.GetEvent(1, testID(n))
		if !errors.Is(gotErr, wantErr) || (wantErr == nil) != (n%2 == 1 && n < 20) {
			t.Fatalf("id %d: err %v, GetEvent's %v", n, gotErr, wantErr)
		}
		if wantErr == nil && !sameEvent(&got, &want) {
			t.Fatalf("id %d: %+v, GetEvent's %+v", n, got, want)
		}
	}
	// Committed after the reader opened (an index scan opened later finds
	// it): read as GetEvent reads it, not missing.
	late := &Event{ID: testID(40), Name: "late", Timestamp: 40, CreatedAt: 7}
	commitEvents(t, db.DB, 1, late)
	if got, err := r.Get(late.ID); err != nil || !sameEvent(&got, late) {
		t.Fatalf("an event committed after the reader opened: %+v, %v", got, err)
	}
}
