package main

import (
	"context"
	"fmt"
	"time"

	"github.com/eventd/eventd/bench"
)

// The cursors scenario (issue 16): named cursors on /stream, the durable
// tail. Three subjects:
//
//   - eventd + N cursors: N consumers, each on its own named cursor of one
//     dataset, acknowledging as client.Tail does (every half window, or
//     100 ms after the last ack), while POST /events runs open loop at
//     --cursor-rate. Delivery latency is receive time minus the send time
//     stamped into each event (properties.sent_ns, as the stream scenario
//     does): it holds the ingest request's way to the commit, so it is an
//     upper bound of commit -> receipt. The consumers run in a child
//     process, so their CPU is not booked as the server's.
//   - the same open loop without cursors: the ingest ratio and, since an
//     open loop at a rate the server sustains gives ~1.0, server CPU per
//     event with and without the cursors.
//   - catch-up: a cursor created at the head with no consumer (the admin
//     reset), --cursor-backlog events committed (outside the measured time),
//     then one consumer connects and drains them.
//
// Every run gets a project of its own, so the cursors of one run start at
// the head of a dataset nobody else writes to, and no dataset reaches the
// limit of 1,000 cursors whatever --rounds is.

// cursorsProject creates a project and a live secret key for one run.
func cursorsProject(ctx context.Context, e *env, name string) (projectID, key string, err error) {
	p, err := e.admin.CreateProject(ctx, name, "enterprise", &bench.BenchLimits)
	if err != nil {
		return "", "", err
	}
	key, err = e.admin.CreateKey(ctx, p.ID, name)
	return p.ID, key, err
}

// catchUpResult books a catch-up drain as a run: the events the consumer
// received over the time from its dial to the last one (so the rate is
// events/s of catch-up), one "request" that succeeded only if all want
// arrived, and the drain time as its latency.
func catchUpResult(sr *bench.StreamResult, want uint64) *bench.Result {
	r := &bench.Result{Mode: bench.ClosedLoop, Conns: 1, Requests: 1, Events: sr.Delivered, Elapsed: sr.Elapsed,
		Statuses: map[int]uint64{}, FailedStatuses: map[int]uint64{}, Errors: map[string]uint64{}, Stream: sr}
	sr.Expected = want
	if sr.Delivered >= want && want > 0 {
		r.OK = 1
	} else {
		r.Errors["backlog not drained"] = 1
	}
	r.Latency.Record(sr.Elapsed)
	r.Service.Record(sr.Elapsed)
	return r
}

// cpuPerEvent is a series' server CPU per ingested event; ok is false when
// the server's CPU was not read or nothing was stored.
func cpuPerEvent(s *bench.Series) (time.Duration, bool) {
	t := s.Total()
	if !t.HasServerCPU || t.OK == 0 {
		return 0, false
	}
	return t.ServerCPU / time.Duration(t.OK), true
}

// buildCursors is scenario 6b: cursors live, without, and catching up.
func buildCursors(e *env) *plan {
	o := e.o
	n := o.cursors
	rate := o.cursorRate
	// live measures the open loop with cursors consumers (0: none). Its
	// project, key and cursors are made in prepare, outside the measured
	// time and CPU; the consumers connect inside it, as the stream
	// scenario's subscribers do.
	live := func(cursors int) subject {
		var key string
		s := subject{unit: bench.UnitRequests, eventsPer: 1, server: true}
		s.prepare = func(ctx context.Context, _ *progress) error {
			pid, k, err := cursorsProject(ctx, e, fmt.Sprintf("cursors-%d", e.seqBase()))
			if err != nil {
				return err
			}
			key = k
			// Created at the head before anyone connects: a cursor made by
			// its first connection starts where the server opens it, after
			// the 101 the client waits for, so the first events of the run
			// could fall before it and never be its to deliver.
			for i := range cursors {
				if err := e.admin.ResetCursor(ctx, pid, bench.CursorName("live", i), "head"); err != nil {
					return err
				}
			}
			return nil
		}
		s.run = func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
			return runFanOut(ctx, p, bench.StreamOptions{Target: e.target, Key: key, Subscribers: cursors,
				Cursor: "live", AckWindow: o.cursorAckWindow, Reconnect: true},
				bench.Config{Target: e.target, Mode: bench.OpenLoop, Rate: rate, Conns: o.openConns, Duration: d,
					Timeout: o.timeout, SeqBase: e.seqBase(), Request: bench.StreamEventRequest("/events", key)},
				2*time.Second, 10*time.Second)
		}
		return s
	}

	// The catch-up's state, set by prepare for the run that follows.
	var cuKey, cuCursor string
	want := uint64(o.cursorBacklog)
	catchUp := subject{name: fmt.Sprintf("catch-up of %s events, 1 cursor", groupInt(want)), unit: bench.UnitEvents, eventsPer: 1,
		server: true, noWarmup: true,
		prepare: func(ctx context.Context, p *progress) error {
			run := e.seqBase()
			pid, key, err := cursorsProject(ctx, e, fmt.Sprintf("catchup-%d", run))
			if err != nil {
				return err
			}
			// A cursor at the head with no consumer: what a consumer that
			// acknowledged everything and then went away leaves behind.
			cuKey, cuCursor = key, "sink"
			if err := e.admin.ResetCursor(ctx, pid, bench.CursorName(cuCursor, 0), "head"); err != nil {
				return err
			}
			return loadBacklog(ctx, e, p, key, want)
		},
		run: func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
			subs, err := startSubscribers(ctx, bench.StreamOptions{Target: e.target, Key: cuKey, Subscribers: 1,
				Cursor: cuCursor, AckWindow: o.cursorAckWindow, KeepStart: true})
			if err != nil {
				return nil, err
			}
			p.source(func() (uint64, uint64) { d := subs.Delivered(); return d, d })
			subs.Mark()
			// Bounded: a drain slower than want/60 s is cut and reported.
			subs.WaitDrained(ctx, want, 3*time.Second, time.Minute)
			return catchUpResult(subs.Stop(), want), nil
		}}

	with, without := live(n), live(0)
	with.name = fmt.Sprintf("eventd + %d cursors at %s", n, bench.FormatRate(rate, "ev/s"))
	without.name = "eventd, no cursors"
	return &plan{
		needsAdmin: true,
		eventd:     with,
		ceilings:   []subject{without},
		others:     []subject{catchUp},
		judge: func(sc *bench.ScenarioResult) {
			cursorTargets(sc, n, rate, o.cursorAckWindow)
		},
	}
}

// loadBacklog commits n events under key, as fast as batches of 100 go,
// for a catch-up to drain; it fails when fewer than all were stored.
func loadBacklog(ctx context.Context, e *env, prog *progress, key string, n uint64) error {
	loader := httpSubject(e, "backlog", e.target, false, bench.UnitEvents, bench.Config{
		Mode: bench.ClosedLoop, Conns: e.conns(loadConns), MaxRequests: (n + loadBatch - 1) / loadBatch,
		Request: bench.BatchRequest("/events/batch", key, e.tmpl, loadBatch), EventsPerRequest: loadBatch, Accepted: bench.BatchAccepted})
	run := loader.run
	loader.run = func(ctx context.Context, _ time.Duration, p *progress) (*bench.Result, error) {
		return run(ctx, 10*time.Minute, p) // bounded by count; the duration only bounds a stuck run
	}
	res, err := measure(ctx, e, prog, loader, time.Duration(float64(n)/100_000*float64(time.Second)), "cursors backlog")
	if err != nil {
		return err
	}
	if res.Events < n {
		return fmt.Errorf("backlog: stored %d of %d events: %s", res.Events, n, bench.Breakdown(res))
	}
	return nil
}

// cursorTargets checks issue 16's targets on a cursors result (eventd =
// with cursors, ceiling 0 = without, others 0 = the catch-up) and notes the
// figures behind them.
func cursorTargets(sc *bench.ScenarioResult, n int, rate float64, window int) {
	if len(sc.Ceilings) == 0 {
		return
	}
	at := bench.FormatRate(rate, "events/s")
	r := bench.Ratio(sc.Eventd, sc.Ceilings[0])
	sc.Check(fmt.Sprintf("ingest with %d cursors vs without, open loop at %s", n, at), fmt.Sprintf("≥ %.2f", minCursorIngestRatio),
		fmtRatio(r), r >= minCursorIngestRatio)
	with, without := sc.Eventd.Total(), sc.Ceilings[0].Total()
	if cw, okw := cpuPerEvent(sc.Eventd); okw {
		if co, oko := cpuPerEvent(sc.Ceilings[0]); oko && cw > 0 {
			subsText := "consumers' CPU not measured apart"
			if st := with.Stream; st != nil && st.HasClientCPU && st.Delivered > 0 {
				subsText = fmt.Sprintf("the consumers (own process) %.2f cores, %s per message",
					bench.CPUCores(st.ClientCPU, with.Elapsed), bench.FormatDuration(st.ClientCPU/time.Duration(st.Delivered)))
			}
			// At a fixed rate the ratio of rates says little; CPU per event
			// says what the cursors cost, and without/with is the share of
			// its no-cursor capacity eventd would keep if CPU bound it.
			sc.Note("server CPU per ingested event: %s with %d cursors, %s without (without/with %.2f: the capacity left if CPU bounds ingest); %s",
				bench.FormatDuration(cw), n, bench.FormatDuration(co), float64(co)/float64(cw), subsText)
		}
	}
	if st := with.Stream; st != nil {
		p99 := st.Latency.Percentile(99)
		sc.Check("cursor delivery p99 at "+at, fmt.Sprintf("< %s", bench.FormatDuration(maxCursorDeliveryP99)),
			bench.FormatDuration(p99), p99 < maxCursorDeliveryP99 && st.Delivered > 0)
		share := 0.0
		if st.Expected > 0 {
			share = 100 * float64(st.Delivered) / float64(st.Expected)
		}
		sc.Check("every event reaches every cursor", "100%", fmt.Sprintf("%.2f%% (%d of %d messages)", share, st.Delivered, st.Expected),
			st.Expected > 0 && st.Delivered >= st.Expected)
		sc.Note("delivery (receive time - send time stamped in the event, so the ingest request's way to the commit is in it): p50 %s p99 %s p99.9 %s; from created_at (ms grain) p50 %s p99 %s; ingest p99 from the intended send time %s (without cursors %s)",
			bench.FormatDuration(st.Latency.Percentile(50)), bench.FormatDuration(p99), bench.FormatDuration(st.Latency.Percentile(99.9)),
			bench.FormatDuration(st.CreatedLatency.Percentile(50)), bench.FormatDuration(st.CreatedLatency.Percentile(99)),
			bench.FormatDuration(with.Latency.Percentile(99)), bench.FormatDuration(without.Latency.Percentile(99)))
		sc.Note("consumers: ack_window %s, an ack every %d events or 100 ms (as client.Tail); %d acks sent, %d refused; %s",
			windowText(window), bench.AckEvery(window), st.Acks, st.AckErrors, closesText(st))
	}
	if len(sc.Others) == 0 {
		return
	}
	cu := sc.Others[0]
	rateCU := cu.Rate()
	t := cu.Total()
	got := bench.FormatRate(rateCU, bench.UnitEvents)
	drained := t.OK == t.Requests && t.Requests > 0
	if !drained {
		got += " (backlog not drained in time)"
	}
	sc.Check("catch-up of a reconnected cursor", fmt.Sprintf("≥ %s", bench.FormatRate(minCatchUpRate, bench.UnitEvents)), got,
		drained && rateCU >= minCatchUpRate)
	if st := t.Stream; st != nil {
		sc.Note("catch-up: %d of %d backlog events in %s over %d runs (from the dial to the last event; ack_window %s, %d acks)",
			st.Delivered, st.Expected, st.Elapsed.Round(time.Millisecond), len(cu.Rounds), windowText(window), st.Acks)
	}
}

func windowText(w int) string {
	if w <= 0 {
		return "1000 (the server's default)"
	}
	return fmt.Sprint(w)
}
