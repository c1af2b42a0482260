package main

import (
	"strings"
	"testing"
	"time"

	"github.com/eventd/eventd/bench"
)

func TestCatchUpResult(t *testing.T) {
	tests := []struct {
		name      string
		delivered uint64
		elapsed   time.Duration
		want      uint64
		rate      float64 // events/s
		ok        bool
	}{
		{"500k in 2 s", 500_000, 2 * time.Second, 500_000, 250_000, true},
		{"cut short: the rate of what came", 300_000, 10 * time.Second, 500_000, 30_000, false},
		{"nothing", 0, 0, 500_000, 0, false},
	}
	for _, tc := range tests {
		r := catchUpResult(&bench.StreamResult{Delivered: tc.delivered, Elapsed: tc.elapsed}, tc.want)
		s := &bench.Series{Unit: bench.UnitEvents}
		s.Add(r)
		if got := s.Rate(); got != tc.rate {
			t.Errorf("%s: rate %v, want %v", tc.name, got, tc.rate)
		}
		if (r.OK == 1) != tc.ok || r.Requests != 1 || r.Stream.Expected != tc.want {
			t.Errorf("%s: ok %d of %d, expected %d", tc.name, r.OK, r.Requests, r.Stream.Expected)
		}
		if !tc.ok && bench.Breakdown(r) == "" {
			t.Errorf("%s: an undrained backlog is not in the failure breakdown", tc.name)
		}
		if r.Latency.Count() != 1 {
			t.Errorf("%s: drain time not booked as the run's latency", tc.name)
		}
	}
}

// cursorsResult builds a cursors scenario: ingest with and without cursors
// (ok events in 1 s each, CPU per event), the delivery latency every
// message took, and a catch-up of delivered of 500,000 in cuElapsed.
func cursorsResult(withOK, withoutOK uint64, withCPU, withoutCPU time.Duration, delivery time.Duration, expected uint64,
	cuDelivered uint64, cuElapsed time.Duration) *bench.ScenarioResult {
	st := &bench.StreamResult{Delivered: expected, Expected: expected, Closes: map[string]uint64{}}
	for range 100 {
		st.Latency.Record(delivery)
	}
	with := round(withOK, withOK, withCPU*time.Duration(withOK))
	with.Stream = st
	cu := catchUpResult(&bench.StreamResult{Delivered: cuDelivered, Elapsed: cuElapsed}, 500_000)
	return &bench.ScenarioResult{Name: "cursors", Base: "cursors",
		Eventd:   series("eventd + 100 cursors", bench.UnitRequests, with),
		Ceilings: []*bench.Series{series("eventd, no cursors", bench.UnitRequests, round(withoutOK, withoutOK, withoutCPU*time.Duration(withoutOK)))},
		Others:   []*bench.Series{series("catch-up", bench.UnitEvents, cu)}}
}

func TestCursorTargets(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		sc   *bench.ScenarioResult
		// met per target, in the order: ingest ratio, delivery p99, every event, catch-up
		met []bool
	}{
		{"all met", cursorsResult(5000, 5000, 150*time.Microsecond, 100*time.Microsecond, 20*ms, 500_000, 500_000, 2*time.Second),
			[]bool{true, true, true, true}},
		{"slow delivery, a lost message, slow catch-up",
			cursorsResult(5000, 5000, 150*time.Microsecond, 100*time.Microsecond, 80*ms, 500_000, 500_000, 20*time.Second),
			[]bool{true, false, true, false}},
		{"ingest fell to 0.70; backlog not drained",
			cursorsResult(3500, 5000, 150*time.Microsecond, 100*time.Microsecond, 20*ms, 500_000, 400_000, time.Second),
			[]bool{false, true, true, false}},
	}
	for _, tc := range tests {
		cursorTargets(tc.sc, 100, 5000, 0)
		if len(tc.sc.Targets) != len(tc.met) {
			t.Fatalf("%s: targets %+v", tc.name, tc.sc.Targets)
		}
		for i, tg := range tc.sc.Targets {
			if tg.Met != tc.met[i] {
				t.Errorf("%s: %s: met %v, want %v (%s)", tc.name, tg.Name, tg.Met, tc.met[i], tg.Got)
			}
		}
	}
	// The CPU comparison: 150 µs with, 100 without, so without/with 0.67.
	sc := cursorsResult(5000, 5000, 150*time.Microsecond, 100*time.Microsecond, 20*ms, 500_000, 500_000, 2*time.Second)
	cursorTargets(sc, 100, 5000, 0)
	if !strings.Contains(strings.Join(sc.Notes, "\n"), "150µs with 100 cursors, 100µs without (without/with 0.67") {
		t.Errorf("notes %q", sc.Notes)
	}
	if got := sc.Targets[3].Got; got != "250,000 events/s" {
		t.Errorf("catch-up got %q", got)
	}
}
