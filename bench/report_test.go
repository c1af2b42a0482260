package bench

import (
	"strings"
	"testing"
	"time"
)

func TestFormatRate(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{
		{0, UnitRequests, "0 req/s"},
		{999.4, UnitRequests, "999 req/s"},
		{1000, UnitRequests, "1,000 req/s"},
		{12345.6, UnitRequests, "12,346 req/s"},
		{1234567, UnitEvents, "1,234,567 events/s"},
	}
	for _, tc := range tests {
		if got := FormatRate(tc.v, tc.unit); got != tc.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0"},
		{850 * time.Nanosecond, "0.85µs"},
		{37 * time.Microsecond, "37.0µs"},
		{412 * time.Microsecond, "412µs"},
		{1230 * time.Microsecond, "1.23ms"},
		{45600 * time.Microsecond, "45.6ms"},
		{2500 * time.Millisecond, "2.50s"},
	}
	for _, tc := range tests {
		if got := FormatDuration(tc.d); got != tc.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

func TestSeriesAndRatio(t *testing.T) {
	round := func(ok uint64, lat time.Duration) *Result {
		r := &Result{OK: ok, Requests: ok, Events: ok * 10, Elapsed: time.Second, Expect: 201,
			Statuses: map[int]uint64{201: ok}, Errors: map[string]uint64{}}
		r.Latency.Record(lat)
		return r
	}
	e := &Series{Name: "eventd", Unit: UnitRequests}
	e.Add(round(100, time.Millisecond))
	e.Add(round(300, 3*time.Millisecond))
	c := &Series{Name: "noop", Unit: UnitRequests}
	c.Add(round(400, time.Millisecond))
	if e.Rate() != 200 || Ratio(e, c) != 0.5 {
		t.Errorf("rate %v ratio %v", e.Rate(), Ratio(e, c))
	}
	if lo, hi := e.Spread(); lo != 100 || hi != 300 {
		t.Errorf("spread %v..%v", lo, hi)
	}
	tot := e.Total()
	if tot.OK != 400 || tot.Latency.Count() != 2 || tot.Latency.Max() != 3*time.Millisecond {
		t.Errorf("total %+v", tot)
	}
	// Each round's own p99, in order (the merged one is 3ms).
	if got := e.RoundPercentiles(99); got != "1.00ms / 3.00ms" {
		t.Errorf("round p99s %q, want 1.00ms / 3.00ms", got)
	}
	ev := &Series{Name: "eventd", Unit: UnitEvents, Rounds: e.Rounds}
	if ev.Rate() != 2000 {
		t.Errorf("events rate %v", ev.Rate())
	}
	if Ratio(e, &Series{}) != 0 {
		t.Error("ratio to an empty ceiling")
	}
}

func TestBreakdown(t *testing.T) {
	r := &Result{Requests: 110, OK: 100, Expect: 201, RejectedEvents: 3,
		Statuses: map[int]uint64{201: 100, 429: 7, 503: 1},
		Errors:   map[string]uint64{"timeout": 2}}
	got := Breakdown(r)
	want := "10 of 110 requests failed: 7×429, 1×503, 2×timeout, 3 events rejected inside 201 batches"
	if got != want {
		t.Errorf("Breakdown = %q\nwant        %q", got, want)
	}
	if b := Breakdown(&Result{Requests: 5, OK: 5, Expect: 201, Statuses: map[int]uint64{201: 5}}); b != "" {
		t.Errorf("clean result: %q", b)
	}
}

func TestWriteTableAndJSON(t *testing.T) {
	ok := &Result{Requests: 1000, OK: 990, Events: 990, Elapsed: time.Second, Expect: 201,
		Statuses: map[int]uint64{201: 990, 500: 10}, Errors: map[string]uint64{}, PerSecond: []Sample{{Second: 0, Requests: 1000}}}
	for i := 0; i < 1000; i++ {
		ok.Latency.Record(time.Duration(i) * time.Microsecond)
	}
	e := &Series{Name: "eventd", Unit: UnitRequests}
	e.Add(ok)
	n := &Series{Name: "noop", Unit: UnitRequests}
	n.Add(&Result{Requests: 2000, OK: 1980, Elapsed: time.Second, Expect: 201, Statuses: map[int]uint64{201: 1980}})
	p := &Series{Name: "pebble", Unit: UnitRequests}
	p.Add(&Result{Requests: 3960, OK: 3960, Elapsed: time.Second})
	sc := &ScenarioResult{Name: "single", Eventd: e, Ceilings: []*Series{n, p}}
	var b strings.Builder
	WriteTable(&b, []*ScenarioResult{sc})
	out := b.String()
	for _, want := range []string{"scenario", "990 req/s", "1,980 req/s", "(noop)", "0.50", "(pebble)", "0.25", "single / eventd: 10 of 1000 requests failed: 10×500", "single / noop: 20 of 2000"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	j := ScenarioJSON(sc, time.Time{})
	if j.Unit != UnitRequests || j.Eventd == nil || j.Eventd.Statuses["500"] != 10 || len(j.Ceilings) != 2 ||
		j.Ceilings[0].Ratio != 0.5 || len(j.Eventd.Rounds) != 1 || len(j.Eventd.Histogram) == 0 {
		t.Errorf("json %+v", j)
	}
}
