package analytics

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

func TestIntervalFloorAndNext(t *testing.T) {
	for _, tc := range []struct {
		iv         Interval
		at         string
		floor, nxt string
	}{
		{Minute, "2026-01-15T10:30:59.999Z", "2026-01-15T10:30:00Z", "2026-01-15T10:31:00Z"},
		{Hour, "2026-01-15T10:00:00Z", "2026-01-15T10:00:00Z", "2026-01-15T11:00:00Z"},
		{Day, "2026-01-15T23:59:59.999Z", "2026-01-15T00:00:00Z", "2026-01-16T00:00:00Z"},
		// 2026-01-15 is a Thursday: its week starts on Monday the 12th.
		{Week, "2026-01-15T10:00:00Z", "2026-01-12T00:00:00Z", "2026-01-19T00:00:00Z"},
		{Week, "2026-01-12T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-19T00:00:00Z"},
		{Week, "2026-01-11T23:59:59.999Z", "2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z"}, // Sunday
		{Week, "1970-01-01T00:00:00Z", "1969-12-29T00:00:00Z", "1970-01-05T00:00:00Z"},
		{Month, "2026-02-28T12:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{Month, "2024-02-29T12:00:00Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{Month, "2026-12-31T23:59:59.999Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
	} {
		f := tc.iv.Floor(ms(tc.at))
		if f != ms(tc.floor) {
			t.Errorf("%s Floor(%s) = %s, want %s", tc.iv, tc.at, time.UnixMilli(f).UTC(), tc.floor)
		}
		if n := tc.iv.Next(f); n != ms(tc.nxt) {
			t.Errorf("%s Next(%s) = %s, want %s", tc.iv, tc.floor, time.UnixMilli(n).UTC(), tc.nxt)
		}
	}
}

func TestBucketsZeroFillAndEdges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to string
		iv       Interval
		starts   []string
		bounds   []string // bounds[len-1] is to+1ms
	}{
		{"aligned days, inclusive date-only to", "2026-01-13T00:00:00Z", "2026-01-15T23:59:59.999Z", Day,
			[]string{"2026-01-13T00:00:00Z", "2026-01-14T00:00:00Z", "2026-01-15T00:00:00Z"},
			[]string{"2026-01-13T00:00:00Z", "2026-01-14T00:00:00Z", "2026-01-15T00:00:00Z", "2026-01-16T00:00:00Z"}},
		{"unaligned ends are partial buckets", "2026-01-13T10:30:00Z", "2026-01-14T02:00:00Z", Day,
			[]string{"2026-01-13T00:00:00Z", "2026-01-14T00:00:00Z"},
			[]string{"2026-01-13T10:30:00Z", "2026-01-14T00:00:00Z", "2026-01-14T02:00:00.001Z"}},
		{"to exactly on a boundary opens a bucket", "2026-01-13T00:00:00Z", "2026-01-14T00:00:00Z", Day,
			[]string{"2026-01-13T00:00:00Z", "2026-01-14T00:00:00Z"},
			[]string{"2026-01-13T00:00:00Z", "2026-01-14T00:00:00Z", "2026-01-14T00:00:00.001Z"}},
		{"single instant", "2026-01-13T05:00:00Z", "2026-01-13T05:00:00Z", Hour,
			[]string{"2026-01-13T05:00:00Z"},
			[]string{"2026-01-13T05:00:00Z", "2026-01-13T05:00:00.001Z"}},
		{"hours", "2026-01-13T22:15:00Z", "2026-01-14T00:59:59.999Z", Hour,
			[]string{"2026-01-13T22:00:00Z", "2026-01-13T23:00:00Z", "2026-01-14T00:00:00Z"},
			[]string{"2026-01-13T22:15:00Z", "2026-01-13T23:00:00Z", "2026-01-14T00:00:00Z", "2026-01-14T01:00:00Z"}},
		{"weeks start on Monday", "2026-01-15T00:00:00Z", "2026-01-26T00:00:00Z", Week,
			[]string{"2026-01-12T00:00:00Z", "2026-01-19T00:00:00Z", "2026-01-26T00:00:00Z"},
			[]string{"2026-01-15T00:00:00Z", "2026-01-19T00:00:00Z", "2026-01-26T00:00:00Z", "2026-01-26T00:00:00.001Z"}},
		{"months", "2026-01-31T00:00:00Z", "2026-03-01T00:00:00Z", Month,
			[]string{"2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
			[]string{"2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-03-01T00:00:00.001Z"}},
	} {
		starts, bounds, err := Buckets(ms(tc.from), ms(tc.to), tc.iv)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		conv := func(ss []string) []int64 {
			var out []int64
			for _, s := range ss {
				out = append(out, ms(s))
			}
			return out
		}
		if !slices.Equal(starts, conv(tc.starts)) || !slices.Equal(bounds, conv(tc.bounds)) {
			t.Errorf("%s: starts %v bounds %v, want %v %v", tc.name, starts, bounds, conv(tc.starts), conv(tc.bounds))
		}
	}
	if _, _, err := Buckets(0, MaxBuckets*minuteMs, Minute); err != ErrTooManyBuckets {
		t.Errorf("too many buckets: %v", err)
	}
	if _, _, err := Buckets(0, (MaxBuckets-1)*minuteMs, Minute); err != nil {
		t.Errorf("MaxBuckets buckets: %v", err)
	}
	if _, _, err := Buckets(5, 4, Day); err == nil {
		t.Errorf("from after to accepted")
	}
}

func args(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseDefaults(t *testing.T) {
	now := ms("2026-01-15T12:00:00Z")
	q, d := Parse(args(), now)
	if d != nil {
		t.Fatal(d)
	}
	if q.Type != Timeseries || q.Metric != Count || q.Interval != Day || q.To != now || q.From != now-7*dayMs {
		t.Errorf("defaults: %+v", q)
	}
	q, d = Parse(args("type", "funnel", "steps", "a,b", "from", "2026-01-01", "to", "2026-01-02", "api_key", "x", "zzz", "1"), now)
	if d != nil || q.Window != 86400 || !slices.Equal(q.Steps, []string{"a", "b"}) ||
		q.From != ms("2026-01-01T00:00:00Z") || q.To != ms("2026-01-02T23:59:59.999Z") {
		t.Errorf("funnel: %+v %v", q, d)
	}
	q, d = Parse(args("type", "breakdown", "group_by", "properties.plan", "metric", "avg", "property", "amount", "limit", "3"), now)
	if d != nil || q.GroupProperty != "plan" || q.Metric != Avg || q.Property != "amount" || q.Limit != 3 {
		t.Errorf("breakdown: %+v %v", q, d)
	}
	// Bots are left out unless bots=include; every type but goals takes it.
	for _, typ := range []string{"timeseries", "breakdown&group_by=event", "funnel", "retention", "paths", "sessions"} {
		kv := []string{"type", typ, "bots", "include"}
		switch typ {
		case "breakdown&group_by=event":
			kv = []string{"type", "breakdown", "group_by", "event", "bots", "include"}
		case "funnel":
			kv = append(kv, "steps", "a,b")
		case "retention":
			kv = append(kv, "cohort_event", "a")
		case "paths":
			kv = append(kv, "start_event", "a")
		}
		if q, d := Parse(args(kv...), now); d != nil || !q.Bots {
			t.Errorf("%s with bots=include: %+v %v", typ, q, d)
		}
	}
	if q, d := Parse(args("bots", "exclude"), now); d != nil || q.Bots {
		t.Errorf("bots=exclude: %+v %v", q, d)
	}
	q, _ = Parse(args("to", "1970-01-02T00:00:00Z"), now)
	if q.From != 0 {
		t.Errorf("default from clamps at the epoch: %d", q.From)
	}
}

func TestParseErrors(t *testing.T) {
	now := ms("2026-01-15T12:00:00Z")
	long := strings.Repeat("x", 129)
	for _, tc := range []struct {
		args []string
		want []string // keys of details
	}{
		{[]string{"type", "pie"}, []string{"type"}},
		{[]string{"metric", "max"}, []string{"metric"}},
		{[]string{"metric", "sum"}, []string{"property"}},
		{[]string{"metric", "avg", "property", ""}, []string{"property"}},
		{[]string{"metric", "sum", "property", long}, []string{"property"}},
		{[]string{"property", "amount"}, []string{"property"}},
		{[]string{"event", "bad-name"}, []string{"event"}},
		{[]string{"event", ""}, []string{"event"}},
		{[]string{"visitor_id", ""}, []string{"visitor_id"}},
		{[]string{"visitor_id", strings.Repeat("é", 257)}, []string{"visitor_id"}},
		{[]string{"from", "yesterday"}, []string{"from"}},
		{[]string{"to", "2026-13-01"}, []string{"to"}},
		{[]string{"from", "2026-01-10", "to", "2026-01-09"}, []string{"from"}},
		{[]string{"interval", "year"}, []string{"interval"}},
		{[]string{"interval", "minute", "from", "2025-01-01"}, []string{"interval"}},
		{[]string{"group_by", "event"}, []string{"group_by"}},
		{[]string{"type", "breakdown"}, []string{"group_by"}},
		{[]string{"type", "breakdown", "group_by", "visitor"}, []string{"group_by"}},
		{[]string{"type", "breakdown", "group_by", "properties."}, []string{"group_by"}},
		{[]string{"type", "breakdown", "group_by", "event", "limit", "0"}, []string{"limit"}},
		{[]string{"type", "breakdown", "group_by", "event", "limit", "101"}, []string{"limit"}},
		{[]string{"type", "breakdown", "group_by", "event", "limit", "ten"}, []string{"limit"}},
		{[]string{"type", "breakdown", "group_by", "event", "interval", "day"}, []string{"interval"}},
		{[]string{"type", "funnel"}, []string{"steps"}},
		{[]string{"type", "funnel", "steps", "a"}, []string{"steps"}},
		{[]string{"type", "funnel", "steps", "a,b,c,d,e,f,g,h,i,j,k"}, []string{"steps"}},
		{[]string{"type", "funnel", "steps", "a,,b"}, []string{"steps"}},
		{[]string{"type", "funnel", "steps", "a,b", "funnel_id", "fnl_1"}, []string{"steps"}},
		{[]string{"type", "funnel", "funnel_id", ""}, []string{"funnel_id"}},
		{[]string{"type", "funnel", "steps", "a,b", "window", "0"}, []string{"window"}},
		{[]string{"type", "funnel", "steps", "a,b", "window", "31536001"}, []string{"window"}},
		{[]string{"type", "funnel", "steps", "a,b", "window", "1.5"}, []string{"window"}},
		{[]string{"type", "funnel", "steps", "a,b", "metric", "count", "event", "a"}, []string{"metric", "event"}},
		{[]string{"type", "goals", "visitor_id", "v", "steps", "a,b"}, []string{"visitor_id", "steps"}},
		{[]string{"steps", "a,b", "window", "5", "limit", "5"}, []string{"steps", "window", "limit"}},
		{[]string{"bots", "yes"}, []string{"bots"}},
		{[]string{"bots", ""}, []string{"bots"}},
		{[]string{"type", "goals", "bots", "include"}, []string{"bots"}},
		{[]string{"type", "goals", "where", "plan:eq:pro"}, []string{"where"}},
	} {
		_, d := Parse(args(tc.args...), now)
		got := slices.Sorted(maps.Keys(d))
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("Parse(%v) details %v, want keys %v", tc.args, d, want)
		}
	}
}

func occ(ts int64, id byte) Occ { return Occ{TS: ts, ID: [16]byte{15: id}} }

func TestDeepest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lists  [][]Occ
		window int64
		depth  int
		end    Occ
	}{
		{"nothing", [][]Occ{nil, nil}, 10, 0, Occ{}},
		{"first step only", [][]Occ{{occ(1, 1)}, nil}, 10, 1, occ(1, 1)},
		{"in order", [][]Occ{{occ(1, 1)}, {occ(5, 2)}, {occ(9, 3)}}, 10, 3, occ(9, 3)},
		{"window is inclusive", [][]Occ{{occ(1, 1)}, {occ(11, 2)}}, 10, 2, occ(11, 2)},
		{"out of window", [][]Occ{{occ(1, 1)}, {occ(12, 2)}}, 10, 1, occ(1, 1)},
		{"wrong order", [][]Occ{{occ(5, 2)}, {occ(1, 1)}}, 10, 1, occ(5, 2)},
		{"later start succeeds", [][]Occ{{occ(1, 1), occ(20, 3)}, {occ(25, 4)}}, 10, 2, occ(25, 4)},
		{"same ms ordered by id", [][]Occ{{occ(5, 1)}, {occ(5, 2)}}, 10, 2, occ(5, 2)},
		{"same ms wrong id order", [][]Occ{{occ(5, 2)}, {occ(5, 1)}}, 10, 1, occ(5, 2)},
		// Repeated step names share occurrences: one event is never two steps.
		{"a,a needs two events", [][]Occ{{occ(1, 1)}, {occ(1, 1)}}, 10, 1, occ(1, 1)},
		{"a,b,a", [][]Occ{{occ(1, 1), occ(7, 3)}, {occ(4, 2)}, {occ(1, 1), occ(7, 3)}}, 10, 3, occ(7, 3)},
		{"earliest completion", [][]Occ{{occ(1, 1), occ(2, 2)}, {occ(3, 3), occ(4, 4)}}, 10, 2, occ(3, 3)},
	} {
		d, end := Deepest(tc.lists, tc.window)
		if d != tc.depth || (d > 0 && end != tc.end) {
			t.Errorf("%s: depth %d end %v, want %d %v", tc.name, d, end, tc.depth, tc.end)
		}
	}
}

func TestFunnelCountsAndRates(t *testing.T) {
	byVisitor := map[string][][]Occ{
		"a": {{occ(1, 1)}, {occ(2, 2)}, {occ(3, 3)}}, // all three
		"b": {{occ(1, 4)}, {occ(2, 5)}, nil},         // two
		"c": {{occ(1, 6)}, nil, {occ(3, 7)}},         // one: step 3 without step 2
		"d": {nil, {occ(1, 8)}, {occ(2, 9)}},         // none: never started
	}
	counts := FunnelCounts(byVisitor, 3, 1000)
	if !slices.Equal(counts, []int64{3, 2, 1}) {
		t.Errorf("counts %v", counts)
	}
	rates := ConversionRates(counts)
	if rates[0] != 1 || rates[1] != 2.0/3 || rates[2] != 1.0/3 {
		t.Errorf("rates %v", rates)
	}
	if r := ConversionRates([]int64{0, 0}); r[0] != 0 || r[1] != 0 {
		t.Errorf("no visitors: %v", r)
	}
}

func goal(t *testing.T, js string) (*GoalSpec, map[string]string) {
	t.Helper()
	var g GoalSpec
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatal(err)
	}
	return &g, g.Check()
}

func TestGoalCheck(t *testing.T) {
	for _, tc := range []struct {
		js   string
		want []string
	}{
		{`{"name":"x","environment":"live","type":"occurrence","event":"signup"}`, nil},
		{`{"name":"x","environment":"live","type":"occurrence","event":"signup","where":{"property":"src","op":"eq","value":"pricing"}}`, nil},
		{`{"name":"x","environment":"test","type":"value","event":"buy","property":"amount","op":"gte","threshold":100}`, nil},
		{`{"name":"x","environment":"live","type":"sequence","steps":["a","b"],"window":60}`, nil},
		{`{"environment":"live","type":"occurrence","event":"signup"}`, []string{"name"}},
		{`{"name":"x","environment":"prod","type":"occurrence","event":"signup"}`, []string{"environment"}},
		{`{"name":"x","environment":"live","type":"other"}`, []string{"type"}},
		{`{"name":"x","environment":"live","type":"occurrence","event":"sign up"}`, []string{"event"}},
		{`{"name":"x","environment":"live","type":"occurrence","event":"a","where":{"property":"","op":"eq","value":1}}`, []string{"where.property"}},
		{`{"name":"x","environment":"live","type":"occurrence","event":"a","where":{"property":"p","op":"ne","value":1}}`, []string{"where.op"}},
		{`{"name":"x","environment":"live","type":"occurrence","event":"a","where":{"property":"p","op":"gt","value":"1"}}`, []string{"where.value"}},
		{`{"name":"x","environment":"live","type":"occurrence","event":"a","where":{"property":"p","op":"eq","value":[1]}}`, []string{"where.value"}},
		{`{"name":"x","environment":"live","type":"occurrence","event":"a","steps":["a","b"]}`, []string{"steps"}},
		{`{"name":"x","environment":"live","type":"value","event":"a","property":"p","op":"gte"}`, []string{"threshold"}},
		{`{"name":"x","environment":"live","type":"value","event":"a","op":"between","threshold":1}`, []string{"property", "op"}},
		{`{"name":"x","environment":"live","type":"sequence","steps":["a"],"window":60}`, []string{"steps"}},
		{`{"name":"x","environment":"live","type":"sequence","steps":["a","b"]}`, []string{"window"}},
		{`{"name":"x","environment":"live","type":"sequence","steps":["a","b"],"window":0,"event":"a"}`, []string{"window", "event"}},
	} {
		_, d := goal(t, tc.js)
		got := slices.Sorted(maps.Keys(d))
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: details %v, want keys %v", tc.js, d, want)
		}
	}
}

func TestGoalMatches(t *testing.T) {
	for _, tc := range []struct {
		js    string
		name  string
		props string
		want  bool
	}{
		{`{"type":"occurrence","event":"signup"}`, "signup", `{}`, true},
		{`{"type":"occurrence","event":"signup"}`, "login", `{}`, false},
		{`{"type":"occurrence","event":"signup","where":{"property":"src","op":"eq","value":"pricing"}}`, "signup", `{"src":"pricing"}`, true},
		{`{"type":"occurrence","event":"signup","where":{"property":"src","op":"eq","value":"pricing"}}`, "signup", `{"src":"home"}`, false},
		{`{"type":"occurrence","event":"signup","where":{"property":"src","op":"eq","value":"pricing"}}`, "signup", `{}`, false},
		{`{"type":"occurrence","event":"signup","where":{"property":"src","op":"eq","value":"pr\u00efcing"}}`, "signup", `{"src":"prïcing"}`, true},
		{`{"type":"occurrence","event":"a","where":{"property":"n","op":"eq","value":1}}`, "a", `{"n":1.0}`, true},
		{`{"type":"occurrence","event":"a","where":{"property":"n","op":"eq","value":1}}`, "a", `{"n":"1"}`, false},
		{`{"type":"occurrence","event":"a","where":{"property":"n","op":"lt","value":5}}`, "a", `{"n":4.9}`, true},
		{`{"type":"occurrence","event":"a","where":{"property":"b","op":"eq","value":true}}`, "a", `{"b":true}`, true},
		{`{"type":"occurrence","event":"a","where":{"property":"b","op":"eq","value":true}}`, "a", `{"b":false}`, false},
		{`{"type":"value","event":"buy","property":"amount","op":"gte","threshold":100}`, "buy", `{"amount":100}`, true},
		{`{"type":"value","event":"buy","property":"amount","op":"gte","threshold":100}`, "buy", `{"amount":99.99}`, false},
		{`{"type":"value","event":"buy","property":"amount","op":"gt","threshold":100}`, "buy", `{"amount":100}`, false},
		{`{"type":"value","event":"buy","property":"amount","op":"lte","threshold":100}`, "buy", `{"amount":"5"}`, false},
		{`{"type":"value","event":"buy","property":"amount","op":"eq","threshold":5}`, "buy", `{"amount":5}`, true},
		{`{"type":"sequence","steps":["a","b"],"window":5}`, "a", `{}`, false},
	} {
		var spec GoalSpec
		if err := json.Unmarshal([]byte(tc.js), &spec); err != nil {
			t.Fatal(err)
		}
		if got := Compile("g", spec).Matches(tc.name, []byte(tc.props)); got != tc.want {
			t.Errorf("%s on %s %s: %v, want %v", tc.js, tc.name, tc.props, got, tc.want)
		}
	}
}

func TestFunnelSpecDefaultsWindow(t *testing.T) {
	f := FunnelSpec{Name: "f", Steps: []string{"a", "b"}}
	if d := f.Check(); d != nil || *f.Window != 86400 {
		t.Errorf("check %v window %v", d, f.Window)
	}
	bad := FunnelSpec{Steps: []string{"a"}}
	if d := bad.Check(); !reflect.DeepEqual(slices.Sorted(maps.Keys(d)), []string{"name", "steps"}) {
		t.Errorf("details %v", d)
	}
}

func TestRound15AndTop(t *testing.T) {
	if got := Round15(19.99 + 19.99 + 19.99); got != 59.97 {
		t.Errorf("Round15 = %v", got)
	}
	if Round15(0.1+0.2) != 0.3 || Round15(1e300) != 1e300 || Round15(0) != 0 {
		t.Errorf("Round15 edge cases")
	}
	rows := Top([]Row{{"b", 2}, {"a", 2}, {"c", 5}, {"d", 1}}, 3)
	if !reflect.DeepEqual(rows, []Row{{"c", 5}, {"a", 2}, {"b", 2}}) {
		t.Errorf("Top = %v", rows)
	}
}
