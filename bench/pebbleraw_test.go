package bench

import (
	"context"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// openTestBaseline opens a Pebble ceiling in a test directory, closed at cleanup.
func openTestBaseline(t *testing.T) *PebbleBaseline {
	t.Helper()
	b, err := OpenPebbleBaseline(PebbleOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestPebbleBaselineCommits(t *testing.T) {
	b := openTestBaseline(t)
	tests := []struct {
		committers, per int
		max             uint64
	}{
		{8, 1, 400},
		{2, 100, 1000},
	}
	for _, tc := range tests {
		res, err := b.Run(context.Background(), PebbleRun{Committers: tc.committers, EventsPerCommit: tc.per, Duration: 5 * time.Second, MaxEvents: tc.max})
		if err != nil {
			t.Fatal(err)
		}
		if res.Events != tc.max || res.OK != tc.max/uint64(tc.per) || len(res.Errors) != 0 {
			t.Errorf("%d×%d: events %d commits %d errors %v", tc.committers, tc.per, res.Events, res.OK, res.Errors)
		}
		if res.Latency.Count() != res.Requests || res.EventsPerSec() <= 0 {
			t.Errorf("latency count %d, requests %d", res.Latency.Count(), res.Requests)
		}
	}
	// Every event wrote its record and three index entries, none
	// overwriting another, with keys of about 40 bytes.
	for _, prefix := range []string{"E", "T", "N", "V"} {
		it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: []byte(prefix), UpperBound: []byte{prefix[0] + 1}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for it.First(); it.Valid(); it.Next() {
			if len(it.Key()) < 30 || len(it.Key()) > PebbleKeySize {
				t.Fatalf("key %q is %d bytes", it.Key(), len(it.Key()))
			}
			if prefix == "E" && len(it.Value()) != PebbleValueSize {
				t.Fatalf("record %q: value %d bytes", it.Key(), len(it.Value()))
			}
			n++
		}
		it.Close()
		if n != 1400 {
			t.Errorf("%s: %d entries, want 1400", prefix, n)
		}
	}
}

func TestPebbleBaselineQuiesce(t *testing.T) {
	b := openTestBaseline(t)
	if _, err := b.Run(context.Background(), PebbleRun{Committers: 2, EventsPerCommit: 10, Duration: time.Minute, MaxEvents: 200}); err != nil {
		t.Fatal(err)
	}
	b.Quiesce(context.Background(), time.Minute)
	m := b.db.Metrics()
	if m.Compact.NumInProgress != 0 || m.Flush.NumInProgress != 0 {
		t.Errorf("still busy: %d compactions, %d flushes", m.Compact.NumInProgress, m.Flush.NumInProgress)
	}
}
