package http

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/eventd/eventd/engine/metrics"
)

// Each (route, code) series is created once and then reused, whatever the
// code; codes outside 100-599 share "other".
func TestRouteMetricsCodes(t *testing.T) {
	s := &Server{metrics: metrics.New()}
	rm := s.routeMetrics("create_event")
	if rm.requests(201) != rm.requests(201) || rm.requests(201) == rm.requests(400) {
		t.Fatal("series not cached per code")
	}
	rm.requests(201).Inc()
	rm.requests(0).Inc()
	rm.requests(999).Inc()
	var b strings.Builder
	if _, err := s.metrics.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`eventd_http_requests_total{code="201",route="create_event"} 1`,
		`eventd_http_requests_total{code="other",route="create_event"} 2`,
		`eventd_http_request_duration_seconds_bucket{route="create_event",le="0.00025"} 0`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing %s in\n%s", want, b.String())
		}
	}
}

// BenchmarkRouteMetrics is what the route wrapper adds to a request: the
// counter of its code and one latency observation.
func BenchmarkRouteMetrics(b *testing.B) {
	s := &Server{metrics: metrics.New()}
	rm := s.routeMetrics("create_event")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rm.requests(201).Inc()
			rm.latency.Observe(0.0012)
		}
	})
}

// BenchmarkAccessLog is the access log's cost per logged request, the
// JSON encoding and a write to a discarding writer (a file adds a write
// system call).
func BenchmarkAccessLog(b *testing.B) {
	a := newAccessLog(io.Discard, 1)
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("POST")
	ctx.Response.Header.Set("X-Request-Id", "req_0123abcd_1")
	ctx.Response.SetStatusCode(201)
	ctx.Response.SetBodyString(`{"id":"evt_0123456789","created_at":"2026-11-24T10:00:00Z"}`)
	ctx.SetUserValue(keyIDValue, "key_FaT78VSLGpeldP49")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a.record(&ctx, "create_event", 1200*time.Microsecond)
	}
}
