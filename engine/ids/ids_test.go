package ids

import (
	"bytes"
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
