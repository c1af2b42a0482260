package bench

import (
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Units a scenario is measured in.
const (
	UnitRequests = "req/s"
	UnitEvents   = "events/s"
)

// Series gathers one subject's rounds (eventd or a ceiling) in one scenario.
// Throughput is averaged over rounds; latency histograms are merged, since
// percentiles cannot be averaged.
type Series struct {
	Name   string
	Unit   string
	Rounds []*Result
}

// Add records one round.
func (s *Series) Add(r *Result) { s.Rounds = append(s.Rounds, r) }

// RoundRate is a round's figure in the series' unit.
func (s *Series) RoundRate(r *Result) float64 {
	if s.Unit == UnitEvents {
		return r.EventsPerSec()
	}
	return r.RequestsPerSec()
}

// Rate is the mean of the rounds' figures.
func (s *Series) Rate() float64 {
	if len(s.Rounds) == 0 {
		return 0
	}
	var sum float64
	for _, r := range s.Rounds {
		sum += s.RoundRate(r)
	}
	return sum / float64(len(s.Rounds))
}

// Spread is the lowest and highest round, so a reader sees how steady the
// figure was.
func (s *Series) Spread() (lo, hi float64) {
	for i, r := range s.Rounds {
		v := s.RoundRate(r)
		if i == 0 || v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// RoundPercentiles is each round's latency percentile p, in the order the
// rounds ran, as "10.2ms / 5.64ms": a tail made in one round (the first
// after another scenario's writes, which the server then compacts) shows
// where the merged percentile hides it.
func (s *Series) RoundPercentiles(p float64) string {
	parts := make([]string, 0, len(s.Rounds))
	for _, r := range s.Rounds {
		parts = append(parts, FormatDuration(r.Latency.Percentile(p)))
	}
	return strings.Join(parts, " / ")
}

// Total merges every round into one result for the latency columns and the
// error breakdown.
func (s *Series) Total() *Result {
	t := &Result{Statuses: map[int]uint64{}, FailedStatuses: map[int]uint64{}, Errors: map[string]uint64{}}
	for _, r := range s.Rounds {
		legacy := r.FailedStatuses == nil // built by hand (tests): infer from Expect
		for k, v := range r.Statuses {
			if legacy && k != r.Expect {
				t.FailedStatuses[k] += v
			}
		}
		for k, v := range r.FailedStatuses {
			t.FailedStatuses[k] += v
		}
		for i, c := range r.Classes {
			if i >= len(t.Classes) {
				t.Classes = append(t.Classes, &ClassResult{Name: c.Name})
			}
			t.Classes[i].Requests += c.Requests
			t.Classes[i].OK += c.OK
			t.Classes[i].Latency.Merge(&c.Latency)
		}
		if r.Stream != nil {
			if t.Stream == nil {
				t.Stream = &StreamResult{}
			}
			t.Stream.Merge(r.Stream)
		}
		t.Mode, t.Conns, t.Rate, t.Expect = r.Mode, r.Conns, r.Rate, r.Expect
		t.Elapsed += r.Elapsed
		t.ServerCPU += r.ServerCPU
		t.HasServerCPU = t.HasServerCPU || r.HasServerCPU
		t.ClientCPU += r.ClientCPU
		t.ServerRunqWait += r.ServerRunqWait
		t.SettleCPU += r.SettleCPU
		t.HasSettle = t.HasSettle || r.HasSettle
		t.Store.add(r.Store)
		t.Requests += r.Requests
		t.OK += r.OK
		t.Events += r.Events
		t.RejectedEvents += r.RejectedEvents
		t.BytesSent += r.BytesSent
		t.BytesReceived += r.BytesReceived
		t.Dials += r.Dials
		t.Latency.Merge(&r.Latency)
		t.Service.Merge(&r.Service)
		for k, v := range r.Statuses {
			t.Statuses[k] += v
		}
		for k, v := range r.Errors {
			t.Errors[k] += v
		}
	}
	return t
}

// ScenarioResult pairs eventd's series with the ceilings it is compared to.
type ScenarioResult struct {
	Name        string
	Description string
	Eventd      *Series
	Ceilings    []*Series
	// Base is the scenario run (Name without the phase: "single"), and
	// Phase PhaseFresh or PhaseLoaded; both empty in results built by hand.
	Base, Phase string
	// Others are further measurements of eventd in the scenario that have
	// no ceiling of their own (the stream's fixed-rate delivery run).
	Others []*Series
	// Targets are the goals, checked against the figures.
	Targets []Target
	// Notes are scenario-specific figures and findings, one line each.
	Notes []string
	// Memory is the server's resident memory during the scenario.
	Memory *MemTrend
	// Profiles lists the pprof files saved for the scenario.
	Profiles []string
	// Load is the 1-minute load average before and after the scenario.
	Load [2]float64
	// StartS and EndS place the scenario on the bench's clock (seconds).
	StartS, EndS float64
}

// Target is one goal and whether the run met it.
type Target struct {
	Name string `json:"name"`
	Goal string `json:"goal"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// Check appends a target.
func (sc *ScenarioResult) Check(name, goal, got string, met bool) {
	sc.Targets = append(sc.Targets, Target{Name: name, Goal: goal, Got: got, Met: met})
}

// Note appends a line of findings.
func (sc *ScenarioResult) Note(format string, args ...any) {
	sc.Notes = append(sc.Notes, fmt.Sprintf(format, args...))
}

// Ratio is eventd's figure over a ceiling's; 0 when either is missing.
func Ratio(eventd, ceiling *Series) float64 {
	c := ceiling.Rate()
	if eventd == nil || c == 0 {
		return 0
	}
	return eventd.Rate() / c
}

// WriteTable prints the human summary: one row per scenario and ceiling, the
// latency columns being eventd's, then each scenario's targets and notes and
// a breakdown of every failure.
func WriteTable(w io.Writer, results []*ScenarioResult) {
	nameW, ceilW := len("scenario"), 0
	for _, sc := range results {
		nameW = max(nameW, len(sc.Name))
		for _, c := range sc.Ceilings {
			ceilW = max(ceilW, len(c.Name)+2)
		}
		for _, o := range sc.Others {
			nameW = max(nameW, len(o.Name)+2)
		}
	}
	// Names are padded by hand: tabwriter aligns every column one way, and
	// numbers read best right-aligned.
	left := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-len(s))) }
	latency := func(s *Series) string {
		t := s.Total()
		return fmt.Sprintf("%s\t%s\t%s", FormatDuration(t.Latency.Percentile(50)),
			FormatDuration(t.Latency.Percentile(99)), FormatDuration(t.Latency.Percentile(99.9)))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\teventd\tceiling\t%s\tratio\tp50\tp99\tp99.9\t\n", left("scenario", nameW), left("", ceilW))
	for _, sc := range results {
		rows := max(len(sc.Ceilings), 1)
		for i := 0; i < rows; i++ {
			name, e, lat := "", "", "\t\t"
			if i == 0 {
				name = sc.Name
				if sc.Eventd != nil {
					e = FormatRate(sc.Eventd.Rate(), sc.Eventd.Unit)
					lat = latency(sc.Eventd)
				}
			}
			ceil, cname, ratio := "", "", ""
			if i < len(sc.Ceilings) {
				c := sc.Ceilings[i]
				ceil, cname, ratio = FormatRate(c.Rate(), c.Unit), "("+c.Name+")", fmt.Sprintf("%.2f", Ratio(sc.Eventd, c))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", left(name, nameW), e, ceil, left(cname, ceilW), ratio, lat)
		}
		for _, o := range sc.Others {
			fmt.Fprintf(tw, "%s\t%s\t\t%s\t\t%s\t\n", left("  "+o.Name, nameW), FormatRate(o.Rate(), o.Unit), left("", ceilW), latency(o))
		}
	}
	tw.Flush()
	for _, sc := range results {
		if len(sc.Targets) == 0 && len(sc.Notes) == 0 && sc.Memory == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s (load %.2f -> %.2f):\n", sc.Name, sc.Load[0], sc.Load[1])
		for _, t := range sc.Targets {
			verdict := "met   "
			if !t.Met {
				verdict = "MISSED"
			}
			fmt.Fprintf(w, "  %s %s: %s (goal %s)\n", verdict, t.Name, t.Got, t.Goal)
		}
		for _, n := range sc.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
		var cpu []string
		for _, s := range append(append([]*Series{sc.Eventd}, sc.Ceilings...), sc.Others...) {
			if s != nil {
				if c := CPUText(s); c != "" {
					cpu = append(cpu, c)
				}
			}
		}
		if len(cpu) > 0 {
			fmt.Fprintf(w, "  - CPU: %s\n", strings.Join(cpu, "; "))
		}
		if m := sc.Memory; m != nil && m.Samples > 0 {
			fmt.Fprintf(w, "  - server RSS %s -> %s (peak %s, %d samples)\n", FormatBytes(float64(m.StartRSS)),
				FormatBytes(float64(m.EndRSS)), FormatBytes(float64(m.PeakRSS)), m.Samples)
		}
		for _, p := range sc.Profiles {
			fmt.Fprintf(w, "  - profile %s\n", p)
		}
	}
	first := true
	for _, sc := range results {
		for _, s := range append(append([]*Series{sc.Eventd}, sc.Ceilings...), sc.Others...) {
			if s == nil {
				continue
			}
			if b := Breakdown(s.Total()); b != "" {
				if first {
					fmt.Fprintln(w)
					first = false
				}
				fmt.Fprintf(w, "%s / %s: %s\n", sc.Name, s.Name, b)
			}
		}
	}
}

// Breakdown lists what went wrong in a result ("" when nothing did):
// unexpected statuses, transport errors and rejected batch entries.
func Breakdown(r *Result) string {
	if r.Failed() == 0 && r.RejectedEvents == 0 {
		return ""
	}
	var parts []string
	failed := r.FailedStatuses
	if failed == nil {
		failed = map[int]uint64{}
		for code, n := range r.Statuses {
			if code != r.Expect {
				failed[code] = n
			}
		}
	}
	for _, code := range slices.Sorted(maps.Keys(failed)) {
		if failed[code] > 0 {
			parts = append(parts, fmt.Sprintf("%d×%d", failed[code], code))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
		parts = append(parts, fmt.Sprintf("%d×%s", r.Errors[k], k))
	}
	if r.RejectedEvents > 0 {
		parts = append(parts, fmt.Sprintf("%d events rejected inside 201 batches", r.RejectedEvents))
	}
	return fmt.Sprintf("%d of %d requests failed: %s", r.Failed(), r.Requests, strings.Join(parts, ", "))
}

// FormatRate prints 12345.6 as "12,346 req/s".
func FormatRate(v float64, unit string) string {
	return groupThousands(int64(v+0.5)) + " " + unit
}

func groupThousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// FormatDuration prints latencies with three significant digits in the unit
// that suits them (µs, ms, s), which time.Duration's String does not.
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return sig3(float64(d)/1e3) + "µs"
	case d < time.Second:
		return sig3(float64(d)/1e6) + "ms"
	default:
		return sig3(d.Seconds()) + "s"
	}
}

func sig3(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// Machine describes where the figures were taken; ratios travel between
// machines, absolute figures do not.
type Machine struct {
	Hostname  string `json:"hostname"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	GoVersion string `json:"go_version"`
}

// ThisMachine describes the machine the bench runs on.
func ThisMachine() Machine {
	h, _ := os.Hostname()
	m := Machine{Hostname: h, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// Report is bench-results.json: everything the table shows plus per-round
// figures, per-second throughput and latency buckets for charts.
type Report struct {
	StartedAt time.Time        `json:"started_at"`
	Machine   Machine          `json:"machine"`
	Config    map[string]any   `json:"config"`
	Scenarios []ScenarioReport `json:"scenarios"`
	// LoadAvg is /proc/loadavg (1, 5, 15 minutes) at the start and the end.
	LoadStart [3]float64 `json:"load_avg_start"`
	LoadEnd   [3]float64 `json:"load_avg_end"`
	// Memory is the server's memory sampled through the whole run.
	Memory []MemSample `json:"server_memory,omitempty"`
	// Soak is the long-run memory check (--soak).
	Soak *SoakReport `json:"soak,omitempty"`
	// Loaded is the loaded phase: the stores' bulk loads and the fresh and
	// loaded figures side by side.
	Loaded *LoadedPhase `json:"loaded,omitempty"`
	// NotDone lists scenarios the suite does not run yet, and why.
	NotDone []string `json:"not_done,omitempty"`
	// ElapsedS is the whole run's length.
	ElapsedS float64 `json:"elapsed_s"`
}

// SoakReport is the long run that checks that memory stays flat.
type SoakReport struct {
	Workload string       `json:"workload"`
	Duration float64      `json:"duration_s"`
	Load     SeriesReport `json:"load"`
	Samples  []MemSample  `json:"samples"`
	Trend    MemTrend     `json:"trend"`
}

// ScenarioReport is one scenario in the JSON file.
type ScenarioReport struct {
	Name        string          `json:"name"`
	Scenario    string          `json:"scenario,omitempty"`
	Phase       string          `json:"phase,omitempty"`
	Description string          `json:"description"`
	Unit        string          `json:"unit"`
	Eventd      *SeriesReport   `json:"eventd,omitempty"`
	Ceilings    []CeilingReport `json:"ceilings"`
	Others      []SeriesReport  `json:"others,omitempty"`
	Targets     []Target        `json:"targets,omitempty"`
	Notes       []string        `json:"notes,omitempty"`
	Memory      *MemTrend       `json:"server_memory,omitempty"`
	Profiles    []string        `json:"profiles,omitempty"`
	LoadAvg     [2]float64      `json:"load_avg_1m"`
	StartS      float64         `json:"start_s"`
	EndS        float64         `json:"end_s"`
}

// CeilingReport is a baseline and eventd's ratio to it.
type CeilingReport struct {
	SeriesReport
	Ratio float64 `json:"ratio"`
}

// SeriesReport is one subject's rounds, merged and one by one.
type SeriesReport struct {
	Name           string            `json:"name"`
	Mode           string            `json:"mode"`
	Conns          int               `json:"conns"`
	Rate           float64           `json:"rate"`
	RateMin        float64           `json:"rate_min"`
	RateMax        float64           `json:"rate_max"`
	Requests       uint64            `json:"requests"`
	OK             uint64            `json:"ok"`
	Events         uint64            `json:"events"`
	RejectedEvents uint64            `json:"rejected_events"`
	Statuses       map[string]uint64 `json:"statuses"`
	Errors         map[string]uint64 `json:"errors"`
	BytesSent      uint64            `json:"bytes_sent"`
	BytesReceived  uint64            `json:"bytes_received"`
	Dials          uint64            `json:"dials"`
	Latency        LatencySummary    `json:"latency"`
	Service        LatencySummary    `json:"service_latency"`
	Histogram      []HistogramBucket `json:"latency_histogram"`
	Classes        []ClassReport     `json:"classes,omitempty"`
	Stream         *StreamReport     `json:"stream,omitempty"`
	// CPU: cores the server and the generator kept busy on average, and the
	// server's CPU per successful request (0 when it could not be read).
	ServerCores        float64       `json:"server_cpu_cores"`
	ClientCores        float64       `json:"client_cpu_cores"`
	ServerCPUPerOKUs   float64       `json:"server_cpu_us_per_ok"`
	ServerRunqWaitPerS float64       `json:"server_runqueue_wait_s_per_s"`
	Rounds             []RoundReport `json:"rounds"`
}

// CPUCores is the average number of cores a CPU time kept busy over d.
func CPUCores(cpu, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return cpu.Seconds() / d.Seconds()
}

// CPUText sums up a series' CPU use for the table's notes.
func CPUText(s *Series) string {
	t := s.Total()
	if !t.HasServerCPU || t.Elapsed <= 0 {
		return ""
	}
	per := ""
	if t.OK > 0 {
		per = fmt.Sprintf(", %s CPU per request", FormatDuration(t.ServerCPU/time.Duration(t.OK)))
		if s.Unit == UnitEvents && t.Events > 0 {
			per = fmt.Sprintf(", %s CPU per event", FormatDuration(t.ServerCPU/time.Duration(t.Events)))
		}
	}
	gen := ""
	if t.ServerRunqWait > 0 {
		gen = fmt.Sprintf(", waited %.2f s/s for a CPU", CPUCores(t.ServerRunqWait, t.Elapsed))
	}
	if t.ClientCPU > 0 {
		gen += fmt.Sprintf("; generator %.2f cores", CPUCores(t.ClientCPU, t.Elapsed))
	}
	if st := t.Stream; st != nil && st.HasClientCPU {
		gen += fmt.Sprintf("; subscribers %.2f cores", CPUCores(st.ClientCPU, t.Elapsed))
		if st.Delivered > 0 {
			gen += fmt.Sprintf(", %s CPU per message", FormatDuration(st.ClientCPU/time.Duration(st.Delivered)))
		}
	}
	return fmt.Sprintf("%s %.2f cores%s%s", s.Name, CPUCores(t.ServerCPU, t.Elapsed), per, gen)
}

// ClassReport is one class of requests (e.g. reads in the mixed scenario).
type ClassReport struct {
	Name     string         `json:"name"`
	Requests uint64         `json:"requests"`
	OK       uint64         `json:"ok"`
	Latency  LatencySummary `json:"latency"`
}

// StreamReport is what /stream subscribers received.
type StreamReport struct {
	Subscribers      int               `json:"subscribers"`
	Delivered        uint64            `json:"delivered"`
	Expected         uint64            `json:"expected"`
	MessagesPerSec   float64           `json:"messages_per_s"`
	Latency          LatencySummary    `json:"delivery_latency"`
	CreatedLatency   LatencySummary    `json:"delivery_latency_from_created_at"`
	Histogram        []HistogramBucket `json:"delivery_histogram"`
	Closes           map[string]uint64 `json:"closes"`
	SlowConsumerMsgs uint64            `json:"slow_consumer_messages"`
	Reconnects       uint64            `json:"reconnects"`
	DialErrors       uint64            `json:"dial_errors"`
	Acks             uint64            `json:"acks,omitempty"`
	AckErrors        uint64            `json:"ack_errors,omitempty"`
	// ClientCPUS is the CPU the subscribers' process used, when they ran in
	// one (0: not measured apart).
	ClientCPUS float64 `json:"subscriber_cpu_s,omitempty"`
}

// StreamJSON converts a stream result.
func StreamJSON(r *StreamResult) *StreamReport {
	if r == nil {
		return nil
	}
	return &StreamReport{
		Subscribers: r.Subscribers, Delivered: r.Delivered, Expected: r.Expected,
		MessagesPerSec: r.MessagesPerSec(), Latency: r.Latency.Summary(),
		CreatedLatency: r.CreatedLatency.Summary(), Histogram: r.Latency.Buckets(),
		Closes: r.Closes, SlowConsumerMsgs: r.SlowConsumer, Reconnects: r.Reconnects, DialErrors: r.DialErrors,
		Acks: r.Acks, AckErrors: r.AckErrors, ClientCPUS: r.ClientCPU.Seconds(),
	}
}

// RoundReport is one round of a series.
type RoundReport struct {
	StartS    float64        `json:"start_s"` // on the bench's clock
	Rate      float64        `json:"rate"`
	ElapsedS  float64        `json:"elapsed_s"`
	Requests  uint64         `json:"requests"`
	OK        uint64         `json:"ok"`
	Events    uint64         `json:"events"`
	Latency   LatencySummary `json:"latency"`
	PerSecond []Sample       `json:"per_second"`
}

// SeriesJSON converts a series for the results file; origin is the bench's
// start, to place rounds in time (zero: rounds start at 0).
func SeriesJSON(s *Series, origin time.Time) SeriesReport {
	t := s.Total()
	lo, hi := s.Spread()
	out := SeriesReport{
		Name: s.Name, Mode: t.Mode.String(), Conns: t.Conns,
		Rate: s.Rate(), RateMin: lo, RateMax: hi,
		Requests: t.Requests, OK: t.OK, Events: t.Events, RejectedEvents: t.RejectedEvents,
		Statuses: map[string]uint64{}, Errors: t.Errors,
		BytesSent: t.BytesSent, BytesReceived: t.BytesReceived, Dials: t.Dials,
		Latency: t.Latency.Summary(), Service: t.Service.Summary(), Histogram: t.Latency.Buckets(),
	}
	for k, v := range t.Statuses {
		out.Statuses[strconv.Itoa(k)] = v
	}
	for _, c := range t.Classes {
		out.Classes = append(out.Classes, ClassReport{Name: c.Name, Requests: c.Requests, OK: c.OK, Latency: c.Latency.Summary()})
	}
	out.Stream = StreamJSON(t.Stream)
	if t.HasServerCPU {
		out.ServerCores = CPUCores(t.ServerCPU, t.Elapsed)
		if t.OK > 0 {
			out.ServerCPUPerOKUs = float64(t.ServerCPU) / 1e3 / float64(t.OK)
		}
	}
	out.ClientCores = CPUCores(t.ClientCPU, t.Elapsed)
	out.ServerRunqWaitPerS = CPUCores(t.ServerRunqWait, t.Elapsed)
	for _, r := range s.Rounds {
		start := 0.0
		if !origin.IsZero() && !r.Started.IsZero() {
			start = r.Started.Sub(origin).Seconds()
		}
		out.Rounds = append(out.Rounds, RoundReport{
			StartS: start, Rate: s.RoundRate(r), ElapsedS: r.Elapsed.Seconds(),
			Requests: r.Requests, OK: r.OK, Events: r.Events,
			Latency: r.Latency.Summary(), PerSecond: r.PerSecond,
		})
	}
	return out
}

// ScenarioJSON converts a scenario for the results file.
func ScenarioJSON(sc *ScenarioResult, origin time.Time) ScenarioReport {
	out := ScenarioReport{Name: sc.Name, Scenario: sc.Base, Phase: sc.Phase, Description: sc.Description, Targets: sc.Targets, Notes: sc.Notes,
		Memory: sc.Memory, Profiles: sc.Profiles, LoadAvg: sc.Load, StartS: sc.StartS, EndS: sc.EndS}
	if sc.Eventd != nil {
		e := SeriesJSON(sc.Eventd, origin)
		out.Eventd = &e
		out.Unit = sc.Eventd.Unit
	}
	for _, c := range sc.Ceilings {
		out.Ceilings = append(out.Ceilings, CeilingReport{SeriesReport: SeriesJSON(c, origin), Ratio: Ratio(sc.Eventd, c)})
		if out.Unit == "" {
			out.Unit = c.Unit
		}
	}
	for _, o := range sc.Others {
		out.Others = append(out.Others, SeriesJSON(o, origin))
	}
	return out
}

// LoadAvg reads /proc/loadavg; zeros where it cannot.
func LoadAvg() (l [3]float64) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}
