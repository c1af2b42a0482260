package storage

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// TestExperimentSkipsKeys checks that each skip switch leaves out exactly
// its index key, that the record is still written, and that the Pebble hook
// sees eventd's options before the store opens.
func TestExperimentSkipsKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		exp  Experiment
		want []byte // index prefixes expected beside the record (the event is displaced: J, not N)
	}{
		{"none", Experiment{}, []byte{prefixDisplacedName, prefixVisitor}},
		{"name", Experiment{SkipName: true}, []byte{prefixVisitor}},
		{"visitor", Experiment{SkipVisitor: true}, []byte{prefixDisplacedName}},
		{"all", Experiment{SkipName: true, SkipVisitor: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var memtable uint64
			exp := tc.exp
			exp.Pebble = func(o *pebble.Options) { memtable = o.MemTableSize }
			db, err := Open(t.TempDir(), Options{Experiment: &exp})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if memtable != 64<<20 {
				t.Errorf("the hook saw MemTableSize %d, want eventd's 64 MiB", memtable)
			}
			e := &Event{ID: testID(1), Name: "signup", VisitorID: "v1", HasVisitor: true, Timestamp: planDay, CreatedAt: planDay}
			commitEvents(t, db, 1, e)
			if got, err := db.GetEvent(1, e.ID); err != nil || !sameEvent(&got, e) {
				t.Fatalf("GetEvent = %+v, %v; want the event", got, err)
			}
			var prefixes []byte
			for _, p := range []byte{prefixName, prefixDisplacedName, prefixVisitor} {
				lo := appendDataset(nil, p, 1)
				it, err := db.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: appendDataset(nil, p, 2)})
				if err != nil {
					t.Fatal(err)
				}
				if it.First() {
					prefixes = append(prefixes, p)
				}
				if err := it.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(prefixes, tc.want) {
				t.Errorf("index prefixes written %q, want %q", prefixes, tc.want)
			}
		})
	}
}

// TestExperimentDisplacedAside: a displaced event's record goes under its
// Z key after its timestamp, and none of its S, N, M and J keys is written;
// an event at its id's time is stored as always.
func TestExperimentDisplacedAside(t *testing.T) {
	db, err := Open(t.TempDir(), Options{Experiment: &Experiment{DisplacedAside: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	live := &Event{ID: IDAt(planDay), Name: "signup", Timestamp: planDay, CreatedAt: planDay}
	late := &Event{ID: IDAt(planDay + 1), Name: "signup", VisitorID: "v1", HasVisitor: true,
		Timestamp: planDay - 5000, CreatedAt: planDay + 1, Properties: []byte(`{"a":1}`)}
	commitEvents(t, db, 1, live, late)
	if got, err := db.GetEvent(1, live.ID); err != nil || !sameEvent(&got, live) {
		t.Errorf("GetEvent(live) = %+v, %v; want it", got, err)
	}
	for _, k := range [][]byte{recordKey(nil, 1, late.Timestamp, late.ID), nameKey(nil, 1, late.Name, late.Timestamp, late.ID),
		displacedMarkKey(nil, 1, late.Timestamp, late.ID), displacedNameKey(nil, 1, late.Name, late.Timestamp, late.ID)} {
		if _, err := db.get(k); err != ErrNotFound {
			t.Errorf("key %q of the late event: %v, want not found", k, err)
		}
	}
	v, err := db.get(displacedKey(nil, 1, late.ID))
	if err != nil || len(v) < 8 || int64(binary.BigEndian.Uint64(v)) != late.Timestamp {
		t.Fatalf("Z value %x, %v; want the timestamp, then the record", v, err)
	}
	got := Event{ID: late.ID}
	if err := decodeRecord(v[8:], &got); err != nil || !sameEvent(&got, late) {
		t.Errorf("record in Z: %+v, %v; want the late event", got, err)
	}
}
