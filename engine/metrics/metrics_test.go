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

func TestSameSeriesReturned(t *testing.T) {
	r := New()
	if r.Counter("a", "h", "") != r.Counter("a", "h", "") {
		t.Fatal("Counter returned a new series for the same name and labels")
	}
}

func TestRegisterProcess(t *testing.T) {
	r := New()
	r.RegisterProcess()
	var sb strings.Builder
	if _, err := r.WriteTo(&sb); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"process_resident_memory_bytes ", "go_heap_objects_bytes ", "go_goroutines "} {
		i := strings.Index(sb.String(), "\n"+name)
		if i < 0 {
			t.Fatalf("%q missing:\n%s", name, sb.String())
		}
		if v := strings.Fields(sb.String()[i+1:])[1]; v == "0" {
			t.Fatalf("%s is 0", name)
		}
	}
}
