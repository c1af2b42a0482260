package storage

import (
	"bytes"
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
		want []byte // index prefixes expected beside the record's S
	}{
		{"none", Experiment{}, []byte{prefixName, prefixVisitor}},
		{"name", Experiment{SkipName: true}, []byte{prefixVisitor}},
		{"visitor", Experiment{SkipVisitor: true}, []byte{prefixName}},
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
			e := &Event{ID: IDAt(planDay), Name: "signup", VisitorID: "v1", HasVisitor: true, Timestamp: planDay, CreatedAt: planDay}
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
