// Command eventd-bench measures eventd against its ceilings on this machine:
// a no-op fasthttp server (the HTTP ceiling) and raw Pebble commits with Sync
// (the storage ceiling), alternating with eventd in short rounds so that
// machine drift cancels out. It prints a table of figures, ratios and the
// issue's targets, and writes bench-results.json and bench-report.html.
//
// By default it builds ./cmd/eventd, starts it on loopback with a fresh data
// directory and creates the projects and keys each scenario needs through
// the admin API. With --target URL --key sk_... it drives a server that is
// already running (with --admin-url/--admin-token for the scenarios that
// create keys, for profiles and for memory).
//
//	go run ./cmd/eventd-bench                       # the default set, fresh then loaded with 5M events, 6-7 minutes
//	go run ./cmd/eventd-bench --scenarios single --rounds 5 --duration 10s
//	go run ./cmd/eventd-bench --fsync-delay 1ms     # emulate a cloud disk
//	go run ./cmd/eventd-bench --pprof prof/         # CPU and allocation profiles
//	go run ./cmd/eventd-bench --trace traces/       # execution traces (tools/tracegaps)
//	go run ./cmd/eventd-bench --soak 10m            # is server memory flat?
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/eventd/eventd/bench"
)

func main() { os.Exit(run(os.Args[1:])) }

type options struct {
	target          string
	key             string
	adminURL        string
	adminToken      string
	eventdBin       string
	eventdArgs      string
	scenarios       string
	scenariosSet    bool
	duration        time.Duration
	rounds          int
	warmup          time.Duration
	conns           int
	jsonOut         string
	htmlOut         string
	fsyncDelay      time.Duration
	timeout         time.Duration
	noopInProc      bool
	keep            bool
	serveNoop       string
	serveFsyncNoop  string
	fsyncNoopDir    string
	serveSubs       bool
	batchSize       int
	pprofDir        string
	traceDir        string
	soak            time.Duration
	soakRate        float64
	keys            int
	keyLimit        int
	openConns       int
	rlKeys          int
	rlLimit         int
	streamSubs      int
	streamRate      float64
	analyticsEvents int
	analyticsRate   float64
	loadedEvents    uint64
	cursors         int
	cursorRate      float64
	cursorBacklog   int
	cursorAckWindow int
	whereEvents     int
	eventNames      bool
}

// hiddenFlags are for the bench's own machinery and tests, not for users.
var hiddenFlags = map[string]bool{"serve-noop": true, "serve-fsync-noop": true, "fsync-noop-dir": true, "serve-subscribers": true}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("eventd-bench", flag.ContinueOnError)
	fs.StringVar(&o.target, "target", "", "base URL of a running eventd (needs --key); empty: build and start one; \"noop\": bench a no-op server (tests the tool)")
	fs.StringVar(&o.key, "key", "", "secret live key (sk_live_...) for --target; its project needs limits above the load")
	fs.StringVar(&o.adminURL, "admin-url", "", "admin listener of --target (for the scenarios that create keys, --pprof and memory)")
	fs.StringVar(&o.adminToken, "admin-token", "", "admin token of --target")
	fs.StringVar(&o.eventdBin, "eventd-bin", "", "eventd binary to start (default: go build ./cmd/eventd from the repository)")
	fs.StringVar(&o.eventdArgs, "eventd-args", "", `extra flags for "eventd serve", space-separated (e.g. "--shards 8")`)
	fs.StringVar(&o.scenarios, "scenarios", strings.Join(defaultScenarios(), ","), "comma-separated scenarios: "+strings.Join(scenarioNames(), ", ")+`; "none" for only --soak`)
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of one round of one subject")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds per scenario; eventd and each ceiling run once per round, alternating")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unrecorded warm-up of each subject before a scenario's first round")
	fs.IntVar(&o.conns, "conns", 0, "connections (and Pebble committers) of the closed-loop scenarios; 0: each scenario's own (64, batch 16)")
	fs.IntVar(&o.batchSize, "batch-size", 100, "events per batch request and per Pebble batch commit")
	fs.BoolVar(&o.eventNames, "event-names", false, "spread the events of the default template (single, batch, enterprise, mixed, import...) over eight names (half page_view, a quarter click, ...) instead of one, as real traffic is")
	fs.StringVar(&o.jsonOut, "json", "bench-results.json", "results file; empty: none")
	fs.StringVar(&o.htmlOut, "html", "bench-report.html", "self-contained HTML report; empty: none")
	fs.DurationVar(&o.fsyncDelay, "fsync-delay", 0, "extra time per fsync, in eventd (serve --fsync-delay), the Pebble ceiling and the fsync no-op: emulates a slower disk")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.StringVar(&o.pprofDir, "pprof", "", "directory for the server's CPU and allocation profiles, one extra profiled run per scenario and eventd subject")
	fs.StringVar(&o.traceDir, "trace", "", "directory for the server's 2 s execution traces, one extra traced run per scenario and eventd subject (read them with tools/tracegaps)")
	fs.DurationVar(&o.soak, "soak", 0, "long run that checks whether server memory stays flat (e.g. 10m); alone unless --scenarios is given too")
	fs.Float64Var(&o.soakRate, "soak-rate", 0, "open-loop rate of the soak in requests/s; 0: closed loop, 64 connections, as fast as it goes")
	fs.IntVar(&o.keys, "keys", 500, "enterprise scenario: number of keys")
	fs.IntVar(&o.keyLimit, "key-limit", 2000, "enterprise scenario: requests a minute per key (the enterprise plan's limit)")
	fs.IntVar(&o.openConns, "open-conns", 256, "open-loop scenarios: most requests in flight")
	fs.IntVar(&o.rlKeys, "ratelimit-keys", 20, "rate-limit scenario: fresh keys per run")
	fs.IntVar(&o.rlLimit, "ratelimit-limit", 500, "rate-limit scenario: the project's custom per-minute limit")
	fs.IntVar(&o.streamSubs, "stream-subscribers", 100, "stream scenario: WebSocket subscribers on the dataset")
	fs.Float64Var(&o.streamRate, "stream-rate", 5000, "stream scenario: events/s of the fixed-rate delivery-latency run")
	fs.IntVar(&o.analyticsEvents, "analytics-events", 10_000_000, "analytics scenario: events loaded over the last 30 days before the queries")
	fs.Float64Var(&o.analyticsRate, "analytics-rate", 200, "analytics scenario: open-loop queries/s (spread over enough keys to stay under 50 a minute each)")
	fs.IntVar(&o.cursors, "cursors", 100, "cursors scenario: named-cursor consumers on the dataset")
	fs.Float64Var(&o.cursorRate, "cursor-rate", 5000, "cursors scenario: open-loop events/s of POST /events")
	fs.IntVar(&o.cursorBacklog, "cursor-backlog", 500_000, "cursors scenario: events committed while the catch-up cursor is away (500,000: 10 minutes at 833 events/s)")
	fs.IntVar(&o.cursorAckWindow, "cursor-ack-window", 0, "cursors scenario: the consumers' ack_window (1-10000); 0: the server's default (1000)")
	fs.IntVar(&o.whereEvents, "where-events", 2_000_000, "where scenario: events loaded into its dataset, as dense as 10 million a month (10000000: the issue's month)")
	fs.Uint64Var(&o.loadedEvents, "loaded-events", 5_000_000, "after the fresh runs, load this many more events into eventd and the Pebble ceiling and run single, batch, enterprise and mixed again (the steady-state figures); 0: skip")
	fs.BoolVar(&o.noopInProc, "noop-inproc", false, "serve the no-op ceilings (plain and fsync) inside this process instead of child processes")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (server data, log, Pebble store)")
	fs.StringVar(&o.serveNoop, "serve-noop", "", "")
	fs.StringVar(&o.serveFsyncNoop, "serve-fsync-noop", "", "")
	fs.StringVar(&o.fsyncNoopDir, "fsync-noop-dir", "", "")
	fs.BoolVar(&o.serveSubs, "serve-subscribers", false, "")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: eventd-bench [flags]\n\n")
		fs.VisitAll(func(f *flag.Flag) {
			if hiddenFlags[f.Name] {
				return
			}
			def := ""
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %s)", f.DefValue)
			}
			fmt.Fprintf(fs.Output(), "  --%s\n    \t%s%s\n", f.Name, f.Usage, def)
		})
		fmt.Fprint(fs.Output(), `
examples:
  eventd-bench                                   build, start and bench eventd (6-7 minutes)
  eventd-bench --loaded-events 0                 only the fresh store (about 3.5 minutes)
  eventd-bench --scenarios single,batch --rounds 5 --duration 10s
  eventd-bench --target http://127.0.0.1:8080 --key sk_live_... [--admin-url http://127.0.0.1:8081 --admin-token ...]
  eventd-bench --fsync-delay 1ms                 a slow disk, for eventd and the Pebble ceiling
  eventd-bench --pprof prof/                     save CPU and allocation profiles per scenario
  eventd-bench --trace traces/                   save a 2 s execution trace per scenario (tools/tracegaps reads it)
  eventd-bench --soak 10m                        memory over a long run
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "scenarios" {
			o.scenariosSet = true
		}
	})
	if o.serveNoop != "" {
		return serveChild(serveNoop(o.serveNoop))
	}
	if o.serveFsyncNoop != "" {
		return serveChild(serveFsyncNoop(o.serveFsyncNoop, o.fsyncNoopDir, o.fsyncDelay))
	}
	if o.serveSubs { // the stream scenario's subscriber process; its options follow as JSON
		if fs.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "eventd-bench: --serve-subscribers takes the options as its one argument")
			return 2
		}
		return bench.ServeSubscribers(fs.Arg(0), os.Stdin, os.Stdout)
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "eventd-bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := benchMain(ctx, &o); err != nil {
		fmt.Fprintln(os.Stderr, "eventd-bench:", err)
		return 1
	}
	return 0
}

func (o *options) check() error {
	if o.rounds < 1 || o.duration <= 0 {
		return errors.New("--rounds must be at least 1 and --duration positive")
	}
	if o.target != "" && o.target != "noop" && o.key == "" {
		return errors.New("--target needs --key")
	}
	if (o.adminURL == "") != (o.adminToken == "") {
		return errors.New("--admin-url and --admin-token go together")
	}
	if o.batchSize < 1 || o.batchSize > 100 {
		return errors.New("--batch-size must be 1 to 100 (eventd's limit)")
	}
	if o.keys < 1 || o.keyLimit < 1 || o.openConns < 1 || o.rlKeys < 1 || o.rlLimit < 1 || o.streamSubs < 0 || o.streamRate <= 0 ||
		o.analyticsEvents < 1 || o.analyticsRate <= 0 {
		return errors.New("--keys, --key-limit, --open-conns, --ratelimit-keys, --ratelimit-limit, --stream-rate and the --analytics ones must be positive")
	}
	if o.cursors < 1 || o.cursorRate <= 0 || o.cursorBacklog < 1 || o.cursorAckWindow < 0 || o.cursorAckWindow > 10_000 ||
		o.whereEvents < 1 {
		return errors.New("--cursors, --cursor-rate, --cursor-backlog and --where-events must be positive, --cursor-ack-window 0-10000")
	}
	if o.whereEvents < whereMinEvents {
		return fmt.Errorf("--where-events must be at least %d (its queries look a day back, and the events are as dense as 10 million a month)", whereMinEvents)
	}
	if o.soak < 0 || o.soakRate < 0 {
		return errors.New("--soak and --soak-rate cannot be negative")
	}
	for _, name := range o.scenarioList() {
		if _, ok := scenarioDefs[name]; !ok {
			return fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(scenarioNames(), ", "))
		}
	}
	if len(o.scenarioList()) == 0 && o.soak == 0 {
		return errors.New("nothing to do: no scenarios and no --soak")
	}
	return nil
}

func (o *options) scenarioList() []string {
	if o.soak > 0 && !o.scenariosSet {
		return nil // --soak alone runs only the soak
	}
	var out []string
	for _, s := range strings.Split(o.scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" && s != "none" {
			out = append(out, s)
		}
	}
	return out
}

// env is what a scenario can draw on: the target, its key, the ceilings.
type env struct {
	o       *options
	target  string
	key     string
	srv     *bench.Eventd // nil with --target
	admin   *bench.Admin  // nil when the admin API is out of reach
	noopURL string
	noopPID int // the no-op child, for its CPU time; 0 in-process
	// fsyncNoopURL and fsyncNoopPID are the durability floor
	// (bench.FsyncNoopServer), a child like the no-op; PID 0 in-process.
	fsyncNoopURL string
	fsyncNoopPID int
	dataDir      string // the started eventd's data directory; "" with --target
	pebble       *bench.PebbleBaseline
	tmpl         *bench.Template
	origin       time.Time
	runIndex     uint64
	mem          *bench.MemSource // nil when the server's memory is out of reach
}

// seqBase gives every run its own range of sequence numbers, so visitor ids
// and skus never repeat between rounds.
func (e *env) seqBase() uint64 {
	e.runIndex++
	return 1_000_000_000 + e.runIndex*100_000_000
}

func (e *env) conns(def int) int {
	if e.o.conns > 0 {
		return e.o.conns
	}
	return def
}

func benchMain(ctx context.Context, o *options) error {
	started := time.Now()
	loadStart := bench.LoadAvg()
	tmp, err := os.MkdirTemp("", "eventd-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		info("keeping %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	tmpl := bench.EventTemplate
	if o.eventNames {
		tmpl = bench.WithEventNames(tmpl)
	}
	e := &env{o: o, tmpl: bench.NewTemplate(tmpl), origin: started}
	config := map[string]any{
		"duration_s": o.duration.Seconds(), "rounds": o.rounds, "warmup_s": o.warmup.Seconds(),
		"conns": o.conns, "batch_size": o.batchSize, "event_names": o.eventNames, "fsync_delay_ms": float64(o.fsyncDelay) / 1e6,
		"scenarios": o.scenarioList(), "timeout_s": o.timeout.Seconds(), "fsync": "on (every 201 is after pebble.Sync)",
		"enterprise_keys": o.keys, "enterprise_key_limit_per_min": o.keyLimit, "open_conns": o.openConns,
		"ratelimit_keys": o.rlKeys, "ratelimit_limit_per_min": o.rlLimit,
		"stream_subscribers": o.streamSubs, "stream_rate": o.streamRate,
	}
	if o.loadedEvents > 0 && slices.ContainsFunc(o.scenarioList(), func(s string) bool { return slices.Contains(loadedScenarios, s) }) {
		config["loaded_events"] = o.loadedEvents
	}
	if slices.Contains(o.scenarioList(), "cursors") {
		config["cursors"] = o.cursors
		config["cursor_rate"] = o.cursorRate
		config["cursor_backlog"] = o.cursorBacklog
		config["cursor_ack_window"] = o.cursorAckWindow
	}
	if slices.Contains(o.scenarioList(), "where") {
		config["where_events"] = o.whereEvents
	}
	if slices.Contains(o.scenarioList(), "analytics") {
		config["analytics_events"] = o.analyticsEvents
		config["analytics_rate"] = o.analyticsRate
	}
	if o.soak > 0 {
		config["soak_s"] = o.soak.Seconds()
		config["soak_rate"] = o.soakRate
	}

	// The target.
	switch o.target {
	case "":
		e.srv, e.key, err = startEventd(ctx, o, tmp, config)
		if err != nil {
			return err
		}
		defer func() {
			if err := e.srv.Stop(30 * time.Second); err != nil {
				info("stopping eventd: %v (log %s)", err, e.srv.LogPath)
			}
		}()
		e.target, e.admin = e.srv.URL, e.srv.Admin
		e.dataDir = filepath.Join(tmp, "data")
		e.mem = &bench.MemSource{PID: e.srv.PID(), Admin: e.admin}
		config["target"] = "started"
	case "noop":
		n, err := bench.StartNoop("")
		if err != nil {
			return err
		}
		defer n.Close()
		e.target, e.key = n.URL, "sk_live_noop"
		config["target"] = "noop"
		info("target: a no-op server at %s (testing the tool, not eventd)", n.URL)
	default:
		e.target = strings.TrimRight(o.target, "/")
		e.key = o.key
		config["target"] = e.target
		if err := checkTarget(ctx, e.target, o.key); err != nil {
			return err
		}
		if o.adminURL != "" {
			e.admin = &bench.Admin{URL: strings.TrimRight(o.adminURL, "/"), Token: o.adminToken}
			e.mem = &bench.MemSource{Admin: e.admin}
		}
		info("target: %s; the ceilings run on this machine, so ratios only mean something if eventd does too", e.target)
	}

	// The ceilings.
	noopURL, noopPID, stopNoop, err := startCeiling(o.noopInProc, serveNoop(""), "--serve-noop", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("no-op ceiling: %w", err)
	}
	defer stopNoop()
	e.noopURL, e.noopPID = noopURL, noopPID
	// Its log beside eventd's data and the Pebble ceiling's store: the same disk.
	fsyncURL, fsyncPID, stopFsync, err := startCeiling(o.noopInProc, serveFsyncNoop("", tmp, o.fsyncDelay),
		"--serve-fsync-noop", "127.0.0.1:0", "--fsync-noop-dir", tmp, "--fsync-delay", o.fsyncDelay.String())
	if err != nil {
		return fmt.Errorf("fsync no-op ceiling: %w", err)
	}
	defer stopFsync()
	e.fsyncNoopURL, e.fsyncNoopPID = fsyncURL, fsyncPID
	e.pebble, err = bench.OpenPebbleBaseline(bench.PebbleOptions{Dir: filepath.Join(tmp, "pebble"), FsyncDelay: o.fsyncDelay})
	if err != nil {
		return fmt.Errorf("pebble ceiling: %w", err)
	}
	defer e.pebble.Close()
	for _, d := range []struct{ flag, dir string }{{"--pprof", o.pprofDir}, {"--trace", o.traceDir}} {
		if d.dir == "" {
			continue
		}
		if e.admin == nil {
			info("note: %s needs the admin API (started server, or --admin-url/--admin-token); nothing saved", d.flag)
		} else if err := os.MkdirAll(d.dir, 0o755); err != nil {
			return err
		}
	}

	var sampler *bench.MemSampler
	if e.mem != nil {
		// RSS only: a heap profile dump every second would perturb the runs.
		sampler = bench.StartMemSampler(e.mem, started, time.Second, 0)
	}
	rep := bench.Report{StartedAt: started.UTC(), Machine: bench.ThisMachine(), Config: config, LoadStart: loadStart}
	if !slices.Contains(o.scenarioList(), "analytics") {
		rep.NotDone = append(rep.NotDone, analyticsStatus(ctx, e))
	}

	prog := newProgress(os.Stderr)
	defer prog.stop()
	withMemory := func(sc *bench.ScenarioResult) {
		if sampler != nil {
			m := bench.AnalyzeMemory(bench.Between(sampler.Samples(), sc.StartS, sc.EndS), 0)
			sc.Memory = &m
		}
	}
	var results []*bench.ScenarioResult
	for _, name := range o.scenarioList() {
		sc, skipped, err := runScenario(ctx, e, prog, name, bench.PhaseFresh)
		if err != nil {
			return err
		}
		if skipped != "" {
			rep.NotDone = append(rep.NotDone, name+": "+skipped)
			prog.note("skipping %s: %s", name, skipped)
			continue
		}
		withMemory(sc)
		results = append(results, sc)
	}
	loaded, phase, err := runLoaded(ctx, e, prog, results, withMemory)
	if err != nil {
		return err
	}
	results = interleave(results, loaded)
	rep.Loaded = phase
	crossTargets(results)
	if o.soak > 0 {
		sk, err := runSoak(ctx, e, prog)
		if err != nil {
			return err
		}
		rep.Soak = sk
	}
	prog.stop()
	if sampler != nil {
		rep.Memory = sampler.Stop()
	}

	fmt.Println()
	if len(results) > 0 {
		bench.WriteTable(os.Stdout, results)
	}
	bench.WriteLoadedTable(os.Stdout, rep.Loaded)
	if rep.Loaded != nil {
		bench.WriteRestart(os.Stdout, rep.Loaded.Restart)
	}
	if sk := rep.Soak; sk != nil {
		fmt.Printf("\nsoak (%s, %v): %s\n  RSS %s -> %s, peak %s; slope %s/min (Go heap in use: %s/min); %s, p99 %s\n",
			sk.Workload, time.Duration(sk.Duration*float64(time.Second)).Round(time.Second), sk.Trend.FlatReason,
			bench.FormatBytes(float64(sk.Trend.StartRSS)), bench.FormatBytes(float64(sk.Trend.EndRSS)),
			bench.FormatBytes(float64(sk.Trend.PeakRSS)), bench.FormatBytes(sk.Trend.RSSSlope), bench.FormatBytes(sk.Trend.HeapSlope),
			bench.FormatRate(sk.Load.Rate, bench.UnitRequests), bench.FormatDuration(time.Duration(sk.Load.Latency.P99Us*1e3)))
	}
	for _, nd := range rep.NotDone {
		fmt.Printf("\nnot measured: %s", nd)
	}
	rep.LoadEnd = bench.LoadAvg()
	rep.ElapsedS = time.Since(started).Seconds()
	fmt.Printf("\n\nmachine: %d CPUs (%s), load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end\n",
		rep.Machine.CPUs, rep.Machine.CPUModel, loadStart[0], loadStart[1], loadStart[2], rep.LoadEnd[0], rep.LoadEnd[1], rep.LoadEnd[2])
	for _, sc := range results {
		rep.Scenarios = append(rep.Scenarios, bench.ScenarioJSON(sc, started))
	}
	if o.jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("results: %s\n", o.jsonOut)
	}
	if o.htmlOut != "" {
		f, err := os.Create(o.htmlOut)
		if err != nil {
			return err
		}
		if err := bench.WriteHTML(f, &rep); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Printf("report:  %s\n", o.htmlOut)
	}
	fmt.Printf("(%s total)\n", time.Since(started).Round(time.Second))
	return nil
}

// runScenario runs one scenario's warm-up and rounds (ABBA order), then its
// profiled runs; skipped says why a scenario could not run here.
//
// phase is bench.PhaseFresh, or bench.PhaseLoaded for the second run of an
// ingest scenario on loaded stores (named e.g. "single (loaded 5M)").
func runScenario(ctx context.Context, e *env, prog *progress, name, phase string) (*bench.ScenarioResult, string, error) {
	def := scenarioDefs[name]
	display := name
	if phase == bench.PhaseLoaded {
		display = bench.LoadedName(name, e.o.loadedEvents)
	}
	p := def.build(e)
	if p.needsAdmin && e.admin == nil {
		return nil, "needs the admin API to create keys (give --admin-url and --admin-token with --target)", nil
	}
	if p.needsEventd && e.srv == nil && e.admin == nil {
		return nil, "needs eventd (not the no-op target)", nil
	}
	sc := &bench.ScenarioResult{Name: display, Base: name, Phase: phase, Description: def.description,
		Eventd: &bench.Series{Name: p.eventd.name, Unit: p.eventd.unit}}
	sc.Load[0] = bench.LoadAvg()[0]
	sc.StartS = time.Since(e.origin).Seconds()
	if p.setup != nil {
		if err := p.setup(ctx, prog); err != nil {
			return nil, "", fmt.Errorf("%s: setting up: %w", name, err)
		}
	}
	series := map[string]*bench.Series{p.eventd.name: sc.Eventd}
	for _, c := range p.ceilings {
		s := &bench.Series{Name: c.name, Unit: c.unit}
		sc.Ceilings = append(sc.Ceilings, s)
		series[c.name] = s
	}
	for _, c := range p.others {
		s := &bench.Series{Name: c.name, Unit: c.unit}
		sc.Others = append(sc.Others, s)
		series[c.name] = s
	}
	all := append(append([]subject{p.eventd}, p.ceilings...), p.others...)
	if e.o.warmup > 0 {
		for _, s := range all {
			if s.noWarmup {
				continue
			}
			if _, err := measure(ctx, e, prog, s, e.o.warmup, fmt.Sprintf("%s warm-up", display)); err != nil {
				return nil, "", err
			}
		}
	}
	for r := 0; r < e.o.rounds; r++ {
		// ABBA order: which subject runs first in a round alternates, so
		// neither always profits from a cooler machine.
		order := all
		if r%2 == 1 {
			order = reversed(all)
		}
		for _, s := range order {
			res, err := measure(ctx, e, prog, s, e.o.duration, fmt.Sprintf("%s %d/%d", display, r+1, e.o.rounds))
			if err != nil {
				return nil, "", err
			}
			series[s.name].Add(res)
			if e.srv != nil && e.srv.Exited() {
				return nil, "", fmt.Errorf("eventd exited during the run (log %s):\n%s", e.srv.LogPath, e.srv.LogTail(20))
			}
		}
	}
	for _, x := range []struct {
		what, dir string
		run       func(context.Context, *env, *progress, string, subject) ([]string, error)
	}{{"profile", e.o.pprofDir, profileRun}, {"trace", e.o.traceDir, traceRun}} {
		if x.dir == "" || e.admin == nil {
			continue
		}
		for _, s := range all {
			if !s.server {
				continue
			}
			files, err := x.run(ctx, e, prog, display, s)
			if err != nil {
				prog.note("%s of %s %s: %v", x.what, display, s.name, err)
			}
			sc.Profiles = append(sc.Profiles, files...)
		}
	}
	if p.judge != nil {
		p.judge(sc)
	}
	if note := bench.StoreWorkNote(append(append([]*bench.Series{sc.Eventd}, sc.Ceilings...), sc.Others...)); note != "" {
		sc.Note("%s", note)
	}
	sc.EndS = time.Since(e.origin).Seconds()
	sc.Load[1] = bench.LoadAvg()[0]
	return sc, "", nil
}

// storeReading reads eventd's store metrics around a run of a subject
// that writes to it; a zero reading (not ok) otherwise.
func (e *env) storeReading(ctx context.Context, s subject) bench.StoreReading {
	if !s.server || e.admin == nil {
		return bench.StoreReading{}
	}
	// Bounded: a server that stopped answering fails the round itself,
	// not this reading.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := e.admin.Get(ctx, "/metrics")
	if err != nil {
		return bench.StoreReading{}
	}
	return bench.ReadStore(b)
}

// measure runs one subject once, with the progress line showing it.
func measure(ctx context.Context, e *env, prog *progress, s subject, d time.Duration, label string) (*bench.Result, error) {
	if s.prepare != nil {
		if err := s.prepare(ctx, prog); err != nil {
			return nil, fmt.Errorf("%s %s: preparing: %w", label, s.name, err)
		}
	}
	settle := s.settle && e.srv != nil
	if settle {
		waitIdle(ctx, e.srv.PID(), idleCores, settleMax)
	}
	prog.begin(fmt.Sprintf("%-18s %-22s", label, s.name), d, s.unit, s.eventsPer)
	before := e.storeReading(ctx, s)
	cpu := bench.StartCPU(s.proc(e))
	res, err := s.run(ctx, d, prog)
	cpu.Stop(res)
	if res != nil {
		res.Store = bench.StoreWorkBetween(before, e.storeReading(ctx, s))
	}
	if settle && res != nil {
		res.SettleCPU, res.HasSettle = settleCPU(ctx, e.srv.PID())
	}
	summary := ""
	if res != nil {
		rate := res.RequestsPerSec()
		if s.unit == bench.UnitEvents {
			rate = res.EventsPerSec()
		}
		summary = fmt.Sprintf("%s  p99 %s", bench.FormatRate(rate, s.unit), bench.FormatDuration(res.Latency.Percentile(99)))
		if res.Failed() > 0 {
			summary += fmt.Sprintf("  failed %d", res.Failed())
		}
		if res.Stream != nil {
			summary += fmt.Sprintf("  delivered %s, p99 %s", bench.FormatRate(res.Stream.MessagesPerSec(), "msgs/s"),
				bench.FormatDuration(res.Stream.Latency.Percentile(99)))
		}
	}
	prog.end(summary)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", label, s.name, err)
	}
	return res, nil
}

var nonSlug = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// profileRun runs a subject once more while the server records a CPU
// profile, and saves the allocation profile before and after; compare them
// with go tool pprof -base.
func profileRun(ctx context.Context, e *env, prog *progress, scenario string, s subject) ([]string, error) {
	secs := max(int(math.Ceil(e.o.duration.Seconds())), 3)
	base := filepath.Join(e.o.pprofDir, fileSlug(scenario)+"-"+fileSlug(s.name))
	files := []string{base + ".allocs.before.pprof", base + ".cpu.pprof", base + ".allocs.pprof"}
	if err := prepareOnce(ctx, prog, &s); err != nil {
		return nil, err
	}
	if err := e.admin.SaveProfile(ctx, "allocs", "", files[0]); err != nil {
		return nil, err
	}
	if _, err := recordDuring(ctx, e, prog, scenario+" profile", s, "profile", secs, files[1]); err != nil {
		return nil, err
	}
	if err := e.admin.SaveProfile(ctx, "allocs", "", files[2]); err != nil {
		return files[:2], err
	}
	return files, nil
}

// traceSeconds is the length of a --trace run's execution trace: a trace
// takes some 3 MB a second of a loaded eventd.
const traceSeconds = 2

// traceRun runs a subject once more while the server records an execution
// trace, for tools/tracegaps: where eventd waited rather than computed.
func traceRun(ctx context.Context, e *env, prog *progress, scenario string, s subject) ([]string, error) {
	file := filepath.Join(e.o.traceDir, fileSlug(scenario)+"-"+fileSlug(s.name)+".trace")
	if err := prepareOnce(ctx, prog, &s); err != nil {
		return nil, err
	}
	saved, err := recordDuring(ctx, e, prog, scenario+" trace", s, "trace", traceSeconds, file)
	if !saved {
		return nil, err
	}
	return []string{file}, err
}

// prepareOnce runs s's preparation (a backlog load) now, so that a
// recording is of the run, not of its preparation, and clears it so that
// measure does not run it again.
func prepareOnce(ctx context.Context, prog *progress, s *subject) error {
	if s.prepare == nil {
		return nil
	}
	err := s.prepare(ctx, prog)
	s.prepare = nil
	return err
}

// recordDuring runs subject s once more, for secs seconds and a little
// longer so that the whole recording window is under load, while the
// server records /debug/pprof/<name>?seconds=secs into file. saved says
// the recording was written; err is its failure, else the run's.
func recordDuring(ctx context.Context, e *env, prog *progress, label string, s subject, name string, secs int, file string) (saved bool, err error) {
	errc := make(chan error, 1)
	go func() { errc <- e.admin.SaveProfile(ctx, name, fmt.Sprintf("seconds=%d", secs), file) }()
	_, err = measure(ctx, e, prog, s, time.Duration(secs)*time.Second+700*time.Millisecond, label)
	if rerr := <-errc; rerr != nil {
		return false, rerr
	}
	return true, err
}

// fileSlug makes a scenario or subject name fit a file name.
func fileSlug(s string) string { return strings.Trim(nonSlug.ReplaceAllString(s, "-"), "-") }

// analyticsStatus says why the analytics scenario did not run.
func analyticsStatus(ctx context.Context, e *env) string {
	const skipped = "analytics: not in the default set (it loads 10 million events first); run --scenarios analytics"
	if e.key == "" || e.o.target == "noop" {
		return skipped
	}
	req, err := http.NewRequestWithContext(ctx, "GET", e.target+"/analytics", nil)
	if err != nil {
		return skipped
	}
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return skipped
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "analytics: the server does not serve GET /analytics (404)"
	}
	return skipped
}

func reversed(s []subject) []subject {
	out := make([]subject, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func startEventd(ctx context.Context, o *options, tmp string, config map[string]any) (*bench.Eventd, string, error) {
	bin := o.eventdBin
	if bin == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", err
		}
		root, err := bench.FindRepoRoot(wd)
		if err != nil {
			return nil, "", fmt.Errorf("%v; pass --eventd-bin or --target", err)
		}
		bin = filepath.Join(tmp, "eventd")
		info("building eventd (go build ./cmd/eventd in %s)", root)
		if err := bench.BuildEventd(ctx, root, bin); err != nil {
			return nil, "", err
		}
	}
	config["eventd_bin"] = bin
	extra := strings.Fields(o.eventdArgs)
	if len(extra) > 0 {
		config["eventd_args"] = extra
	}
	if o.fsyncDelay > 0 {
		if hasFlag(bin, "fsync-delay") {
			extra = append(extra, "--fsync-delay", o.fsyncDelay.String())
		} else {
			info("note: eventd has no --fsync-delay flag; only the Pebble ceiling gets the %v delay", o.fsyncDelay)
		}
	}
	srv, err := bench.StartEventd(ctx, bench.EventdOptions{
		Bin: bin, DataDir: filepath.Join(tmp, "data"), LogPath: filepath.Join(tmp, "eventd.log"), Args: extra,
	})
	if err != nil {
		return nil, "", err
	}
	_, key, err := srv.CreateProjectKey(ctx, "bench", "enterprise", &bench.BenchLimits)
	if err != nil {
		_ = srv.Stop(15 * time.Second)
		return nil, "", fmt.Errorf("creating the bench project: %w (log %s)", err, srv.LogPath)
	}
	info("eventd pid %d at %s (log %s)", srv.PID(), srv.URL, srv.LogPath)
	return srv, key, nil
}

// checkTarget fails fast, with the server's own answer, when the target is
// down or the key is not accepted, instead of a table full of errors.
func checkTarget(ctx context.Context, target, key string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", target+"/verify", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("target: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("target: GET /verify with the key: %s %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// hasFlag asks the binary's own help whether `serve` takes a flag, so the
// bench works with servers older and newer than itself.
func hasFlag(bin, name string) bool {
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	return strings.Contains(string(out), "-"+name+" ") || strings.Contains(string(out), "-"+name+"\n")
}

// info prints a status line to stderr, out of the way of the table on stdout.
func info(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}
