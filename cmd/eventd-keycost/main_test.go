package main

import (
	"testing"
	"time"
)

// TestRunCountsEachKey writes a few thousand events per variant and checks
// the accounting: every stored variant writes WAL and sstable bytes, and
// each index key left out makes the WAL smaller by at least its key.
func TestRunCountsEachKey(t *testing.T) {
	wal := map[string]float64{}
	for _, name := range []string{"all", "noV", "recordOnly", "gen"} {
		r, err := run(name, variants[name], 3000, 100, 2, t.TempDir(), 0, 100, time.Minute, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Events != 3000 {
			t.Errorf("%s: %d events, want 3000", name, r.Events)
		}
		if name != "gen" && (r.WALB <= 0 || r.FlushedB <= 0 || r.SSTB <= 0 || r.SSTDrainedB <= 0) {
			t.Errorf("%s: WAL %.1f, flushed %.1f, sstables %.1f bytes per event; want all > 0", name, r.WALB, r.FlushedB, r.SSTB)
		}
		wal[name] = r.WALB
	}
	// A V key is at least prefix, dataset, length, "v_" and a digit, ts and id: 34 bytes.
	if wal["all"]-wal["noV"] < 34 {
		t.Errorf("WAL per event: all %.1f, noV %.1f; the V key should cost at least 34 bytes", wal["all"], wal["noV"])
	}
	if wal["noV"] <= wal["recordOnly"] {
		t.Errorf("WAL per event: noV %.1f <= recordOnly %.1f", wal["noV"], wal["recordOnly"])
	}
	if wal["gen"] != 0 {
		t.Errorf("gen wrote %.1f WAL bytes per event, want 0", wal["gen"])
	}
	for name, v := range variants {
		if v.about == "" {
			t.Errorf("variant %s has no description", name)
		}
	}
}
