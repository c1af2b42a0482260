package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sealSnapshot is a memory day holding one entry of each visitor of ids
// (dataset ds(i), id ids[i]), numbered in that order.
func sealSnapshot(ids []string, ds func(i int) uint32) daySnapshot {
	m := newVisitorMem(0, &inflight{})
	md := newMemDay()
	for i, id := range ids {
		v := memVisitor{ds(i), id}
		md.add(m.hash(v), v, memEntry{ts: int64(i), id: testID(uint64(i))})
	}
	return md.snapshot()
}

func uuidID(i int) string {
	h1, h2 := uint64(i)*0x9E3779B97F4A7C15, uint64(i+1)*0xC2B2AE3D27D4EB4F
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", uint32(h1), uint16(h1>>32), uint16(h1>>48)&0xfff, uint16(h2)&0xfff, h2>>16)
}

func TestSealOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	many := func(n int, id func(i int) string) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = id(i)
		}
		rng.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		return ids
	}
	one := func(int) uint32 { return 1 }
	for _, tc := range []struct {
		name string
		ids  []string
		ds   func(i int) uint32
	}{
		{"empty", nil, one},
		{"one", []string{"v"}, one},
		{"bench ids", many(5000, func(i int) string { return fmt.Sprintf("v_%d", 10_000_000+i) }), one},
		{"uuids", many(5000, uuidID), one},
		{"lengths and the empty id", many(3000, func(i int) string { return fmt.Sprintf("%03d", i*7919%1000)[:i%4] }), one},
		// Longer than the fixed part and equal in it: ordered by the rest.
		{"shared first 16 bytes", many(2000, func(i int) string { return fmt.Sprintf("user-0000000000-%d", i) }), one},
		{"all one prefix, in one run", many(500, func(i int) string { return fmt.Sprintf("0123456789abcdef%03d", i) }), one},
		{"datasets", many(4000, func(i int) string { return fmt.Sprintf("u%d", i%700) }), func(i int) uint32 { return uint32(i * 31 % 5) }},
		// More than 64 bits of differing bytes: the key holds the first
		// 64, a 100-value byte truncated to its top bit, the rest ties.
		{"random bytes", many(4000, func(int) string {
			b := make([]byte, 16+rng.IntN(5))
			for i := range b {
				b[i] = byte(rng.UintN(256))
			}
			return string(b)
		}), one},
		{"a hundred values a byte", many(4000, func(int) string {
			b := make([]byte, 10)
			for i := range b {
				b[i] = byte(28 + rng.IntN(100))
			}
			b[0] = byte(28 + rng.IntN(3)) // long runs equal in their first bytes
			return string(b)
		}), one},
		{"high bytes", many(2000, func(i int) string { return string([]byte{0xff, byte(i), 0x80, byte(i >> 8)}) }), func(i int) uint32 { return 0xfffffff0 + uint32(i%3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A day holds each visitor once.
			seen := map[string]bool{}
			tc.ids = slices.DeleteFunc(tc.ids, func(id string) bool {
				k := fmt.Sprint(tc.ds(len(seen)), id)
				dup := seen[k]
				seen[k] = true
				return dup
			})
			snap := sealSnapshot(tc.ids, tc.ds)
			vb := func(num uint32) []byte { return visitorBytes(snap.arena, snap.vis, num) }
			want := make([]uint32, len(snap.vis))
			for i := range want {
				want[i] = uint32(i)
			}
			// The comparison sort sealOrder replaced, on the whole bytes.
			slices.SortFunc(want, func(a, b uint32) int { return bytes.Compare(vb(a), vb(b)) })
			got := sealOrder(snap)
			if len(got) != len(want) {
				t.Fatalf("%d visitors, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("position %d: visitor %q, want %q", i, vb(got[i])[6:], vb(want[i])[6:])
				}
			}
		})
	}
}

// BenchmarkSealOrder orders a million visitors, in no order, as a seal
// does (BenchmarkWriteVisitorTables: the whole seal).
func BenchmarkSealOrder(b *testing.B) {
	for _, ids := range []struct {
		name string
		id   func(i int) string
	}{
		{"bench", func(i int) string { return fmt.Sprintf("v_%d", 10_000_000+i) }},
		{"uuid", uuidID},
	} {
		names := make([]string, 1<<20)
		for i := range names {
			names[i] = ids.id(i * 0x9E3779B1 % (1 << 20))
		}
		snap := sealSnapshot(names, func(int) uint32 { return 1 })
		b.Run(ids.name, func(b *testing.B) {
			for range b.N {
				sealOrder(snap)
			}
		})
	}
}

// FuzzSealOrder checks sealOrder against a sort of the whole bytes for
// any visitors: the input split at zero bytes into ids, each in dataset
// 1 or 2 by its length.
func FuzzSealOrder(f *testing.F) {
	f.Add([]byte("v_1\x00v_2\x00v_10\x00\x00user-0000000000-a\x00user-0000000000-b"))
	f.Add([]byte("\xff\xfe\x00\xff\x00\x01\x02\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		seen := map[string]bool{}
		var ids []string
		for _, id := range bytes.Split(data, []byte{0}) {
			if len(id) <= 200 && !seen[string(id)] {
				seen[string(id)] = true
				ids = append(ids, string(id))
			}
		}
		snap := sealSnapshot(ids, func(i int) uint32 { return 1 + uint32(len(ids[i])%2) })
		vb := func(num uint32) []byte { return visitorBytes(snap.arena, snap.vis, num) }
		got := sealOrder(snap)
		if len(got) != len(ids) {
			t.Fatalf("%d visitors, want %d", len(got), len(ids))
		}
		for i := 1; i < len(got); i++ {
			if bytes.Compare(vb(got[i-1]), vb(got[i])) >= 0 {
				t.Fatalf("%q before %q", vb(got[i-1]), vb(got[i]))
			}
		}
	})
}
