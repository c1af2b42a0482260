package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/eventd/eventd/storage/diskspace"
)

// TestRecordReaderSteps: a reader that steps to the next records instead
// of seeking (seekNexts) answers as GetEvent does on walks with small and
// large gaps, missing ids, backward jumps and records committed after it
// opened, forward and backward, with displaced records (Z) and records at
// their id's time (S).
func TestRecordReaderSteps(t *testing.T) {
	db := openTestDB(t, "")
	var events []*Event
	for n := uint64(2); n <= 400; n += 2 { // even ids only; every third displaced
		e := &Event{ID: idAt(planDay+int64(n), 1), Name: "e", Timestamp: planDay + int64(n), CreatedAt: 7, Properties: []byte(`{"n":1}`)}
		if n%3 == 0 {
			e.Timestamp -= 5
		}
		events = append(events, e)
	}
	commitEvents(t, db.DB, 1, events...)
	r, err := db.NewRecordReader(1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	late := &Event{ID: idAt(planDay+500, 1), Name: "late", Timestamp: planDay + 500, CreatedAt: 7}
	commitEvents(t, db.DB, 1, late)
	var walk []uint64
	for n := uint64(2); n <= 60; n += 2 { // adjacent: steps
		walk = append(walk, n)
	}
	for n := uint64(80); n <= 400; n += 20 { // far apart: seeks
		walk = append(walk, n)
	}
	for n := uint64(100); n <= 300; n++ { // adjacent again, odd ones missing
		walk = append(walk, n)
	}
	for n := uint64(398); n >= 200; n-- { // backward, as a list walks
		walk = append(walk, n)
	}
	for n := uint64(190); n >= 30; n -= 20 { // backward, far apart
		walk = append(walk, n)
	}
	walk = append(walk, 10, 12, 500, 501, 14)
	ts := map[uint64]int64{}
	for _, e := range append(events, late) {
		ts[uint64(IDTime(e.ID)-planDay)] = e.Timestamp
	}
	for _, n := range walk {
		id := idAt(planDay+int64(n), 1)
		at, ok := ts[n]
		if !ok {
			at = planDay + int64(n)
		}
		got, gotErr := r.Get(at, id)
		want, wantErr := db.GetEvent(1, id)
		if !errors.Is(gotErr, wantErr) || (wantErr == nil) != ok {
			t.Fatalf("id %d: err %v, GetEvent's %v", n, gotErr, wantErr)
		}
		if wantErr == nil && !sameEvent(&got, &want) {
			t.Fatalf("id %d: %+v, GetEvent's %+v", n, got, want)
		}
	}
}

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
		got, gotErr := r.Get(int64(n), testID(n))
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
	if got, err := r.Get(late.Timestamp, late.ID); err != nil || !sameEvent(&got, late) {
		t.Fatalf("an event committed after the reader opened: %+v, %v", got, err)
	}
}

// idAt is an id recorded at Unix millisecond ms, n-th of that millisecond.
func idAt(ms int64, n byte) ID {
	id := IDAt(ms)
	id[15] = n
	return id
}

// mixedEvents are events recorded at ms 1000..1009 of dataset 1, some at
// their id's millisecond (live traffic, no Z key) and some displaced: a
// client time a little earlier, later, far in the past (a backfill) and
// far ahead, several sharing a millisecond with others.
func mixedEvents() []*Event {
	var evs []*Event
	for i, ts := range []int64{1000, 995, 1002, 1003, 1, 1005, 1005, 1_000_000, 1003, 1009, 1009, 1002} {
		id := idAt(1000+int64(i)%10, byte(i))
		evs = append(evs, &Event{ID: id, Name: "e", Timestamp: ts, CreatedAt: IDTime(id)})
	}
	return evs
}

// TestEachByIDMergesDisplaced: reads in record (id) order give every
// event of an id range once, in id order, whether its record sits at its
// id's millisecond or is displaced, for every bound and limit.
func TestEachByIDMergesDisplaced(t *testing.T) {
	db := openTestDB(t, "")
	evs := mixedEvents()
	commitEvents(t, db.DB, 1, evs...)
	commitEvents(t, db.DB, 2, &Event{ID: idAt(1004, 0), Name: "other", Timestamp: 1004}) // another dataset's
	ids := make([]ID, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	slices.SortFunc(ids, func(a, b ID) int { return compareIDs(a, b) })
	bounds := append([]ID{{}, idAt(1003, 0), idAt(1005, 255), lastID}, ids...)
	for _, after := range bounds {
		for _, upTo := range bounds {
			var want []ID
			for _, id := range ids {
				if compareIDs(id, after) > 0 && compareIDs(id, upTo) <= 0 {
					want = append(want, id)
				}
			}
			var got []ID
			if err := db.eachByID(1, after, upTo, true, func(id ID, record []byte) bool {
				e, err := DecodeEvent(id, record)
				if err != nil || e.Name != "e" {
					t.Fatalf("record of %x: %+v, %v", id, e, err)
				}
				got = append(got, id)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("after %x up to %x: %x, want %x", after, upTo, got, want)
			}
			for _, limit := range []int{0, 1, 3, 100} {
				n, more, err := db.CountEventsAfter(1, after, upTo, limit)
				if err != nil || n != min(limit, len(want)) || more != (len(want) > limit) {
					t.Fatalf("count after %x up to %x limit %d: %d %v %v, want %d", after, upTo, limit, n, more, err, len(want))
				}
			}
		}
	}
	for limit := 1; limit <= len(ids)+1; limit++ {
		var got []ID
		if err := db.RecordsAfter(1, ids[0], limit, func(id ID, _ []byte) bool { got = append(got, id); return true }); err != nil {
			t.Fatal(err)
		}
		if want := ids[1:min(limit+1, len(ids))]; !slices.Equal(got, want) {
			t.Fatalf("limit %d: %x, want %x", limit, got, want)
		}
	}
}

func compareIDs(a, b ID) int { return bytes.Compare(a[:], b[:]) }

// TestDisplacedEvents: an event whose timestamp is not its id's
// millisecond is found by id (GetEvent, HasEvent) through its Z key, read
// in time order with the others, and leaves no Z key behind when erased or
// expired.
func TestDisplacedEvents(t *testing.T) {
	db := openTestDB(t, "")
	evs := mixedEvents()
	for _, e := range evs {
		e.VisitorID, e.HasVisitor = "v", true
	}
	commitEvents(t, db.DB, 1, evs...)
	if err := db.WriteLateMemory(); err != nil { // the M and J keys, counted below (latemem.go)
		t.Fatal(err)
	}
	displacedN := 0
	for _, e := range evs {
		got, err := db.GetEvent(1, e.ID)
		if err != nil || !sameEvent(&got, e) {
			t.Fatalf("GetEvent(%x) = %+v, %v; want %+v", e.ID, got, err, e)
		}
		if ok, err := db.HasEvent(1, e.ID); !ok || err != nil {
			t.Fatalf("HasEvent(%x) = %v, %v", e.ID, ok, err)
		}
		if displaced(e.Timestamp, e.ID) {
			displacedN++
		}
	}
	// Each displaced event has a Z, an M and a J key, and no S or N key.
	for _, p := range []byte{prefixDisplaced, prefixDisplacedMark, prefixDisplacedName} {
		if k := countKeys(t, db.DB, appendDataset(nil, p, 1), appendDataset(nil, p, 2)); k != displacedN || k == 0 {
			t.Fatalf("%d %c keys, want one per displaced event (%d)", k, p, displacedN)
		}
	}
	for _, p := range []byte{prefixRecord, prefixName} {
		if k := countKeys(t, db.DB, appendDataset(nil, p, 1), appendDataset(nil, p, 2)); k != len(evs)-displacedN {
			t.Fatalf("%d %c keys, want one per event at its id's time (%d)", k, p, len(evs)-displacedN)
		}
	}
	for _, id := range []ID{idAt(1000, 200), idAt(1, 4)} { // missing; a displaced one's time, not its id
		if _, err := db.GetEvent(1, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetEvent(%x): %v, want not found", id, err)
		}
		if ok, err := db.HasEvent(1, id); ok || err != nil {
			t.Fatalf("HasEvent(%x) = %v, %v", id, ok, err)
		}
	}
	// Time order: ScanEvents and the list give every event by timestamp.
	var times []int64
	if err := db.ScanEvents(1, 0, 2_000_000, func(e *Event) bool { times = append(times, e.Timestamp); return true }); err != nil {
		t.Fatal(err)
	}
	if len(times) != len(evs) || !slices.IsSorted(times) {
		t.Fatalf("ScanEvents timestamps %v", times)
	}
	// Expiry before 1003 takes the events at 1, 995, 1000, 1002 (twice).
	n, err := db.ExpireBefore(1, 1003)
	if err != nil || n != 5 {
		t.Fatalf("expired %d, %v; want 5", n, err)
	}
	if _, err := db.EraseVisitor(1, "v", nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []byte{prefixRecord, prefixDisplaced, prefixName, prefixDisplacedMark, prefixDisplacedName} {
		if k := countKeys(t, db.DB, appendDataset(nil, p, 1), appendDataset(nil, p, 2)); k != 0 {
			t.Errorf("%d keys with prefix %c left after expiry and erasure", k, p)
		}
	}
}

// writeOldRecords writes evs to dataset 1 of a store at dir as eventd did
// before records were keyed by timestamp: E ds id -> record, T ds ts id.
// moved of them are written as if a move had already taken them (S and
// Z keys, no E key), as a move stopped half-way leaves them.
func writeOldRecords(t *testing.T, dir string, evs []*Event, moved int, extra map[string][]byte) {
	t.Helper()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := db.db.NewBatch()
	for i, e := range evs {
		tk := append(appendTS(appendDataset(nil, prefixTimeV1, 1), e.Timestamp), e.ID[:]...)
		_ = b.Set(tk, nil, nil)
		if i < moved {
			_ = b.Set(recordKey(nil, 1, e.Timestamp, e.ID), appendRecord(nil, e), nil)
			if displaced(e.Timestamp, e.ID) {
				_ = b.Set(displacedKey(nil, 1, e.ID), appendTS(nil, e.Timestamp), nil)
			}
			continue
		}
		_ = b.Set(append(appendDataset(nil, prefixEventV1, 1), e.ID[:]...), appendRecord(nil, e), nil)
	}
	for k, v := range extra {
		_ = b.Set([]byte(k), v, nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateRecords: a store written with records keyed by id (E) and a
// time index (T) is moved to S and Z keys at Open, also when a move
// stopped half-way, and then reads as one written so. A read-only open
// notes the old layout instead; an unreadable record is kept at its id's
// time rather than stopping the open.
func TestMigrateRecords(t *testing.T) {
	for _, tc := range []struct {
		name  string
		moved int // records already moved by a move that stopped
	}{
		{"fresh", 0},
		{"half moved", 5},
		{"all moved, T keys left", len(mixedEvents())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			evs := mixedEvents()
			broken := idAt(2000, 1)
			writeOldRecords(t, dir, evs, tc.moved, map[string][]byte{
				string(append(appendDataset(nil, prefixEventV1, 1), broken[:]...)): {9, 9},
			})
			ro, err := Open(dir, Options{ReadOnly: true})
			if err != nil {
				t.Fatalf("read-only open: %v", err)
			}
			if !ro.OldRecords() {
				t.Error("a read-only open of a store keyed by id does not report it")
			}
			_ = ro.Close()
			db, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if db.OldRecords() {
				t.Error("OldRecords after the move")
			}
			for _, p := range []byte{prefixEventV1, prefixTimeV1} {
				if k := countKeys(t, db, []byte{p}, []byte{p + 1}); k != 0 {
					t.Errorf("%d keys with prefix %c left", k, p)
				}
			}
			for _, e := range evs {
				if got, err := db.GetEvent(1, e.ID); err != nil || !sameEvent(&got, e) {
					t.Fatalf("GetEvent(%x) = %+v, %v", e.ID, got, err)
				}
			}
			if _, err := db.GetEvent(1, broken); !errors.Is(err, errCorrupt) {
				t.Errorf("the unreadable record: %v, want it kept and corrupt", err)
			}
			var n int
			if err := db.RecordsAfter(1, ID{}, 100, func(ID, []byte) bool { n++; return true }); err != nil || n != len(evs)+1 {
				t.Fatalf("RecordsAfter: %d, %v; want %d", n, err, len(evs)+1)
			}
		})
	}
}

// TestMigrateRecordsNeedsRoom: a move that would not fit on the volume
// is refused with the space it needs, and the store is left as it was.
func TestMigrateRecordsNeedsRoom(t *testing.T) {
	dir := t.TempDir()
	writeOldRecords(t, dir, mixedEvents(), 0, nil)
	stat := statVolume
	t.Cleanup(func() { statVolume = stat })
	statVolume = func(string) (diskspace.Usage, error) { return diskspace.Usage{Total: 1 << 30, Free: 100 << 20}, nil }
	if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "free some") {
		t.Fatalf("open on a full volume: %v", err)
	}
	statVolume = stat
	db := openTestDB(t, dir)
	if got, err := db.GetEvent(1, mixedEvents()[0].ID); err != nil || got.Name != "e" {
		t.Fatalf("after room was made: %+v, %v", got, err)
	}
}

// TestEachByIDFindsIDsAheadOfTheClock: an event whose id is later than
// the clock (an imported one) is still read in record order, also after a
// restart, whichever of the concurrent ranges holds it.
func TestEachByIDFindsIDsAheadOfTheClock(t *testing.T) {
	db := openTestDB(t, "")
	ms := time.Now().Add(time.Hour).UnixMilli()
	ahead := &Event{ID: idAt(ms, 1), Name: "e", Timestamp: ms}
	commitEvents(t, db.DB, 1, ahead)
	commitEvents(t, db.DB, 2, &Event{ID: idAt(5, 1), Name: "e", Timestamp: 5}) // a later dataset, an old id
	check := func(t *testing.T, db testDB) {
		var got []ID
		if err := db.RecordsAfter(1, ID{}, 10, func(id ID, _ []byte) bool { got = append(got, id); return true }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != ahead.ID {
			t.Fatalf("RecordsAfter: %x, want the event ahead of the clock", got)
		}
	}
	check(t, db)
	t.Run("reopened", func(t *testing.T) { check(t, db.reopen(t)) })
}

// TestMigrateVisitorIndexKeepsOldKeysWhole: the visitor index move deletes
// the old keys only in its last batch, so a read-only open of a store
// whose move was cut short still reads every entry the old way.
func TestMigrateVisitorIndexKeepsOldKeysWhole(t *testing.T) {
	db := openTestDB(t, "")
	b := db.db.NewBatch()
	for i := range moveChunk + 5 {
		k := appendDataset(nil, prefixVisitorV1, 1)
		k = binary.BigEndian.AppendUint16(k, 2)
		k = append(k, "v1"...)
		id := idAt(int64(i), 0)
		k = append(appendTS(k, int64(i)), id[:]...)
		_ = b.Set(k, []byte("e"), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	// The move's batches before its last, as a kill before that leaves them.
	n, err := db.moveKeys(prefixVisitorV1, false, func(b *pebble.Batch, _, _ []byte) error { return nil }, func(*pebble.Batch) error {
		return errors.New("killed")
	}, nil)
	if err == nil || n != moveChunk+5 {
		t.Fatalf("cut short after %d keys: %v", n, err)
	}
	if k := countKeys(t, db.DB, []byte{prefixVisitorV1}, []byte{prefixVisitorV1 + 1}); k != moveChunk+5 {
		t.Fatalf("%d V keys left after a move cut short, want all %d", k, moveChunk+5)
	}
}

// TestDisplacedEventsWrittenBeforeSession21: a store written before
// session 21 kept a displaced event's record under S, its name index entry
// under N and only its timestamp in Z. Such events read as the new ones do
// (by id, by time, by name, in id order), and expiry and erasure leave no
// key of them behind.
func TestDisplacedEventsWrittenBeforeSession21(t *testing.T) {
	db := openTestDB(t, "")
	evs := mixedEvents()
	for i, e := range evs {
		e.VisitorID, e.HasVisitor = "v", true
		e.Name = []string{"a", "b"}[i%2]
	}
	commitEvents(t, db.DB, 1, evs...)
	// Rewrite the displaced ones in the old form.
	b := db.db.NewBatch()
	for _, e := range evs {
		if !displaced(e.Timestamp, e.ID) {
			continue
		}
		_ = b.Delete(displacedMarkKey(nil, 1, e.Timestamp, e.ID), nil)
		_ = b.Delete(displacedNameKey(nil, 1, e.Name, e.Timestamp, e.ID), nil)
		_ = b.Set(displacedKey(nil, 1, e.ID), appendTS(nil, e.Timestamp), nil)
		_ = b.Set(recordKey(nil, 1, e.Timestamp, e.ID), appendRecord(nil, e), nil)
		_ = b.Set(nameKey(nil, 1, e.Name, e.Timestamp, e.ID), nameIndexValue(nil, e), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if got, err := db.GetEvent(1, e.ID); err != nil || !sameEvent(&got, e) {
			t.Fatalf("GetEvent(%x) = %+v, %v; want %+v", e.ID, got, err, e)
		}
	}
	var n int
	if err := db.EventsAfter(1, ID{}, 100, func(e *Event) bool { n++; return true }); err != nil || n != len(evs) {
		t.Fatalf("EventsAfter: %d events, %v; want %d", n, err, len(evs))
	}
	var times []int64
	if err := db.ScanEvents(1, 0, 2_000_000, func(e *Event) bool { times = append(times, e.Timestamp); return true }); err != nil {
		t.Fatal(err)
	}
	if len(times) != len(evs) || !slices.IsSorted(times) {
		t.Fatalf("ScanEvents timestamps %v", times)
	}
	page, total, err := db.List(ListQuery{Dataset: 1, Name: "a", To: math.MaxInt64, Limit: 100})
	if err != nil || len(page) != len(evs)/2 || total != int64(len(evs)/2) {
		t.Fatalf("List(a): %d events, total %d, %v; want %d", len(page), total, err, len(evs)/2)
	}
	if _, err := db.ExpireBefore(1, 1003); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EraseVisitor(1, "v", nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []byte{prefixRecord, prefixDisplaced, prefixName, prefixDisplacedMark, prefixDisplacedName, prefixVisitor} {
		if k := countKeys(t, db.DB, appendDataset(nil, p, 1), appendDataset(nil, p, 2)); k != 0 {
			t.Errorf("%d keys with prefix %c left after expiry and erasure", k, p)
		}
	}
}
