package ids

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
	"time"
)

func TestEventRoundTrip(t *testing.T) {
	cases := [][16]byte{
		{},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x01, 0x8d, 0x3a, 0x00, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4},
	}
	for _, id := range cases {
		s := FormatEvent(id)
		if len(s) != 30 || !strings.HasPrefix(s, "evt_") {
			t.Fatalf("FormatEvent(%x) = %q", id, s)
		}
		got, err := ParseEvent(s)
		if err != nil || got != id {
			t.Fatalf("ParseEvent(%q) = %x, %v; want %x", s, got, err, id)
		}
		if low, err := ParseEvent(strings.ToLower(s[:4]) + strings.ToLower(s[4:])); err != nil || low != id {
			t.Fatalf("lower case %q: %x, %v", s, low, err)
		}
	}
}

func TestParseEventRejects(t *testing.T) {
	for _, s := range []string{
		"", "evt_", "evt_0000000000000000000000000", "evt_000000000000000000000000000",
		"evx_00000000000000000000000000", "evt_8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "evt_0000000000000000000000000U",
		"evt_0000000000000000000000000!", "EVT_00000000000000000000000000",
	} {
		if _, err := ParseEvent(s); err == nil {
			t.Errorf("ParseEvent(%q) accepted", s)
		}
	}
}

func TestGeneratorIncreasing(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := &Generator{now: func() time.Time { return now }}
	prev, _ := g.Next()
	for i := 0; i < 10000; i++ {
		if i%1000 == 0 {
			now = now.Add(time.Millisecond)
		}
		if i == 5000 {
			now = now.Add(-time.Second) // clock steps back: ids must still grow
		}
		id, ms := g.Next()
		if bytes.Compare(id[:], prev[:]) <= 0 {
			t.Fatalf("id %d not increasing: %x after %x", i, id, prev)
		}
		if Time(id) != ms {
			t.Fatalf("Time = %d, want %d", Time(id), ms)
		}
		if a, b := FormatEvent(prev), FormatEvent(id); a >= b {
			t.Fatalf("text order differs from byte order: %s >= %s", a, b)
		}
		prev = id
	}
}

func TestRandom(t *testing.T) {
	s := Random("sk_live_", 32)
	if len(s) != 40 || !strings.HasPrefix(s, "sk_live_") {
		t.Fatalf("Random = %q", s)
	}
	for _, c := range s[8:] {
		if !strings.ContainsRune("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", c) {
			t.Fatalf("non-base62 %q in %q", c, s)
		}
	}
	if Random("", 32) == Random("", 32) {
		t.Fatal("two random ids are equal")
	}
}

func TestFloorIsBelowLaterIDs(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	g := &Generator{now: func() time.Time { return now }}
	for _, step := range []struct {
		name  string
		clock time.Duration // moved before Floor
	}{
		{"fresh", 0},
		{"same millisecond", 0},
		{"clock ahead", 5 * time.Millisecond},
		{"clock back", -20 * time.Millisecond},
	} {
		now = now.Add(step.clock)
		f := g.Floor()
		for i := 0; i < 3; i++ {
			id, _ := g.Next()
			if string(id[:]) <= string(f[:]) {
				t.Fatalf("%s: id %x not above floor %x", step.name, id, f)
			}
		}
		if f2 := g.Floor(); string(f2[:]) < string(f[:]) {
			t.Fatalf("%s: floor went back", step.name)
		}
	}
}

func TestHorizonHoldsBackOpenBatches(t *testing.T) {
	g := NewGenerator()
	h := NewHorizon(g)
	a := h.Hold()
	ida, _ := g.Next()
	b := h.Hold()
	idb, _ := g.Next()
	b.Release() // b committed first: ida is still open
	if s := h.Settled(); string(s[:]) >= string(ida[:]) {
		t.Fatalf("settled %x not below open id %x", s, ida)
	}
	a.Release()
	if s := h.Settled(); string(s[:]) < string(idb[:]) {
		t.Fatalf("settled %x below committed %x", s, idb)
	}
}

// TestReserve: a reserved block hands out the ids that as many calls of
// Next would have made: consecutive, carrying into the high bits, and the
// generator goes on after the block.
func TestReserve(t *testing.T) {
	const ms = 1_700_000_000_000
	tests := []struct {
		name   string
		lastMs int64  // 0: the block starts a new millisecond (random start)
		lo     uint64 // the generator's last low bits, when lastMs is set
		n      int
	}{
		{"new millisecond", 0, 0, 5},
		{"same millisecond", ms, 41, 100},
		{"carry inside the block", ms, ^uint64(0) - 2, 6},
		{"carry at the block's end", ms, ^uint64(0) - 5, 5},
		{"one", ms, 7, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &Generator{now: func() time.Time { return time.UnixMilli(ms) }, lastMs: tt.lastMs, hi: 3, lo: tt.lo}
			b := g.Reserve(tt.n)
			var got [][16]byte
			for range tt.n {
				id, m := b.Next()
				if m != ms || Time(id) != ms {
					t.Fatalf("millisecond %d (id's %d), want %d", m, Time(id), ms)
				}
				got = append(got, id)
			}
			after, _ := g.Next()
			got = append(got, after)
			for i := 1; i < len(got); i++ {
				if !successor(got[i-1], got[i]) {
					t.Fatalf("id %d: %x does not follow %x", i, got[i], got[i-1])
				}
			}
			if tt.lastMs != 0 && !successor(idOf(ms, 3, tt.lo), got[0]) {
				t.Fatalf("first id %x does not follow the generator's last", got[0])
			}
			defer func() {
				if recover() == nil {
					t.Fatal("Next past the block did not panic")
				}
			}()
			b.Next()
		})
	}
	t.Run("none", func(t *testing.T) {
		g := &Generator{now: func() time.Time { return time.UnixMilli(ms) }, lastMs: ms, hi: 3, lo: 9}
		g.Reserve(0)
		if id, _ := g.Next(); id != idOf(ms, 3, 10) {
			t.Fatalf("after Reserve(0): %x, want the generator unmoved", id)
		}
	})
}

func idOf(ms int64, hi uint16, lo uint64) (id [16]byte) {
	putMs(id[:], ms)
	binary.BigEndian.PutUint16(id[6:], hi)
	binary.BigEndian.PutUint64(id[8:], lo)
	return id
}

// successor reports whether b is a's id plus one in the low 80 bits, in
// the same millisecond.
func successor(a, b [16]byte) bool {
	if Time(a) != Time(b) {
		return false
	}
	hi, lo := binary.BigEndian.Uint16(a[6:]), binary.BigEndian.Uint64(a[8:])
	if lo++; lo == 0 {
		hi++
	}
	return b == idOf(Time(a), hi, lo)
}
