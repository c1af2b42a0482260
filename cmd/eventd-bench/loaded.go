package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eventd/eventd/bench"
)

// loadedScenarios are the closed-loop ingest scenarios that run a second
// time on stores that have taken --loaded-events more events (issue 12:
// the targets must hold at steady state, not only on a fresh store).
var loadedScenarios = []string{"single", "batch", "enterprise", "mixed"}

// loadBatch is the loader's batch size and loadConns its connections (and
// the Pebble ceiling's committers while it is filled).
const (
	loadBatch = 100
	loadConns = 16
)

// loadEvents stores total events through POST /events/batch of 100 under
// key, timestamps spread evenly over [from, to), 50,000 visitors: the one
// loader of the analytics scenario and of the loaded phase. It fails when
// fewer than 99% were stored.
func loadEvents(ctx context.Context, e *env, prog *progress, key string, total uint64, from, to time.Time, label string) (*bench.Result, error) {
	loader := httpSubject(e, "loading", e.target, false, bench.UnitEvents, bench.Config{
		Mode: bench.ClosedLoop, Conns: e.conns(loadConns), MaxRequests: (total + loadBatch - 1) / loadBatch,
		Request:          bench.BackfillRequest("/events/batch", key, loadBatch, total, from, to, 50_000),
		EventsPerRequest: loadBatch, Accepted: bench.BatchAccepted})
	// The loader is bounded by count; the duration only bounds a stuck run.
	run := loader.run
	loader.run = func(ctx context.Context, _ time.Duration, p *progress) (*bench.Result, error) {
		return run(ctx, 6*time.Hour, p)
	}
	res, err := measure(ctx, e, prog, loader, time.Duration(float64(total)/100_000*float64(time.Second)), label)
	if err != nil {
		return nil, err
	}
	if res.Events < total*99/100 {
		return nil, fmt.Errorf("%s stored %d of %d events: %s", label, res.Events, total, bench.Breakdown(res))
	}
	return res, nil
}

// loadHow describes loadEvents for the report.
func loadHow(e *env) string {
	return fmt.Sprintf("POST /events/batch of %d, %d connections, timestamps over the last 30 days", loadBatch, e.conns(loadConns))
}

// fillPebble commits n records of eventd's shape into the Pebble ceiling's
// store, in Sync batches of 100 by 16 committers as the batch scenario does.
func fillPebble(ctx context.Context, e *env, prog *progress, n uint64) (*bench.Result, error) {
	s := subject{name: "pebble", unit: bench.UnitEvents, eventsPer: loadBatch, ceiling: "pebble",
		run: func(ctx context.Context, _ time.Duration, p *progress) (*bench.Result, error) {
			done0, ok0 := e.pebble.Progress()
			p.source(func() (uint64, uint64) {
				d, o := e.pebble.Progress()
				return d - done0, o - ok0
			})
			return e.pebble.Run(ctx, bench.PebbleRun{Committers: loadConns, EventsPerCommit: loadBatch, MaxEvents: n})
		}}
	return measure(ctx, e, prog, s, time.Duration(float64(n)/300_000*float64(time.Second)), "loading pebble")
}

// runLoaded is the loaded phase: it loads the Pebble ceiling's store and
// then eventd's with o.loadedEvents more events each, then runs again every
// fresh result's scenario that is in loadedScenarios. finish is called on
// each loaded result (memory figures). It returns nil when there is
// nothing to do.
//
// eventd is not given time to compact after its load: the compaction debt
// a store carries while it keeps taking writes is the steady state being
// measured: its rounds start right after its load. The Pebble ceiling runs
// inside this process, so after its own load (which comes first) it is
// compacted down, lest its compactions slow down eventd's rounds, and lest
// it carry a debt that it never pays in its own rounds (see
// bench.PebbleBaseline.Compact); after each of its rounds its flushes and
// compactions are waited for, as in the fresh phase.
func runLoaded(ctx context.Context, e *env, prog *progress, fresh []*bench.ScenarioResult,
	finish func(*bench.ScenarioResult)) ([]*bench.ScenarioResult, *bench.LoadedPhase, error) {
	n := e.o.loadedEvents
	var todo []*bench.ScenarioResult
	for _, sc := range fresh {
		if slices.Contains(loadedScenarios, sc.Base) {
			todo = append(todo, sc)
		}
	}
	if n == 0 || len(todo) == 0 {
		return nil, nil, nil
	}
	phase := &bench.LoadedPhase{Events: n}
	prog.note("loaded phase: %s more events into eventd and into the Pebble ceiling, then %d scenarios again", groupInt(n), len(todo))

	// The ceiling first: it is compacted before eventd's load, so that its
	// compactions neither run inside eventd's rounds nor give eventd idle
	// time to pay off its own debt before they start.
	pres, err := fillPebble(ctx, e, prog, n)
	if err != nil {
		return nil, nil, err
	}
	took, err := e.pebble.Compact(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("compacting the pebble ceiling: %w", err)
	}
	pl := bench.StoreLoad{Subject: "pebble", Events: pres.Events, ElapsedS: pres.Elapsed.Seconds(), Rate: pres.EventsPerSec(),
		How: fmt.Sprintf("raw Sync commits of %d by %d committers", loadBatch, loadConns), CompactS: took.Seconds(), State: e.pebble.State()}

	end := time.Now().UTC()
	res, err := loadEvents(ctx, e, prog, e.key, n, end.Add(-30*24*time.Hour), end.Add(-time.Minute), "loading eventd")
	if err != nil {
		return nil, nil, err
	}
	var st bench.StoreState
	if e.dataDir != "" {
		st.DiskBytes = bench.DirSize(e.dataDir)
	}
	phase.Loads = append(phase.Loads, pl, bench.StoreLoad{Subject: "eventd", Events: res.Events, ElapsedS: res.Elapsed.Seconds(),
		Rate: res.EventsPerSec(), How: loadHow(e), State: st})
	for _, l := range phase.Loads {
		prog.note("%s: %s events in %.1f s; %s", l.Subject, groupInt(l.Events), l.ElapsedS, l.State)
	}

	var out []*bench.ScenarioResult
	for _, f := range todo {
		sc, skipped, err := runScenario(ctx, e, prog, f.Base, bench.PhaseLoaded)
		if err != nil {
			return nil, nil, err
		}
		if skipped != "" {
			continue // skipped fresh too, so not in todo; kept for safety
		}
		row := bench.CompareLoaded(f, sc)
		phase.Rows = append(phase.Rows, row)
		sc.Note("loaded / fresh: %.2f (%s vs %s); p99 %s vs %s fresh", row.LoadedOverFresh,
			bench.FormatRate(row.Loaded, row.Unit), bench.FormatRate(row.Fresh, row.Unit),
			bench.FormatDuration(time.Duration(row.LoadedP99Us*1e3)), bench.FormatDuration(time.Duration(row.FreshP99Us*1e3)))
		if finish != nil {
			finish(sc)
		}
		out = append(out, sc)
	}
	if e.srv != nil {
		r, err := measureRestart(ctx, e, prog)
		if err != nil {
			return nil, nil, fmt.Errorf("restart after kill -9: %w", err)
		}
		phase.Restart = r
	}
	return out, phase, nil
}

// interleave puts each loaded result right after its fresh one, so the
// table shows them on neighbouring rows.
func interleave(fresh, loaded []*bench.ScenarioResult) []*bench.ScenarioResult {
	out := make([]*bench.ScenarioResult, 0, len(fresh)+len(loaded))
	for _, f := range fresh {
		out = append(out, f)
		for _, l := range loaded {
			if l.Base == f.Base {
				out = append(out, l)
			}
		}
	}
	return out
}

// restartBurst is how many events are written right before the kill, so the
// kill lands while the derived overlay holds commits not yet checkpointed.
const restartBurst = 20_000

// measureRestart writes a burst, reads the list total, kills eventd with
// SIGKILL and starts it on the same store, timing the start and reading the
// total again (issue 12: rebuilt in < 5 s, totals exact). It replaces e.srv.
func measureRestart(ctx context.Context, e *env, prog *progress) (*bench.Restart, error) {
	now := time.Now().UTC()
	if _, err := loadEvents(ctx, e, prog, e.key, restartBurst, now.Add(-time.Minute), now, "burst before the kill"); err != nil {
		return nil, err
	}
	before, err := listTotal(ctx, e.target, e.key)
	if err != nil {
		return nil, err
	}
	if e.admin != nil {
		if b, err := e.admin.Get(ctx, "/metrics"); err == nil {
			prog.note("%s", compactionNote(b))
		}
	}
	prog.note("kill -9 eventd with a list total of %s, then start it again", groupInt(uint64(before)))
	srv, took, err := e.srv.KillRestart(ctx, filepath.Join(filepath.Dir(e.srv.LogPath), "eventd-restart.log"))
	if err != nil {
		return nil, err
	}
	e.srv, e.target, e.admin = srv, srv.URL, srv.Admin
	if e.mem != nil {
		e.mem.PID = srv.PID()
	}
	after, err := listTotal(ctx, e.target, e.key)
	if err != nil {
		return nil, err
	}
	r := &bench.Restart{Seconds: took.Seconds(), TotalBefore: before, TotalAfter: after, Replayed: -1, DiskBytes: bench.DirSize(e.dataDir)}
	if m := regexp.MustCompile(`derived log replayed.*commits=(\d+)`).FindStringSubmatch(srv.LogTail(200)); m != nil {
		r.Replayed, _ = strconv.Atoi(m[1])
	}
	// The idempotency filter is rebuilt after the server is healthy; keyed
	// writes wait for it. Its line comes when it is done (bounded wait).
	idem := regexp.MustCompile(`idempotency filter rebuilt in memory.*keys=(\d+) took=(\S+)`)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if m := idem.FindStringSubmatch(srv.LogTail(200)); m != nil {
			r.IdemKeys, _ = strconv.ParseInt(m[1], 10, 64)
			r.IdemTook = m[2]
			break
		}
	}
	return r, nil
}

// listTotal is GET /events' exact total for key.
func listTotal(ctx context.Context, target, key string) (int64, error) {
	n, err := queryTotal(ctx, target, key, "/events?limit=1")
	return int64(n), err
}

// compactionNote says how Pebble's compactions since eventd started went,
// from its /metrics: moves leave a table whole, default compactions merge
// and rewrite (docs/decisions.md, "Flushed tables moved down whole").
func compactionNote(metrics []byte) string {
	kinds := map[string]float64{}
	var total float64
	for labels, v := range bench.ParseMetrics(metrics, "eventd_pebble_compactions_total") {
		kinds[strings.TrimSuffix(strings.TrimPrefix(labels, `{kind="`), `"}`)] = v
		total += v
	}
	if total == 0 {
		return "Pebble's compactions since eventd started: none reported"
	}
	return fmt.Sprintf("Pebble's compactions since eventd started: %.0f, of which %.0f moves and %.0f merges (default); %.0f of other kinds",
		total, kinds["move"], kinds["default"], total-kinds["move"]-kinds["default"])
}
