package event

import (
	"encoding/json"
	"fmt"
	"strings"
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

// segBenchMessage is a realistic @segment/analytics-node track call
// (~750 bytes): a renamed event, both ids, a context the app filled in,
// integrations and _metadata to drop.
func segBenchMessage(i int) string {
	return `{"type":"track","event":"Order Completed","userId":"user_8f14e45f","anonymousId":"6f5c7b1a-3a4f-4c55-9d4e-2f1d9c0b7e21",` +
		`"properties":{"orderId":"ord_50314b8e9bcf","revenue":49.99,"currency":"USD","coupon":null,"products":[{"product_id":"p_507f1f77","sku":"45790-32","price":49.99,"quantity":1}]},` +
		`"context":{"library":{"name":"@segment/analytics-node","version":"2.1.2"},"ip":"203.0.113.7","userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15"},` +
		`"integrations":{},"messageId":"node-next-1768473000123-4b1e6f2c-6a57-4c2d-9a0e-` + fmt.Sprintf("%012d", i) + `",` +
		`"timestamp":"2026-01-15T10:30:00.123Z","_metadata":{"nodeVersion":"20.10.0","jsRuntime":"node"}}`
}

// BenchmarkSegmentBatch decodes 100 analytics-node track messages, to
// compare per message with BenchmarkDecodeBatch100 per event.
func BenchmarkSegmentBatch(b *testing.B) {
	msgs := make([]string, 100)
	for i := range msgs {
		msgs[i] = segBenchMessage(i)
	}
	body := []byte(`{"batch":[` + strings.Join(msgs, ",") + `],"sentAt":"2026-01-15T10:30:00.200Z","writeKey":"wk"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		out, p := DecodeSegmentBatch(body, 1768473000300)
		if p != nil || len(out) != 100 || out[99].Problem != nil {
			b.Fatal(p)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/100, "ns/msg")
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
