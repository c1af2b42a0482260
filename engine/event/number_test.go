package event

import (
	"strings"
	"testing"
)

// TestFiniteNumbers: a number must be a finite float64 (contract section 11):
// 1e999 is refused like NaN, wherever it appears, and values at the edges of
// the range are kept exactly as sent.
func TestFiniteNumbers(t *testing.T) {
	tests := []struct {
		num string
		ok  bool
	}{
		{"0", true},
		{"-0", true},
		{"1e308", true},
		{"1.7976931348623157e308", true}, // MaxFloat64
		{"-1.7976931348623157e308", true},
		{"1.7976931348623158e308", true}, // rounds down to MaxFloat64
		{"179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000", true},
		{"0.00000000001e318", true}, // leading "0": bound 10^exp is conservative, parse decides
		{"0.0e999", true},           // zero with a huge exponent is zero
		{"1e-999", true},            // underflow to 0 is finite
		{"4.9e-324", true},
		{"123456789e-400", true},
		{strings.Repeat("9", 308), true},
		{strings.Repeat("9", 400) + "e-100", true},
		{"1e99999999999999999999", false},
		{"1e999", false},
		{"-1e999", false},
		{"1E+309", false},
		{"1.7976931348623159e308", false}, // rounds up to infinity
		{"10e308", false},
		{strings.Repeat("9", 309), false},
		{"1" + strings.Repeat("0", 400) + ".5", false},
		{"0.1e310", false},
	}
	for _, tt := range tests {
		name := tt.num
		if len(name) > 40 {
			name = name[:40] + "…"
		}
		t.Run(name, func(t *testing.T) {
			for _, body := range []string{
				`{"event":"a","properties":{"x":` + tt.num + `}}`,
				`{"event":"a","properties":{"x":[1,{"y":` + tt.num + `}]}}`,
				`{"event":"a","unknown_field":` + tt.num + `}`,
			} {
				in, _, _, p := DecodeSingle([]byte(body))
				if tt.ok {
					if p != nil {
						t.Fatalf("%s refused: %+v", body, *p)
					}
					if !strings.Contains(string(in.Properties)+body, tt.num) {
						t.Fatalf("number not kept as sent")
					}
					continue
				}
				if p == nil {
					t.Fatalf("%s accepted", body)
				}
				checkProblem(t, p, 400, "bad_request", map[string]string{"body": "not a finite float64"})
			}
			// Like NaN, it makes a whole batch body a 400.
			batch := `{"events":[{"event":"ok"},{"event":"b","properties":{"x":` + tt.num + `}}]}`
			entries, _, _, p := DecodeBatch([]byte(batch))
			if tt.ok != (p == nil) {
				t.Fatalf("batch: problem %+v, want ok=%v", p, tt.ok)
			}
			if tt.ok && (len(entries) != 2 || entries[1].Problem != nil) {
				t.Fatalf("batch entries %+v", entries)
			}
			if !tt.ok {
				checkProblem(t, p, 400, "bad_request", map[string]string{"body": "number at byte 57 is not a finite float64 value"})
			}
			// So is an import line.
			if _, p := DecodeImport([]byte(`{"event":"b","properties":{"x":` + tt.num + `}}`)); (p == nil) != tt.ok {
				t.Fatalf("import line: problem %+v, want ok=%v", p, tt.ok)
			}
		})
	}
}

// The range check must not cost the hot path an allocation.
func TestFiniteNumbersAllocs(t *testing.T) {
	body := []byte(`{"event":"a","properties":{"a":1.5e300,"b":-12345678901234567890,"c":1e-999,"d":0.000001}}`)
	if allocs := testing.AllocsPerRun(100, func() { DecodeSingle(body) }); allocs > 4 {
		t.Fatalf("DecodeSingle allocates %v times", allocs)
	}
}
