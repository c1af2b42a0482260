package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShortCountAndLoadedName(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "0"},
		{999, "999"},
		{1000, "1k"},
		{20_000, "20k"},
		{1_234, "1,234"},
		{1_500, "1.5k"},
		{5_000_000, "5M"},
		{2_500_000, "2.5M"},
		{10_000_000, "10M"},
		{5_000_001, "5,000,001"},
		{2_000_000_000, "2G"},
	}
	for _, tc := range tests {
		if got := ShortCount(tc.n); got != tc.want {
			t.Errorf("ShortCount(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := LoadedName("single", 5_000_000); got != "single (loaded 5M)" {
		t.Errorf("LoadedName = %q", got)
	}
}

// cpuRound is one round with the given successes, events and server CPU.
func cpuRound(ok, events uint64, cpu time.Duration, has bool) *Result {
	return &Result{Requests: ok, OK: ok, Events: events, Elapsed: time.Second, Expect: 201,
		Statuses: map[int]uint64{201: ok}, ServerCPU: cpu, HasServerCPU: has}
}

func TestCPUPerAndRatio(t *testing.T) {
	series := func(unit string, rounds ...*Result) *Series {
		return &Series{Name: "x", Unit: unit, Rounds: rounds}
	}
	tests := []struct {
		name      string
		eventd    *Series
		noop      *Series
		wantOK    bool
		wantRatio float64
		wantEv    time.Duration
	}{
		{"issue 12's example: 4.1x",
			series(UnitRequests, cpuRound(1000, 1000, 42600*time.Microsecond, true)),
			series(UnitRequests, cpuRound(1000, 0, 10300*time.Microsecond, true)), true, 42.6 / 10.3, 42600 * time.Nanosecond},
		{"rounds are summed",
			series(UnitRequests, cpuRound(500, 500, 10*time.Millisecond, true), cpuRound(500, 500, 15*time.Millisecond, true)),
			series(UnitRequests, cpuRound(1000, 0, 10*time.Millisecond, true)), true, 2.5, 25 * time.Microsecond},
		{"events unit: per event, not per request",
			series(UnitEvents, cpuRound(10, 1000, 20*time.Millisecond, true)),
			series(UnitRequests, cpuRound(1000, 0, 10*time.Millisecond, true)), true, 2, 20 * time.Microsecond},
		{"no-op CPU unknown (in-process)",
			series(UnitRequests, cpuRound(1000, 1000, 10*time.Millisecond, true)),
			series(UnitRequests, cpuRound(1000, 0, 0, false)), false, 0, 10 * time.Microsecond},
		{"eventd CPU unknown (--target)",
			series(UnitRequests, cpuRound(1000, 1000, 0, false)),
			series(UnitRequests, cpuRound(1000, 0, time.Millisecond, true)), false, 0, 0},
		{"nothing succeeded",
			series(UnitRequests, cpuRound(0, 0, time.Millisecond, true)),
			series(UnitRequests, cpuRound(1000, 0, time.Millisecond, true)), false, 0, 0},
		{"no ceiling", series(UnitRequests, cpuRound(1000, 1000, time.Millisecond, true)), nil, false, 0, time.Microsecond},
	}
	for _, tc := range tests {
		r, ev, _, ok := CPURatio(tc.eventd, tc.noop)
		if ok != tc.wantOK || ev != tc.wantEv || (ok && (r < tc.wantRatio-1e-9 || r > tc.wantRatio+1e-9)) {
			t.Errorf("%s: ratio %v ev %v ok %v, want %v %v %v", tc.name, r, ev, ok, tc.wantRatio, tc.wantEv, tc.wantOK)
		}
	}
}

func TestCompareLoadedAndTable(t *testing.T) {
	mk := func(name string, eventdOK, noopOK uint64, p99 time.Duration) *ScenarioResult {
		e := &Series{Name: "eventd", Unit: UnitRequests}
		r := cpuRound(eventdOK, eventdOK, 0, false)
		r.Latency.Record(p99)
		e.Add(r)
		n := &Series{Name: "noop", Unit: UnitRequests}
		n.Add(cpuRound(noopOK, 0, 0, false))
		return &ScenarioResult{Name: name, Base: "single", Eventd: e, Ceilings: []*Series{n}}
	}
	fresh := mk("single", 20_000, 40_000, 2*time.Millisecond)
	loaded := mk("single (loaded 5M)", 15_000, 40_000, 4*time.Millisecond)
	row := CompareLoaded(fresh, loaded)
	if row.Scenario != "single" || row.Unit != UnitRequests || row.Fresh != 20_000 || row.Loaded != 15_000 ||
		row.LoadedOverFresh != 0.75 || row.Ceiling != "noop" || row.FreshRatio != 0.5 || row.LoadedRatio != 0.375 {
		t.Errorf("row %+v", row)
	}
	if row.FreshP99Us < 1980 || row.FreshP99Us > 2020 || row.LoadedP99Us < 3960 || row.LoadedP99Us > 4040 {
		t.Errorf("p99s %v %v", row.FreshP99Us, row.LoadedP99Us)
	}
	var b strings.Builder
	WriteLoadedTable(&b, &LoadedPhase{Events: 5_000_000, Rows: []LoadedRow{row}, Loads: []StoreLoad{
		{Subject: "eventd", Events: 5_000_000, ElapsedS: 40, Rate: 125_000, How: "batches", State: StoreState{DiskBytes: 3 << 30}},
		{Subject: "pebble", Events: 5_000_000, ElapsedS: 20, Rate: 250_000, How: "raw", CompactS: 4.5,
			State: StoreState{DiskBytes: 2 << 30, HasLSM: true, L0Tables: 7, L0Sublevels: 3, Compactions: 1, CompactionDebt: 100 << 20}},
	}})
	out := b.String()
	for _, want := range []string{
		"each store took 5,000,000 more events",
		"eventd: 5,000,000 events in 40.0 s (125,000 events/s, batches); then 3.0 GiB on disk",
		"then 4.5 s to compact it; then 2.0 GiB on disk, L0 7 tables in 3 sublevels, 1 compactions running, compaction debt 100.0 MiB",
		"loaded/fresh", "ratio fresh", "p99 loaded",
		"20,000 req/s", "15,000 req/s", "0.75", "noop", "0.50", "0.38",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if lines := strings.Split(out, "\n"); !strings.HasPrefix(lines[len(lines)-2], "  single ") {
		t.Errorf("row should start with the scenario name, left-aligned:\n%s", out)
	}
	b.Reset()
	WriteLoadedTable(&b, nil)
	if b.Len() != 0 {
		t.Errorf("no phase printed %q", b.String())
	}
}

func TestStoreStateAndDirSize(t *testing.T) {
	if got := (StoreState{}).String(); !strings.Contains(got, "unknown") {
		t.Errorf("empty state %q", got)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"a": 100, "sub/b": 23} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := DirSize(dir); got != 123 {
		t.Errorf("DirSize = %d, want 123", got)
	}
	if got := DirSize(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("DirSize(missing) = %d", got)
	}
}

// TestPebbleFillAndState fills the ceiling by count, as the loaded phase
// does (a tiny N), and reads its state.
func TestPebbleFillAndState(t *testing.T) {
	b := openTestBaseline(t)
	res, err := b.Run(context.Background(), PebbleRun{Committers: 4, EventsPerCommit: 100, MaxEvents: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != 2000 {
		t.Errorf("filled %d events, want 2000", res.Events)
	}
	st := b.State()
	if !st.HasLSM || st.DiskBytes <= 0 || !strings.Contains(st.String(), "L0") {
		t.Errorf("state %+v", st)
	}
}

// TestPebbleCompact: after Compact the ceiling's records are all below L0
// and it owes no compaction, so its loaded rounds start with nothing
// deferred.
func TestPebbleCompact(t *testing.T) {
	b := openTestBaseline(t)
	for range 2 { // two flushed tables in L0
		if _, err := b.Run(context.Background(), PebbleRun{Committers: 2, EventsPerCommit: 100, MaxEvents: 2000}); err != nil {
			t.Fatal(err)
		}
		if err := b.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.State(); st.L0Tables == 0 {
		t.Fatalf("state before Compact: %s; want tables in L0", st)
	}
	if _, err := b.Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := b.State()
	if st.L0Tables != 0 || st.CompactionDebt != 0 || st.DiskBytes <= 0 {
		t.Errorf("state after Compact: %s", st)
	}
}

func TestWriteRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Restart
		want string
	}{
		{"met", Restart{Seconds: 1.25, TotalBefore: 5_020_000, TotalAfter: 5_020_000, Replayed: 12, DiskBytes: 1 << 30},
			"met    healthy 1.25 s after exec (goal < 5s), list total 5,020,000 before the kill and 5,020,000 after (exact); 12 commits replayed"},
		{"slow", Restart{Seconds: 6, TotalBefore: 10, TotalAfter: 10, Replayed: 0},
			"MISSED healthy 6.00 s after exec"},
		{"inexact", Restart{Seconds: 1, TotalBefore: 10, TotalAfter: 9, Replayed: -1},
			"MISSED healthy 1.00 s after exec (goal < 5s), list total 10 before the kill and 9 after (NOT exact)"},
		{"keys", Restart{Seconds: 3, TotalBefore: 10, TotalAfter: 10, Replayed: 2, IdemKeys: 4_500_000, IdemTook: "2.1s"},
			"2 commits replayed from the derived log; idempotency filter: 4,500,000 keys rebuilt in 2.1s (keyed writes wait for it)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			WriteRestart(&b, &tc.r)
			if !strings.Contains(b.String(), tc.want) {
				t.Errorf("got %q, want it to contain %q", b.String(), tc.want)
			}
		})
	}
	var b strings.Builder
	WriteRestart(&b, nil)
	if b.Len() != 0 {
		t.Errorf("nil restart printed %q", b.String())
	}
}
