package filter

import "testing"

const props = `{"plan":"pro","amount":12.5,"count":3,"paid":true,"note":null,"tags":["a","b"],"name":"Ada \"Q\"","code":"007",` +
	`"context":{"page":{"path":"/pricing","title":"Plans: all"}},"dotted.key":1}`

func TestMatch(t *testing.T) {
	tests := []struct {
		where string
		want  bool
	}{
		{"plan:eq:pro", true},
		{"plan:eq:Pro", false},
		{"plan:neq:pro", false},
		{"plan:neq:free", true},
		{"missing:neq:x", true}, // a missing property is not equal to anything
		{"missing:eq:x", false},
		{"plan:in:free|pro", true},
		{"plan:in:free|team", false},
		{"amount:eq:12.50", true}, // both numbers: compared as numbers
		{"amount:gt:12", true},
		{"amount:gte:12.5", true},
		{"amount:lt:12.5", false},
		{"amount:lte:12.5", true},
		{"count:gt:10", false}, // numerically, not "3" > "10" as strings
		{"code:eq:7", false},   // a string property compares as a string
		{"code:eq:007", true},
		{"plan:gt:free", true}, // strings: byte order
		{"paid:eq:true", true},
		{"note:eq:null", true},
		{"note:exists", true},
		{"missing:exists", false},
		{"name:eq:Ada \"Q\"", true}, // escapes are compared unescaped
		{"name:contains:da", true},
		{"tags:contains:\"b\"", true}, // an array compares as its JSON text
		{"context.page.path:eq:/pricing", true},
		{"context.page.title:eq:Plans: all", true}, // the value may hold ':'
		{"context.page:exists", true},
		{"context.page.missing:exists", false},
		{"plan.sub:exists", false},   // a path through a non-object
		{"dotted.key:exists", false}, // dots always separate segments
	}
	for _, tc := range tests {
		c, err := Parse(tc.where)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.where, err)
			continue
		}
		if got := c.Match([]byte(props)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.where, got, tc.want)
		}
	}
}

func TestFilterIsAnd(t *testing.T) {
	var f Filter
	for _, w := range []string{"plan:eq:pro", "amount:gt:10"} {
		c, err := Parse(w)
		if err != nil {
			t.Fatal(err)
		}
		f = append(f, c)
	}
	if !f.Match([]byte(props)) || f.Match([]byte(`{"plan":"pro","amount":1}`)) || !(Filter{}).Match([]byte(`{}`)) {
		t.Fatal("conditions are not ANDed")
	}
}

func TestParseRefuses(t *testing.T) {
	for _, w := range []string{"", "plan", "plan:eq", ":eq:x", "plan:like:x", "plan:exists:x", "a..b:eq:x",
		"a.b.c.d.e.f.g.h.i:eq:x", "plan:eq:" + string(make([]byte, 257)), "plan:in:" + manyValues(51)} {
		if _, err := Parse(w); err == nil {
			t.Errorf("Parse(%q) accepted", w)
		}
	}
}

func manyValues(n int) string {
	s := "v"
	for i := 1; i < n; i++ {
		s += "|v"
	}
	return s
}

func BenchmarkMatch(b *testing.B) {
	c, _ := Parse("context.page.path:eq:/pricing")
	p := []byte(props)
	for b.Loop() {
		c.Match(p)
	}
}
