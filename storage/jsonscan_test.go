package storage

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/eventd/eventd/engine/event"
	"github.com/eventd/eventd/storage/propnums"
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

// numbersOf is what numbers gives for e, and whether e's index was used
// (false: it walked the properties).
func numbersOf(e *Event) (got []numProp, indexed bool) {
	var nums [MaxRollupProperties]numProp
	n := numbers(e, &nums)
	return nums[:n], e.Numbers != nil && propnums.Each(e.Properties, e.Numbers, func([]byte, []byte) bool { return true })
}

// numberProperties are property objects whose numeric members the index
// must give exactly as eachNumber finds them (FuzzNumbersIndex's seeds).
var numberProperties = []string{
	`{}`,
	`{"amount":12.5,"currency":"EUR","quantity":2}`,
	`{"a":-0,"b":1e5,"c":-3E-2,"d":0.1234567890123456789,"e":12345678901234567890,"f":1e-400}`,
	`{"n":{"inner":1},"m":[1,2],"x":3}`,
	`{"s":"12","t":true,"u":null,"v":4}`,
	`{"esc\u0061ped":1,"plain":2,"q\"uote":3}`,
	`{"` + strings.Repeat("k", MaxRollupPropertyLen) + `":1,"` + strings.Repeat("k", MaxRollupPropertyLen+1) + `":2,"z":3}`,
	`{"p0":0,"p1":1,"p2":2,"p3":3,"p4":4,"p5":5,"p6":6,"p7":7,"p8":8,"p9":9,"pa":10,"pb":11,"pc":12,"pd":13,"pe":14,"pf":15,"pg":16,"ph":17}`,
	`{"é":1,"日本":2}`,
	`{ "spaced" : 1 }`,
	`{"name":"n","price":3,"category":"c"}`,
	`{"$user_id":5,"x":1}`,
}

// TestNumbersIndex: the decoder's index of a body's properties gives the
// rollups the numbers eachNumber finds, in the same order; properties sent
// with whitespace are walked instead.
func TestNumbersIndex(t *testing.T) {
	for _, props := range numberProperties {
		checkNumbersIndex(t, props)
	}
}

// FuzzNumbersIndex: for any properties the decoder accepts, the index and
// the walk agree.
func FuzzNumbersIndex(f *testing.F) {
	for _, p := range numberProperties {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, props string) { checkNumbersIndex(t, props) })
}

// checkNumbersIndex decodes props as a native event's properties and as
// a Segment track message's, and compares what the rollups get from the
// index with what they get walking the stored properties.
func checkNumbersIndex(t *testing.T, props string) {
	t.Helper()
	compact := !strings.ContainsAny(props, " \t\r\n")
	if in, _, _, prob := event.DecodeSingle([]byte(`{"event":"e","properties":` + props + `}`)); prob == nil {
		checkIndexed(t, "native", props, &in, compact)
	}
	// A Segment message's properties are stored with mapped members added
	// ($user_id, $context, ...); those that may hold a mapped member's
	// name ("name", "category", a "$" name, an escaped one) are copied
	// member by member, without an index.
	m, prob := event.DecodeSegmentMessage([]byte(`{"userId":"u","event":"e","context":{"n":1},"properties":`+props+`}`), event.SegmentTrack, 1)
	if prob == nil && m.Problem == nil {
		collides := strings.Contains(props, `"name"`) || strings.Contains(props, `"category"`) || strings.ContainsAny(props, `$\`)
		checkIndexed(t, "segment", props, &m.Input, compact && !collides)
	}
}

func checkIndexed(t *testing.T, kind, props string, in *event.Input, indexable bool) {
	t.Helper()
	if indexable && in.Numbers == nil {
		t.Errorf("%s %s: no index", kind, props)
	}
	e := Event{Properties: in.Properties, Numbers: in.Numbers}
	got, indexed := numbersOf(&e)
	walked := Event{Properties: in.Properties}
	want, _ := numbersOf(&walked)
	if indexable && !indexed {
		t.Errorf("%s %s: the index did not fit its properties %s", kind, props, in.Properties)
	}
	if len(got) != len(want) {
		t.Fatalf("%s %s: %d numbers from the index, %d from the walk", kind, props, len(got), len(want))
	}
	for i := range got {
		if string(got[i].key) != string(want[i].key) || math.Float64bits(got[i].v) != math.Float64bits(want[i].v) {
			t.Errorf("%s %s: number %d is %s=%v from the index, %s=%v from the walk", kind, props, i, got[i].key, got[i].v, want[i].key, want[i].v)
		}
	}
}

// TestNumbersStaleIndex: an index of other properties is not used, and a
// record read back has none.
func TestNumbersStaleIndex(t *testing.T) {
	in, _, _, prob := event.DecodeSingle([]byte(`{"event":"e","properties":{"a":1,"b":2}}`))
	if prob != nil {
		t.Fatal(prob)
	}
	for _, props := range []string{`{"a":1,"b":2,"c":3}`, `{"aa":1,"b":"x"}`} {
		e := Event{Properties: []byte(props), Numbers: in.Numbers}
		got, indexed := numbersOf(&e)
		if indexed {
			t.Errorf("%s: used the index of %s", props, in.Properties)
		}
		want, _ := numbersOf(&Event{Properties: e.Properties})
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", props, got, want)
		}
	}
	e := Event{Name: "e", Properties: in.Properties, Numbers: in.Numbers}
	var back Event
	back.Numbers = in.Numbers
	if err := decodeRecord(appendRecord(nil, &e), &back); err != nil || back.Numbers != nil {
		t.Errorf("decodeRecord: %v, Numbers %v; want none", err, back.Numbers)
	}
}

// quoteOrBackslash's lowest mark is the first quote or backslash, for every
// pair of byte values at every pair of positions of a word (UTF-8 bytes of
// at least 0x80 among them).
func TestQuoteOrBackslashEachPair(t *testing.T) {
	stop := func(c int) bool { return c == '"' || c == '\\' }
	for c1 := 0; c1 < 256; c1++ {
		for c2 := 0; c2 < 256; c2++ {
			for p1 := 0; p1 < 8; p1++ {
				for p2 := p1 + 1; p2 < 8; p2++ {
					w := []byte("aaaaaaaa")
					w[p1], w[p2] = byte(c1), byte(c2)
					want := 8
					switch {
					case stop(c1):
						want = p1
					case stop(c2):
						want = p2
					}
					got := 8
					if m := quoteOrBackslash(binary.LittleEndian.Uint64(w)); m != 0 {
						got = bits.TrailingZeros64(m) / 8
					}
					if got != want {
						t.Fatalf("%#x at %d, %#x at %d: first mark at %d, want %d", c1, p1, c2, p2, got, want)
					}
				}
			}
		}
	}
}
