package event

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	const now = 1768473000000 // 2026-01-15T10:30:00Z
	def := &Definition{Name: "checkout", Properties: []PropertyDef{
		{Name: "s", Type: TypeString},
		{Name: "n", Type: TypeNumber},
		{Name: "b", Type: TypeBoolean},
		{Name: "d", Type: TypeDatetime},
		{Name: "u", Type: TypeURL},
		{Name: "req", Type: TypeString, Required: true},
	}}
	tests := []struct {
		name string
		body string
		def  *Definition
		want map[string]string // nil: valid
	}{
		{"no properties", `{"event":"a"}`, nil, nil},
		{"amount 1.5", `{"event":"a","properties":{"amount":1.5}}`, nil, nil},
		{"amount 1e-400", `{"event":"a","properties":{"amount":1e-400}}`, nil, nil},
		{"amount 0.001", `{"event":"a","properties":{"amount":0.001}}`, nil, nil},
		{"amount 0", `{"event":"a","properties":{"amount":0}}`, nil, map[string]string{"properties.amount": "must be a positive number"}},
		{"amount 0.0e5", `{"event":"a","properties":{"amount":0.0e5}}`, nil, map[string]string{"properties.amount": "must be a positive number"}},
		{"amount -1", `{"event":"a","properties":{"amount":-1}}`, nil, map[string]string{"properties.amount": "must be a positive number"}},
		{"amount string", `{"event":"a","properties":{"amount":"5"}}`, nil, map[string]string{"properties.amount": "must be a positive number"}},
		{"amount null", `{"event":"a","properties":{"amount":null}}`, nil, map[string]string{"properties.amount": "must be a positive number"}},
		{"amount escaped key", `{"event":"a","properties":{"\u0061mount":0}}`, nil, map[string]string{"properties.amount": "must be a positive number"}},
		{"nested amount unchecked", `{"event":"a","properties":{"x":{"amount":-1}}}`, nil, nil},
		{"timestamp in 1h", `{"event":"a","timestamp":"2026-01-15T11:30:00Z"}`, nil, nil},
		{"timestamp in 1h+1ms", `{"event":"a","timestamp":"2026-01-15T11:30:00.001Z"}`, nil, map[string]string{"timestamp": "1 hour in the future"}},
		{"timestamp in past", `{"event":"a","timestamp":"2020-01-15T11:30:00Z"}`, nil, nil},
		{"both", `{"event":"a","properties":{"amount":0},"timestamp":"2027-01-01"}`, nil,
			map[string]string{"properties.amount": "positive", "timestamp": "future"}},
		// definitions
		{"def all right", `{"event":"a","properties":{"s":"x","n":-2.5,"b":false,"d":"2026-01-15T10:30:00.5+02:00","u":"https://example.com/a?b=c","req":"y","extra":[1]}}`, def, nil},
		{"def only required", `{"event":"a","properties":{"req":""}}`, def, nil},
		{"def optional null", `{"event":"a","properties":{"req":"r","s":null,"u":null}}`, def, nil},
		{"def http url", `{"event":"a","properties":{"req":"r","u":"HTTP://example.com"}}`, def, nil},
		{"def escaped url", `{"event":"a","properties":{"req":"r","u":"http:\/\/example.com\/x"}}`, def, nil},
		{"def required missing", `{"event":"a","properties":{"s":"x"}}`, def, map[string]string{"properties.req": "is required"}},
		{"def required null", `{"event":"a","properties":{"req":null}}`, def, map[string]string{"properties.req": "is required"}},
		{"def required missing, no properties", `{"event":"a"}`, def, map[string]string{"properties.req": "is required"}},
		{"def all wrong", `{"event":"a","properties":{"req":1,"s":1,"n":"1","b":"true","d":1768473000,"u":"ftp://x"}}`, def, map[string]string{
			"properties.req": "must be a string", "properties.s": "must be a string", "properties.n": "must be a number",
			"properties.b": "must be a boolean", "properties.d": "RFC 3339", "properties.u": "http or https"}},
		{"def string types wrong", `{"event":"a","properties":{"req":"r","s":{},"n":[],"b":null,"d":"yesterday","u":"/path"}}`, def, map[string]string{
			"properties.s": "must be a string", "properties.n": "must be a number", "properties.d": "RFC 3339", "properties.u": "http or https"}},
		{"def datetime date-only", `{"event":"a","properties":{"req":"r","d":"2026-01-15"}}`, def, map[string]string{"properties.d": "RFC 3339"}},
		{"def datetime no zone", `{"event":"a","properties":{"req":"r","d":"2026-01-15T10:30:00"}}`, def, map[string]string{"properties.d": "RFC 3339"}},
		{"def datetime no seconds", `{"event":"a","properties":{"req":"r","d":"2026-01-15T10:30Z"}}`, def, map[string]string{"properties.d": "RFC 3339"}},
		{"def url no host", `{"event":"a","properties":{"req":"r","u":"http:///x"}}`, def, map[string]string{"properties.u": "http or https"}},
		{"def url opaque", `{"event":"a","properties":{"req":"r","u":"http:example.com"}}`, def, map[string]string{"properties.u": "http or https"}},
		{"def url mailto", `{"event":"a","properties":{"req":"r","u":"mailto:a@b.c"}}`, def, map[string]string{"properties.u": "http or https"}},
		{"def url spaces", `{"event":"a","properties":{"req":"r","u":"http://exa mple.com"}}`, def, map[string]string{"properties.u": "http or https"}},
		{"def and amount", `{"event":"a","properties":{"amount":-1}}`, def, map[string]string{"properties.amount": "positive", "properties.req": "is required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := mustDecode(t, tt.body)
			p := Validate(&in, tt.def, now)
			if tt.want == nil {
				if p != nil {
					t.Fatalf("refused: %+v", *p)
				}
				return
			}
			if p == nil {
				t.Fatalf("accepted")
			}
			if p.Message != "Validation failed" {
				t.Fatalf("message %q", p.Message)
			}
			checkProblem(t, p, 422, "validation_error", tt.want)
		})
	}
}

func TestValidateSkewedFuture(t *testing.T) {
	const now = 1768473000000
	in := mustDecode(t, `{"event":"a","timestamp":"2026-01-15T12:30:00Z"}`)
	if Validate(&in, nil, now) == nil {
		t.Fatal("2h ahead accepted")
	}
	// The client clock runs 2 h fast: sent_at says 12:30 at our 10:30.
	ApplySkew(&in, now, now+2*3600*1000)
	if p := Validate(&in, nil, now); p != nil || in.Timestamp != now {
		t.Fatalf("after skew: %d %v", in.Timestamp, p)
	}
}

func TestValidateZeroInput(t *testing.T) {
	in := Input{Name: "a"}
	if p := Validate(&in, &Definition{Name: "a", Properties: []PropertyDef{{Name: "x", Type: TypeString}}}, 0); p != nil {
		t.Fatalf("refused: %+v", *p)
	}
}

func TestDefinitionCheck(t *testing.T) {
	tests := []struct {
		name string
		def  Definition
		want map[string]string
	}{
		{"minimal", Definition{Name: "signup"}, nil},
		{"full", Definition{Name: "Checkout_2", DisplayName: "Checkout", Category: strings.Repeat("é", 64), Properties: []PropertyDef{
			{Name: "a", Type: "string", Required: true}, {Name: "b", Type: "number"}, {Name: "c", Type: "boolean"},
			{Name: "d", Type: "datetime"}, {Name: "e", Type: "url"}}}, nil},
		{"no name", Definition{}, map[string]string{"name": "is required"}},
		{"bad name", Definition{Name: "sign-up"}, map[string]string{"name": "alphanumeric"}},
		{"long name", Definition{Name: strings.Repeat("a", 129)}, map[string]string{"name": "1-128"}},
		{"long category", Definition{Name: "a", Category: strings.Repeat("c", 65)}, map[string]string{"category": "64"}},
		{"bad properties", Definition{Name: "a", Properties: []PropertyDef{
			{Name: "x", Type: "string"}, {Name: "", Type: "number"}, {Name: "x", Type: "text"}, {Name: "y", Type: "String"}}},
			map[string]string{"properties[1].name": "is required", "properties[2].name": "duplicate", "properties[2].type": "one of", "properties[3].type": "one of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.def.Check()
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, sub := range tt.want {
				if !strings.Contains(got[k], sub) {
					t.Fatalf("got[%q] = %q, want %q in it", k, got[k], sub)
				}
			}
		})
	}
}
