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
