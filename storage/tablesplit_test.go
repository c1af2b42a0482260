package storage

import (
	"bytes"
	"testing"
	"time"
)

// testOverlay is an overlay holding count events per (ds, name) in one
// minute ("" is every event of ds, as the derived data counts them).
func testOverlay(counts map[seriesKey]int64) *overlay {
	o := newOverlay()
	for sk, n := range counts {
		o.bucket(sk.ds, sk.name, LevelMinute, 0).count = n
		o.bucket(sk.ds, sk.name, LevelHour, 0).count = n // only minutes are counted
	}
	return o
}

func minute(ds uint32, name string) seriesKey { return seriesKey{ds, name, LevelMinute} }

// TestTableSplitsPolicy: a table ends where the key's first byte changes
// and where a busy group's range begins or ends.
func TestTableSplitsPolicy(t *testing.T) {
	ts := newTableSplits()
	click := namePrefix(nil, 1, "click")
	rec1 := appendDataset(nil, prefixRecord, 1)
	keyA := idemScope(nil, "key_a")
	ts.ranges.Store(&[]keyRange{
		{keyA, prefixEnd(keyA)},
		{click, prefixEnd(click)},
		{rec1, prefixEnd(rec1)},
	})
	for _, tc := range []struct {
		name       string
		start, end []byte
	}{
		{"idempotency keys of a shorter key id", idemDayKey(nil, "k_1", 20000, "m"), keyA},
		{"the busy key id's idempotency keys", idemDayKey(nil, "key_a", 20000, "node-next-1"), prefixEnd(keyA)},
		{"a later key id's", idemDayKey(nil, "key_b", 20000, "m"), []byte{prefixIdemDay + 1}},
		{"a name before the busy one", nameKey(nil, 1, "a", 5, ID{}), click},
		{"the busy name's first key", click, prefixEnd(click)},
		{"in the busy name", nameKey(nil, 1, "click", 5, ID{}), prefixEnd(click)},
		{"a longer name after it", nameKey(nil, 1, "clicks", 5, ID{}), []byte{prefixName + 1}},
		{"another dataset's name", nameKey(nil, 2, "click", 5, ID{}), []byte{prefixName + 1}},
		{"records of dataset 0", recordKey(nil, 0, 5, ID{}), rec1},
		{"records of the busy dataset", recordKey(nil, 1, 5, ID{}), prefixEnd(rec1)},
		{"records of dataset 2", recordKey(nil, 2, 5, ID{}), []byte{prefixRecord + 1}},
		{"the last prefix", []byte{0xff, 1}, nil},
		{"no key", nil, nil},
	} {
		if _, end, err := ts.policy(tc.start); err != nil || !bytes.Equal(end, tc.end) {
			t.Errorf("%s: policy(%x) = %x, %v; want %x", tc.name, tc.start, end, err, tc.end)
		}
	}
}

// TestTableSplitsObserve: groups with 1/32 of the events get ranges, bots
// count with their name and dataset, and old traffic fades.
func TestTableSplitsObserve(t *testing.T) {
	ranges := func(ts *tableSplits) []string {
		var got []string
		for _, r := range *ts.ranges.Load() {
			got = append(got, string(r.lo))
			if !bytes.Equal(r.hi, prefixEnd(r.lo)) {
				t.Errorf("range %q ends at %q", r.lo, r.hi)
			}
		}
		return got
	}
	want := func(ts *tableSplits, what string, keys ...[]byte) {
		t.Helper()
		got := ranges(ts)
		if len(got) != len(keys) {
			t.Fatalf("%s: ranges %q, want %q", what, got, keys)
		}
		for i, k := range keys {
			if got[i] != string(k) {
				t.Errorf("%s: range %d is %q, want %q", what, i, got[i], k)
			}
		}
	}
	ts := newTableSplits()
	at := time.Unix(1_000_000, 0)
	ts.observe(testOverlay(map[seriesKey]int64{
		minute(1, ""): 1000, minute(1, "click"): 600, minute(1, "view"): 370, minute(1, "rare"): 10,
		minute(1, botAll): 30, minute(1, botAll+"rare"): 30, // rare: 40 of 1,061 with its bots
		minute(2, ""): 31, minute(2, "x"): 31, // 31 of 1,061: short of 1/32
	}), at)
	// Each name's N and J keys, the dataset's S, Z and M keys.
	late := func(name string) []byte {
		p := namePrefix(nil, 1, name)
		p[0] = prefixDisplacedName
		return p
	}
	want(ts, "first checkpoint",
		late("rare"), late("view"), late("click"),
		appendDataset(nil, prefixDisplacedMark, 1),
		namePrefix(nil, 1, "rare"), namePrefix(nil, 1, "view"), namePrefix(nil, 1, "click"),
		appendDataset(nil, prefixRecord, 1), appendDataset(nil, prefixDisplaced, 1))

	// Five half-lives later the old counts weigh 1/32: a new name's
	// thousand events take the whole share.
	at = at.Add(5 * splitHalfLife)
	ts.observe(testOverlay(map[seriesKey]int64{minute(1, ""): 1000, minute(1, "signup"): 1000}), at)
	want(ts, "after five half-lives",
		late("signup"), appendDataset(nil, prefixDisplacedMark, 1),
		namePrefix(nil, 1, "signup"), appendDataset(nil, prefixRecord, 1), appendDataset(nil, prefixDisplaced, 1))

	// No events: the shares stay as they were, and volumes fall until
	// they are dropped under half an event.
	ts.observe(newOverlay(), at.Add(5*splitHalfLife))
	want(ts, "five quiet half-lives", late("signup"), appendDataset(nil, prefixDisplacedMark, 1),
		namePrefix(nil, 1, "signup"), appendDataset(nil, prefixRecord, 1), appendDataset(nil, prefixDisplaced, 1))
	ts.observe(newOverlay(), at.Add(20*splitHalfLife))
	want(ts, "twenty quiet half-lives")
	if len(ts.vol) != 0 {
		t.Errorf("volumes kept: %v", ts.vol)
	}
}

// TestTableSplitsIdem: API keys with 1/32 of the recent idempotency keys
// get ranges of their own, apart from the events' shares.
func TestTableSplitsIdem(t *testing.T) {
	ts := newTableSplits()
	ts.countIdem([]idemCount{{"key_a", 60}, {"key_b", 2}})
	ts.countIdem([]idemCount{{"key_a", 40}, {"", 1000}}) // no key id: not a group (it would be dataset 0's)
	ts.observe(testOverlay(map[seriesKey]int64{minute(1, ""): 1000}), time.Unix(1_000_000, 0))
	got := *ts.ranges.Load()
	keyA := idemScope(nil, "key_a")
	if len(got) != 4 || !bytes.Equal(got[0].lo, keyA) || !bytes.Equal(got[0].hi, prefixEnd(keyA)) {
		t.Fatalf("ranges %q, want key_a's idempotency keys (2 of 102 for key_b is short of 1/32) and dataset 1's M, S and Z", got)
	}
	if len(ts.idem) != 0 {
		t.Errorf("counts kept after observe: %v", ts.idem)
	}
}
