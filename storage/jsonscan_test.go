package storage

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestParseNumber(t *testing.T) {
	cases := []string{
		"0", "-0", "1", "12.5", "-12.5", "0.1", "0.3", "1.50", "2", "999999999999999", "1234567.89012345",
		"9999999999999999", "12345678901234567890", "0.1234567890123456789", "1e5", "-3e2", "1E-7", "1e999",
		"12.", ".5", "-", "", "1.2.3", "abc", "007", "18014398509481985", "9007199254740993",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		whole := strconv.FormatUint(r.Uint64N(1_000_000_000), 10)
		frac := strconv.FormatUint(r.Uint64N(1_000_000), 10)
		cases = append(cases, whole+"."+strings.Repeat("0", r.IntN(4))+frac, "-"+whole, whole[:1+r.IntN(len(whole))]+"."+frac)
	}
	for _, in := range cases {
		want, err := strconv.ParseFloat(in, 64)
		got, ok := parseNumber([]byte(in))
		if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("parseNumber(%q) = %v, %v; strconv: %v, %v", in, got, ok, want, err)
		}
	}
}

func TestEndString(t *testing.T) {
	for _, tc := range []struct {
		in      string
		end     int
		escaped bool
	}{
		{`""`, 2, false},
		{`"abc"`, 5, false},
		{`"abcdefghijklmnop"rest`, 18, false},
		{`"abcdefg\"hijklmnop"`, 20, true},
		{`"abcdefghijklmno\\"x`, 19, true},
		{`"é日本語 text that is long enough"`, len(`"é日本語 text that is long enough"`), false},
		{`"unterminated and longer than eight`, -1, false},
		{`"ends in a backslash\`, -1, true},
		{`"`, -1, false},
	} {
		end, escaped := endString([]byte(tc.in), 0)
		if end != tc.end || escaped != tc.escaped {
			t.Errorf("endString(%s) = %d, %v, want %d, %v", tc.in, end, escaped, tc.end, tc.escaped)
		}
	}
}

// BenchmarkEachNumber walks the bench's default properties (two numbers
// among seven members).
func BenchmarkEachNumber(b *testing.B) {
	p := []byte(benchProperties)
	n := 0
	for b.Loop() {
		eachNumber(p, func([]byte, float64) bool { n++; return true })
	}
}
