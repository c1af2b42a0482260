// Command eventd-bench measures eventd against its ceilings on this machine:
// a no-op fasthttp server (the HTTP ceiling) and raw Pebble commits with Sync
// (the storage ceiling), alternating with eventd in short rounds so that
// machine drift cancels out, and prints a table of figures and ratios.
//
// By default it builds ./cmd/eventd, starts it on loopback with a fresh data
// directory and creates an enterprise project with custom limits for the run.
// With --target URL --key sk_... it drives a server that is already running.
//
//	go run ./cmd/eventd-bench                       # default set, about 2 minutes
//	go run ./cmd/eventd-bench --scenarios single --rounds 5 --duration 10s
//	go run ./cmd/eventd-bench --fsync-delay 1ms     # emulate a cloud disk
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eventd/eventd/bench"
)

func main() { os.Exit(run(os.Args[1:])) }

type options struct {
	target     string
	key        string
	eventdBin  string
	scenarios  string
	duration   time.Duration
	rounds     int
	warmup     time.Duration
	conns      int
	jsonOut    string
	fsyncDelay time.Duration
	timeout    time.Duration
	noopInProc bool
	keep       bool
	serveNoop  string
	batchSize  int
}

// hiddenFlags are for the bench's own machinery and tests, not for users.
var hiddenFlags = map[string]bool{"serve-noop": true}

func run(args []string) int {
	var o options
	fs := flag.NewFlagSet("eventd-bench", flag.ContinueOnError)
	fs.StringVar(&o.target, "target", "", "base URL of a running eventd (needs --key); empty: build and start one; \"noop\": bench a no-op server (tests the tool)")
	fs.StringVar(&o.key, "key", "", "secret live key (sk_live_...) for --target; its project needs limits above the load")
	fs.StringVar(&o.eventdBin, "eventd-bin", "", "eventd binary to start (default: go build ./cmd/eventd from the repository)")
	fs.StringVar(&o.scenarios, "scenarios", "single,batch", "comma-separated scenarios: "+strings.Join(scenarioNames(), ", "))
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "length of one round of one subject")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds per scenario; eventd and each ceiling run once per round, alternating")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unrecorded warm-up of each subject before a scenario's first round")
	fs.IntVar(&o.conns, "conns", 0, "connections (and Pebble committers) for every scenario; 0: the scenario's own (single 64, batch 16)")
	fs.IntVar(&o.batchSize, "batch-size", 100, "events per batch request and per Pebble batch commit")
	fs.StringVar(&o.jsonOut, "json", "bench-results.json", "results file; empty: none")
	fs.DurationVar(&o.fsyncDelay, "fsync-delay", 0, "extra time per fsync in the Pebble ceiling (and in eventd when it has such a flag)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.BoolVar(&o.noopInProc, "noop-inproc", false, "serve the no-op ceiling inside this process instead of a child process")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (server data, log, Pebble store)")
	fs.StringVar(&o.serveNoop, "serve-noop", "", "")
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
  eventd-bench                                   build, start and bench eventd (about 2 minutes)
  eventd-bench --scenarios single --rounds 5 --duration 10s
  eventd-bench --target http://127.0.0.1:8080 --key sk_live_...
  eventd-bench --fsync-delay 1ms                 a slow disk for the Pebble ceiling
`)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if o.serveNoop != "" {
		return serveNoopChild(o.serveNoop)
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "eventd-bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench1(ctx, &o); err != nil {
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
	if o.batchSize < 1 || o.batchSize > 100 {
		return errors.New("--batch-size must be 1 to 100 (eventd's limit)")
	}
	for _, name := range o.scenarioList() {
		if _, ok := scenarioDefs[name]; !ok {
			return fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(scenarioNames(), ", "))
		}
	}
	return nil
}

func (o *options) scenarioList() []string {
	var out []string
	for _, s := range strings.Split(o.scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// env is what a scenario can draw on: the target, its key, the ceilings.
type env struct {
	o        *options
	target   string
	key      string
	noopURL  string
	pebble   *bench.PebbleBaseline
	tmpl     *bench.Template
	runIndex uint64
}

// seqBase gives every run its own range of sequence numbers, so visitor ids
// and skus never repeat between rounds.
func (e *env) seqBase() uint64 {
	e.runIndex++
	return 1_000_000_000 + e.runIndex*100_000_000
}

// subject is one thing measured in a round: eventd or a ceiling.
type subject struct {
	name      string
	unit      string
	eventsPer int // for the progress line's events/s
	run       func(ctx context.Context, e *env, d time.Duration, p *progress) (*bench.Result, error)
}

type scenarioDef struct {
	description string
	build       func(e *env) (eventd subject, ceilings []subject)
}

var scenarioDefs = map[string]scenarioDef{
	"single": {
		description: "POST /events, one ~230-byte event per request, closed loop",
		build: func(e *env) (subject, []subject) {
			conns := e.conns(64)
			req := bench.EventRequest("/events", e.key, e.tmpl)
			return httpSubject("eventd", e.target, conns, req, 1, nil, bench.UnitRequests),
				[]subject{
					httpSubject("noop", e.noopURL, conns, req, 1, nil, bench.UnitRequests),
					pebbleSubject("pebble", conns, 1, bench.UnitRequests),
				}
		},
	},
	"batch": {
		description: "POST /events/batch of 100 events, closed loop",
		build: func(e *env) (subject, []subject) {
			conns := e.conns(16)
			n := e.o.batchSize
			req := bench.BatchRequest("/events/batch", e.key, e.tmpl, n)
			return httpSubject("eventd", e.target, conns, req, n, bench.BatchAccepted, bench.UnitEvents),
				[]subject{pebbleSubject("pebble", conns, n, bench.UnitEvents)}
		},
	},
}

func scenarioNames() []string { return []string{"single", "batch"} }

func (e *env) conns(def int) int {
	if e.o.conns > 0 {
		return e.o.conns
	}
	return def
}

func httpSubject(name, url string, conns int, req bench.RequestFunc, eventsPer int, accepted bench.AcceptedFunc, unit string) subject {
	return subject{name: name, unit: unit, eventsPer: eventsPer,
		run: func(ctx context.Context, e *env, d time.Duration, p *progress) (*bench.Result, error) {
			g, err := bench.NewGenerator(bench.Config{
				Target: url, Mode: bench.ClosedLoop, Conns: conns, Duration: d, Timeout: e.o.timeout,
				Request: req, EventsPerRequest: eventsPer, Accepted: accepted, SeqBase: e.seqBase(),
			})
			if err != nil {
				return nil, err
			}
			defer g.Close()
			p.source(g.Progress)
			return g.Run(ctx)
		}}
}

func pebbleSubject(name string, committers, perCommit int, unit string) subject {
	return subject{name: name, unit: unit, eventsPer: perCommit,
		run: func(ctx context.Context, e *env, d time.Duration, p *progress) (*bench.Result, error) {
			done0, ok0 := e.pebble.Progress()
			p.source(func() (uint64, uint64) {
				d, o := e.pebble.Progress()
				return d - done0, o - ok0
			})
			return e.pebble.Run(ctx, bench.PebbleRun{Committers: committers, EventsPerCommit: perCommit, Duration: d})
		}}
}

func bench1(ctx context.Context, o *options) error {
	started := time.Now()
	tmp, err := os.MkdirTemp("", "eventd-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		info("keeping %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	e := &env{o: o, tmpl: bench.NewTemplate(bench.EventTemplate)}
	config := map[string]any{
		"duration_s": o.duration.Seconds(), "rounds": o.rounds, "warmup_s": o.warmup.Seconds(),
		"conns": o.conns, "batch_size": o.batchSize, "fsync_delay_ms": float64(o.fsyncDelay) / 1e6,
		"scenarios": o.scenarioList(), "timeout_s": o.timeout.Seconds(),
	}

	// The target.
	var srv *bench.Eventd
	switch o.target {
	case "":
		srv, e.key, err = startEventd(ctx, o, tmp, config)
		if err != nil {
			return err
		}
		defer func() {
			if err := srv.Stop(15 * time.Second); err != nil {
				info("stopping eventd: %v (log %s)", err, srv.LogPath)
			}
		}()
		e.target = srv.URL
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
		config["target"] = e.target
		if err := checkTarget(ctx, e.target, o.key); err != nil {
			return err
		}
		info("target: %s; the ceilings run on this machine, so ratios only mean something if eventd does too", e.target)
	}

	// The ceilings.
	noopURL, stopNoop, err := startNoopCeiling(o.noopInProc)
	if err != nil {
		return fmt.Errorf("no-op ceiling: %w", err)
	}
	defer stopNoop()
	e.noopURL = noopURL
	e.pebble, err = bench.OpenPebbleBaseline(bench.PebbleOptions{Dir: filepath.Join(tmp, "pebble"), FsyncDelay: o.fsyncDelay})
	if err != nil {
		return fmt.Errorf("pebble ceiling: %w", err)
	}
	defer e.pebble.Close()

	prog := newProgress(os.Stderr)
	defer prog.stop()
	var results []*bench.ScenarioResult
	for _, name := range o.scenarioList() {
		def := scenarioDefs[name]
		ev, ceilings := def.build(e)
		sc := &bench.ScenarioResult{Name: name, Description: def.description,
			Eventd: &bench.Series{Name: ev.name, Unit: ev.unit}}
		series := map[string]*bench.Series{ev.name: sc.Eventd}
		for _, c := range ceilings {
			s := &bench.Series{Name: c.name, Unit: c.unit}
			sc.Ceilings = append(sc.Ceilings, s)
			series[c.name] = s
		}
		all := append([]subject{ev}, ceilings...)
		if o.warmup > 0 {
			for _, s := range all {
				if _, err := measure(ctx, e, prog, s, o.warmup, fmt.Sprintf("%s warm-up", name)); err != nil {
					return err
				}
			}
		}
		for r := 0; r < o.rounds; r++ {
			// ABBA order: which subject runs first in a round alternates, so
			// neither always profits from a cooler machine.
			order := all
			if r%2 == 1 {
				order = reversed(all)
			}
			for _, s := range order {
				res, err := measure(ctx, e, prog, s, o.duration, fmt.Sprintf("%s %d/%d", name, r+1, o.rounds))
				if err != nil {
					return err
				}
				series[s.name].Add(res)
				if srv != nil && srv.Exited() {
					return fmt.Errorf("eventd exited during the run (log %s):\n%s", srv.LogPath, srv.LogTail(20))
				}
			}
		}
		results = append(results, sc)
	}
	prog.stop()

	fmt.Println()
	bench.WriteTable(os.Stdout, results)
	if o.jsonOut != "" {
		rep := bench.Report{StartedAt: started.UTC(), Machine: bench.ThisMachine(), Config: config}
		for _, sc := range results {
			rep.Scenarios = append(rep.Scenarios, bench.ScenarioJSON(sc))
		}
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Printf("\nresults: %s (%s total)\n", o.jsonOut, time.Since(started).Round(time.Second))
	}
	return nil
}

// measure runs one subject once, with the progress line showing it.
func measure(ctx context.Context, e *env, prog *progress, s subject, d time.Duration, label string) (*bench.Result, error) {
	prog.begin(fmt.Sprintf("%-16s %-7s", label, s.name), d, s.unit, s.eventsPer)
	res, err := s.run(ctx, e, d, prog)
	prog.end()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", label, s.name, err)
	}
	return res, nil
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
	var extra []string
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

// startNoopCeiling serves the no-op server in a child process by default:
// eventd runs in its own process with its own Go scheduler, and the ceiling
// should be measured the same way.
func startNoopCeiling(inProc bool) (url string, stop func(), err error) {
	if inProc {
		n, err := bench.StartNoop("")
		if err != nil {
			return "", nil, err
		}
		return n.URL, func() { n.Close() }, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "--serve-noop", "127.0.0.1:0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("child did not report its address (%q, %v)", line, err)
	}
	stop = func() {
		stdin.Close() // the child exits when its stdin closes
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	return strings.TrimSpace(line), stop, nil
}

// serveNoopChild is the child side: serve, print the URL, and exit when the
// parent closes stdin (also when the parent dies) or on a signal.
func serveNoopChild(addr string) int {
	n, err := bench.StartNoop(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "noop:", err)
		return 1
	}
	fmt.Println(n.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(eof) }()
	select {
	case <-sig:
	case <-eof:
	}
	n.Close()
	return 0
}

// info prints a status line to stderr, out of the way of the table on stdout.
func info(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// progress keeps one line on stderr up to date with \r while a subject runs.
type progress struct {
	w      io.Writer
	mu     sync.Mutex
	label  string
	unit   string
	per    int
	d      time.Duration
	start  time.Time
	src    func() (done, ok uint64)
	width  int
	quit   chan struct{}
	closed sync.Once
	wg     sync.WaitGroup
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w, quit: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

func (p *progress) begin(label string, d time.Duration, unit string, per int) {
	p.mu.Lock()
	p.label, p.d, p.unit, p.per, p.start, p.src = label, d, unit, per, time.Now(), nil
	p.mu.Unlock()
	p.draw()
}

func (p *progress) source(f func() (uint64, uint64)) {
	p.mu.Lock()
	p.src = f
	p.mu.Unlock()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.label == "" {
		return
	}
	el := time.Since(p.start)
	line := fmt.Sprintf("%s %4.1fs/%v", p.label, el.Seconds(), p.d)
	if p.src != nil {
		done, ok := p.src()
		rate := float64(ok) / el.Seconds()
		if p.unit == bench.UnitEvents {
			rate *= float64(p.per)
		}
		line += "  " + bench.FormatRate(rate, p.unit)
		if done > ok {
			line += fmt.Sprintf("  failed %d", done-ok)
		}
	}
	p.write(line)
}

// write redraws the line, padding over a longer previous one.
func (p *progress) write(line string) {
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprint(p.w, "\r"+line+pad)
	p.width = len(line)
}

func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.label, p.src = "", nil
	p.write("")
	fmt.Fprint(p.w, "\r")
}

func (p *progress) stop() {
	p.closed.Do(func() {
		close(p.quit)
		p.wg.Wait()
	})
}
