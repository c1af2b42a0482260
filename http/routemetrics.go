package http

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/eventd/eventd/engine/metrics"
)

// routeMetrics are one route's request counters and latency histogram. The
// counters are labelled with the full status code, per the Prometheus
// guide; each (route, code) series is resolved once, on the first response
// with that code, and then read with one atomic load, so a request pays no
// label lookup and no lock.
type routeMetrics struct {
	reg     *metrics.Registry
	route   string
	latency *metrics.Histogram

	mu    sync.Mutex                           // serialises creating a code's counter
	codes [600]atomic.Pointer[metrics.Counter] // by status code; [0] for anything outside 100-599
}

func (s *Server) routeMetrics(name string) *routeMetrics {
	return &routeMetrics{
		reg:   s.metrics,
		route: name,
		latency: s.metrics.Histogram("eventd_http_request_duration_seconds",
			"HTTP request latency by route, from routing to the handler's return (the body is written after).",
			`route="`+name+`"`, metrics.LatencyBuckets),
	}
}

// requests is the counter of responses with status code.
func (rm *routeMetrics) requests(code int) *metrics.Counter {
	i := code
	if i < 100 || i >= len(rm.codes) {
		i = 0
	}
	if c := rm.codes[i].Load(); c != nil {
		return c
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if c := rm.codes[i].Load(); c != nil {
		return c
	}
	label := "other"
	if i != 0 {
		label = strconv.Itoa(i)
	}
	c := rm.reg.Counter("eventd_http_requests_total", "HTTP requests by route and status code.",
		`route="`+rm.route+`",code="`+label+`"`)
	rm.codes[i].Store(c)
	return c
}
