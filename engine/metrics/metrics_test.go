package metrics

import (
	"strings"
	"testing"
)

func TestWriteTo(t *testing.T) {
	r := New()
	r.Counter("eventd_requests_total", "Requests served.", `code="201"`).Add(3)
	r.Counter("eventd_requests_total", "Requests served.", `code="400"`).Inc()
	r.Gauge("eventd_inflight", "Requests in flight.", "").Set(2)
	r.GaugeFunc("eventd_up", "Always 1.", "", func() float64 { return 1 })
	r.CounterFunc("eventd_refused_total", "Refused elsewhere.", func() float64 { return 7 })
	h := r.Histogram("eventd_latency_seconds", "Latency.", `route="x"`, []float64{0.1, 1})
	h.Observe(0.05)
	h.Observe(0.5)
	h.Observe(5)
	var sb strings.Builder
	if _, err := r.WriteTo(&sb); err != nil {
		t.Fatal(err)
	}
	want := `# HELP eventd_inflight Requests in flight.
# TYPE eventd_inflight gauge
eventd_inflight 2
# HELP eventd_latency_seconds Latency.
# TYPE eventd_latency_seconds histogram
eventd_latency_seconds_bucket{route="x",le="0.1"} 1
eventd_latency_seconds_bucket{route="x",le="1"} 2
eventd_latency_seconds_bucket{route="x",le="+Inf"} 3
eventd_latency_seconds_sum{route="x"} 5.55
eventd_latency_seconds_count{route="x"} 3
# HELP eventd_refused_total Refused elsewhere.
# TYPE eventd_refused_total counter
eventd_refused_total 7
# HELP eventd_requests_total Requests served.
# TYPE eventd_requests_total counter
eventd_requests_total{code="201"} 3
eventd_requests_total{code="400"} 1
# HELP eventd_up Always 1.
# TYPE eventd_up gauge
eventd_up 1
`
	if got := sb.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// A backslash or newline in HELP, or a quote in a label value, must be
// escaped, or Prometheus's parser rejects the whole scrape.
func TestEscaping(t *testing.T) {
	r := New()
	r.Counter("eventd_x_total", `A \ and a`+"\nnewline.", `path="a\"b"`).Inc()
	var sb strings.Builder
	if _, err := r.WriteTo(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`# HELP eventd_x_total A \\ and a\nnewline.`, `eventd_x_total{path="a\"b"} 1`} {
		if !strings.Contains(sb.String(), want+"\n") {
			t.Errorf("missing %q in\n%s", want, sb.String())
		}
	}
}

func TestSameSeriesReturned(t *testing.T) {
	r := New()
	if r.Counter("a", "h", "") != r.Counter("a", "h", "") {
		t.Fatal("Counter returned a new series for the same name and labels")
	}
	if r.Counter("b", "h", `x="1"`) == r.Counter("b", "h", `x="2"`) {
		t.Fatal("Counter returned one series for two label values")
	}
}

func TestMismatchPanics(t *testing.T) {
	for name, f := range map[string]func(r *Registry){
		"type":   func(r *Registry) { r.Gauge("a", "h", "") },
		"labels": func(r *Registry) { r.Counter("a", "h", `y="1"`) },
		"syntax": func(r *Registry) { r.Counter("b", "h", `y=1`) },
	} {
		t.Run(name, func(t *testing.T) {
			r := New()
			r.Counter("a", "h", "")
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f(r)
		})
	}
}

func TestParseLabels(t *testing.T) {
	names, values, err := parseLabels(`route="create_event",code="201",q="a,b=\"c\""`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "route code q" || strings.Join(values, " ") != `create_event 201 a,b="c"` {
		t.Fatalf("names %q values %q", names, values)
	}
}

func TestRegisterProcess(t *testing.T) {
	r := New()
	r.RegisterProcess()
	var sb strings.Builder
	if _, err := r.WriteTo(&sb); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"process_resident_memory_bytes ", "go_memstats_heap_alloc_bytes ", "go_goroutines ", "go_gc_duration_seconds_count "} {
		i := strings.Index(sb.String(), "\n"+name)
		if i < 0 {
			t.Fatalf("%q missing:\n%s", name, sb.String())
		}
		if v := strings.Fields(sb.String()[i+1:])[1]; v == "0" && name != "go_gc_duration_seconds_count " {
			t.Fatalf("%s is 0", name)
		}
	}
	if !strings.Contains(sb.String(), "\neventd_build_info{goversion=\"go") {
		t.Fatalf("eventd_build_info missing:\n%s", sb.String())
	}
}
