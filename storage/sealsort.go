package storage

import (
	"bytes"
	"math/bits"
	"slices"
)

// sealFixed is how many of a visitor's arena bytes (dataset, id length and
// the id, zero-padded) order it in most comparisons: ids such as v_<n> or
// user_<n> share their first eight bytes in runs of a hundred (session 18),
// so sixteen bytes of the id.
const sealFixed = 6 + 16

// sealOrder returns a sealing day's visitors (their numbers) in key order,
// which is the order of their arena bytes. Each visitor's first sealFixed
// bytes are packed into the high bits of a uint64 above its number,
// keeping only the bytes that differ between visitors and, of each, as
// many bits as the values it takes there need (their rank among them):
// v_<n> ids need 28 bits, UUIDs 64, of which the first 40-44 fit. The
// uint64s are radix-sorted; visitors whose packed bytes are equal (ids
// that share the bytes the key holds) are then ordered by their bytes. A
// comparison sort of 24-byte keys took a million visitors 180 ms, most of
// a seal's time after the tables' writes; this takes 90 ms for v_<n> ids
// and 150 for UUIDs (BenchmarkSealOrder).
func sealOrder(s daySnapshot) []uint32 {
	n := len(s.vis)
	if n == 0 {
		return nil
	}
	fixed := func(num uint32) (f [sealFixed]byte) {
		copy(f[:], visitorBytes(s.arena, s.vis, num))
		return f
	}
	// The bytes that differ from the first visitor's, then the values each
	// of them takes: found first, they keep the values' pass to 7 of the
	// 22 bytes of v_<n> ids (a values' pass over all 22 took longer than
	// both passes).
	first := fixed(0)
	var differ [sealFixed]bool
	for i := 1; i < n; i++ {
		f := fixed(uint32(i))
		for p := range f {
			differ[p] = differ[p] || f[p] != first[p]
		}
	}
	var positions []int
	for p, d := range differ {
		if d {
			positions = append(positions, p)
		}
	}
	var present [sealFixed][4]uint64
	for i := range n {
		f := fixed(uint32(i))
		for _, p := range positions {
			c := f[p]
			present[p][c>>6] |= 1 << (c & 63)
		}
	}
	// Each byte's ranks, most significant first, in the bits above the
	// numbers: a byte past them is decided by the tie sort.
	numBits := bits.Len(uint(n - 1))
	room := 64 - numBits
	type part struct {
		pos, width int
		rank       [256]uint8
	}
	parts := make([]part, 0, len(positions))
	used := 0
	for _, p := range positions {
		if used == room {
			break
		}
		values := 0
		for _, w := range present[p] {
			values += bits.OnesCount64(w)
		}
		full := bits.Len(uint(values - 1))
		pt := part{pos: p, width: min(full, room-used)}
		r := 0
		for c := range 256 {
			if present[p][c>>6]&(1<<(c&63)) != 0 {
				// Truncated to the bits left: still in order.
				pt.rank[c] = uint8(r >> (full - pt.width))
				r++
			}
		}
		parts = append(parts, pt)
		used += pt.width
	}
	keys := make([]uint64, n)
	for i := range keys {
		f := fixed(uint32(i))
		var k uint64
		for j := range parts {
			k = k<<parts[j].width | uint64(parts[j].rank[f[parts[j].pos]])
		}
		keys[i] = k<<numBits | uint64(i)
	}
	radixSort(keys, make([]uint64, n), numBits, numBits+used)
	order := make([]uint32, n)
	mask := uint64(1)<<numBits - 1
	for i := 0; i < n; {
		j := i + 1
		for j < n && keys[j]>>numBits == keys[i]>>numBits {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], func(a, b uint64) int {
				return bytes.Compare(visitorBytes(s.arena, s.vis, uint32(a&mask)), visitorBytes(s.arena, s.vis, uint32(b&mask)))
			})
		}
		for ; i < j; i++ {
			order[i] = uint32(keys[i] & mask)
		}
	}
	return order
}

// radixSort sorts keys by their bits from bit lo up to bit hi, a byte a
// pass from the lowest; tmp is as long as keys.
func radixSort(keys, tmp []uint64, lo, hi int) {
	src, dst := keys, tmp
	for shift := lo; shift < hi; shift += 8 {
		var counts [256]int
		for _, k := range src {
			counts[byte(k>>shift)]++
		}
		at := 0
		for b, c := range counts {
			counts[b] = at
			at += c
		}
		for _, k := range src {
			b := byte(k >> shift)
			dst[counts[b]] = k
			counts[b]++
		}
		src, dst = dst, src
	}
	if (hi-lo+7)/8%2 == 1 {
		copy(keys, src)
	}
}
