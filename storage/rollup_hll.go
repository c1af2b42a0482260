package storage

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// HyperLogLog sketches of visitor ids, kept per rollup bucket for
// unique_visitors. The format is persisted, so the precision, the hash and
// the encodings below can never change without a new key prefix.
//
// Precision p = 14: m = 16384 registers, relative standard error
// 1.04/sqrt(m) = 0.81%. The estimate uses Ertl's improved estimator
// ("New cardinality estimation algorithms for HyperLogLog sketches", 2017),
// which needs no empirical bias tables and stays unbiased from 0 to far
// beyond 10^9, so small counts come out (nearly) exact.
const (
	hllP = 14
	hllM = 1 << hllP
	hllQ = 64 - hllP // hash bits left after the register index; ranks are 1..hllQ+1

	// hllSparseMax is the number of sparse entries (3 bytes each) past which a
	// sketch is stored dense (1 + 16384 bytes): about where the two sizes cross.
	hllSparseMax = 4096

	hllSparse = 1 // encoding tags, the first byte of a stored sketch
	hllDense  = 2
)

// Sketch is a HyperLogLog sketch. Small sketches are a sorted list of
// (register, rank) entries, so a minute bucket with a handful of visitors
// costs a few bytes instead of 16 KiB; past hllSparseMax entries it turns into
// the dense register array. The zero value is an empty sketch.
type Sketch struct {
	sparse  []uint32 // sorted by register, one entry per register: register<<8 | rank
	pending []uint32 // entries not yet merged into sparse (unsorted, may repeat)
	dense   []uint8  // hllM registers once dense; nil while sparse
}

// HashVisitor is the 64-bit hash of a visitor id used by every sketch: FNV-1a
// over the bytes and the murmur3 finaliser, so that the top bits (the
// register index) are well mixed even for ids that differ only at the end.
func HashVisitor(v string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// hllEntry turns a hash into its register index and rank.
func hllEntry(h uint64) uint32 {
	idx := uint32(h >> hllQ)
	rank := min(bits.LeadingZeros64(h<<hllP), hllQ) + 1
	return idx<<8 | uint32(rank)
}

// Add counts one visitor hash.
func (s *Sketch) Add(h uint64) { s.addEntry(hllEntry(h)) }

func (s *Sketch) addEntry(e uint32) {
	if s.dense != nil {
		if r := uint8(e); r > s.dense[e>>8] {
			s.dense[e>>8] = r
		}
		return
	}
	s.pending = append(s.pending, e)
	if len(s.pending) >= hllSparseMax {
		s.compact()
	}
}

// compact merges pending entries into the sorted list, going dense when the
// list grows past hllSparseMax.
func (s *Sketch) compact() {
	if len(s.pending) == 0 {
		return // no write: compacted sketches are read concurrently (derived.go)
	}
	if s.dense != nil {
		s.pending = s.pending[:0]
		return
	}
	var tmp []uint32
	sortSketchEntries(s.pending, &tmp)
	s.sparse = mergeEntries(s.sparse, dedupeEntries(s.pending))
	s.pending = s.pending[:0]
	if len(s.sparse) > hllSparseMax {
		s.toDense()
	}
}

// radixMin is the length from which sortSketchEntries sorts by counting: below
// it clearing the counts costs more than a comparison sort.
const radixMin = 512

// sortSketchEntries sorts sparse sketch entries (22 bits: register and rank) in
// place, tmp holding them between its two counting passes (one per 11-bit
// half) from radixMin entries on. A commit sorts every minute cell's
// entries, one per event with a visitor: 2% of a batch's CPU with a
// comparison sort. Settling a sketch's pending entries (compact) sorts them
// too: a checkpoint settles every open bucket's at once.
func sortSketchEntries(es []uint32, tmp *[]uint32) {
	if len(es) < radixMin {
		slices.Sort(es)
		return
	}
	if cap(*tmp) < len(es) {
		*tmp = make([]uint32, len(es))
	}
	t := (*tmp)[:len(es)]
	var lo, hi [1 << 11]int32
	for _, e := range es {
		lo[e&0x7ff]++
		hi[e>>11&0x7ff]++
	}
	var sl, sh int32
	for i := range lo {
		sl, lo[i] = sl+lo[i], sl
		sh, hi[i] = sh+hi[i], sh
	}
	for _, e := range es {
		t[lo[e&0x7ff]] = e
		lo[e&0x7ff]++
	}
	for _, e := range t {
		es[hi[e>>11&0x7ff]] = e
		hi[e>>11&0x7ff]++
	}
}

// dedupeEntries keeps, for each register of a sorted list, the highest rank
// (the last entry of its run); it works in place.
func dedupeEntries(es []uint32) []uint32 {
	out := es[:0]
	for i, e := range es {
		if i+1 < len(es) && es[i+1]>>8 == e>>8 {
			continue
		}
		out = append(out, e)
	}
	return out
}

// mergeEntries unions two sorted, deduplicated lists keeping the higher rank.
func mergeEntries(a, b []uint32) []uint32 {
	if len(a) == 0 {
		return append([]uint32(nil), b...)
	}
	if len(b) == 0 {
		return a
	}
	out := make([]uint32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ra, rb := a[i]>>8, b[j]>>8
		switch {
		case ra < rb:
			out = append(out, a[i])
			i++
		case rb < ra:
			out = append(out, b[j])
			j++
		default:
			out = append(out, max(a[i], b[j]))
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

func (s *Sketch) toDense() {
	d := make([]uint8, hllM)
	for _, e := range s.sparse {
		if r := uint8(e); r > d[e>>8] {
			d[e>>8] = r
		}
	}
	for _, e := range s.pending {
		if r := uint8(e); r > d[e>>8] {
			d[e>>8] = r
		}
	}
	s.dense, s.sparse, s.pending = d, nil, nil
}

// Merge adds every visitor of o to s (register-wise maximum).
func (s *Sketch) Merge(o *Sketch) {
	o.compact()
	if o.dense != nil {
		if s.dense == nil {
			s.toDense()
		}
		for i, r := range o.dense {
			if r > s.dense[i] {
				s.dense[i] = r
			}
		}
		return
	}
	if s.dense != nil {
		for _, e := range o.sparse {
			s.addEntry(e)
		}
		return
	}
	s.compact()
	s.sparse = mergeEntries(s.sparse, o.sparse)
	if len(s.sparse) > hllSparseMax {
		s.toDense()
	}
}

// MergeEncoded adds a stored sketch to s.
func (s *Sketch) MergeEncoded(p []byte) error {
	if len(p) == 0 {
		return errCorrupt
	}
	switch p[0] {
	case hllSparse:
		body := p[1:]
		if len(body)%3 != 0 {
			return errCorrupt
		}
		for i := 0; i < len(body); i += 3 {
			idx, r := uint32(body[i])<<8|uint32(body[i+1]), uint32(body[i+2])
			if idx >= hllM || r == 0 || r > hllQ+1 {
				return errCorrupt
			}
			// Pending entries are merged every hllSparseMax additions, so
			// folding many small operands into a large sketch stays linear.
			s.addEntry(idx<<8 | r)
		}
		return nil
	case hllDense:
		if len(p) != 1+hllM {
			return errCorrupt
		}
		if s.dense == nil {
			s.toDense()
		}
		return maxRegisters(s.dense, p[1:])
	}
	return errCorrupt
}

// maxRegisters sets dst[i] = max(dst[i], src[i]) eight registers at a time:
// ranks are below 64, so a byte-wise subtraction from (a | 0x80) never
// borrows across bytes and its top bit tells which byte is larger. A query
// over 30 days of dense sketches merges megabytes of registers, so this is
// its hot loop. A rank of 64 or more in src is corruption.
func maxRegisters(dst, src []byte) error {
	const hi = 0x8080808080808080
	for i := 0; i+8 <= len(src); i += 8 {
		b := binary.LittleEndian.Uint64(src[i:])
		if b&0xc0c0c0c0c0c0c0c0 != 0 {
			return errCorrupt
		}
		a := binary.LittleEndian.Uint64(dst[i:])
		ge := (((a | hi) - b) & hi) >> 7 * 0xff // 0xff in each byte where a >= b
		binary.LittleEndian.PutUint64(dst[i:], a&ge|b&^ge)
	}
	return nil
}

// AppendEncoded appends the stored form of s: a tag byte, then 3 bytes
// (register big-endian, rank) per sparse entry or the 16384 dense registers.
func (s *Sketch) AppendEncoded(dst []byte) []byte {
	s.compact()
	if s.dense != nil {
		dst = append(dst, hllDense)
		return append(dst, s.dense...)
	}
	dst = append(dst, hllSparse)
	for _, e := range s.sparse {
		dst = append(dst, byte(e>>16), byte(e>>8), byte(e))
	}
	return dst
}

// Empty reports whether no visitor was added.
func (s *Sketch) Empty() bool {
	s.compact()
	if s.dense == nil {
		return len(s.sparse) == 0
	}
	for _, r := range s.dense {
		if r != 0 {
			return false
		}
	}
	return true
}

// Estimate is the estimated number of distinct visitors added.
func (s *Sketch) Estimate() float64 {
	s.compact()
	var c [hllQ + 2]int // registers per rank
	if s.dense != nil {
		for _, r := range s.dense {
			c[min(r, hllQ+1)]++ // stored ranks are checked below 64; valid ones never exceed hllQ+1
		}
	} else {
		c[0] = hllM - len(s.sparse)
		for _, e := range s.sparse {
			c[uint8(e)]++
		}
	}
	if c[0] == hllM {
		return 0
	}
	const m = float64(hllM)
	z := m * hllTau(1-float64(c[hllQ+1])/m)
	for k := hllQ; k >= 1; k-- {
		z = 0.5 * (z + float64(c[k]))
	}
	z += m * hllSigma(float64(c[0])/m)
	return m * m / (2 * math.Ln2) / z
}

// Count is Estimate rounded to a whole number of visitors.
func (s *Sketch) Count() int64 { return int64(math.Round(s.Estimate())) }

func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		prev := z
		z += x * y
		y += y
		if z == prev {
			return z
		}
	}
}

func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		prev := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if z == prev {
			return z / 3
		}
	}
}

// sumValue is a numeric property's rollup: sum (compensated, so adding
// millions of 19.99s in any merge order lands on the correctly rounded
// total) and count, for sum and avg.
type sumValue struct {
	sum, comp float64
	n         int64
}

func (v *sumValue) add(x float64) {
	t := v.sum + x
	if math.Abs(v.sum) >= math.Abs(x) {
		v.comp += (v.sum - t) + x
	} else {
		v.comp += (x - t) + v.sum
	}
	v.sum = t
}

func (v *sumValue) merge(o sumValue) {
	v.add(o.sum)
	v.comp += o.comp
	v.n += o.n
}

// Total is the sum with its compensation applied.
func (v sumValue) total() float64 { return v.sum + v.comp }
