package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// Mode chooses how the generator schedules requests.
type Mode int

const (
	// ClosedLoop keeps Conns requests in flight and sends the next one as soon
	// as a response arrives: it finds the maximum throughput, but a slow server
	// slows the client down with it, so its latencies hide queueing.
	ClosedLoop Mode = iota
	// OpenLoop sends at a fixed arrival rate whatever the server does and
	// measures latency from each request's intended send time, so time spent
	// waiting for a free connection counts (no coordinated omission).
	OpenLoop
)

// String names the mode as the reports print it.
func (m Mode) String() string {
	if m == OpenLoop {
		return "open"
	}
	return "closed"
}

// RequestFunc fills req (already reset, Host set afterwards) for the request
// numbered seq. It is called from many workers at once, so it must only touch
// req and read shared state; writing into req's own buffers keeps it
// allocation-free.
type RequestFunc func(seq uint64, req *fasthttp.Request)

// AcceptedFunc reports how many events a successful response accepted, for
// routes that answer 201 even when some entries were rejected (batches).
type AcceptedFunc func(resp *fasthttp.Response) int

// Verdict is how a VerdictFunc judged one response.
type Verdict struct {
	OK       bool // counts as a success
	Events   int  // events the response says were stored
	Rejected int  // events refused inside a successful response
}

// VerdictFunc judges the response to request seq, for runs that mix routes
// (a GET's 200 and a POST's 201 both succeed) or count outcomes per key. It
// is called from many workers at once.
type VerdictFunc func(seq uint64, resp *fasthttp.Response) Verdict

// Config describes one load run. A run ends by itself at Duration or after
// MaxRequests, whichever comes first.
type Config struct {
	// Target is the server's base URL, e.g. http://127.0.0.1:8080 (no path).
	Target string
	Mode   Mode
	// Conns is the number of workers, each with its own keep-alive
	// connection; in open loop it caps the requests in flight.
	Conns int
	// Rate is the open-loop arrival rate in requests per second.
	Rate float64
	// Duration bounds the run (for open loop: the last intended send time).
	Duration time.Duration
	// MaxRequests bounds the run by count; 0 means no count bound.
	MaxRequests uint64
	// Timeout bounds each request; 0 means 10 s.
	Timeout time.Duration
	// Request builds each request.
	Request RequestFunc
	// ExpectStatus is the status counted as success; 0 means 201.
	ExpectStatus int
	// EventsPerRequest converts successes into events when Accepted is nil;
	// 0 means 1.
	EventsPerRequest int
	// Accepted, when set, counts the events each successful response took.
	Accepted AcceptedFunc
	// Verdict, when set, judges each response instead of ExpectStatus,
	// EventsPerRequest and Accepted.
	Verdict VerdictFunc
	// Classes name kinds of requests (e.g. "write", "read") whose latency is
	// also kept apart; Class maps a sequence number to an index in Classes.
	Classes []string
	Class   func(seq uint64) int
	// SeqBase offsets the sequence numbers so rounds do not repeat ids.
	SeqBase uint64
}

// Sample is one second of a run, for throughput-over-time charts.
type Sample struct {
	Second   int    `json:"second"`
	Requests uint64 `json:"requests"`
	OK       uint64 `json:"ok"`
	Events   uint64 `json:"events"`
}

// Result is what a run measured. Latency is from the intended send time
// (equal to the actual one in closed loop); Service is from the actual send,
// so the gap between the two is time spent queued in the client.
type Result struct {
	Mode     Mode
	Conns    int
	Rate     float64
	Elapsed  time.Duration
	Requests uint64 // requests that reached a verdict, unsent ones included
	OK       uint64 // responses with ExpectStatus
	Expect   int    // the status counted as OK; 0 for non-HTTP runs
	Events   uint64 // events accepted by OK responses
	// RejectedEvents counts entries of OK responses that were not accepted.
	RejectedEvents uint64
	Statuses       map[int]uint64    // every response status
	FailedStatuses map[int]uint64    // statuses of the responses that did not succeed
	Errors         map[string]uint64 // failures without a response, by kind
	BytesSent      uint64            // on the wire, headers included
	BytesReceived  uint64
	Dials          uint64 // connections opened; Conns means keep-alive held
	Latency        Histogram
	Service        Histogram
	PerSecond      []Sample
	// Classes holds per-class latency when Config.Classes was set.
	Classes []*ClassResult
	// Started is when the run began, for charts that place rounds in time.
	Started time.Time
	// Stream is filled by runs with /stream subscribers attached.
	Stream *StreamResult
	// ServerCPU is the CPU time the server process used during the run
	// (HasServerCPU says whether it could be read); ClientCPU is the load
	// generator's. Both are set by a CPUMeter.
	ServerCPU    time.Duration
	HasServerCPU bool
	ClientCPU    time.Duration
	// ServerRunqWait is how long the server's threads were ready to run but
	// waited for a CPU during the run (Linux schedstat).
	ServerRunqWait time.Duration
	// Store is the background work eventd's store did during the run.
	Store StoreWork
	// SettleCPU is the CPU the server used after the run until it went
	// idle (HasSettle): the flushes and compactions the run left, which a
	// subject run from an idle server pays after its round, not in the next.
	SettleCPU time.Duration
	HasSettle bool
}

// ClassResult is one class of requests within a run.
type ClassResult struct {
	Name     string
	Requests uint64
	OK       uint64
	Latency  Histogram
}

// RequestsPerSec is the rate of successful requests, the figure compared
// against the ceilings.
func (r *Result) RequestsPerSec() float64 { return perSec(r.OK, r.Elapsed) }

// EventsPerSec is the rate of accepted events, the figure for batches.
func (r *Result) EventsPerSec() float64 { return perSec(r.Events, r.Elapsed) }

// Failed counts requests that did not get ExpectStatus, for the breakdown.
func (r *Result) Failed() uint64 { return r.Requests - r.OK }

func perSec(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Clock is the generator's time source; tests inject a fake one so pacing is
// checked without sleeping or timing assertions.
type Clock interface {
	Now() time.Time
	// SleepUntil returns at t, or early with false when ctx is done.
	SleepUntil(ctx context.Context, t time.Time) bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) SleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Pacer hands out open-loop send slots. Slot i is due at start + i/rate,
// computed from i rather than by adding intervals, so there is no drift
// however long the run.
type Pacer struct {
	start    time.Time
	rate     float64
	end      time.Time // zero: no duration bound
	max      uint64    // 0: no count bound
	nextSlot atomic.Uint64
}

// NewPacer schedules rate requests per second from start, for duration (0:
// unbounded) and at most max requests (0: unbounded).
func NewPacer(start time.Time, rate float64, duration time.Duration, max uint64) *Pacer {
	p := &Pacer{start: start, rate: rate, max: max}
	if duration > 0 {
		p.end = start.Add(duration)
	}
	return p
}

// Intended is the time slot i is due.
func (p *Pacer) Intended(i uint64) time.Time {
	return p.start.Add(time.Duration(float64(i) * 1e9 / p.rate))
}

// Next claims the next slot; ok is false once the run's bounds are reached.
// Safe for concurrent use: each slot goes to exactly one worker.
func (p *Pacer) Next() (i uint64, due time.Time, ok bool) {
	i = p.nextSlot.Add(1) - 1
	if p.max > 0 && i >= p.max {
		return i, time.Time{}, false
	}
	due = p.Intended(i)
	if !p.end.IsZero() && !due.Before(p.end) {
		return i, time.Time{}, false
	}
	return i, due, true
}

// Generator runs one load run against a target; make a new one per run.
type Generator struct {
	cfg    Config
	host   string
	client *fasthttp.HostClient
	clock  Clock
	do     func(req *fasthttp.Request, resp *fasthttp.Response) error

	done  atomic.Uint64
	ok    atomic.Uint64
	stop  atomic.Bool
	dials atomic.Uint64

	connMu sync.Mutex
	conns  []*countingConn
}

// NewGenerator checks cfg and prepares the client; nothing is dialled yet.
func NewGenerator(cfg Config) (*Generator, error) {
	if cfg.Request == nil {
		return nil, errors.New("bench: Config.Request is required")
	}
	if cfg.Conns <= 0 {
		return nil, errors.New("bench: Config.Conns must be positive")
	}
	if cfg.Duration <= 0 && cfg.MaxRequests == 0 {
		return nil, errors.New("bench: set Config.Duration or Config.MaxRequests")
	}
	if cfg.Mode == OpenLoop && cfg.Rate <= 0 {
		return nil, errors.New("bench: open loop needs Config.Rate > 0")
	}
	if len(cfg.Classes) > 0 && cfg.Class == nil {
		return nil, errors.New("bench: Config.Classes needs Config.Class")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.ExpectStatus == 0 {
		cfg.ExpectStatus = fasthttp.StatusCreated
	}
	if cfg.EventsPerRequest <= 0 {
		cfg.EventsPerRequest = 1
	}
	u, err := url.Parse(cfg.Target)
	if err != nil {
		return nil, fmt.Errorf("bench: target %q: %w", cfg.Target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bench: target %q: scheme must be http or https", cfg.Target)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("bench: target %q: give the base URL without a path", cfg.Target)
	}
	addr := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			addr += ":443"
		} else {
			addr += ":80"
		}
	}
	g := &Generator{cfg: cfg, host: u.Host, clock: realClock{}}
	g.client = &fasthttp.HostClient{
		Addr:                     addr,
		IsTLS:                    u.Scheme == "https",
		TLSConfig:                &tls.Config{ServerName: u.Hostname()},
		MaxConns:                 cfg.Conns,
		MaxConnWaitTimeout:       cfg.Timeout,
		MaxIdleConnDuration:      time.Minute,
		NoDefaultUserAgentHeader: true,
		// A hidden retry would count one request twice and hide the error.
		MaxIdemponentCallAttempts: 1,
		RetryIfErr: func(*fasthttp.Request, int, error) (bool, bool) {
			return false, false
		},
		Dial: g.dial,
	}
	g.do = func(req *fasthttp.Request, resp *fasthttp.Response) error {
		return g.client.DoTimeout(req, resp, g.cfg.Timeout)
	}
	return g, nil
}

// countingConn counts wire bytes, headers included, which the request and
// response objects do not expose cheaply.
type countingConn struct {
	net.Conn
	read, written atomic.Uint64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(uint64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(uint64(n))
	return n, err
}

func (g *Generator) dial(addr string) (net.Conn, error) {
	c, err := fasthttp.DialTimeout(addr, g.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	g.dials.Add(1)
	cc := &countingConn{Conn: c}
	g.connMu.Lock()
	g.conns = append(g.conns, cc)
	g.connMu.Unlock()
	return cc, nil
}

// Progress reports requests finished and succeeded so far, for a live
// progress line; safe to call while Run is going.
func (g *Generator) Progress() (done, ok uint64) { return g.done.Load(), g.ok.Load() }

// Close drops the keep-alive connections once the run is over.
func (g *Generator) Close() { g.client.CloseIdleConnections() }

type workerStats struct {
	lat, svc       Histogram
	status         [600]uint64
	otherStatus    map[int]uint64
	failStatus     map[int]uint64
	classes        []ClassResult
	errs           map[string]uint64
	requests, ok   uint64
	events, reject uint64
	perSec         []Sample
}

func (w *workerStats) second(s int) *Sample {
	if s < 0 {
		s = 0
	}
	for s >= len(w.perSec) {
		w.perSec = append(w.perSec, Sample{Second: len(w.perSec)})
	}
	return &w.perSec[s]
}

func (w *workerStats) fail(kind string) {
	if w.errs == nil {
		w.errs = make(map[string]uint64)
	}
	w.errs[kind]++
}

// Run sends the load and returns when the run's bounds are reached or ctx is
// done (then with the partial result and ctx's error).
func (g *Generator) Run(ctx context.Context) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		g.stop.Store(true)
	}()

	start := g.clock.Now()
	var pacer *Pacer
	if g.cfg.Mode == OpenLoop {
		pacer = NewPacer(start, g.cfg.Rate, g.cfg.Duration, g.cfg.MaxRequests)
	}
	var seq atomic.Uint64
	slots := 1
	if g.cfg.Duration > 0 {
		slots = int((g.cfg.Duration+g.cfg.Timeout)/time.Second) + 2
	}
	stats := make([]*workerStats, g.cfg.Conns)
	var wg sync.WaitGroup
	for w := range stats {
		st := &workerStats{perSec: make([]Sample, 0, slots)}
		if n := len(g.cfg.Classes); n > 0 {
			st.classes = make([]ClassResult, n)
		}
		stats[w] = st
		wg.Add(1)
		go func() {
			defer wg.Done()
			if pacer != nil {
				g.openWorker(ctx, start, pacer, st)
			} else {
				g.closedWorker(start, &seq, st)
			}
		}()
	}
	wg.Wait()
	res := g.collect(stats)
	res.Elapsed = g.clock.Now().Sub(start)
	res.Started = start
	return res, ctx.Err()
}

func (g *Generator) closedWorker(start time.Time, seq *atomic.Uint64, st *workerStats) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var end time.Time
	if g.cfg.Duration > 0 {
		end = start.Add(g.cfg.Duration)
	}
	for !g.stop.Load() {
		if !end.IsZero() && !g.clock.Now().Before(end) {
			return
		}
		n := seq.Add(1) - 1
		if g.cfg.MaxRequests > 0 && n >= g.cfg.MaxRequests {
			return
		}
		t0 := g.clock.Now()
		g.send(start, g.cfg.SeqBase+n, t0, t0, req, resp, st)
	}
}

func (g *Generator) openWorker(ctx context.Context, start time.Time, p *Pacer, st *workerStats) {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	// Past this point the server is hopelessly behind: what is still queued
	// is counted as unsent, with the latency it had already accrued, rather
	// than stretching the run without end.
	var hardStop time.Time
	if g.cfg.Duration > 0 {
		hardStop = start.Add(g.cfg.Duration + g.cfg.Timeout)
	}
	for {
		i, due, ok := p.Next()
		if !ok {
			return
		}
		if !g.clock.SleepUntil(ctx, due) || g.stop.Load() {
			return
		}
		t0 := g.clock.Now()
		if !hardStop.IsZero() && !t0.Before(hardStop) {
			st.requests++
			st.lat.Record(t0.Sub(due))
			st.fail("unsent")
			st.second(int(t0.Sub(start)/time.Second)).Requests++
			g.done.Add(1)
			continue
		}
		g.send(start, g.cfg.SeqBase+i, due, t0, req, resp, st)
	}
}

// send does one request and books it; intended is when it should have left,
// t0 when it did.
func (g *Generator) send(start time.Time, seq uint64, intended, t0 time.Time, req *fasthttp.Request, resp *fasthttp.Response, st *workerStats) {
	req.Reset()
	resp.Reset()
	g.cfg.Request(seq, req)
	req.Header.SetHost(g.host)
	err := g.do(req, resp)
	t1 := g.clock.Now()
	st.lat.Record(t1.Sub(intended))
	st.svc.Record(t1.Sub(t0))
	st.requests++
	var class *ClassResult
	if st.classes != nil {
		if c := g.cfg.Class(seq); c >= 0 && c < len(st.classes) {
			class = &st.classes[c]
			class.Requests++
			class.Latency.Record(t1.Sub(intended))
		}
	}
	sample := st.second(int(t1.Sub(start) / time.Second))
	sample.Requests++
	g.done.Add(1)
	if err != nil {
		st.fail(errKind(err))
		return
	}
	code := resp.StatusCode()
	if code >= 0 && code < len(st.status) {
		st.status[code]++
	} else {
		if st.otherStatus == nil {
			st.otherStatus = make(map[int]uint64)
		}
		st.otherStatus[code]++
	}
	v := g.judge(seq, code, resp)
	if !v.OK {
		if st.failStatus == nil {
			st.failStatus = make(map[int]uint64)
		}
		st.failStatus[code]++
		return
	}
	st.ok++
	sample.OK++
	g.ok.Add(1)
	if class != nil {
		class.OK++
	}
	ev := max(v.Events, 0)
	st.events += uint64(ev)
	sample.Events += uint64(ev)
	st.reject += uint64(max(v.Rejected, 0))
}

// judge applies Config.Verdict, or else ExpectStatus and Accepted.
func (g *Generator) judge(seq uint64, code int, resp *fasthttp.Response) Verdict {
	if g.cfg.Verdict != nil {
		return g.cfg.Verdict(seq, resp)
	}
	if code != g.cfg.ExpectStatus {
		return Verdict{}
	}
	ev := g.cfg.EventsPerRequest
	if g.cfg.Accepted != nil {
		ev = g.cfg.Accepted(resp)
	}
	return Verdict{OK: true, Events: ev, Rejected: max(g.cfg.EventsPerRequest-ev, 0)}
}

func (g *Generator) collect(stats []*workerStats) *Result {
	res := &Result{
		Mode:           g.cfg.Mode,
		Conns:          g.cfg.Conns,
		Rate:           g.cfg.Rate,
		Expect:         g.cfg.ExpectStatus,
		Statuses:       make(map[int]uint64),
		FailedStatuses: make(map[int]uint64),
		Errors:         make(map[string]uint64),
		Dials:          g.dials.Load(),
	}
	for _, name := range g.cfg.Classes {
		res.Classes = append(res.Classes, &ClassResult{Name: name})
	}
	for _, st := range stats {
		res.Latency.Merge(&st.lat)
		res.Service.Merge(&st.svc)
		res.Requests += st.requests
		res.OK += st.ok
		res.Events += st.events
		res.RejectedEvents += st.reject
		for code, n := range st.status {
			if n > 0 {
				res.Statuses[code] += n
			}
		}
		for code, n := range st.otherStatus {
			res.Statuses[code] += n
		}
		for code, n := range st.failStatus {
			res.FailedStatuses[code] += n
		}
		for i := range st.classes {
			c := res.Classes[i]
			c.Requests += st.classes[i].Requests
			c.OK += st.classes[i].OK
			c.Latency.Merge(&st.classes[i].Latency)
		}
		for k, n := range st.errs {
			res.Errors[k] += n
		}
		for len(res.PerSecond) < len(st.perSec) {
			res.PerSecond = append(res.PerSecond, Sample{Second: len(res.PerSecond)})
		}
		for i, s := range st.perSec {
			res.PerSecond[i].Requests += s.Requests
			res.PerSecond[i].OK += s.OK
			res.PerSecond[i].Events += s.Events
		}
	}
	g.connMu.Lock()
	for _, c := range g.conns {
		res.BytesSent += c.written.Load()
		res.BytesReceived += c.read.Load()
	}
	g.connMu.Unlock()
	return res
}

// errKind groups transport errors into a few stable names for the
// breakdown; anything unexpected keeps (a prefix of) its message.
func errKind(err error) string {
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return "timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return "no_free_conns"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return "connection_closed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection_reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	msg := err.Error()
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return msg
}
