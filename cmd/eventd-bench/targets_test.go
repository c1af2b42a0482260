package main

import (
	"strings"
	"testing"
	"time"

	"github.com/eventd/eventd/bench"
)

// round is one round with ok successes (events as many, times perOK in a
// batch series) and the server CPU it cost; cpu < 0: not read.
func round(ok, events uint64, cpu time.Duration) *bench.Result {
	return &bench.Result{Requests: ok, OK: ok, Events: events, Elapsed: time.Second, Expect: 201,
		Statuses: map[int]uint64{201: ok}, ServerCPU: max(cpu, 0), HasServerCPU: cpu >= 0}
}

func series(name, unit string, r *bench.Result) *bench.Series {
	s := &bench.Series{Name: name, Unit: unit}
	s.Add(r)
	return s
}

// scenario builds a result with eventd and a no-op ceiling.
func scenario(base, phase string, eventdOK uint64, eventdCPU time.Duration, noopOK uint64, noopCPU time.Duration) *bench.ScenarioResult {
	return &bench.ScenarioResult{Name: base, Base: base, Phase: phase,
		Eventd:   series("eventd", bench.UnitRequests, round(eventdOK, eventdOK, eventdCPU)),
		Ceilings: []*bench.Series{series("noop", bench.UnitRequests, round(noopOK, 0, noopCPU))}}
}

func TestCPUTarget(t *testing.T) {
	tests := []struct {
		name          string
		eventdCPU     time.Duration // for 1,000 requests
		noopCPU       time.Duration
		wantTarget    bool
		wantMet       bool
		wantGot, note string
	}{
		{"today: 4.1x, missed", 42600 * time.Microsecond, 10300 * time.Microsecond, true, false, "4.14x (42.6µs vs 10.3µs)", ""},
		{"at the goal: met", 25 * time.Millisecond, 10 * time.Millisecond, true, true, "2.50x (25.0µs vs 10.0µs)", ""},
		{"below: met", 15 * time.Millisecond, 10 * time.Millisecond, true, true, "1.50x", ""},
		{"no-op in-process: a note, no verdict", 15 * time.Millisecond, -1, false, false, "", "not measured"},
		{"eventd elsewhere: a note, no verdict", -1, 10 * time.Millisecond, false, false, "", "not measured"},
	}
	for _, tc := range tests {
		sc := scenario("single", bench.PhaseFresh, 1000, tc.eventdCPU, 2000, tc.noopCPU*2)
		cpuTarget(sc)
		if !tc.wantTarget {
			if len(sc.Targets) != 0 || len(sc.Notes) != 1 || !strings.Contains(sc.Notes[0], tc.note) {
				t.Errorf("%s: targets %+v notes %q", tc.name, sc.Targets, sc.Notes)
			}
			continue
		}
		if len(sc.Targets) != 1 {
			t.Fatalf("%s: targets %+v", tc.name, sc.Targets)
		}
		got := sc.Targets[0]
		if got.Name != cpuTargetName || got.Goal != "≤ 2.5x" || got.Met != tc.wantMet || !strings.HasPrefix(got.Got, tc.wantGot) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

func TestFsyncFloorNote(t *testing.T) {
	tests := []struct {
		name     string
		floorOK  uint64        // requests in the floor's one-second round
		floorCPU time.Duration // its CPU then; < 0: not read
		want     string        // the note, "" for none
	}{
		{"half the no-op at twice its CPU", 1000, 40 * time.Millisecond,
			"fsync noop (the no-op answering each POST only once its body is fdatasynced, syncs grouped: the least a server that syncs before its 201 does): 0.50 of the no-op, 40.0µs CPU a request, 2.00x the no-op's; eventd reaches 60% of its rate"},
		{"its CPU not read", 1000, -1,
			"fsync noop (the no-op answering each POST only once its body is fdatasynced, syncs grouped: the least a server that syncs before its 201 does): 0.50 of the no-op, CPU not measured; eventd reaches 60% of its rate"},
		{"no floor in the run", 0, 0, ""},
	}
	for _, tc := range tests {
		sc := scenario("single", bench.PhaseFresh, 600, 18*time.Millisecond, 2000, 40*time.Millisecond)
		if tc.floorOK > 0 {
			sc.Ceilings = append(sc.Ceilings, series(fsyncNoop, bench.UnitRequests, round(tc.floorOK, 0, tc.floorCPU)))
		}
		fsyncFloorNote(sc)
		if got := strings.Join(sc.Notes, "\n"); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestCrossTargets(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		results []*bench.ScenarioResult
		// for each mixed result in order: "" no target (a note), else its Got prefix and met
		want []string
		met  []bool
	}{
		{"mixed 0.40 / single 0.50 = 0.80: met",
			[]*bench.ScenarioResult{scenario("single", bench.PhaseFresh, 500, ms, 1000, ms), scenario("mixed", bench.PhaseFresh, 400, ms, 1000, ms)},
			[]string{"0.80 (mixed 0.40 / single 0.50)"}, []bool{true}},
		{"mixed 0.30 / single 0.50 = 0.60: missed",
			[]*bench.ScenarioResult{scenario("single", bench.PhaseFresh, 500, ms, 1000, ms), scenario("mixed", bench.PhaseFresh, 300, ms, 1000, ms)},
			[]string{"0.60 (mixed 0.30 / single 0.50)"}, []bool{false}},
		{"each phase against its own single",
			[]*bench.ScenarioResult{
				scenario("single", bench.PhaseFresh, 500, ms, 1000, ms),
				scenario("single", bench.PhaseLoaded, 250, ms, 1000, ms),
				scenario("mixed", bench.PhaseFresh, 300, ms, 1000, ms),
				scenario("mixed", bench.PhaseLoaded, 225, ms, 1000, ms)},
			[]string{"0.60 (mixed 0.30 / single 0.50)", "0.90 (mixed 0.23 / single 0.25)"}, []bool{false, true}},
		{"single not run: a note",
			[]*bench.ScenarioResult{scenario("batch", bench.PhaseFresh, 500, ms, 1000, ms), scenario("mixed", bench.PhaseFresh, 400, ms, 1000, ms)},
			[]string{""}, []bool{false}},
		{"single without a no-op figure: a note",
			[]*bench.ScenarioResult{scenario("single", bench.PhaseFresh, 500, ms, 0, ms), scenario("mixed", bench.PhaseFresh, 400, ms, 1000, ms)},
			[]string{""}, []bool{false}},
	}
	for _, tc := range tests {
		crossTargets(tc.results)
		i := 0
		for _, sc := range tc.results {
			if sc.Base != "mixed" {
				if len(sc.Targets) != 0 {
					t.Errorf("%s: %s got targets %+v", tc.name, sc.Base, sc.Targets)
				}
				continue
			}
			want := tc.want[i]
			switch {
			case want == "":
				if len(sc.Targets) != 0 || len(sc.Notes) != 1 || !strings.Contains(sc.Notes[0], "not checked") {
					t.Errorf("%s: targets %+v notes %q", tc.name, sc.Targets, sc.Notes)
				}
			case len(sc.Targets) != 1:
				t.Errorf("%s: targets %+v", tc.name, sc.Targets)
			default:
				got := sc.Targets[0]
				if !strings.HasPrefix(got.Got, want) || got.Met != tc.met[i] || got.Goal != "≥ 0.80" {
					t.Errorf("%s: mixed %d: %+v, want %q met %v", tc.name, i, got, want, tc.met[i])
				}
			}
			i++
		}
	}
}

// TestIssue12Targets runs the single and batch judges on made-up figures:
// the goals are issue 12's.
func TestIssue12Targets(t *testing.T) {
	e := &env{o: &options{batchSize: 100}, tmpl: bench.NewTemplate(bench.EventTemplate)}
	batch := func(eventd, pebble uint64) *bench.ScenarioResult {
		return &bench.ScenarioResult{Name: "batch", Base: "batch",
			Eventd:   series("eventd", bench.UnitEvents, round(eventd/100, eventd, -1)),
			Ceilings: []*bench.Series{series("pebble", bench.UnitEvents, round(pebble/100, pebble, -1))}}
	}
	for _, tc := range []struct {
		eventd, pebble uint64
		met            bool
	}{{70_000, 100_000, true}, {69_000, 100_000, false}, {54_000, 100_000, false}} {
		sc := batch(tc.eventd, tc.pebble)
		buildBatch(e).judge(sc)
		if len(sc.Targets) == 0 || sc.Targets[0].Goal != "≥ 0.70" || sc.Targets[0].Met != tc.met {
			t.Errorf("batch %d/%d: %+v", tc.eventd, tc.pebble, sc.Targets)
		}
	}
	sc := scenario("single", bench.PhaseLoaded, 600, 30*time.Millisecond, 1000, 10*time.Millisecond)
	sc.Ceilings = append(sc.Ceilings, series("pebble", bench.UnitRequests, round(1200, 1200, -1)))
	sc.Eventd.Rounds[0].Latency.Record(2 * time.Millisecond)
	buildSingle(e).judge(sc)
	var names []string
	for _, tg := range sc.Targets {
		names = append(names, tg.Name+" "+tg.Goal+" "+tg.Got)
	}
	got := strings.Join(names, "\n")
	for _, want := range []string{"single ingest vs the no-op server ≥ 0.50 0.60", cpuTargetName + " ≤ 2.5x 5.00x", "< 5ms"} {
		if !strings.Contains(got, want) {
			t.Errorf("single targets lack %q:\n%s", want, got)
		}
	}
}

func TestInterleave(t *testing.T) {
	r := func(base, phase string) *bench.ScenarioResult {
		return &bench.ScenarioResult{Name: base + "/" + phase, Base: base, Phase: phase}
	}
	fresh := []*bench.ScenarioResult{r("single", "fresh"), r("enterprise", "fresh"), r("mixed", "fresh")}
	loaded := []*bench.ScenarioResult{r("single", "loaded"), r("mixed", "loaded")}
	var got []string
	for _, sc := range interleave(fresh, loaded) {
		got = append(got, sc.Name)
	}
	if want := "single/fresh single/loaded enterprise/fresh mixed/fresh mixed/loaded"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

// TestEnterpriseTargets runs the enterprise judge on made-up latencies: a
// p99 of 8 ms misses issue 5's 5 ms and meets issue 12's 10 ms.
func TestEnterpriseTargets(t *testing.T) {
	e := &env{o: &options{keys: 500, keyLimit: 2000}, tmpl: bench.NewTemplate(bench.EventTemplate)}
	sc := scenario("enterprise", bench.PhaseFresh, 1000, -1, 1000, -1)
	for range 1000 {
		sc.Eventd.Rounds[0].Latency.Record(8 * time.Millisecond)
	}
	floor := round(1000, 0, -1)
	for range 1000 {
		floor.Latency.Record(2 * time.Millisecond)
	}
	sc.Ceilings = append(sc.Ceilings, series(fsyncNoop, bench.UnitRequests, floor))
	buildEnterprise(e).judge(sc)
	if notes := strings.Join(sc.Notes, "\n"); !strings.Contains(notes, "fsync noop under the same load") || !strings.Contains(notes, "p99 2.00ms, p99.9 2.00ms") {
		t.Errorf("no note of the floor's latency: %s", notes)
	}
	want := map[string]bool{
		"p99 from the intended send time < 5ms":               false,
		"p99 from the intended send time < 10ms (issue 12)":   true,
		"p99.9 from the intended send time < 20ms":            true,
		"p99.9 from the intended send time < 25ms (issue 12)": true,
	}
	for _, tg := range sc.Targets {
		k := tg.Name + " " + tg.Goal
		if met, ok := want[k]; ok {
			if tg.Met != met {
				t.Errorf("%s: met %v, want %v (got %s)", k, tg.Met, met, tg.Got)
			}
			delete(want, k)
		}
	}
	for k := range want {
		t.Errorf("no target %q", k)
	}
}
