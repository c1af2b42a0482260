package event

import (
	"encoding/json"
	"testing"
)

// benchBody is a typical ~220-byte event.
const benchBody = `{"event":"purchase_completed","visitor_id":"v_8f14e45fceea167a5a36dedd4bea2543","properties":{"amount":49.99,"currency":"USD","plan":"professional","items":3,"coupon":null},"timestamp":"2026-01-15T10:30:00.123Z"}`

func BenchmarkDecodeSingle(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, p := DecodeSingle(body); p != nil {
			b.Fatal(p)
		}
	}
}

// BenchmarkDecodeSingleStdlib is the encoding/json baseline the design notes quote.
func BenchmarkDecodeSingleStdlib(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var v struct {
		Event      string          `json:"event"`
		VisitorID  string          `json:"visitor_id"`
		Properties json.RawMessage `json:"properties"`
		Timestamp  string          `json:"timestamp"`
	}
	for b.Loop() {
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBatch100(b *testing.B) {
	body := []byte(batchOf(100, benchBody))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, p := DecodeBatch(body); p != nil {
			b.Fatal(p)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	in, _, _, _ := DecodeSingle([]byte(benchBody))
	b.ReportAllocs()
	for b.Loop() {
		if p := Validate(&in, nil, 1768473000000); p != nil {
			b.Fatal(p)
		}
	}
}

func BenchmarkAppendTime(b *testing.B) {
	buf := make([]byte, 0, 32)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendTime(buf[:0], 1768473000123)
	}
}

// The hot path's allocation budget: Properties and one string for the texts.
func TestDecodeSingleAllocs(t *testing.T) {
	body := []byte(benchBody)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, _, p := DecodeSingle(body); p != nil {
			t.Fatal(p)
		}
	})
	if allocs > 4 {
		t.Fatalf("DecodeSingle allocates %v times, budget 4", allocs)
	}
	in, _, _, _ := DecodeSingle(body)
	if allocs := testing.AllocsPerRun(100, func() { Validate(&in, nil, 1768473000000) }); allocs != 0 {
		t.Fatalf("Validate without definition allocates %v times", allocs)
	}
}
