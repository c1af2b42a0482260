package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/bench"
)

// The where scenario (issue 15): property filters over raw events. A
// filtered query reads every event of its range (of the name index with
// event=), one record at a time, so its cost is the number of events in
// the range, not the size of the store: GET /events reads at most 200,000
// and analytics 1,000,000, else 422 (engine.MaxListScan, MaxScanEvents).
// The "10 million events" matters through how many events a user's
// range holds, so the scenario loads --where-events into a dataset of its
// own at the density of 10 million a month (2 million: the last 6 days),
// and asks what a user would: the matching events of the last hour, a
// chart of one event's matches over a day, a chart of every event's
// matches over half a day. The filter, amount <= 2, matches 1% of every
// event by construction of the loader (amount = 1 + k mod 200).

// whereMonth is the store: 10 million events over 30 days.
const (
	whereMonthEvents = 10_000_000
	whereMonth       = 30 * 24 * time.Hour
	// whereFilter matches 1% of bench.BackfillRequest's events.
	whereFilter = "amount:lte:2"
	// whereShare is the share of events whereFilter matches.
	whereShare = 0.01
	// whereKeys spreads the analytics bucket's 50 queries a minute per key.
	whereKeys = 64
	// whereMinEvents covers the longest query's day, and a bit, at that density.
	whereMinEvents = 400_000
)

// whereSpan is the time n events cover at the density of 10 million a
// month, so that a query's range holds what it would in the store.
func whereSpan(n uint64) time.Duration {
	return time.Duration(float64(whereMonth) * float64(n) / whereMonthEvents)
}

// whereQuery is one class of filtered query.
type whereQuery struct {
	name  string
	path  string        // the route and its fixed parameters
	rng   time.Duration // from = end - rng, to = end
	share float64       // the share of all events the range's index holds (event= narrows it)
}

// whereQueries are the four classes, from a few thousand events read to
// the list's 200,000 cap (sizes at the 10-million-a-month density).
var whereQueries = []whereQuery{
	// A user looking at the newest matching events: ~13,900 read.
	{"list, last hour", "/events?limit=20", time.Hour, 1},
	// A chart of one event's matches (signup is an eighth of the events): ~41,700 read.
	{"timeseries signup by hour, 24 h", "/analytics?type=timeseries&interval=hour&event=signup", 24 * time.Hour, 1.0 / 8},
	// A chart of every event's matches: ~167,000 read.
	{"timeseries all by hour, 12 h", "/analytics?type=timeseries&interval=hour", 12 * time.Hour, 1},
	// The newest matches of half a day, a page of a dashboard's filtered
	// list: ~167,000 read, the most a list may (200,000).
	{"list, 12 h", "/events?limit=20", 12 * time.Hour, 1},
}

// whereRateLimit is the open-loop rate at which the queries of qs in
// turn, those of /analytics in the analytics bucket, stay at 40 a minute
// per key over whereKeys keys: below its 50.
func whereRateLimit(qs []whereQuery) float64 {
	perKey := 40.0 / 60 // queries a second one key may make, with a margin
	n := 0
	for _, q := range qs {
		if strings.HasPrefix(q.path, "/analytics") {
			n++
		}
	}
	return float64(whereKeys) * perKey * float64(len(qs)) / float64(n)
}

// whereScanned is about how many events q reads over a dataset of n events
// spread evenly over span (the loader's layout).
func whereScanned(q whereQuery, n uint64, span time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	return float64(n) * min(q.rng.Seconds()/span.Seconds(), 1) * q.share
}

// whereURI is q over [end - rng, end], with or without the filter.
func whereURI(q whereQuery, end time.Time, filtered bool) string {
	const stamp = "2006-01-02T15:04:05.000Z"
	u := q.path + "&from=" + url.QueryEscape(end.Add(-q.rng).UTC().Format(stamp)) + "&to=" + url.QueryEscape(end.UTC().Format(stamp))
	if filtered {
		u += "&where=" + url.QueryEscape(whereFilter)
	}
	return u
}

// buildWhere is scenario 8c: filtered queries against the same unfiltered.
func buildWhere(e *env) *plan {
	o := e.o
	n := uint64(o.whereEvents)
	span := whereSpan(n)
	var end time.Time
	var keys []string
	var setupNotes []string
	request := func(filtered bool, keys *[]string) bench.RequestFunc {
		return func(seq uint64, req *fasthttp.Request) {
			q := whereQueries[seq%uint64(len(whereQueries))]
			req.Header.SetMethod(fasthttp.MethodGet)
			req.SetRequestURI(whereURI(q, end, filtered))
			ks := *keys
			req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+ks[(seq/uint64(len(whereQueries)))%uint64(len(ks))])
		}
	}
	names := make([]string, len(whereQueries))
	for i, q := range whereQueries {
		names[i] = q.name
	}
	class := func(seq uint64) int { return int(seq % uint64(len(whereQueries))) }
	// One connection, back to back: the latency of a query as one user
	// sees it, without queueing behind the others (a 167,000-event scan
	// costs a large share of a core; an open loop at any rate that gives
	// enough samples would measure the queue).
	filteredCfg := bench.Config{Mode: bench.ClosedLoop, Conns: 1, ExpectStatus: fasthttp.StatusOK,
		Classes: names, Class: class, Request: request(true, &keys)}
	// The same queries without the filter are answered from rollups and
	// counters in well under a millisecond: back to back they would run
	// into the analytics bucket (50 a minute per key), so they go at a
	// fixed rate the keys allow.
	plainCfg := filteredCfg
	plainCfg.Request = request(false, &keys)
	plainCfg.Mode, plainCfg.Rate, plainCfg.Conns = bench.OpenLoop, whereRateLimit(whereQueries), 4
	return &plan{
		needsAdmin: true,
		setup: func(ctx context.Context, prog *progress) error {
			p, err := e.admin.CreateProject(ctx, "where", "enterprise", &bench.BenchLimits)
			if err != nil {
				return err
			}
			loaderKey, err := e.admin.CreateKey(ctx, p.ID, "where-loader")
			if err != nil {
				return err
			}
			end = time.Now().UTC()
			res, err := loadEvents(ctx, e, prog, loaderKey, n, end.Add(-span), end.Add(-time.Minute), "where load")
			if err != nil {
				return err
			}
			setupNotes = append(setupNotes, fmt.Sprintf("loaded %s events over the last %s (the density of 10 million a month) in %s (%s, POST /events/batch of %d, %d connections)",
				groupInt(res.Events), span.Round(time.Minute), res.Elapsed.Round(100*time.Millisecond),
				bench.FormatRate(res.EventsPerSec(), bench.UnitEvents), loadBatch, e.conns(loadConns)))
			if e.srv != nil {
				// A month-old store is not in the middle of a bulk load: let
				// the load's flushes and compactions finish, so that they do
				// not share the queries' CPU.
				idle, waited := waitIdle(ctx, e.srv.PID(), idleCores, time.Minute)
				setupNotes = append(setupNotes, fmt.Sprintf("then waited %s for eventd to go idle (below %.2f cores over a second; reached: %v)",
					waited.Round(100*time.Millisecond), idleCores, idle))
			}
			if keys, err = e.admin.CreateKeys(ctx, p.ID, "where", whereKeys); err != nil {
				return err
			}
			// One answer of each class, to say what it read and matched.
			for _, q := range whereQueries {
				matched, err := queryTotal(ctx, e.target, keys[0], whereURI(q, end, true))
				if err != nil {
					return fmt.Errorf("%s: %w", q.name, err)
				}
				scanned := whereScanned(q, n, span)
				setupNotes = append(setupNotes, fmt.Sprintf("%s: reads about %s events, %s matched (%.2f%%)", q.name,
					groupInt(uint64(scanned)), groupInt(uint64(matched)), 100*float64(matched)/max(scanned, 1)))
			}
			return nil
		},
		eventd: httpSubject(e, "eventd, where="+whereFilter, e.target, true, bench.UnitRequests, filteredCfg),
		others: []subject{httpSubject(e, fmt.Sprintf("the same without where=, %s", bench.FormatRate(plainCfg.Rate, "q/s")),
			e.target, true, bench.UnitRequests, plainCfg)},
		judge: func(sc *bench.ScenarioResult) {
			whereTargets(sc, setupNotes)
		},
	}
}

// whereTargets checks the p99 of every filtered class and notes the same
// queries' p99 without the filter.
func whereTargets(sc *bench.ScenarioResult, notes []string) {
	for _, n := range notes {
		sc.Note("%s", n)
	}
	t := sc.Eventd.Total()
	var plain []*bench.ClassResult
	if len(sc.Others) > 0 {
		plain = sc.Others[0].Total().Classes
	}
	for i, c := range t.Classes {
		p99 := c.Latency.Percentile(99)
		sc.Check(c.Name+" p99, where="+whereFilter, fmt.Sprintf("< %s", bench.FormatDuration(maxWhereP99)),
			fmt.Sprintf("%s (%d of %d ok)", bench.FormatDuration(p99), c.OK, c.Requests),
			p99 < maxWhereP99 && c.Requests > 0 && c.OK == c.Requests)
		line := fmt.Sprintf("%s: p50 %s p99 %s p99.9 %s over %d queries", c.Name, bench.FormatDuration(c.Latency.Percentile(50)),
			bench.FormatDuration(p99), bench.FormatDuration(c.Latency.Percentile(99.9)), c.Requests)
		if i < len(plain) {
			line += fmt.Sprintf("; without where= p50 %s p99 %s", bench.FormatDuration(plain[i].Latency.Percentile(50)),
				bench.FormatDuration(plain[i].Latency.Percentile(99)))
		}
		sc.Note("%s", line)
	}
	sc.Note("one connection, queries back to back in turn (closed loop): each query's own time, no queue behind others; with few queries per class p99 is close to the maximum")
}

// queryTotal asks one query with key and returns the total of its answer:
// pagination.total of a list (how many events matched), total of a
// timeseries.
func queryTotal(ctx context.Context, target, key, uri string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", target+uri, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s %s", uri, resp.Status, strings.TrimSpace(string(b)))
	}
	return answerTotal(b)
}

// answerTotal reads the match count of a list ({"pagination":{"total":n}})
// or a timeseries ({"total":n}) answer.
func answerTotal(b []byte) (float64, error) {
	var out struct {
		Total      *float64 `json:"total"`
		Pagination *struct {
			Total float64 `json:"total"`
		} `json:"pagination"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return 0, err
	}
	switch {
	case out.Pagination != nil:
		return out.Pagination.Total, nil
	case out.Total != nil:
		return *out.Total, nil
	}
	return 0, fmt.Errorf("no total in %.200s", b)
}

// waitIdle waits until process pid used less than cores of CPU over a
// second, at most max; it says whether it got there and how long it took.
func waitIdle(ctx context.Context, pid int, cores float64, max time.Duration) (bool, time.Duration) {
	start := time.Now()
	prev, err := bench.ProcCPU(pid)
	if err != nil {
		return false, 0
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := start
	for time.Since(start) < max {
		select {
		case <-ctx.Done():
			return false, time.Since(start)
		case <-t.C:
		}
		cur, err := bench.ProcCPU(pid)
		if err != nil {
			return false, time.Since(start)
		}
		now := time.Now()
		if isIdle(cur-prev, now.Sub(last), cores) {
			return true, now.Sub(start)
		}
		prev, last = cur, now
	}
	return false, time.Since(start)
}

const (
	// idleCores is the CPU below which eventd counts as idle after a load
	// (its flushes and compactions done).
	idleCores = 0.05
	// settleMax bounds a settling subject's wait for an idle eventd.
	settleMax = time.Minute
)

// settleCPU waits for eventd to go idle after a round and returns the CPU
// it used meanwhile: the round's flushes and compactions. ok is false if
// it did not go idle within settleMax or its CPU could not be read.
func settleCPU(ctx context.Context, pid int) (time.Duration, bool) {
	before, err := bench.ProcCPU(pid)
	if err != nil {
		return 0, false
	}
	idle, _ := waitIdle(ctx, pid, idleCores, settleMax)
	after, err := bench.ProcCPU(pid)
	return after - before, idle && err == nil
}

// isIdle says whether cpu used over wall time is below cores.
func isIdle(cpu, wall time.Duration, cores float64) bool {
	return wall > 0 && bench.CPUCores(cpu, wall) < cores
}
