package storage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// sketchEntries returns n entries of random visitor hashes, some repeated.
func sketchEntries(r *rand.Rand, n int) []uint32 {
	es := make([]uint32, n)
	for i := range es {
		if i > 0 && r.IntN(4) == 0 {
			es[i] = es[r.IntN(i)]
			continue
		}
		es[i] = hllEntry(r.Uint64())
	}
	return es
}

func TestSortSketchEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var tmp []uint32
	for _, n := range []int{0, 1, 2, radixMin - 1, radixMin, radixMin + 1, 5000, 70000} {
		es := sketchEntries(r, n)
		want := slices.Sorted(slices.Values(es))
		sortSketchEntries(es, &tmp)
		if !slices.Equal(es, want) {
			t.Errorf("n=%d: not sorted as slices.Sort sorts", n)
		}
	}
}

// BenchmarkSortSketchEntries sorts a commit's cell of n visitors' entries.
func BenchmarkSortSketchEntries(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{100, 512, 1600, 10000} {
		src := sketchEntries(r, n)
		es := make([]uint32, n)
		b.Run(fmt.Sprintf("n=%d/slices.Sort", n), func(b *testing.B) {
			for b.Loop() {
				copy(es, src)
				slices.Sort(es)
			}
		})
		b.Run(fmt.Sprintf("n=%d/sortSketchEntries", n), func(b *testing.B) {
			var tmp []uint32
			for b.Loop() {
				copy(es, src)
				sortSketchEntries(es, &tmp)
			}
		})
	}
}
