package storage

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		e    Event
	}{
		{"with visitor", Event{Name: "page_view", VisitorID: "visitor-42", HasVisitor: true,
			Timestamp: 1_768_000_000_123, CreatedAt: 1_768_000_000_456, Properties: []byte(`{"path":"/"}`)}},
		{"without visitor", Event{Name: "click", Timestamp: 1_768_000_000_000, CreatedAt: 1_768_000_000_001,
			Properties: []byte(`{"x":1}`)}},
		{"empty properties", Event{Name: "e", Timestamp: 1, CreatedAt: 2, Properties: []byte{}}},
		{"nil properties", Event{Name: "e", VisitorID: "v", HasVisitor: true}},
		{"empty object", Event{Name: "e", Properties: []byte("{}")}},
		{"unicode", Event{Name: "café_ü", VisitorID: "訪問者-🙂", HasVisitor: true, Timestamp: 5, CreatedAt: 6,
			Properties: []byte(`{"名前":"値","emoji":"🎉"}`)}},
		{"empty visitor id flagged", Event{Name: "e", VisitorID: "", HasVisitor: true, Properties: []byte("{}")}},
		{"zero times", Event{Name: "zero"}},
		{"max times", Event{Name: "max", Timestamp: math.MaxInt64, CreatedAt: math.MaxInt64}},
		{"negative times", Event{Name: "neg", Timestamp: -1, CreatedAt: math.MinInt64}},
		{"long strings", Event{Name: strings.Repeat("n", 300), VisitorID: strings.Repeat("v", 70000), HasVisitor: true,
			Properties: bytes.Repeat([]byte("p"), 33000)}},
		{"binary properties", Event{Name: "b", Properties: []byte{0, 1, 0xff, recordVersion}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := appendRecord(nil, &tc.e)

			// A stale event must be fully overwritten by the decode.
			got := Event{VisitorID: "stale", HasVisitor: true, Properties: []byte("stale"), Name: "stale"}
			if err := decodeRecord(rec, &got); err != nil {
				t.Fatalf("decodeRecord: %v", err)
			}
			if !sameEvent(&got, &tc.e) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.e)
			}
			if !tc.e.HasVisitor && got.VisitorID != "" {
				t.Errorf("VisitorID = %q without a visitor", got.VisitorID)
			}

			// appendRecord appends: an existing prefix is kept.
			withPrefix := appendRecord([]byte("prefix"), &tc.e)
			if !bytes.Equal(withPrefix[:6], []byte("prefix")) || !bytes.Equal(withPrefix[6:], rec) {
				t.Errorf("appendRecord with a prefix = %x, want prefix+%x", withPrefix, rec)
			}

			// The decoded event owns its bytes.
			for i := range rec {
				rec[i] ^= 0x5a
			}
			if !sameEvent(&got, &tc.e) {
				t.Errorf("decoded event aliases the record: %+v", got)
			}
		})
	}
}

func TestDecodeRecordCorrupt(t *testing.T) {
	valid := appendRecord(nil, &Event{Name: "click", VisitorID: "vis", HasVisitor: true,
		Timestamp: 1_768_000_000_000, CreatedAt: 1_768_000_000_001, Properties: []byte(`{"a":1}`)})
	// header is the length up to the end of the visitor id; any shorter
	// prefix of the record is missing a required field.
	header := len(valid) - len(`{"a":1}`)

	tests := []struct {
		name string
		p    []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"version 0", append([]byte{0}, valid[1:]...)},
		{"version 2", append([]byte{2}, valid[1:]...)},
		{"version only", []byte{recordVersion}},
		{"truncated ts varint", []byte{recordVersion, 0x80}},
		{"ts varint overflow", append([]byte{recordVersion}, bytes.Repeat([]byte{0xff}, 11)...)},
		{"missing created", []byte{recordVersion, 1}},
		{"created overflow", append([]byte{recordVersion, 1}, bytes.Repeat([]byte{0xff}, 10)...)},
		{"missing name", []byte{recordVersion, 1, 2}},
		{"name longer than record", []byte{recordVersion, 1, 2, 5, 'a', 'b'}},
		{"name length huge", []byte{recordVersion, 1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'}},
		{"missing visitor flag", []byte{recordVersion, 1, 2, 1, 'a'}},
		{"visitor flag without length", []byte{recordVersion, 1, 2, 1, 'a', 1}},
		{"visitor longer than record", []byte{recordVersion, 1, 2, 1, 'a', 1, 3, 'v'}},
		{"visitor flag 2", []byte{recordVersion, 1, 2, 1, 'a', 2, 1, 'v'}},
		{"visitor flag 0xff", []byte{recordVersion, 1, 2, 1, 'a', 0xff}},
	}
	for n := 0; n < header; n++ {
		tests = append(tests, struct {
			name string
			p    []byte
		}{"prefix " + strings.Repeat("#", n), valid[:n]})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e Event
			err := decodeRecord(tc.p, &e)
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decodeRecord(%x) = %v (event %+v), want errCorrupt", tc.p, err, e)
			}
		})
	}
	// Truncated properties are not detectable, but still decode.
	for n := header; n <= len(valid); n++ {
		var e Event
		if err := decodeRecord(valid[:n], &e); err != nil {
			t.Errorf("decodeRecord(valid[:%d]) = %v", n, err)
		}
	}
}

// FuzzDecodeRecord checks that no input panics, that failures are errCorrupt,
// and that whatever decodes re-encodes to a record that decodes the same.
// Seeds are in testdata/fuzz/FuzzDecodeRecord.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, &Event{Name: "page_view", VisitorID: "v1", HasVisitor: true,
		Timestamp: 1_768_000_000_000, CreatedAt: 1_768_000_000_005, Properties: []byte(`{"k":"v"}`)}))
	f.Add(appendRecord(nil, &Event{Name: "x"}))
	f.Fuzz(func(t *testing.T, p []byte) {
		var e Event
		err := decodeRecord(p, &e)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decodeRecord error %v is not errCorrupt", err)
			}
			return
		}
		if !e.HasVisitor && e.VisitorID != "" {
			t.Fatalf("VisitorID %q without a visitor", e.VisitorID)
		}
		again := appendRecord(nil, &e)
		var e2 Event
		if err := decodeRecord(again, &e2); err != nil {
			t.Fatalf("re-encoded record %x does not decode: %v", again, err)
		}
		if !sameEvent(&e, &e2) {
			t.Fatalf("re-encode changed the event:\n%+v\n%+v", e, e2)
		}
	})
}
