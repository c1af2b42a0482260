package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// mustDecode decodes body and fails the test if it is refused.
func mustDecode(t *testing.T, body string) Input {
	t.Helper()
	in, _, _, p := DecodeSingle([]byte(body))
	if p != nil {
		t.Fatalf("DecodeSingle(%.200q) refused: %+v", body, *p)
	}
	return in
}

// mustRefuse decodes body, expects a 400, and checks that every wanted
// details key is present with a message containing the wanted text.
func mustRefuse(t *testing.T, body string, want map[string]string) *Problem {
	t.Helper()
	in, _, _, p := DecodeSingle([]byte(body))
	if p == nil {
		t.Fatalf("DecodeSingle(%.200q) accepted: %+v", body, in)
	}
	checkProblem(t, p, 400, "bad_request", want)
	return p
}

func checkProblem(t *testing.T, p *Problem, status int, code string, want map[string]string) {
	t.Helper()
	if p.Status != status || p.Code != code || p.Message == "" {
		t.Fatalf("problem = %d %q %q, want %d %q", p.Status, p.Code, p.Message, status, code)
	}
	for k, sub := range want {
		got, ok := p.Details[k]
		if !ok {
			t.Fatalf("details = %v, want key %q", p.Details, k)
		}
		if !strings.Contains(got, sub) {
			t.Fatalf("details[%q] = %q, want it to contain %q", k, got, sub)
		}
	}
	if len(want) > 0 && len(p.Details) != len(want) {
		t.Fatalf("details = %v, want exactly the keys of %v", p.Details, want)
	}
}

// manyKeys is n distinct members "k0":0 ... of an object, without braces:
// more than linearKeys, so that duplicates are found through the map.
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	return b.String()
}

func nest(levels int, inner string) string {
	return strings.Repeat(`{"a":`, levels) + inner + strings.Repeat("}", levels)
}

func TestDecodeSingleAccepts(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		want  Input // Hash is not compared
		props string
	}{
		{"minimal", `{"event":"a"}`, Input{Name: "a"}, `{}`},
		{"all fields", `{"event":"signup","visitor_id":"v1","properties":{"plan":"pro","amount":5},"timestamp":"2026-01-15T10:30:00Z"}`,
			Input{Name: "signup", VisitorID: "v1", HasVisitor: true, Timestamp: 1768473000000, HasTimestamp: true}, `{"plan":"pro","amount":5}`},
		{"whitespace everywhere", "\r\n\t {\n\t\"event\" :\r\n \"a\" ,\"properties\"\t:\n{ \"k\" : [ 1 , 2 , { } , [ ] ] , \"s\" : \" spaced  text \" } \n}\n\t \r\n",
			Input{Name: "a"}, `{"k":[1,2,{},[]],"s":" spaced  text "}`},
		{"nulls are absent", `{"event":"a","visitor_id":null,"properties":null,"timestamp":null,"sent_at":null}`, Input{Name: "a"}, `{}`},
		{"unknown fields ignored", `{"zzz":{"deep":[1,{"x":null}]},"event":"a","context":"ok","idempotency_key":5}`, Input{Name: "a"}, `{}`},
		{"escaped name", `{"event":"\u0061b\u0043"}`, Input{Name: "abC"}, `{}`},
		{"name 128", `{"event":"` + strings.Repeat("x", 128) + `"}`, Input{Name: strings.Repeat("x", 128)}, `{}`},
		{"visitor 256 runes", `{"event":"a","visitor_id":"` + strings.Repeat("é", 256) + `"}`,
			Input{Name: "a", VisitorID: strings.Repeat("é", 256), HasVisitor: true}, `{}`},
		{"visitor escapes", `{"event":"a","visitor_id":"a\"b\\c\u00e9\ud83d\ude00"}`,
			Input{Name: "a", VisitorID: "a\"b\\cé😀", HasVisitor: true}, `{}`},
		{"unicode escapes kept in properties", `{"event":"a","properties":{"\u0061":"\u00e9\n\ud83d\ude00\/","b":"é😀"}}`,
			Input{Name: "a"}, `{"\u0061":"\u00e9\n\ud83d\ude00\/","b":"é😀"}`},
		{"same key in sibling and child objects", `{"event":"a","properties":{"x":{"a":1,"x":2},"y":{"a":1},"a":[{"a":1},{"a":2}]}}`,
			Input{Name: "a"}, `{"x":{"a":1,"x":2},"y":{"a":1},"a":[{"a":1},{"a":2}]}`},
		{"numbers", `{"event":"a","properties":{"n":[0,-0,1.5,-2e10,3E+2,4e-2,0.0,123456789012345678901234567890]}}`,
			Input{Name: "a"}, `{"n":[0,-0,1.5,-2e10,3E+2,4e-2,0.0,123456789012345678901234567890]}`},
		{"literals", `{"event":"a","properties":{"t":true,"f":false,"n":null}}`, Input{Name: "a"}, `{"t":true,"f":false,"n":null}`},
		{"empty key", `{"event":"a","properties":{"":1}}`, Input{Name: "a"}, `{"":1}`},
		{"empty object body", `{"event":"a","properties":{}}`, Input{Name: "a"}, `{}`},
		{"control escapes", `{"event":"a","properties":{"c":"\u0000\u001f\b\f\r\t"}}`, Input{Name: "a"}, `{"c":"\u0000\u001f\b\f\r\t"}`},
		{"timestamp with offset", `{"event":"a","timestamp":"2026-01-15T12:30:00.5+02:00"}`,
			Input{Name: "a", Timestamp: 1768473000500, HasTimestamp: true}, `{}`},
		{"timestamp escaped", `{"event":"a","timestamp":"2026-01-15T10:30:00\u005a"}`,
			Input{Name: "a", Timestamp: 1768473000000, HasTimestamp: true}, `{}`},
		{"single ignores idempotency_key", `{"event":"a","idempotency_key":""}`, Input{Name: "a"}, `{}`},
		{"keys sharing a print", `{"event":"a","properties":{"abxb":1,"acxb":2,` + manyKeys(20) + `}}`,
			Input{Name: "a"}, `{"abxb":1,"acxb":2,` + manyKeys(20) + `}`},
		{"visitor 256 runes after ASCII", `{"event":"a","visitor_id":"abcdefgh` + strings.Repeat("é", 248) + `"}`,
			Input{Name: "a", VisitorID: "abcdefgh" + strings.Repeat("é", 248), HasVisitor: true}, `{}`},
		{"del and high runes", "{\"event\":\"a\",\"properties\":{\"x\":\"\x7f\u2028\U0010FFFF\"}}", Input{Name: "a"}, "{\"x\":\"\x7f\u2028\U0010FFFF\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := mustDecode(t, tt.body)
			if string(in.Properties) != tt.props {
				t.Errorf("Properties = %s, want %s", in.Properties, tt.props)
			}
			if in.Hash != 0 {
				t.Errorf("Hash set for an event without an idempotency key")
			}
			in.Properties, in.Numbers = nil, nil // the numbers index: storage's TestNumbersIndex
			if !reflect.DeepEqual(in, tt.want) {
				t.Errorf("got %+v, want %+v", in, tt.want)
			}
		})
	}
}

func TestDecodeSingleRefuses(t *testing.T) {
	long := strings.Repeat("x", 129)
	tests := []struct {
		name string
		body string
		want map[string]string
	}{
		// event
		{"event missing", `{"visitor_id":"v"}`, map[string]string{"event": "is required"}},
		{"event null", `{"event":null}`, map[string]string{"event": "is required"}},
		{"event number", `{"event":5}`, map[string]string{"event": "must be a string"}},
		{"event object", `{"event":{"a":1}}`, map[string]string{"event": "must be a string"}},
		{"event empty", `{"event":""}`, map[string]string{"event": "1-128 characters"}},
		{"event 129", `{"event":"` + long + `"}`, map[string]string{"event": "1-128 characters"}},
		{"event dash", `{"event":"sign-up"}`, map[string]string{"event": "event name must be alphanumeric with underscores only"}},
		{"event space", `{"event":"sign up"}`, map[string]string{"event": "event name must be alphanumeric with underscores only"}},
		{"event unicode", `{"event":"café"}`, map[string]string{"event": "event name must be alphanumeric with underscores only"}},
		{"event escaped newline", `{"event":"a\nb"}`, map[string]string{"event": "alphanumeric"}},
		// visitor_id
		{"visitor number", `{"event":"a","visitor_id":42}`, map[string]string{"visitor_id": "must be a string"}},
		{"visitor bool", `{"event":"a","visitor_id":true}`, map[string]string{"visitor_id": "must be a string"}},
		{"visitor empty", `{"event":"a","visitor_id":""}`, map[string]string{"visitor_id": "1-256"}},
		{"visitor 257", `{"event":"a","visitor_id":"` + strings.Repeat("é", 257) + `"}`, map[string]string{"visitor_id": "1-256"}},
		// properties
		{"properties array", `{"event":"a","properties":[1]}`, map[string]string{"properties": "must be an object"}},
		{"properties string", `{"event":"a","properties":"{}"}`, map[string]string{"properties": "must be an object"}},
		{"properties number", `{"event":"a","properties":1}`, map[string]string{"properties": "must be an object"}},
		// timestamp / sent_at
		{"timestamp garbage", `{"event":"a","timestamp":"yesterday"}`, map[string]string{"timestamp": "ISO 8601"}},
		{"timestamp number", `{"event":"a","timestamp":1768473000}`, map[string]string{"timestamp": "must be a string"}},
		{"timestamp 1969", `{"event":"a","timestamp":"1969-12-31T23:59:59Z"}`, map[string]string{"timestamp": "1970"}},
		{"timestamp offset before 1970", `{"event":"a","timestamp":"1970-01-01T00:30:00+01:00"}`, map[string]string{"timestamp": "1970"}},
		{"timestamp bad day", `{"event":"a","timestamp":"2026-02-30T00:00:00Z"}`, map[string]string{"timestamp": "ISO 8601"}},
		{"sent_at garbage", `{"event":"a","sent_at":"soon"}`, map[string]string{"sent_at": "ISO 8601"}},
		{"sent_at object", `{"event":"a","sent_at":{}}`, map[string]string{"sent_at": "must be a string"}},
		// several problems at once
		{"all collected", `{"event":"bad name","visitor_id":7,"properties":[],"timestamp":"x","sent_at":"y"}`, map[string]string{
			"event": "alphanumeric", "visitor_id": "string", "properties": "object", "timestamp": "ISO 8601", "sent_at": "ISO 8601"}},
		// duplicates
		{"dup event", `{"event":"a","event":"b"}`, map[string]string{"event": "duplicate key"}},
		{"dup event escaped", `{"event":"a","\u0065vent":"a"}`, map[string]string{"event": "duplicate key"}},
		{"dup unknown field", `{"event":"a","x":1,"x":1}`, map[string]string{"x": "duplicate key"}},
		{"dup in properties", `{"event":"a","properties":{"a":1,"b":2,"a":3}}`, map[string]string{"properties": `duplicate key "a"`}},
		{"dup escaped in properties", `{"event":"a","properties":{"a":1,"\u0061":1}}`, map[string]string{"properties": `duplicate key "a"`}},
		{"dup surrogate escape vs raw", `{"event":"a","properties":{"😀":1,"\ud83d\ude00":1}}`, map[string]string{"properties": "duplicate key"}},
		{"dup nested deep", `{"event":"a","properties":{"x":[{"y":{"k":1,"k":2}}]}}`, map[string]string{"properties": `duplicate key "k"`}},
		{"dup in unknown nested", `{"event":"a","ctx":{"k":1,"k":2}}`, map[string]string{"ctx": "duplicate key"}},
		// abxb and acxb share a print (length, first, middle and last bytes): compared, not equal.
		{"dup after a shared print", `{"event":"a","properties":{"abxb":1,"acxb":2,"abxb":3}}`, map[string]string{"properties": `duplicate key "abxb"`}},
		{"dup past the slots", `{"event":"a","properties":{` + manyKeys(20) + `,"k7":0}}`, map[string]string{"properties": `duplicate key "k7"`}},
		{"visitor 257 after ASCII", `{"event":"a","visitor_id":"abcdefgh` + strings.Repeat("é", 249) + `"}`, map[string]string{"visitor_id": "1-256"}},
		{"visitor bad UTF-8 after ASCII", "{\"event\":\"a\",\"visitor_id\":\"abcdefgh\xff\"}", map[string]string{"body": "UTF-8"}},
		{"dup plus other problems", `{"event":"a b","properties":{"k":1,"k":2},"visitor_id":""}`, map[string]string{
			"event": "alphanumeric", "properties": "duplicate", "visitor_id": "1-256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustRefuse(t, tt.body, tt.want)
		})
	}
}

func TestDecodeSingleSyntax(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"empty", ``},
		{"only whitespace", " \n\t"},
		{"array", `[{"event":"a"}]`},
		{"string", `"event"`},
		{"null", `null`},
		{"number", `12`},
		{"garbage", `hello`},
		{"unterminated object", `{"event":"a"`},
		{"unterminated string", `{"event":"a`},
		{"trailing comma", `{"event":"a",}`},
		{"trailing comma array", `{"event":"a","properties":{"x":[1,]}}`},
		{"missing colon", `{"event" "a"}`},
		{"missing comma", `{"event":"a" "visitor_id":"b"}`},
		{"single quotes", `{'event':'a'}`},
		{"unquoted key", `{event:"a"}`},
		{"trailing data", `{"event":"a"} x`},
		{"second object", `{"event":"a"}{"event":"b"}`},
		{"trailing null byte", "{\"event\":\"a\"}\x00"},
		{"leading zero", `{"event":"a","properties":{"n":01}}`},
		{"bare dot", `{"event":"a","properties":{"n":1.}}`},
		{"leading dot", `{"event":"a","properties":{"n":.5}}`},
		{"plus sign", `{"event":"a","properties":{"n":+1}}`},
		{"lone minus", `{"event":"a","properties":{"n":-}}`},
		{"empty exponent", `{"event":"a","properties":{"n":1e}}`},
		{"NaN", `{"event":"a","properties":{"n":NaN}}`},
		{"bad literal", `{"event":"a","properties":{"n":tru}}`},
		{"raw control char", "{\"event\":\"a\",\"properties\":{\"s\":\"a\tb\"}}"},
		{"raw newline in name", "{\"event\":\"a\nb\"}"},
		{"bad escape", `{"event":"a","properties":{"s":"\x"}}`},
		{"short unicode escape", `{"event":"a","properties":{"s":"\u12"}}`},
		{"bad hex", `{"event":"a","properties":{"s":"\u12g4"}}`},
		{"lone high surrogate", `{"event":"a","properties":{"s":"\ud800"}}`},
		{"lone low surrogate", `{"event":"a","properties":{"s":"\udc00"}}`},
		{"high then letter", `{"event":"a","properties":{"s":"\ud800\u0041"}}`},
		{"high then text", `{"event":"a","properties":{"s":"\ud800abcdef"}}`},
		{"two highs", `{"event":"a","properties":{"s":"\ud800\ud800"}}`},
		{"lone surrogate in key", `{"event":"a","properties":{"\udfff":1}}`},
		{"lone surrogate in name", `{"event":"\ud800"}`},
		{"invalid utf8 in name", "{\"event\":\"a\xffb\"}"},
		{"invalid utf8 in visitor", "{\"event\":\"a\",\"visitor_id\":\"\xc3\"}"},
		{"invalid utf8 in key", "{\"event\":\"a\",\"properties\":{\"\xfe\":1}}"},
		{"invalid utf8 in value", "{\"event\":\"a\",\"properties\":{\"k\":\"\xe2\x82\"}}"},
		{"overlong utf8", "{\"event\":\"a\",\"properties\":{\"k\":\"\xc0\xaf\"}}"},
		{"utf8 surrogate", "{\"event\":\"a\",\"properties\":{\"k\":\"\xed\xa0\x80\"}}"},
		{"above U+10FFFF", "{\"event\":\"a\",\"properties\":{\"k\":\"\xf4\x90\x80\x80\"}}"},
		{"invalid utf8 in unknown field", "{\"event\":\"a\",\"junk\":\"\x80\"}"},
		{"invalid utf8 outside strings", "{\"event\":\"a\"\xc3\xa9}"},
		{"bom", "\xef\xbb\xbf{\"event\":\"a\"}"},
		{"deep malformed", `{"event":"a","properties":` + strings.Repeat(`[`, 100000)},
		{"deep malformed object", `{"event":"a","properties":` + strings.Repeat(`{"a":`, 50) + `1,}` + strings.Repeat(`}`, 50) + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustRefuse(t, tt.body, nil)
			if _, ok := p.Details["body"]; !ok || len(p.Details) != 1 {
				t.Fatalf("details = %v, want only details.body", p.Details)
			}
		})
	}
}

func TestDecodeSingleDepth(t *testing.T) {
	// The properties value may span MaxDepth levels: itself plus MaxDepth-1 nested containers.
	tests := []struct {
		name string
		body string
		ok   bool
	}{
		{"properties 16 levels of objects", `{"event":"a","properties":` + nest(MaxDepth-1, "{}") + `}`, true},
		{"properties 17 levels of objects", `{"event":"a","properties":` + nest(MaxDepth, "{}") + `}`, false},
		{"properties 16 levels scalar leaf", `{"event":"a","properties":` + nest(MaxDepth, "1") + `}`, true},
		{"properties 17 levels scalar leaf", `{"event":"a","properties":` + nest(MaxDepth+1, "1") + `}`, false},
		{"arrays 16 levels", `{"event":"a","properties":{"a":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}}`, true},
		{"arrays 17 levels", `{"event":"a","properties":{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}}`, false},
		{"unknown field 16 levels", `{"event":"a","x":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, true},
		{"unknown field 17 levels", `{"event":"a","x":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`, false},
		{"very deep", `{"event":"a","properties":{"a":` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}}`, false},
		{"very deep mixed", `{"event":"a","properties":` + nest(5000, `[{"b":[],"c":{}},true]`) + `}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ok {
				in := mustDecode(t, tt.body)
				if !json.Valid(in.Properties) {
					t.Fatalf("invalid properties %s", in.Properties)
				}
				return
			}
			field := "properties"
			if strings.Contains(tt.body, `"x":`) {
				field = "x"
			}
			mustRefuse(t, tt.body, map[string]string{field: "deeper than 16"})
		})
	}
	// Problems found alongside too-deep values are still collected.
	mustRefuse(t, `{"event":"-","properties":`+nest(40, "1")+`,"visitor_id":""}`,
		map[string]string{"event": "alphanumeric", "properties": "deeper", "visitor_id": "1-256"})
}

func TestDecodeSingleManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"event":"a","properties":{`)
	for i := range 1000 {
		fmt.Fprintf(&b, `"k%d":{"i":%d,"j":%d},`, i, i, i)
	}
	b.WriteString(`"last":true}}`)
	ok := b.String()
	in := mustDecode(t, ok)
	var m map[string]any
	if err := json.Unmarshal(in.Properties, &m); err != nil || len(m) != 1001 {
		t.Fatalf("unmarshal: %v, %d keys", err, len(m))
	}
	dup := strings.Replace(ok, `"last"`, `"k500"`, 1)
	mustRefuse(t, dup, map[string]string{"properties": `duplicate key "k500"`})
	escDup := strings.Replace(ok, `"last"`, `"\u006b999"`, 1)
	mustRefuse(t, escDup, map[string]string{"properties": `duplicate key "k999"`})

	// Many keys on the event object itself, and slots used up by nesting.
	var top strings.Builder
	top.WriteString(`{"event":"a"`)
	for i := range 40 {
		fmt.Fprintf(&top, `,"f%d":%s`, i, nest(i%15, fmt.Sprintf(`{"x":1,"y":2,"z%d":3}`, i)))
	}
	mustDecode(t, top.String()+"}")
	mustRefuse(t, top.String()+`,"f39":0}`, map[string]string{"f39": "duplicate key"})

	var wide strings.Builder
	wide.WriteString(`{"event":"a","properties":`)
	for i := range 15 {
		wide.WriteString(`{`)
		for j := range 15 {
			fmt.Fprintf(&wide, `"k%d":%d,`, j, j)
		}
		_ = i
		wide.WriteString(`"n":`)
	}
	wide.WriteString(`{"k0":0,"k1":1,"k0":2}` + strings.Repeat("}", 15) + "}")
	mustRefuse(t, wide.String(), map[string]string{"properties": `duplicate key "k0"`})
}

func TestDecodeSinglePropertiesSize(t *testing.T) {
	// {"s":"xxx"} has 8 bytes of overhead.
	exact := `{"s":"` + strings.Repeat("x", MaxPropertiesSize-8) + `"}`
	if len(exact) != MaxPropertiesSize {
		t.Fatalf("bad fixture %d", len(exact))
	}
	over := `{"s":"` + strings.Repeat("x", MaxPropertiesSize-7) + `"}`
	padded := "{ \"s\" :\n \"" + strings.Repeat("x", MaxPropertiesSize-8) + "\"\n\t}" + strings.Repeat(" ", 100)
	tests := []struct {
		name  string
		props string
		ok    bool
	}{
		{"exactly 32 KiB", exact, true},
		{"one byte over", over, false},
		{"32 KiB once compacted", padded, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"event":"a","properties":` + tt.props + `}`
			if !tt.ok {
				mustRefuse(t, body, map[string]string{"properties": "32768"})
				return
			}
			in := mustDecode(t, body)
			if string(in.Properties) != exact {
				t.Fatalf("properties not compacted: %d bytes", len(in.Properties))
			}
		})
	}
}

func TestPropertiesSemanticallyEqual(t *testing.T) {
	props := []string{
		`{}`,
		`{"a":1}`,
		` { "a" : [ 1 , 2.5 , -3e2 , true , false , null , "s" , { "b" : { } } ] , "c" : "\" \\ \/ \b \f \n \r \t \u0000 \u00e9 \ud83d\ude00" } `,
		`{"nested":{"deeper":{"deepest":[[[[]]]]}},"unicode":"日本語","emoji":"😀","esc":"\u65e5"}`,
		`{"big":12345678901234567890,"small":1e-300,"neg":-0.0}`,
		"{\n\"tabs\"\t:\t\"a b\"\r\n}",
	}
	for i, p := range props {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			in := mustDecode(t, `{"event":"a","properties":`+p+`}`)
			if !json.Valid(in.Properties) {
				t.Fatalf("invalid JSON %s", in.Properties)
			}
			var got, want any
			if err := json.Unmarshal(in.Properties, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(p), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, []byte(p)); err != nil {
				t.Fatal(err)
			}
			if buf.String() != string(in.Properties) {
				t.Fatalf("compact = %s, want %s", in.Properties, buf.String())
			}
		})
	}
}

func TestPropertiesDoNotAliasBody(t *testing.T) {
	for _, body := range []string{
		`{"event":"a","properties":{"k":"v"}}`,
		`{"event":"a","properties":{ "k" : "v" }}`,
		`{"event":"a"}`,
	} {
		b := []byte(body)
		in, _, _, p := DecodeSingle(b)
		if p != nil {
			t.Fatal(p)
		}
		before := string(in.Properties)
		name, visitor := in.Name, in.VisitorID
		for i := range b {
			b[i] = '#'
		}
		if string(in.Properties) != before || in.Name != name || in.VisitorID != visitor {
			t.Fatalf("output changed with the body: %s", in.Properties)
		}
	}
}

// TestPropertiesDoNotReachTexts: the texts and the properties share one
// allocation, so writing into the properties or appending to them must
// leave the name, visitor id and idempotency key as they were.
func TestPropertiesDoNotReachTexts(t *testing.T) {
	for _, body := range []string{
		`{"event":"a","visitor_id":"v","properties":{"k":"v"}}`,
		`{"event":"a","visitor_id":"v","properties":{ "k" : "v" }}`,
		`{"event":"a","visitor_id":"v"}`,
	} {
		in := mustDecode(t, body)
		check := func(what string) {
			if in.Name != "a" || in.VisitorID != "v" {
				t.Fatalf("%s: %s changed the texts to %q, %q", body, what, in.Name, in.VisitorID)
			}
		}
		for i := range in.Properties {
			in.Properties[i] = '#'
		}
		check("writing the properties")
		in.Properties = append(in.Properties[:0], strings.Repeat("x", 64)...)
		check("appending to the properties")
	}
	entries, _, _, p := DecodeBatch([]byte(`{"events":[{"event":"b","idempotency_key":"k1","properties":{"n":1}}]}`))
	if p != nil || entries[0].Problem != nil {
		t.Fatal(p, entries[0].Problem)
	}
	in := &entries[0].Input
	in.Properties = append(in.Properties, "trailing"...)
	in.Properties[0] = '#'
	if in.Name != "b" || in.IdempotencyKey != "k1" {
		t.Fatalf("batch entry texts changed to %q, %q", in.Name, in.IdempotencyKey)
	}
}

func TestSentAtSingle(t *testing.T) {
	_, sentAt, has, p := DecodeSingle([]byte(`{"event":"a","sent_at":"2026-01-15T10:30:00.250Z"}`))
	if p != nil || !has || sentAt != 1768473000250 {
		t.Fatalf("sentAt=%d has=%v p=%v", sentAt, has, p)
	}
	_, _, has, p = DecodeSingle([]byte(`{"event":"a"}`))
	if p != nil || has {
		t.Fatalf("has=%v p=%v", has, p)
	}
}

func TestHash(t *testing.T) {
	base := mustDecode(t, `{"event":"a","visitor_id":"v","properties":{"x":1},"timestamp":"2026-01-15T10:30:00Z"}`)
	base.SetHash()
	bc := base.Content()
	baseHash, baseLegacy := base.Hash, LegacyContentHash(&bc)
	tests := []struct {
		name string
		body string
		same bool
	}{
		{"whitespace", "{ \"timestamp\" : \"2026-01-15T10:30:00Z\", \"properties\" : { \"x\" : 1 }, \"visitor_id\":\"v\", \"event\":\"a\" }", true},
		{"sent_at ignored", `{"event":"a","visitor_id":"v","properties":{"x":1},"timestamp":"2026-01-15T10:30:00Z","sent_at":"2026-01-15T10:31:00Z"}`, true},
		{"unknown fields ignored", `{"event":"a","visitor_id":"v","properties":{"x":1},"timestamp":"2026-01-15T10:30:00Z","context":{}}`, true},
		{"same instant other zone", `{"event":"a","visitor_id":"v","properties":{"x":1},"timestamp":"2026-01-15T11:30:00+01:00"}`, true},
		{"other name", `{"event":"b","visitor_id":"v","properties":{"x":1},"timestamp":"2026-01-15T10:30:00Z"}`, false},
		{"other visitor", `{"event":"a","visitor_id":"w","properties":{"x":1},"timestamp":"2026-01-15T10:30:00Z"}`, false},
		{"no visitor", `{"event":"a","properties":{"x":1},"timestamp":"2026-01-15T10:30:00Z"}`, false},
		{"other properties", `{"event":"a","visitor_id":"v","properties":{"x":2},"timestamp":"2026-01-15T10:30:00Z"}`, false},
		{"other timestamp", `{"event":"a","visitor_id":"v","properties":{"x":1},"timestamp":"2026-01-15T10:30:01Z"}`, false},
		{"no timestamp", `{"event":"a","visitor_id":"v","properties":{"x":1}}`, false},
		{"split moved", `{"event":"av","properties":{"x":1},"timestamp":"2026-01-15T10:30:00Z"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := mustDecode(t, tt.body)
			in.SetHash()
			if h := in.Hash; (h == baseHash) != tt.same {
				t.Fatalf("hash %x vs %x, same=%v", h, baseHash, tt.same)
			}
			c := in.Content()
			if h := LegacyContentHash(&c); (h == baseLegacy) != tt.same {
				t.Fatalf("legacy hash %x vs %x, same=%v", h, baseLegacy, tt.same)
			}
		})
	}
}

func mustBatch(t *testing.T, body string) ([]Entry, int64, bool) {
	t.Helper()
	entries, sentAt, has, p := DecodeBatch([]byte(body))
	if p != nil {
		t.Fatalf("DecodeBatch(%.200q) refused: %+v", body, *p)
	}
	return entries, sentAt, has
}

func batchOf(n int, entry string) string {
	return `{"events":[` + strings.TrimSuffix(strings.Repeat(entry+",", n), ",") + `]}`
}

func TestDecodeBatch(t *testing.T) {
	entries, sentAt, has := mustBatch(t, ` { "sent_at" : "2026-01-15T10:30:00Z", "events" : [
		{"event":"a","timestamp":"2026-01-15T10:00:00Z","sent_at":"garbage","idempotency_key":"k1"},
		{"event":"bad name"},
		42,
		{"event":"c","visitor_id":"v","properties":{"k":{"k":1}},"idempotency_key":null},
		{"event":"d","properties":{"k":1,"k":2}},
		{"event":"e","properties":`+nest(MaxDepth-1, "{}")+`},
		{"event":"f","properties":`+nest(MaxDepth, "{}")+`},
		{"event":"g","event":"g"},
		[],
		{"event":"h","idempotency_key":""},
		{"event":"i","idempotency_key":"`+strings.Repeat("é", 255)+`"},
		{"event":"j","idempotency_key":"`+strings.Repeat("x", 256)+`"},
		{"event":"k","idempotency_key":7}
	], "extra": {"ignored": [1, 2]} } `)
	if !has || sentAt != 1768473000000 {
		t.Fatalf("sentAt=%d has=%v", sentAt, has)
	}
	want := []struct {
		name    string
		details map[string]string
	}{
		{"a", nil},
		{"", map[string]string{"event": "alphanumeric"}},
		{"", map[string]string{"event": "JSON object"}},
		{"c", nil},
		{"", map[string]string{"properties": `duplicate key "k"`}},
		{"e", nil},
		{"", map[string]string{"properties": "deeper than 16"}},
		{"", map[string]string{"event": "duplicate key"}},
		{"", map[string]string{"event": "JSON object"}},
		{"", map[string]string{"idempotency_key": "1-255"}},
		{"i", nil},
		{"", map[string]string{"idempotency_key": "1-255"}},
		{"", map[string]string{"idempotency_key": "must be a string"}},
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	for i, w := range want {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			e := entries[i]
			if w.details == nil {
				if e.Problem != nil {
					t.Fatalf("entry refused: %+v", *e.Problem)
				}
				if e.Input.Name != w.name {
					t.Fatalf("name %q, want %q", e.Input.Name, w.name)
				}
				return
			}
			if e.Problem == nil {
				t.Fatalf("entry accepted: %+v", e.Input)
			}
			checkProblem(t, e.Problem, 400, "bad_request", w.details)
		})
	}
	if got := entries[0].Input; got.IdempotencyKey != "k1" || got.Timestamp != 1768471200000 || !got.HasTimestamp {
		t.Fatalf("entry 0 = %+v", got)
	}
	if got := entries[3].Input; got.IdempotencyKey != "" || got.VisitorID != "v" || string(got.Properties) != `{"k":{"k":1}}` {
		t.Fatalf("entry 3 = %+v", got)
	}
	single := mustDecode(t, `{"event":"a","timestamp":"2026-01-15T10:00:00Z"}`)
	single.SetHash()
	if entries[0].Input.Hash == single.Hash {
		return
	}
	t.Fatalf("a batch entry hashes differently from the same single event")
}

func TestDecodeBatchCounts(t *testing.T) {
	entry := `{"event":"a","properties":{"n":1}}`
	tests := []struct {
		name string
		body string
		n    int // entries when accepted, -1 when refused with details.events
	}{
		{"one", batchOf(1, entry), 1},
		{"hundred", batchOf(100, entry), 100},
		{"hundred and one", batchOf(101, entry), -1},
		{"a thousand", batchOf(1000, entry), -1},
		{"hundred bad entries", batchOf(100, `{"event":"-"}`), 100},
		{"one large entry", batchOf(1, `{"event":"a","properties":{"s":"`+strings.Repeat("x", 200_000)+`"}}`), 1},
		{"empty", `{"events":[]}`, -1},
		{"missing", `{"sent_at":"2026-01-15T10:30:00Z"}`, -1},
		{"empty object", `{}`, -1},
		{"null", `{"events":null}`, -1},
		{"object", `{"events":{"event":"a"}}`, -1},
		{"string", `{"events":"a"}`, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, _, _, p := DecodeBatch([]byte(tt.body))
			if tt.n < 0 {
				if p == nil {
					t.Fatalf("accepted %d entries", len(entries))
				}
				checkProblem(t, p, 400, "bad_request", map[string]string{"events": "1 to 100"})
				return
			}
			if p != nil {
				t.Fatalf("refused: %+v", *p)
			}
			if len(entries) != tt.n {
				t.Fatalf("%d entries, want %d", len(entries), tt.n)
			}
			// Sized from the body's length but never past the limit, so a
			// few large entries do not reserve room for thousands; past
			// the estimate the slice grows as any.
			if bound := max(2*len(entries), MaxBatch+1); cap(entries) > bound {
				t.Fatalf("room for %d entries, want at most %d", cap(entries), bound)
			}
		})
	}
}

func TestDecodeBatchRefusesBody(t *testing.T) {
	tests := []struct {
		name string
		body string
		want map[string]string
	}{
		{"malformed entry", `{"events":[{"event":"a"},{"event":}]}`, map[string]string{"body": "malformed"}},
		{"invalid utf8 in entry", "{\"events\":[{\"event\":\"a\xff\"}]}", map[string]string{"body": "UTF-8"}},
		{"lone surrogate in entry", `{"events":[{"event":"a","properties":{"s":"\udead"}}]}`, map[string]string{"body": "surrogate"}},
		{"trailing data", `{"events":[{"event":"a"}]}]`, map[string]string{"body": "after"}},
		{"not an object", `[{"event":"a"}]`, map[string]string{"body": "JSON object"}},
		{"empty", ``, map[string]string{"body": "JSON object"}},
		{"dup events", `{"events":[{"event":"a"}],"events":[{"event":"a"}]}`, map[string]string{"events": "duplicate key"}},
		{"dup sent_at", `{"events":[{"event":"a"}],"sent_at":null,"sent_at":null}`, map[string]string{"sent_at": "duplicate key"}},
		{"bad sent_at", `{"events":[{"event":"a"}],"sent_at":"tomorrow"}`, map[string]string{"sent_at": "ISO 8601"}},
		{"sent_at number", `{"events":[{"event":"a"}],"sent_at":1}`, map[string]string{"sent_at": "must be a string"}},
		{"dup in unknown field", `{"events":[{"event":"a"}],"meta":{"a":1,"a":1}}`, map[string]string{"meta": "duplicate key"}},
		{"too deep unknown field", `{"events":[{"event":"a"}],"meta":` + nest(MaxDepth+1, "1") + `}`, map[string]string{"meta": "deeper"}},
		{"events and sent_at", `{"events":[],"sent_at":"x"}`, map[string]string{"events": "1 to 100", "sent_at": "ISO 8601"}},
		{"malformed after events", `{"events":[{"event":"a"}],}`, map[string]string{"body": "malformed"}},
		{"malformed after 101", batchOf(101, `{"event":"a"}`)[:len(batchOf(101, `{"event":"a"}`))-2] + `,{]}`, map[string]string{"body": "malformed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, _, _, p := DecodeBatch([]byte(tt.body))
			if p == nil {
				t.Fatalf("accepted: %+v", entries)
			}
			if entries != nil {
				t.Fatalf("entries returned with a problem")
			}
			checkProblem(t, p, 400, "bad_request", tt.want)
		})
	}
}

// An event gets the same verdict alone and inside a batch.
func TestBatchEntryMatchesSingle(t *testing.T) {
	bodies := []string{
		`{"event":"a"}`,
		`{"event":"a","visitor_id":"v","properties":{"x":[1,{"y":null}]},"timestamp":"2026-01-15T10:30:00+05:30"}`,
		`{"event":"a b"}`,
		`{"event":"a","properties":` + nest(MaxDepth-1, "{}") + `}`,
		`{"event":"a","properties":` + nest(MaxDepth, "{}") + `}`,
		`{"event":"a","properties":{"k":1,"k":1}}`,
		`{"event":"a","properties":"x","visitor_id":""}`,
	}
	for i, body := range bodies {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			in, _, _, p := DecodeSingle([]byte(body))
			entries := func() []Entry { e, _, _ := mustBatch(t, `{"events":[`+body+`]}`); return e }()
			e := entries[0]
			if (p == nil) != (e.Problem == nil) {
				t.Fatalf("single problem %v, batch problem %v", p, e.Problem)
			}
			if p != nil {
				if !reflect.DeepEqual(p, e.Problem) {
					t.Fatalf("single %+v, batch %+v", *p, *e.Problem)
				}
				return
			}
			if !reflect.DeepEqual(in, e.Input) {
				t.Fatalf("single %+v, batch %+v", in, e.Input)
			}
		})
	}
}

func TestApplySkew(t *testing.T) {
	tests := []struct {
		name     string
		in       Input
		received int64
		sent     int64
		want     Input
	}{
		{"shift forward", Input{Timestamp: 1000, HasTimestamp: true}, 5000, 4000, Input{Timestamp: 2000, HasTimestamp: true}},
		{"shift back", Input{Timestamp: 10000, HasTimestamp: true}, 4000, 9000, Input{Timestamp: 5000, HasTimestamp: true}},
		{"no timestamp", Input{}, 5000, 4000, Input{}},
		{"clamped at 1970", Input{Timestamp: 1000, HasTimestamp: true}, 0, 5000, Input{Timestamp: 0, HasTimestamp: true}},
		{"clamped at 9999", Input{Timestamp: maxTimeMs, HasTimestamp: true}, 5000, 0, Input{Timestamp: maxTimeMs, HasTimestamp: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			ApplySkew(&in, tt.received, tt.sent)
			if !reflect.DeepEqual(in, tt.want) {
				t.Fatalf("got %+v, want %+v", in, tt.want)
			}
		})
	}
}

func TestAcceptedNamesAreUTF8(t *testing.T) {
	in := mustDecode(t, `{"event":"a","visitor_id":"\ud83d\ude00\u00e9\u0000"}`)
	if !utf8.ValidString(in.VisitorID) || in.VisitorID != "😀é\x00" {
		t.Fatalf("visitor %q", in.VisitorID)
	}
}

func TestTopLevel(t *testing.T) {
	m, err := TopLevel([]byte(`{"a":1,"\u0062":"x","c":{"d":[1,2]},"e":null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "1", "b": `"x"`, "c": `{"d":[1,2]}`, "e": "null"}
	if len(m) != len(want) {
		t.Fatalf("got %d members", len(m))
	}
	for k, v := range want {
		if string(m[k]) != v {
			t.Fatalf("m[%q] = %s, want %s", k, m[k], v)
		}
	}
	for _, bad := range []string{``, `[]`, `{`, `{"a"}`, `{"a":1,}`, `{"a":1} x`, `"s"`} {
		if _, err := TopLevel([]byte(bad)); err == nil {
			t.Fatalf("TopLevel(%q) accepted", bad)
		}
	}
	if m, err := TopLevel([]byte(`{}`)); err != nil || len(m) != 0 {
		t.Fatalf("empty: %v %v", m, err)
	}
}

func TestLongKeysInDetails(t *testing.T) {
	long := strings.Repeat("k", 1000)
	p := mustRefuse(t, `{"event":"a","`+long+`":{"x":1,"x":1}}`, map[string]string{"body": "duplicate key"})
	if len(p.Details["body"]) > 200 {
		t.Fatalf("message too long: %d", len(p.Details["body"]))
	}
	p = mustRefuse(t, `{"event":"a","properties":{"`+long+`":1,"`+long+`":2}}`, map[string]string{"properties": `duplicate key "kkk`})
	if msg := p.Details["properties"]; len(msg) > 200 || !strings.HasSuffix(msg, `"...`) {
		t.Fatalf("message not shortened: %q", msg)
	}
	mustRefuse(t, `{"event":"a","":1,"":2}`, map[string]string{"body": "duplicate key"})
}

func TestUnescapeMatchesEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`"plain"`, `"\"\\\/\b\f\n\r\t"`, `"\u0041\u00e9\u65e5\ud83d\ude00\uDBFF\uDFFF"`,
		`"mixed é \u00e9 😀 \ud83d\ude00 end\\"`, `"\u0000"`, `""`,
	} {
		t.Run(lit, func(t *testing.T) {
			var want string
			if err := json.Unmarshal([]byte(lit), &want); err != nil {
				t.Fatal(err)
			}
			if got := string(appendUnescaped(nil, []byte(lit[1:len(lit)-1]))); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
			if len(want) > 0 {
				in := mustDecode(t, `{"event":"a","visitor_id":`+lit+`}`)
				if in.VisitorID != want {
					t.Fatalf("visitor %q, want %q", in.VisitorID, want)
				}
			}
		})
	}
}

// Stored idempotency records hold these hashes, so both functions must
// keep giving them: LegacyContentHash the FNV-1a of the builds before
// xxhash (records of their last 24 hours), ContentHash what this build
// stores.
func TestContentHashGolden(t *testing.T) {
	tests := []struct {
		name         string
		c            Content
		hash, legacy uint64
	}{
		{"all parts", Content{Name: "a", VisitorID: "v", HasVisitor: true, Properties: []byte(`{"x":1}`), Timestamp: 1768473000000, HasTimestamp: true}, 0x35b0cc074f69daf6, 0xbab6f19e8d95b687},
		{"no visitor, no time", Content{Name: "page", Properties: []byte(`{}`)}, 0x20b75ccd1a34b82b, 0x43f0c0998df85c0d},
		// Past the stack buffer (contentHashBuf), from the heap; the value is
		// that of the Digest fed piece by piece before session 37.
		{"over 1 KiB", Content{Name: "purchase", VisitorID: "v_1", HasVisitor: true, Properties: []byte(`{"s":"` + strings.Repeat("x", 2000) + `"}`), Timestamp: 1768473000123, HasTimestamp: true}, 0xa6bf9ca1d422660e, 0x8a3c947ab0d3eccc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if h := ContentHash(&tt.c); h != tt.hash {
				t.Errorf("ContentHash %#x, want %#x", h, tt.hash)
			}
			if h := LegacyContentHash(&tt.c); h != tt.legacy {
				t.Errorf("LegacyContentHash %#x, want %#x", h, tt.legacy)
			}
		})
	}
}

func TestIdemKeyLenOK(t *testing.T) {
	for _, c := range []struct {
		key  string
		want bool
	}{
		{"", false},
		{"k", true},
		{strings.Repeat("x", 255), true},
		{strings.Repeat("x", 256), false},
		{strings.Repeat("é", 255), true},  // 510 bytes, 255 characters
		{strings.Repeat("é", 256), false}, // 512 bytes, 256 characters
		{strings.Repeat("\xff", 255), true},
		{strings.Repeat("\xff", 256), false}, // each invalid byte counts as one
	} {
		if got := idemKeyLenOK([]byte(c.key)); got != c.want {
			t.Errorf("idemKeyLenOK(%d bytes, %d runes) = %v, want %v", len(c.key), utf8.RuneCountInString(c.key), got, c.want)
		}
	}
}

// TestDecodeBatchInto: a batch decoded into a slice that held another
// batch gets its own entries only, in that slice's array when it fits.
func TestDecodeBatchInto(t *testing.T) {
	first, _, _, p := DecodeBatchInto(nil, []byte(batchOf(3, benchBody)))
	if p != nil || len(first) != 3 {
		t.Fatalf("first batch: %d entries, %v", len(first), p)
	}
	second, _, _, p := DecodeBatchInto(first, []byte(`{"events":[{"event":"b","visitor_id":"v"}]}`))
	if p != nil || len(second) != 1 || second[0].Input.Name != "b" || &second[0] != &first[0] {
		t.Fatalf("second batch: %+v, %v; want one entry named b in the first's array", second, p)
	}
	if empty, _, _, p := DecodeBatchInto(first, []byte(`{"events":[]}`)); p == nil || len(empty) != 0 {
		t.Errorf("an empty batch: %d entries, %v; want refused", len(empty), p)
	}
}
