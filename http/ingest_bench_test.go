package http

import (
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/eventd/eventd/bench"
	"github.com/eventd/eventd/engine"
	"github.com/eventd/eventd/engine/enrich"
	"github.com/eventd/eventd/engine/ratelimit"
)

// BenchmarkIngestBatch is the bench's segment scenario in one process:
// batches of 100 events as the native API takes them, with idempotency
// keys, as the Segment messages are stored (segment-shaped), and as
// Segment messages (with analytics-node's messageIds and with UUIDs),
// through the whole server on an in-memory filesystem.
// Without disks, other processes and the store's history in the way, the
// difference between its subjects is what the Segment layer costs per
// event (ns/event, allocs/op per batch):
//
//	go test -run '^$' -bench IngestBatch -benchmem -cpu 2 ./http/
func BenchmarkIngestBatch(b *testing.B) {
	const n = 100
	subjects := []struct {
		name   string
		status int
		req    func(key string) bench.RequestFunc
	}{
		{"native", fasthttp.StatusCreated, func(key string) bench.RequestFunc {
			return bench.BatchRequest("/events/batch", key, bench.NewTemplate(bench.EventTemplate), n)
		}},
		{"native+idem", fasthttp.StatusCreated, func(key string) bench.RequestFunc {
			return bench.BatchRequest("/events/batch", key, bench.NewTemplate(bench.IdempotentEventTemplate), n)
		}},
		{"segment-shaped", fasthttp.StatusCreated, func(key string) bench.RequestFunc {
			return bench.BatchRequest("/events/batch", key, bench.NewTemplate(bench.SegmentShapedTemplate), n)
		}},
		{"segment", fasthttp.StatusOK, func(key string) bench.RequestFunc {
			return bench.SegmentBatchRequest("/v1/batch", key, bench.NewTemplate(bench.SegmentTemplate), n)
		}},
		{"segment-uuid", fasthttp.StatusOK, func(key string) bench.RequestFunc {
			return bench.SegmentBatchRequest("/v1/batch", key, bench.NewTemplate(bench.SegmentUUIDTemplate), n)
		}},
	}
	for _, sub := range subjects {
		b.Run(sub.name, func(b *testing.B) {
			c, key, _ := benchServer(b, engine.Secret, nil)
			fill := sub.req(key)
			var seq atomic.Uint64
			// 16 connections with -cpu 2, as the segment scenario.
			benchParallel(b, 8, func(pb *testing.PB, req *fasthttp.Request, resp *fasthttp.Response) {
				for pb.Next() {
					req.Reset()
					fill(seq.Add(1), req)
					req.SetHost("eventd")
					if !benchDo(b, c, req, resp, sub.status) {
						return
					}
				}
			})
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}

// benchServer starts eventd's public listener on a store in a temporary
// directory and an in-memory listener, with the enricher en (nil: none)
// and a key of kind whose project's limits are above any load; it stops
// with the benchmark.
func benchServer(b *testing.B, kind string, en *enrich.Enricher) (*fasthttp.HostClient, string, *engine.Engine) {
	b.Helper()
	eng, key := unlimitedKey(b, kind)
	ln := fasthttputil.NewInmemoryListener()
	return servePublic(b, New(Config{Engine: eng, AdminToken: "t", Enricher: en}), ln, ln), key, eng
}

// servePublic serves s's public listener on accept until tb ends and
// returns a client that dials ln, the in-memory listener accept takes
// its connections from.
func servePublic(tb testing.TB, s *Server, ln *fasthttputil.InmemoryListener, accept net.Listener) *fasthttp.HostClient {
	go func() { _ = s.ServePublic(accept) }()
	tb.Cleanup(func() { _ = s.Shutdown() })
	return &fasthttp.HostClient{Addr: "eventd", Dial: func(string) (net.Conn, error) { return ln.Dial() },
		MaxConns: 1024, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
}

// unlimitedKey opens an engine on a store in a temporary directory, closed
// with tb, and makes a key of kind whose project's limits are above any
// load. On disk and with serve's shards, as eventd runs: Pebble's
// in-memory filesystem grows each file by copying it, which was 36% of a
// Segment batch's CPU and made every byte written look dearer than it is
// (docs/benchmarks.md, session 36).
func unlimitedKey(tb testing.TB, kind string) (*engine.Engine, string) {
	tb.Helper()
	eng, err := engine.Open(engine.Config{DataDir: tb.TempDir(), Shards: engine.DefaultShards(runtime.GOMAXPROCS(0))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = eng.Close() })
	name := "bench"
	lim := ratelimit.Limits{Minute: 1 << 40, Hour: 1 << 40, Day: 1 << 40}
	proj, err := eng.CreateProject(engine.ProjectInput{Name: &name, Limits: &lim})
	if err != nil {
		tb.Fatal(err)
	}
	key, err := eng.CreateKey(proj.ID, engine.KeyInput{Name: "bench", Type: kind, Environment: engine.Live})
	if err != nil {
		tb.Fatal(err)
	}
	return eng, key.Key
}

// benchDo sends req and checks the answer's status; false, with the
// benchmark failed, if either went wrong.
func benchDo(b *testing.B, c *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response, status int) bool {
	if err := c.Do(req, resp); err != nil {
		b.Error(err)
		return false
	}
	if resp.StatusCode() != status {
		b.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
		return false
	}
	return true
}

// benchParallel runs fn on parallelism goroutines per CPU, each with a
// request and a response of its own, and stops the timer after them.
func benchParallel(b *testing.B, parallelism int, fn func(pb *testing.PB, req *fasthttp.Request, resp *fasthttp.Response)) {
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		fn(pb, req, resp)
	})
	b.StopTimer()
}
