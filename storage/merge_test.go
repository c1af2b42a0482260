package storage

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// counterValue reads one counter bucket as readers see it: Pebble's value
// plus the derived overlay's; 0 if it does not exist.
func counterValue(t testing.TB, db *DB, ds uint32, name string, level byte, start int64) int64 {
	t.Helper()
	v := db.derived.view()
	defer v.close()
	n := v.count(ds, name, level, start, start+1)
	val, closer, err := v.snap.Get(appendTS(counterPrefix(nil, ds, name, level), start))
	if errors.Is(err, pebble.ErrNotFound) {
		return n
	}
	if err != nil {
		t.Fatalf("get counter: %v", err)
	}
	defer closer.Close()
	if len(val) != 8 {
		t.Fatalf("counter value %x is not 8 bytes", val)
	}
	return n + decodeCount(val)
}

func TestCountersMergeAcrossBatchesAndReopen(t *testing.T) {
	db := openTestDB(t, "")
	const ds = 3
	day := int64(planDay)
	minute := day + 5*hourMs + 7*minuteMs // a minute in hour 5
	otherHour := day + 9*hourMs           // same day, another hour
	nextDay := day + dayMs + 30_000

	var n uint64
	event := func(name string, ts int64) *Event {
		n++
		return &Event{ID: testID(n), Name: name, Timestamp: ts, CreatedAt: ts}
	}
	type want struct {
		name  string
		level byte
		start int64
		count int64
	}
	check := func(t *testing.T, db *DB, wants []want) {
		t.Helper()
		for _, w := range wants {
			if got := counterValue(t, db, ds, w.name, w.level, w.start); got != w.count {
				t.Errorf("counter %q %c %s = %d, want %d", w.name, w.level, fmtMs(w.start), got, w.count)
			}
		}
	}

	// Batch 1: three clicks in one minute (summed in memory), one view.
	commitEvents(t, db.DB, ds, event("click", minute), event("click", minute+1), event("click", minute+59_999),
		event("view", minute+30_000))
	// Batch 2 lands in the memtable over a flushed batch 1.
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	commitEvents(t, db.DB, ds, event("click", minute+2), event("click", otherHour))
	// Batch 3, then a compaction merges the operands in the sstables.
	commitEvents(t, db.DB, ds, event("view", nextDay), event("click", minute+3))
	wants := []want{
		{"click", LevelMinute, minute, 5},
		{"click", LevelHour, day + 5*hourMs, 5},
		{"click", LevelHour, day + 9*hourMs, 1},
		{"click", LevelDay, day, 6},
		{"view", LevelMinute, minute, 1},
		{"view", LevelDay, day, 1},
		{"view", LevelDay, day + dayMs, 1},
		{"", LevelMinute, minute, 6},
		{"", LevelHour, day + 5*hourMs, 6},
		{"", LevelDay, day, 7},
		{"", LevelDay, day + dayMs, 1},
		{"click", LevelDay, day + dayMs, 0},
		{"", LevelMinute, minute + minuteMs, 0},
	}
	t.Run("before checkpoint", func(t *testing.T) { check(t, db.DB, wants) })
	db.derived.checkpoint()
	t.Run("after checkpoint", func(t *testing.T) { check(t, db.DB, wants) })

	if err := db.Pebble().Compact(t.Context(), []byte{prefixCounter}, []byte{prefixCounter + 1}, true); err != nil {
		t.Fatal(err)
	}
	t.Run("after compaction", func(t *testing.T) { check(t, db.DB, wants) })

	db = db.reopen(t)
	t.Run("after reopen", func(t *testing.T) { check(t, db.DB, wants) })

	// More operands after the reopen still add to the stored sums: the
	// merge operator is found again by its name.
	commitEvents(t, db.DB, ds, event("click", minute+4), event("click", minute+5))
	wants[0].count += 2
	wants[1].count += 2
	wants[3].count += 2
	wants[7].count += 2
	wants[8].count += 2
	wants[9].count += 2
	t.Run("after more batches", func(t *testing.T) { check(t, db.DB, wants) })
	db = db.reopen(t)
	t.Run("after second reopen", func(t *testing.T) { check(t, db.DB, wants) })

	for _, tc := range []struct {
		name     string
		from, to int64
		want     int64
	}{
		{"click", day, day + 2*dayMs, 8},
		{"view", day, day + 2*dayMs, 2},
		{"", day, day + 2*dayMs, 10},
		{"click", minute, minute + minuteMs - 1, 7},
		{"click", day + 9*hourMs, day + 9*hourMs, 1},
	} {
		got, err := db.Count(ds, tc.name, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("Count(%q, %s, %s) = %d, want %d", tc.name, fmtMs(tc.from), fmtMs(tc.to), got, tc.want)
		}
	}
}

func TestMergerOperator(t *testing.T) {
	le := func(n int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(n)) }
	key := appendTS(counterPrefix(nil, 1, "x", LevelMinute), 0)

	m, err := merger.Merge(key, le(5))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{7, -2, 100} {
		if err := m.MergeNewer(le(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.MergeOlder(le(10)); err != nil {
		t.Fatal(err)
	}
	out, closer, err := m.Finish(true)
	if err != nil || closer != nil {
		t.Fatalf("Finish: %v, closer %v", err, closer)
	}
	if got := decodeCount(out); got != 120 {
		t.Errorf("sum = %d, want 120", got)
	}

	if err := m.MergeNewer([]byte{1, 2, 3}); !errors.Is(err, errCorrupt) {
		t.Errorf("short operand: %v, want errCorrupt", err)
	}
	if _, err := merger.Merge(key, []byte{1}); !errors.Is(err, errCorrupt) {
		t.Errorf("short first operand: %v, want errCorrupt", err)
	}
	for _, k := range [][]byte{nil, {prefixRecord, 0}, configKey("k", "id")} {
		if _, err := merger.Merge(k, le(1)); err == nil {
			t.Errorf("Merge on key %q: no error", k)
		}
	}
	if got := decodeCount([]byte{1}); got != 0 {
		t.Errorf("decodeCount(short) = %d, want 0", got)
	}
	if merger.Name != "eventd.merge.v1" {
		t.Errorf("merger name changed to %q: existing stores would no longer open", merger.Name)
	}
}
