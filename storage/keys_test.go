package storage

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func maxID() ID {
	var id ID
	for i := range id {
		id[i] = 0xff
	}
	return id
}

func TestTimeKeyOrder(t *testing.T) {
	tests := []struct {
		name     string
		ts1, ts2 int64
		id1, id2 ID
		ds1, ds2 uint32
		want     int // sign of compare(key1, key2)
	}{
		{name: "earlier ts first", ts1: 1, ts2: 2, id1: maxID(), id2: ID{}, want: -1},
		{name: "ts across byte boundary", ts1: 255, ts2: 256, id1: maxID(), id2: ID{}, want: -1},
		{name: "ts across 2^32", ts1: 1<<32 - 1, ts2: 1 << 32, id1: maxID(), id2: ID{}, want: -1},
		{name: "large ts", ts1: 1_768_000_000_000, ts2: 1_768_000_000_001, id1: maxID(), id2: ID{}, want: -1},
		{name: "same ts by id", ts1: 5, ts2: 5, id1: testID(1), id2: testID(2), want: -1},
		{name: "same ts id last byte", ts1: 5, ts2: 5, id1: ID{15: 1}, id2: ID{15: 2}, want: -1},
		{name: "equal", ts1: 7, ts2: 7, id1: testID(3), id2: testID(3), want: 0},
		{name: "later ts after", ts1: 9, ts2: 8, id1: ID{}, id2: maxID(), want: 1},
		{name: "dataset before ts", ds1: 1, ds2: 2, ts1: math.MaxInt64, ts2: 0, want: -1},
		{name: "max ts", ts1: math.MaxInt64 - 1, ts2: math.MaxInt64, want: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k1 := recordKey(nil, tc.ds1, tc.ts1, tc.id1)
			k2 := recordKey(nil, tc.ds2, tc.ts2, tc.id2)
			if len(k1) != datasetPrefLen+8+16 {
				t.Fatalf("len(recordKey) = %d, want %d", len(k1), datasetPrefLen+24)
			}
			if got := bytes.Compare(k1, k2); got != tc.want {
				t.Errorf("compare(%x, %x) = %d, want %d", k1, k2, got, tc.want)
			}
		})
	}
}

func TestTimeKeyOrderRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	randID := func() ID {
		var id ID
		for i := range id {
			id[i] = byte(r.IntN(3)) // few values so that ties happen
		}
		return id
	}
	for range 5000 {
		ts1, ts2 := r.Int64N(1<<45), r.Int64N(1<<45)
		if r.IntN(2) == 0 {
			ts2 = ts1
		}
		id1, id2 := randID(), randID()
		want := cmp.Compare(ts1, ts2)
		if want == 0 {
			want = bytes.Compare(id1[:], id2[:])
		}
		got := bytes.Compare(recordKey(nil, 3, ts1, id1), recordKey(nil, 3, ts2, id2))
		if got != want {
			t.Fatalf("(%d,%x) vs (%d,%x): compare = %d, want %d", ts1, id1, ts2, id2, got, want)
		}
		// The per-name and per-visitor index keys order the same way.
		nk1 := append(appendTS(namePrefix(nil, 3, "n"), ts1), id1[:]...)
		nk2 := append(appendTS(namePrefix(nil, 3, "n"), ts2), id2[:]...)
		vk1 := visitorKey(nil, 3, "v", ts1, id1)
		vk2 := visitorKey(nil, 3, "v", ts2, id2)
		if bytes.Compare(nk1, nk2) != want || bytes.Compare(vk1, vk2) != want {
			t.Fatalf("index keys of (%d,%x) vs (%d,%x) do not order as %d", ts1, id1, ts2, id2, want)
		}
	}
}

// TestPrefixesNeverNest checks that the keys of one name (visitor, counter
// name, config kind) never start with the prefix of another.
func TestPrefixesNeverNest(t *testing.T) {
	type prefixFn func(ds uint32, s string) []byte
	fns := map[string]prefixFn{
		"name":    func(ds uint32, s string) []byte { return namePrefix(nil, ds, s) },
		"visitor": func(ds uint32, s string) []byte { return visitorDayPrefix(nil, ds, 20000, s) },
		"counter": func(ds uint32, s string) []byte { return counterPrefix(nil, ds, s, LevelMinute) },
		"config":  func(_ uint32, s string) []byte { return configKey(s, "") },
	}
	pairs := []struct{ a, b string }{
		{"a", "ab"},
		{"ab", "a"},
		{"", "a"},
		{"key", "keys"},
		{"v1", "v10"},
		{"a", "a\x00"},
		{"a\x00", "a\x00\x00"},
		{"x", "\x01x"},
		{"page_view", "page_view_2"},
		{"é", "é!"},
	}
	for fname, fn := range fns {
		for _, p := range pairs {
			if fname == "config" && strings.ContainsRune(p.a+p.b, 0) {
				continue // kinds are constants without NUL bytes
			}
			t.Run(fname+"/"+p.a+"_vs_"+p.b, func(t *testing.T) {
				pa, pb := fn(7, p.a), fn(7, p.b)
				// A full index key of b: prefix, ts, id.
				kb := indexKey(pb, 0x0102030405060708, testID(9))
				ka := indexKey(pa, 0x0102030405060708, testID(9))
				if bytes.HasPrefix(pb, pa) || bytes.HasPrefix(kb, pa) {
					t.Errorf("prefix of %q (%x) is a prefix of %q's keys (%x)", p.a, pa, p.b, kb)
				}
				if bytes.HasPrefix(pa, pb) || bytes.HasPrefix(ka, pb) {
					t.Errorf("prefix of %q (%x) is a prefix of %q's keys (%x)", p.b, pb, p.a, ka)
				}
			})
		}
	}
	t.Run("datasets", func(t *testing.T) {
		for _, f := range []prefixFn{fns["name"], fns["visitor"], fns["counter"]} {
			if bytes.HasPrefix(f(1, "a"), f(2, "a")[:datasetPrefLen]) {
				t.Error("dataset 1 key has dataset 2 prefix")
			}
		}
	})
}

func TestPrefixesNeverNestRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte{0, 1, 'a', 'b', 0xff}
	randStr := func() string {
		b := make([]byte, r.IntN(5))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 5000 {
		a, b := randStr(), randStr()
		if a == b {
			continue
		}
		ka := indexKey(namePrefix(nil, 1, a), r.Int64N(1<<45), testID(r.Uint64()))
		if bytes.HasPrefix(ka, namePrefix(nil, 1, b)) {
			t.Fatalf("name %q key %x has prefix of name %q", a, ka, b)
		}
		ts := r.Int64N(1 << 45)
		kv := visitorKey(nil, 1, a, ts, testID(r.Uint64()))
		if bytes.HasPrefix(kv, visitorDayPrefix(nil, 1, visitorDay(ts), b)) {
			t.Fatalf("visitor %q key %x has prefix of visitor %q", a, kv, b)
		}
		kc := appendTS(counterPrefix(nil, 1, a, LevelHour), r.Int64N(1<<45))
		for _, lvl := range []byte{LevelMinute, LevelHour, LevelDay} {
			if bytes.HasPrefix(kc, counterPrefix(nil, 1, b, lvl)) {
				t.Fatalf("counter %q key %x has prefix of counter %q/%c", a, kc, b, lvl)
			}
		}
	}
}

func TestIdemKeyDistinct(t *testing.T) {
	// The key id is length-prefixed, so (keyID, key) pairs that concatenate
	// to the same string still get different keys.
	pairs := [][2]string{{"k", "ab"}, {"ka", "b"}, {"kab", ""}, {"", "kab"}}
	seen := map[string][2]string{}
	for _, p := range pairs {
		k := string(idemDayKey(nil, p[0], 7, p[1]))
		if prev, ok := seen[k]; ok {
			t.Errorf("idemDayKey%q == idemDayKey%q", p, prev)
		}
		seen[k] = p
	}
}

func TestPrefixEnd(t *testing.T) {
	tests := []struct {
		name   string
		prefix []byte
		want   []byte
	}{
		{"single", []byte("a"), []byte("b")},
		{"multi", []byte("abc"), []byte("abd")},
		{"zero byte", []byte{'a', 0}, []byte{'a', 1}},
		{"trailing ff", []byte{0x01, 0xff}, []byte{0x02}},
		{"two trailing ff", []byte{0x01, 0x02, 0xff, 0xff}, []byte{0x01, 0x03}},
		{"fe", []byte{0x01, 0xfe}, []byte{0x01, 0xff}},
		{"ff in the middle", []byte{0xff, 0x00}, []byte{0xff, 0x01}},
		{"all ff", []byte{0xff}, nil},
		{"all ff long", []byte{0xff, 0xff, 0xff}, nil},
		{"empty", []byte{}, nil},
		{"dataset max", appendDataset(nil, prefixRecord, math.MaxUint32), []byte{prefixRecord + 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]byte(nil), tc.prefix...)
			got := prefixEnd(in)
			if !bytes.Equal(in, tc.prefix) {
				t.Fatalf("prefixEnd modified its argument: %x", in)
			}
			if !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("prefixEnd(%x) = %x, want %x", tc.prefix, got, tc.want)
			}
			if got == nil {
				return
			}
			// Greater than every key with the prefix, and not itself such a key.
			if bytes.HasPrefix(got, tc.prefix) {
				t.Errorf("prefixEnd(%x) = %x has the prefix", tc.prefix, got)
			}
			for _, tail := range [][]byte{nil, {0}, {0xff}, {0xff, 0xff, 0xff, 0xff}} {
				k := append(append([]byte(nil), tc.prefix...), tail...)
				if bytes.Compare(k, got) >= 0 {
					t.Errorf("key %x >= prefixEnd %x", k, got)
				}
			}
		})
	}
}

func TestRangeBounds(t *testing.T) {
	prefix := namePrefix(nil, 4, "click")
	key := func(ts int64, id ID) []byte {
		return append(appendTS(append([]byte(nil), prefix...), ts), id[:]...)
	}
	in := func(k, lo, hi []byte) bool {
		return bytes.Compare(k, lo) >= 0 && (hi == nil || bytes.Compare(k, hi) < 0)
	}
	tests := []struct {
		name     string
		from, to int64
	}{
		{"one ms", 1000, 1000},
		{"range", 1000, 2000},
		{"from zero", 0, 59_999},
		{"byte carry", 255, 256},
		{"realistic", 1_768_000_000_000, 1_768_086_399_999},
		{"to max-2", 5, math.MaxInt64 - 2},
		{"to max-1", 5, math.MaxInt64 - 1},
		{"to max", 5, math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lo, hi := rangeBounds(prefix, tc.from, tc.to)
			for _, id := range []ID{{}, testID(1), maxID()} {
				if !in(key(tc.from, id), lo, hi) {
					t.Errorf("from edge (%d, %x) outside [%x, %x)", tc.from, id, lo, hi)
				}
				if !in(key(tc.to, id), lo, hi) {
					t.Errorf("to edge (%d, %x) outside [%x, %x)", tc.to, id, lo, hi)
				}
				if tc.from > 0 && in(key(tc.from-1, id), lo, hi) {
					t.Errorf("(%d, %x) before from inside", tc.from-1, id)
				}
				// To >= MaxInt64-1 means "no upper bound" (Count passes
				// MaxInt64-1 for an unbounded range), so only below that
				// is the key after to outside.
				if tc.to < math.MaxInt64-1 && in(key(tc.to+1, id), lo, hi) {
					t.Errorf("(%d, %x) after to inside", tc.to+1, id)
				}
			}
			// Nothing of another prefix is inside.
			for _, other := range [][]byte{namePrefix(nil, 4, "clicks"), namePrefix(nil, 5, "click"), prefixEnd(prefix)} {
				k := indexKey(other, tc.from, testID(1))
				if in(k, lo, hi) {
					t.Errorf("foreign key %x inside [%x, %x)", k, lo, hi)
				}
			}
			if !bytes.HasPrefix(lo, prefix) {
				t.Errorf("lower %x lacks the prefix", lo)
			}
			if tc.to >= math.MaxInt64-1 && !bytes.Equal(hi, prefixEnd(prefix)) {
				t.Errorf("upper %x for an unbounded range, want prefixEnd %x", hi, prefixEnd(prefix))
			}
			if hi == nil || bytes.Compare(hi, prefixEnd(prefix)) > 0 {
				t.Errorf("upper %x beyond prefixEnd %x", hi, prefixEnd(prefix))
			}
		})
	}
}

func TestTSIDSuffix(t *testing.T) {
	const ts = int64(1_768_000_123_456)
	id := testID(0xdeadbeef)
	tests := []struct {
		name   string
		key    []byte
		ok     bool
		ts     int64
		wantID ID
	}{
		{"time key", recordKey(nil, 1, ts, id), true, ts, id},
		{"name key", append(appendTS(namePrefix(nil, 1, "purchase"), ts), id[:]...), true, ts, id},
		{"visitor key", visitorKey(nil, 1, "visitor-ü", ts, id), true, ts, id},
		{"exactly 24 bytes", indexKey(nil, 42, maxID()), true, 42, maxID()},
		{"max ts", recordKey(nil, 0, math.MaxInt64, ID{}), true, math.MaxInt64, ID{}},
		{"23 bytes", make([]byte, 23), false, 0, ID{}},
		{"empty", nil, false, 0, ID{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotTS, gotID, ok := tsIDSuffix(tc.key)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if gotTS != tc.ts || gotID != tc.wantID {
				t.Errorf("tsIDSuffix = (%d, %x), want (%d, %x)", gotTS, gotID, tc.ts, tc.wantID)
			}
		})
	}
}

func TestConfigKeyKinds(t *testing.T) {
	// Kind "key" must not see the ids of kind "keys" (or of "key\x00x").
	p := configKey("key", "")
	for _, k := range [][]byte{configKey("keys", ""), configKey("keys", "a"), configKey("ke", "y")} {
		if bytes.HasPrefix(k, p) {
			t.Errorf("config key %q has prefix %q", k, p)
		}
	}
	if !bytes.HasPrefix(configKey("key", "abc"), p) {
		t.Error("config key lacks its kind prefix")
	}
}

func TestLevelWidth(t *testing.T) {
	for _, tc := range []struct {
		level byte
		want  int64
	}{{LevelMinute, 60_000}, {LevelHour, 3_600_000}, {LevelDay, 86_400_000}} {
		if got := levelWidth(tc.level); got != tc.want {
			t.Errorf("levelWidth(%c) = %d, want %d", tc.level, got, tc.want)
		}
	}
}

// TestSplitAtPrefix: every flushed table holds keys of one prefix byte, so
// that a table of records (which grow at their end) overlaps little below.
func TestSplitAtPrefix(t *testing.T) {
	db := openTestDB(t, "")
	b := db.NewBatch()
	for i := range 100 {
		id := testID(uint64(i))
		b.AddEvent(1, &Event{ID: id, Name: "e", VisitorID: "v", HasVisitor: true, Timestamp: int64(i)})
		b.AddIdempotency("key_1", fmt.Sprint("k", i), IdemRecord{ID: id})
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := db.Pebble().Flush(); err != nil {
		t.Fatal(err)
	}
	tables, err := db.Pebble().SSTables()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, level := range tables {
		for _, tb := range level {
			n++
			if lo, hi := tb.Smallest.UserKey, tb.Largest.UserKey; lo[0] != hi[0] {
				t.Errorf("a table spans prefixes %c to %c", lo[0], hi[0])
			}
		}
	}
	if n < 3 { // S, Z, N, I, L at least
		t.Errorf("%d tables after a flush of several prefixes", n)
	}
}
