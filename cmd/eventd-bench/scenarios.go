package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/bench"
)

// subject is one thing measured in a round: eventd or a ceiling.
type subject struct {
	name      string
	unit      string
	eventsPer int  // for the progress line's events/s
	server    bool // runs against eventd: profiled with --pprof
	// ceiling names the baseline process whose CPU the run costs: "noop",
	// fsyncNoop or "pebble" (this process); "" is eventd.
	ceiling string
	run     func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error)
	// prepare, when set, runs before each run outside its measured time
	// and CPU (the catch-up's backlog is loaded there).
	prepare func(ctx context.Context, p *progress) error
	// noWarmup skips the subject's warm-up: runs bounded by a count, not
	// by the round's duration, gain nothing from a short one.
	noWarmup bool
	// settle runs each round from an idle eventd: measure waits for the
	// server to go idle before the round and after it, and counts the CPU
	// of the wait after it (Result.SettleCPU). Subjects that write to one
	// eventd in turn would otherwise leave their flushes and compactions in
	// the next one's round.
	settle bool
}

// proc is the process whose CPU time a run of s costs (see bench.CPUMeter).
func (s subject) proc(e *env) int {
	switch s.ceiling {
	case "noop":
		return e.noopPID
	case fsyncNoop:
		return e.fsyncNoopPID
	case "pebble":
		return -1
	}
	if e.srv != nil {
		return e.srv.PID()
	}
	return 0
}

// plan is a scenario made concrete for one bench run.
type plan struct {
	eventd   subject
	ceilings []subject
	// others are more eventd measurements without a ceiling of their own.
	others []subject
	// setup runs once before the warm-up (projects and keys).
	setup func(ctx context.Context, prog *progress) error
	// judge checks the targets and adds the scenario's notes.
	judge       func(sc *bench.ScenarioResult)
	needsAdmin  bool
	needsEventd bool
}

type scenarioDef struct {
	description string
	build       func(e *env) *plan
}

func scenarioNames() []string {
	return []string{"single", "batch", "enterprise", "mixed", "ratelimit", "stream", "cursors", "import", "segment", "where", "analytics"}
}

// defaultScenarios is the short set of make bench (about 3.5 minutes, plus
// 3-4 for the loaded phase of single, batch, enterprise and mixed);
// analytics loads ten million events first, so it runs when asked for.
func defaultScenarios() []string {
	return []string{"single", "batch", "enterprise", "mixed", "ratelimit", "stream", "cursors", "import", "segment", "where"}
}

var scenarioDefs = map[string]scenarioDef{
	"single": {
		description: "POST /events, one ~230-byte event per request, closed loop, 64 connections",
		build:       buildSingle,
	},
	"batch": {
		description: "POST /events/batch of 100 events, closed loop, 16 connections",
		build:       buildBatch,
	},
	"enterprise": {
		description: "enterprise plan rates: 500 keys at 2,000 requests a minute each (16,667 req/s), open loop",
		build:       buildEnterprise,
	},
	"mixed": {
		description: "90% POST /events, 5% GET /events (newest 20), 5% GET /events/{id}, closed loop, 64 connections",
		build:       buildMixed,
	},
	"ratelimit": {
		description: "rate-limit enforcement: 20 fresh keys with a custom limit of 500 a minute, driven far past it, closed loop",
		build:       buildRateLimit,
	},
	"stream": {
		description: "/stream fan-out: 100 WebSocket subscribers on one dataset while POST /events runs at full speed, and at 5,000 events/s",
		build:       buildStream,
	},
	"cursors": {
		description: "/stream named cursors (issue 16): 100 acknowledging cursor consumers on one dataset while POST /events runs at 5,000 events/s (open loop), vs the same load without them; and one cursor catching up on a backlog",
		build:       buildCursors,
	},
	"where": {
		description: "where= property filters (issue 15): GET /events and GET /analytics with a filter matching 1% over a dataset as dense as 10 million events a month, open loop",
		build:       buildWhere,
	},
	"import": {
		description: "POST /admin/v1/projects/{id}/import: NDJSON lines of the single event with idempotency keys, one import of about --duration per round",
		build:       buildImport,
	},
	"segment": {
		description: "POST /v1/batch of 100 Segment track messages as analytics-node sends them, vs POST /events/batch of the same events, closed loop, 16 connections",
		build:       buildSegment,
	},
	"analytics": {
		description: "GET /analytics over a month of data (10 million events): timeseries by day and by hour, breakdown by event; open loop over many keys (50 queries a minute each)",
		build:       buildAnalytics,
	},
}

// httpSubject measures a load run against url with a copy of cfg.
func httpSubject(e *env, name, url string, server bool, unit string, cfg bench.Config) subject {
	per := max(cfg.EventsPerRequest, 1)
	ceiling := ""
	switch url {
	case e.noopURL:
		ceiling = "noop"
	case e.fsyncNoopURL:
		ceiling = fsyncNoop
	}
	return subject{name: name, unit: unit, eventsPer: per, server: server, ceiling: ceiling,
		run: func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
			c := cfg
			c.Target, c.Duration, c.Timeout, c.SeqBase = url, d, e.o.timeout, e.seqBase()
			g, err := bench.NewGenerator(c)
			if err != nil {
				return nil, err
			}
			defer g.Close()
			p.source(g.Progress)
			return g.Run(ctx)
		}}
}

func pebbleSubject(e *env, name string, committers, perCommit int, unit string) subject {
	return subject{name: name, unit: unit, eventsPer: perCommit, ceiling: "pebble",
		run: func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
			done0, ok0 := e.pebble.Progress()
			p.source(func() (uint64, uint64) {
				d, o := e.pebble.Progress()
				return d - done0, o - ok0
			})
			res, err := e.pebble.Run(ctx, bench.PebbleRun{Committers: committers, EventsPerCommit: perCommit, Duration: d})
			// Outside the measured time: let the store's flushes and
			// compactions finish before the next subject runs.
			e.pebble.Quiesce(ctx, 10*time.Second)
			return res, err
		}}
}

func fmtRatio(r float64) string { return fmt.Sprintf("%.2f", r) }

// 1. Single events: the HTTP and storage ceilings.
func buildSingle(e *env) *plan {
	conns := e.conns(64)
	cfg := bench.Config{Mode: bench.ClosedLoop, Conns: conns, Request: bench.EventRequest("/events", e.key, e.tmpl)}
	return &plan{
		eventd: httpSubject(e, "eventd", e.target, true, bench.UnitRequests, cfg),
		ceilings: []subject{
			httpSubject(e, "noop", e.noopURL, false, bench.UnitRequests, cfg),
			pebbleSubject(e, "pebble", conns, 1, bench.UnitRequests),
			httpSubject(e, fsyncNoop, e.fsyncNoopURL, false, bench.UnitRequests, cfg),
		},
		judge: func(sc *bench.ScenarioResult) {
			r := bench.Ratio(sc.Eventd, sc.Ceilings[0])
			sc.Check("single ingest vs the no-op server", fmt.Sprintf("≥ %.2f", minSingleRatio), fmtRatio(r), r >= minSingleRatio)
			cpuTarget(sc)
			p99 := sc.Eventd.Total().Latency.Percentile(99)
			sc.Check(fmt.Sprintf("p99 at %d connections, fsync on", conns), "< 5ms", bench.FormatDuration(p99), p99 < 5*time.Millisecond)
			sc.Note("raw Pebble Sync commits of one event by %d committers: eventd reaches %.0f%% of them", conns, 100*bench.Ratio(sc.Eventd, sc.Ceilings[1]))
			fsyncFloorNote(sc)
		},
	}
}

// 2. Batches of 100: the storage ceiling.
func buildBatch(e *env) *plan {
	conns := e.conns(16)
	n := e.o.batchSize
	cfg := bench.Config{Mode: bench.ClosedLoop, Conns: conns, Request: bench.BatchRequest("/events/batch", e.key, e.tmpl, n),
		EventsPerRequest: n, Accepted: bench.BatchAccepted}
	return &plan{
		eventd:   httpSubject(e, "eventd", e.target, true, bench.UnitEvents, cfg),
		ceilings: []subject{pebbleSubject(e, "pebble", conns, n, bench.UnitEvents)},
		judge: func(sc *bench.ScenarioResult) {
			r := bench.Ratio(sc.Eventd, sc.Ceilings[0])
			sc.Check(fmt.Sprintf("batch of %d vs raw Pebble commits of the same records", n), fmt.Sprintf("≥ %.2f", minBatchRatio), fmtRatio(r), r >= minBatchRatio)
			rate := sc.Eventd.Rate()
			sc.Check("batch ingest (issue 2)", "≥ 500,000 events/s", bench.FormatRate(rate, bench.UnitEvents), rate >= 500_000)
			t := sc.Eventd.Total()
			sc.Note("%s batch requests/s; p99 per batch %s", bench.FormatRate(sc.Eventd.Rate()/float64(n), bench.UnitRequests),
				bench.FormatDuration(t.Latency.Percentile(99)))
		},
	}
}

// 3. Enterprise plan rates: many keys, each at its limit, open loop.
func buildEnterprise(e *env) *plan {
	o := e.o
	rate := float64(o.keys) * float64(o.keyLimit) / 60
	var keys []string
	var reqf bench.RequestFunc
	cfg := bench.Config{Mode: bench.OpenLoop, Conns: o.openConns, Rate: rate,
		Request: func(seq uint64, req *fasthttp.Request) { reqf(seq, req) }}
	fake := make([]string, o.keys)
	for i := range fake {
		fake[i] = fmt.Sprintf("sk_live_noop%020d", i)
	}
	noopCfg := cfg
	noopCfg.Request = bench.EventRequestKeys("/events", fake, e.tmpl)
	return &plan{
		needsAdmin: true,
		setup: func(ctx context.Context, _ *progress) error {
			const perProject = 50
			for i := 0; len(keys) < o.keys; i++ {
				p, err := e.admin.CreateProject(ctx, fmt.Sprintf("enterprise-%d", i), "enterprise", nil)
				if err != nil {
					return err
				}
				ks, err := e.admin.CreateKeys(ctx, p.ID, fmt.Sprintf("enterprise-%d", i), min(perProject, o.keys-len(keys)))
				if err != nil {
					return err
				}
				keys = append(keys, ks...)
			}
			reqf = bench.EventRequestKeys("/events", keys, e.tmpl)
			return nil
		},
		eventd: httpSubject(e, "eventd", e.target, true, bench.UnitRequests, cfg),
		ceilings: []subject{
			httpSubject(e, "noop", e.noopURL, false, bench.UnitRequests, noopCfg),
			httpSubject(e, fsyncNoop, e.fsyncNoopURL, false, bench.UnitRequests, noopCfg),
		},
		judge: func(sc *bench.ScenarioResult) {
			t := sc.Eventd.Total()
			share := 0.0
			if t.Requests > 0 {
				share = 100 * float64(t.Statuses[201]) / float64(t.Requests)
			}
			sc.Check("every request 201", "100%", fmt.Sprintf("%.3f%% (%d of %d)", share, t.Statuses[201], t.Requests),
				t.Requests > 0 && t.Statuses[201] == t.Requests)
			p99, p999 := t.Latency.Percentile(99), t.Latency.Percentile(99.9)
			sc.Check("p99 from the intended send time", "< 5ms", bench.FormatDuration(p99), p99 < 5*time.Millisecond)
			sc.Check("p99.9 from the intended send time", "< 20ms", bench.FormatDuration(p999), p999 < 20*time.Millisecond)
			// Issue 12 asks less than issue 5 did; both are reported.
			sc.Check("p99 from the intended send time", "< 10ms (issue 12)", bench.FormatDuration(p99), p99 < 10*time.Millisecond)
			sc.Check("p99.9 from the intended send time", "< 25ms (issue 12)", bench.FormatDuration(p999), p999 < 25*time.Millisecond)
			sc.Note("offered %s over %d keys in %d enterprise projects (%d a minute each); eventd answered %s with 201",
				bench.FormatRate(rate, bench.UnitRequests), o.keys, (o.keys+49)/50, o.keyLimit, bench.FormatRate(sc.Eventd.Rate(), bench.UnitRequests))
			sc.Note("service time (from the actual send) p99 %s; the difference to the latency above is time queued for a connection while the server was behind",
				bench.FormatDuration(t.Service.Percentile(99)))
			sc.Note("p99 by round, in the order they ran: %s", sc.Eventd.RoundPercentiles(99))
			if f := ceilingNamed(sc, fsyncNoop); f != nil {
				ft := f.Total()
				sc.Note("%s under the same load (what the disk's syncs and the machine leave to any server that syncs before its 201): p99 %s, p99.9 %s",
					fsyncNoop, bench.FormatDuration(ft.Latency.Percentile(99)), bench.FormatDuration(ft.Latency.Percentile(99.9)))
			}
			if o.duration+o.warmup >= time.Minute {
				sc.Note("runs of a minute or more pace each key exactly at its limit, so a sliding window may answer 429 at the edges")
			}
		},
	}
}

// idRing keeps recent event ids for GET /events/{id}.
type idRing struct {
	mu  sync.Mutex
	ids []string
	n   int
}

func newIDRing(size int) *idRing { return &idRing{ids: make([]string, size)} }

func (r *idRing) add(id string) {
	r.mu.Lock()
	r.ids[r.n%len(r.ids)] = id
	r.n++
	r.mu.Unlock()
}

func (r *idRing) pick(seq uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return ""
	}
	return r.ids[seq%uint64(min(r.n, len(r.ids)))]
}

var idField = []byte(`"id":"`)

// firstID reads the first "id" of a JSON body.
func firstID(b []byte) string {
	i := bytes.Index(b, idField)
	if i < 0 {
		return ""
	}
	b = b[i+len(idField):]
	j := bytes.IndexByte(b, '"')
	if j < 0 {
		return ""
	}
	return string(b[:j])
}

// Request classes of the mixed scenario: seq%20 == 0 lists, == 10 reads one.
const (
	classWrite = iota
	classList
	classGet
)

func mixedClass(seq uint64) int {
	switch seq % 20 {
	case 0:
		return classList
	case 10:
		return classGet
	}
	return classWrite
}

// mixedConfig builds the mixed load for one subject, with its own id ring.
func mixedConfig(e *env, key string, ring *idRing, conns int, learn bool) bench.Config {
	write := bench.EventRequest("/events", key, e.tmpl)
	auth := "Bearer " + key
	return bench.Config{
		Mode: bench.ClosedLoop, Conns: conns,
		Classes: []string{"write", "list", "get"}, Class: mixedClass,
		Request: func(seq uint64, req *fasthttp.Request) {
			c := mixedClass(seq)
			id := ""
			if c == classGet {
				if id = ring.pick(seq); id == "" {
					c = classList
				}
			}
			switch c {
			case classWrite:
				write(seq, req)
				return
			case classList:
				req.SetRequestURI("/events?limit=20")
			default:
				req.SetRequestURI("/events/" + id)
			}
			req.Header.SetMethod(fasthttp.MethodGet)
			req.Header.Set(fasthttp.HeaderAuthorization, auth)
		},
		Verdict: func(seq uint64, resp *fasthttp.Response) bench.Verdict {
			code := resp.StatusCode()
			if mixedClass(seq) == classWrite {
				if code != fasthttp.StatusCreated {
					return bench.Verdict{}
				}
				if learn && seq%7 == 0 {
					if id := firstID(resp.Body()); id != "" {
						ring.add(id)
					}
				}
				return bench.Verdict{OK: true, Events: 1}
			}
			return bench.Verdict{OK: code == fasthttp.StatusOK}
		},
	}
}

// 4. Mixed reads and writes.
func buildMixed(e *env) *plan {
	conns := e.conns(64)
	ring := newIDRing(4096)
	noopRing := newIDRing(1)
	noopRing.add("evt_01JH0000000000000000000000")
	return &plan{
		setup: func(ctx context.Context, _ *progress) error {
			// Ids to read before the run has written any of its own.
			for i := range 32 {
				id, err := postOne(ctx, e.target, e.key, e.tmpl.AppendTo(nil, uint64(i)))
				if err != nil {
					return err
				}
				ring.add(id)
			}
			return nil
		},
		eventd:   httpSubject(e, "eventd", e.target, true, bench.UnitRequests, mixedConfig(e, e.key, ring, conns, true)),
		ceilings: []subject{httpSubject(e, "noop", e.noopURL, false, bench.UnitRequests, mixedConfig(e, e.key, noopRing, conns, false))},
		judge: func(sc *bench.ScenarioResult) {
			t := sc.Eventd.Total()
			for _, c := range t.Classes {
				sc.Note("%s: %d requests, %d ok, p50 %s, p99 %s, p99.9 %s", c.Name, c.Requests, c.OK,
					bench.FormatDuration(c.Latency.Percentile(50)), bench.FormatDuration(c.Latency.Percentile(99)),
					bench.FormatDuration(c.Latency.Percentile(99.9)))
			}
			sc.Note("the list reads the newest 20 of every event the bench stored so far (exact total from counters)")
		},
	}
}

// postOne stores one event and returns its id.
func postOne(ctx context.Context, target, key string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", target+"/events", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("POST /events: %s %s", resp.Status, bytes.TrimSpace(b))
	}
	id := firstID(b)
	if id == "" {
		return "", fmt.Errorf("POST /events: no id in %s", b)
	}
	return id, nil
}

// quotaCheck accumulates the per-key outcome of the rate-limit runs.
type quotaCheck struct {
	mu         sync.Mutex
	keys       int // keys driven past their limit
	exact      int
	short      int // keys that never reached their limit (a run too short)
	created    uint64
	limited    uint64
	noRetry    uint64
	violations []string
}

// 5. Rate-limit enforcement under load.
func buildRateLimit(e *env) *plan {
	o := e.o
	limit := o.rlLimit
	var projectID string
	var runs atomic.Int64
	qc := &quotaCheck{}
	// A minute window frees slots after 60 s; the exact-quota check needs
	// every run to stay inside one window.
	capped := func(d time.Duration) time.Duration { return min(d, 50*time.Second) }
	verdictFor := func(created, limited []atomic.Uint64, noRetry *atomic.Uint64) bench.VerdictFunc {
		return func(seq uint64, resp *fasthttp.Response) bench.Verdict {
			k := seq % uint64(len(created))
			switch resp.StatusCode() {
			case fasthttp.StatusCreated:
				created[k].Add(1)
				return bench.Verdict{OK: true, Events: 1}
			case fasthttp.StatusTooManyRequests:
				limited[k].Add(1)
				if len(resp.Header.Peek("Retry-After")) == 0 {
					noRetry.Add(1)
				}
				return bench.Verdict{OK: true}
			}
			return bench.Verdict{}
		}
	}
	conns := e.conns(64)
	eventd := subject{name: "eventd", unit: bench.UnitRequests, eventsPer: 1, server: true,
		run: func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
			n := runs.Add(1)
			keys, err := e.admin.CreateKeys(ctx, projectID, fmt.Sprintf("rl-%d", n), o.rlKeys)
			if err != nil {
				return nil, err
			}
			created := make([]atomic.Uint64, len(keys))
			limited := make([]atomic.Uint64, len(keys))
			var noRetry atomic.Uint64
			g, err := bench.NewGenerator(bench.Config{Target: e.target, Mode: bench.ClosedLoop, Conns: conns,
				Duration: capped(d), Timeout: o.timeout, SeqBase: e.seqBase(),
				Request: bench.EventRequestKeys("/events", keys, e.tmpl), Verdict: verdictFor(created, limited, &noRetry)})
			if err != nil {
				return nil, err
			}
			defer g.Close()
			p.source(g.Progress)
			res, err := g.Run(ctx)
			qc.mu.Lock()
			defer qc.mu.Unlock()
			qc.noRetry += noRetry.Load()
			for i := range keys {
				c, l := created[i].Load(), limited[i].Load()
				qc.created += c
				qc.limited += l
				if l == 0 && c < uint64(limit) {
					qc.short++ // never reached its limit: nothing to check
					continue
				}
				qc.keys++
				if c == uint64(limit) {
					qc.exact++
				} else if len(qc.violations) < 5 {
					qc.violations = append(qc.violations, fmt.Sprintf("run %d key %d: %d × 201, %d × 429", n, i, c, l))
				}
			}
			return res, err
		}}
	fake := make([]string, o.rlKeys)
	for i := range fake {
		fake[i] = fmt.Sprintf("sk_live_noop%020d", i)
	}
	var nc, nl []atomic.Uint64
	var nr atomic.Uint64
	nc, nl = make([]atomic.Uint64, len(fake)), make([]atomic.Uint64, len(fake))
	noop := httpSubject(e, "noop", e.noopURL, false, bench.UnitRequests, bench.Config{Mode: bench.ClosedLoop, Conns: conns,
		Request: bench.EventRequestKeys("/events", fake, e.tmpl), Verdict: verdictFor(nc, nl, &nr)})
	noopRun := noop.run
	noop.run = func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
		return noopRun(ctx, capped(d), p)
	}
	return &plan{
		needsAdmin: true,
		setup: func(ctx context.Context, _ *progress) error {
			p, err := e.admin.CreateProject(ctx, "ratelimit", "enterprise",
				&bench.Limits{Minute: int64(limit), Hour: 1_000_000, Day: 10_000_000})
			if err != nil {
				return err
			}
			projectID = p.ID
			return nil
		},
		eventd:   eventd,
		ceilings: []subject{noop},
		judge: func(sc *bench.ScenarioResult) {
			qc.mu.Lock()
			defer qc.mu.Unlock()
			sc.Check("keys driven past their limit get exactly their quota",
				fmt.Sprintf("every key exactly %d × 201", limit), fmt.Sprintf("%d of %d keys exact", qc.exact, qc.keys),
				qc.keys > 0 && qc.exact == qc.keys)
			sc.Note("%d fresh keys per run (warm-up included), custom limit %d/min: %d × 201 and %d × 429 in all; figure = answered requests/s (201 + 429)",
				o.rlKeys, limit, qc.created, qc.limited)
			if qc.short > 0 {
				sc.Note("%d keys never reached their limit in their run (too short to check)", qc.short)
			}
			if qc.noRetry > 0 {
				sc.Note("%d of the 429 answers lacked Retry-After", qc.noRetry)
			} else if qc.limited > 0 {
				sc.Note("every 429 carried Retry-After")
			}
			for _, v := range qc.violations {
				sc.Note("not exact: %s", v)
			}
			t := sc.Eventd.Total()
			sc.Note("201 p99 and 429 p99 are not separated; overall p99 %s", bench.FormatDuration(t.Latency.Percentile(99)))
		},
	}
}

// subscriberSet is a running set of /stream subscribers: in a child process
// (bench.SubscriberProcess), or in this one when that cannot be started.
type subscriberSet interface {
	Mark()
	Delivered() uint64
	WaitDrained(ctx context.Context, want uint64, idle, max time.Duration)
	Stop() *bench.StreamResult
}

// startSubscribers runs the subscribers in a child process, the bench binary
// with --serve-subscribers, so that their CPU is measured apart from the
// server's and the load generator's.
func startSubscribers(ctx context.Context, o bench.StreamOptions) (subscriberSet, error) {
	self, err := os.Executable()
	if err != nil {
		info("stream: subscribers run in this process, their CPU counted as the generator's: %v", err)
		return bench.StartSubscribers(ctx, o)
	}
	return bench.StartSubscriberProcess(ctx, []string{self, "--serve-subscribers"}, o)
}

// runFanOut runs the load of cfg while subs.Subscribers subscribers (none:
// only the load) read what it stores; afterwards it waits until they have
// every event (no delivery for idle, at most max) and records what they got.
func runFanOut(ctx context.Context, p *progress, subs bench.StreamOptions, cfg bench.Config, idle, max time.Duration) (*bench.Result, error) {
	var set subscriberSet
	if subs.Subscribers > 0 {
		var err error
		if set, err = startSubscribers(ctx, subs); err != nil {
			return nil, err
		}
		p.also(func() string { return fmt.Sprintf("delivered %d", set.Delivered()) })
	}
	g, err := bench.NewGenerator(cfg)
	if err != nil {
		if set != nil {
			set.Stop()
		}
		return nil, err
	}
	defer g.Close()
	p.source(g.Progress)
	if set != nil {
		set.Mark()
	}
	res, err := g.Run(ctx)
	if set != nil {
		want := res.Events * uint64(subs.Subscribers)
		set.WaitDrained(ctx, want, idle, max)
		sr := set.Stop()
		sr.Expected = want
		res.Stream = sr
	}
	return res, err
}

// 6. Stream fan-out.
func buildStream(e *env) *plan {
	o := e.o
	var key string
	run := func(subs int, mode bench.Mode, rate float64) func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
		return func(ctx context.Context, d time.Duration, p *progress) (*bench.Result, error) {
			conns := e.conns(64)
			if mode == bench.OpenLoop {
				conns = o.openConns
			}
			return runFanOut(ctx, p, bench.StreamOptions{Target: e.target, Key: key, Subscribers: subs, Reconnect: true},
				bench.Config{Target: e.target, Mode: mode, Rate: rate, Conns: conns, Duration: d, Timeout: o.timeout,
					SeqBase: e.seqBase(), Request: bench.StreamEventRequest("/events", key)},
				time.Second, 5*time.Second)
		}
	}
	n := o.streamSubs
	with := fmt.Sprintf("eventd + %d subscribers", n)
	at := fmt.Sprintf("eventd + %d subscribers at %s", n, bench.FormatRate(o.streamRate, "ev/s"))
	return &plan{
		needsAdmin: true,
		setup: func(ctx context.Context, _ *progress) error {
			p, err := e.admin.CreateProject(ctx, "stream", "enterprise", &bench.BenchLimits)
			if err != nil {
				return err
			}
			key, err = e.admin.CreateKey(ctx, p.ID, "stream")
			return err
		},
		eventd:   subject{name: with, unit: bench.UnitRequests, eventsPer: 1, server: true, run: run(n, bench.ClosedLoop, 0)},
		ceilings: []subject{{name: "eventd, no subscribers", unit: bench.UnitRequests, eventsPer: 1, server: true, run: run(0, bench.ClosedLoop, 0)}},
		others:   []subject{{name: at, unit: bench.UnitRequests, eventsPer: 1, server: true, run: run(n, bench.OpenLoop, o.streamRate)}},
		judge: func(sc *bench.ScenarioResult) {
			r := bench.Ratio(sc.Eventd, sc.Ceilings[0])
			sc.Check(fmt.Sprintf("ingest with %d subscribers vs without", n), "≥ 0.80 (issue 12)", fmtRatio(r), r >= 0.8)
			if with, without := sc.Eventd.Total(), sc.Ceilings[0].Total(); with.HasServerCPU && without.HasServerCPU && with.OK > 0 && without.OK > 0 {
				// What fan-out costs eventd itself: the subscribers read in
				// their own process, so their CPU is not in the server's.
				cw, co := with.ServerCPU/time.Duration(with.OK), without.ServerCPU/time.Duration(without.OK)
				subsText := "subscribers' CPU not measured apart"
				if st := with.Stream; st != nil && st.HasClientCPU && st.Delivered > 0 {
					subsText = fmt.Sprintf("subscribers (own process) %.2f cores, %s CPU per request, %s per message",
						bench.CPUCores(st.ClientCPU, with.Elapsed), bench.FormatDuration(st.ClientCPU/time.Duration(with.OK)),
						bench.FormatDuration(st.ClientCPU/time.Duration(st.Delivered)))
				}
				sc.Note("server CPU per request: %s with %d subscribers, %s without (without/with %.2f); %s",
					bench.FormatDuration(cw), n, bench.FormatDuration(co), float64(co)/float64(cw), subsText)
			}
			fixed := sc.Others[0].Total()
			if st := fixed.Stream; st != nil {
				p99 := st.Latency.Percentile(99)
				sc.Check("delivery p99 at "+bench.FormatRate(o.streamRate, "events/s"), "< 50ms", bench.FormatDuration(p99), p99 < 50*time.Millisecond && st.Delivered > 0)
				share := 0.0
				if st.Expected > 0 {
					share = 100 * float64(st.Delivered) / float64(st.Expected)
				}
				sc.Check("every event reaches every subscriber at "+bench.FormatRate(o.streamRate, "events/s"), "100%",
					fmt.Sprintf("%.2f%% (%d of %d messages)", share, st.Delivered, st.Expected), st.Expected > 0 && st.Delivered >= st.Expected)
				sc.Note("at %s: delivered %s, delivery p50 %s p99 %s (from the send time in the event); from created_at (ms grain) p50 %s p99 %s; ingest p99 %s",
					bench.FormatRate(o.streamRate, "events/s"), bench.FormatRate(st.MessagesPerSec(), "messages/s"),
					bench.FormatDuration(st.Latency.Percentile(50)), bench.FormatDuration(p99),
					bench.FormatDuration(st.CreatedLatency.Percentile(50)), bench.FormatDuration(st.CreatedLatency.Percentile(99)),
					bench.FormatDuration(fixed.Latency.Percentile(99)))
				sc.Note("at %s: %s", bench.FormatRate(o.streamRate, "events/s"), closesText(st))
			}
			if st := sc.Eventd.Total().Stream; st != nil {
				share := 0.0
				if st.Expected > 0 {
					share = 100 * float64(st.Delivered) / float64(st.Expected)
				}
				sc.Note("at full speed: delivered %s (%.1f%% of events × subscribers), delivery p50 %s p99 %s; %s",
					bench.FormatRate(st.MessagesPerSec(), "messages/s"), share, bench.FormatDuration(st.Latency.Percentile(50)),
					bench.FormatDuration(st.Latency.Percentile(99)), closesText(st))
			}
		},
	}
}

func closesText(st *bench.StreamResult) string {
	if len(st.Closes) == 0 && st.SlowConsumer == 0 {
		return "no subscriber was closed"
	}
	var parts []string
	for code, n := range st.Closes {
		parts = append(parts, fmt.Sprintf("%d × close %s", n, code))
	}
	return fmt.Sprintf("%s; %d slow_consumer messages, %d reconnects with since=", strings.Join(parts, ", "), st.SlowConsumer, st.Reconnects)
}

// runSoak runs eventd alone for --soak and fits a line to its memory.
func runSoak(ctx context.Context, e *env, prog *progress) (*bench.SoakReport, error) {
	o := e.o
	if e.mem == nil {
		return nil, fmt.Errorf("--soak needs the server's memory: start it here, or give --admin-url/--admin-token")
	}
	cfg := bench.Config{Mode: bench.ClosedLoop, Conns: e.conns(64), Request: bench.EventRequest("/events", e.key, e.tmpl)}
	workload := fmt.Sprintf("POST /events, closed loop, %d connections", cfg.Conns)
	if o.soakRate > 0 {
		cfg.Mode, cfg.Rate, cfg.Conns = bench.OpenLoop, o.soakRate, o.openConns
		workload = fmt.Sprintf("POST /events, open loop at %s", bench.FormatRate(o.soakRate, bench.UnitRequests))
	}
	every := max(o.soak/120, time.Second)
	sampler := bench.StartMemSampler(e.mem, e.origin, every, 1)
	s := httpSubject(e, "eventd", e.target, true, bench.UnitRequests, cfg)
	res, err := measure(ctx, e, prog, s, o.soak, "soak")
	samples := sampler.Stop()
	if err != nil {
		return nil, err
	}
	series := &bench.Series{Name: "eventd", Unit: bench.UnitRequests}
	series.Add(res)
	return &bench.SoakReport{Workload: workload, Duration: o.soak.Seconds(), Load: bench.SeriesJSON(series, e.origin),
		Samples: samples, Trend: bench.AnalyzeMemory(samples, 0.2)}, nil
}

// Analytics query classes.
var analyticsClasses = []string{"timeseries day", "timeseries hour", "breakdown event"}

// 7. Analytics over a month of data (issue 4).
func buildAnalytics(e *env) *plan {
	o := e.o
	var keys []string
	var loadNote string
	end := time.Now().UTC()
	from := end.Add(-30 * 24 * time.Hour)
	// Date-only bounds: from is 00:00 of its day, to is 23:59:59.999 of its day.
	queries := []string{
		"/analytics?type=timeseries&interval=day&from=" + from.Format("2006-01-02") + "&to=" + end.Format("2006-01-02"),
		"/analytics?type=timeseries&interval=hour&from=" + from.Format("2006-01-02") + "&to=" + end.Format("2006-01-02"),
		"/analytics?type=breakdown&group_by=event&from=" + from.Format("2006-01-02") + "&to=" + end.Format("2006-01-02"),
	}
	class := func(seq uint64) int { return int(seq % uint64(len(queries))) }
	request := func(keys []string) bench.RequestFunc {
		auths := make([]string, len(keys))
		for i, k := range keys {
			auths[i] = "Bearer " + k
		}
		return func(seq uint64, req *fasthttp.Request) {
			req.Header.SetMethod(fasthttp.MethodGet)
			req.SetRequestURI(queries[class(seq)])
			req.Header.Set(fasthttp.HeaderAuthorization, auths[(seq/uint64(len(queries)))%uint64(len(auths))])
		}
	}
	var reqf bench.RequestFunc
	cfg := bench.Config{Mode: bench.OpenLoop, Rate: o.analyticsRate, Conns: o.openConns, ExpectStatus: fasthttp.StatusOK,
		Classes: analyticsClasses, Class: class,
		Request: func(seq uint64, req *fasthttp.Request) { reqf(seq, req) }}
	noopCfg := cfg
	noopCfg.Request = request([]string{"sk_live_noop"})
	return &plan{
		needsAdmin: true,
		setup: func(ctx context.Context, prog *progress) error {
			p, err := e.admin.CreateProject(ctx, "analytics", "enterprise", &bench.BenchLimits)
			if err != nil {
				return err
			}
			key, err := e.admin.CreateKey(ctx, p.ID, "analytics-loader")
			if err != nil {
				return err
			}
			res, err := loadEvents(ctx, e, prog, key, uint64(o.analyticsEvents), from, end.Add(-time.Minute), "analytics load")
			if err != nil {
				return err
			}
			loadNote = fmt.Sprintf("loaded %s events in %s (%s, %s, rollups kept at ingest)",
				groupInt(res.Events), res.Elapsed.Round(100*time.Millisecond), bench.FormatRate(res.EventsPerSec(), bench.UnitEvents), loadHow(e))
			prog.note("%s", loadNote)
			// Each key may ask 50 queries a minute: enough keys that the
			// rate stays at 40 a minute per key.
			n := int(o.analyticsRate*60/40) + 1
			keys, err = e.admin.CreateKeys(ctx, p.ID, "analytics", n)
			if err != nil {
				return err
			}
			reqf = request(keys)
			return nil
		},
		eventd:   httpSubject(e, "eventd", e.target, true, bench.UnitRequests, cfg),
		ceilings: []subject{httpSubject(e, "noop", e.noopURL, false, bench.UnitRequests, noopCfg)},
		judge: func(sc *bench.ScenarioResult) {
			sc.Note("%s", loadNote)
			t := sc.Eventd.Total()
			for _, c := range t.Classes {
				p99 := c.Latency.Percentile(99)
				sc.Check(c.Name+" p99 (issue 4)", "< 20ms", fmt.Sprintf("%s (%d of %d ok)", bench.FormatDuration(p99), c.OK, c.Requests),
					p99 < 20*time.Millisecond && c.Requests > 0 && c.OK == c.Requests)
			}
			sc.Note("open loop at %s over %d keys of the project (the analytics bucket allows 50 a minute per key); latency from the intended send time",
				bench.FormatRate(o.analyticsRate, bench.UnitRequests), len(keys))
		},
	}
}

func groupInt(n uint64) string { return strings.TrimSuffix(bench.FormatRate(float64(n), ""), " ") }

// The Segment-compatible API (issue 14): batches of analytics-node track
// messages against native batches of the same events on the same eventd.
// Segment messages carry a messageId, which eventd keeps as an idempotency
// key; the third run, native batches with idempotency keys, shows how much
// of the gap that is, the fourth, native batches of the very events the
// messages are stored as, what the Segment layer itself costs, and the
// fifth the same messages with the random messageIds of analytics-go and
// the mobile SDKs, which cost more to keep (docs/segment.md).
func buildSegment(e *env) *plan {
	conns := e.conns(16)
	n := e.o.batchSize
	// Every message is dated when the generator builds it (its timestamp,
	// stored as sent) and sent at once, as the native segment-shaped
	// events are: both are stored milliseconds before their ids' time.
	seg := bench.Config{Mode: bench.ClosedLoop, Conns: conns, EventsPerRequest: n, Accepted: bench.SegmentAccepted(n), ExpectStatus: 200,
		Request: bench.SegmentBatchRequest("/v1/batch", e.key, bench.NewTemplate(bench.SegmentTemplate), n)}
	native := bench.Config{Mode: bench.ClosedLoop, Conns: conns, EventsPerRequest: n, Accepted: bench.BatchAccepted,
		Request: bench.BatchRequest("/events/batch", e.key, e.tmpl, n)}
	idem := native
	idem.Request = bench.BatchRequest("/events/batch", e.key, bench.NewTemplate(bench.IdempotentEventTemplate), n)
	shaped := native
	shaped.Request = bench.BatchRequest("/events/batch", e.key, bench.NewTemplate(bench.SegmentShapedTemplate), n)
	uuids := seg
	uuids.Request = bench.SegmentBatchRequest("/v1/batch", e.key, bench.NewTemplate(bench.SegmentUUIDTemplate), n)
	// Every subject writes to the same eventd, each round from an idle one:
	// the flushes and compactions a round leaves are counted apart
	// (settled), not in the next subject's round.
	sub := func(name string, cfg bench.Config) subject {
		s := httpSubject(e, name, e.target, true, bench.UnitEvents, cfg)
		s.settle = true
		return s
	}
	return &plan{
		eventd:   sub("eventd", seg),
		ceilings: []subject{sub("native", native)},
		others:   []subject{sub("native+idem", idem), sub("native, segment-shaped", shaped), sub("segment, UUID messageIds", uuids)},
		judge: func(sc *bench.ScenarioResult) {
			r := bench.Ratio(sc.Eventd, sc.Ceilings[0])
			sc.Check(fmt.Sprintf("Segment batch of %d vs the native batch of the same events", n), fmt.Sprintf("≥ %.2f", minSegmentRatio), fmtRatio(r), r >= minSegmentRatio)
			if len(sc.Others) > 1 {
				sc.Note("native batches with an idempotency key per event: %.2f of the native batch", bench.Ratio(sc.Others[0], sc.Ceilings[0]))
				sc.Note("native batches of the events the Segment messages are stored as (same properties, keys and bytes): %.2f of the native batch; the Segment layer itself: %.2f of them",
					bench.Ratio(sc.Others[1], sc.Ceilings[0]), bench.Ratio(sc.Eventd, sc.Others[1]))
			}
			if len(sc.Others) > 2 {
				sc.Note("Segment batches with UUID messageIds (analytics-go, the iOS and Android SDKs): %.2f of the native batch, %.2f of those with analytics-node's",
					bench.Ratio(sc.Others[2], sc.Ceilings[0]), bench.Ratio(sc.Others[2], sc.Eventd))
			}
			if note := settledNote(sc); note != "" {
				sc.Note("%s", note)
			}
		},
	}
}

// settledNote gives each settled subject's CPU per event: its rounds' and
// what they left until eventd went idle, and the native batch's over the
// Segment batch's of those, the ratio of what each costs. "" if a subject
// did not settle.
func settledNote(sc *bench.ScenarioResult) string {
	all := append(append([]*bench.Series{sc.Eventd}, sc.Ceilings...), sc.Others...)
	parts := make([]string, 0, len(all))
	per := make([]time.Duration, len(all))
	for i, s := range all {
		t := s.Total()
		if !t.HasSettle || !t.HasServerCPU || t.Events == 0 {
			return ""
		}
		per[i] = (t.ServerCPU + t.SettleCPU) / time.Duration(t.Events)
		parts = append(parts, fmt.Sprintf("%s %s (%s after its rounds)", s.Name, bench.FormatDuration(per[i]),
			bench.FormatDuration(t.SettleCPU/time.Duration(t.Events))))
	}
	return fmt.Sprintf("eventd's CPU per event, each round from an idle eventd until it was idle again: %s; the native batch's over the Segment batch's: %.2f",
		strings.Join(parts, ", "), float64(per[1])/float64(per[0]))
}
