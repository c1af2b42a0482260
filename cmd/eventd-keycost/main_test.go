package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventd/eventd/storage"
)

// TestRunLookups: with --lookups every key is looked up before it is
// written, kept by second or by day; a key found fails the run.
func TestRunLookups(t *testing.T) {
	for _, keys := range []int{0, -1} {
		if _, err := run("idemUUID", variants["idemUUID"], 3000, 100, 2, t.TempDir(), storage.Options{IdempotencyFilterKeys: keys}, 100, time.Minute, false, true); err != nil {
			t.Errorf("filter keys %d: %v", keys, err)
		}
	}
}

// TestRunCountsEachKey writes a few thousand events per variant and checks
// the accounting: every stored variant writes WAL and sstable bytes, and
// each index key left out makes the store smaller.
func TestRunCountsEachKey(t *testing.T) {
	wal, sst := map[string]float64{}, map[string]float64{}
	for _, name := range []string{"all", "displaced", "jitter1s", "noV", "recordOnly", "gen"} {
		r, err := run(name, variants[name], 3000, 100, 2, t.TempDir(), storage.Options{}, 100, time.Minute, true, false)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Events != 3000 {
			t.Errorf("%s: %d events, want 3000", name, r.Events)
		}
		if name != "gen" && (r.WALB <= 0 || r.FlushedB <= 0 || r.SSTB <= 0 || r.SSTDrainedB <= 0) {
			t.Errorf("%s: WAL %.1f, flushed %.1f, sstables %.1f bytes per event; want all > 0", name, r.WALB, r.FlushedB, r.SSTB)
		}
		wal[name], sst[name] = r.WALB, r.SSTDrainedB
	}
	// A Z key is at least prefix, dataset and id, and its value a ts: 29 bytes.
	for _, name := range []string{"displaced", "jitter1s"} {
		if wal[name]-wal["all"] < 29 {
			t.Errorf("WAL per event: %s %.1f, all %.1f; the Z key should cost at least 29 bytes", name, wal[name], wal["all"])
		}
	}
	// Today's visitor index is held in memory, not in the WAL, and written
	// once as tables at the end of the run (the day's seal).
	if sst["all"] <= sst["noV"] {
		t.Errorf("sstable bytes per event: all %.1f, noV %.1f; the W keys should add some", sst["all"], sst["noV"])
	}
	if wal["noV"] <= wal["recordOnly"] {
		t.Errorf("WAL per event: noV %.1f <= recordOnly %.1f", wal["noV"], wal["recordOnly"])
	}
	// Nothing but what Open writes (the visitor-days record).
	if wal["gen"] > 0.1 {
		t.Errorf("gen wrote %.2f WAL bytes per event, want none", wal["gen"])
	}
	for name, v := range variants {
		if v.about == "" {
			t.Errorf("variant %s has no description", name)
		}
	}
}

// TestMessageIDs checks the generators against the formats they stand for
// (fmt is what they replace: its cost counted in every variant's CPU).
func TestMessageIDs(t *testing.T) {
	for _, k := range []uint64{0, 1, 42, 1 << 40, ^uint64(0) - 1} {
		h1, h2 := k*0x9E3779B97F4A7C15, (k+1)*0xC2B2AE3D27D4EB4F
		uuid := fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", uint32(h1), uint16(h1>>32), uint16(h1>>48)&0xfff, uint16(h2)&0xfff, h2>>16)
		if got := uuidMessageID(k, 0); got != uuid {
			t.Errorf("uuidMessageID(%d) = %q, want %q", k, got, uuid)
		}
		if got, want := segmentMessageID(k, 1768473000123), "node-next-1768473000123-"+uuid; got != want {
			t.Errorf("segmentMessageID(%d) = %q, want %q", k, got, want)
		}
	}
}
