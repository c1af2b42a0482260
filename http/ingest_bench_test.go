package http

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/eventd/eventd/bench"
	"github.com/eventd/eventd/engine"
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
			c, key := benchServer(b)
			fill := sub.req(key)
			var seq atomic.Uint64
			b.SetParallelism(8) // 16 connections with -cpu 2, as the segment scenario
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				defer fasthttp.ReleaseRequest(req)
				defer fasthttp.ReleaseResponse(resp)
				for pb.Next() {
					req.Reset()
					fill(seq.Add(1), req)
					req.SetHost("eventd")
					if err := c.Do(req, resp); err != nil {
						b.Error(err)
						return
					}
					if resp.StatusCode() != sub.status {
						b.Errorf("status %d: %s", resp.StatusCode(), resp.Body())
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}

// benchServer starts eventd's public listener on an in-memory store and
// listener, with a secret key whose project's limits are above any load.
func benchServer(b *testing.B) (*fasthttp.HostClient, string) {
	b.Helper()
	eng, err := engine.Open(engine.Config{DataDir: "/bench", FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close() })
	name := "bench"
	lim := ratelimit.Limits{Minute: 1 << 40, Hour: 1 << 40, Day: 1 << 40}
	proj, err := eng.CreateProject(engine.ProjectInput{Name: &name, Limits: &lim})
	if err != nil {
		b.Fatal(err)
	}
	key, err := eng.CreateKey(proj.ID, engine.KeyInput{Name: "bench", Type: engine.Secret, Environment: engine.Live})
	if err != nil {
		b.Fatal(err)
	}
	s := New(Config{Engine: eng, AdminToken: "t"})
	ln := fasthttputil.NewInmemoryListener()
	go func() { _ = s.ServePublic(ln) }()
	b.Cleanup(func() { _ = s.Shutdown() })
	return &fasthttp.HostClient{Addr: "eventd", Dial: func(string) (net.Conn, error) { return ln.Dial() },
		MaxConns: 1024, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}, key.Key
}
