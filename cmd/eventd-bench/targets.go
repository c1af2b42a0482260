package main

import (
	"fmt"
	"time"

	"github.com/eventd/eventd/bench"
)

// Issue 12's write-path targets that are not a single figure of one
// scenario: CPU against the no-op's, and mixed against single.
const (
	// maxCPURatio: eventd's server CPU per durable event over the no-op's
	// CPU per request.
	maxCPURatio = 2.5
	// minMixedOverSingle: the mixed scenario's ratio to the no-op over the
	// single scenario's ratio to the no-op, in the same run and phase.
	minMixedOverSingle = 0.8
	// minBatchRatio: batches of 100 over raw Pebble commits of the same
	// records.
	minBatchRatio = 0.7
	// minSingleRatio: single events over the no-op server.
	minSingleRatio = 0.5
	// minSegmentRatio: Segment batches over native batches of the same
	// events on the same server (issue 14).
	minSegmentRatio = 0.8
	// minCursorIngestRatio: ingest with 100 named cursors over ingest
	// without them, at the same open-loop rate (issue 16).
	minCursorIngestRatio = 0.8
	// maxCursorDeliveryP99: an event's way from its send to each cursor
	// consumer at 5,000 events/s (issue 16).
	maxCursorDeliveryP99 = 50 * time.Millisecond
	// minCatchUpRate: events/s a reconnected cursor drains its backlog at
	// (issue 16).
	minCatchUpRate = 50_000
	// maxWhereP99: a where= query over a store of 10 million events whose
	// filter matches 1% (issue 15).
	maxWhereP99 = 200 * time.Millisecond
)

const cpuTargetName = "server CPU per durable event / no-op CPU per request"

// fsyncNoop names the durability floor's ceiling (bench.FsyncNoopServer).
const fsyncNoop = "fsync noop"

// fsyncFloorNote says what the durability floor reached in sc against the
// no-op, in rate and CPU, and how much of it eventd reached: the floor is
// the least any server that syncs before its 201 does, so the single
// targets cannot be passed beyond it on the machine that ran the bench.
func fsyncFloorNote(sc *bench.ScenarioResult) {
	f, noop := ceilingNamed(sc, fsyncNoop), ceilingNamed(sc, "noop")
	if f == nil || noop == nil {
		return
	}
	cpu := "CPU not measured"
	if r, fc, _, ok := bench.CPURatio(f, noop); ok {
		cpu = fmt.Sprintf("%s CPU a request, %.2fx the no-op's", bench.FormatDuration(fc), r)
	}
	sc.Note("%s (the no-op answering each POST only once its body is fdatasynced, syncs grouped: the least a server that syncs before its 201 does): %.2f of the no-op, %s; eventd reaches %.0f%% of its rate",
		fsyncNoop, bench.Ratio(f, noop), cpu, 100*bench.Ratio(sc.Eventd, f))
}

// ceilingNamed is a scenario's ceiling of that name, or nil.
func ceilingNamed(sc *bench.ScenarioResult, name string) *bench.Series {
	for _, c := range sc.Ceilings {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// cpuTarget checks eventd's CPU per durable event against the no-op's per
// request. Without both CPU readings (--target, --noop-inproc) it says so
// in a note rather than calling the target met or missed.
func cpuTarget(sc *bench.ScenarioResult) {
	r, ev, np, ok := bench.CPURatio(sc.Eventd, ceilingNamed(sc, "noop"))
	if !ok {
		sc.Note("%s: not measured (needs the CPU time of both eventd and the no-op child: not with --target or --noop-inproc)", cpuTargetName)
		return
	}
	sc.Check(cpuTargetName, fmt.Sprintf("≤ %.1fx", maxCPURatio),
		fmt.Sprintf("%.2fx (%s vs %s)", r, bench.FormatDuration(ev), bench.FormatDuration(np)), r <= maxCPURatio)
}

// mixedTarget checks that reads cost ingest little: mixed's ratio to the
// no-op is at least 0.8 of single's in the same run. single may be nil.
func mixedTarget(mixed, single *bench.ScenarioResult) {
	const name = "mixed vs the no-op, over single's ratio in the same run"
	goal := fmt.Sprintf("≥ %.2f", minMixedOverSingle)
	if single == nil {
		sc := mixed
		sc.Note("%s (%s): not checked, the single scenario did not run in this phase", name, goal)
		return
	}
	m := bench.Ratio(mixed.Eventd, ceilingNamed(mixed, "noop"))
	s := bench.Ratio(single.Eventd, ceilingNamed(single, "noop"))
	if s == 0 {
		mixed.Note("%s (%s): not checked, single has no ratio to the no-op", name, goal)
		return
	}
	r := m / s
	mixed.Check(name, goal, fmt.Sprintf("%.2f (mixed %.2f / single %.2f)", r, m, s), r >= minMixedOverSingle)
}

// crossTargets adds the targets that compare scenarios, once all of them
// have run: each mixed result against the single result of its phase.
func crossTargets(results []*bench.ScenarioResult) {
	for _, sc := range results {
		if sc.Base != "mixed" {
			continue
		}
		var single *bench.ScenarioResult
		for _, o := range results {
			if o.Base == "single" && o.Phase == sc.Phase {
				single = o
			}
		}
		mixedTarget(sc, single)
	}
}
