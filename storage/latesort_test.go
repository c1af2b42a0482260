package storage

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLateSorter: the counting sorts give the orders the comparisons give,
// entry for entry, with one dataset or several, few names or more than the
// counting sort takes, and times outside the cell; removed entries go.
func TestLateSorter(t *testing.T) {
	const base = 1_768_473_000_000
	tests := []struct {
		name          string
		datasets      int
		names         int
		spread        int64 // times in [base, base+spread)
		removedEveryN int
	}{
		{"one dataset, one name", 1, 1, lateCellMs, 0},
		{"one dataset, names", 1, 8, lateCellMs, 0},
		{"datasets and names", 3, 5, lateCellMs, 7},
		{"one millisecond", 2, 3, 1, 0},
		{"more names than counted", 2, maxNameBuckets, lateCellMs, 0},
		{"times past the cell", 2, 4, 3 * lateCellMs, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tt.datasets)))
			entries := make([]lateEntry, 5000)
			for i := range entries {
				e := &entries[i]
				e.ds = uint32(10 + r.IntN(tt.datasets))
				e.name = uint32(r.IntN(tt.names))
				e.ts = base + r.Int64N(tt.spread)
				for j := range e.id {
					e.id[j] = byte(r.Uint32())
				}
				e.off = uint32(i) // tells entries apart
				if tt.removedEveryN > 0 && i%tt.removedEveryN == 0 {
					e.flags |= lateRemoved
				}
			}
			rank := make([]uint32, tt.names)
			for i, p := range r.Perm(tt.names) {
				rank[i] = uint32(p)
			}
			var want []lateEntry
			for _, e := range entries {
				if e.flags&lateRemoved == 0 {
					want = append(want, e)
				}
			}
			slices.SortFunc(want, byTime)
			var s lateSorter
			for range 2 { // twice: the buffers are reused
				s.load(entries)
				if got := s.sortByTime(base); !slices.Equal(got, want) {
					t.Fatalf("sortByTime differs from the comparison sort (%d against %d entries)", len(got), len(want))
				}
				wantJ := slices.Clone(want)
				slices.SortStableFunc(wantJ, func(a, b lateEntry) int {
					return cmp.Or(cmp.Compare(a.ds, b.ds), cmp.Compare(rank[a.name], rank[b.name]))
				})
				if got := s.sortByName(rank); !slices.Equal(got, wantJ) {
					t.Fatalf("sortByName differs from the comparison sort")
				}
			}
		})
	}
}

func BenchmarkLateSorter(b *testing.B) {
	const base = 1_768_473_000_000
	r := rand.New(rand.NewPCG(2, 2))
	entries := make([]lateEntry, 200_000) // a second at 200,000 displaced events
	for i := range entries {
		e := &entries[i]
		e.ds, e.name = 1, uint32(r.IntN(8))
		e.ts = base + int64(i)*lateCellMs/int64(len(entries)) - r.Int64N(5) // a few ms behind
		e.id[0], e.id[1] = byte(i>>16), byte(i>>8)
	}
	rank := []uint32{3, 1, 4, 0, 5, 7, 2, 6}
	b.Run("counting", func(b *testing.B) {
		var s lateSorter
		for b.Loop() {
			s.load(entries)
			s.sortByTime(base)
			s.sortByName(rank)
		}
	})
	b.Run("comparisons", func(b *testing.B) {
		es := make([]lateEntry, len(entries))
		for b.Loop() {
			copy(es, entries)
			slices.SortFunc(es, byTime)
			slices.SortFunc(es, byName(rank))
		}
	})
}
