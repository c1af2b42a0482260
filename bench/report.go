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

// Total merges every round into one result for the latency columns and the
// error breakdown.
func (s *Series) Total() *Result {
	t := &Result{Statuses: map[int]uint64{}, Errors: map[string]uint64{}}
	for _, r := range s.Rounds {
		t.Mode, t.Conns, t.Rate, t.Expect = r.Mode, r.Conns, r.Rate, r.Expect
		t.Elapsed += r.Elapsed
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
// latency columns being eventd's, then a breakdown of every failure.
func WriteTable(w io.Writer, results []*ScenarioResult) {
	nameW, ceilW := len("scenario"), 0
	for _, sc := range results {
		nameW = max(nameW, len(sc.Name))
		for _, c := range sc.Ceilings {
			ceilW = max(ceilW, len(c.Name)+2)
		}
	}
	// Names are padded by hand: tabwriter aligns every column one way, and
	// numbers read best right-aligned.
	left := func(s string, n int) string { return s + strings.Repeat(" ", max(0, n-len(s))) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\teventd\tceiling\t%s\tratio\tp50\tp99\tp99.9\t\n", left("scenario", nameW), left("", ceilW))
	for _, sc := range results {
		for i, c := range sc.Ceilings {
			name, e, lat := "", "", "\t\t"
			if i == 0 {
				name = sc.Name
				if sc.Eventd != nil {
					t := sc.Eventd.Total()
					e = FormatRate(sc.Eventd.Rate(), sc.Eventd.Unit)
					lat = fmt.Sprintf("%s\t%s\t%s", FormatDuration(t.Latency.Percentile(50)),
						FormatDuration(t.Latency.Percentile(99)), FormatDuration(t.Latency.Percentile(99.9)))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%s\t\n", left(name, nameW), e,
				FormatRate(c.Rate(), c.Unit), left("("+c.Name+")", ceilW), Ratio(sc.Eventd, c), lat)
		}
	}
	tw.Flush()
	for _, sc := range results {
		for _, s := range append([]*Series{sc.Eventd}, sc.Ceilings...) {
			if s == nil {
				continue
			}
			if b := Breakdown(s.Total()); b != "" {
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
	for _, code := range slices.Sorted(maps.Keys(r.Statuses)) {
		if r.Statuses[code] > 0 && code != r.Expect {
			parts = append(parts, fmt.Sprintf("%d×%d", r.Statuses[code], code))
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
	GoVersion string `json:"go_version"`
}

// ThisMachine describes the machine the bench runs on.
func ThisMachine() Machine {
	h, _ := os.Hostname()
	m := Machine{Hostname: h, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
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
}

// ScenarioReport is one scenario in the JSON file.
type ScenarioReport struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Unit        string          `json:"unit"`
	Eventd      *SeriesReport   `json:"eventd,omitempty"`
	Ceilings    []CeilingReport `json:"ceilings"`
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
	Rounds         []RoundReport     `json:"rounds"`
}

// RoundReport is one round of a series.
type RoundReport struct {
	Rate      float64        `json:"rate"`
	ElapsedS  float64        `json:"elapsed_s"`
	Requests  uint64         `json:"requests"`
	OK        uint64         `json:"ok"`
	Events    uint64         `json:"events"`
	Latency   LatencySummary `json:"latency"`
	PerSecond []Sample       `json:"per_second"`
}

// SeriesJSON converts a series for the results file.
func SeriesJSON(s *Series) SeriesReport {
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
	for _, r := range s.Rounds {
		out.Rounds = append(out.Rounds, RoundReport{
			Rate: s.RoundRate(r), ElapsedS: r.Elapsed.Seconds(),
			Requests: r.Requests, OK: r.OK, Events: r.Events,
			Latency: r.Latency.Summary(), PerSecond: r.PerSecond,
		})
	}
	return out
}

// ScenarioJSON converts a scenario for the results file.
func ScenarioJSON(sc *ScenarioResult) ScenarioReport {
	out := ScenarioReport{Name: sc.Name, Description: sc.Description}
	if sc.Eventd != nil {
		e := SeriesJSON(sc.Eventd)
		out.Eventd = &e
		out.Unit = sc.Eventd.Unit
	}
	for _, c := range sc.Ceilings {
		out.Ceilings = append(out.Ceilings, CeilingReport{SeriesReport: SeriesJSON(c), Ratio: Ratio(sc.Eventd, c)})
		if out.Unit == "" {
			out.Unit = c.Unit
		}
	}
	return out
}
