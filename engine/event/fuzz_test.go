package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"unicode/utf8"
)

// dupKeys reports whether valid JSON text holds an object with a repeated
// key, using encoding/json's tokenizer as an independent oracle.
func dupKeys(data []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top != nil && top.obj {
					top.expect = true
				}
				stack = append(stack, &frame{obj: d == '{', keys: map[string]bool{}, expect: true})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].expect = true
				}
			}
			continue
		}
		if top != nil && top.obj {
			if top.expect {
				k := tok.(string)
				if top.keys[k] {
					return true, nil
				}
				top.keys[k] = true
				top.expect = false
			} else {
				top.expect = true
			}
		}
	}
}

// checkAccepted asserts the invariants of an accepted event; raw is the
// event object's text when known (nil inside batches).
func checkAccepted(t *testing.T, in Input, raw []byte) {
	t.Helper()
	if !json.Valid(in.Properties) || len(in.Properties) == 0 || in.Properties[0] != '{' {
		t.Fatalf("invalid properties %q", in.Properties)
	}
	if dup, err := dupKeys(in.Properties); dup || err != nil {
		t.Fatalf("properties with duplicate keys (%v): %q", err, in.Properties)
	}
	// Every number must be a finite float64 (1e999 is refused): encoding/json
	// fails on a number out of float64 range.
	var anyProps any
	if err := json.Unmarshal(in.Properties, &anyProps); err != nil {
		t.Fatalf("properties a float64 reader cannot read (%v): %q", err, in.Properties)
	}
	if len(in.Properties) > MaxPropertiesSize {
		t.Fatalf("properties too large: %d", len(in.Properties))
	}
	if !utf8.ValidString(in.Name) || !utf8.ValidString(in.VisitorID) || !utf8.ValidString(in.IdempotencyKey) {
		t.Fatalf("invalid UTF-8 accepted: %+v", in)
	}
	if checkName(in.Name) != "" {
		t.Fatalf("bad name accepted: %q", in.Name)
	}
	if n := utf8.RuneCountInString(in.VisitorID); in.HasVisitor != (n > 0) || n > MaxVisitorLen {
		t.Fatalf("bad visitor accepted: %q %v", in.VisitorID, in.HasVisitor)
	}
	if in.HasTimestamp && (in.Timestamp < 0 || in.Timestamp > maxTimeMs) {
		t.Fatalf("timestamp out of range: %d", in.Timestamp)
	}
	// Only a keyed input carries its hash (a single event's key comes from
	// its header and is hashed by the handler).
	want := uint64(0)
	if in.IdempotencyKey != "" {
		c := in.Content()
		want = ContentHash(&c)
	}
	if in.Hash != want {
		t.Fatalf("hash %x for idempotency key %q", in.Hash, in.IdempotencyKey)
	}
	if raw == nil {
		return
	}
	// encoding/json (lenient) must agree on the content.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("accepted but encoding/json refuses: %v", err)
	}
	var name string
	if err := json.Unmarshal(m["event"], &name); err != nil || name != in.Name {
		t.Fatalf("name %q, encoding/json says %q (%v)", in.Name, name, err)
	}
	if p, ok := m["properties"]; ok && string(p) != "null" {
		var got, want any
		if json.Unmarshal(in.Properties, &got) != nil || json.Unmarshal(p, &want) != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("properties %s differ from %s", in.Properties, p)
		}
	}
}

func FuzzDecodeSingle(f *testing.F) {
	f.Add([]byte(benchBody))
	f.Add([]byte(`{"event":"a","properties":{"a":1,"\u0061":2}}`))
	f.Add([]byte(`{"event":"a","visitor_id":"\ud83d\ude00","timestamp":"2026-01-15T10:30:00.123456+05:30","sent_at":"2026-01-15"}`))
	f.Add([]byte("{\"event\":\"a\",\"properties\":{\"k\":\"\xff\"}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := append([]byte(nil), body...)
		in, sentAt, hasSentAt, p := DecodeSingle(body)
		if !bytes.Equal(body, orig) {
			t.Fatalf("body modified")
		}
		in2, sentAt2, hasSentAt2, p2 := DecodeSingle(orig)
		if !reflect.DeepEqual(in, in2) || sentAt != sentAt2 || hasSentAt != hasSentAt2 || !reflect.DeepEqual(p, p2) {
			t.Fatalf("not deterministic")
		}
		if p != nil {
			if p.Status != 400 || p.Code != "bad_request" || len(p.Details) == 0 {
				t.Fatalf("bad problem %+v", *p)
			}
			return
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			t.Fatalf("accepted invalid JSON")
		}
		if dup, err := dupKeys(body); dup || err != nil {
			t.Fatalf("accepted a body with duplicate keys (%v)", err)
		}
		checkAccepted(t, in, body)
		// The output owns its memory.
		props := string(in.Properties)
		for i := range orig {
			orig[i] = 0
		}
		if string(in2.Properties) != props {
			t.Fatalf("properties alias the body")
		}
	})
}

// maxContainerDepth is the nesting depth of valid JSON text per encoding/json's tokenizer.
func maxContainerDepth(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
				deepest = max(deepest, depth)
			} else {
				depth--
			}
		}
	}
}

// FuzzPropertiesOracle checks completeness against encoding/json: any
// properties object that is valid UTF-8 JSON without duplicate keys, lone
// surrogate escapes or excess depth and size is accepted, and comes out
// exactly as json.Compact writes it.
func FuzzPropertiesOracle(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":null}],"c":"\u00e9 x"}`))
	f.Add([]byte(` { } `))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Fuzz(func(t *testing.T, props []byte) {
		body := append(append([]byte(`{"event":"a","properties":`), props...), '}')
		in, _, _, p := DecodeSingle(body)
		var compact bytes.Buffer
		valid := json.Valid(props) && json.Compact(&compact, props) == nil
		if p == nil {
			want := compact.String()
			if want == "null" {
				want = "{}" // a null field is absent ("nulls are absent" in decode_test.go)
			}
			if !valid || want != string(in.Properties) {
				t.Fatalf("accepted %q as %q, json.Compact gives %q", props, in.Properties, compact.String())
			}
			return
		}
		// Refused: fine unless the oracle sees nothing wrong.
		trimmed := bytes.TrimLeft(props, " \t\r\n")
		if !valid || len(trimmed) == 0 || trimmed[0] != '{' || !utf8.Valid(props) || bytes.Contains(props, []byte(`\u`)) ||
			compact.Len() > MaxPropertiesSize || maxContainerDepth(props) > MaxDepth {
			return
		}
		if dup, err := dupKeys(props); dup || err != nil {
			return
		}
		t.Fatalf("refused valid properties %q: %+v", props, *p)
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"events":[` + benchBody + `,{"event":"b"}],"sent_at":"2026-01-15T10:30:00Z"}`))
	f.Add([]byte(`{"events":[1,{"event":"a","idempotency_key":"k"},[]]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, sentAt, hasSentAt, p := DecodeBatch(body)
		entries2, sentAt2, hasSentAt2, p2 := DecodeBatch(append([]byte(nil), body...))
		if !reflect.DeepEqual(entries, entries2) || sentAt != sentAt2 || hasSentAt != hasSentAt2 || !reflect.DeepEqual(p, p2) {
			t.Fatalf("not deterministic")
		}
		if p != nil {
			if entries != nil || p.Status != 400 || len(p.Details) == 0 {
				t.Fatalf("bad problem %+v with %d entries", *p, len(entries))
			}
			return
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			t.Fatalf("accepted invalid JSON")
		}
		if len(entries) < 1 || len(entries) > MaxBatch {
			t.Fatalf("%d entries accepted", len(entries))
		}
		var top struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal(body, &top); err != nil || len(top.Events) != len(entries) {
			t.Fatalf("encoding/json sees %d events (%v), we see %d", len(top.Events), err, len(entries))
		}
		for i, e := range entries {
			if e.Problem != nil {
				if e.Problem.Status != 400 || len(e.Problem.Details) == 0 || !reflect.DeepEqual(e.Input, Input{}) {
					t.Fatalf("bad entry problem %+v", *e.Problem)
				}
				continue
			}
			if dup, err := dupKeys(top.Events[i]); dup || err != nil {
				t.Fatalf("accepted an entry with duplicate keys (%v)", err)
			}
			checkAccepted(t, e.Input, top.Events[i])
			if n := utf8.RuneCountInString(e.Input.IdempotencyKey); n > MaxIdempotencyKeyLen {
				t.Fatalf("idempotency key too long")
			}
		}
	})
}

// FuzzDecodeImport checks import lines: the same guarantees as the API
// decoders, plus id and created_at taken only when well-formed.
func FuzzDecodeImport(f *testing.F) {
	f.Add([]byte(`{"id":"evt_01M7ZXYKBC0YQVV787K3YZYKF1","event":"signup","visitor_id":"v_1","properties":{"plan":"pro"},"timestamp":"2026-11-21T20:49:46.860Z","created_at":"2026-11-21T20:49:46.861Z"}`))
	f.Add([]byte(`{"event":"a","idempotency_key":"k","created_at":"nope"}`))
	f.Add([]byte(`{"event":"a","id":7}`))
	f.Add([]byte(`{"event":"a","id":"x","id":"y"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		orig := append([]byte(nil), line...)
		in, p := DecodeImport(line)
		in2, p2 := DecodeImport(orig)
		if !reflect.DeepEqual(in, in2) || !reflect.DeepEqual(p, p2) {
			t.Fatalf("not deterministic")
		}
		if p != nil {
			if p.Status != 400 || p.Code != "bad_request" || len(p.Details) == 0 {
				t.Fatalf("bad problem %+v", *p)
			}
			return
		}
		if !json.Valid(line) || !utf8.Valid(line) {
			t.Fatalf("accepted invalid JSON")
		}
		if dup, err := dupKeys(line); dup || err != nil {
			t.Fatalf("accepted a line with duplicate keys (%v)", err)
		}
		checkAccepted(t, in, line)
		if !utf8.ValidString(in.ID) {
			t.Fatalf("id is not UTF-8: %q", in.ID)
		}
		if in.HasCreatedAt && (in.CreatedAt < 0 || in.CreatedAt > 253402300799999) {
			t.Fatalf("created_at out of range: %d", in.CreatedAt)
		}
	})
}
