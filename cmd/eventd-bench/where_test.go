package main

import (
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eventd/eventd/bench"
)

func TestWhereSpanAndScan(t *testing.T) {
	day := 24 * time.Hour
	spans := []struct {
		n    uint64
		want time.Duration
	}{
		{10_000_000, 30 * day}, // the month
		{2_000_000, 6 * day},
		{400_000, 28*time.Hour + 48*time.Minute},
	}
	for _, tc := range spans {
		if got := whereSpan(tc.n); got != tc.want {
			t.Errorf("whereSpan(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	// What each class reads is the same whatever the store's size, since
	// the density is: the point of loading at 10 million a month.
	want := []float64{13_889, 41_667, 166_667, 166_667}
	for _, n := range []uint64{2_000_000, 10_000_000} {
		for i, q := range whereQueries {
			if got := whereScanned(q, n, whereSpan(n)); math.Abs(got-want[i]) > 1 {
				t.Errorf("%s over %d events: reads %.0f, want %.0f", q.name, n, got, want[i])
			}
		}
	}
	// A range longer than the data reads all of it, never more.
	if got := whereScanned(whereQuery{rng: 48 * time.Hour, share: 1}, 400_000, whereSpan(400_000)); got != 400_000 {
		t.Errorf("a range past the data reads %.0f", got)
	}
	if got := whereScanned(whereQueries[0], 1000, 0); got != 0 {
		t.Errorf("no span: %v", got)
	}
}

func TestWhereURI(t *testing.T) {
	end := time.Date(2026, 11, 24, 17, 0, 0, 0, time.UTC)
	q := whereQueries[1]
	u, err := url.Parse(whereURI(q, end, true))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	if u.Path != "/analytics" || v.Get("event") != "signup" || v.Get("from") != "2026-11-23T17:00:00.000Z" ||
		v.Get("to") != "2026-11-24T17:00:00.000Z" || v.Get("where") != "amount:lte:2" {
		t.Errorf("filtered: %s", u)
	}
	if plain := whereURI(q, end, false); strings.Contains(plain, "where") {
		t.Errorf("unfiltered: %s", plain)
	}
}

func TestWhereRateLimit(t *testing.T) {
	// Two classes in four are analytics queries: at the rate, each of the
	// 64 keys makes 40 of them a minute, under the bucket's 50.
	r := whereRateLimit(whereQueries)
	perKeyMin := r / whereKeys * 60 * 2 / 4
	if math.Abs(perKeyMin-40) > 1e-9 {
		t.Errorf("rate %v: %v analytics queries a minute per key", r, perKeyMin)
	}
}

func TestAnswerTotal(t *testing.T) {
	tests := []struct {
		body string
		want float64
		ok   bool
	}{
		{`{"data":[],"pagination":{"total":136,"limit":20,"offset":0}}`, 136, true},
		{`{"type":"timeseries","total":414,"data":[]}`, 414, true},
		{`{"type":"timeseries","total":0,"data":[]}`, 0, true},
		{`{"data":[]}`, 0, false},
		{`not json`, 0, false},
	}
	for _, tc := range tests {
		got, err := answerTotal([]byte(tc.body))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: %v, %v", tc.body, got, err)
		}
	}
}

func TestWhereTargets(t *testing.T) {
	ms := time.Millisecond
	class := func(name string, d time.Duration, n uint64) *bench.ClassResult {
		c := &bench.ClassResult{Name: name, Requests: n, OK: n}
		for range n {
			c.Latency.Record(d)
		}
		return c
	}
	filtered := round(30, 0, -1)
	filtered.Classes = []*bench.ClassResult{class("list", 15*ms, 10), class("signup", 130*ms, 10), class("all", 390*ms, 10)}
	plain := round(300, 0, -1)
	plain.Classes = []*bench.ClassResult{class("list", ms/5, 100), class("signup", ms/10, 100), class("all", ms/10, 100)}
	sc := &bench.ScenarioResult{Name: "where", Eventd: series("eventd", bench.UnitRequests, filtered),
		Others: []*bench.Series{series("plain", bench.UnitRequests, plain)}}
	whereTargets(sc, []string{"loaded"})
	met := []bool{true, true, false}
	if len(sc.Targets) != len(met) {
		t.Fatalf("targets %+v", sc.Targets)
	}
	for i, tg := range sc.Targets {
		if tg.Met != met[i] {
			t.Errorf("%s: met %v (%s)", tg.Name, tg.Met, tg.Got)
		}
	}
	if sc.Notes[0] != "loaded" || !strings.Contains(sc.Notes[3], "all: p50 ") || !strings.Contains(sc.Notes[3], "without where= p50 100µs") {
		t.Errorf("notes %q", sc.Notes)
	}
}

func TestIsIdle(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		cpu, wall time.Duration
		want      bool
	}{
		{10 * ms, time.Second, true},   // 0.01 cores
		{50 * ms, time.Second, false},  // 0.05: at the line is not below it
		{900 * ms, time.Second, false}, // a compaction
		{0, 0, false},                  // no time passed: no verdict
	}
	for _, tc := range tests {
		if got := isIdle(tc.cpu, tc.wall, 0.05); got != tc.want {
			t.Errorf("isIdle(%v, %v) = %v", tc.cpu, tc.wall, got)
		}
	}
}
