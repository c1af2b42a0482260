package event

import (
	"math/rand/v2"
	"testing"
)

// safeRun stops where a byte-by-byte scan with the safe table stops, for
// every start in strings built from the bytes that matter around the
// eight-byte steps.
func TestSafeRun(t *testing.T) {
	alphabet := []byte{'a', 'Z', ' ', '~', '"', '\\', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xc3, 0xff, '!', '#', '[', ']', 0x21, 0x5b, 0x5d}
	slow := func(data []byte, i int) int {
		for i < len(data) && safe[data[i]] {
			i++
		}
		return i
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 20000; n++ {
		data := make([]byte, r.IntN(40))
		for j := range data {
			if r.IntN(4) == 0 {
				data[j] = alphabet[r.IntN(len(alphabet))]
			} else {
				data[j] = 'a' + byte(r.IntN(26))
			}
		}
		for i := 0; i <= len(data); i++ {
			if got, want := safeRun(data, i), slow(data, i); got != want {
				t.Fatalf("safeRun(%q, %d) = %d, want %d", data, i, got, want)
			}
		}
	}
}

// Every byte value alone, at every position of an eight-byte word.
func TestUnsafeBytesEachByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			data := []byte("aaaaaaaa")
			data[pos] = byte(c)
			want := 8
			if !safe[c] {
				want = pos
			}
			if got := safeRun(data, 0); got != want {
				t.Fatalf("byte %#x at %d: safeRun = %d, want %d", c, pos, got, want)
			}
		}
	}
}

// Every pair of byte values at every pair of positions of a word: a mark
// left by one byte's borrow never comes before the first unsafe byte.
func TestUnsafeBytesEachPair(t *testing.T) {
	for c1 := 0; c1 < 256; c1++ {
		for c2 := 0; c2 < 256; c2++ {
			for p1 := 0; p1 < 8; p1++ {
				for p2 := p1 + 1; p2 < 8; p2++ {
					data := []byte("aaaaaaaa")
					data[p1], data[p2] = byte(c1), byte(c2)
					want := 8
					switch {
					case !safe[c1]:
						want = p1
					case !safe[c2]:
						want = p2
					}
					if got := safeRun(data, 0); got != want {
						t.Fatalf("%#x at %d, %#x at %d: safeRun = %d, want %d", c1, p1, c2, p2, got, want)
					}
				}
			}
		}
	}
}
