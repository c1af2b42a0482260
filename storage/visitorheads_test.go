package storage

import (
	"math/rand/v2"
	"testing"
)

// TestHeadTable checks the table against a Go map: hashes that share a
// part (top byte) and a slot (low bits), a hash of 0, heads set again, and
// every growth of a part from its first size on.
func TestHeadTable(t *testing.T) {
	tests := []struct {
		name   string
		hashes func(i int) uint64
	}{
		{"random", func(int) uint64 { return rand.Uint64() }},
		{"one part, colliding slots", func(i int) uint64 { return 0xab<<56 | uint64(i%50)<<40 | uint64(i%7) }},
		{"small", func(i int) uint64 { return uint64(i % 300) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tbl headTable
			model := map[uint64]uint32{}
			for i := range 20_000 {
				h := tc.hashes(i)
				if got := tbl.get(h); got != model[h] {
					t.Fatalf("step %d: get(%#x) = %d, want %d", i, h, got, model[h])
				}
				head := uint32(i + 1)
				tbl.set(h, head)
				model[h] = head
			}
			n := 0
			for p := range tbl.parts {
				part := &tbl.parts[p]
				n += part.n
				if part.n*4 > len(part.slots)*3 {
					t.Errorf("part %d: %d of %d slots taken, more than three quarters", p, part.n, len(part.slots))
				}
			}
			if n != len(model) {
				t.Errorf("%d hashes held, want %d", n, len(model))
			}
			for h, want := range model {
				if got := tbl.get(h); got != want {
					t.Errorf("get(%#x) = %d, want %d", h, got, want)
				}
			}
			for range 1000 {
				if h := rand.Uint64(); model[h] == 0 && tbl.get(h) != 0 {
					t.Errorf("get(%#x) of a hash never set = %d", h, tbl.get(h))
				}
			}
		})
	}
}
